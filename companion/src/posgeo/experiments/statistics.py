"""Chapter 2 (the statistical geometry of a corpus): summary tables of corpora and geometries."""

from __future__ import annotations

from typing import Any, Mapping
import numpy as np
import pandas as pd
from posgeo import (BootstrapGeometry, CorpusGeometry, array_digest, bootstrap_geometry, cached, load_corpus,
                    matched_hellinger_matrix, noise_share, overlap_groups)

__all__ = ['corpus_summary', 'geometry_summary', 'GROUPED_CORPORA', 'corpus_bootstrap']


def corpus_summary(corpora: Mapping[str, Any], n_positions: Mapping[str, int]) -> pd.DataFrame:
    """One row per corpus: size, vocabulary, lengths, and how many sequences reach the last position.

    Parameters
    ----------
    corpora : mapping of str to Corpus
    n_positions : mapping of str to int
        Positions analysed per corpus.

    Returns
    -------
    pandas.DataFrame
        Columns ``sequences``, ``tokens``, ``vocab_size``, ``distinct_tokens``, ``median_length``,
        ``max_length``, ``n_positions``, ``reach_last`` (sequences reaching position n-1).

    Examples
    --------
    >>> from posgeo import load_corpus
    >>> corpus_summary({"syn": load_corpus("synthetic", n_sequences=100)}, {"syn": 32})["reach_last"].tolist()
    [100]
    """
    rows = {}
    for name, c in corpora.items():
        seqs = c.sequences
        lengths = np.diff(seqs.offsets)
        n = int(n_positions[name])
        rows[name] = {
            "sequences": int(lengths.size),
            "tokens": int(lengths.sum()),
            "vocab_size": int(c.vocab_size),
            "distinct_tokens": int(np.unique(seqs.tokens).size),
            "median_length": float(np.median(lengths)),
            "max_length": int(lengths.max()),
            "n_positions": n,
            "reach_last": int((lengths >= n).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def geometry_summary(geometries: Mapping[str, CorpusGeometry]) -> pd.DataFrame:
    """One row per corpus: typical distances, the noise floor, and its share.

    Parameters
    ----------
    geometries : mapping of str to CorpusGeometry

    Returns
    -------
    pandas.DataFrame
        Columns ``adjacent`` (mean plug-in distance at offset 1), ``mean`` (mean over pairs),
        ``adjacent_corrected`` and ``mean_corrected`` (the same for ``debiased``),
        ``adjacent_first_order`` (the first-order correction at offset 1),
        ``noise_floor_first`` / ``noise_floor_last`` (split-half distance at the first and last
        position), ``flagged`` (positions with too few sequences), ``noise_share``
        (see :func:`noise_share`).
    """
    rows = {}
    for name, g in geometries.items():
        iu = np.triu_indices(g.n_positions, k=1)
        rows[name] = {
            "adjacent": float(np.diagonal(g.distances, 1).mean()),
            "mean": float(g.distances[iu].mean()),
            "adjacent_corrected": float(np.diagonal(g.hybrid, 1).mean()),
            "mean_corrected": float(g.hybrid[iu].mean()),
            "adjacent_first_order": float(np.diagonal(g.first_order, 1).mean()),
            "noise_floor_first": float(g.split_half[0]),
            "noise_floor_last": float(g.split_half[-1]),
            "flagged": int(g.flagged.sum()),
            "noise_share": noise_share(g),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


GROUPED_CORPORA = ("sst2",)
"""Corpora whose sequences are resampled in :func:`~posgeo.overlap_groups` groups (SST-2:
parse-tree phrases nested in their sentences)."""


def corpus_bootstrap(
    name: str,
    n_positions: int,
    *,
    n_boot: int = 25,
    seed: int = 0,
    split: str = "train",
    widened: bool = False,
    progress: bool = True,
) -> BootstrapGeometry:
    """The book's intervals of a corpus' corrected geometry (cached).

    The hybrid estimator with half-sample intervals (:func:`~posgeo.bootstrap_geometry`,
    ``estimator="hybrid"``); for the corpora in :data:`GROUPED_CORPORA` the halvings keep
    each :func:`~posgeo.overlap_groups` group (a sentence and its phrases) together. With
    ``widened=True`` every interval is widened by the disagreement with the matched
    estimator (:meth:`~posgeo.BootstrapGeometry.widened`; its half-splits keep the same
    groups together), the intervals whose coverage of a known truth chapter 2 measures.

    Parameters
    ----------
    name : str
        A corpus :func:`~posgeo.load_corpus` knows ("synthetic", "sst2", "imdb").
    n_positions : int
    n_boot : int, keyword-only, default 25
        Halvings.
    seed : int, keyword-only, default 0
    split : str, keyword-only, default "train"
    widened : bool, keyword-only, default False
        Widen by the gap to the matched estimate (computed once and cached).
    progress : bool, keyword-only, default True

    Returns
    -------
    BootstrapGeometry

    Examples
    --------
    >>> bg = corpus_bootstrap("synthetic", 8, n_boot=4, progress=False)
    >>> bg.method, bg.estimate.shape
    ('half-sample', (8, 8))
    >>> wide = corpus_bootstrap("synthetic", 8, n_boot=4, widened=True, progress=False)
    >>> bool((wide.high >= bg.high).all() and (wide.low <= bg.low).all())
    True
    """
    if not isinstance(widened, (bool, np.bool_)):
        raise TypeError(f"widened must be True or False, got {type(widened).__name__}")
    corpus = load_corpus(name, split)

    def groups() -> Any:
        return overlap_groups(corpus) if name in GROUPED_CORPORA else None

    def compute() -> BootstrapGeometry:
        return bootstrap_geometry(corpus, n_positions, estimator="hybrid", n_boot=n_boot, groups=groups(), seed=seed,
                                  progress=progress)

    key = {
        "corpus": repr(corpus),
        "options": getattr(corpus, "options", None),
        "tokens": array_digest(np.asarray(corpus.sequences.tokens)),
        "offsets": array_digest(np.asarray(corpus.sequences.offsets)),
        "n": n_positions,
        "n_boot": n_boot,
        "seed": seed,
        "grouped": name in GROUPED_CORPORA,
        "method": "hybrid half-sample, squared-scale pair intervals",
    }
    boot = cached("corpus_bootstrap", key, compute, expect=BootstrapGeometry)
    if not widened:
        return boot

    def matched() -> np.ndarray:
        return matched_hellinger_matrix(corpus, n_positions, corpus.vocab_size, seed=seed, groups=groups())

    reference = cached("corpus_matched", {**key, "method": "matched, 5 half-splits, grouped"}, matched,
                       expect=np.ndarray)
    return boot.widened(reference)
