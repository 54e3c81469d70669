"""tests/nbtolerance.py, the nbval plugin that compares the numbers of cells tagged
``stochastic`` within their tolerance: the parsing and the comparison on analytic cases, then
nbval itself on a small notebook whose stored outputs were written by hand (numbers inside
and outside the tolerance, a changed word, an untagged cell with a changed digit)."""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell

import nbtolerance as nbt

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- parsing and comparison

def test_split_numbers_keeps_words_and_finds_signed_decimals():
    skeleton, numbers = nbt.split_numbers("P1 seed0 loss=-0.0533, 1.2e-05 and 300 steps (2.13.0)")
    assert numbers == ["-0.0533", "1.2e-05", "300", "2.13"]
    assert skeleton == "P1 seed0 loss=\0, \0 and \0 steps (\0.0)"


def test_split_numbers_ignores_column_alignment_but_not_line_breaks():
    ref = "none       0.5103\nalibi      0.0989"
    new = "none      -0.5103\nalibi     10.0989"
    assert nbt.split_numbers(ref)[0] == nbt.split_numbers(new)[0]
    assert nbt.split_numbers("a 1\nb 2")[0] != nbt.split_numbers("a 1 b 2")[0]


@pytest.mark.parametrize(
    ("ref", "new", "tolerance", "agree"),
    [
        ("accuracy 0.5103", "accuracy 0.4946", nbt.Tolerance(atol=0.02), True),  # |d| = 0.0157
        ("accuracy 0.5103", "accuracy 0.4946", nbt.Tolerance(atol=0.01), False),
        ("accuracy 0.52", "accuracy 0.51", nbt.Tolerance(atol=0.01), True),  # exactly atol, as displayed
        ("loss 2.000", "loss 2.100", nbt.Tolerance(rtol=0.05), True),  # 0.1 <= 0.05 * 2
        ("loss 2.000", "loss 2.101", nbt.Tolerance(rtol=0.05), False),
        ("loss 0.5", "loss 0.5", nbt.Tolerance(), True),
        ("loss 0.5", "gain 0.5", nbt.Tolerance(atol=1.0), False),  # a changed word
        ("at chance True", "at chance False", nbt.Tolerance(atol=1.0), False),
        ("0.1 0.2", "0.1 0.2 0.3", nbt.Tolerance(atol=1.0), False),  # a number too many
        ("value NaN", "value 0.0", nbt.Tolerance(atol=1.0), False),  # NaN is text
        ("P1 says 3", "P2 says 3", nbt.Tolerance(atol=5.0), False),  # P1 is a word, not a number
    ],
)
def test_compare_text(ref, new, tolerance, agree):
    found = nbt.Difference()
    assert nbt.compare_text(ref, new, tolerance, "here", found) is agree
    assert (found.failure is None) is agree


def test_failure_message_names_the_number_both_values_and_the_tolerance():
    found = nbt.Difference()
    ref = "first marker\nnone  0.5103  True\nrope  1.0000  False"
    new = "first marker\nnone  0.4946  True\nrope  1.0000  False"
    assert not nbt.compare_text(ref, new, nbt.Tolerance(atol=0.01), "book/x.ipynb::Cell 9", found)
    assert found.failure.startswith("book/x.ipynb::Cell 9: number 1 of 2, in the line 'none  0.5103  True'")
    assert "reference 0.5103, new 0.4946, |difference| 0.0157 > tolerance 0.01 (atol=0.01)" in found.failure
    assert found.compared == 1 and found.differing == 1


def test_word_change_message_shows_the_line():
    found = nbt.Difference()
    assert not nbt.compare_text("a 1\nat chance True 0.5", "a 1\nat chance False 0.5", nbt.Tolerance(atol=1), "c", found)
    assert "line 2 differs" in found.failure and "'at chance True #'" in found.failure


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [({"atol": 0.02, "rtol": 0}, nbt.Tolerance(0.02, 0.0)), ({"rtol": 0.1}, nbt.Tolerance(0.0, 0.1))],
)
def test_parse_tolerance(metadata, expected):
    assert nbt.parse_tolerance(metadata) == expected


@pytest.mark.parametrize("metadata", [{}, 0.02, {"atol": -1}, {"atol": "0.1"}, {"atol": True}, {"tol": 0.1}, {"atol": float("nan")}])
def test_parse_tolerance_rejects(metadata):
    with pytest.raises(ValueError, match="tolerance"):
        nbt.parse_tolerance(metadata)


def test_relies_on_the_pinned_nbval():
    """The plugin overrides ``IPyNbCell.compare_outputs(test, ref, skip_compare=None)`` and
    reads ``cell``, ``nodeid``, ``sanitize`` and ``comparison_traceback``: nbval 0.11's."""
    extras = tomllib.loads((ROOT / "companion" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [spec for spec in extras["test"] if spec.startswith("nbval")]
    assert pins == ["nbval==0.11.0"], pins
    assert version("nbval") == "0.11.0"
    assert list(inspect.signature(IPyNbCell.compare_outputs).parameters) == ["self", "test", "ref", "skip_compare"]
    assert "self.compare_outputs(outs, coalesce_streams(self.cell.outputs))" in inspect.getsource(IPyNbCell.runtest)
    assert "self.comparison_traceback" in inspect.getsource(IPyNbCell.runtest)


# ---------------------------------------------------------------- nbval on a notebook

def stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def result(text, count):
    return nbformat.v4.new_output("execute_result", data={"text/plain": text}, execution_count=count)


VEGALITE = "application/vnd.vegalite.v5+json"
CHART_SOURCE = (
    "from IPython.display import display\n"
    f"display({{{VEGALITE!r}: {{'mark': 'point', 'data': {{'values': [{{'x': 0.5103}}]}}}}, "
    "'image/svg+xml': '<svg>here</svg>', 'text/plain': 'Chart: one point'}, raw=True)"
)


def chart(x, mark="point", svg="<svg>here</svg>"):
    spec = {"mark": mark, "data": {"values": [{"x": x}]}}
    return nbformat.v4.new_output("display_data", data={VEGALITE: spec, "image/svg+xml": svg, "text/plain": "Chart: one point"})


HASHED_SOURCE = (
    "from IPython.display import display\n"
    f"display({{{VEGALITE!r}: {{'mark': 'point', 'data': {{'name': 'data-{'a' * 32}'}}, "
    f"'datasets': {{'data-{'a' * 32}': [{{'x': 0.5103}}]}}}}, 'text/plain': 'Chart: one point'}}, raw=True)"
)


TWO_SETS_SOURCE = (
    "from IPython.display import display\n"
    f"display({{{VEGALITE!r}: {{'layer': [{{'mark': 'line', 'data': {{'name': 'data-{'1' * 32}'}}}}, "
    f"{{'mark': 'rule', 'data': {{'name': 'data-{'2' * 32}'}}}}], "
    f"'datasets': {{'data-{'1' * 32}': [{{'x': 0.5103}}], 'data-{'2' * 32}': [{{'x': 0.2}}]}}}}, "
    "'text/plain': 'Chart: two layers'}, raw=True)"
)


def two_sets_chart(x):
    # the first layer's data set now hashes to a name sorted after the second's
    first, second = "f" * 32, "0" * 32
    spec = {"layer": [{"mark": "line", "data": {"name": f"data-{first}"}}, {"mark": "rule", "data": {"name": f"data-{second}"}}],
            "datasets": {f"data-{first}": [{"x": x}], f"data-{second}": [{"x": 0.2}]}}
    return nbformat.v4.new_output("display_data", data={VEGALITE: spec, "text/plain": "Chart: two layers"})


def hashed_chart(x, digest):
    spec = {"mark": "point", "data": {"name": f"data-{digest}"}, "datasets": {f"data-{digest}": [{"x": x}]}}
    return nbformat.v4.new_output("display_data", data={VEGALITE: spec, "text/plain": "Chart: one point"})


STOCHASTIC = {"tags": ["stochastic"], "tolerance": {"atol": 0.02, "rtol": 0}}
# (name, source, stored outputs, metadata, expected outcome)
CELLS = [
    ("within", 'print("accuracy", 0.5103)', [stream("accuracy 0.4946\n")], STOCHASTIC, "PASSED"),
    ("outside", 'print("accuracy", 0.5103)', [stream("accuracy 0.5403\n")], STOCHASTIC, "FAILED"),
    ("word", 'print("accuracy", 0.5103)', [stream("precision 0.5103\n")], STOCHASTIC, "FAILED"),
    ("untagged digit", 'print("accuracy", 0.5103)', [stream("accuracy 0.5104\n")], {}, "FAILED"),
    ("untagged equal", 'print("accuracy", 0.5103)', [stream("accuracy 0.5103\n")], {}, "PASSED"),
    ("table", 'print(f"loss\\na {0.0989:7.4f}\\nb {0.0100:7.4f}")',
     [stream("loss\na  0.1000\nb -0.0050\n")], STOCHASTIC, "PASSED"),  # column widths differ
    ("tagged equal", "0.25", [result("0.25", 7)], STOCHASTIC, "PASSED"),
    ("tagged missing output", "x = 1", [stream("accuracy 0.5103\n")], STOCHASTIC, "FAILED"),
    # Charts: the Vega-Lite spec is compared (numbers within a tagged cell's tolerance), the SVG never.
    ("chart within", CHART_SOURCE, [chart(0.4946)], STOCHASTIC, "PASSED"),
    ("chart outside", CHART_SOURCE, [chart(0.5403)], STOCHASTIC, "FAILED"),
    ("chart mark changed", CHART_SOURCE, [chart(0.5103, mark="line")], STOCHASTIC, "FAILED"),
    ("chart untagged", CHART_SOURCE, [chart(0.5104)], {}, "FAILED"),
    ("chart other svg", CHART_SOURCE, [chart(0.5103, svg="<svg>drawn elsewhere</svg>")], {}, "PASSED"),
    # Altair's data-set names hash the values: within tolerance they may differ; untagged they may not.
    ("chart hashed name", HASHED_SOURCE, [hashed_chart(0.4946, "8d" + "0" * 30)], STOCHASTIC, "PASSED"),
    ("chart hashed name untagged", HASHED_SOURCE, [hashed_chart(0.5103, "8d" + "0" * 30)], {}, "FAILED"),
    # ... and their renaming can reorder the sorted data sets: they are matched by use, not by name
    ("chart data sets reordered", TWO_SETS_SOURCE, [two_sets_chart(0.4946)], STOCHASTIC, "PASSED"),
    ("chart data sets reordered outside", TWO_SETS_SOURCE, [two_sets_chart(0.6)], STOCHASTIC, "FAILED"),
]


def write_notebook(path: Path, cells=CELLS) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for count, (_, source, outputs, metadata, _) in enumerate(cells, start=1):
        cell = nbformat.v4.new_code_cell(source, outputs=outputs, execution_count=count)
        cell.metadata.update(metadata)
        nb.cells.append(cell)
    nbformat.write(nb, str(path))


def outcomes(result) -> dict[int, str]:
    found = {}
    for line in result.outlines:
        match = re.match(r".*::Cell (\d+) (PASSED|FAILED)", line)
        if match:
            found[int(match[1])] = match[2]
    return found


def run_nbval(pytester, *args):
    return pytester.runpytest_subprocess(
        "-p", "nbtolerance", "--nbval", "--nbval-current-env", "-v", "-p", "no:cacheprovider", *args
    )


@pytest.fixture
def nbval_dir(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    return pytester


def test_nbval_with_tolerance(nbval_dir):
    write_notebook(nbval_dir.path / "cells.ipynb")
    result = run_nbval(nbval_dir, "cells.ipynb")
    assert outcomes(result) == {i: cell[-1] for i, cell in enumerate(CELLS)}, result.stdout.str()
    out = result.stdout.str()
    # The failure names the cell, the number, both values and the tolerance.
    assert ("cells.ipynb::Cell 1 (tagged 'stochastic', atol=0.02), output 'stdout' #1: number 1 of 1, in the line "
            "'accuracy 0.5403': reference 0.5403, new 0.5103, |difference| 0.03 > tolerance 0.02 (atol=0.02)") in out
    assert "the text around the numbers differs" in out and "'precision #'" in out
    # The untagged cell is nbval's own exact comparison.
    assert "accuracy 0.5104" in out and "accuracy 0.5103" in out
    assert "cells.ipynb::Cell 0: 1/1 numbers differ, largest 78% of the tolerance (0.4946 -> 0.5103); atol=0.02: ok" in out
    assert "cells.ipynb::Cell 6: 0/1 numbers differ; atol=0.02: ok" in out
    # The time per notebook: every cell counted once, the slowest one named.
    assert re.search(rf"\n +[0-9.]+ s  cells\.ipynb \({len(CELLS)} cells; slowest Cell \d+: [0-9.]+ s\)", out), out


def test_require_difference(nbval_dir):
    cells = [CELLS[0], CELLS[6]]
    write_notebook(nbval_dir.path / "cells.ipynb", cells)
    differed = run_nbval(nbval_dir, "cells.ipynb", "--nbtolerance-require-difference")
    assert differed.ret == 0, differed.stdout.str()
    write_notebook(nbval_dir.path / "cells.ipynb", [CELLS[6]])
    equal = run_nbval(nbval_dir, "cells.ipynb", "--nbtolerance-require-difference")
    assert equal.ret == 1
    equal.stdout.fnmatch_lines(["*no cell tagged 'stochastic' differed from its reference*FAILED*", "*1 passed*"])


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"tags": ["stochastic"]}, "is tagged 'stochastic' but has no 'tolerance' metadata"),
        ({"tolerance": {"atol": 0.1}}, "has a 'tolerance' but not the tag 'stochastic'"),
        ({"tags": ["stochastic"], "tolerance": {"atol": -0.1}}, "tolerance.atol must be a finite number >= 0"),
    ],
)
def test_misconfigured_cell_is_a_usage_error(nbval_dir, metadata, message):
    write_notebook(nbval_dir.path / "cells.ipynb", [("bad", "1", [result("1", 1)], metadata, "")])
    # Collection stops before any kernel starts, so this one runs in process.
    bad = nbval_dir.runpytest_inprocess("-p", "nbtolerance", "--nbval", "--nbval-current-env", "cells.ipynb")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert f"cells.ipynb::Cell 0: {message}" in bad.stderr.str()


# ---------------------------------------------------------------- the book's tagged cells

def book_tagged_cells():
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        for number, cell in enumerate(code):
            if nbt.TAG in (cell.metadata.get("tags") or []) or nbt.METADATA_KEY in cell.metadata:
                yield f"{path.name}::Cell {number}", cell


def test_book_tagged_cells_have_a_tolerance_and_say_why():
    """Every cell of the book tagged 'stochastic' has a valid tolerance and says why it is what it
    is, out of the reader's view: in its ``tolerance_reason`` metadata (a sentence: the spread
    over seeds, or the largest difference between kernel paths), not in a visible comment."""
    cells = dict(book_tagged_cells())
    for where, cell in cells.items():
        assert nbt.TAG in cell.metadata.get("tags", []), f"{where}: a tolerance without the tag"
        nbt.parse_tolerance(cell.metadata.get(nbt.METADATA_KEY))
        reason = cell.metadata.get(nbt.REASON_KEY)
        assert isinstance(reason, str) and len(reason.split()) >= 5, (
            f"{where}: no {nbt.REASON_KEY!r} metadata says why its tolerance is what it is")
        comments = [line for line in cell.source.splitlines() if "#" in line and re.search(r"toleran", line.split("#", 1)[1])]
        assert not comments, f"{where}: a visible comment speaks of the tolerance (move it into {nbt.REASON_KEY!r}): {comments}"
