"""Monotonicity violation rate of a positional encoding (P1, Conjecture 5).

P1 conjectures that a learned encoder is *monotone*: positions that are closer (in sequence
offset, or in the Hellinger distance of their token marginals) get encoding vectors that are
closer in Euclidean distance. This module measures how often that fails.

Definition
----------
Let ``E`` be an ``(n, n)`` matrix of encoding distances, ``E[i, j] = ||p_i - p_j||`` for an
encoding ``P`` of shape ``(n, d)``, and ``R`` a *reference* dissimilarity, by default the
sequence offset ``R[i, j] = |i - j|`` (or a distance matrix ``D`` passed as ``reference=``,
e.g. the Hellinger matrix of the positional marginals). Row ``i`` of both matrices is read
for anchor ``i``; matrices need not be symmetric.

For every anchor ``i`` and every *unordered* pair ``{j, k}`` with ``j != i``, ``k != i``,
``j != k``, the pair is **comparable** when ``R[i, j] != R[i, k]``; label it so that
``R[i, j] < R[i, k]`` (``j`` is strictly closer to the anchor than ``k``). A comparable pair is

* a **violation** when ``E[i, j] > E[i, k]`` (the closer position is farther in the encoding),
* a **tie** when ``E[i, j] == E[i, k]`` (exact floating-point equality),
* concordant otherwise.

Pairs with ``R[i, j] == R[i, k]`` (e.g. ``j = i - t`` and ``k = i + t`` under the offset
reference) are not comparable and are never counted. The rate is::

    ties="half"      : (violations + ties / 2) / comparable      (default)
    ties="violation" : (violations + ties)     / comparable
    ties="ignore"    : violations / (comparable - ties)           (tied pairs dropped)

so a monotone encoding scores 0, a reversed one 1 and a random encoding about 0.5.
``nan`` is returned when the denominator is 0.

Two implementations give identical counts: ``method="naive"`` evaluates the definition
literally (``O(n^3)``, an ``(n-1, n-1)`` comparison table per anchor) and ``method="fast"``
(``O(n^2 log n)``) counts, per anchor, the strict inversions of ``E``'s row against the order
of ``R``'s row with a bottom-up merge sort vectorised over anchors (numpy only), ties in both
orders handled exactly. On 2 CPU cores at ``n = 4096`` it takes about 5 s against about 100 s
for the naive method (``benchmarks/bench_orderstats.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from ._progress import progress_bar

__all__ = [
    "MonotonicityResult",
    "monotonicity_violation_rate",
    "monotonicity_violations",
    "offset_reference",
]

TiesPolicy = Literal["half", "violation", "ignore"]
_TIES = ("half", "violation", "ignore")
_METHODS = ("fast", "naive")
# Elements (anchors x padded row length) handled at once by the fast method (~32 MiB int64).
_CHUNK_ELEMENTS = 1 << 22


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
        Comparable pairs with ``E[i, j] == E[i, k]``.
    ties_policy : str
        How ties entered ``rate``: ``"half"``, ``"violation"`` or ``"ignore"``.
    """

    rate: float
    violations: int
    comparable: int
    ties: int
    ties_policy: str


def _as_numpy(x: Any, name: str) -> NDArray[np.float64]:
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor without importing torch
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a numeric array, got {type(x).__name__}; pass a numpy array or "
            "torch tensor of real numbers"
        ) from exc
    return arr


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
    ValueError
        If ``n < 1``.

    Examples
    --------
    >>> offset_reference(3).tolist()
    [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}; pass the number of positions")
    idx = np.arange(int(n), dtype=np.int64)
    return np.abs(idx[:, None] - idx[None, :])


def _encoding_distances(P: Any) -> NDArray[np.float64]:
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
    method: Literal["fast", "naive"] = "fast",
    anchors: ArrayLike | None = None,
    progress: bool = True,
) -> MonotonicityResult:
    """Count monotonicity violations of an encoding (see the module docstring).

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
        How pairs with ``E[i, j] == E[i, k]`` (exact equality) enter the rate: half a
        violation, a full violation, or dropped from numerator and denominator. The counts
        in the result do not depend on it.
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
        out of range, or ``ties``/``method`` is unknown.
    TypeError
        If an input is not numeric.

    Examples
    --------
    >>> import numpy as np
    >>> line = np.arange(6.0)[:, None]          # p_i = i: perfectly monotone
    >>> monotonicity_violations(line, progress=False)
    MonotonicityResult(rate=0.0, violations=0, comparable=54, ties=0, ties_policy='half')
    >>> E = 6.0 - offset_reference(6)            # distances decrease with the offset
    >>> monotonicity_violations(distances=E, progress=False).rate
    1.0
    """
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}, got {ties!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if (P is None) == (distances is None):
        raise ValueError(
            "give exactly one of P (an (n, d) encoding) and distances= (an (n, n) matrix)"
        )
    if P is not None:
        E = _encoding_distances(P)
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
        return block[keep[idx]].reshape(len(idx), n - 1)

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
    method: Literal["fast", "naive"] = "fast",
    anchors: ArrayLike | None = None,
    progress: bool = True,
) -> float:
    """Return the monotonicity violation rate of an encoding (P1, Conjecture 5).

    A thin wrapper returning ``monotonicity_violations(...).rate``; see the module docstring
    for the exact definition and :func:`monotonicity_violations` for the parameters.

    Parameters
    ----------
    P : array_like of shape (n, d), optional
        The encoding (exactly one of ``P`` and ``distances``).
    distances : array_like of shape (n, n), optional
        Precomputed encoding distances.
    reference : array_like of shape (n, n), optional
        Reference dissimilarity ordering the pairs; default the offset ``|i - j|``.
    ties : {"half", "violation", "ignore"}, default "half"
        Treatment of exactly tied encoding distances.
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
        method=method,
        anchors=anchors,
        progress=progress,
    ).rate
