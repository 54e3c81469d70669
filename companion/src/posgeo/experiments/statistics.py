"""Chapter 3 (the statistical geometry of a corpus): summary tables of corpora and geometries."""

from __future__ import annotations

from typing import Any, Mapping
import numpy as np
import pandas as pd
from posgeo import (NESTED_SPLITS, BootstrapGeometry, CorpusGeometry, array_digest, bootstrap_geometry, cached,
                    hybrid_hellinger_matrix, load_corpus, matched_hellinger_matrix, noise_share, overlap_groups)
from posgeo.validation import check_int

__all__ = ['corpus_summary', 'geometry_summary', 'GROUPED_CORPORA', 'corpus_bootstrap', 'estimator_comparison']


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


GROUPED_CORPORA = tuple(sorted({name for name, _ in NESTED_SPLITS}))
"""Corpora whose sequences are resampled in :func:`~posgeo.overlap_groups` groups (SST-2:
parse-tree phrases nested in their sentences; from :data:`~posgeo.NESTED_SPLITS`)."""


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
    ``widened=True`` every interval is widened by the disagreement with a second estimator
    (:meth:`~posgeo.BootstrapGeometry.widened`), the intervals whose coverage of a known
    truth chapter 3 measures: for corpora of independent sequences the matched estimator
    (:func:`~posgeo.matched_hellinger_matrix`), the best-covering reference on chapter 3's
    known-truth corpora of independent sequences; for :data:`GROUPED_CORPORA` the
    jackknifed hybrid over blocks of the same groups (``hybrid_hellinger_matrix(...,
    split="jackknife", groups=...)``), the best-covering one on its corpora of nested
    phrases.

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
        return matched_hellinger_matrix(corpus, n_positions, corpus.vocab_size, seed=seed)

    def jackknife() -> np.ndarray:
        return hybrid_hellinger_matrix(corpus, n_positions, corpus.vocab_size, split="jackknife", groups=groups(),
                                       seed=seed)

    if name in GROUPED_CORPORA:
        reference = cached("corpus_jackknife", {**key, "method": "hybrid, jackknife over 20 blocks of groups"},
                           jackknife, expect=np.ndarray)
    else:
        reference = cached("corpus_matched", {**key, "method": "matched, 5 half-splits"}, matched, expect=np.ndarray)
    return boot.widened(reference)


def estimator_comparison(name: str, n_positions: int, *, width: int = 16, seed: int = 0,
                         split: str = "train") -> pd.DataFrame:
    """A corpus' corrected distances by four estimators, by range of positions.

    The hybrid estimator, the matched estimator with halves of sequences and with halves of
    :func:`~posgeo.overlap_groups` groups, and the jackknifed hybrid over blocks of the same
    groups (``hybrid_hellinger_matrix(..., split="jackknife", groups=...)``): the mean
    distance over all pairs, over the pairs that involve position 0, and over the pairs
    inside each run of ``width`` positions after it; and the share of those pairs that the
    jackknife puts at 0.

    Parameters
    ----------
    name : str
        A corpus :func:`~posgeo.load_corpus` knows.
    n_positions : int
    width : int, keyword-only, default 16
        Positions per range (after position 0).
    seed : int, keyword-only, default 0
        Seed of the half-splits and of the jackknife's blocks.
    split : str, keyword-only, default "train"

    Returns
    -------
    pandas.DataFrame
        One row per range (``"all pairs"``, ``"pairs with position 0"``, ``"pairs within
        1-16"``, ...);
        columns ``hybrid``, ``matched, halves of sequences``, ``matched, halves of sentence
        groups``, ``jackknife, blocks of sentence groups`` and ``jackknife at 0``.

    Examples
    --------
    >>> t = estimator_comparison("synthetic", 9, width=4)
    >>> list(t.index)
    ['all pairs', 'pairs with position 0', 'pairs within 1-4', 'pairs within 5-8']
    """
    n = check_int(n_positions, "n_positions", minimum=3)
    w = check_int(width, "width", minimum=2)
    corpus = load_corpus(name, split)
    groups, V = overlap_groups(corpus), corpus.vocab_size
    estimates = {
        "hybrid": hybrid_hellinger_matrix(corpus, n, V),
        "matched, halves of sequences": matched_hellinger_matrix(corpus, n, V, seed=seed),
        "matched, halves of sentence groups": matched_hellinger_matrix(corpus, n, V, seed=seed, groups=groups),
        "jackknife, blocks of sentence groups": hybrid_hellinger_matrix(corpus, n, V, split="jackknife",
                                                                        groups=groups, seed=seed),
    }
    i, j = np.triu_indices(n, 1)
    masks = {"all pairs": i >= 0, "pairs with position 0": i == 0}
    for start in range(1, n, w):
        stop = min(start + w, n) - 1
        inside = (i >= start) & (j <= stop)
        if inside.any():
            masks[f"pairs within {start}-{stop}"] = inside
    jk = estimates["jackknife, blocks of sentence groups"][i, j]
    rows = {label: {**{k: float(D[i, j][m].mean()) for k, D in estimates.items()},
                    "jackknife at 0": float((jk[m] == 0).mean())}
            for label, m in masks.items()}
    return pd.DataFrame(rows).T
