"""The book's structure: the TOC, the jupytext pairs, the stored outputs and the configuration.

These tests read files only (no kernel, no build): they fail when a chapter is missing from
the TOC, when a notebook and its percent script have drifted apart, when a chapter was
committed without being executed, or when the configuration would need the network.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from sphinx_external_toc.parsing import parse_toc_yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
SCRIPTS = sorted(BOOK.glob("*.py"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def toc_docnames() -> list[str]:
    """Docnames of the TOC in reading order (root first, then depth-first)."""
    site_map = parse_toc_yaml(ROOT / "_toc.yml")
    order: list[str] = []

    def walk(docname: str) -> None:
        order.append(docname)
        for subtree in site_map[docname].subtrees:
            for item in subtree.items:
                if isinstance(item, str):  # a docname (URLs and globs are not used here)
                    walk(item)

    walk(site_map.root.docname)
    return order


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_book_has_chapters() -> None:
    assert NOTEBOOKS, f"no notebooks in {BOOK}; the chapters are book/NN_name.ipynb"


def test_toc_root_is_the_introduction() -> None:
    assert toc_docnames()[0] == "book/01_introduction"


@pytest.mark.parametrize("docname", toc_docnames())
def test_toc_entry_exists(docname: str) -> None:
    candidates = [ROOT / f"{docname}{ext}" for ext in (".ipynb", ".md")]
    assert any(p.is_file() for p in candidates), (
        f"_toc.yml lists {docname!r} but neither {docname}.ipynb nor {docname}.md exists; "
        "add the chapter or remove it from _toc.yml"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=rel)
def test_every_chapter_is_in_the_toc(notebook: Path) -> None:
    docname = rel(notebook.with_suffix(""))
    assert docname in toc_docnames(), f"{rel(notebook)} is not listed in _toc.yml; add `- file: {docname}`"


def test_toc_has_no_duplicates() -> None:
    names = toc_docnames()
    assert len(names) == len(set(names)), f"_toc.yml lists a chapter twice: {names}"


def _cells(path: Path) -> list[tuple[str, str]]:
    nb = jupytext.read(path)
    return [(cell.cell_type, cell.source.strip()) for cell in nb.cells]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=rel)
def test_notebook_has_percent_pair_in_sync(notebook: Path) -> None:
    script = notebook.with_suffix(".py")
    assert script.is_file(), (
        f"{rel(notebook)} has no jupytext pair; run `.venv/bin/jupytext --set-formats ipynb,py:percent {rel(notebook)}`"
    )
    head = script.read_text(encoding="utf-8")[:2000]
    assert "format_name: percent" in head, f"{rel(script)} is not in jupytext percent format"
    from_ipynb, from_py = _cells(notebook), _cells(script)
    assert [t for t, _ in from_ipynb] == [t for t, _ in from_py], (
        f"{rel(notebook)} and {rel(script)} have different cells; run `.venv/bin/jupytext --sync {rel(notebook)}`"
    )
    for i, (a, b) in enumerate(zip(from_ipynb, from_py)):
        assert a == b, (
            f"cell {i} differs between {rel(notebook)} and {rel(script)}; "
            f"run `.venv/bin/jupytext --sync {rel(notebook)}`\n--- ipynb:\n{a[1]}\n--- py:\n{b[1]}"
        )


@pytest.mark.parametrize("script", SCRIPTS, ids=rel)
def test_script_has_notebook(script: Path) -> None:
    assert script.with_suffix(".ipynb").is_file(), (
        f"{rel(script)} has no notebook; run `.venv/bin/jupytext --to ipynb {rel(script)}` then `make book`"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=rel)
def test_notebook_was_executed_top_to_bottom(notebook: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert counts, f"{rel(notebook)} has no code cell"
    assert counts == list(range(1, len(counts) + 1)), (
        f"{rel(notebook)} was not executed top to bottom in a fresh kernel (execution counts {counts}); "
        "run `make book` and commit the outputs"
    )
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{rel(notebook)} stores an error output: {errors[0].get('ename')}"
        assert "execution" not in cell.metadata, (
            f"{rel(notebook)} stores execution timings; execute with --ExecutePreprocessor.record_timing=False"
        )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=rel)
def test_notebook_uses_the_python3_kernel(notebook: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{rel(notebook)} must use the 'python3' kernel so nbconvert and nbval run it in .venv"
    )


def test_execution_is_off_during_build() -> None:
    assert CONFIG["execute"]["execute_notebooks"] == "off"


def test_mathjax_is_served_locally() -> None:
    path = CONFIG["sphinx"]["config"]["mathjax_path"]
    assert "://" not in path and not path.startswith("//"), f"mathjax_path {path!r} points at the network"
    assert (ROOT / "package.json").is_file() and (ROOT / "package-lock.json").is_file()
    assert '"mathjax"' in (ROOT / "package.json").read_text(encoding="utf-8")


def test_jupytext_pairs_every_notebook_with_a_percent_script() -> None:
    text = (ROOT / "jupytext.toml").read_text(encoding="utf-8")
    assert re.search(r'^formats\s*=\s*"ipynb,py:percent"', text, re.M), text


def test_colab_install_cell_names_the_configured_repository() -> None:
    """The repository address lives in _config.yml; the Colab install cell must agree."""
    url = CONFIG["repository"]["url"].rstrip("/")
    intro = nbformat.read(BOOK / "01_introduction.ipynb", as_version=4)
    code = [c for c in intro.cells if c.cell_type == "code"]
    first = code[0]
    assert '"google.colab" in sys.modules' in first.source, "the first code cell must be the Colab-guarded install"
    assert first.outputs == [], "the Colab install cell must print nothing outside Colab"
    found = re.findall(r"git\+(\S+?)#subdirectory=companion", first.source)
    assert found == [url], f"the Colab install cell installs from {found}, _config.yml says {url}"
    for notebook in NOTEBOOKS:
        for other in re.findall(r"git\+(\S+?)#subdirectory=companion", notebook.read_text(encoding="utf-8")):
            assert other.rstrip("/") == url, f"{rel(notebook)} installs from {other}, _config.yml says {url}"


def test_intro_has_equations_for_the_browser_test() -> None:
    intro = nbformat.read(BOOK / "01_introduction.ipynb", as_version=4)
    markdown = "\n".join(c.source for c in intro.cells if c.cell_type == "markdown")
    assert markdown.count("$$") >= 4, "the introduction should display the Hellinger and stress formulas"
    assert r"\operatorname{stress}" in markdown
