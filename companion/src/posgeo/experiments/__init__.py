"""Recipes that several chapters share, built only from :mod:`posgeo`'s public names.

A chapter's own code lives in the chapter, or in its helper module beside it
(``book/_chNN.py``); what more than one chapter needs of it lives here::

    import posgeo as pg                                     # the library: tools
    from posgeo.experiments import statistics as ex_stats   # a recipe the chapters share

====================  ==============  ======================================================
module                chapters        topic
====================  ==============  ======================================================
``statistics``        3,4,7,8,10      the corpora's positional geometry with its intervals
``papers``            all             the numbers the two papers report
====================  ==============  ======================================================

Importing this package imports none of them.

    >>> from posgeo.experiments import BOOK_CORPORA
    >>> BOOK_CORPORA["sst2"]
    48
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["BOOK_CORPORA"]

BOOK_CORPORA = MappingProxyType({"synthetic": 32, "sst2": 48, "imdb": 510})
"""The book's three corpora and the number of positions each is studied at (read-only).

SST-2 at 48 and IMDB at 510 positions keep at least 100 sequences reaching every position
(chapter 3); the synthetic corpus has 32 positions by construction."""
