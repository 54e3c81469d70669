"""Cosine self-similarity and the adjacency probability score (P2, Zuo et al. 2024).

P2 observes that in causal transformers without positional encodings, hidden states of
nearby positions are more similar than those of distant ones (the *adjacent pattern*), and
quantifies it with the **adjacency probability score** of the cosine self-similarity matrix
``C[k, i] = cos(X_k, X_i)``.

Definition (0-based positions)
------------------------------
For row ``k`` the pairs are ``i < j <= k``: only columns up to the row's own position (the
causal prefix), *including the diagonal* ``j = k`` (P2 normalises row ``k`` of its 1-based
matrix by ``C(k, 2)``, the number of pairs among its ``k`` causal entries). The row score is::

    ties="strict": #{i < j <= k : C[k, i] <  C[k, j]}                               / C(k+1, 2)
    ties="half"  : (#{i < j <= k : C[k, i] < C[k, j]} + #{... C[k, i] == C[k, j]}/2) / C(k+1, 2)

P2 uses the strict indicator, so tied entries (exact equality) count 0 by default. Row 0
has no pair and is skipped (its row score is ``nan``); the matrix score is the unweighted
mean of the row scores of rows ``1 .. n-1``.

Because the diagonal ``C[k, k] = 1`` is the largest cosine of its row, the ``k`` pairs
``(i, k)`` are always ascending unless tied: a matrix with random off-diagonal entries scores
``1/2 + 1/(k+1)`` on row ``k`` (about 0.6 over 32 positions), not 1/2. Pass
``include_diagonal=False`` to use the pairs ``i < j < k`` only (rows with ``k >= 2``), whose
random baseline is exactly 1/2. For a batch ``(B, n, n)`` the score is the mean
over the batch of the per-matrix scores. A random matrix scores about 0.5, a matrix whose
entries grow toward the diagonal (``C[k, i] = -|k - i|``) scores 1.

``method="naive"`` evaluates the definition literally (``O(n^3)``); ``method="fast"`` counts,
per row, the strict inversions and ties of the row prefix with a vectorised merge sort
(``O(n^2 log n)``), giving identical counts.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from ._progress import progress_bar

from ._monotonicity import (
    _as_numpy,
    _dense_ranks,
    _strict_inversions,
)

__all__ = ["adjacency_row_scores", "adjacency_score", "cosine_similarity_matrix"]

_TIES = ("strict", "half")
_METHODS = ("fast", "naive")
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

    Raises
    ------
    ValueError
        If ``X`` is not 2-D or 3-D, holds NaN/inf, or has a zero vector (its cosine is
        undefined; drop that position or add a small offset).
    TypeError
        If ``X`` is not numeric.

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
        if not torch.is_floating_point(T):
            T = T.to(torch.get_default_dtype())
        shape = tuple(T.shape)
        finite = bool(torch.isfinite(T).all())
        norms_t = T.norm(dim=-1)
        zero = (norms_t == 0).cpu().numpy() if T.ndim in (2, 3) else None
    else:
        A = _as_numpy(X, "X")
        shape = A.shape
        finite = bool(np.all(np.isfinite(A)))
        norms_a = np.linalg.norm(A, axis=-1) if A.ndim in (2, 3) else None
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
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}, got {ties!r}")
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
