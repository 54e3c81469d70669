"""Sphinx extension: the posgeo API reference, generated from ``posgeo.__all__`` at build time.

``book/api_reference.md`` holds a marker line (:data:`MARKER`). When Sphinx reads that page,
this extension replaces the marker with one section per private module of ``posgeo`` (the
topic), titled by :data:`TOPICS` (or, for a module not listed there, by the first line of
its docstring), and in it one autodoc directive per public name that the module exports:
constants first, then classes, then functions, each alphabetically. The docstrings are
numpydoc-style and rendered by ``sphinx.ext.napoleon``.

Nothing is hand-maintained: a name added to a module's ``__all__`` (and so to
``posgeo.__all__``) appears on the next build, and a new module gets its own section.
:func:`generate` raises if a public name would be left out; ``tests/test_book.py`` checks
the generated text and ``tests/browser`` the built page.

Module-level constants are written as ``py:data`` entries whose text is the docstring that
follows the assignment in the source module (autodoc's ``autodata`` would look in
``posgeo/__init__.py``, find nothing, and show the docstring of ``str`` or ``dict``).
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from types import ModuleType
from typing import Any

MARKER = "<!-- posgeo-api-reference -->"
DOCNAME = "book/api_reference"

# Reading order and readable titles of the sections; a module missing here is appended after
# them, titled by the first line of its docstring.
TOPICS: dict[str, str] = {
    "_geometry": "Hellinger geometry, MDS and stress",
    "_encodings": "Standard positional encodings",
    "_corpus": "Corpora and tokenisation",
    "_marginals": "Positional marginals and their noise floor",
    "_synthetic": "The synthetic corpus",
    "_analysis": "Corpus-level analyses",
    "_equivariance": "Permutation equivariance (P1, Theorem 1)",
    "_separation": "Positional separation (P1, Theorem 4)",
    "_circulant": "Circulant structure and sinusoids",
    "_lowrank": "Effective rank and low-rank encodings (P1, Observation 8)",
    "_monotonicity": "Monotonicity violation rate (P1, Conjecture 5)",
    "_ntk": "Learned position tables and the NTK regime",
    "_layers": "Positions through the layers of a pretrained encoder",
    "_adjacency": "Cosine similarity and the adjacency score (P2)",
    "_nope": "Causal transformers without positional encodings (P2)",
    "_tasks": "The synthetic tasks of P2",
    "_model": "A small transformer",
    "_train": "Training",
    "_pretrained": "Pretrained models",
    "_audit": "Auditing a model",
    "_plotting": "Charts",
    "_profiles": "Experiment profiles",
    "_cache": "Result cache",
}
PACKAGE_TITLE = "Package metadata"
PACKAGE_DOCS = {"__version__": "The installed version of ``posgeo`` (from the package metadata)."}


def _summary(module: ModuleType) -> str:
    doc = inspect.getdoc(module) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ").strip()


def _title(modname: str, module: ModuleType) -> str:
    if modname in TOPICS:
        return TOPICS[modname]
    line = (_summary(module).split(". ")[0] or modname).rstrip(".")
    return line.replace("``", "").replace("`", "")


def public_modules(package: ModuleType) -> list[tuple[str, ModuleType]]:
    """The private modules of ``package`` that export names in ``package.__all__``, in topic order."""
    found = {}
    for name, value in vars(package).items():
        if (
            isinstance(value, ModuleType)
            and name.startswith("_")
            and not name.startswith("__")
            and value.__name__ == f"{package.__name__}.{name}"
            and getattr(value, "__all__", None)
        ):
            found[name] = value
    order = [m for m in TOPICS if m in found] + sorted(m for m in found if m not in TOPICS)
    return [(m, found[m]) for m in order]


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
        return "function"
    return "data"


def _attr_doc(module: ModuleType, name: str) -> str:
    """The docstring (or ``#:`` comment) of a module-level assignment, via Sphinx's analyser."""
    from sphinx.pycode import ModuleAnalyzer

    try:
        docs = ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
    except Exception:  # noqa: BLE001 - no source: no documentation
        return ""
    return "\n".join(docs.get(("", name), [])).strip()


def _short_repr(value: Any, limit: int = 70) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _indent(text: str, prefix: str = "   ") -> str:
    return textwrap.indent(text, prefix, lambda line: bool(line.strip()))


def _data_block(qualname: str, value: Any, doc: str) -> str:
    body = doc or "(undocumented)"
    return (
        f".. py:data:: {qualname}\n   :type: {type(value).__name__}\n   :value: {_short_repr(value)}\n\n"
        f"{_indent(body)}"
    )


def _object_block(qualname: str, kind: str) -> str:
    if kind == "class":
        return f".. autoclass:: {qualname}\n   :members:"
    return f".. autofunction:: {qualname}"


def _rst_block(parts: list[str]) -> str:
    """reStructuredText inside MyST: autodoc writes reST, which must be parsed as reST."""
    return "```{eval-rst}\n" + "\n\n".join(parts) + "\n```"


def generate(package_name: str = "posgeo") -> str:
    """MyST markdown documenting every name of ``<package>.__all__``, grouped by module.

    Raises ``RuntimeError`` if a public name is not exported by any private module (except
    the package metadata in :data:`PACKAGE_DOCS`) or is missing from the output.
    """
    package = importlib.import_module(package_name)
    public = list(package.__all__)
    modules = public_modules(package)
    owner: dict[str, str] = {}
    for modname, module in modules:
        for name in module.__all__:
            if name in public:
                owner.setdefault(name, modname)
    orphans = [n for n in public if n not in owner and n not in PACKAGE_DOCS]
    if orphans:
        raise RuntimeError(
            f"{package_name}.__all__ names {orphans}, which no private module exports in its __all__; "
            "export each public name from the module that defines it"
        )

    rank = {"data": 0, "class": 1, "function": 2}
    parts: list[str] = []
    documented: list[str] = []
    for modname, module in modules:
        names = [n for n in module.__all__ if owner.get(n) == modname]
        if not names:
            continue
        names.sort(key=lambda n: (rank[_kind(getattr(package, n))], n.lower()))
        parts.append(f"## {_title(modname, module)}")
        summary = _summary(module)
        blocks = [f".. currentmodule:: {package_name}", f"From ``{package_name}.{modname}``: {summary}" if summary else f"From ``{package_name}.{modname}``."]
        for name in names:
            obj = getattr(package, name)
            kind = _kind(obj)
            qualname = f"{package_name}.{name}"
            if kind == "data":
                blocks.append(_data_block(name, obj, _attr_doc(module, name)))
            else:
                blocks.append(_object_block(qualname, kind))
            documented.append(name)
        parts.append(_rst_block(blocks))
    extra = [n for n in public if n in PACKAGE_DOCS]
    if extra:
        parts.append(f"## {PACKAGE_TITLE}")
        blocks = [f".. currentmodule:: {package_name}"]
        for name in extra:
            blocks.append(_data_block(name, getattr(package, name), PACKAGE_DOCS[name]))
            documented.append(name)
        parts.append(_rst_block(blocks))
    missing = sorted(set(public) - set(documented))
    if missing:  # pragma: no cover - guarded by construction; kept as the page's promise
        raise RuntimeError(f"the API reference would leave out {missing}")
    return "\n\n".join(parts) + "\n"


def _fill_page(app: Any, docname: str, source: list[str]) -> None:
    if docname != DOCNAME:
        return
    if MARKER not in source[0]:
        from sphinx.errors import ExtensionError

        raise ExtensionError(f"{docname}.md has lost its marker {MARKER!r}: put it back where the reference goes")
    source[0] = source[0].replace(MARKER, generate(), 1)


def _always_reread(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """The page's source does not change when posgeo does: re-read it on every build."""
    return [DOCNAME] if DOCNAME in env.found_docs else []


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("source-read", _fill_page)
    app.connect("env-get-outdated", _always_reread)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # print the generated markdown, for a look without a build
    print(textwrap.dedent(generate()))
