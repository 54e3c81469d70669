"""The estimators of a corpus's positional geometry as functions of its count tables.

One counts representation serves every path: an (n, V) table of token counts per position with
each position's reach (the number of documents that reach it), for the whole corpus or for each
of two disjoint halves, dense (numpy) or sparse (scipy CSR). The front ends build the tables:
:mod:`posgeo._marginals` from sequences (random half-splits), :class:`posgeo.PositionalCounts`
from its stored counts (one stored split), and both call these functions.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from scipy import sparse

from .validation import check_float, check_int, check_real_array

__all__: list[str] = []

_NEAR_CHORD = 1e-4  # chords below this are recomputed from sqrt differences (as hellinger_matrix)


# --------------------------------------------------------------------------- sparse tables: rows and products


def ensure_reached(reach: np.ndarray, what: str = "") -> None:
    """Refuse counts with a position that no document reaches (the fix: ``truncate``)."""
    if reach.size and reach.min() <= 0:
        first = int(np.argmax(reach <= 0))
        raise ValueError(
            f"position {first} is reached by no document{what}; use counts.truncate({first}) (or count with "
            f"n_positions <= {first}) before computing marginals or distances"
        )


def _normalised(counts: Any, reach: np.ndarray, root: bool) -> Any:
    S = counts.astype(np.float64)
    S.data /= np.repeat(reach.astype(np.float64), np.diff(S.indptr))
    if root:
        np.sqrt(S.data, out=S.data)
    return S


_TILE = 1024  # rows per tile of the in-place passes over (n, n) arrays


def _mirror_lower(M: np.ndarray) -> None:
    """Copy the lower triangle of the square ``M`` onto its upper triangle, tile by tile."""
    n = M.shape[0]
    for i in range(0, n, _TILE):
        a = M[i : i + _TILE, i : i + _TILE]
        a[...] = np.tril(a) + np.tril(a, -1).T
        if i + _TILE < n:
            M[i : i + _TILE, i + _TILE :] = M[i + _TILE :, i : i + _TILE].T


def _symmetrize(M: np.ndarray) -> None:
    """``M <- (M + M.T) / 2`` in place, tile by tile."""
    n = M.shape[0]
    for i in range(0, n, _TILE):
        for j in range(i, n, _TILE):
            a = M[i : i + _TILE, j : j + _TILE]
            b = M[j : j + _TILE, i : i + _TILE]
            mean = 0.5 * (a + b.T)
            a[...] = mean
            b[...] = mean.T


def _add_products(out: np.ndarray, Da: np.ndarray, Db: np.ndarray | None) -> None:
    """``out += Da @ Db.T`` in place through BLAS (no (n, n) temporary); with ``Db=None``
    only the lower triangle of ``out += Da @ Da.T`` is updated (dsyrk)."""
    from scipy.linalg import blas

    c = out.T  # Fortran-ordered view: BLAS updates it (and so out) in place
    if Db is None:  # upper triangle of out.T = lower triangle of out
        r = blas.dsyrk(1.0, Da, beta=1.0, c=c, trans=0, lower=0, overwrite_c=1)
    else:  # out.T += Db @ Da.T
        r = blas.dgemm(1.0, Db, Da, beta=1.0, c=c, trans_b=1, overwrite_c=1)
    if not np.shares_memory(r, out):  # pragma: no cover - BLAS copied c after all
        out[...] = r.T


def _cross_products(A: Any, B: Any, *, dense_fraction: float = 0.125, block_bytes: int = 2**27) -> np.ndarray:
    """Dense ``A @ B.T`` (n x m) for sparse (n x V) A and (m x V) B, without any dense n x V array.

    Columns present in at least ``dense_fraction * n`` rows (of A or B) are multiplied in
    dense blocks (BLAS, accumulated in place), the others as sparse products in blocks of
    rows. ``B=None`` means ``A`` (a symmetric result). Memory: the (n, m) result, the sparse
    arrays, and about ``block_bytes`` more.
    """
    n = A.shape[0]
    A = sparse.csc_array(A)
    B = A if B is None else sparse.csc_array(B)
    same = B is A
    m = B.shape[0]
    out = np.zeros((n, m))
    colnnz = np.maximum(np.diff(A.indptr), np.diff(B.indptr))
    cut = max(1.0, dense_fraction * n)
    dense_cols = np.flatnonzero(colnnz >= cut)
    sparse_cols = np.flatnonzero((colnnz > 0) & (colnnz < cut))
    width = max(1, int(block_bytes // (8 * max(n, m, 1))))
    for s in range(0, dense_cols.size, width):
        cols = dense_cols[s : s + width]
        Da = np.asfortranarray(A[:, cols].toarray())
        _add_products(out, Da, None if same else np.asfortranarray(B[:, cols].toarray()))
    if same and dense_cols.size:
        _mirror_lower(out)
    if sparse_cols.size:
        As = sparse.csr_array(A[:, sparse_cols])
        Bt = (As if same else sparse.csr_array(B[:, sparse_cols])).T.tocsc()
        rows = max(1, int(block_bytes // (8 * max(m, 1))))
        for r in range(0, n, rows):
            out[r : r + rows] += (As[r : r + rows] @ Bt).toarray()
    if same:  # exactly symmetric (the sparse products may differ by rounding)
        _mirror_lower(out)
    return out


class OutOfMemory(MemoryError):
    """A MemoryError whose message says how much was needed and the fix."""


def out_of_memory(what: str, need: float, n: int) -> OutOfMemory:
    return OutOfMemory(
        f"out of memory computing {what} of {n:,} positions (about {need / 2**30:.2f} GiB and temporaries); "
        f"truncate the counts to fewer positions (counts.truncate(k), or count with fewer --positions), free "
        "memory, or run on a machine with more"
    )


def _chord_from_bc(bc: np.ndarray, P: Any, S: Any, metric: str) -> np.ndarray:
    """Distances from the symmetric Bhattacharyya matrix ``bc``, overwritten in place.

    As :func:`posgeo.hellinger_matrix`: chords below 1e-4 are recomputed as
    ``|(p - q) / (sqrt p + sqrt q)|`` from the sparse rows (full relative precision)."""
    n = bc.shape[0]
    np.fill_diagonal(bc, 1.0)
    near_i, near_j = [], []
    for i in range(0, n, _TILE):
        tile = bc[i : i + _TILE]
        np.clip(tile, 0.0, 1.0, out=tile)
        chord = np.sqrt(1.0 - tile)
        ii, jj = np.nonzero(chord < _NEAR_CHORD)
        keep = ii + i < jj
        near_i.append(ii[keep] + i)
        near_j.append(jj[keep])
        tile[...] = chord if metric == "chord" else 2.0 * np.arccos(tile)
        del chord
    ii, jj = np.concatenate(near_i), np.concatenate(near_j)
    for s in range(0, ii.size, 4096):
        i, j = ii[s : s + 4096], jj[s : s + 4096]
        num = P[i] - P[j]
        den = S[i] + S[j]
        den.data = 1.0 / den.data
        half = np.sqrt(np.asarray(num.multiply(den).power(2).sum(axis=1)).ravel()) / 2.0
        val = np.sqrt(2.0) * half if metric == "chord" else 4.0 * np.arcsin(np.minimum(half, 1.0))
        bc[i, j] = val
        bc[j, i] = val
    np.fill_diagonal(bc, 0.0)
    return bc


def root_marginals(counts: Any, reach: Any) -> Any:
    """``sqrt(counts / reach)`` row by row, shape (n, V): sparse (CSR) stays sparse; rows of reach 0 are 0.

    >>> root_marginals(np.array([[1.0, 3.0], [0.0, 0.0]]), np.array([4, 0])).tolist()
    [[0.5, 0.8660254037844386], [0.0, 0.0]]
    """
    N = np.maximum(np.asarray(reach, dtype=np.float64), 1.0)
    if sparse.issparse(counts):
        return _normalised(counts, N, root=True)
    return np.sqrt(counts / N[:, None])


def dense_marginals(counts: Any, reach: np.ndarray) -> np.ndarray:
    """Dense ``counts / reach[:, None]``, shape (n, V), float64, from a sparse table (every reach > 0)."""
    try:
        table = counts.astype(np.float64).toarray()
    except MemoryError:
        raise out_of_memory("the dense marginals", 8 * counts.shape[0] * counts.shape[1], counts.shape[0]) from None
    table /= reach[:, None]
    return table


# --------------------------------------------------------------------------- the plug-in, from sparse counts


def hellinger_from_counts(counts: Any, reach: np.ndarray, *, metric: str = "chord") -> np.ndarray:
    """Plug-in Hellinger distances between the rows of ``counts / reach``, from sparse square-root products.

    Equal to rounding (1e-10) to :func:`posgeo.hellinger_matrix` of the dense marginals, but
    memory O(nnz + n^2): columns present at many positions are multiplied in dense blocks
    (BLAS), rare ones as sparse products.

    Parameters
    ----------
    counts : scipy.sparse CSR array, shape (n, V)
    reach : numpy.ndarray, shape (n,)
        Every one > 0 (the row sums of ``counts``).
    metric : {"chord", "fisher-rao"}, keyword-only

    Returns
    -------
    numpy.ndarray, shape (n, n)

    Examples
    --------
    >>> hellinger_from_counts(sparse.csr_array(np.array([[1, 1], [0, 2]])), np.array([2, 2])).round(4).tolist()
    [[0.0, 0.5412], [0.5412, 0.0]]
    """
    if metric not in ("chord", "fisher-rao"):
        raise ValueError(f"unknown metric {metric!r}; use 'chord' (Hellinger) or 'fisher-rao' (geodesic)")
    ensure_reached(reach)
    n = counts.shape[0]
    try:
        S = _normalised(counts, reach, root=True)
        P = _normalised(counts, reach, root=False)
        return _chord_from_bc(_cross_products(S, None), P, S, metric)
    except OutOfMemory:
        raise
    except MemoryError:
        raise out_of_memory("the (n, n) Hellinger matrix", 8.0 * n * n + 2**27, n) from None


# --------------------------------------------------------------------------- split halves: the noise floor, the matched estimator


def noise_floor_from_halves(counts_a: Any, reach_a: np.ndarray, counts_b: Any, reach_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split-half chord distance per position between two halves' sparse tables, and the squared bias.

    ``split_half[i] = H(a_i, b_i)`` (NaN where a half is empty) and ``bias_sq =
    split_half**2 * N_a N_b / N^2`` (0 there). One split; :func:`posgeo.hellinger_noise_floor`
    averages random balanced halvings of the sequences instead (see :mod:`posgeo._marginals`).

    Returns
    -------
    split_half, bias_sq : numpy.ndarray, shape (n,) each

    Examples
    --------
    >>> a, b = sparse.csr_array(np.array([[2, 0], [1, 1]])), sparse.csr_array(np.array([[0, 2], [1, 1]]))
    >>> [x.round(4).tolist() for x in noise_floor_from_halves(a, np.array([2, 2]), b, np.array([2, 2]))]
    [[1.0, 0.0], [0.25, 0.0]]
    """
    na, nb = reach_a, reach_b
    ok = (na > 0) & (nb > 0)
    Sa = root_marginals(counts_a, np.where(ok, na, 1))
    Sb = root_marginals(counts_b, np.where(ok, nb, 1))
    bc = np.asarray(Sa.multiply(Sb).sum(axis=1)).ravel()
    split = np.sqrt(np.clip(1.0 - bc, 0.0, None))
    split[~ok] = np.nan
    N = np.maximum(na + nb, 1).astype(np.float64)
    bias = np.where(ok, np.nan_to_num(split) ** 2 * na * nb / N**2, 0.0)
    return split, bias


def matched_squared(roots_a: Any, roots_b: Any) -> np.ndarray:
    r"""One split's matched squared distances, :math:`H^2(a_i, b_j) - \tfrac12 (s_i^2 + s_j^2)`, symmetrised.

    ``roots_a`` and ``roots_b`` are the halves' :func:`root_marginals`, shape (n, V), dense or
    sparse; :math:`s_i^2 = H^2(a_i, b_i)`. Not clipped: average over splits, then
    :func:`matched_distances`. Memory: the (n, n) result, updated in place.

    >>> R = root_marginals(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2, 2]))
    >>> matched_squared(R, R).round(4).tolist()
    [[0.0, 0.2929], [0.2929, 0.0]]
    """
    out = _cross_products(roots_a, roots_b) if sparse.issparse(roots_a) else roots_a @ roots_b.T
    np.subtract(1.0, out, out=out)  # BC(a_i, b_j) -> H^2(a_i, b_j)
    _symmetrize(out)
    d = np.diag(out).copy()
    for i in range(0, out.shape[0], _TILE):
        tile = out[i : i + _TILE]
        tile -= 0.5 * (d[i : i + _TILE, None] + d[None, :])
    return out


def matched_distances(h2_sum: np.ndarray, n_splits: int = 1) -> np.ndarray:
    """The matched distances ``sqrt(max(0, h2_sum / n_splits))`` with a zero diagonal, in place.

    >>> matched_distances(np.array([[0.5, 0.5], [0.5, 0.5]]), 2).tolist()
    [[0.0, 0.5], [0.5, 0.0]]
    """
    h2_sum /= n_splits
    np.clip(h2_sum, 0.0, None, out=h2_sum)
    np.sqrt(h2_sum, out=h2_sum)
    np.fill_diagonal(h2_sum, 0.0)
    return h2_sum


def matched_hellinger_from_halves(counts_a: Any, reach_a: np.ndarray, counts_b: Any, reach_b: np.ndarray) -> np.ndarray:
    """The matched Hellinger estimator of one split, from the halves' sparse tables, shape (n, n).

    :func:`matched_squared` then :func:`matched_distances`; NaN off the diagonal in the rows
    and columns of positions where a half is empty. Memory O(nnz + n^2).

    >>> a, b = sparse.csr_array(np.array([[2, 0], [0, 2], [1, 0]])), sparse.csr_array(np.array([[2, 0], [1, 1], [0, 0]]))
    >>> matched_hellinger_from_halves(a, np.array([2, 2, 1]), b, np.array([2, 2, 0])).round(4).tolist()  # half B misses position 2
    [[0.0, 0.7071, nan], [0.7071, 0.0, nan], [nan, nan, 0.0]]
    """
    na, nb = reach_a, reach_b
    ok = (na > 0) & (nb > 0)
    Sa = root_marginals(counts_a, np.where(ok, na, 1))
    Sb = root_marginals(counts_b, np.where(ok, nb, 1))
    try:
        out = matched_squared(Sa, Sb)
    except OutOfMemory:
        raise
    except MemoryError:
        n = counts_a.shape[0]
        raise out_of_memory("the (n, n) matched Hellinger matrix", 8.0 * n * n + 2**27, n) from None
    matched_distances(out)
    out[~ok, :] = np.nan
    out[:, ~ok] = np.nan
    np.fill_diagonal(out, 0.0)
    return out


# --------------------------------------------------------------------------- the first-order correction


def first_order_correction(H: Any, bias_sq: Any) -> np.ndarray:
    """The first-order noise correction of chord Hellinger distances,
    ``sqrt(max(H_ij^2 - b_i - b_j, 0))`` with a zero diagonal.

    What ``first_order_hellinger_matrix``, :func:`posgeo.corpus_geometry` and
    :class:`posgeo.PositionalCounts` apply to the plug-in distances, given each position's squared bias (e.g. ``NoiseFloor.bias_sq``).

    Parameters
    ----------
    H : array_like, shape (n, n)
        Plug-in chord Hellinger distances.
    bias_sq : array_like, shape (n,)
        Squared-Hellinger bias per position.

    Returns
    -------
    numpy.ndarray, shape (n, n)

    Raises
    ------
    ValueError
        Shapes that do not match.

    Examples
    --------
    >>> first_order_correction(np.array([[0.0, 0.5], [0.5, 0.0]]), np.array([0.05, 0.1])).round(4).tolist()
    [[0.0, 0.3162], [0.3162, 0.0]]
    """
    H = check_real_array(H, "H")
    bias_sq = check_real_array(bias_sq, "bias_sq")
    if H.ndim != 2 or H.shape[0] != H.shape[1] or bias_sq.shape != (H.shape[0],):
        raise ValueError(
            f"H must be square (n, n) and bias_sq of shape (n,), got {H.shape} and {bias_sq.shape}; pass the "
            "plug-in distances and the noise floor's bias_sq of the same positions"
        )
    D = np.sqrt(np.clip(H**2 - bias_sq[:, None] - bias_sq[None, :], 0.0, None))
    np.fill_diagonal(D, 0.0)
    return D


# --------------------------------------------------------------------------- the hybrid estimator


def _corrected_roots(C: np.ndarray, N: np.ndarray) -> np.ndarray:
    r"""Per-token estimates of :math:`\sqrt{p}` with the delta-method bias removed:
    :math:`\sqrt{\hat p} + (1 - \hat p) / (8 N \sqrt{\hat p})`, 0 for unseen tokens."""
    Nc = N[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = C / Nc
        g = np.sqrt(p) + (1.0 - p) / (8.0 * np.sqrt(np.maximum(C, 1.0) * Nc))
    return np.where(C > 0, g, 0.0)


def plugin_hybrid_terms(
    C: np.ndarray,
    N: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray | bool]],
    weights: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The plug-in of the hybrid statistic (empirical roots, squared weighted differences):
    the smooth function of the frequencies that the jackknife corrects."""
    n = C.shape[0]
    H2 = np.zeros((n, n))
    for idx, resolved in groups:
        P = C[:, idx] / N[:, None]
        r_part: Any = 0.0
        u_part: Any = 0.0
        if resolved is not False:
            mass = P.sum(axis=1)
            r_part = 0.5 * (mass[:, None] + mass[None, :]) - _cross(np.sqrt(P))
        if resolved is not True:
            Q = P * weights(idx)
            sq = (Q * Q).sum(axis=1)
            u_part = (sq[:, None] + sq[None, :]) / 8.0 - _cross(Q) / 4.0
        H2 += _combine(resolved, r_part, u_part)
        del P
    return H2


def _cross(A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
    if B is None:
        return A @ A.T
    M = A @ B.T
    return 0.5 * (M + M.T)


def _combine(resolved: np.ndarray | bool, r_part: Any, u_part: Any) -> Any:
    if resolved is True:
        return r_part
    if resolved is False:
        return u_part
    return np.where(resolved, r_part, u_part)


def hybrid_groups(
    C: np.ndarray, N: np.ndarray, N_eff: np.ndarray, c_res: float, floor: float, n_bins: int
) -> tuple[list[tuple[np.ndarray, np.ndarray | bool]], Callable[[np.ndarray], np.ndarray]]:
    """The hybrid estimator's token groups (resolved for every pair, unresolved for every
    pair, or a per-pair mask) and its root weights ``1 / sqrt(max(pi_bar, floor / N_i))``."""
    n = C.shape[0]
    pooled = C.sum(axis=0)
    pi_bar = pooled / N.sum()
    seen = np.nonzero(pooled > 0)[0]
    logf = np.log(pi_bar[seen])
    edges = np.linspace(logf.min(), logf.max(), n_bins + 1)
    edges[-1] += 1e-9
    bin_of = np.clip(np.searchsorted(edges, logf, side="right") - 1, 0, n_bins - 1)
    lower = np.exp(edges[:-1])
    nmin = np.minimum(N_eff[:, None], N_eff[None, :])
    np.fill_diagonal(nmin, np.inf)  # the diagonal plays no part in the thresholds
    lo_pair = float(nmin.min())
    nmin_off = nmin.copy()
    np.fill_diagonal(nmin_off, -np.inf)
    hi_pair = float(nmin_off.max()) if n > 1 else lo_pair
    all_r = lower * lo_pair >= c_res
    all_u = lower * hi_pair < c_res
    groups: list[tuple[np.ndarray, np.ndarray | bool]] = []
    for mask_bins, flag in ((all_r, True), (all_u, False)):
        idx = seen[mask_bins[bin_of]]
        if idx.size:
            groups.append((idx, flag))
    for k in np.nonzero(~all_r & ~all_u)[0]:
        idx = seen[bin_of == k]
        if idx.size:
            groups.append((idx, nmin * lower[k] >= c_res))

    def weights(idx: np.ndarray) -> np.ndarray:
        # weight 1 / max(pi_bar, floor / N_i) at position i; a pair uses the geometric mean
        return 1.0 / np.sqrt(np.maximum(pi_bar[idx][None, :], floor / N[:, None]))

    return groups, weights


def hybrid_terms(
    C: np.ndarray,
    N: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray | bool]],
    weights: Callable[[np.ndarray], np.ndarray],
    *,
    cross_terms: bool,
) -> np.ndarray:
    """The terms of one position (mass, self-collisions) and, with ``cross_terms``, the
    cross terms from the same counts: the hybrid squared distances before clipping."""
    n = C.shape[0]
    H2 = np.zeros((n, n))
    for idx, resolved in groups:
        Cg = C[:, idx]
        r_part: Any = 0.0
        u_part: Any = 0.0
        if resolved is not False:
            mass = Cg.sum(axis=1) / N
            r_part = 0.5 * (mass[:, None] + mass[None, :])
            if cross_terms:
                r_part = r_part - _cross(_corrected_roots(Cg, N))
        if resolved is not True:
            rw = weights(idx)
            self_term = (rw**2 * Cg * (Cg - 1.0)).sum(axis=1) / (N * (N - 1.0))
            u_part = (self_term[:, None] + self_term[None, :]) / 8.0
            if cross_terms:
                u_part = u_part - _cross(Cg * rw / N[:, None]) / 4.0
        H2 += _combine(resolved, r_part, u_part)
        del Cg
    return H2


def hybrid_finish(H2: np.ndarray, *, squared: bool = False) -> np.ndarray:
    H2 = 0.5 * (H2 + H2.T)
    if squared:
        np.fill_diagonal(H2, 0.0)
        return H2
    D = np.sqrt(np.clip(H2, 0.0, None))
    np.fill_diagonal(D, 0.0)
    return D


def hybrid_hellinger_from_counts(
    counts: Any,
    reach: Any,
    *,
    resolved_count: float = 5.0,
    reference_floor: float = 0.3,
    n_bins: int = 48,
    squared: bool = False,
) -> np.ndarray:
    r"""The hybrid Hellinger estimator (:func:`posgeo.hybrid_hellinger_matrix`) from count tables.

    For corpora already counted (e.g. :class:`posgeo.PositionalCounts`, or the halves of a
    half-sample interval): the same estimator as ``hybrid_hellinger_matrix(...,
    split="none")``, bit for bit, from the per-position token counts and the number of
    sequences reaching each position.

    Parameters
    ----------
    counts : array_like or scipy sparse, shape (n, V)
        ``counts[i, t]``: occurrences of token t at position i (non-negative integers,
        stored as any numeric dtype). A sparse table is made dense: n * V * 8 bytes.
    reach : array_like, shape (n,)
        Sequences reaching each position; every one at least 2, and equal to the row
        sums of ``counts`` (each sequence that reaches a position has one token there).
    resolved_count, reference_floor, n_bins : keyword-only
        As for :func:`posgeo.hybrid_hellinger_matrix`.
    squared : bool, keyword-only, default False
        Return the squared distances *before* clipping at 0: the scale on which the
        estimator is (nearly) unbiased, so a pair of identical positions averages 0 and
        may come out negative. Default: the distances, ``sqrt(max(0, .))``.

    Returns
    -------
    numpy.ndarray, shape (n, n)
        Symmetric, zero diagonal; non-negative unless ``squared``.

    Raises
    ------
    TypeError
        ``counts`` or ``reach`` not numeric arrays.
    ValueError
        Wrong shapes, negative counts, rows that do not sum to ``reach``, a position
        reached by fewer than 2 sequences, or bad options.

    Examples
    --------
    >>> from posgeo import hybrid_hellinger_matrix, load_corpus, positional_marginals
    >>> from posgeo._marginals import position_counts
    >>> corpus = load_corpus("synthetic", n_sequences=400)
    >>> N = position_counts(corpus.sequences, 8)
    >>> C = positional_marginals(corpus.sequences, 8, corpus.vocab_size) * N[:, None]
    >>> D = hybrid_hellinger_from_counts(np.rint(C), N)
    >>> bool(np.array_equal(D, hybrid_hellinger_matrix(corpus.sequences, 8, corpus.vocab_size)))
    True
    """
    if hasattr(counts, "toarray"):  # a scipy sparse table
        counts = counts.toarray()
    C = check_real_array(counts, "counts")
    N = check_real_array(reach, "reach")
    c_res = check_float(resolved_count, "resolved_count", minimum=0.0, strict_minimum=True)
    floor = check_float(reference_floor, "reference_floor", minimum=0.0)
    n_bins = check_int(n_bins, "n_bins", maximum=10_000)
    n = C.shape[0] if C.ndim == 2 else 0
    if n < 2 or N.shape != (n,):
        raise ValueError(
            f"counts has shape {C.shape} and reach {N.shape}; pass an (n, V) table with n >= 2 and one reach per row"
        )
    if (C < 0).any():
        raise ValueError("counts must be non-negative token counts")
    if N.min() < 2:
        raise ValueError(
            f"position {int(np.argmax(N < 2))} is reached by fewer than 2 sequences; drop the positions after it"
        )
    if not np.allclose(C.sum(axis=1), N, rtol=1e-9, atol=0.5):
        raise ValueError(
            "the rows of counts must sum to reach (every sequence reaching a position has one token there); "
            "pass the counts and reach of the same corpus"
        )
    C = C.astype(np.float64, copy=False)
    N = N.astype(np.float64, copy=False)
    if not isinstance(squared, (bool, np.bool_)):
        raise TypeError(f"squared must be True or False, got {type(squared).__name__}")
    groups, weights = hybrid_groups(C, N, N, c_res, floor, n_bins)
    return hybrid_finish(hybrid_terms(C, N, groups, weights, cross_terms=True), squared=bool(squared))


def add_hybrid_cross_halves(
    H2: np.ndarray,
    A: np.ndarray,
    B: np.ndarray,
    groups: list[tuple[np.ndarray, np.ndarray | bool]],
    weights: Callable[[np.ndarray], np.ndarray],
    n_splits: int,
) -> None:
    """``H2 += `` the hybrid estimator's cross terms between two disjoint halves' (n, V) tables
    ``A`` and ``B``, each divided by ``n_splits`` (one halving of ``split="halves"``), in place."""
    NA, NB = A.sum(axis=1), B.sum(axis=1)
    for idx, resolved in groups:
        r_part = u_part = 0.0
        if resolved is not False:
            r_part = -_cross(_corrected_roots(A[:, idx], NA), _corrected_roots(B[:, idx], NB))
        if resolved is not True:
            rw = weights(idx)
            u_part = -_cross(A[:, idx] * rw / NA[:, None], B[:, idx] * rw / NB[:, None]) / 4.0
        H2 += _combine(resolved, r_part, u_part) / n_splits
