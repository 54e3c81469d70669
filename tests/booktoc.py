"""The book's table of contents, shared by tests/test_book.py and the browser tests.

`pytest.ini` puts tests/ on the import path (``pythonpath = tests``), so every test module
can ``from booktoc import ROOT, toc_docnames``.
"""

from __future__ import annotations

from pathlib import Path

from sphinx_external_toc.parsing import parse_toc_yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_docnames() -> list[str]:
    """Docnames of _toc.yml in reading order (root first, then depth-first)."""
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
