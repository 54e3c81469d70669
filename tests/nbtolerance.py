"""nbval with a numeric tolerance for the outputs of training: the ``stochastic`` cell tag.

Strict nbval (``pytest --nbval``) re-executes a notebook and requires every output to equal
the stored one, character for character. Training cannot meet that across machines: it
amplifies the rounding differences between CPU kernel paths (AVX2 or AVX-512 ATen kernels,
MKL and oneDNN code paths), so the same seed gives a slightly different model, loss and
accuracy on another CPU. This pytest plugin keeps nbval as the runner and changes one thing:
in the cells tagged ``stochastic``, numbers are compared within the cell's tolerance.

The convention (for chapter authors)
------------------------------------
Tag a code cell ``stochastic`` and give it a ``tolerance`` in its metadata, in the jupytext
percent header of ``book/NN_name.py`` (jupytext carries both to the ``.ipynb``)::

    # %% tags=["stochastic"] tolerance={"atol": 0.05, "rtol": 0} tolerance_reason="an accuracy at chance is a Bin(N, 1/2)/N draw; two such draws differ by up to 0.047 (3 sd); other CPU kernel paths moved the others by 0.015"
    table = order_task_table(runs)
    table.round(2)

- ``tags``: ``"stochastic"`` (it can sit beside other tags, e.g. ``["hide-input",
  "stochastic"]``);
- ``tolerance``: a JSON object with ``atol`` and/or ``rtol`` (non-negative numbers, missing
  ones are 0). Two numbers agree when ``|new - ref| <= atol + rtol * |ref|``. The tolerance
  applies to every number the cell displays, as displayed (so it must cover the rounding of
  the display too); use ``rtol`` where the cell's numbers span orders of magnitude.

Tag only cells whose displayed numbers come from training (or from anything computed from a
trained model), or are themselves rounding errors (float32 digits, an equivariance error of
1e-15): the cells that differ when the chapter runs under another kernel path. Find them by
running the chapter that way (``ATEN_CPU_CAPABILITY=default make test-nb CHAPTERS=...``, and
``MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41``): strict nbval names them. Justify
each tolerance out of the reader's view, in the cell's ``tolerance_reason`` metadata
(``tests/test_nbtolerance.py`` requires it, and no visible comment about the tolerance): by the spread
of that quantity over seeds or random draws where the chapter gives it, else as at least
twice the largest difference measured between kernel paths (``make test-kernels
KERNEL_CHAPTERS=...`` runs chapters under two other paths; the plugin's summary prints each
tagged cell's largest difference as a share of its tolerance). Show trained numbers to the
precision the tolerance resolves (``.round(2)`` on the displayed table for an ``atol`` of
0.05): the reader should not see digits that another machine changes.

How a tagged cell is compared
-----------------------------
nbval's own comparison still runs on every cell; for a tagged cell this plugin first compares
each text output (stream text and the ``text/*`` representations of display data, e.g. a
DataFrame's ``text/plain`` and ``text/html``) with its reference:

1. both texts are split into a *skeleton*, the text with every number replaced by a
   placeholder, and the list of numbers. A number is a decimal literal (``12``, ``-0.5103``,
   ``3.2e-05``) not glued to a word on its left, so ``P1``, ``seed0`` or ``layer_2`` stay
   text. Runs of spaces and tabs count as one space in the skeleton, because table columns
   are aligned to the width of their numbers (``0.0989`` and ``-0.1003``); line breaks and
   everything else must match exactly. ``NaN`` and ``inf`` are text, so they must match too;
2. the skeletons must be equal (a changed word, a flipped ``True``/``False``, a missing row
   fails), and so must the number of numbers;
3. each pair of numbers must agree within the tolerance.

Charts are compared as their Vega-Lite spec, the ``application/vnd.vegalite.v5+json`` output
posgeo's renderer stores (data, encodings, titles): exactly in an untagged cell, and in a
tagged one as text like the others (the spec serialised as JSON, so its numbers fall under the
tolerance and everything else must match). Their static SVG fallback (``image/svg+xml``,
drawn from that same spec by vl-convert) is not compared, in any cell, as nbval already skips
PNG images: its text layout depends on the fonts of the machine, and the spec it is drawn
from is compared. In a tagged cell, the names Altair gives a chart's data sets (``data-`` and
the MD5 of the values) are not compared either: they change with any digit of the values,
which the tolerance compares.

If all of that holds, the new text counts as equal to the reference and nbval goes on with
its exact comparison of everything else (which outputs exist, how many, non-text data);
otherwise the cell fails with a message naming the notebook, the cell, the number (its
position and the line it stands in), both values, their difference and the tolerance. Cells
without the tag are compared exactly as strict nbval compares them: this plugin does not
touch them. A tag without a valid tolerance (or a tolerance without the tag) is a usage
error that stops the run.

After the run the plugin prints, for every tagged cell it compared, how many of its numbers
differed from the reference and the largest difference as a share of the tolerance; with
``--nbtolerance-require-difference`` the run fails unless at least one tagged cell differed
(used by ``make test-kernels`` to show that the other kernel path was really taken).

Use::

    pytest -p nbtolerance --nbval --nbval-current-env book/*.ipynb

(``tests/`` is on pytest's ``pythonpath`` through ``pytest.ini``). It relies on nbval's
``IPyNbCell.compare_outputs`` (nbval 0.11, pinned in ``companion/pyproject.toml``);
``tests/test_nbtolerance.py`` checks it against the installed nbval.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from typing import Any

import pytest
from nbval.plugin import IPyNbCell

TAG = "stochastic"
SVG = "image/svg+xml"
# Altair names a chart's data set "data-" + the MD5 of its values: in a tagged cell the values
# are compared within the tolerance, so the name derived from them is not compared.
DATASET = re.compile(r"\bdata-[0-9a-f]{32}\b")
DATASET_NAME = "data-(hash of the values)"
METADATA_KEY = "tolerance"
REASON_KEY = "tolerance_reason"  # why the tolerance is what it is: metadata, out of the reader's view

# A decimal literal, optionally signed, not glued to a word (or a number) on its left.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
HSPACE = re.compile(r"[ \t]+")
PLACEHOLDER = "\x00"  # NUL: never in a notebook's text output
SLACK = 1e-9  # parsing "0.52" - "0.51" gives 0.010000000000000009
TAGGED = pytest.StashKey[list]()  # the ToleranceCell items of this run
UNMET = pytest.StashKey[bool]()  # --nbtolerance-require-difference and no tagged cell differed


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``|new - ref| <= atol + rtol * |ref|`` (plus a 1e-9 slack for decimal parsing)."""

    atol: float = 0.0
    rtol: float = 0.0

    def allowed(self, ref: float) -> float:
        return self.atol + self.rtol * abs(ref)

    def __str__(self) -> str:
        parts = [f"atol={self.atol:g}"] + ([f"rtol={self.rtol:g}"] if self.rtol else [])
        return ", ".join(parts)


def parse_tolerance(metadata: Any) -> Tolerance:
    """The tolerance of a cell's ``tolerance`` metadata; ValueError if it is not valid."""
    if not isinstance(metadata, dict) or not metadata:
        raise ValueError(f'{METADATA_KEY} must be an object such as {{"atol": 0.02, "rtol": 0}}, got {json.dumps(metadata)}')
    unknown = set(metadata) - {"atol", "rtol"}
    if unknown:
        raise ValueError(f"{METADATA_KEY} has unknown keys {sorted(unknown)} (allowed: atol, rtol)")
    values = {}
    for key, value in metadata.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{METADATA_KEY}.{key} must be a finite number >= 0, got {json.dumps(value)}")
        values[key] = float(value)
    return Tolerance(**values)


def split_numbers(text: str) -> tuple[str, list[str]]:
    """The skeleton of ``text`` (numbers replaced by a placeholder, runs of spaces and tabs by
    one space) and its numbers, as written.

    >>> split_numbers("loss  0.0533 at step 300, P1 says -1e-3")
    ('loss \\x00 at step \\x00, P1 says \\x00', ['0.0533', '300', '-1e-3'])
    """
    numbers = NUMBER.findall(text)
    skeleton = HSPACE.sub(" ", NUMBER.sub(PLACEHOLDER, text))
    return skeleton, numbers


@dataclasses.dataclass
class Difference:
    """What a tagged cell's comparison found: numbers compared, numbers that differ, the
    largest difference as a share of the tolerance, and the first failure (if any)."""

    compared: int = 0
    differing: int = 0
    worst_share: float = 0.0
    worst: str = ""
    failure: str | None = None


def _line_of(text: str, position: int) -> str:
    """The line of ``text`` where the ``position``-th number stands, stripped."""
    match = list(NUMBER.finditer(text))[position]
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start: end if end >= 0 else len(text)].strip()


def compare_text(ref: str, new: str, tol: Tolerance, where: str, found: Difference) -> bool:
    """Compare one text output with its reference within ``tol``; update ``found``. Returns
    whether they agree (on failure ``found.failure`` says why)."""
    ref_skeleton, ref_numbers = split_numbers(ref)
    new_skeleton, new_numbers = split_numbers(new)
    if ref_skeleton != new_skeleton or len(ref_numbers) != len(new_numbers):
        ref_lines = ref_skeleton.split("\n")
        new_lines = new_skeleton.split("\n")
        detail = f"the reference has {len(ref_lines)} lines, the new output {len(new_lines)}"
        for i, (a, b) in enumerate(zip(ref_lines, new_lines)):
            if a != b:
                shown = lambda s: s.replace(PLACEHOLDER, "#")  # noqa: E731
                detail = (f"line {i + 1} differs (numbers shown as #):\n"
                          f"    reference: {shown(a).strip()!r}\n    new:       {shown(b).strip()!r}")
                break
        found.failure = f"{where}: the text around the numbers differs, so no tolerance applies; {detail}"
        return False
    for i, (a, b) in enumerate(zip(ref_numbers, new_numbers)):
        found.compared += 1
        x, y = float(a), float(b)
        if a == b:
            continue
        found.differing += 1
        gap = abs(y - x)
        allowed = tol.allowed(x)
        share = gap / allowed if allowed > 0 else math.inf
        if share > found.worst_share:
            found.worst_share, found.worst = share, f"{a} -> {b}"
        if gap > allowed + SLACK * max(1.0, abs(x)):
            found.failure = (
                f"{where}: number {i + 1} of {len(ref_numbers)}, in the line {_line_of(ref, i)!r}: "
                f"reference {a}, new {b}, |difference| {gap:.3g} > tolerance {allowed:.3g} ({tol})"
            )
            return False
    return True


def _is_json(key: str) -> bool:
    return key == "application/json" or (key.startswith("application/") and key.endswith("+json"))


def _text_slots(outputs: list) -> dict[str, list[tuple[int, str | None]]]:
    """Where each text value of ``outputs`` lives, grouped and ordered as nbval pairs them: by
    stream name (``stdout``, ``stderr``) or by MIME type, in output order. Values are
    ``(output index, data key)``; the data key is None for a stream's text. JSON data (a
    chart's Vega-Lite spec) counts as text: :func:`_get` serialises it."""
    slots: dict[str, list[tuple[int, str | None]]] = {}
    for index, output in enumerate(outputs):
        if output.get("output_type") == "stream":
            slots.setdefault("stream:" + output.get("name", ""), []).append((index, None))
        for key, value in (output.get("data") or {}).items():
            if (key.startswith("text/") and isinstance(value, str)) or _is_json(key):
                slots.setdefault(key, []).append((index, key))
    return slots


def _get(outputs: list, slot: tuple[int, str | None]) -> str:
    index, key = slot
    if key is None:
        return outputs[index]["text"]
    value = outputs[index]["data"][key]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, indent=0)


def _renamed_datasets(value: Any) -> Any:
    """A chart spec whose data sets are named by the order in which the spec uses them.

    Altair names a data set by the MD5 of its values, and the spec is serialised with sorted
    keys, so a value moving within the tolerance renames a data set and can move it to
    another place in ``datasets``. Naming each by its first use in the spec (walked with
    sorted keys, ``datasets`` itself left out) keeps the comparison in step.
    """
    if not isinstance(value, dict) or not isinstance(value.get("datasets"), dict):
        return value
    order: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in sorted(node):
                if k != "datasets":
                    walk(node[k])
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str) and node in value["datasets"] and node not in order:
            order[node] = f"data-(used {len(order) + 1:03d})"

    walk(value)
    for name in value["datasets"]:  # defined but never used: after the used ones, by content
        order.setdefault(name, f"data-(unused {json.dumps(value['datasets'][name], sort_keys=True)})")

    def rename(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: rename(v) for k, v in node.items()}
        if isinstance(node, list):
            return [rename(v) for v in node]
        return order.get(node, node) if isinstance(node, str) else node

    out = {k: rename(v) for k, v in value.items() if k != "datasets"}
    out["datasets"] = {order[name]: rows for name, rows in value["datasets"].items()}
    return out


def _compared_text(outputs: list, slot: tuple[int, str | None]) -> str:
    """The text of a slot as a tagged cell compares it: data sets renamed by use, hashes masked."""
    index, key = slot
    if key is not None and _is_json(key) and not isinstance(outputs[index]["data"][key], str):
        text = json.dumps(_renamed_datasets(outputs[index]["data"][key]), sort_keys=True, indent=0)
    else:
        text = _get(outputs, slot)
    return DATASET.sub(DATASET_NAME, text)


def _set(outputs: list, slot: tuple[int, str | None], value: str) -> None:
    index, key = slot
    if key is None:
        outputs[index]["text"] = value
    elif _is_json(key) and not isinstance(outputs[index]["data"][key], str):
        outputs[index]["data"][key] = json.loads(value)
    else:
        outputs[index]["data"][key] = value


class ToleranceCell(IPyNbCell):
    """An nbval cell whose text outputs are compared within ``self.tolerance``."""

    tolerance: Tolerance
    difference: Difference

    def compare_outputs(self, test, ref, skip_compare=None):
        found = self.difference = Difference()
        where = f"{self.nodeid} (tagged {TAG!r}, {self.tolerance})"
        test = copy.deepcopy(test)
        ref_slots, test_slots = _text_slots(ref), _text_slots(test)
        for key, slots in ref_slots.items():
            for n, (ref_slot, test_slot) in enumerate(zip(slots, test_slots.get(key, []))):
                ref_text = self.sanitize(_compared_text(ref, ref_slot))
                test_text = self.sanitize(_compared_text(test, test_slot))
                if ref_text == test_text:  # equal as compared (data-set names aside): nbval sees the reference
                    found.compared += len(NUMBER.findall(ref_text))
                    _set(test, test_slot, _get(ref, ref_slot))
                    continue
                label = key.removeprefix("stream:")
                if not compare_text(ref_text, test_text, self.tolerance, f"{where}, output {label!r} #{n + 1}", found):
                    self.comparison_traceback = [found.failure]
                    return False
                # Within tolerance: the reference stands in for the new text, so that nbval's
                # exact comparison checks everything else.
                _set(test, test_slot, _get(ref, ref_slot))
        # Counts, missing or extra outputs and non-text data: nbval's own comparison.
        return super().compare_outputs(test, ref, skip_compare)


# ---------------------------------------------------------------- pytest hooks

def pytest_addoption(parser):
    group = parser.getgroup("nbtolerance", "nbval tolerance for cells tagged 'stochastic'")
    group.addoption(
        "--nbtolerance-require-difference", action="store_true",
        help="fail the run unless at least one cell tagged 'stochastic' differed from its "
             "reference (within tolerance): shows that another kernel path was taken",
    )


def pytest_collection_modifyitems(session, config, items):
    cells = config.stash.setdefault(TAGGED, [])
    for item in items:
        if not isinstance(item, IPyNbCell):
            continue
        if SVG not in item.parent.skip_compare:  # a chart's static fallback: see the module docstring
            item.parent.skip_compare = tuple(item.parent.skip_compare) + (SVG,)
        metadata = item.cell.metadata
        tags = metadata.get("tags") or []
        tagged, has_tolerance = TAG in tags, METADATA_KEY in metadata
        where = f"{item.nodeid}: "
        if has_tolerance and not tagged:
            raise pytest.UsageError(f"{where}has a {METADATA_KEY!r} but not the tag {TAG!r}: add the tag or remove the tolerance")
        if not tagged:
            continue
        if not has_tolerance:
            raise pytest.UsageError(f'{where}is tagged {TAG!r} but has no {METADATA_KEY!r} metadata, e.g. tolerance={{"atol": 0.02, "rtol": 0}}')
        try:
            tolerance = parse_tolerance(metadata[METADATA_KEY])
        except ValueError as error:
            raise pytest.UsageError(where + str(error)) from None
        item.__class__ = ToleranceCell
        item.tolerance = tolerance
        item.difference = Difference()
        cells.append(item)


REMOTE = pytest.StashKey[list]()  # records sent by pytest-xdist workers (pytest -n N)


def _records(config) -> list[dict]:
    """One record per tagged cell this process compared, plus those the xdist workers sent."""
    local = [
        {"nodeid": item.nodeid, "differing": item.difference.differing, "compared": item.difference.compared,
         "worst_share": item.difference.worst_share, "worst": str(item.difference.worst),
         "tolerance": str(item.tolerance), "failed": bool(item.difference.failure)}
        for item in config.stash.get(TAGGED, [])
        if item.difference.compared or item.difference.failure
    ]
    return local + config.stash.get(REMOTE, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist: collect a worker's records (sent in ``workeroutput`` at its session end)."""
    records = getattr(node, "workeroutput", {}).get("nbtolerance", [])
    node.config.stash.setdefault(REMOTE, []).extend(records)


_TIMES: dict = {}  # notebook -> [seconds, cell names, (slowest call in seconds, its cell)]


def pytest_runtest_logreport(report):
    """Time per notebook: set-up, call and tear-down of its cells (the kernel's start is in its
    first cell's set-up). Under pytest-xdist the controller receives every worker's reports."""
    path, _, cell = report.nodeid.partition("::")
    if not path.endswith(".ipynb") or not cell:
        return
    entry = _TIMES.setdefault(path, [0.0, set(), (0.0, "")])
    entry[0] += report.duration
    entry[1].add(cell)
    if report.when == "call" and report.duration > entry[2][0]:
        entry[2] = (report.duration, cell)


def _time_summary(terminalreporter) -> None:
    if not _TIMES:
        return
    terminalreporter.section("nbval: time per notebook")
    for path, (seconds, cells, (worst, cell)) in sorted(_TIMES.items(), key=lambda kv: -kv[1][0]):
        terminalreporter.write_line(f"{seconds:7.1f} s  {path} ({len(cells)} cells; slowest {cell}: {worst:.1f} s)")
    terminalreporter.write_line(f"{sum(v[0] for v in _TIMES.values()):7.1f} s  in all (summed over the workers)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller prints the summary
        return
    _time_summary(terminalreporter)
    cells = sorted(_records(config), key=lambda r: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", r["nodeid"])])
    unmet = config.stash.get(UNMET, False)
    if not cells and not unmet:
        return
    terminalreporter.section(f"nbtolerance: cells tagged {TAG!r}")
    for r in cells:
        line = f"{r['nodeid']}: {r['differing']}/{r['compared']} numbers differ"
        if r["differing"]:
            line += f", largest {r['worst_share']:.0%} of the tolerance ({r['worst']})"
        terminalreporter.write_line(f"{line}; {r['tolerance']}: {'FAILED' if r['failed'] else 'ok'}")
    differed = sum(1 for r in cells if r["differing"])
    terminalreporter.write_line(f"{differed} of {len(cells)} tagged cells differed from their reference")
    if unmet:
        terminalreporter.write_line(
            f"--nbtolerance-require-difference: no cell tagged {TAG!r} differed from its reference, "
            "so this run does not show another kernel path: FAILED", red=True)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workeroutput"):  # an xdist worker: send the records to the controller
        config.workeroutput["nbtolerance"] = _records(config)
        return
    if config.getoption("nbtolerance_require_difference") and exitstatus == pytest.ExitCode.OK:
        if not any(r["differing"] for r in _records(config)):
            config.stash[UNMET] = True
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
