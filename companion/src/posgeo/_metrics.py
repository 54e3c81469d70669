"""Metrics of position tables and hidden states: separation (Theorem 4), monotonicity in
offset (P1 section 7) and the adjacency score of causal models (P2)."""

from __future__ import annotations

from typing import Literal
import numpy as np
from ._progress import progress_bar
from numpy.typing import ArrayLike, NDArray
import math
from dataclasses import dataclass
from typing import Any
from .validation import check_float, check_int, check_not_complex, check_real_array, check_table

__all__ = [
    'cosine_similarity_matrix',
    'adjacency_score',
    'monotonicity_violation_rate',
    'SeparationStats',
    'separation_stats',
]


# The adjacency score and the monotonicity rate accept different tie policies: the two
# tuples must have distinct names (one module since the merge of _adjacency and _monotonicity).
_ADJACENCY_TIES = ("strict", "half")
_METHODS = ("fast", "naive")
# Elements (rows x padded row length) handled at once by the fast methods (~32 MiB int64).
_CHUNK_ELEMENTS = 1 << 22


def cosine_similarity_matrix(X: Any) -> Any:
    """Return the cosine self-similarity matrix ``C[i, j] = cos(X_i, X_j)``.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor of shape (n, d) or (B, n, d)
        Hidden states, one vector per position (optionally batched).

    Returns
    -------
    numpy.ndarray or torch.Tensor of shape (n, n) or (B, n, n)
        Same array library as the input (numpy results are float64; torch keeps the input's
        floating dtype and device). Values are clipped to ``[-1, 1]`` and the diagonal is
        set to exactly 1, so rounding never makes ``C[k, k]`` differ from its true value.
        Rows whose norm would overflow or underflow (e.g. ``[1e200, 1e200]``) are divided
        by their largest entry first, which leaves their cosines unchanged.

    Raises
    ------
    ValueError
        If ``X`` is not 2-D or 3-D, holds NaN/inf, or has a zero vector (its cosine is
        undefined; drop that position or add a small offset).
    TypeError
        If ``X`` is not numeric, or is complex (pass its real part or modulus explicitly).

    Examples
    --------
    >>> import numpy as np
    >>> cosine_similarity_matrix(np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])).round(3).tolist()
    [[1.0, 0.707, 0.0], [0.707, 1.0, 0.707], [0.0, 0.707, 1.0]]
    """
    is_torch = hasattr(X, "detach") and hasattr(X, "norm")
    if is_torch:
        import torch

        T = X.detach()
        check_not_complex(T, "X")
        if not torch.is_floating_point(T):
            T = T.to(torch.get_default_dtype())
        shape = tuple(T.shape)
        finite = bool(torch.isfinite(T).all())
        norms_t = T.norm(dim=-1)
        if T.ndim in (2, 3) and finite:
            # a norm that overflowed (inf) or may have lost its squares to underflow: divide
            # those rows by their largest entry (cosines are invariant); other rows untouched
            bad = ~torch.isfinite(norms_t) | (norms_t < torch.finfo(T.dtype).tiny ** 0.25)
            fix = bad & (T.abs().amax(dim=-1) > 0)
            if bool(fix.any()):
                T = T.clone()
                T[fix] = T[fix] / T[fix].abs().amax(dim=-1, keepdim=True)
                norms_t = norms_t.clone()
                norms_t[fix] = T[fix].norm(dim=-1)
        zero = (norms_t == 0).cpu().numpy() if T.ndim in (2, 3) else None
    else:
        A = _as_numpy(X, "X")
        shape = A.shape
        finite = bool(np.all(np.isfinite(A)))
        with np.errstate(over="ignore", under="ignore"):  # handled by _rescale_extreme_rows
            norms_a = np.linalg.norm(A, axis=-1) if A.ndim in (2, 3) else None
        if norms_a is not None and finite:
            A, norms_a = _rescale_extreme_rows(A, norms_a)
        zero = (norms_a == 0) if norms_a is not None else None
    if len(shape) not in (2, 3):
        raise ValueError(
            f"X must have shape (n, d) or (B, n, d), got shape {shape}; pass hidden states "
            "with one vector per position"
        )
    if not finite:
        raise ValueError("X contains NaN or infinite values; remove or impute them first")
    assert zero is not None
    if zero.any():
        where = np.argwhere(zero)[:5].tolist()
        raise ValueError(
            f"X has zero vectors (index {where}{'...' if zero.sum() > 5 else ''}), whose "
            "cosine similarity is undefined; drop those positions or add a small offset"
        )
    if is_torch:
        U = T / norms_t.unsqueeze(-1)
        C = (U @ U.transpose(-1, -2)).clamp(-1.0, 1.0)
        C.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        return C
    U = A / norms_a[..., None]
    Cn = np.clip(U @ np.swapaxes(U, -1, -2), -1.0, 1.0)
    idx = np.arange(shape[-2])
    Cn[..., idx, idx] = 1.0
    return Cn


_TINY_NORM = np.finfo(np.float64).tiny ** 0.25
"""Below this norm (about 1e-77) the squares of a row's entries may have underflowed."""


def _rescale_extreme_rows(A: NDArray[np.float64], norms: NDArray[np.float64]) -> tuple[
    NDArray[np.float64], NDArray[np.float64]
]:
    """Divide the rows whose norm overflowed or may have underflowed by their largest entry.

    Cosines are invariant to scaling a row, so this changes nothing but the rounding, and
    only in those rows: every row with a finite norm above :data:`_TINY_NORM` keeps its
    exact values. Zero rows stay zero (and are reported by the caller).
    """
    bad = ~np.isfinite(norms) | (norms < _TINY_NORM)
    if not bad.any():
        return A, norms
    top = np.max(np.abs(A), axis=-1)
    fix = bad & (top > 0)
    if not fix.any():
        return A, norms
    A, norms = A.copy(), norms.copy()
    A[fix] = A[fix] / top[fix][:, None]
    norms[fix] = np.linalg.norm(A[fix], axis=-1)
    return A, norms


def _check_C(C: Any) -> NDArray[np.float64]:
    A = _as_numpy(C, "C")
    if A.ndim not in (2, 3) or A.shape[-1] != A.shape[-2]:
        raise ValueError(
            f"C must be square, got shape {A.shape}; pass a (n, n) or (B, n, n) similarity "
            "matrix, e.g. cosine_similarity_matrix(X)"
        )
    if A.shape[-1] < 2:
        raise ValueError(
            f"C must have at least 2 positions to contain a pair, got shape {A.shape}"
        )
    if not np.all(np.isfinite(A)):
        raise ValueError("C contains NaN or infinite values; remove or impute them first")
    return A


def _row_counts_fast(rows: NDArray[np.float64], k: NDArray[np.int64]) -> tuple[
    NDArray[np.int64], NDArray[np.int64]
]:
    """(ascending pairs, tied pairs) of the prefixes ``rows[r, :k[r] + 1]``."""
    r, n = rows.shape
    outside = np.arange(n)[None, :] > k[:, None]
    # +inf (C is finite) above every entry: the non-causal tail sits at the end of each row
    # with the largest value, so it adds no strict inversion; its tied pairs are subtracted.
    ranks, tied_all = _dense_ranks(np.where(outside, np.inf, rows))
    inversions = _strict_inversions(ranks)
    n_out = n - 1 - k
    tied = tied_all - n_out * (n_out - 1) // 2
    pairs = k * (k + 1) // 2
    return pairs - inversions - tied, tied


def _row_counts_naive(x: NDArray[np.float64]) -> tuple[int, int]:
    """Literal definition for one causal prefix ``x = C[k, :k+1]``."""
    i, j = np.triu_indices(len(x), 1)
    return int((x[i] < x[j]).sum()), int((x[i] == x[j]).sum())


def adjacency_row_scores(
    C: Any,
    *,
    ties: Literal["strict", "half"] = "strict",
    method: Literal["fast", "naive"] = "fast",
    include_diagonal: bool = True,
    progress: bool = True,
) -> NDArray[np.float64]:
    """Return the adjacency probability score of every row (P2).

    Parameters
    ----------
    C : array_like of shape (n, n) or (B, n, n)
        Similarity matrix (e.g. :func:`cosine_similarity_matrix`); only the causal part
        ``C[k, :k+1]`` of row ``k`` is read.
    ties : {"strict", "half"}, default "strict"
        ``"strict"`` (P2): a tie ``C[k, i] == C[k, j]`` counts 0; ``"half"``: it counts 1/2.
    method : {"fast", "naive"}, default "fast"
        Merge-sort counting (``O(n^2 log n)``) or the literal ``O(n^3)`` definition.
    include_diagonal : bool, default True
        Pairs ``i < j <= k`` (True, as in P2's ``C(k, 2)`` normalisation) or ``i < j < k``.
    progress : bool, default True
        Show a tqdm progress bar.

    Returns
    -------
    numpy.ndarray of shape (n,) or (B, n)
        Row scores in ``[0, 1]``; rows without a pair (row 0, and row 1 when
        ``include_diagonal=False``) are ``nan``.

    Raises
    ------
    ValueError
        If ``C`` is not square (``(n, n)`` or ``(B, n, n)``), has ``n < 2``, holds NaN/inf, or
        ``ties``/``method`` is unknown.
    TypeError
        If ``C`` is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> k = np.arange(4)
    >>> adjacency_row_scores(-np.abs(k[:, None] - k[None, :]), progress=False).tolist()
    [nan, 1.0, 1.0, 1.0]
    >>> adjacency_row_scores(np.ones((4, 4)), ties="half", progress=False).tolist()
    [nan, 0.5, 0.5, 0.5]
    """
    if ties not in _ADJACENCY_TIES:
        raise ValueError(f"ties must be one of {_ADJACENCY_TIES}, got {ties!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    A = _check_C(C)
    batched = A.ndim == 3
    B = A.shape[0] if batched else 1
    n = A.shape[-1]
    if not include_diagonal and n < 3:
        raise ValueError(
            f"C must have at least 3 positions when include_diagonal=False, got n={n}"
        )
    rows = A.reshape(B * n, n)
    # last causal column read in each row
    kk = np.tile(np.arange(n, dtype=np.int64), B) - (0 if include_diagonal else 1)
    asc = np.zeros(B * n, dtype=np.int64)
    tied = np.zeros(B * n, dtype=np.int64)
    if method == "naive":
        for r in progress_bar(range(B * n), enabled=progress, desc="adjacency (naive)"):
            asc[r], tied[r] = _row_counts_naive(rows[r, : kk[r] + 1])
    else:
        padded = 1 << max(n - 1, 1).bit_length()
        chunk = max(1, _CHUNK_ELEMENTS // padded)
        for s in progress_bar(range(0, B * n, chunk), enabled=progress, desc="adjacency (fast)"):
            asc[s : s + chunk], tied[s : s + chunk] = _row_counts_fast(
                rows[s : s + chunk], kk[s : s + chunk]
            )
    pairs = kk * (kk + 1) // 2
    num = asc + (0.5 * tied if ties == "half" else 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(pairs > 0, num / np.maximum(pairs, 1), np.nan)
    return scores.reshape(B, n) if batched else scores


def adjacency_score(
    C: Any,
    *,
    ties: Literal["strict", "half"] = "strict",
    method: Literal["fast", "naive"] = "fast",
    include_diagonal: bool = True,
    progress: bool = True,
) -> float:
    """Return the adjacency probability score of a similarity matrix (P2).

    The mean of :func:`adjacency_row_scores` over the rows that have a pair; for a batch
    ``(B, n, n)``, the mean over the batch of the per-matrix scores (equal weights).

    Parameters
    ----------
    C : array_like of shape (n, n) or (B, n, n)
        Similarity matrix, e.g. ``cosine_similarity_matrix(hidden_states)``.
    ties : {"strict", "half"}, default "strict"
        Tie handling, see :func:`adjacency_row_scores`.
    method : {"fast", "naive"}, default "fast"
        Implementation (identical results).
    include_diagonal : bool, default True
        Whether the pairs of row ``k`` may use column ``k`` (see the module docstring).
    progress : bool, default True
        Show a tqdm progress bar.

    Returns
    -------
    float
        Score in ``[0, 1]``: about 0.5 for random similarities, 1 for a perfect adjacent
        pattern.

    Raises
    ------
    ValueError
        See :func:`adjacency_row_scores`.
    TypeError
        If ``C`` is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(32, 8))
    >>> C = cosine_similarity_matrix(X)
    >>> round(adjacency_score(C, progress=False), 2)  # random, but the diagonal is largest
    0.61
    >>> round(adjacency_score(C, include_diagonal=False, progress=False), 2)
    0.52
    >>> round(adjacency_score(cosine_similarity_matrix(np.cumsum(X, axis=0)), progress=False), 1)
    0.9
    """
    scores = adjacency_row_scores(
        C, ties=ties, method=method, include_diagonal=include_diagonal, progress=progress
    )
    per_matrix = np.atleast_2d(scores)[:, 1 if include_diagonal else 2 :].mean(axis=1)
    return float(per_matrix.mean())

TiesPolicy = Literal["half", "violation", "ignore"]
_MONOTONICITY_TIES = ("half", "violation", "ignore")


@dataclass(frozen=True)
class MonotonicityResult:
    """Counts behind a monotonicity violation rate.

    Attributes
    ----------
    rate : float
        The violation rate under the ``ties`` policy (``nan`` if its denominator is 0).
    violations : int
        Comparable pairs with ``E[i, j] > E[i, k]`` (strict), summed over anchors.
    comparable : int
        Pairs with ``R[i, j] < R[i, k]`` (strict), summed over anchors.
    ties : int
        Comparable pairs with ``E[i, j] == E[i, k]`` (equal up to rounding, see ``tie_rtol``).
    ties_policy : str
        How ties entered ``rate``: ``"half"``, ``"violation"`` or ``"ignore"``.
    """

    rate: float
    violations: int
    comparable: int
    ties: int
    ties_policy: str


def _as_numpy(x: Any, name: str) -> NDArray[np.float64]:
    """``x`` (array-like or torch tensor) as float64; complex input is refused, not truncated."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
        if arr.dtype == object:  # e.g. a list mixing Python and numpy scalars
            arr = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a numeric array, got {type(x).__name__}; pass a numpy array or "
            "torch tensor of real numbers"
        ) from exc
    return check_real_array(arr, name)


def _check_square(M: NDArray[np.float64], name: str) -> None:
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(
            f"{name} must be square, got shape {M.shape}; pass a (n, n) distance matrix"
        )
    if not np.all(np.isfinite(M)):
        raise ValueError(
            f"{name} contains NaN or infinite values; remove or impute them before "
            "computing monotonicity"
        )


def offset_reference(n: int) -> NDArray[np.int64]:
    """Return the sequence-offset reference matrix ``R[i, j] = |i - j|``.

    Parameters
    ----------
    n : int
        Number of positions (``n >= 1``).

    Returns
    -------
    numpy.ndarray of shape (n, n), int64
        ``|i - j|``.

    Raises
    ------
    TypeError
        If ``n`` is not an int (``bool`` and floats, even integral ones, are refused).
    ValueError
        If ``n < 1``.

    Examples
    --------
    >>> offset_reference(3).tolist()
    [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    """
    n = check_int(n, "n", hint="pass the number of positions")
    idx = np.arange(n, dtype=np.int64)
    return np.abs(idx[:, None] - idx[None, :])


def encoding_distances(P: Any) -> NDArray[np.float64]:
    """Euclidean distances between the rows of an encoding, exactly symmetric.

    Parameters
    ----------
    P : array_like or torch.Tensor of shape (n, d)
        One real vector per position.

    Returns
    -------
    numpy.ndarray of shape (n, n), float64
        Computed pairwise with :func:`scipy.spatial.distance.pdist` (no Gram-matrix
        cancellation), zero diagonal.

    Raises
    ------
    TypeError
        If ``P`` is not numeric, or is complex (pass its real part or modulus explicitly).
    ValueError
        If ``P`` is not 2-D or holds NaN/inf.

    Examples
    --------
    >>> encoding_distances([[0.0, 0.0], [3.0, 4.0]]).tolist()
    [[0.0, 5.0], [5.0, 0.0]]
    """
    from scipy.spatial.distance import pdist, squareform

    arr = _as_numpy(P, "P")
    if arr.ndim != 2:
        raise ValueError(
            f"P must be a 2-D encoding of shape (n, d), got shape {arr.shape}; pass one "
            "vector per position (or distances= for a precomputed (n, n) matrix)"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("P contains NaN or infinite values; remove or impute them first")
    if arr.shape[0] < 2:
        return np.zeros((arr.shape[0], arr.shape[0]))
    # pdist evaluates each pair once: the matrix is exactly symmetric, with a zero diagonal.
    return squareform(pdist(arr, metric="euclidean"))


# --------------------------------------------------------------------------- counting engine
def _tied_pairs_sorted(S: NDArray[Any]) -> NDArray[np.int64]:
    """Per row of a row-wise sorted array, the number of pairs of equal elements."""
    r, m = S.shape
    if m < 2:
        return np.zeros(r, dtype=np.int64)
    new_run = np.ones((r, m), dtype=bool)
    new_run[:, 1:] = S[:, 1:] != S[:, :-1]
    return _pairs_within_runs(new_run)


def _pairs_within_runs(new_run: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Sum over runs of C(len, 2); ``new_run[r, t]`` flags the first element of each run."""
    r, m = new_run.shape
    idx = np.broadcast_to(np.arange(m, dtype=np.int64), (r, m))
    start = np.maximum.accumulate(np.where(new_run, idx, 0), axis=1)
    # element t has (t - start) equal predecessors in its run
    return (idx - start).sum(axis=1)


def _dense_ranks(X: NDArray[Any]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per-row dense ranks (equal values share a rank, values in ``[0, m)``) and, per row,
    the number of pairs of equal elements."""
    r, m = X.shape
    order = np.argsort(X, axis=1, kind="stable")
    S = np.take_along_axis(X, order, axis=1)
    new = np.ones((r, m), dtype=bool)
    if m > 1:
        new[:, 1:] = S[:, 1:] != S[:, :-1]
    ranks_sorted = np.cumsum(new, axis=1, dtype=np.int64) - 1
    ranks = np.empty((r, m), dtype=np.int64)
    np.put_along_axis(ranks, order, ranks_sorted, axis=1)
    return ranks, _pairs_within_runs(new)


def _strict_inversions(X: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
    """Per row, the number of index pairs ``s < t`` with ``X[r, s] > X[r, t]``.

    Bottom-up merge sort over all rows at once. At the level merging sorted halves of width
    ``w``, a stable sort places every element of the right half after the equal elements of
    the left half, so a right element with index ``t`` (in its half) landing at merged
    position ``pos`` has ``w - (pos - t)`` strictly greater left elements: summed over the
    right half, ``w*w + w*(w-1)/2 - sum(pos)`` inversions. The stable sort of two sorted runs
    is a linear-time merge (timsort), so the total is ``O(m log m)`` per row.
    """
    r, m = X.shape
    if m < 2 or r == 0:
        return np.zeros(r, dtype=np.int64)
    M = 1
    while M < m:
        M *= 2
    # Padding at the end with a value above every element adds no strict inversion.
    Y = np.full((r, M), int(X.max()) + 1, dtype=np.int64)
    Y[:, :m] = X
    total = np.zeros(r, dtype=np.int64)
    w = 1
    while w < M:
        Z = Y.reshape(-1, 2 * w)  # one row per block of two sorted halves
        order = np.argsort(Z, axis=1, kind="stable")
        pos = np.arange(2 * w, dtype=np.int64)
        sum_pos_right = np.where(order >= w, pos, 0).sum(axis=1)
        inversions = w * w + w * (w - 1) // 2 - sum_pos_right
        total += inversions.reshape(r, -1).sum(axis=1)
        Y = np.take_along_axis(Z, order, axis=1).reshape(r, M)
        w *= 2
    return total


def _merge_near_ties(X: NDArray[Any], rtol: float) -> NDArray[Any]:
    """Rows of ``X`` with near-equal values made equal: ties up to rounding.

    Per row, the sorted values form groups wherever successive gaps are at most
    ``rtol * max|row|``; every value is replaced by its group's smallest value. So values that
    are equal in exact arithmetic but rounded apart (the equal chords of a circle, by a few
    units in the last place) become exact ties, the same on every machine, and values farther
    apart keep their order. ``rtol = 0`` returns ``X`` unchanged.
    """
    r, m = X.shape
    if rtol == 0.0 or m < 2 or r == 0:
        return X
    order = np.argsort(X, axis=1, kind="stable")
    S = np.take_along_axis(X, order, axis=1)
    tol = rtol * np.maximum(np.abs(S[:, :1]), np.abs(S[:, -1:]))  # the row's largest magnitude
    new_group = np.ones((r, m), dtype=bool)
    new_group[:, 1:] = (S[:, 1:] - S[:, :-1]) > tol
    idx = np.broadcast_to(np.arange(m, dtype=np.int64), (r, m))
    first = np.maximum.accumulate(np.where(new_group, idx, 0), axis=1)
    out = np.empty_like(S)
    np.put_along_axis(out, order, np.take_along_axis(S, first, axis=1), axis=1)
    return out


def _pair_counts_fast(
    A: NDArray[Any], B: NDArray[Any]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Per row: (comparable, violations, ties) for reference rows ``A`` and value rows ``B``.

    Pairs are unordered index pairs within a row; comparable means ``A`` differs, a violation
    is ``B`` strictly reversed relative to ``A``, a tie is ``B`` equal on a comparable pair.
    """
    r, m = A.shape
    total = m * (m - 1) // 2
    ra, tied_a = _dense_ranks(A)
    rb, tied_b = _dense_ranks(B)
    # lexicographic order by (A, B): pairs tied in A never form a strict inversion of B
    key = ra * m + rb
    order = np.argsort(key, axis=1)
    sorted_key = np.take_along_axis(key, order, axis=1)
    tied_ab = _tied_pairs_sorted(sorted_key)
    violations = _strict_inversions(np.take_along_axis(rb, order, axis=1))
    return total - tied_a, violations, tied_b - tied_ab


def _pair_counts_naive(a: NDArray[Any], b: NDArray[Any]) -> tuple[int, int, int]:
    """Literal definition for one row: ordered pairs (j, k) with a_j < a_k."""
    closer = a[:, None] < a[None, :]
    comparable = int(closer.sum())
    violations = int((closer & (b[:, None] > b[None, :])).sum())
    ties = int((closer & (b[:, None] == b[None, :])).sum())
    return comparable, violations, ties


def _rate(violations: int, comparable: int, ties: int, policy: str) -> float:
    if policy == "half":
        num, den = violations + 0.5 * ties, comparable
    elif policy == "violation":
        num, den = float(violations + ties), comparable
    else:
        num, den = float(violations), comparable - ties
    return float(num / den) if den > 0 else float("nan")


def monotonicity_violations(
    P: ArrayLike | None = None,
    *,
    distances: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    ties: TiesPolicy = "half",
    tie_rtol: float = 1e-12,
    method: Literal["fast", "naive"] = "fast",
    anchors: ArrayLike | None = None,
    progress: bool = True,
) -> MonotonicityResult:
    """Count monotonicity violations of an encoding (P1, Conjecture 5).

    For every anchor ``i`` and every unordered pair ``{j, k}`` of other positions with
    ``R[i, j] < R[i, k]`` (``R`` the offset ``|i - j|`` unless ``reference`` is given; pairs
    with equal reference values are not comparable), the pair is a *violation* when the
    encoding reverses the order, ``E[i, j] > E[i, k]``, and a *tie* when the two distances are
    equal. Equality is judged up to rounding (``tie_rtol``), in ``E`` and in ``R`` alike. The
    rate is ``(violations + ties / 2) / comparable`` under the default policy.

    Parameters
    ----------
    P : array_like of shape (n, d), optional
        The encoding, one vector per position; distances are Euclidean (computed pairwise
        with :func:`scipy.spatial.distance.pdist`, so the matrix is exactly symmetric).
        Give exactly one of ``P`` and ``distances``.
    distances : array_like of shape (n, n), optional
        Precomputed encoding distances ``E``; row ``i`` is read for anchor ``i``.
    reference : array_like of shape (n, n), optional
        Reference dissimilarity ``R`` ordering the pairs (e.g. a Hellinger matrix). Default:
        the offset ``|i - j|``. Pairs tied in ``R`` are not comparable.
    ties : {"half", "violation", "ignore"}, default "half"
        How pairs with ``E[i, j] == E[i, k]`` (equal up to ``tie_rtol``) enter the rate: half
        a violation, a full violation, or dropped from numerator and denominator. The counts
        in the result do not depend on it.
    tie_rtol : float, default 1e-12
        Values of an anchor's row (encoding distances, and reference values) closer than
        ``tie_rtol`` times the row's largest value are equal: the sorted row is cut into
        groups wherever two successive values differ by more, and each group counts as one
        value. Distances equal in exact arithmetic (the chords at offsets ``t`` and ``n - t``
        of a closed circle) are rounded apart by a few units in the last place, differently
        on different CPUs; merged, they are ties on every machine. 0 compares exactly.
    method : {"fast", "naive"}, default "fast"
        ``"fast"``: per-anchor inversion counting by merge sort, ``O(n^2 log n)``.
        ``"naive"``: literal ``O(n^3)`` pair comparison (a reference for tests).
    anchors : array_like of int, optional
        Restrict to these anchors (e.g. a random subset for a quick estimate); default all.
        Repeated anchors are counted repeatedly.
    progress : bool, default True
        Show a tqdm progress bar (honours ``TQDM_DISABLE``).

    Returns
    -------
    MonotonicityResult
        ``rate``, ``violations``, ``comparable``, ``ties`` and the ``ties_policy`` used.

    Raises
    ------
    ValueError
        If both or neither of ``P``/``distances`` are given, a matrix is not square or holds
        NaN/inf, ``reference`` has another shape than the distances, ``n < 3``, an anchor is
        out of range, ``tie_rtol`` is negative or above 1e-3, or ``ties``/``method`` is
        unknown.
    TypeError
        If an input is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> ring = np.c_[np.cos(2 * np.pi * np.arange(8) / 8), np.sin(2 * np.pi * np.arange(8) / 8)]
    >>> monotonicity_violations(ring, progress=False).ties   # equal chords at offsets t and 8 - t
    12
    >>> line = np.arange(6.0)[:, None]          # p_i = i: perfectly monotone
    >>> monotonicity_violations(line, progress=False)
    MonotonicityResult(rate=0.0, violations=0, comparable=54, ties=0, ties_policy='half')
    >>> E = 6.0 - offset_reference(6)            # distances decrease with the offset
    >>> monotonicity_violations(distances=E, progress=False).rate
    1.0
    """
    if ties not in _MONOTONICITY_TIES:
        raise ValueError(f"ties must be one of {_MONOTONICITY_TIES}, got {ties!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    rtol = check_float(tie_rtol, "tie_rtol", minimum=0.0, maximum=1e-3,
                       hint="it absorbs rounding (about 1e-15 of a distance); the default is 1e-12, 0 compares exactly")
    if (P is None) == (distances is None):
        raise ValueError(
            "give exactly one of P (an (n, d) encoding) and distances= (an (n, n) matrix)"
        )
    if P is not None:
        E = encoding_distances(P)
    else:
        E = _as_numpy(distances, "distances")
        _check_square(E, "distances")
    n = E.shape[0]
    if n < 3:
        raise ValueError(
            f"need at least 3 positions to form a pair around an anchor, got n={n}; pass a "
            "longer encoding"
        )
    R: NDArray[Any] | None = None
    if reference is not None:
        R = _as_numpy(reference, "reference")
        _check_square(R, "reference")
        if R.shape != E.shape:
            raise ValueError(
                f"reference has shape {R.shape} but the encoding distances have shape "
                f"{E.shape}; pass a reference matrix over the same {n} positions"
            )
    if anchors is None:
        anchor_idx = np.arange(n)
    else:
        anchor_idx = np.asarray(anchors)
        if anchor_idx.ndim != 1 or not np.issubdtype(anchor_idx.dtype, np.integer):
            raise ValueError(
                f"anchors must be a 1-D array of integer positions, got {anchors!r}; "
                "e.g. anchors=np.arange(0, n, 8)"
            )
        if anchor_idx.size and (anchor_idx.min() < 0 or anchor_idx.max() >= n):
            raise ValueError(f"anchors must lie in [0, {n}), got min {anchor_idx.min()} "
                             f"and max {anchor_idx.max()}; pass valid positions")

    # off-diagonal entries of each anchor row: (len(anchors), n - 1)
    keep = np.ones((n, n), dtype=bool)
    np.fill_diagonal(keep, False)

    def rows(M: NDArray[Any] | None, idx: NDArray[Any]) -> NDArray[Any]:
        idx = np.asarray(idx)
        block = np.abs(idx[:, None] - np.arange(n)[None, :]) if M is None else M[idx]
        return _merge_near_ties(block[keep[idx]].reshape(len(idx), n - 1), rtol)

    comparable = violations = n_ties = 0
    if method == "naive":
        for i in progress_bar(anchor_idx, enabled=progress, desc="monotonicity (naive)"):
            c, v, t = _pair_counts_naive(rows(R, [i])[0], rows(E, [i])[0])
            comparable += c
            violations += v
            n_ties += t
    else:
        padded = 1 << max(n - 2, 1).bit_length()
        chunk = max(1, _CHUNK_ELEMENTS // padded)
        starts = range(0, len(anchor_idx), chunk)
        for s in progress_bar(starts, enabled=progress, desc="monotonicity (fast)"):
            idx = anchor_idx[s : s + chunk]
            c, v, t = _pair_counts_fast(rows(R, idx), rows(E, idx))
            comparable += int(c.sum())
            violations += int(v.sum())
            n_ties += int(t.sum())
    return MonotonicityResult(
        rate=_rate(violations, comparable, n_ties, ties),
        violations=violations,
        comparable=comparable,
        ties=n_ties,
        ties_policy=ties,
    )


def monotonicity_violation_rate(
    P: ArrayLike | None = None,
    *,
    distances: ArrayLike | None = None,
    reference: ArrayLike | None = None,
    ties: TiesPolicy = "half",
    tie_rtol: float = 1e-12,
    method: Literal["fast", "naive"] = "fast",
    anchors: ArrayLike | None = None,
    progress: bool = True,
) -> float:
    """Return the monotonicity violation rate of an encoding (P1, Conjecture 5).

    A thin wrapper returning ``monotonicity_violations(...).rate``; see
    :func:`monotonicity_violations` for the exact definition and the parameters.

    Parameters
    ----------
    P : array_like of shape (n, d), optional
        The encoding (exactly one of ``P`` and ``distances``).
    distances : array_like of shape (n, n), optional
        Precomputed encoding distances.
    reference : array_like of shape (n, n), optional
        Reference dissimilarity ordering the pairs; default the offset ``|i - j|``.
    ties : {"half", "violation", "ignore"}, default "half"
        Treatment of tied encoding distances.
    tie_rtol : float, default 1e-12
        Values closer than this share of a row's largest value are equal (ties up to
        rounding), see :func:`monotonicity_violations`.
    method : {"fast", "naive"}, default "fast"
        Merge-sort inversion counting or the literal ``O(n^3)`` definition (same counts).
    anchors : array_like of int, optional
        Restrict to a subset of anchors.
    progress : bool, default True
        Show a progress bar.

    Returns
    -------
    float
        The rate in ``[0, 1]`` (``nan`` when nothing is comparable). About 0.5 for a random
        encoding, 0 for a monotone one.

    Raises
    ------
    ValueError
        See :func:`monotonicity_violations`.
    TypeError
        If an input is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> P = np.random.default_rng(0).normal(size=(64, 16))
    >>> round(monotonicity_violation_rate(P, progress=False), 1)
    0.5
    >>> round(monotonicity_violation_rate(np.arange(64.0)[:, None], progress=False), 2)
    0.0
    """
    return monotonicity_violations(
        P,
        distances=distances,
        reference=reference,
        ties=ties,
        tie_rtol=tie_rtol,
        method=method,
        anchors=anchors,
        progress=progress,
    ).rate

_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _pdist(P: NDArray[np.float64]) -> NDArray[np.float64]:
    """Condensed pairwise Euclidean distances (``scipy.spatial.distance.pdist`` order), computed directly."""
    from scipy.spatial.distance import pdist

    return pdist(P, metric="euclidean")


@dataclass(frozen=True)
class SeparationStats:
    """Summary of the pairwise distances :math:`\\lVert p_i - p_j\\rVert` of a position table.

    Attributes
    ----------
    n_positions : int
        Number of rows ``n``.
    min_dist : float
        :math:`\\min_{i \\ne j} \\lVert p_i - p_j \\rVert` (0 when two rows coincide).
    argmin : tuple of (int, int)
        The pair ``(i, j)``, ``i < j``, attaining it (the first such pair in row-major order).
    mean_dist : float
        Mean over the :math:`n(n-1)/2` pairs.
    quantiles : tuple of (float, float)
        ``(q, value)`` pairs for q = 0.05, 0.25, 0.5, 0.75, 0.95.
    mean_norm : float
        Mean row norm :math:`\\frac1n\\sum_i \\lVert p_i\\rVert`, the scale of the table.
    normalised : float
        ``min_dist / mean_norm``: the minimum separation in units of the table's own scale
        (0 when the table is all zero). Scaling the table leaves it unchanged; adding a
        common vector to every row (which changes no distance) lowers it.
    relative : float
        ``min_dist / mean_dist``: the closest pair relative to a typical pair; invariant to
        scale *and* to a common offset.
    """

    n_positions: int
    min_dist: float
    argmin: tuple[int, int]
    mean_dist: float
    quantiles: tuple[tuple[float, float], ...]
    mean_norm: float
    normalised: float
    relative: float

    def quantile(self, q: float) -> float:
        """The stored quantile ``q`` (one of 0.05, 0.25, 0.5, 0.75, 0.95)."""
        for qq, value in self.quantiles:
            if math.isclose(qq, q):
                return value
        raise KeyError(f"quantile {q} not stored; available: {[qq for qq, _ in self.quantiles]}")

    def as_dict(self) -> dict[str, float | int]:
        """Flat record: ``min_dist, normalised, relative, mean_dist, mean_norm, q05 ... q95, i, j``."""
        row: dict[str, float | int] = {
            "min_dist": self.min_dist,
            "normalised": self.normalised,
            "relative": self.relative,
            "mean_dist": self.mean_dist,
            "mean_norm": self.mean_norm,
        }
        for q, value in self.quantiles:
            row[f"q{round(100 * q):02d}"] = value
        row["i"], row["j"] = self.argmin
        return row


def separation_stats(P: ArrayLike) -> SeparationStats:
    """Pairwise-distance statistics of a position table.

    Distances are computed directly (``scipy.spatial.distance.pdist``), not through the Gram
    matrix, so nearly coincident rows give an accurate small distance rather than rounding
    noise.

    Parameters
    ----------
    P : array-like, shape (n, d)
        One row per position (numpy array or torch tensor), ``n >= 2``.

    Returns
    -------
    SeparationStats

    Raises
    ------
    TypeError
        For a non-numeric array.
    ValueError
        For a table that is not 2-d, has fewer than 2 rows, or holds NaN/inf.

    Examples
    --------
    >>> s = separation_stats(np.arange(4.0)[:, None] * 0.5)  # points 0, 0.5, 1, 1.5 on a line
    >>> s.min_dist, s.argmin, s.mean_dist
    (0.5, (0, 1), 0.8333333333333334)
    >>> separation_stats([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]).min_dist  # a duplicated row
    0.0
    """
    A = check_table(P)
    n = A.shape[0]
    d = _pdist(A)
    k = int(np.argmin(d))
    iu, ju = np.triu_indices(n, 1)  # pdist's (condensed) pair order
    i, j = int(iu[k]), int(ju[k])
    min_dist = float(d[k])
    mean_dist = float(d.mean())
    mean_norm = float(np.linalg.norm(A, axis=1).mean())
    qs = np.quantile(d, _QUANTILES)
    return SeparationStats(
        n_positions=n,
        min_dist=min_dist,
        argmin=(i, j),
        mean_dist=mean_dist,
        quantiles=tuple((q, float(v)) for q, v in zip(_QUANTILES, qs)),
        mean_norm=mean_norm,
        normalised=min_dist / mean_norm if mean_norm > 0 else 0.0,
        relative=min_dist / mean_dist if mean_dist > 0 else 0.0,
    )
