"""The book's experiments: each chapter's recipes, built only from :mod:`posgeo`'s public names.

A chapter reads::

    import posgeo as pg                                  # the library: tools
    from posgeo.experiments import separation as ex      # this chapter's recipe

so every line shows whether it calls a reusable tool (``pg.``) or the chapter's recipe
(``ex.``). Modules, by chapter:

====================  =======  ==========================================================
module                chapter  topic
====================  =======  ==========================================================
``statistics``        2        summaries of corpora and of their positional geometry
``calibration``       2        the estimators against a known truth (Zipfian corpora)
``stress``            3        the encodings compared by stress, P1's stress table
``equivariance``      4        Theorem 1: permutation equivariance without positions
``separation``        5        Theorem 4: trained tables separate positions
``circulant``         6        sinusoids, circulant and Toeplitz geometry
``lowrank``           7        effective rank and low-rank tables (Observation 8)
``ntk``               8        monotonicity in offset and the NTK regime
``layers``            9        the positional geometry through a pretrained model's layers
``constructive``      12       P1's constructive claim: fixed corpus tables, trained
``nope``, ``tasks``   10       P2: position information without positional encodings
``papers``            all      the numbers the two papers report
====================  =======  ==========================================================

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
