"""Sequence-level bootstrap intervals of a corpus' positional Hellinger geometry.

:func:`bootstrap_geometry` resamples whole sequences (or whole groups of sequences) with
replacement and recomputes the plug-in, first-order or matched Hellinger distances on every
resample, without re-counting the corpus: the per-sequence (position, token) entries are
indexed once, and each replicate only reweights them."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ._geometry import check_distance_matrix, hellinger_matrix, order_free_baselines, pairwise_distances
from ._linalg import small_blas
from ._estimators import hybrid_hellinger_from_counts
from ._marginals import first_order_hellinger_matrix, hybrid_hellinger_matrix, matched_hellinger_matrix, positional_marginals
from ._progress import progress_bar
from ._sequences import Corpus, Sequences, stratified_halves
from .validation import check_float, check_groups, check_int

__all__ = ['BootstrapGeometry', 'bootstrap_geometry', 'stress_intervals', 'stress_differences']

Estimator = Literal["plugin", "first_order", "matched", "hybrid"]
_ESTIMATORS = ("plugin", "first_order", "matched", "hybrid")

# Chord distances below this are recomputed without the cancellation of 1 - BC (as
# hellinger_matrix does for its own estimate).
_NEAR_CHORD = 1e-4
# A token goes to the dense block of the Gram product when it occurs at more than
# n / _DENSE_SHARE positions: a dense column costs n^2 / 2 BLAS multiply-adds, a sparse token
# at k positions k (k - 1) / 2 products of pairs, each about 250 times dearer (measured on
# IMDB, n = 510: 6.7 us a dense column, 12 ns a pair), so the break-even is near k = n / 16.
_DENSE_SHARE = 16
# At most this many pairs of positions are listed for the sparse tokens (20 bytes a pair:
# 0.3 GB); the dense block takes more tokens beyond it.
_MAX_PAIRS = 2**24
# Up to this many (position, token) pairs, cells are found with a lookup table (linear time,
# 5 bytes a pair: 0.3 GB at the limit); beyond it by sorting.
_LOOKUP_CELLS = 2**26


@dataclass(frozen=True, eq=False)
class BootstrapGeometry:
    """Bootstrap percentile intervals of a positional distance matrix.

    Attributes
    ----------
    estimate : numpy.ndarray, shape (n, n)
        The estimator on the corpus itself (what the library's function returns).
    low, high : numpy.ndarray, shape (n, n)
        Interval of every distance at ``level``. Percentile method: the ``(1 - level) / 2``
        and ``(1 + level) / 2`` quantiles of the replicates (linear interpolation;
        replicates in which a distance is undefined, NaN, are left out of its quantiles).
        Half-sample method: ``estimate -/+ t * se`` (see :meth:`interval`), ``low``
        clipped at 0.
    n_boot : int
        Number of bootstrap replicates.
    level : float
        Nominal coverage of the intervals, in (0, 1).
    estimator : str
        ``"plugin"``, ``"first_order"`` or ``"matched"``.
    replicates : numpy.ndarray, shape (n_boot, n * (n - 1) // 2), float32
        The upper triangle (``numpy.triu_indices(n, 1)``, row by row) of every replicate's
        matrix; :meth:`replicate` rebuilds one matrix. ``n_boot * n * (n - 1) * 2`` bytes:
        104 MB at n = 510 with 200 replicates.
    n_groups : int
        Resampling units: sequences, or groups when ``groups`` was given.
    n_empty : int
        Replicates in which some position had no sequence at all (its distances are NaN in
        that replicate); 0 unless a position is reached by very few sequences.
    method : str
        ``"percentile"`` (resampling with replacement; every estimator but ``"hybrid"``) or
        ``"half-sample"`` (``"hybrid"``: see :func:`bootstrap_geometry`).
    complements : numpy.ndarray or None, shape (n_boot, n * (n - 1) // 2), float32
        ``"half-sample"`` only: the estimator on the other half of each halving (the
        ``replicates`` hold the first half's).
    reference : numpy.ndarray or None, shape (n, n)
        Set by :meth:`widened`: a second estimator's matrix; every interval is then
        widened on both sides by the two estimators' disagreement.
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_boot: int
    level: float
    estimator: str
    replicates: np.ndarray
    n_groups: int
    n_empty: int
    method: str = "percentile"
    complements: np.ndarray | None = None
    reference: np.ndarray | None = None

    @property
    def n_positions(self) -> int:
        """Number of positions n."""
        return int(self.estimate.shape[0])

    @property
    def caveat(self) -> str | None:
        """What the intervals cannot do, or ``None`` (the half-sample intervals of the hybrid
        estimator). Percentile intervals of the other estimators keep the estimator's bias:
        they cannot cover true distances that the estimator overestimates.

        >>> from posgeo import synthetic_corpus
        >>> bootstrap_geometry(synthetic_corpus(n_sequences=200), 6, estimator="plugin", n_boot=5,
        ...                    progress=False).caveat[:40]
        'percentile intervals of the plugin estim'
        """
        if self.method == "half-sample":
            return None
        return (f"percentile intervals of the {self.estimator} estimator: they measure its sampling spread but keep "
                "its bias, so where the bias is large (positions that differ in rare tokens) they cannot hold the "
                "true distances; use estimator='hybrid' for intervals that do")

    def replicate(self, b: int) -> np.ndarray:
        """The distance matrix of replicate ``b`` (half-sample method: of the first half of
        halving ``b``; :attr:`complements` holds the other half's).

        Parameters
        ----------
        b : int
            In ``[0, n_boot)``.

        Returns
        -------
        numpy.ndarray, shape (n, n), float64
            Symmetric, zero diagonal (NaN rows for a position that replicate left empty).
        """
        b = check_int(b, "b", minimum=0, maximum=self.n_boot - 1, hint=f"there are {self.n_boot} replicates")
        return _square(self.replicates[b], self.n_positions)

    def widened(self, reference: Any) -> "BootstrapGeometry":
        r"""The same intervals widened by the disagreement with a second estimator.

        A sampling interval cannot contain the estimator's own bias. Where two estimators
        with different biases disagree, the gap between them is a measure of it: every
        interval becomes :math:`[\mathrm{low} - |s(D) - s(R)|,\ \mathrm{high} + |s(D) - s(R)|]`
        (``low`` clipped at 0 for the distances), with D the :attr:`estimate`, R the
        reference and s the statistic (the distance itself for :attr:`low` and
        :attr:`high`). Chapter 3 measures its coverage of a known truth: with the matched
        half-sample estimator (:func:`matched_hellinger_matrix`) as the reference of the
        hybrid one, at least 0.94 of the pairs' 95% intervals hold the true distance in every
        calibration case, against 0.60 to 0.97 without it, for intervals about twice as wide.
        On corpora of phrases nested in their sentences the better reference is the
        jackknifed hybrid over blocks of sentences (``hybrid_hellinger_matrix(...,
        split="jackknife", groups=...)``): about 0.97 where positions differ, against 0.89
        to 0.93 with the grouped matched estimate.

        Parameters
        ----------
        reference : array_like, shape (n, n)
            A distance matrix of the same positions (checked like any distance matrix).

        Returns
        -------
        BootstrapGeometry
            With :attr:`reference` set, :attr:`low` and :attr:`high` widened, and
            :meth:`interval` widening every statistic's interval the same way.

        Raises
        ------
        ValueError
            ``reference`` is not an (n, n) distance matrix, or this geometry is widened already.

        Examples
        --------
        >>> from posgeo import matched_hellinger_matrix, synthetic_corpus
        >>> corpus = synthetic_corpus(n_sequences=400)
        >>> bg = bootstrap_geometry(corpus, 8, estimator="hybrid", n_boot=5, progress=False)
        >>> wide = bg.widened(matched_hellinger_matrix(corpus, 8, corpus.vocab_size))
        >>> bool(np.all(wide.low <= bg.low) and np.all(wide.high >= bg.high))
        True
        """
        if self.reference is not None:
            raise ValueError("this geometry is widened already; widen the original BootstrapGeometry instead")
        R = check_distance_matrix(reference, name="reference")
        if R.shape != self.estimate.shape:
            raise ValueError(
                f"reference has shape {R.shape} but the geometry has {self.estimate.shape}; "
                "pass the second estimator's matrix for the same positions"
            )
        gap = np.abs(self.estimate - R)
        return replace(self, low=np.clip(self.low - gap, 0.0, None), high=self.high + gap, reference=R)

    def interval(self, statistic: Callable[[np.ndarray], Any], *, triangle: bool = False) -> tuple[Any, Any, Any]:
        r"""Estimate and interval of any function of the distance matrix.

        Parameters
        ----------
        statistic : callable
            Maps an (n, n) distance matrix to a number or an array of fixed shape (a stress,
            an effective rank, a violation rate, ...). It is called on :attr:`estimate` and on
            every :meth:`replicate`.
        triangle : bool, keyword-only, default False
            Call ``statistic`` on the upper triangle instead (``numpy.triu_indices(n, 1)``,
            shape (n * (n - 1) / 2,), float64): no (n, n) matrix is built per replicate, which
            is faster for statistics of the pairs (means, stresses).

        Returns
        -------
        (estimate, low, high)
            ``statistic(estimate)`` and its interval, floats for a scalar statistic, arrays
            otherwise. Percentile method: the ``(1 - level) / 2`` and ``(1 + level) / 2``
            quantiles of the statistic over the replicates (NaN values left out).
            Half-sample method: ``s(estimate) -/+ t * se`` with
            :math:`se^2 = \frac1B \sum_b \bigl(s(D_{A_b}) - s(D_{B_b})\bigr)^2 / 4` over
            the B halvings and t the ``(1 + level) / 2`` quantile of Student's t with B - 1
            degrees of freedom (not clipped: clip it yourself where the statistic is
            bounded). After :meth:`widened`, both ends move out by
            ``|s(estimate) - s(reference)|``.

        Raises
        ------
        TypeError
            ``statistic`` is not callable or does not return numbers.
        ValueError
            Its value's shape changes between replicates.

        Examples
        --------
        >>> from posgeo import synthetic_corpus
        >>> bg = bootstrap_geometry(synthetic_corpus(n_sequences=300), 8, estimator="plugin", n_boot=50, progress=False)
        >>> est, low, high = bg.interval(lambda D: D[0, 4])
        >>> bool(low <= est <= high), est == float(bg.estimate[0, 4])
        (True, True)
        """
        if not callable(statistic):
            raise TypeError(
                f"statistic must be a callable taking an (n, n) distance matrix, got {type(statistic).__name__}; "
                "pass e.g. lambda D: D[0, 1]"
            )

        def value(D: np.ndarray) -> np.ndarray:
            out = np.asarray(statistic(D))
            if out.dtype.kind not in "biuf":
                raise TypeError(f"statistic must return numbers, got dtype {out.dtype}")
            return out.astype(np.float64)

        if not isinstance(triangle, (bool, np.bool_)):
            raise TypeError(f"triangle must be True or False, got {type(triangle).__name__}")
        n = self.n_positions
        iu = np.triu_indices(n, 1)
        est = value(self.estimate[iu].copy() if triangle else self.estimate.copy())

        def values(tri: np.ndarray) -> np.ndarray:
            vals = np.empty((self.n_boot, *est.shape))
            for b in range(self.n_boot):
                v = value(tri[b].astype(np.float64) if triangle else _square(tri[b], n))
                if v.shape != est.shape:
                    raise ValueError(
                        f"statistic returned shape {v.shape} on replicate {b} but {est.shape} on the estimate; "
                        "it must return the same shape for every matrix"
                    )
                vals[b] = v
            return vals

        if self.method == "half-sample":
            assert self.complements is not None
            half = _half_sample_se(values(self.replicates), values(self.complements))
            t = _t_quantile(self.level, self.n_boot)
            low, high = est - t * half, est + t * half
        else:
            low, high = _percentiles(values(self.replicates), self.level)
        if self.reference is not None:  # widened by the estimators' disagreement
            gap = np.abs(est - value(self.reference[iu].copy() if triangle else self.reference.copy()))
            low, high = low - gap, high + gap
        if est.ndim == 0:
            return float(est), float(low), float(high)
        return est, low, high


def bootstrap_geometry(
    sequences: Any,
    n_positions: int,
    *,
    vocab_size: int | None = None,
    estimator: Estimator = "hybrid",
    n_boot: int | None = None,
    level: float = 0.95,
    groups: Any = None,
    n_splits: int = 5,
    seed: int = 0,
    progress: bool = True,
) -> BootstrapGeometry:
    r"""Bootstrap the positional Hellinger geometry of a corpus by resampling sequences.

    The default, ``estimator="hybrid"``, is the calibrated estimator with half-sample
    intervals: on a known truth its 95% intervals hold the true distances. The other
    estimators are resampled with replacement: each replicate draws as many sequences as
    the corpus has (or, with ``groups``, as many groups) and recomputes the estimator; the
    interval of every distance is the percentile interval of the replicates. Those
    intervals measure the estimator's spread but keep its bias (resampling a sample adds
    its noise a second time): where positions differ in rare tokens they can cover **none**
    of the true distances, and the result's :attr:`BootstrapGeometry.caveat` says so.
    Resampling whole sequences keeps the dependence between the positions of one text.

    Estimators (chord Hellinger distances, in [0, 1]):

    - ``"plugin"``: :func:`hellinger_matrix` of the plug-in marginals
      (:func:`positional_marginals`);
    - ``"first_order"``: :func:`first_order_hellinger_matrix`,
      :math:`\sqrt{\max(0, H^2_{ij} - b_i - b_j)}` with the split-half bias :math:`b_i`;
    - ``"matched"``: :func:`matched_hellinger_matrix`, from cross-half distances;
    - ``"hybrid"``: :func:`hybrid_hellinger_matrix` (the estimator that wins the book's
      known-truth calibration), with **half-sample** intervals instead of percentile ones.

    **Half-sample intervals** (``"hybrid"``). Resampling with replacement cannot serve an
    estimator built on collision counts: a sequence drawn twice makes its tokens collide
    with themselves, and the bootstrap world's truth is the corpus' plug-in geometry,
    whose bias the estimator was designed to remove. Instead each of ``n_boot`` random
    halvings splits the units (sequences, or groups) into two disjoint halves A and B,
    stratified by length so that each half holds about half of the units reaching every
    position, and the estimator is computed on each half. For a statistic s of D, the
    halves' difference gives the standard error
    :math:`se^2 = \tfrac1B\sum_b (s(D_{A_b}) - s(D_{B_b}))^2/4`, which estimates the
    variance of the full-sample estimate when that variance falls like 1/N (McCarthy's
    half-sampling, 1969) and overestimates it when it falls faster (the collision part,
    like 1/N^2): the intervals ``s(estimate) -/+ t se`` (t: Student's quantile with B - 1
    degrees of freedom) err on the wide side. They assume the estimator is nearly unbiased,
    which is what the book's calibration appendix measures (``book/appendix_calibration``, where their
    coverage of the known truth is reported too: 60 to 97% of the pairs at SST-2's and
    IMDB's sizes); :meth:`BootstrapGeometry.widened` adds the disagreement with a second
    estimator to every interval (at least 94% there). Each halving costs two estimates on half
    the corpus (IMDB train at n = 510: about 3 s).

    The estimate is the library's function on the corpus. In a replicate the corrections
    are recomputed from weighted counts, the resample being split into halves by *binomial
    thinning*: each of the :math:`w_k` copies of sequence :math:`k` goes to half A with
    probability 1/2, as a random split of the resample would send it. That is exactly how
    ``"matched"`` splits; :func:`hellinger_noise_floor` (behind ``"first_order"``) instead
    halves the sequences reaching each position exactly, which thinning matches up to
    :math:`O(\sqrt N)` sequences, a second-order change of the expected split-half distance. A
    position with an empty half in a split is left out of that split's average (bias 0 when
    every split leaves it empty, as the library gives below 2 sequences).

    Speed and memory: the kept tokens are indexed once as a sparse 0/1 (cells x sequences)
    matrix, a cell being a (position, token) pair that occurs (IMDB train at n = 510: 1.5
    million cells, 6.6 million entries, about 80 MB). A replicate's weighted counts are one
    sparse product with its weights, and its Gram matrix :math:`\sqrt{\hat\mu}\sqrt{\hat\mu}^T`
    is a dense BLAS product over the tokens seen at more than n/16 positions plus a sum over
    the pairs of positions that share one of the other tokens. ``"first_order"`` adds
    ``n_splits`` sparse products per replicate (about twice the plug-in's time),
    ``"matched"`` ``n_splits`` cross-half Gram matrices (about 8 times with 5 splits). BLAS
    runs on one thread for n <= 1024 (:func:`small_blas`). The replicates are kept as
    float32 upper triangles: ``2 * n_boot * n * (n - 1)`` bytes (104 MB at n = 510, 200
    replicates). Measured on IMDB train at n = 510 (``benchmarks/bench_bootstrap.py``, a
    shared 2-core machine): 200 plug-in replicates in about 35 s (0.12 CPU seconds each),
    4x less CPU time than resampling and recounting the corpus every time, with a peak of
    about 0.5 GB besides the corpus.

    Parameters
    ----------
    sequences : Corpus, Sequences or iterable of integer sequences
        The corpus, as for :func:`positional_marginals`.
    n_positions : int
        Positions 0..n-1 analysed; each must be reached by some sequence (by 2 for
        ``"matched"``).
    vocab_size : int, keyword-only, optional
        Number of token ids; default the ``vocab_size`` of a Corpus or Sequences (required
        for a plain iterable).
    estimator : {"hybrid", "plugin", "first_order", "matched"}, keyword-only, default "hybrid"
    n_boot : int, keyword-only, optional
        Number of replicates; default 20 halvings for ``"hybrid"`` (20 to 50 are usually
        enough, the relative error of se being about ``1 / sqrt(2 n_boot)`` or less) and 200
        replicates for the others.
    level : float, keyword-only, default 0.95
        Nominal coverage of the intervals, in (0, 1).
    groups : array of int, shape (m,), keyword-only, optional
        One group id per sequence: whole groups are resampled together (e.g. SST-2 phrases
        by their source sentence). Default: every sequence is its own group.
    n_splits : int, keyword-only, default 5
        Random half-splits of ``"first_order"`` and ``"matched"`` (estimate and replicates).
    seed : int, keyword-only, default 0
        Seeds the resampling, the replicates' half-splits and the estimate's splits.
    progress : bool, keyword-only, default True
        Show a progress bar over the replicates.

    Returns
    -------
    BootstrapGeometry

    Raises
    ------
    TypeError
        A non-integer size or seed, a non-numeric level, ``groups`` not an integer array, a
        plain iterable without ``vocab_size``, or bad sequences.
    ValueError
        ``n_boot < 1``, ``level`` outside (0, 1), an unknown estimator, ``groups`` of the
        wrong length, fewer than 2 sequences or groups to resample, or a corpus the
        estimator refuses (a position no sequence reaches).

    Notes
    -----
    Replicate ``b`` resamples the units ``rng.integers(0, G, size=G)``, its ``b``-th such
    draw, with ``rng = numpy.random.default_rng(seed)`` and ``G`` the number of sequences
    or groups; the half-splits come from a generator spawned from the same seed. So, for
    one seed, every estimator sees the same resamples, and replicates of two estimators can
    be compared pairwise.

    A percentile interval is where the replicates lie, and they scatter about the
    estimator's target in the bootstrap world, whose true distances are the corpus'
    *plug-in* ones: the plug-in's upward bias comes back, and the corrections, which
    remove it on the corpus, remove it again only from the replicates' own noise (on a
    synthetic corpus of 1000 sequences, V = 64, the first-order replicates average 0.003
    above the plug-in estimate and 0.015 above the first-order one). Where that bias is
    large next to the sampling spread (few sequences, a large vocabulary, distant
    positions that share only rare tokens) the intervals sit above the truth and cover it
    far less often than ``level`` says; where the positions are well sampled the coverage
    is close to nominal (``tests/test_bootstrap.py`` measures both). On IMDB train at
    n = 510 the plug-in replicates average 0.047 above the estimate while the intervals are
    0.014 wide: no interval contains the estimate, and the truth is likely lower still. The
    replicates are kept, so other intervals (e.g. the basic one, ``2 * estimate - high`` to
    ``2 * estimate - low``) can be formed from them.

    Examples
    --------
    >>> from posgeo import synthetic_corpus
    >>> bg = bootstrap_geometry(synthetic_corpus(n_sequences=300), 8, estimator="plugin", n_boot=50, progress=False)
    >>> bg.estimate.shape, bg.low.shape, bg.replicates.shape
    ((8, 8), (8, 8), (50, 28))
    >>> bool(np.all(bg.low <= bg.high))
    True
    >>> est, low, high = bg.interval(lambda D: D[np.triu_indices(8, 1)].mean())
    >>> bool(est < low)  # the plug-in's bias: the replicates lie above the estimate
    True
    """
    n = check_int(n_positions, "n_positions")
    if n_boot is None:
        n_boot = 20 if estimator == "hybrid" else 200
    n_boot = check_int(n_boot, "n_boot", hint="the number of bootstrap replicates; 200 is usual (20 halvings for hybrid)")
    level = check_float(level, "level", hint="the coverage of the intervals, e.g. 0.95")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}; pass e.g. 0.95 for 95% intervals")
    if not isinstance(estimator, str) or estimator not in _ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; use one of {', '.join(map(repr, _ESTIMATORS))}")
    n_splits = check_int(n_splits, "n_splits")
    seed = check_int(seed, "seed", minimum=0)
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False, got {type(progress).__name__} {progress!r}")
    seqs = _as_sequences(sequences, vocab_size)
    V = seqs.vocab_size if vocab_size is None else check_int(vocab_size, "vocab_size")
    m = len(seqs)
    inverse, n_units = _group_index(groups, m)
    if n_units < 2:  # every resample would be the sample itself: intervals of zero width, not of no uncertainty
        what = "group" if groups is not None else "sequence"
        raise ValueError(
            f"a bootstrap needs at least 2 independent {what}s to resample, got {n_units}: every replicate would "
            f"repeat the sample and the intervals would have zero width; pass more sequences"
            + (" or finer groups" if groups is not None else "")
        )
    if estimator == "hybrid":
        return _half_sample(seqs, n, V, inverse, n_units, n_boot=n_boot, level=level, seed=seed, progress=progress)

    with small_blas(n):
        if estimator == "plugin":
            estimate = hellinger_matrix(positional_marginals(seqs, n, V))
        elif estimator == "first_order":
            estimate = first_order_hellinger_matrix(seqs, n, V, seed=seed, n_splits=n_splits)
        else:
            estimate = matched_hellinger_matrix(seqs, n, V, n_splits=n_splits, seed=seed)
        design = _Design(seqs, n, V)
        seeds = np.random.SeedSequence(seed)
        rng = np.random.default_rng(seeds)  # the resamples: the same for every estimator
        split_rng = np.random.default_rng(seeds.spawn(1)[0])
        iu = np.triu_indices(n, 1)
        reps = np.empty((n_boot, iu[0].size), dtype=np.float32)
        n_empty = 0
        halves = 0 if estimator == "plugin" else n_splits
        bar = progress_bar(range(n_boot), enabled=progress, desc=f"bootstrap ({estimator})", unit="replicate")
        for b in bar:
            w_units = np.bincount(rng.integers(0, n_units, size=n_units), minlength=n_units)
            w = w_units[inverse] if inverse is not None else w_units
            thinned = [split_rng.binomial(w, 0.5) for _ in range(halves)]
            D, empty = design.replicate(estimator, w, thinned)
            n_empty += int(empty)
            reps[b] = D[iu]
    low, high = _percentiles(reps, level)
    low_m, high_m = np.zeros((n, n)), np.zeros((n, n))
    for full, tri in ((low_m, low), (high_m, high)):
        full[iu] = tri
        full.T[iu] = tri
    return BootstrapGeometry(
        estimate=estimate,
        low=low_m,
        high=high_m,
        n_boot=n_boot,
        level=level,
        estimator=estimator,
        replicates=reps,
        n_groups=n_units,
        n_empty=n_empty,
    )


def _square(tri: np.ndarray, n: int) -> np.ndarray:
    """The symmetric (n, n) float64 matrix, zero diagonal, of an upper triangle."""
    out = np.zeros((n, n))
    iu = np.triu_indices(n, 1)
    out[iu] = tri
    out.T[iu] = tri
    return out


def _half_sample_se(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Half-sample standard error: root mean square of (a - b) / 2 over axis 0 (NaN left out)."""
    d = (a - b) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.sqrt(np.nanmean(d * d, axis=0))


def _t_quantile(level: float, n_boot: int) -> float:
    from scipy.stats import t as student_t

    return float(student_t.ppf((1.0 + level) / 2.0, df=max(n_boot - 1, 1)))


def _as_sequences(sequences: Any, vocab_size: int | None) -> Sequences:
    if isinstance(sequences, Corpus):
        return sequences.sequences
    if isinstance(sequences, Sequences):
        return sequences
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
        raise TypeError(
            f"sequences must be a Corpus, a Sequences or an iterable of integer sequences, got "
            f"{type(sequences).__name__}"
        )
    if vocab_size is None:
        raise TypeError(
            "vocab_size is needed for a plain iterable of sequences; pass vocab_size=... (the tokenizer's "
            "vocabulary size) or a Corpus/Sequences, which carry it"
        )
    return Sequences.from_list(sequences, vocab_size=check_int(vocab_size, "vocab_size"))


def _group_index(groups: Any, m: int) -> tuple[np.ndarray | None, int]:
    """Map group ids to 0..G-1 (``None``: every sequence its own unit)."""
    if groups is None:
        return None, m
    return check_groups(groups, m)


def _percentiles(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles over axis 0 (float64), NaN left
    out; a slice that is NaN in every replicate gets NaN."""
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    flat = values.reshape(values.shape[0], -1)
    lo, hi = np.empty(flat.shape[1]), np.empty(flat.shape[1])
    step = 1 << 15  # columns converted to float64 at a time
    for s in range(0, flat.shape[1], step):
        block = flat[:, s : s + step].astype(np.float64)
        if np.isnan(block).any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
                lo[s : s + step], hi[s : s + step] = np.nanquantile(block, q, axis=0)
        else:
            lo[s : s + step], hi[s : s + step] = np.quantile(block, q, axis=0)
    return lo.reshape(values.shape[1:]), hi.reshape(values.shape[1:])


def _half_sample(
    seqs: Sequences,
    n: int,
    V: int,
    inverse: np.ndarray | None,
    n_units: int,
    *,
    n_boot: int,
    level: float,
    seed: int,
    progress: bool,
) -> BootstrapGeometry:
    """Half-sample intervals of the hybrid estimator (see :func:`bootstrap_geometry`)."""
    estimate = hybrid_hellinger_matrix(seqs, n, V)
    design = _Design(seqs, n, V, layout=False)
    lengths = np.diff(np.asarray(seqs.offsets, dtype=np.int64))
    ones = np.ones(len(seqs))
    full = design.weighted_counts(ones)
    N = design.reach(ones)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    iu = np.triu_indices(n, 1)
    reps = np.empty((n_boot, iu[0].size), dtype=np.float32)
    comps = np.empty_like(reps)
    table = np.zeros(n * V)
    table[design.flat_cells] = full
    est_sq = hybrid_hellinger_from_counts(table.reshape(n, V), N, squared=True)[iu]
    table[design.flat_cells] = 0.0
    diff_sq = np.zeros(iu[0].size)  # sum over halvings of ((H2_A - H2_B) / 2)^2
    bar = progress_bar(range(n_boot), enabled=progress, desc="half-samples (hybrid)", unit="halving")
    with small_blas(n):
        for b in bar:
            w = stratified_halves(lengths, seed=rng, groups=inverse).astype(np.float64)
            c_a = design.weighted_counts(w)
            N_a = design.reach(w)
            for out, c, Nh in ((reps, c_a, N_a), (comps, full - c_a, N - N_a)):
                if Nh.min() < 2:
                    i = int(np.argmax(Nh < 2))
                    raise ValueError(
                        f"a half-sample leaves position {i} with {int(Nh[i])} sequence(s); the hybrid "
                        "half-sample intervals need at least 2 in each half (about 4 units reaching every "
                        "position): pass a smaller n_positions"
                    )
                table[design.flat_cells] = c
                out[b] = hybrid_hellinger_from_counts(table.reshape(n, V), Nh, squared=True)[iu]
                table[design.flat_cells] = 0.0
            diff_sq += ((reps[b].astype(np.float64) - comps[b]) / 2.0) ** 2
            for out in (reps, comps):  # keep distances: the scale of the statistics
                np.sqrt(np.clip(out[b], 0.0, None), out=out[b])
    # per-pair intervals on the squared scale, where the estimator is nearly unbiased and
    # identical positions average 0; then mapped to distances
    se_sq = np.sqrt(diff_sq / n_boot)
    t = _t_quantile(level, n_boot)
    low_m, high_m = np.zeros((n, n)), np.zeros((n, n))
    low_m[iu] = np.sqrt(np.clip(est_sq - t * se_sq, 0.0, None))
    high_m[iu] = np.sqrt(np.clip(est_sq + t * se_sq, 0.0, None))
    low_m.T[iu] = low_m[iu]
    high_m.T[iu] = high_m[iu]
    return BootstrapGeometry(
        estimate=estimate,
        low=low_m,
        high=high_m,
        n_boot=n_boot,
        level=level,
        estimator="hybrid",
        replicates=reps,
        n_groups=n_units,
        n_empty=0,
        method="half-sample",
        complements=comps,
    )


class _Design:
    """The corpus indexed once: cells, the cells x sequences incidence, the Gram layout."""

    def __init__(self, seqs: Sequences, n: int, V: int, *, layout: bool = True) -> None:
        offsets = np.asarray(seqs.offsets, dtype=np.int64)
        lengths = np.diff(offsets)
        m = lengths.size
        self.clip = np.minimum(lengths, n)
        pos = np.arange(offsets[-1], dtype=np.int64) - np.repeat(offsets[:-1], lengths)
        keep = pos < n
        flat = pos[keep] * V + np.asarray(seqs.tokens)[keep].astype(np.int64)
        del pos, keep
        if n * V <= _LOOKUP_CELLS:  # linear time: mark the (position, token) pairs that occur
            seen = np.zeros(n * V, dtype=bool)
            seen[flat] = True
            cells = np.flatnonzero(seen)
            lookup = np.cumsum(seen, dtype=np.int32)
            del seen
            lookup -= 1
            cell_of = lookup[flat]
            del lookup
        else:
            cells, cell_of = np.unique(flat, return_inverse=True)
            cell_of = cell_of.reshape(-1)
        del flat
        self.n, self.V, self.m = n, V, m
        self.cell_pos = cells // V
        cell_tok = cells % V
        self.n_cells = cells.size
        # Incidence X[c, k] = 1 when sequence k has cell c. The kept tokens are listed sequence
        # by sequence, and within a sequence by position, hence by cell: that is X in CSC form
        # as it stands, and scipy turns CSC into CSR in linear time.
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(self.clip, out=indptr[1:])
        idx_dtype = np.int32 if max(self.n_cells, indptr[-1]) < np.iinfo(np.int32).max else np.int64
        self.X = sp.csc_matrix(
            (np.ones(cell_of.size), cell_of.astype(idx_dtype), indptr.astype(idx_dtype)), shape=(self.n_cells, m)
        ).tocsr()
        del cell_of
        self.row_ptr = np.searchsorted(self.cell_pos, np.arange(n + 1))
        self.row_len = np.diff(self.row_ptr)
        self.cell_tok = cell_tok
        self.flat_cells = cells  # position * V + token of every cell
        if layout:  # the Gram products' layout (not needed by the half-sample path)
            self._layout(np.bincount(cell_tok, minlength=V))

    def _layout(self, per_token: np.ndarray) -> None:
        """Split the tokens between the dense BLAS block and the sparse list of pairs."""
        n, cell_tok = self.n, self.cell_tok
        # per_token[v]: positions at which token v occurs; a sparse token with k of them
        # contributes k (k - 1) / 2 pairs of positions
        k = per_token.astype(np.int64)
        thr = max(1, n // _DENSE_SHARE)
        sizes = np.bincount(k, weights=k * (k - 1) / 2, minlength=n + 1)
        while thr > 1 and sizes[: thr + 1].sum() > _MAX_PAIRS:
            thr //= 2
        dense_tok = k > thr
        self.Vd = int(dense_tok.sum())
        d_col = np.cumsum(dense_tok) - 1
        dense = dense_tok[cell_tok]
        self.dense_cells = np.flatnonzero(dense)
        self.dense_flat = self.cell_pos[self.dense_cells] * self.Vd + d_col[cell_tok[self.dense_cells]]
        self._buffers: list[np.ndarray | None] = [np.zeros((n, self.Vd)), None]  # B: "matched" only
        # sparse tokens: every pair of their cells (p before q, hence pos p < pos q), as
        # indices into the sparse cells and the flat upper-triangle entry they add to
        sc = np.flatnonzero(~dense)
        self.sparse_cells = sc
        self.sparse_pos = self.cell_pos[sc]
        order = np.argsort(cell_tok[sc], kind="stable")  # by token, then by position
        toks = cell_tok[sc][order]
        starts = np.flatnonzero(np.r_[True, toks[1:] != toks[:-1]]) if sc.size else np.zeros(0, np.int64)
        lens = np.diff(np.r_[starts, sc.size])
        first, second = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for size in np.unique(lens[lens >= 2]):
            g = starts[lens == size]
            iu, ju = np.triu_indices(int(size), 1)
            first.append((g[:, None] + iu[None, :]).ravel())
            second.append((g[:, None] + ju[None, :]).ravel())
        pa, pb = order[np.concatenate(first)], order[np.concatenate(second)]
        out = self.sparse_pos[pa] * n + self.sparse_pos[pb]
        by_out = np.argsort(out, kind="stable")  # sequential writes in the bincount
        self.pair_a = pa[by_out].astype(np.int32)
        self.pair_b = pb[by_out].astype(np.int32)
        self.pair_out = out[by_out].astype(np.int64 if n * n >= np.iinfo(np.int32).max else np.int32)

    # ------------------------------------------------------------------ building blocks
    def weighted_counts(self, w: np.ndarray) -> np.ndarray:
        """Weighted count of every cell, shape (cells,): ``X @ w``."""
        return self.X @ np.asarray(w, dtype=np.float64)

    def reach(self, w: np.ndarray) -> np.ndarray:
        """Weighted number of sequences reaching each position, shape (n,)."""
        hist = np.bincount(self.clip, weights=w, minlength=self.n + 1)
        return hist[::-1].cumsum()[::-1][1:]

    def roots(self, c: np.ndarray, N: np.ndarray) -> np.ndarray:
        """sqrt of the weighted marginal of every cell (0 at a position with no weight)."""
        inv = np.divide(1.0, N, out=np.zeros_like(N), where=N > 0)
        r = c * np.repeat(inv, self.row_len)  # cells are sorted by position
        return np.sqrt(r, out=r)

    def gram(self, ra: np.ndarray, rb: np.ndarray | None = None) -> np.ndarray:
        """Gram matrix of the (n, V) root matrices given cell-wise: ``A A^T``, or the symmetric
        part ``(A B^T + B A^T) / 2`` when ``rb`` is given."""
        n = self.n
        A = self._buffers[0]
        assert A is not None
        A.reshape(-1)[self.dense_flat] = ra[self.dense_cells]
        sa = ra[self.sparse_cells]
        if rb is None:
            G = A @ A.T
            up = sa[self.pair_a] * sa[self.pair_b]
            diag = sa * sa
        else:
            if self._buffers[1] is None:
                self._buffers[1] = np.zeros_like(A)
            B = self._buffers[1]
            B.reshape(-1)[self.dense_flat] = rb[self.dense_cells]
            G = A @ B.T
            G += G.T.copy()
            G *= 0.5
            sb = rb[self.sparse_cells]
            up = sa[self.pair_a] * sb[self.pair_b]
            up += sb[self.pair_a] * sa[self.pair_b]
            up *= 0.5
            diag = sa * sb
        if up.size:
            U = np.bincount(self.pair_out, weights=up, minlength=n * n).reshape(n, n)
            G += U
            G += U.T
        if diag.size:
            G[np.diag_indices(n)] += np.bincount(self.sparse_pos, weights=diag, minlength=n)
        return G

    def chord(self, r: np.ndarray, c: np.ndarray, N: np.ndarray) -> np.ndarray:
        """Chord Hellinger matrix of the weighted marginals (as :func:`hellinger_matrix`)."""
        bc = np.clip(self.gram(r), 0.0, 1.0)
        np.fill_diagonal(bc, 1.0)
        D = np.sqrt(np.clip(1.0 - bc, 0.0, None))
        live = N > 0
        near = (D < _NEAR_CHORD) & live[:, None] & live[None, :]
        np.fill_diagonal(near, False)
        if near.any():  # recompute the nearly identical rows without cancellation
            rows = np.flatnonzero(near.any(axis=1))
            mu = np.zeros((rows.size, self.V))
            for k, i in enumerate(rows):
                lo, hi = self.row_ptr[i], self.row_ptr[i + 1]
                mu[k, self.cell_tok[lo:hi]] = c[lo:hi] / N[i]
            sub = hellinger_matrix(mu)
            loc = np.full(self.n, -1)
            loc[rows] = np.arange(rows.size)
            ii, jj = np.nonzero(near)
            D[ii, jj] = sub[loc[ii], loc[jj]]
        D = 0.5 * (D + D.T)
        np.fill_diagonal(D, 0.0)
        return D

    # ------------------------------------------------------------------ one replicate
    def replicate(self, estimator: str, w: np.ndarray, thinned: list[np.ndarray]) -> tuple[np.ndarray, bool]:
        """The estimator on one replicate: weights ``w`` (m,) of the resample and the weights
        of half A of each of its splits (``thinned``). Also says whether a position was empty."""
        w = np.asarray(w, dtype=np.float64)
        c = self.weighted_counts(w)
        N = self.reach(w)
        empty = N <= 0
        if estimator == "matched":
            D = self._matched(c, N, thinned)
        else:
            D = self.chord(self.roots(c, N), c, N)
            if estimator == "first_order":
                bias = self._bias(c, N, thinned)
                D = np.sqrt(np.clip(D**2 - bias[:, None] - bias[None, :], 0.0, None))
                np.fill_diagonal(D, 0.0)
        if empty.any():
            D[empty, :] = np.nan
            D[:, empty] = np.nan
            D[np.flatnonzero(empty), np.flatnonzero(empty)] = 0.0
        return D, bool(empty.any())

    def _bias(self, c: np.ndarray, N: np.ndarray, thinned: list[np.ndarray]) -> np.ndarray:
        """Split-half squared-Hellinger bias per position (``split_half**2 / 4``) from the
        thinned halves (weights of half A of each split)."""
        sq = np.zeros(self.n)
        used = np.zeros(self.n)
        for wa in thinned:
            wa = np.asarray(wa, dtype=np.float64)
            ca = self.weighted_counts(wa)
            Na = self.reach(wa)
            Nb = N - Na
            pa = self.roots(ca, Na)
            pa *= self.roots(c - ca, Nb)
            bc = np.add.reduceat(pa, self.row_ptr[:-1])  # every position has a cell
            ok = (Na > 0) & (Nb > 0)
            sq[ok] += np.clip(1.0 - bc[ok], 0.0, None)
            used[ok] += 1
        split_half_sq = np.divide(sq, used, out=np.zeros(self.n), where=used > 0)
        return split_half_sq / 4.0

    def _matched(self, c: np.ndarray, N: np.ndarray, thinned: list[np.ndarray]) -> np.ndarray:
        """:func:`matched_hellinger_matrix` on the resample, its halves by thinning."""
        acc = np.zeros((self.n, self.n))
        for wa in thinned:
            wa = np.asarray(wa, dtype=np.float64)
            ca = self.weighted_counts(wa)
            Na = self.reach(wa)
            ra = self.roots(ca, Na)
            rb = self.roots(c - ca, N - Na)
            h2 = 1.0 - self.gram(ra, rb)  # already symmetrised
            d = np.diag(h2).copy()
            acc += h2 - 0.5 * (d[:, None] + d[None, :])
        out = np.sqrt(np.clip(acc / len(thinned), 0.0, None))
        out = 0.5 * (out + out.T)
        np.fill_diagonal(out, 0.0)
        return out


def _optimal_stress_rows(encodings: Mapping[str, Any], n: int) -> tuple[list[str], np.ndarray]:
    """Unit-norm upper triangles of each encoding's distances, with the regular simplex
    (all distances equal) first: scale-optimal stress against d is ``1 - (E d)^2 / d.d``."""
    iu = np.triu_indices(n, 1)
    names = ["regular simplex"]
    rows = [np.ones(iu[0].size)]
    for name, P in encodings.items():
        P = np.asarray(P, dtype=np.float64)
        if P.ndim != 2 or P.shape[0] != n:
            raise ValueError(f"encoding {name!r} has shape {P.shape}; pass one row per position (n={n})")
        names.append(str(name))
        rows.append(pairwise_distances(P)[iu])
    E = np.array(rows)
    norms = np.linalg.norm(E, axis=1)
    E = np.divide(E, norms[:, None], out=np.zeros_like(E), where=norms[:, None] > 0)
    return names, E


def _stress_statistic(E: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def statistic(d: np.ndarray) -> np.ndarray:
        dd = float(d @ d)
        if dd == 0.0:
            return np.full(E.shape[0], np.nan)
        return np.clip(1.0 - (E @ d) ** 2 / dd, 0.0, None)

    return statistic


def stress_intervals(
    boot: BootstrapGeometry,
    encodings: Mapping[str, Any],
    *,
    n_permutations: int = 100,
    seed: int = 0,
) -> pd.DataFrame:
    """Scale-optimal stress of each encoding against a bootstrapped geometry, with its
    sampling interval and the order-free baselines.

    Parameters
    ----------
    boot : BootstrapGeometry
        From :func:`bootstrap_geometry` (e.g. ``estimator="hybrid"``).
    encodings : mapping of str to numpy.ndarray, shape (n, d)
        Position vectors for the geometry's n positions.
    n_permutations : int, keyword-only, default 100
        Row permutations of each encoding (:func:`order_free_baselines`).
    seed : int, keyword-only, default 0
        Seed of the permutations.

    Returns
    -------
    pandas.DataFrame
        Index: ``"regular simplex"`` then the encodings. Columns: ``stress``
        (scale-optimal, against ``boot.estimate``), ``low``, ``high`` (its interval at
        ``boot.level``, from the replicates), ``permuted mean``, ``permuted low``,
        ``permuted high`` (over row permutations, against the estimate), ``gain``
        (``permuted mean - stress``: what positional order buys) and ``p`` (share of
        permutations fitting at least as well).

    Examples
    --------
    >>> from posgeo import random_encoding, sinusoidal_encoding, synthetic_corpus
    >>> bg = bootstrap_geometry(synthetic_corpus(n_sequences=400), 8, estimator="hybrid",
    ...                            n_boot=5, progress=False)
    >>> t = stress_intervals(bg, {"sinusoidal": sinusoidal_encoding(8, 16)}, n_permutations=20)
    >>> list(t.index), bool((t["low"] <= t["stress"]).all())
    (['regular simplex', 'sinusoidal'], True)
    """
    if not isinstance(boot, BootstrapGeometry):
        raise TypeError(f"boot must be a BootstrapGeometry (from posgeo.bootstrap_geometry), got {type(boot).__name__}")
    n = boot.n_positions
    names, E = _optimal_stress_rows(encodings, n)
    est, low, high = boot.interval(_stress_statistic(E), triangle=True)
    table = pd.DataFrame({"stress": est, "low": np.clip(low, 0.0, None), "high": high}, index=names)
    base = order_free_baselines(boot.estimate, encodings, n_permutations=n_permutations, seed=seed)
    base = base.rename(index=str)
    for col in ("permuted mean", "permuted low", "permuted high", "gain", "p"):
        table[col] = base[col].reindex(table.index).to_numpy()
    return table


def stress_differences(
    boot: BootstrapGeometry,
    encodings: Mapping[str, Any],
) -> pd.DataFrame:
    """Which encoding fits better, with paired intervals: for every pair (A, B), the
    difference of their scale-optimal stresses against the same replicates.

    A claim "A fits better than B" holds at ``boot.level`` where the interval of
    ``stress(A) - stress(B)`` lies below 0; two intervals of the stresses themselves may
    overlap while the paired difference is still clear (both move together with the
    sample).

    Parameters
    ----------
    boot : BootstrapGeometry
    encodings : mapping of str to numpy.ndarray, shape (n, d)
        The regular simplex is added as ``"regular simplex"``.

    Returns
    -------
    pandas.DataFrame
        One row per ordered pair (A better on the estimate): columns ``better``,
        ``worse``, ``difference`` (stress(better) - stress(worse), <= 0), ``low``,
        ``high`` and ``separated`` (``high < 0``).

    Examples
    --------
    >>> from posgeo import random_encoding, sinusoidal_encoding, synthetic_corpus
    >>> bg = bootstrap_geometry(synthetic_corpus(n_sequences=400), 8, estimator="hybrid",
    ...                            n_boot=5, progress=False)
    >>> t = stress_differences(bg, {"sinusoidal": sinusoidal_encoding(8, 16)})
    >>> t[["better", "worse"]].shape
    (1, 2)
    """
    if not isinstance(boot, BootstrapGeometry):
        raise TypeError(f"boot must be a BootstrapGeometry (from posgeo.bootstrap_geometry), got {type(boot).__name__}")
    names, E = _optimal_stress_rows(encodings, boot.n_positions)
    k = len(names)
    ia, ib = np.triu_indices(k, 1)
    base = _stress_statistic(E)
    est, low, high = boot.interval(lambda d: (lambda s: s[ia] - s[ib])(base(d)), triangle=True)
    rows = []
    for a, b, e, lo, hi in zip(ia, ib, np.atleast_1d(est), np.atleast_1d(low), np.atleast_1d(high)):
        if e > 0:  # b is the better one: flip
            a, b, e, lo, hi = b, a, -e, -hi, -lo
        rows.append({"better": names[a], "worse": names[b], "difference": e, "low": lo, "high": hi, "separated": bool(hi < 0)})
    return pd.DataFrame(rows)
