"""Positional marginals of a corpus and the estimators of its positional geometry.

Counting (:func:`positional_marginals`, :func:`position_counts`), the split-half noise floor,
the plug-in, first-order, matched and hybrid Hellinger estimators, and :func:`corpus_geometry`
that bundles them. Each takes sequences (its random half-splits drawn here) or stored counts
(:class:`posgeo.PositionalCounts`, by duck typing: their one stored split); the formulas over
count tables that both share are in :mod:`posgeo._estimators`."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal
import numpy as np
from ._cache import cached
from ._estimators import (
    add_hybrid_cross_halves,
    first_order_correction,
    hybrid_finish,
    hybrid_groups,
    hybrid_terms,
    matched_distances,
    matched_squared,
    plugin_hybrid_terms,
    root_marginals,
)
from ._geometry import hellinger_matrix
from typing import Any
from .validation import check_fits_in_memory, check_float, check_groups, check_int
from collections.abc import Iterable
from ._sequences import Corpus, Sequences, stratified_blocks, stratified_halves

__all__ = [
    'CorpusGeometry',
    'corpus_geometry',
    'noise_share',
    'matched_hellinger_matrix',
    'NoiseFloor',
    'hellinger_noise_floor',
    'positional_marginals',
    'hybrid_hellinger_matrix',
]


@dataclass(frozen=True, eq=False)
class CorpusGeometry:
    """The statistical geometry of a corpus' positions.

    Attributes
    ----------
    name : str
        Corpus name.
    marginals : numpy.ndarray, shape (n, V)
        Empirical per-position token distributions.
    distances : numpy.ndarray, shape (n, n)
        Plug-in distances between the marginals (``metric``).
    matched : numpy.ndarray, shape (n, n)
        Noise-corrected distances from :func:`matched_hellinger_matrix` (same metric); NaN
        off the diagonal in the rows and columns of positions reached by fewer than 2
        sequences (which have no half-samples to match).
    first_order : numpy.ndarray, shape (n, n)
        The first-order correction ``sqrt(max(0, d^2 - b_i - b_j))`` (same metric), which
        assumes the noise shrinks like 1/N.
    hybrid : numpy.ndarray, shape (n, n)
        The hybrid estimator (:func:`hybrid_hellinger_matrix`, same metric), the one the
        known-truth calibration favours and the book's "corrected" geometry; NaN like
        ``matched`` for positions reached by fewer than 2 sequences.
    counts : numpy.ndarray, shape (n,)
        Sequences reaching each position.
    split_half : numpy.ndarray, shape (n,)
        Split-half chord Hellinger distance per position (the noise floor).
    bias_sq : numpy.ndarray, shape (n,)
        Estimated squared chord-Hellinger bias per position.
    flagged : numpy.ndarray, shape (n,), bool
        Positions reached by fewer than ``min_count`` sequences.
    metric : str
        ``"chord"`` or ``"fisher-rao"``.
    """

    name: str
    marginals: np.ndarray
    distances: np.ndarray
    matched: np.ndarray
    first_order: np.ndarray
    counts: np.ndarray
    split_half: np.ndarray
    bias_sq: np.ndarray
    flagged: np.ndarray
    metric: str
    hybrid: np.ndarray | None = None

    @property
    def n_positions(self) -> int:
        """Number of positions n."""
        return int(self.distances.shape[0])


def _sequences_digest(seqs: Any) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(seqs.tokens, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(seqs.offsets, dtype=np.int64).tobytes())
    return h.hexdigest()


def _chord_to_metric(H: np.ndarray, metric: str) -> np.ndarray:
    if metric == "chord":
        return H
    out = 2.0 * np.arccos(np.clip(1.0 - H**2, -1.0, 1.0))
    np.fill_diagonal(out, 0.0)
    return out


def _as_counts(obj: Any, n_positions: int, vocab_size: int | None, what: str, *, groups: Any = None) -> Any:
    """``obj`` cut to ``n_positions`` if it holds stored counts (a :class:`posgeo.PositionalCounts`,
    by duck typing: its tables, halves and ``truncate``; checked against ``vocab_size``), else
    ``None``: the estimators take stored counts as well as sequences, and compute from the counts
    (their one stored half-split for the noise)."""
    if not all(hasattr(obj, a) for a in ("counts", "reach", "counts_a", "reach_a", "truncate")):
        return None
    n = check_int(n_positions, "n_positions")
    if vocab_size is not None and check_int(vocab_size, "vocab_size") != obj.vocab_size:
        raise ValueError(f"{what}: vocab_size={vocab_size} but the counts have V = {obj.vocab_size} (tokenizer "
                         f"{obj.tokenizer}); pass vocab_size={obj.vocab_size}")
    if n > obj.n_positions:
        raise ValueError(f"{what}: n_positions={n} but the counts stop at {obj.n_positions} positions; pass "
                         f"n_positions <= {obj.n_positions}, or count again with more positions")
    if groups is not None:
        raise ValueError(f"{what}: groups= keeps sequences together in the halves, but counts keep no sequences "
                         "(their halves are fixed by a hash of each document); drop groups=, or pass the sequences")
    return obj if n == obj.n_positions else obj.truncate(n)


def corpus_geometry(
    corpus: Any,
    n_positions: int,
    *,
    metric: Literal["chord", "fisher-rao"] = "chord",
    min_count: int = 100,
    n_splits: int = 5,
    seed: int = 0,
    cache: bool = True,
) -> CorpusGeometry:
    r"""Per-position marginals, their Hellinger distances, and the sampling-noise floor.

    Parameters
    ----------
    corpus : Corpus or PositionalCounts
        From :func:`load_corpus` (its ``sequences`` and ``vocab_size`` are used); or stored
        counts (:meth:`PositionalCounts.geometry`, chord only; ``n_splits``, ``seed`` and
        ``cache`` do not apply).
    n_positions : int
        Positions 0..n-1 analysed; every one must be reached by some sequence (those
        reached by only one get NaN noise estimates: ``split_half`` and ``matched``).
    metric : {"chord", "fisher-rao"}, keyword-only
    min_count : int, keyword-only
        Positions reached by fewer sequences are flagged as unreliable.
    n_splits : int, keyword-only
        Random half-splits for the noise floor.
    seed : int, keyword-only
        Seed of the half-splits.
    cache : bool, keyword-only
        Store/read the result in the posgeo cache (keyed on the corpus' name, split, options and size).

    Returns
    -------
    CorpusGeometry

    Examples
    --------
    >>> from posgeo import load_corpus
    >>> g = corpus_geometry(load_corpus("synthetic", n_sequences=500), 32, cache=False)
    >>> g.distances.shape, bool(g.flagged.any())
    ((32, 32), False)
    """
    counted = _as_counts(corpus, n_positions, None, "corpus_geometry")
    if counted is not None:  # stored counts: their geometry (one stored split for the noise floor)
        if metric != "chord":
            raise ValueError("the geometry of PositionalCounts is chord-Hellinger only; pass metric='chord', or "
                             "call PositionalCounts.hellinger_matrix(metric='fisher-rao') for the plug-in distances")
        return counted.geometry(min_count=min_count)
    if metric not in ("chord", "fisher-rao"):
        raise ValueError(f"unknown metric {metric!r}; use 'chord' or 'fisher-rao'")
    seqs = getattr(corpus, "sequences", corpus)
    vocab = int(getattr(corpus, "vocab_size", getattr(seqs, "vocab_size", 0)))
    if vocab <= 0:
        raise TypeError("corpus must be a posgeo Corpus or Sequences (with a vocab_size); use load_corpus(...)")

    def compute() -> CorpusGeometry:
        mu = positional_marginals(seqs, n_positions, vocab)
        nf = hellinger_noise_floor(seqs, n_positions, vocab, n_splits=n_splits, seed=seed, min_count=min_count)
        H = hellinger_matrix(mu)
        Hf = first_order_correction(H, nf.bias_sq)
        n = int(n_positions)
        twice = int((nf.counts >= 2).sum())  # counts do not increase: these are positions 0..twice-1
        if twice == n:
            Hm = matched_hellinger_matrix(seqs, n, vocab, n_splits=n_splits, seed=seed)
            Hh = hybrid_hellinger_matrix(seqs, n, vocab)
        else:  # a position reached by one sequence has no matched half-samples: NaN, as split_half
            Hm = np.full((n, n), np.nan)
            Hh = np.full((n, n), np.nan)
            if twice >= 2:
                Hm[:twice, :twice] = matched_hellinger_matrix(seqs, twice, vocab, n_splits=n_splits, seed=seed)
                Hh[:twice, :twice] = hybrid_hellinger_matrix(seqs, twice, vocab)
            np.fill_diagonal(Hm, 0.0)
            np.fill_diagonal(Hh, 0.0)
        return CorpusGeometry(
            name=str(getattr(corpus, "name", "corpus")),
            marginals=mu,
            distances=_chord_to_metric(H, metric),
            matched=_chord_to_metric(Hm, metric),
            first_order=_chord_to_metric(Hf, metric),
            hybrid=_chord_to_metric(Hh, metric),
            counts=nf.counts,
            split_half=nf.split_half,
            bias_sq=nf.bias_sq,
            flagged=nf.flagged,
            metric=metric,
        )

    key = {
        "corpus": repr(corpus),
        "options": getattr(corpus, "options", None),
        "tokens": int(seqs.tokens.size) if hasattr(seqs, "tokens") else None,
        "checksum": _sequences_digest(seqs) if hasattr(seqs, "tokens") else None,
        "n": n_positions,
        "metric": metric,
        "min_count": min_count,
        "n_splits": n_splits,
        "seed": seed,
        "estimators": "plug-in, first-order, matched, hybrid",  # the fields computed
    }
    return cached("corpus_geometry", key, compute, enabled=cache and hasattr(seqs, "tokens"), expect=CorpusGeometry)


def noise_share(geometry: CorpusGeometry) -> float:
    r"""Share of the squared plug-in distances that the noise correction removes.

    :math:`1 - \sum_{i<j} \tilde d_{ij}^2 / \sum_{i<j} \hat d_{ij}^2`, with :math:`\hat d` the
    plug-in and :math:`\tilde d` the noise-corrected distances (``geometry.hybrid``, the
    hybrid estimator; ``geometry.matched`` for a geometry without it). Pairs whose corrected
    distance is undefined (NaN) are left out of both sums. 0 means no detectable noise; 1
    means the measured geometry is all noise.

    Parameters
    ----------
    geometry : CorpusGeometry

    Returns
    -------
    float
    """
    iu = np.triu_indices(geometry.n_positions, k=1)
    corrected = geometry.hybrid if geometry.hybrid is not None else geometry.matched
    c = corrected[iu]
    ok = np.isfinite(c)
    den = float((geometry.distances[iu][ok] ** 2).sum())
    if den == 0:
        return float("nan")
    return float(np.clip(1.0 - float((c[ok] ** 2).sum()) / den, 0.0, 1.0))


def matched_hellinger_matrix(
    sequences: Any, n_positions: int, vocab_size: int, *, n_splits: int = 5, seed: int = 0, groups: Any = None
) -> np.ndarray:
    r"""Chord Hellinger distances corrected for sampling noise by matched half-samples.

    Split the sequences at random into halves A and B (by sequence, so the halves are
    independent) and estimate the marginals :math:`a_i` and :math:`b_i` of every position on
    each half. The cross-half squared distance :math:`H^2(a_i, b_j)` carries the true
    :math:`H^2(\mu_i, \mu_j)` plus the noise of two half-samples, and the *same-position*
    cross-half distance :math:`s_i^2 = H^2(a_i, b_i)` carries that noise alone (its true
    value is 0). Hence

    .. math:: \tilde H^2_{ij} = \overline{H^2(a_i, b_j)} - \tfrac12 \bigl(\overline{s_i^2} + \overline{s_j^2}\bigr),

    averaged over ``n_splits`` random splits (symmetrised), clipped at 0. Unlike a
    correction that assumes the noise shrinks like 1/N, this compares samples of matched
    size, so it holds also in the heavy-tailed regime of a 30,000-token vocabulary, where
    most tokens are seen once or never. Two positions with identical true distributions get
    :math:`\tilde H \approx 0` (up to fluctuation).

    It under-corrects slightly: for two *different* positions the cross-half noise exceeds
    the average same-position noise by a non-negative term (of the order of the squared
    mismatch between the two positions' sampling errors), so the result is an upper
    estimate of the true distance, and where the noise is already small (well sampled, small
    vocabulary) it can be slightly worse than the plug-in. Its strength is the heavy-tailed
    regime, where a correction that assumes 1/N noise fails.

    Parameters
    ----------
    sequences : Sequences, Corpus or PositionalCounts
        The corpus, or its stored counts (:meth:`PositionalCounts.matched_hellinger_matrix`:
        their one stored half-split; ``seed`` and ``n_splits`` do not apply).
    n_positions : int
        Positions 0..n-1; each must be reached by at least 2 sequences.
    vocab_size : int
    n_splits : int, keyword-only
        Random half-splits averaged.
    seed : int, keyword-only
    groups : array of int, shape (m,), keyword-only, optional
        One group id per sequence (e.g. :func:`overlap_groups`): whole groups go to the
        same half, so that the halves stay independent where sequences are not (SST-2's
        phrases share their tokens with their sentence). Default: every sequence its own
        group (the same splits as without the argument).

    Returns
    -------
    numpy.ndarray, shape (n_positions, n_positions)
        Symmetric, non-negative, zero diagonal.

    Examples
    --------
    >>> from posgeo import load_corpus, hellinger_matrix
    >>> c = load_corpus("synthetic", n_sequences=400)
    >>> D = matched_hellinger_matrix(c, 32, 64)
    >>> truth = hellinger_matrix(c.true_marginals)
    >>> plug_in = hellinger_matrix(positional_marginals(c, 32, 64))
    >>> bool(np.linalg.norm(D - truth) < np.linalg.norm(plug_in - truth))
    True
    """
    counted = _as_counts(sequences, n_positions, vocab_size, "matched_hellinger_matrix", groups=groups)
    if counted is not None:
        return counted.matched_hellinger_matrix()
    seqs = getattr(sequences, "sequences", sequences)
    if not hasattr(seqs, "tokens"):
        raise TypeError("sequences must be a posgeo Sequences or Corpus; build one with load_corpus or Sequences.from_list")
    n = int(n_positions)
    V = int(vocab_size)
    check_fits_in_memory((5, n, V), "the matched estimator's dense count tables (about five n x V)")
    counts = position_counts(seqs, n)
    if counts.min() < 2:
        raise ValueError(
            f"position {int(np.argmax(counts < 2))} is reached by fewer than 2 sequences; "
            "pass a smaller n_positions"
        )
    if n_splits < 1:
        raise ValueError(f"n_splits must be >= 1, got {n_splits}")
    tokens = np.asarray(seqs.tokens, dtype=np.int64)
    offsets = np.asarray(seqs.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    m = lengths.size
    pos = np.arange(tokens.size, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    seq_id = np.repeat(np.arange(m), lengths)
    keep = pos < n
    flat = pos[keep] * V + tokens[keep]
    sid = seq_id[keep]
    if groups is None:
        unit, n_units = sid, m
    else:
        inverse, n_units = check_groups(groups, m)
        unit = inverse[sid]
    rng = np.random.default_rng(seed)
    acc = np.zeros((n, n))
    for _ in range(int(n_splits)):
        in_a = (rng.random(n_units) < 0.5)[unit]
        roots = []
        for mask in (in_a, ~in_a):  # each half's (n, V) counts and reach
            c = np.bincount(flat[mask], minlength=n * V).reshape(n, V).astype(np.float64)
            roots.append(root_marginals(c, c.sum(axis=1)))
        acc += matched_squared(*roots)
    return matched_distances(acc, int(n_splits))


@dataclass(frozen=True, eq=False)
class NoiseFloor:
    """Split-half noise floor of the empirical chord Hellinger distance, per position.

    Attributes
    ----------
    split_half : numpy.ndarray, shape (n,)
        Root-mean-square (over random splits) chord Hellinger distance between the token
        distributions of two random halves of the sequences reaching position ``i``
        (NaN where fewer than 2 sequences reach it).
    counts : numpy.ndarray, shape (n,)
        Number of sequences reaching each position.
    flagged : numpy.ndarray, shape (n,), bool
        ``counts < min_count``: positions whose estimates are too noisy to trust.
    bias_sq : numpy.ndarray, shape (n,)
        Estimated squared-Hellinger bias of :math:`\\hat\\mu_i`, ``split_half**2 / 4``
        (0 where ``split_half`` is NaN).
    """

    split_half: np.ndarray
    counts: np.ndarray
    flagged: np.ndarray
    bias_sq: np.ndarray


def hellinger_noise_floor(
    sequences: Any,
    n_positions: int,
    vocab_size: int,
    *,
    n_splits: int = 5,
    seed: int = 0,
    min_count: int = 20,
    groups: Any = None,
) -> NoiseFloor:
    r"""Estimate, per position, how far the empirical marginal sits from the truth by chance.

    For each of ``n_splits`` random splits the sequences reaching position ``i`` are divided
    into two halves of (almost) equal size (a random permutation of the sequences, split per
    position at its median rank, all positions at once) and the chord Hellinger distance
    between the halves' token distributions is computed. A half of :math:`N/2` sequences has
    about twice the squared-Hellinger bias :math:`b_i` of the full sample, and the two halves
    are independent, so their squared distance is about :math:`4 b_i`; hence
    ``bias_sq = split_half**2 / 4``. ``split_half`` is the root-mean-square over splits.

    Parameters
    ----------
    sequences : Sequences, Corpus, iterable of integer sequences or PositionalCounts
        The corpus, or its stored counts (:meth:`PositionalCounts.noise_floor`: their one
        stored half-split; ``seed`` and ``n_splits`` do not apply).
    n_positions : int
        Number of positions ``n``.
    vocab_size : int
        Number of token ids ``V``.
    n_splits : int, default 5
        Number of random half-splits averaged.
    seed : int, default 0
        Seed of ``np.random.default_rng`` drawing the splits.
    min_count : int, default 20
        Positions reached by fewer sequences are ``flagged`` (halves of < 10 sequences).
    groups : array of int, shape (m,), keyword-only, optional
        One group id per sequence (e.g. :func:`overlap_groups`: SST-2's phrases with their
        sentence). The random order of a split is then an order of the *groups*, so the
        sequences of a group fall in the same half, except at most one group per position,
        the one that straddles that position's median. Default: every sequence on its own.

    Returns
    -------
    NoiseFloor

    Raises
    ------
    TypeError, ValueError
        As :func:`positional_marginals`; also bad ``n_splits``/``min_count``.

    Examples
    --------
    >>> from posgeo import synthetic_corpus
    >>> nf = hellinger_noise_floor(synthetic_corpus(n_sequences=400), 32, 64)
    >>> nf.split_half.shape, bool(nf.flagged.any()), bool((nf.bias_sq > 0).all())
    ((32,), False, True)
    """
    counted = _as_counts(sequences, n_positions, vocab_size, "hellinger_noise_floor", groups=groups)
    if counted is not None:
        return counted.noise_floor(min_count=min_count)
    n = check_int(n_positions, "n_positions")
    V = check_int(vocab_size, "vocab_size")
    n_splits = check_int(n_splits, "n_splits")
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 0:
        raise ValueError(f"min_count must be an int >= 0, got {min_count!r}")
    tokens, offsets = _as_csr(sequences, V)
    _check_ids(tokens, V)
    counts = _reach_counts(offsets, n)
    _check_reach(counts, offsets, n)

    m = offsets.size - 1
    if groups is not None:
        group_of, n_groups = check_groups(groups, m)
    pos, keep = _positions(offsets, n)
    pos = pos[keep]
    flat = pos * V + tokens[keep].astype(np.int64)
    klen = np.minimum(np.diff(offsets), n)  # kept tokens per sequence (contiguous in `pos`)
    kstart = np.concatenate([[0], np.cumsum(klen)[:-1]])
    half_a = counts // 2  # size of half A at each position; half B gets the rest
    pos_dtype = np.int16 if n < np.iinfo(np.int16).max else np.int64  # int16: radix sort
    pos_small = pos.astype(pos_dtype)
    group_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rng = np.random.default_rng(seed)
    sq = np.zeros(n)
    for _ in range(n_splits):
        if groups is None:
            perm = rng.permutation(m)
        else:  # groups in random order, the sequences of a group together (random among themselves)
            rank = rng.permutation(n_groups)
            perm = np.lexsort((rng.random(m), rank[group_of]))
        plen = klen[perm]
        pstart = np.concatenate([[0], np.cumsum(plen)[:-1]])
        gather = np.arange(pos.size, dtype=np.int64) - np.repeat(pstart - kstart[perm], plen)
        # `gather` lists the kept tokens sequence by sequence in random order; a stable sort by
        # position then orders each position's tokens by that random sequence order.
        order = gather[np.argsort(pos_small[gather], kind="stable")]
        p_sorted = pos[order]
        rank_in_pos = np.arange(order.size) - group_start[p_sorted]
        in_a = np.empty(order.size, dtype=bool)
        in_a[order] = rank_in_pos < half_a[p_sorted]
        fa, fb = flat[in_a], flat[~in_a]
        # Not posgeo._estimators.noise_floor_from_halves (the stored split of PositionalCounts):
        # halves balanced per position, RMS over splits, bias split^2 / 4, and sqrt(pa * pb)
        # rooted once: other numbers. float64 also when a half is empty everywhere (one
        # sequence): bincount of an empty array returns int64 whatever the weights
        pa = np.bincount(fa, weights=np.ones(fa.size), minlength=n * V).astype(np.float64, copy=False).reshape(n, V)
        pb = np.bincount(fb, weights=np.ones(fb.size), minlength=n * V).astype(np.float64, copy=False).reshape(n, V)
        with np.errstate(invalid="ignore", divide="ignore"):
            pa /= pa.sum(axis=1, keepdims=True)  # NaN rows where a half is empty
            pb /= pb.sum(axis=1, keepdims=True)
            pa *= pb
            bc = np.sqrt(pa, out=pa).sum(axis=1)
        del pb
        sq += np.clip(1.0 - bc, 0.0, None)
    split_half = np.sqrt(sq / n_splits)
    split_half[counts < 2] = np.nan
    bias_sq = np.where(np.isnan(split_half), 0.0, split_half**2 / 4.0)
    return NoiseFloor(split_half=split_half, counts=counts, flagged=counts < min_count, bias_sq=bias_sq)


def first_order_hellinger_matrix(
    sequences: Any,
    n_positions: int,
    vocab_size: int,
    *,
    seed: int = 0,
    n_splits: int = 5,
) -> np.ndarray:
    r"""Chord Hellinger distances between positional marginals, corrected for sampling bias.

    The plug-in distance :math:`H(\hat\mu_i, \hat\mu_j)` between empirical marginals is biased
    upwards: two positions with identical true marginals still sit at a positive distance.
    To first order each empirical distribution adds its own squared-Hellinger bias
    :math:`b_i` (estimated by :func:`hellinger_noise_floor`: two half-samples of :math:`N/2`
    sequences each carry about :math:`2 b_i`, so their squared distance is about
    :math:`4 b_i`) to the squared distance, so

    .. math:: H^2_{\mathrm{corr}}(i, j) = \max\bigl(0,\ H(\hat\mu_i, \hat\mu_j)^2 - b_i - b_j\bigr),

    and the result is :math:`\sqrt{H^2_{\mathrm{corr}}}` with a zero diagonal. This is a
    heuristic (a delta-method argument that assumes independent samples at the two positions
    and is poorest when the vocabulary dwarfs the sample); the tests check on the synthetic
    corpus, where the truth is known, that it moves the matrix towards the true one.

    Parameters
    ----------
    sequences : Sequences, Corpus, iterable of integer sequences or PositionalCounts
        The corpus, or its stored counts (:meth:`PositionalCounts.first_order_hellinger_matrix`,
        with the bias of their one stored half-split: ``seed`` and ``n_splits`` do not apply).
    n_positions : int
        Number of positions ``n``.
    vocab_size : int
        Number of token ids ``V``.
    seed : int, default 0
        Seed of the random half-splits.
    n_splits : int, default 5
        Number of half-splits averaged in the bias estimate.

    Returns
    -------
    numpy.ndarray, shape (n_positions, n_positions)
        Symmetric, non-negative, zero diagonal.

    Raises
    ------
    TypeError, ValueError
        As :func:`positional_marginals`.

    Examples
    --------
    >>> from posgeo import synthetic_corpus
    >>> c = synthetic_corpus(n_sequences=300, nonstationarity=0.0)
    >>> D = first_order_hellinger_matrix(c, 32, 64)
    >>> from posgeo._geometry import hellinger_matrix
    >>> bool((D <= hellinger_matrix(positional_marginals(c, 32, 64)) + 1e-12).all())
    True
    """
    counted = _as_counts(sequences, n_positions, vocab_size, "first_order_hellinger_matrix")
    if counted is not None:
        return counted.first_order_hellinger_matrix()
    V = check_int(vocab_size, "vocab_size")
    tokens, offsets = _as_csr(sequences, V)  # convert a generic iterable once
    _check_ids(tokens, V)
    seqs = Sequences(tokens=tokens, offsets=offsets, vocab_size=V)
    mu = positional_marginals(seqs, n_positions, V)
    nf = hellinger_noise_floor(seqs, n_positions, V, seed=seed, n_splits=n_splits)
    return first_order_correction(np.asarray(hellinger_matrix(mu, metric="chord"), dtype=np.float64), nf.bias_sq)


def _to_array(seq: Any, k: int) -> np.ndarray:
    if hasattr(seq, "detach") and hasattr(seq, "cpu"):  # torch tensor, without importing torch
        seq = seq.detach().cpu().numpy()
    if isinstance(seq, (str, bytes)):
        raise TypeError(f"sequence {k} is a string, not token ids; tokenise it first (posgeo.tokenize)")
    a = np.asarray(seq)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.ndim != 1:
        raise TypeError(f"sequence {k} must be 1-d, got shape {a.shape}; pass one flat sequence of ids per item")
    if a.dtype.kind not in "iu":
        raise TypeError(
            f"sequence {k} has non-integer tokens (dtype {a.dtype}); token ids must be integers: "
            "tokenise text first and cast ids with .astype(int)"
        )
    return a


def _as_csr(sequences: Any, vocab_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(tokens, offsets)`` for a Sequences, Corpus or iterable of integer sequences.

    With ``vocab_size``, an id too large for int64 is reported with its real value (the
    caller checks the other ids with :func:`_check_ids` on the result)."""
    if isinstance(sequences, Corpus):
        sequences = sequences.sequences
    if isinstance(sequences, Sequences):
        tokens, offsets = sequences.tokens, sequences.offsets
    else:
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
            raise TypeError(
                f"sequences must be a Sequences, a Corpus or an iterable of integer sequences, got "
                f"{type(sequences).__name__}"
            )
        arrays = [_to_array(s, k) for k, s in enumerate(sequences)]
        lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        nonempty = [a for a in arrays if a.size]
        if vocab_size is not None:  # ids beyond int64 (uint64) are checked before the cast wraps them
            top = max((int(a.max()) for a in nonempty if a.dtype.kind == "u"), default=0)
            if top > np.iinfo(np.int64).max:
                _check_id_range(min(int(a.min()) for a in nonempty), top, vocab_size)
        # each array cast on its own: concatenating int64 with uint64 would promote to float64
        tokens = (
            np.concatenate([a.astype(np.int64, copy=False) for a in nonempty]) if nonempty else np.zeros(0, np.int64)
        )
    if offsets.size <= 1:
        raise ValueError("the corpus is empty (no sequences); pass at least one sequence")
    return tokens, offsets


def _positions(offsets: np.ndarray, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Position of every token and the mask of tokens at positions < n_positions."""
    lengths = np.diff(offsets)
    total = int(offsets[-1])
    pos = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    return pos, pos < n_positions


def _reach_counts(offsets: np.ndarray, n_positions: int) -> np.ndarray:
    lengths = np.minimum(np.diff(offsets), n_positions)
    ends = np.bincount(lengths, minlength=n_positions + 1)  # how many sequences have each clipped length
    return ends[::-1].cumsum()[::-1][1:].astype(np.int64)  # counts[i] = #{k : len_k > i}


def _check_reach(counts: np.ndarray, offsets: np.ndarray, n_positions: int) -> None:
    if counts[-1] == 0:
        first = int(np.argmin(counts > 0))
        longest = int(np.diff(offsets).max())
        raise ValueError(
            f"position {first} is reached by no sequence (the longest sequence has {longest} tokens); "
            f"pass n_positions <= {longest}"
        )


def _check_ids(tokens: np.ndarray, vocab_size: int) -> None:
    if tokens.size == 0:
        return
    _check_id_range(int(tokens.min()), int(tokens.max()), vocab_size)


def _check_id_range(lo: int, hi: int, vocab_size: int) -> None:
    if lo < 0:
        raise ValueError(f"token id {lo} is negative; ids must lie in [0, vocab_size={vocab_size})")
    if hi >= vocab_size:
        raise ValueError(
            f"token id {hi} is outside [0, vocab_size={vocab_size}); pass vocab_size >= {hi + 1} "
            "(the tokenizer's vocabulary size)"
        )


def _count_table(tokens: np.ndarray, offsets: np.ndarray, n_positions: int, vocab_size: int) -> np.ndarray:
    """Float64 (n, V) table of token counts per position, from one bincount over all tokens."""
    total = int(offsets[-1])
    small = max(n_positions * vocab_size, total) < np.iinfo(np.int32).max
    idx = np.int32 if small else np.int64  # int32 halves the memory traffic of the index arrays
    # position of every token: arange(total) - repeat(starts, lengths), computed in place
    flat = np.arange(total, dtype=idx)
    flat -= np.repeat(offsets[:-1].astype(idx), np.diff(offsets))
    keep = flat < n_positions
    flat *= idx(vocab_size)
    flat += tokens
    flat = flat[keep]  # position * V + token, for the tokens at positions < n_positions
    # Unit weights make bincount return float64 counts (exact integers) directly, sparing a
    # cast of the whole (n, V) table.
    counts = np.bincount(flat, weights=np.ones(flat.size), minlength=n_positions * vocab_size)
    return counts.reshape(n_positions, vocab_size)


def positional_marginals(sequences: Any, n_positions: int, vocab_size: int) -> np.ndarray:
    r"""Empirical distribution of the token at each position.

    :math:`\hat\mu_i(v)` is the fraction of sequences reaching position ``i`` (length > i)
    whose token at position ``i`` is ``v``. Sequences longer than ``n_positions`` are cut.

    Parameters
    ----------
    sequences : Sequences, Corpus, iterable of integer sequences or PositionalCounts
        The corpus. :class:`Sequences` (and :class:`Corpus`) take a fully vectorised path;
        lists, numpy arrays or torch tensors are converted one sequence at a time. Stored
        counts (:class:`PositionalCounts`) give :meth:`PositionalCounts.marginals`, cut to
        ``n_positions``: the same table, bit for bit.
    n_positions : int
        Number of positions ``n``.
    vocab_size : int
        Number of token ids ``V``.

    Returns
    -------
    numpy.ndarray, shape (n_positions, vocab_size), float64
        Row ``i`` is :math:`\hat\mu_i`; every row sums to 1.

    Raises
    ------
    TypeError
        Non-integer tokens (floats, strings), or ``n_positions``/``vocab_size`` not ints.
    ValueError
        An empty corpus, non-positive sizes, an id outside ``[0, vocab_size)``, or a position
        below ``n_positions`` that no sequence reaches.

    Examples
    --------
    >>> positional_marginals([[0, 1], [0, 2, 2], [1]], n_positions=2, vocab_size=3).round(3).tolist()
    [[0.667, 0.333, 0.0], [0.0, 0.5, 0.5]]
    """
    counted = _as_counts(sequences, n_positions, vocab_size, "positional_marginals")
    if counted is not None:
        return counted.marginals()
    n = check_int(n_positions, "n_positions")
    V = check_int(vocab_size, "vocab_size")
    check_fits_in_memory((n, V), "the marginals table")
    tokens, offsets = _as_csr(sequences, V)
    _check_ids(tokens, V)  # always: the arrays of a Sequences could have been edited in place
    counts = _reach_counts(offsets, n)
    _check_reach(counts, offsets, n)
    table = _count_table(tokens, offsets, n, V)
    table /= counts[:, None]  # exact: count / number of sequences reaching the position
    return table


def position_counts(sequences: Any, n_positions: int) -> np.ndarray:
    """How many sequences reach each position (have length > i).

    Parameters
    ----------
    sequences : Sequences, Corpus or iterable of integer sequences
        The corpus.
    n_positions : int
        Number of positions ``n``.

    Returns
    -------
    numpy.ndarray, shape (n_positions,), int64
        Non-increasing counts.

    Raises
    ------
    TypeError, ValueError
        As :func:`positional_marginals` (an empty corpus, bad ``n_positions``, non-integer tokens).

    Examples
    --------
    >>> position_counts([[0, 1], [0, 2, 2], [1]], 4).tolist()
    [3, 2, 1, 0]
    """
    n = check_int(n_positions, "n_positions")
    _, offsets = _as_csr(sequences)
    return _reach_counts(offsets, n)


# --------------------------------------------------------------------------- the hybrid estimator


def _count_tables(
    seqs: Sequences, n: int, V: int, half: np.ndarray | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Float64 (n, V) token counts per position (one bincount over position * V + token);
    with ``half`` (bool per sequence) the tables of the two halves."""
    offsets = np.asarray(seqs.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    pos = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    keep = pos < n
    flat = pos[keep] * V + np.asarray(seqs.tokens, dtype=np.int64)[keep]

    def table(f: np.ndarray) -> np.ndarray:
        return np.bincount(f, minlength=n * V).astype(np.float64).reshape(n, V)

    if half is None:
        return table(flat)
    in_a = np.repeat(half, lengths)[keep]
    return table(flat[in_a]), table(flat[~in_a])


def hybrid_hellinger_matrix(
    sequences: Any,
    n_positions: int,
    vocab_size: int,
    *,
    resolved_count: float = 5.0,
    reference_floor: float = 0.3,
    n_bins: int = 48,
    split: str = "none",
    n_splits: int = 5,
    seed: int = 0,
    groups: Any = None,
    n_blocks: int = 20,
) -> np.ndarray:
    r"""Chord Hellinger distances from a hybrid of corrected roots and flattened collisions.

    The squared chord distance is a sum over tokens,
    :math:`H^2(p, q) = \tfrac12 \sum_t (\sqrt{p_t} - \sqrt{q_t})^2`. Following the
    two-regime principle of Jiao, Venkat, Han & Weissman (2015) (estimate a functional
    of a large-support distribution by a bias-corrected plug-in where a symbol is well
    sampled and by an unbiased estimate of a polynomial approximation where it is not),
    the tokens are split by their *pooled* frequency :math:`\bar\pi_t` (over all n
    positions, whose sample is n times larger than any one position's):

    - **resolved** tokens, expected count :math:`\min(N_i, N_j)\,\bar\pi_t \ge`
      ``resolved_count`` at both positions: :math:`\tfrac12\sum_t (p_t + q_t)` is estimated
      without bias by the empirical frequencies, and :math:`\sum_t \sqrt{p_t q_t}` by
      :math:`\sum_t g_i(X_t) g_j(Y_t)`, with the delta-method-corrected root
      :math:`g(X) = \sqrt{\hat p} + (1-\hat p)/(8N\sqrt{\hat p})`, unbiased up to
      :math:`O(N^{-2}p^{-3/2})` (relative bias under 0.3% at an expected count of 5).
      The product is unbiased for the product of the expectations because the samples
      at the two positions are independent (see ``split`` for corpora where they are not).
    - **unresolved** tokens (the long tail, each seen a few times or never): no estimator
      of :math:`\sqrt p` works there (for :math:`Np \ll 1` every estimator's mean is
      linear in p; Han, Jiao & Weissman 2020 give the minimax rates for the Hellinger
      distance, which blow up when the support exceeds the sample). The tail is seen
      only through collisions, so it gets the second-order (Le Cam) expansion
      :math:`(\sqrt p - \sqrt q)^2 = (p - q)^2 / (\sqrt p + \sqrt q)^2 \approx
      (p - q)^2 / (4 \bar\pi)`, a quadratic function that has an exactly unbiased
      U-statistic estimate from the counts X (out of N) and Y (out of M):

      .. math:: \tfrac18 \sum_t \frac{1}{\bar\pi_t} \Bigl[\frac{X_t(X_t-1)}{N(N-1)}
         + \frac{Y_t(Y_t-1)}{M(M-1)} - \frac{2 X_t Y_t}{N M}\Bigr].

      Dividing by the reference frequency is the "flattening" of Diakonikolas & Kane
      (2016); the collision statistics are those of closeness testing (Chan, Diakonikolas,
      Valiant & Valiant 2014); that the unseen part of a distribution is visible only
      through such fingerprint statistics is the lesson of Valiant & Valiant (2011).

    **Reference floor.** The reference of token t at position i is
    :math:`\max(\bar\pi_t, f / N_i)`, ``f = reference_floor`` (default 0.3 expected
    counts), and a pair uses the geometric mean of its two positions' weights. Without the
    floor the U-statistic is unbiased but heavy-tailed: a token seen 6 times in the whole
    corpus, twice at a position reached by 279 sequences, gets the weight
    :math:`1/\bar\pi_t` and adds 0.4 to :math:`H^2` (SST-2's last positions). The floor
    bounds every collision's contribution by :math:`1/(4 f N)`; it shrinks the
    contribution of tokens expected fewer than f times towards 0 (by the factor
    :math:`N\bar\pi_t/f`), as the matched estimator does for tokens expected fewer than a
    few times, and it leaves the mean under stationarity at 0 up to
    :math:`\tfrac18\sum_t p_t^2 (\sqrt{w_{it}} - \sqrt{w_{jt}})^2`.

    The sum over both parts is clipped at 0 and square-rooted. Where the two positions
    have the same distribution the unresolved part has mean (nearly) 0 and the resolved
    part nearly so, so unlike the plug-in, first-order and matched estimators it does not
    turn unequal sample sizes into distance. The price is variance: the collision part of
    a pair of positions with N samples over a tail of S tokens has a standard deviation of
    order :math:`\sqrt{S/8}/N` in :math:`H^2` without the floor (0.015 at N = 3,334 and
    S = 20,000).
    Tokens seen at no position contribute nothing: their share of the truth is invisible
    to any estimator.

    Approximations, measured by :func:`calibrate_estimators`: the reference
    :math:`4\bar\pi_t` replaces :math:`(\sqrt{p_t} + \sqrt{q_t})^2`, which is too large
    where both positions are far above the pooled frequency of a token and too small
    where both are far below (second order in the log-ratios); :math:`\bar\pi` is
    estimated from the same counts (including positions i and j, a 1/n share); the
    resolved/unresolved boundary is quantised to ``n_bins`` log-spaced bins of
    :math:`\bar\pi`.

    Parameters
    ----------
    sequences : Sequences, Corpus or PositionalCounts
        The corpus, or its stored counts (:class:`PositionalCounts`, cut to ``n_positions``:
        :meth:`PositionalCounts.hybrid`, the same matrix bit for bit; ``split="none"`` only).
    n_positions : int
        Positions 0..n-1 (n >= 2); each must be reached by at least 2 sequences.
    vocab_size : int
    resolved_count : float, keyword-only, default 5.0
        Expected count above which a token is "resolved" (> 0).
    reference_floor : float, keyword-only, default 0.3
        Floor of the reference frequency, in expected counts at the position (>= 0; 0
        gives the unbiased but heavy-tailed statistic).
    n_bins : int, keyword-only, default 48
        Log-frequency bins of the resolved/unresolved boundary.
    split : {"none", "halves", "jackknife"}, keyword-only, default "none"
        ``"none"`` uses all the sequences for both positions and assumes their tokens
        are independent, as in :func:`sample_calibration_corpus`. In a real corpus the same
        sequence fills both positions (a word repeated in a review raises
        :math:`E[X_t Y_t]` above :math:`E X_t\,E Y_t`); ``"halves"`` takes the cross
        products (the roots of resolved tokens, the :math:`X_t Y_t` of the tail) between
        two disjoint halves of the sequences, which are independent whatever the
        dependence inside a sequence, averaged over ``n_splits`` random halvings
        (stratified: every position's sequences are halved). It is noisier.

        ``"jackknife"`` is for corpora whose sequences are themselves dependent, such as
        phrases nested in their sentence (SST-2's training split): the same token groups
        and weights, but the statistic is the *plug-in* of the two parts,
        :math:`T = \sum_{\text{res}} [\tfrac12(\hat p_t + \hat q_t) - \sqrt{\hat p_t
        \hat q_t}] + \tfrac18 \sum_{\text{unres}} (w_{it}\hat p_t - w_{jt}\hat q_t)^2`,
        and its bias, whatever the dependence inside a sequence or a group, is removed by
        a delete-a-block jackknife (Quenouille 1956; Kunsch 1989 for dependent data):
        the units (``groups``, or sequences) are dealt to ``n_blocks`` blocks
        (:func:`stratified_blocks`), :math:`T_{(k)}` is the statistic without block k,
        and :math:`H^2 = K\,T - (K - 1)\,\overline{T_{(k)}}`. A bias of order
        :math:`1/N_{\text{eff}}` (N counted in independent units) cancels; terms of
        order :math:`1/N^2` remain. Costs ``n_blocks + 1`` evaluations of the statistic.
    n_splits : int, keyword-only, default 5
        Halvings averaged with ``split="halves"``.
    seed : int, keyword-only, default 0
        Seed of the halvings or of the blocks.
    groups : array of int, shape (m,), keyword-only, optional
        With ``split="jackknife"`` only: one group id per sequence (e.g.
        :func:`overlap_groups`), kept in one block. Default: every sequence its own unit.
    n_blocks : int, keyword-only, default 20
        Jackknife blocks (2 to the number of units).

    Returns
    -------
    numpy.ndarray, shape (n_positions, n_positions)
        Symmetric, non-negative, zero diagonal.

    Raises
    ------
    TypeError, ValueError
        Not a Sequences/Corpus, bad sizes or options, a token id outside
        [0, vocab_size), or a position reached by fewer than 2 sequences.

    References
    ----------
    J. Jiao, K. Venkat, Y. Han, T. Weissman, "Minimax estimation of functionals of discrete
    distributions", IEEE Trans. Inf. Theory 61(5), 2015.
    Y. Han, J. Jiao, T. Weissman, "Minimax estimation of divergences between discrete
    distributions", IEEE J. Sel. Areas Inf. Theory 1(3), 2020.
    G. Valiant, P. Valiant, "Estimating the unseen: an n/log(n)-sample estimator for entropy
    and support size, shown optimal via new CLTs", STOC 2011.
    S.-O. Chan, I. Diakonikolas, P. Valiant, G. Valiant, "Optimal algorithms for testing
    closeness of discrete distributions", SODA 2014.
    I. Diakonikolas, D. Kane, "A new approach for testing properties of discrete
    distributions", FOCS 2016.
    L. Le Cam, G. L. Yang, "Asymptotics in Statistics", 2nd ed., Springer 2000.

    Examples
    --------
    >>> from posgeo import sample_synthetic_sequences
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.dirichlet(np.full(500, 0.5), size=6) * 0.5 + rng.dirichlet(np.full(500, 0.5)) * 0.5
    >>> seqs = sample_synthetic_sequences(truth, 3000, seed=0)  # a known truth: 6 positions, 500 tokens
    >>> D = hybrid_hellinger_matrix(seqs, 6, 500)
    >>> plug_in = hellinger_matrix(positional_marginals(seqs, 6, 500))
    >>> err = lambda E: float(np.abs(E - hellinger_matrix(truth)).mean())
    >>> bool(err(D) < err(plug_in) / 3)
    True
    """
    counted = _as_counts(sequences, n_positions, vocab_size, "hybrid_hellinger_matrix", groups=groups)
    if counted is not None:
        if split != "none":
            raise ValueError(f"split={split!r} halves the sequences, which PositionalCounts do not keep; pass "
                             "split='none' (the default) for counts, or the sequences themselves")
        return counted.hybrid(resolved_count=resolved_count, reference_floor=reference_floor, n_bins=n_bins)
    if isinstance(sequences, Corpus):
        sequences = sequences.sequences
    if not isinstance(sequences, Sequences):
        raise TypeError(
            f"sequences must be a posgeo Sequences or Corpus, got {type(sequences).__name__}; "
            "build one with Sequences.from_list or load_corpus"
        )
    n = check_int(n_positions, "n_positions", minimum=2)
    V = check_int(vocab_size, "vocab_size")
    c_res = check_float(resolved_count, "resolved_count", minimum=0.0, strict_minimum=True)
    floor = check_float(reference_floor, "reference_floor", minimum=0.0)
    n_bins = check_int(n_bins, "n_bins", maximum=10_000)
    if split not in ("none", "halves", "jackknife"):
        raise ValueError(f"unknown split {split!r}; use 'none', 'halves' or 'jackknife'")
    n_splits = check_int(n_splits, "n_splits", maximum=1000)
    seed = check_int(seed, "seed", minimum=0)
    n_blocks = check_int(n_blocks, "n_blocks", minimum=2, maximum=100_000)
    if groups is not None and split != "jackknife":
        raise ValueError(
            f"groups= is used only with split='jackknife' (got split={split!r}); pass split='jackknife', or "
            "use matched_hellinger_matrix(..., groups=) for grouped half-splits"
        )
    tokens = np.asarray(sequences.tokens)
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= V):
        raise ValueError(f"token ids must lie in [0, vocab_size={V}); pass the tokenizer's vocabulary size")
    lengths = np.diff(np.asarray(sequences.offsets, dtype=np.int64))
    N = (lengths[:, None] > np.arange(n)[None, :]).sum(axis=0).astype(np.float64)
    if N.min() < 2:
        raise ValueError(
            f"position {int(np.argmax(N < 2))} is reached by fewer than 2 sequences; pass a smaller n_positions"
        )

    if split == "jackknife":
        return _jackknife_hybrid(sequences, n, V, N, groups, n_blocks, seed, c_res, floor, n_bins)
    C = _count_tables(sequences, n, V)
    # effective sample size of the cross products, and the pair's smaller one
    N_eff = np.floor(N / 2.0) if split == "halves" else N
    groups, weights = hybrid_groups(C, N, N_eff, c_res, floor, n_bins)
    H2 = hybrid_terms(C, N, groups, weights, cross_terms=split == "none")

    # split="halves": the cross terms between disjoint halves, one halving at a time
    rng = np.random.default_rng(seed)
    for _ in range(n_splits if split == "halves" else 0):
        A, B = _count_tables(sequences, n, V, stratified_halves(lengths, seed=rng))
        add_hybrid_cross_halves(H2, A, B, groups, weights, n_splits)
        del A, B
    return hybrid_finish(H2)


def _jackknife_hybrid(
    seqs: Sequences, n: int, V: int, N: np.ndarray, groups: Any, n_blocks: int, seed: int,
    c_res: float, floor: float, n_bins: int,
) -> np.ndarray:
    """``hybrid_hellinger_matrix(..., split="jackknife")``: the delete-a-block jackknife of
    the plug-in hybrid statistic, with the token groups and weights of the full corpus."""
    check_fits_in_memory((3, n, V), "the jackknife's dense count tables (about three n x V)")
    offsets = np.asarray(seqs.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    block = stratified_blocks(lengths, n_blocks, seed=seed, groups=groups)
    reach = lengths[:, None] > np.arange(n)[None, :]
    N_out = np.stack([N - reach[block == k].sum(axis=0) for k in range(n_blocks)])
    if N_out.min() < 1:
        k, i = np.unravel_index(int(np.argmin(N_out)), N_out.shape)
        raise ValueError(
            f"position {int(i)} is reached only by sequences of jackknife block {int(k)} (fewer reaching units "
            f"than the {n_blocks} blocks would spread); pass a smaller n_positions"
        )
    C = _count_tables(seqs, n, V)
    token_groups, weights = hybrid_groups(C, N, N, c_res, floor, n_bins)
    pos = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], lengths)
    keep = pos < n
    flat = pos[keep] * V + np.asarray(seqs.tokens, dtype=np.int64)[keep]
    token_block = np.repeat(block, lengths)[keep]
    T_full = plugin_hybrid_terms(C, N, token_groups, weights)
    T_out = np.zeros((n, n))
    for k in range(n_blocks):
        Ck = np.bincount(flat[token_block == k], minlength=n * V).astype(np.float64).reshape(n, V)
        T_out += plugin_hybrid_terms(C - Ck, N_out[k], token_groups, weights) / n_blocks
        del Ck
    return hybrid_finish(n_blocks * T_full - (n_blocks - 1) * T_out)
