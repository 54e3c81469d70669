"""Sphinx extension: the posgeo API reference, generated from the package at build time.

The reference is one page per part of the package (:data:`PAGES`): ``book/api_library.md``,
``book/api_experiments.md`` and ``book/api_audit.md``, listed in ``_toc.yml`` under the
overview page ``book/api_reference.md``. Each holds a marker line (:data:`MARKER`); when Sphinx
reads the page, this extension replaces the marker with that part, titled, one section per
module:

1. **the library**, ``posgeo.__all__`` (imported flat, ``posgeo.hellinger_matrix``): one
   section per module of ``posgeo.LIBRARY_MODULES``, in that order, titled by :data:`TOPICS`
   (or, for a module not listed there, by the first sentence of its docstring); then the
   public module ``posgeo.validation`` and the package metadata;
2. **the experiments**, ``posgeo.experiments``: its own ``__all__``, then one section per
   module of the package (each with its own ``__all__``), in the order and with the topics of
   the module table in ``posgeo/experiments/__init__.py``'s docstring (a module missing from
   the table is appended, titled by its docstring); names are documented under their module,
   ``posgeo.experiments.statistics.corpus_bootstrap``;
3. **the audit**, ``posgeo.audit.__all__`` (documented as ``posgeo.audit.audit``), read at
   build time and grouped by the submodule that defines each name, in ``__all__`` order.

In each section, one autodoc directive per name: constants first, then classes, then
functions, each alphabetically. The docstrings are numpydoc-style and rendered by
``sphinx.ext.napoleon``; ``sphinx.ext.viewcode`` adds a ``[source]`` link to every class and
function (the highlighted source of the installed version, under ``_modules/``).

Nothing is hand-maintained: a name added to an ``__all__`` appears on the next build, and a
new library module (added to ``LIBRARY_MODULES``), experiments module or audit submodule gets
its own section. :func:`generate` raises if a public name would be left out;
``tests/test_book.py`` checks the generated text and ``tests/browser`` the built page.

Module-level constants are written as ``py:data`` entries whose text is the docstring that
follows the assignment in the source module (autodoc's ``autodata`` would look in the
namespace's ``__init__.py``, find nothing, and show the docstring of ``str`` or ``dict``).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
from types import ModuleType
from typing import Any, NamedTuple

MARKER = "<!-- posgeo-api-reference -->"
DOCNAME = "book/api_reference"  # the overview page (hand-written; no marker)
# The generated pages, in the reference's order: docname -> the part it documents.
PAGES: dict[str, str] = {
    "book/api_library": "library",
    "book/api_experiments": "experiments",
    "book/api_audit": "audit",
}
PACKAGE = "posgeo"
VALIDATION = "posgeo.validation"
EXPERIMENTS = "posgeo.experiments"
AUDIT = "posgeo.audit"

# Readable titles of the library's sections (their order is posgeo.LIBRARY_MODULES); a module
# missing here is titled by the first sentence of its docstring.
TOPICS: dict[str, str] = {
    "_sequences": "Token sequences and labelled corpora",
    "_corpus": "Corpora and tokenisation",
    "_synthetic": "The synthetic corpus",
    "_marginals": "Positional marginals and the estimators of a corpus's geometry",
    "_counts": "Positional counts: sparse, mergeable, with a deterministic half",
    "_count_run": "Counting sharded corpora, in one process or on Dask",
    "_sources": "Sources of counts: shards and streamed Hugging Face datasets",
    "_tokenizers": "Tokenizers of the counts",
    "_bootstrap": "Sequence-level bootstrap of the geometry",
    "_seeds": "Intervals over training seeds",
    "_geometry": "Hellinger geometry, MDS and stress",
    "_linalg": "Shared linear algebra",
    "_encodings": "Standard positional encodings",
    "_model": "A small transformer",
    "_train": "Training",
    "_metrics": "Metrics of position tables: separation, monotonicity, adjacency",
    "_layers": "Positions through the layers of a pretrained encoder",
    "_pretrained": "Pretrained models",
    "_plotting": "Charts",
    "_cache": "Result cache",
    "_progress": "Progress bars",
    "_profiles": "Experiment profiles",
}
VALIDATION_TITLE = "Input validation"
PACKAGE_TITLE = "Package metadata"
PACKAGE_DOCS = {"__version__": "The installed version of ``posgeo`` (from the package metadata)."}
EXPERIMENTS_PACKAGE_TITLE = "Shared by the chapters"

PART_TITLES = {
    "library": "The library: `posgeo`",
    "experiments": "The experiments: `posgeo.experiments`",
    "audit": "The audit: `posgeo.audit`",
}
PART_INTROS = {
    "library": (
        "The reusable tools, imported flat from the package: `import posgeo as pg`, then "
        "`pg.hellinger_matrix(...)`. One section per module of `posgeo.LIBRARY_MODULES`, in that "
        "order (data, geometry, encodings, model and training, metrics, pretrained models, "
        "infrastructure); the module named under each heading only says where the code lives. "
        "Then the public module `posgeo.validation`, which is imported as such."
    ),
    "experiments": (
        "The recipes several chapters share, built only from the library's public names: "
        "`from posgeo.experiments import statistics as ex_stats`, then `ex_stats.corpus_bootstrap(...)`. "
        "A chapter's own code is in the chapter or its helper module and is not listed here."
    ),
    "audit": (
        "The `posgeo audit` tool (the audit chapter): `import posgeo.audit as au`, then "
        "`au.audit(...)`. The names of `posgeo.audit.__all__`, grouped by the submodule that "
        "defines them; import them from `posgeo.audit`."
    ),
}


class Section(NamedTuple):
    """One section of the reference: ``names`` of ``namespace``, whose code lives in ``module``."""

    title: str
    module: ModuleType  # where the code lives: the "From" line, and the constants' docstrings
    namespace: str  # where the names are imported from: each entry is "<namespace>.<name>"
    names: tuple[str, ...]
    note: str = ""  # extra words for the "From" line
    summary: bool = True  # quote the first paragraph of the module's docstring


class Part(NamedTuple):
    key: str
    title: str
    intro: str
    sections: tuple[Section, ...]


def _summary(module: ModuleType) -> str:
    doc = inspect.getdoc(module) or ""
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ").strip()


def _docstring_title(module: ModuleType) -> str:
    line = (_summary(module).split(". ")[0] or module.__name__).rstrip(".")
    line = re.sub(r":[\w:]+:`~?([^`]+)`", r"`\1`", line)  # reST roles: a heading is MyST
    return line.replace("``", "`")


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        return "class"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
        return "function"
    return "data"


def _exports(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        raise RuntimeError(f"{module.__name__} has no __all__; list its public names there")
    return list(names)


# ---------------------------------------------------------------------------------- the parts
def library_sections(package_name: str = PACKAGE) -> list[Section]:
    """``posgeo.__all__`` by module of ``posgeo.LIBRARY_MODULES``, then validation and metadata."""
    package = importlib.import_module(package_name)
    public = list(package.__all__)
    modules = list(package.LIBRARY_MODULES)
    owner: dict[str, ModuleType] = {}
    for module in modules:
        for name in _exports(module):
            if name in public:
                owner.setdefault(name, module)
    orphans = [n for n in public if n not in owner and n not in PACKAGE_DOCS]
    if orphans:
        raise RuntimeError(
            f"{package_name}.__all__ names {orphans}, which no module of {package_name}.LIBRARY_MODULES "
            "exports in its __all__; export each public name from the module that defines it"
        )
    sections = []
    for module in modules:
        short = module.__name__.rsplit(".", 1)[-1]
        names = tuple(n for n in _exports(module) if owner.get(n) is module)
        if names:
            title = TOPICS.get(short) or _docstring_title(module)
            sections.append(Section(title, module, package_name, names))
    validation = importlib.import_module(VALIDATION)
    sections.append(
        Section(
            f"{VALIDATION_TITLE}: `{VALIDATION}`",
            validation,
            VALIDATION,
            tuple(_exports(validation)),
            note="a public module: ``from posgeo.validation import check_int``",
        )
    )
    extra = tuple(n for n in public if n in PACKAGE_DOCS)
    if extra:
        sections.append(Section(PACKAGE_TITLE, package, package_name, extra, summary=False))
    return sections


_TABLE_ROW = re.compile(r"^\s*((?:``\w+``,?\s*)+?)\s{2,}(\S+)\s{2,}(\S.*?)\s*$")


def experiments_table(package: ModuleType) -> dict[str, tuple[str, str]]:
    """``{module: (chapter, topic)}`` from the module table of the package's docstring, in order."""
    table: dict[str, tuple[str, str]] = {}
    for line in (inspect.getdoc(package) or "").splitlines():
        row = _TABLE_ROW.match(line)
        if row:
            for name in re.findall(r"``(\w+)``", row.group(1)):
                table.setdefault(name, (row.group(2), row.group(3)))
    return table


def experiments_modules(package_name: str = EXPERIMENTS) -> list[ModuleType]:
    """Every public module of ``posgeo.experiments``, in the order of its docstring's table."""
    package = importlib.import_module(package_name)
    found = sorted(
        info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")
    )
    table = experiments_table(package)
    order = [m for m in table if m in found] + [m for m in found if m not in table]
    return [importlib.import_module(f"{package_name}.{m}") for m in order]


def experiments_sections(package_name: str = EXPERIMENTS) -> list[Section]:
    package = importlib.import_module(package_name)
    table = experiments_table(package)
    sections = []
    if getattr(package, "__all__", None):
        sections.append(
            Section(EXPERIMENTS_PACKAGE_TITLE, package, package_name, tuple(package.__all__), summary=False)
        )
    for module in experiments_modules(package_name):
        short = module.__name__.rsplit(".", 1)[-1]
        chapter, topic = table.get(short, ("", ""))
        title = f"`{short}` — {topic or _docstring_title(module)}"
        note = "" if not chapter else ("every chapter" if chapter == "all" else
                                       f"chapters {', '.join(chapter.split(','))}" if "," in chapter else f"chapter {chapter}")
        sections.append(Section(title, module, module.__name__, tuple(_exports(module)), note=note))
    return sections


def _audit_owner(package: ModuleType, name: str) -> ModuleType:
    """The submodule of ``package`` that defines ``name`` (or exports it), else the package."""
    obj = getattr(package, name)
    prefix = package.__name__ + "."
    if inspect.isclass(obj) or inspect.isroutine(obj):
        modname = getattr(obj, "__module__", "") or ""
        if modname.startswith(prefix) and modname in sys.modules:
            return sys.modules[modname]
    for modname in sorted(sys.modules):
        module = sys.modules[modname]
        if modname.startswith(prefix) and name in (getattr(module, "__all__", None) or ()):
            return module
    return package


def audit_sections(package_name: str = AUDIT) -> list[Section]:
    """``posgeo.audit.__all__``, one section per defining submodule, in ``__all__`` order."""
    package = importlib.import_module(package_name)
    groups: dict[str, list[str]] = {}
    modules: dict[str, ModuleType] = {}
    for name in _exports(package):
        module = _audit_owner(package, name)
        modules[module.__name__] = module
        groups.setdefault(module.__name__, []).append(name)
    return [
        Section(_docstring_title(modules[m]), modules[m], package_name, tuple(names))
        for m, names in groups.items()
    ]


def parts() -> list[Part]:
    """The reference's three parts, in page order: library, experiments, audit."""
    build = {"library": library_sections, "experiments": experiments_sections, "audit": audit_sections}
    return [Part(key, PART_TITLES[key], PART_INTROS[key], tuple(f())) for key, f in build.items()]


# ------------------------------------------------------------------------------ the markdown
def _attr_doc(module: ModuleType, name: str) -> str:
    """The docstring (or ``#:`` comment) of a module-level assignment, via Sphinx's analyser."""
    from sphinx.pycode import ModuleAnalyzer

    try:
        docs = ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
    except Exception:  # noqa: BLE001 - no source: no documentation
        return ""
    return "\n".join(docs.get(("", name), [])).strip()


def _short_repr(value: Any, limit: int = 70) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _indent(text: str, prefix: str = "   ") -> str:
    return textwrap.indent(text, prefix, lambda line: bool(line.strip()))


def _data_block(name: str, value: Any, doc: str) -> str:
    body = doc or "(undocumented)"
    return (
        f".. py:data:: {name}\n   :type: {type(value).__name__}\n   :value: {_short_repr(value)}\n\n"
        f"{_indent(body)}"
    )


def _object_block(qualname: str, kind: str) -> str:
    if kind == "class":
        return f".. autoclass:: {qualname}\n   :members:"
    return f".. autofunction:: {qualname}"


def _rst_block(parts: list[str]) -> str:
    """reStructuredText inside MyST: autodoc writes reST, which must be parsed as reST."""
    return "```{eval-rst}\n" + "\n\n".join(parts) + "\n```"


def _section_text(section: Section) -> tuple[str, list[str]]:
    """The markdown of one section and the qualified names it documents."""
    namespace = importlib.import_module(section.namespace)
    rank = {"data": 0, "class": 1, "function": 2}
    names = sorted(section.names, key=lambda n: (rank[_kind(getattr(namespace, n))], n.lower()))
    where = f"From ``{section.module.__name__}``" + (f" ({section.note})" if section.note else "")
    summary = _summary(section.module) if section.summary else ""
    if summary.rstrip(".") == section.module.__name__.rsplit(".", 1)[-1]:  # a placeholder docstring
        summary = ""
    blocks = [f".. currentmodule:: {section.namespace}", f"{where}: {summary}" if summary else f"{where}."]
    documented = []
    for name in names:
        obj = getattr(namespace, name)
        kind = _kind(obj)
        if kind == "data":
            doc = PACKAGE_DOCS.get(name) if section.namespace == PACKAGE else None
            blocks.append(_data_block(name, obj, doc or _attr_doc(section.module, name)))
        else:
            blocks.append(_object_block(f"{section.namespace}.{name}", kind))
        documented.append(f"{section.namespace}.{name}")
    return f"## {section.title}\n\n{_rst_block(blocks)}", documented


def expected_names() -> list[str]:
    """Every qualified name the reference must document, from the packages' ``__all__``."""
    names = [f"{PACKAGE}.{n}" for n in importlib.import_module(PACKAGE).__all__]
    names += [f"{VALIDATION}.{n}" for n in importlib.import_module(VALIDATION).__all__]
    names += [f"{EXPERIMENTS}.{n}" for n in getattr(importlib.import_module(EXPERIMENTS), "__all__", ())]
    for module in experiments_modules():
        names += [f"{module.__name__}.{n}" for n in module.__all__]
    names += [f"{AUDIT}.{n}" for n in importlib.import_module(AUDIT).__all__]
    return names


def generate(part: str | None = None) -> str:
    """MyST markdown documenting posgeo: one part (``"library"``, ``"experiments"``, ``"audit"``),
    titled, one section per module; or, with ``part=None``, the three parts one after the other.

    Raises ``RuntimeError`` if a name of ``posgeo.__all__`` is not exported by a module of
    ``posgeo.LIBRARY_MODULES`` (except the package metadata in :data:`PACKAGE_DOCS`), if a
    module has no ``__all__``, or (``part=None``) if a public name is missing from the output;
    ``ValueError`` for an unknown part.
    """
    all_parts = parts()
    if part is not None and part not in {p.key for p in all_parts}:
        raise ValueError(f"unknown part {part!r}; the parts are {[p.key for p in all_parts]}")
    text: list[str] = []
    documented: list[str] = []
    for each in all_parts:
        if part is not None and each.key != part:
            continue
        text += [f"# {each.title}", each.intro]
        for section in each.sections:
            body, names = _section_text(section)
            text.append(body)
            documented += names
    missing = sorted(set(expected_names()) - set(documented))
    if part is None and missing:  # pragma: no cover - guarded by construction; kept as the page's promise
        raise RuntimeError(f"the API reference would leave out {missing}")
    return "\n\n".join(text) + "\n"


def _fill_page(app: Any, docname: str, source: list[str]) -> None:
    if docname not in PAGES:
        return
    if MARKER not in source[0]:
        from sphinx.errors import ExtensionError

        raise ExtensionError(f"{docname}.md has lost its marker {MARKER!r}: put it back where the reference goes")
    source[0] = source[0].replace(MARKER, generate(PAGES[docname]), 1)


def _always_reread(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """The pages' sources do not change when posgeo does: re-read them on every build."""
    return [name for name in PAGES if name in env.found_docs]


def setup(app: Any) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.setup_extension("sphinx.ext.napoleon")
    app.setup_extension("sphinx.ext.viewcode")  # a [source] link on every class and function
    app.connect("source-read", _fill_page)
    app.connect("env-get-outdated", _always_reread)
    return {"version": "0.2", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # print the generated markdown, for a look without a build
    print(generate())
