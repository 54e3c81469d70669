r"""Positional marginals of a corpus and the noise floor of their Hellinger geometry.

The positional marginal :math:`\mu_i` is the distribution of the token found at position
:math:`i` over all sequences long enough to have one. Counting is fully vectorised: the
position of every token of a ragged corpus is ``arange(total) - repeat(starts, lengths)``
and one ``np.bincount`` of ``position * V + token`` fills the whole ``(n, V)`` table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._corpus import Corpus, Sequences

__all__ = [
    "positional_marginals",
    "position_counts",
    "NoiseFloor",
    "hellinger_noise_floor",
    "debiased_hellinger_matrix",
]


def _check_pos_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


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


def _as_csr(sequences: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(tokens, offsets)`` for a Sequences, Corpus or iterable of integer sequences."""
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
        tokens = np.concatenate(nonempty).astype(np.int64, copy=False) if nonempty else np.zeros(0, np.int64)
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
    lo, hi = int(tokens.min()), int(tokens.max())
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
    sequences : Sequences, Corpus or iterable of integer sequences
        The corpus. :class:`Sequences` (and :class:`Corpus`) take a fully vectorised path;
        lists, numpy arrays or torch tensors are converted one sequence at a time.
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
    n = _check_pos_int("n_positions", n_positions)
    V = _check_pos_int("vocab_size", vocab_size)
    tokens, offsets = _as_csr(sequences)
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
    n = _check_pos_int("n_positions", n_positions)
    _, offsets = _as_csr(sequences)
    return _reach_counts(offsets, n)


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
    sequences : Sequences, Corpus or iterable of integer sequences
        The corpus.
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
    n = _check_pos_int("n_positions", n_positions)
    V = _check_pos_int("vocab_size", vocab_size)
    n_splits = _check_pos_int("n_splits", n_splits)
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 0:
        raise ValueError(f"min_count must be an int >= 0, got {min_count!r}")
    tokens, offsets = _as_csr(sequences)
    _check_ids(tokens, V)
    counts = _reach_counts(offsets, n)
    _check_reach(counts, offsets, n)

    m = offsets.size - 1
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
        perm = rng.permutation(m)
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
        pa = np.bincount(fa, weights=np.ones(fa.size), minlength=n * V).reshape(n, V)
        pb = np.bincount(fb, weights=np.ones(fb.size), minlength=n * V).reshape(n, V)
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


def debiased_hellinger_matrix(
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
    sequences : Sequences, Corpus or iterable of integer sequences
        The corpus.
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
    >>> D = debiased_hellinger_matrix(c, 32, 64)
    >>> from posgeo._geometry import hellinger_matrix
    >>> bool((D <= hellinger_matrix(positional_marginals(c, 32, 64)) + 1e-12).all())
    True
    """
    from ._geometry import hellinger_matrix

    V = _check_pos_int("vocab_size", vocab_size)
    tokens, offsets = _as_csr(sequences)  # convert a generic iterable once
    _check_ids(tokens, V)
    seqs = Sequences(tokens=tokens, offsets=offsets, vocab_size=V)
    mu = positional_marginals(seqs, n_positions, V)
    nf = hellinger_noise_floor(seqs, n_positions, V, seed=seed, n_splits=n_splits)
    H = np.asarray(hellinger_matrix(mu, metric="chord"), dtype=np.float64)
    corr = H**2 - nf.bias_sq[:, None] - nf.bias_sq[None, :]
    D = np.sqrt(np.clip(corr, 0.0, None))
    np.fill_diagonal(D, 0.0)
    return D
