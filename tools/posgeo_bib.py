"""Sphinx extension: reference lists labelled like the citations in the text.

The book cites author-year (``bibtex_reference_style: author_year``: "[Cirrincione, 2026]")
but pybtex's default formatting style labels the lists alpha-style ("[Cir26]", and
"[IZSchluterN19]" for a name with an accent). This extension registers a pybtex formatting
style ``posgeo`` (``bibtex_default_style: posgeo`` in ``_config.yml``): pybtex's ``unsrt``
entries (which print a DOI, an arXiv id or a URL when the entry has one), sorted by author,
year and title, and labelled by :class:`AuthorYearLabels`: "Surname, 2026", "Surname and
Other, 2019", "Surname et al., 2017", with "a", "b", ... where two entries would share a
label.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import latexcodec  # noqa: F401  (registers the "ulatex" codec; a dependency of pybtex)
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from sphinx.application import Sphinx


def _plain(text: str) -> str:
    """A BibTeX name as plain text: LaTeX accents decoded, braces dropped."""
    try:
        text = codecs.decode(text, "ulatex")
    except ValueError:
        pass
    return re.sub(r"[{}]", "", text).strip()


def _surname(person: Any) -> str:
    return _plain(" ".join([*person.prelast_names, *person.last_names]))


class AuthorYearLabels(BaseLabelStyle):
    """Labels "Surname, YYYY" / "A and B, YYYY" / "A et al., YYYY" (a, b, ... on ties)."""

    def _base(self, entry: Any) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(p) for p in people]
        if not names:
            who = _plain(entry.fields.get("title", entry.key)).split(":")[0]
        elif len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        entries = list(sorted_entries)
        bases = [self._base(e) for e in entries]
        count = Counter(bases)
        seen: Counter[str] = Counter()
        for base in bases:
            if count[base] > 1:
                yield f"{base}{'abcdefghijklmnopqrstuvwxyz'[seen[base]]}"
                seen[base] += 1
            else:
                yield base


class PosgeoStyle(UnsrtStyle):
    """pybtex's unsrt entries, sorted by author, year and title, labelled author-year."""

    default_label_style = "posgeo_author_year"
    default_sorting_style = "author_year_title"


def setup(app: Sphinx) -> dict[str, Any]:
    register_plugin("pybtex.style.labels", "posgeo_author_year", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "posgeo", PosgeoStyle)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
