"""Hellinger geometry, classical and stress-optimal MDS, and the stress criterion (P1 Prop. 6, Alg. 1)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping
import numpy as np
import pandas as pd
from typing import Literal
from .validation import check_float, check_fits_in_memory, check_int

__all__ = [
    'distance_by_offset',
    'stress_table',
    'check_distance_matrix',
    'hellinger_matrix',
    'pairwise_distances',
    'stress',
    'MDSResult',
    'double_centered_gram',
    'classical_mds',
    'stress_optimal_mds',
    'SpectrumSummary',
    'effective_rank',
    'order_free_baselines',
]


def distance_by_offset(D: object, *, max_offset: int | None = None) -> pd.DataFrame:
    """Mean, min and max of ``D[i, i+k]`` for every offset k (the Toeplitz profile).

    Parameters
    ----------
    D : array_like, shape (n, n)
    max_offset : int, optional
        Largest offset reported (default n-1).

    Returns
    -------
    pandas.DataFrame
        Columns ``offset``, ``mean``, ``min``, ``max``, ``pairs``.

    Examples
    --------
    >>> distance_by_offset([[0, 1, 2], [1, 0, 1], [2, 1, 0]])["mean"].tolist()
    [1.0, 2.0]
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    kmax = n - 1 if max_offset is None else min(int(max_offset), n - 1)
    rows = []
    for k in range(1, kmax + 1):
        diag = np.diagonal(Dm, offset=k)
        rows.append({"offset": k, "mean": diag.mean(), "min": diag.min(), "max": diag.max(), "pairs": diag.size})
    return pd.DataFrame(rows, columns=["offset", "mean", "min", "max", "pairs"])


def stress_table(
    D: object,
    encodings: Mapping[str, object],
    *,
    mds_dims: tuple[int, ...] = (),
    smacof_max_iter: int = 300,
) -> pd.DataFrame:
    """Raw and scale-optimal stress of several encodings against one distance matrix.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Target distances.
    encodings : mapping of str to array (n, k)
        Encodings to score.
    mds_dims : tuple of int
        Also score classical MDS (``PMDS k=…``, plus ``PMDS full``) and SMACOF (``SMACOF k=…``)
        at these dimensions.
    smacof_max_iter : int
        Iteration cap for SMACOF.

    Returns
    -------
    pandas.DataFrame
        Index: encoding; columns ``dim``, ``raw``, ``optimal``, ``alpha`` (the scale-optimal factor).

    Examples
    --------
    >>> D = [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    >>> stress_table(D, {"line": np.arange(3.0)[:, None]})[["raw", "optimal"]].round(3).to_dict("records")
    [{'raw': 0.0, 'optimal': 0.0}]
    """
    Dm = check_distance_matrix(D)
    rows: dict[str, dict[str, float]] = {}
    if mds_dims:
        full = classical_mds(Dm)
        rows["PMDS full"] = {"dim": full.dim, "raw": full.stress, "optimal": stress(full.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(full.coords, Dm)}
    for k in mds_dims:
        cm = classical_mds(Dm, k)
        sm = stress_optimal_mds(Dm, k, max_iter=smacof_max_iter)
        rows[f"PMDS k={k}"] = {"dim": k, "raw": cm.stress, "optimal": stress(cm.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(cm.coords, Dm)}
        rows[f"SMACOF k={k}"] = {"dim": k, "raw": sm.stress, "optimal": stress(sm.coords, Dm, scale="optimal"), "alpha": scale_optimal_alpha(sm.coords, Dm)}
    for name, P in encodings.items():
        P = np.asarray(P, dtype=np.float64)
        rows[name] = {
            "dim": P.shape[1] if P.ndim == 2 else 1,
            "raw": stress(P, Dm),
            "optimal": stress(P, Dm, scale="optimal"),
            "alpha": scale_optimal_alpha(P, Dm),
        }
    df = pd.DataFrame.from_dict(rows, orient="index", columns=["dim", "raw", "optimal", "alpha"])
    df["dim"] = df["dim"].astype(int)
    df.index.name = "encoding"
    return df

Metric = Literal["chord", "fisher-rao"]

_PARTIAL_EIG_MIN_N = 1024
"""From this size on, a low-dimensional classical MDS computes only the eigenvectors it needs."""

_SAFE_SCALE = (1e-50, 1e50)
"""Largest distances (or coordinates) in this range are used as given; outside it, MDS and
stress work on the input divided by its largest entry and scale the result back. Squares and
fourth powers of values in the range neither overflow nor underflow, so the direct formulas
are exact there (and ordinary inputs keep their historical bit patterns); outside it they
would overflow to inf/NaN or underflow to zero."""

_DIRECT_CHORD_BELOW = 1e-4
"""Hellinger entries whose ``sqrt(1 - BC)`` falls below this are recomputed from the
difference of square roots: ``1 - BC`` cancels catastrophically for nearby distributions."""

_MAX_SMACOF_ITER = 100_000
"""Largest ``max_iter`` of :func:`stress_optimal_mds` (each iteration costs O(n^2 k))."""

_MAX_SMACOF_STARTS = 1000
"""Largest ``n_init`` of :func:`stress_optimal_mds` (each start runs up to ``max_iter`` iterations)."""


def _outside_safe_scale(top: float) -> bool:
    """Whether a positive largest value ``top`` needs the normalised (divide-by-``top``) path."""
    return top > 0.0 and not (_SAFE_SCALE[0] <= top <= _SAFE_SCALE[1])


# --------------------------------------------------------------------------- validation
def as_distribution_matrix(mu: object, *, name: str = "mu", atol: float = 1e-6) -> np.ndarray:
    """Validate and return a matrix of probability distributions, one per row.

    Parameters
    ----------
    mu : array_like, shape (n, V)
        Non-negative rows summing to 1.
    name : str
        Name used in error messages.
    atol : float
        Tolerance on the row sums.

    Returns
    -------
    numpy.ndarray, shape (n, V), float64

    Raises
    ------
    TypeError
        If ``mu`` is not numeric.
    ValueError
        If it is not 2-D, is empty, has NaN/inf or negative entries, or a row does not sum to 1.

    Examples
    --------
    >>> as_distribution_matrix([[0.5, 0.5]]).shape
    (1, 2)
    >>> import scipy.sparse
    >>> as_distribution_matrix(scipy.sparse.csr_matrix([[0.5, 0.5]])).shape  # made dense, if it fits
    (1, 2)
    """
    if hasattr(mu, "toarray") and hasattr(mu, "nnz") and getattr(mu, "ndim", 2) == 2:  # scipy.sparse
        check_fits_in_memory(mu.shape, f"{name} (a scipy sparse matrix, made dense; for counts too large for "
                             "that use posgeo.PositionalCounts)")
        mu = mu.toarray()
    arr = np.asarray(mu)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array of probabilities, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array (n_positions, vocab_size), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; pass finite probabilities")
    if np.any(arr < 0):
        raise ValueError(f"{name} has negative entries (min {arr.min():.3g}); probabilities must be >= 0")
    sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        raise ValueError(
            f"row {bad[0]} of {name} sums to {sums[bad[0]]:.6g}, not 1; normalise the rows "
            "(e.g. mu / mu.sum(axis=1, keepdims=True))"
        )
    return arr


def check_distance_matrix(D: object, *, name: str = "D", atol: float = 1e-8) -> np.ndarray:
    """Validate a distance matrix and return it as float64.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Symmetric, non-negative, finite, zero diagonal.
    name : str
        Name used in error messages.
    atol : float
        Tolerance for symmetry and the zero diagonal.

    Returns
    -------
    numpy.ndarray, shape (n, n)
        ``D`` as float64, exactly symmetrised.

    Raises
    ------
    TypeError
        If ``D`` is not numeric.
    ValueError
        If ``D`` is not square, not symmetric, has NaN/inf, negative entries or a non-zero diagonal.

    Examples
    --------
    >>> check_distance_matrix([[0, 1], [1, 0]]).dtype
    dtype('float64')
    >>> check_distance_matrix([[0, 1, 2], [1, 0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: D must be square (n, n), got shape (2, 3); pass a full pairwise distance matrix
    """
    arr = np.asarray(D)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square (n, n), got shape {arr.shape}; pass a full pairwise distance matrix")
    if arr.shape[0] < 2:
        raise ValueError(f"{name} must describe at least 2 points, got shape {arr.shape}")
    # two reductions instead of elementwise masks (this runs on every stress call): a NaN
    # makes min and max NaN, an inf makes one of them infinite
    low, high = float(arr.min()), float(arr.max())
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f"{name} contains NaN or inf; distances must be finite")
    if low < 0:
        raise ValueError(f"{name} has negative entries (min {low:.3g}); distances must be >= 0")
    scale = max(1.0, high)  # every entry is >= 0: the largest magnitude is the maximum
    asym = arr - arr.T
    np.abs(asym, out=asym)
    if float(asym.max()) > atol * scale:
        i, j = np.unravel_index(np.argmax(asym), arr.shape)
        raise ValueError(
            f"{name} is not symmetric: {name}[{i},{j}]={arr[i, j]:.6g} but {name}[{j},{i}]={arr[j, i]:.6g}; "
            "pass (D + D.T) / 2 if the asymmetry is rounding"
        )
    if np.any(np.abs(np.diag(arr)) > atol * scale):
        raise ValueError(f"{name} must have a zero diagonal (distance of a point to itself)")
    # 0.5 * (a + b) overflows when a + b exceeds the float64 maximum; 0.5 * a + 0.5 * b is
    # identical (halving is exact) except below the subnormal threshold, so use it only there
    out = 0.5 * (arr + arr.T) if scale < 1e300 else 0.5 * arr + 0.5 * arr.T
    np.fill_diagonal(out, 0.0)
    return out


def _check_encoding(P: object, n: int | None = None, *, name: str = "P") -> np.ndarray:
    arr = np.asarray(P)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array of position vectors, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_positions, dim), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    if n is not None and arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} rows but the distance matrix describes {n} positions; "
            f"pass the first {n} rows of the encoding (e.g. P[:{n}])"
        )
    return arr


# --------------------------------------------------------------------------- distances
def hellinger_matrix(mu: object, *, metric: Metric = "chord") -> np.ndarray:
    r"""Pairwise Hellinger distances between the rows of ``mu``.

    With the Bhattacharyya coefficient :math:`BC(p, q) = \sum_v \sqrt{p_v q_v}`:

    - ``metric="chord"`` (the Hellinger distance of P1):
      :math:`d_H(p, q) = \sqrt{\tfrac12 \sum_v (\sqrt{p_v} - \sqrt{q_v})^2} = \sqrt{1 - BC}`, in [0, 1].
      It is the Euclidean distance between the points :math:`\sqrt{p}/\sqrt{2}`, so it is
      *exactly* Euclidean-embeddable.
    - ``metric="fisher-rao"``: the Fisher-Rao geodesic distance :math:`2 \arccos BC`, in
      :math:`[0, \pi]`: the length of the great-circle arc between :math:`\sqrt p` and
      :math:`\sqrt q` on the unit sphere, doubled. It is *not* Euclidean-embeddable in general:
      this is the curved-simplex argument of P1.

    Parameters
    ----------
    mu : array_like, shape (n, V), or PositionalCounts
        One probability distribution per row; or :class:`posgeo.PositionalCounts`, whose
        marginals' distances are computed from sparse square-root products
        (:meth:`posgeo.PositionalCounts.hellinger_matrix`: equal to rounding, no dense table).
    metric : {"chord", "fisher-rao"}, keyword-only

    Returns
    -------
    numpy.ndarray, shape (n, n)
        Symmetric, zero diagonal.

    Notes
    -----
    Both metrics are computed from BC (one matrix product). Near BC = 1, ``1 - BC`` cancels:
    a chord below about 1e-5 would be pure rounding. Entries whose chord ``sqrt(1 - BC)`` is
    below 1e-4 are therefore recomputed from the square roots, as
    :math:`\lVert (p - q) / (\sqrt p + \sqrt q) \rVert` (full relative precision), and the
    Fisher-Rao distance there as :math:`4 \arcsin(\lVert\sqrt p - \sqrt q\rVert / 2)`;
    identical rows get exactly 0. All other entries keep the BC formula's values.

    Examples
    --------
    >>> hellinger_matrix([[1, 0], [0, 1], [0.5, 0.5]]).round(4)
    array([[0.    , 1.    , 0.5412],
           [1.    , 0.    , 0.5412],
           [0.5412, 0.5412, 0.    ]])
    >>> float(hellinger_matrix([[1, 0], [0, 1]], metric="fisher-rao")[0, 1].round(4))
    3.1416
    >>> float(hellinger_matrix([[0.5, 0.5], [0.5 + 1e-9, 0.5 - 1e-9]])[0, 1])  # about 1e-9 / sqrt(2)
    7.07106780814358e-10
    """
    if metric not in ("chord", "fisher-rao"):
        raise ValueError(f"unknown metric {metric!r}; use 'chord' (Hellinger) or 'fisher-rao' (geodesic)")
    if hasattr(mu, "counts_a") and hasattr(mu, "hellinger_matrix"):  # stored counts (PositionalCounts):
        return mu.hellinger_matrix(metric=metric)  # from sparse square-root products
    arr = as_distribution_matrix(mu)
    root = np.sqrt(arr)
    bc = np.clip(root @ root.T, 0.0, 1.0)
    np.fill_diagonal(bc, 1.0)
    chord = np.sqrt(np.clip(1.0 - bc, 0.0, None))
    D = chord if metric == "chord" else 2.0 * np.arccos(bc)
    # 1 - BC cancels for nearby rows (chord below ~1e-5 is pure rounding): recompute those
    # entries from sqrt(p) - sqrt(q) = (p - q) / (sqrt(p) + sqrt(q)); the others keep the
    # fast formula's values exactly
    near = chord < _DIRECT_CHORD_BELOW
    np.fill_diagonal(near, False)
    if np.any(near):
        ii, jj = np.nonzero(near)
        half = _root_difference_norms(arr, root, ii, jj) / 2.0  # |sqrt p - sqrt q| / 2
        D[ii, jj] = np.sqrt(2.0) * half if metric == "chord" else 4.0 * np.arcsin(half)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


def _root_difference_norms(arr: np.ndarray, root: np.ndarray, ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
    """``|| sqrt(arr[i]) - sqrt(arr[j]) ||`` for the pairs (ii, jj), without cancellation.

    ``sqrt p - sqrt q = (p - q) / (sqrt p + sqrt q)``: ``p - q`` is exact for close p and q,
    so the result has full relative precision however small it is. Pairs are processed in
    chunks of bounded memory.
    """
    out = np.empty(ii.size)
    step = max(1, (1 << 22) // max(1, arr.shape[1]))
    for s in range(0, ii.size, step):
        a, b = ii[s : s + step], jj[s : s + step]
        num = arr[a] - arr[b]
        den = root[a] + root[b]
        diff = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        out[s : s + step] = np.linalg.norm(diff, axis=1)
    return out


def pairwise_distances(P: object) -> np.ndarray:
    """Euclidean distances between the rows of an encoding.

    Parameters
    ----------
    P : array_like, shape (n, k)

    Returns
    -------
    numpy.ndarray, shape (n, n)

    Examples
    --------
    >>> pairwise_distances([[0, 0], [3, 4]])
    array([[0., 5.],
           [5., 0.]])
    """
    arr = _check_encoding(P)
    top = float(np.abs(arr).max(initial=0.0))
    if _outside_safe_scale(top):  # squared norms would overflow or underflow
        return pairwise_distances(arr / top) * top
    sq = np.einsum("ij,ij->i", arr, arr)
    G = arr @ arr.T
    D2 = np.clip(sq[:, None] + sq[None, :] - 2.0 * G, 0.0, None)
    D = np.sqrt(D2)
    # exact small distances: recompute entries where cancellation may bite
    small = D2 < 1e-8 * max(1.0, float(sq.max(initial=0.0)))
    if np.any(small):
        ii, jj = np.nonzero(small)
        D[ii, jj] = np.linalg.norm(arr[ii] - arr[jj], axis=1)
    D = 0.5 * (D + D.T)
    np.fill_diagonal(D, 0.0)
    return D


# --------------------------------------------------------------------------- stress
def _upper(D: np.ndarray) -> np.ndarray:
    return D[np.triu_indices(D.shape[0], k=1)]


def scale_optimal_alpha(P: object, D: object) -> float:
    r"""The scale :math:`\alpha^* = \sum e\,d / \sum e^2` minimising ``stress(alpha * P, D)``.

    Parameters
    ----------
    P : array_like, shape (n, k)
    D : array_like, shape (n, n)

    Returns
    -------
    float
        ``alpha*`` (0 when all encoding distances are zero).

    Examples
    --------
    >>> scale_optimal_alpha([[0.0], [2.0]], [[0, 1], [1, 0]])
    0.5
    """
    Dm = check_distance_matrix(D)
    E = pairwise_distances(_check_encoding(P, Dm.shape[0]))
    e, d = _upper(E), _upper(Dm)
    e_top, d_top = float(e.max()), float(d.max())
    if e_top == 0.0:
        return 0.0
    if _outside_safe_scale(e_top) or _outside_safe_scale(d_top):
        # alpha* = (d_top / e_top) * alpha*(e / e_top, d / d_top): no overflow or underflow
        e_unit, d_unit = e / e_top, (d / d_top if d_top > 0 else d)
        return float(e_unit @ d_unit) / float(e_unit @ e_unit) * (d_top / e_top)
    ee = float(e @ e)
    return 0.0 if ee == 0.0 else float(e @ d) / ee


def stress(P: object, D: object, *, scale: Literal["raw", "optimal"] = "raw") -> float:
    r"""Normalised stress of an encoding against target distances (P1's criterion).

    .. math::
        \mathrm{stress}(P) = \frac{\sum_{i<j} (\lVert p_i - p_j\rVert - D_{ij})^2}{\sum_{i<j} D_{ij}^2}

    ``scale="raw"`` is P1's definition: it depends on the encoding's overall scale, so an
    encoding whose distances are in the tens scores in the hundreds. ``scale="optimal"``
    reports :math:`\min_{\alpha>0} \mathrm{stress}(\alpha P)`, which has the closed form
    :math:`1 - (\sum e d)^2 / (\sum e^2 \sum d^2)` (e, d: encoding and target distances
    over pairs); it lies in [0, 1] and compares the *shape* of the geometry alone.

    Parameters
    ----------
    P : array_like, shape (n, k)
        Position vectors, one row per position.
    D : array_like, shape (n, n)
        Target distances (e.g. Hellinger).
    scale : {"raw", "optimal"}, keyword-only

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If shapes do not match, ``D`` is not a distance matrix or is all zeros.

    Examples
    --------
    >>> D = [[0, 1], [1, 0]]
    >>> stress([[0.0], [3.0]], D), stress([[0.0], [3.0]], D, scale="optimal")
    (4.0, 0.0)
    """
    if scale not in ("raw", "optimal"):
        raise ValueError(f"unknown scale {scale!r}; use 'raw' (P1's stress) or 'optimal' (min over alpha > 0)")
    Dm = check_distance_matrix(D)
    E = pairwise_distances(_check_encoding(P, Dm.shape[0]))
    e, d = _upper(E), _upper(Dm)
    d_top = float(d.max())
    if d_top == 0.0:
        raise ValueError("all target distances are zero: stress is undefined (nothing to reproduce)")
    if scale == "raw":
        if _outside_safe_scale(d_top):  # raw stress is invariant to scaling e and d together
            e, d = e / d_top, d / d_top
        dd = float(d @ d)
        return float(np.sum((e - d) ** 2) / dd)
    e_top = float(e.max())
    if e_top == 0.0:
        return 1.0
    if _outside_safe_scale(e_top) or _outside_safe_scale(d_top):  # invariant to scaling e and d apart
        e, d = e / e_top, d / d_top
    dd = float(d @ d)
    ee = float(e @ e)
    return float(max(0.0, 1.0 - float(e @ d) ** 2 / (ee * dd)))


# --------------------------------------------------------------------------- MDS
@dataclass(frozen=True)
class MDSResult:
    """An MDS embedding.

    Attributes
    ----------
    coords : numpy.ndarray, shape (n, k)
        The embedding, centred.
    eigenvalues : numpy.ndarray, shape (n,)
        All eigenvalues of the double-centred Gram matrix, descending; negative values are
        kept (they measure how far ``D`` is from Euclidean).
    stress : float
        Raw stress of ``coords`` against the input distances.
    method : str
        ``"classical"`` or ``"smacof"``.
    n_iter : int
        SMACOF iterations (0 for classical MDS).
    """

    coords: np.ndarray
    eigenvalues: np.ndarray
    stress: float
    method: str
    n_iter: int = 0

    @property
    def dim(self) -> int:
        """Embedding dimension k."""
        return int(self.coords.shape[1])

    @property
    def negative_fraction(self) -> float:
        """Share of absolute eigenvalue mass on negative eigenvalues (0 for Euclidean ``D``).

        ``nan`` when the eigenvalues overflowed (a ``D`` with distances above about 1e154;
        compute it on ``D / D.max()``, the share does not depend on the scale).
        """
        lam = self.eigenvalues
        if not np.all(np.isfinite(lam)):
            return float("nan")
        tot = float(np.abs(lam).sum())
        return 0.0 if tot == 0 else float(max(0.0, -lam[lam < 0].sum() / tot))


def double_centered_gram(D: object) -> np.ndarray:
    r"""The double-centred Gram matrix :math:`B = -\tfrac12 J D^{\circ 2} J`, :math:`J = I - \tfrac1n 11^\top`.

    Parameters
    ----------
    D : array_like, shape (n, n)

    Returns
    -------
    numpy.ndarray, shape (n, n)

    Examples
    --------
    >>> double_centered_gram([[0, 2], [2, 0]])
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    Dm = check_distance_matrix(D)
    D2 = Dm**2
    row = D2.mean(axis=1, keepdims=True)
    B = -0.5 * (D2 - row - row.T + D2.mean())
    return 0.5 * (B + B.T)


def _resolve_dim(dim: int | None, n: int) -> int | None:
    if dim is None:
        return None
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"dim must be an int or None, got {type(dim).__name__}")
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if dim > n:
        raise ValueError(f"dim={dim} is larger than the number of points n={n}; pass dim <= {n}")
    return int(dim)


def classical_mds(D: object, dim: int | None = None) -> MDSResult:
    r"""Classical (Torgerson) MDS: P1's Algorithm 1, the encoding :math:`P_{MDS}`.

    Eigen-decomposes :math:`B = -\tfrac12 J D^{\circ2} J` and returns
    :math:`V_k \Lambda_k^{1/2}` for the ``dim`` largest eigenvalues. This minimises *strain*
    (:math:`\lVert B - PP^\top\rVert_F`), not stress; see :func:`stress_optimal_mds`.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Distance matrix.
    dim : int, optional
        Embedding dimension k <= n. Default: the number of positive eigenvalues (full rank),
        which reproduces ``D`` exactly (zero stress) when ``D`` is Euclidean.

    Returns
    -------
    MDSResult
        ``coords`` (n, k), ``eigenvalues`` (n,) descending, negative ones included.
        Directions with non-positive eigenvalues get zero coordinates.

    Notes
    -----
    For n >= 1024 and k <= n/10 only the top k eigenvectors are computed (ARPACK, seeded),
    while all eigenvalues still come from a full symmetric eigenvalue solve
    (``benchmarks/bench_mds.py`` measures the gain).

    Scales: when the largest distance s lies outside [1e-50, 1e50] (where :math:`D^{\circ2}`
    would overflow or underflow), the embedding of ``D / s`` is computed and scaled back:
    ``coords`` scale with s, ``stress`` is unchanged, ``eigenvalues`` scale with s**2 (so they
    overflow to inf above s of about 1e154, and lose precision, then underflow to 0, below
    about 1e-154). An all-zero ``D`` embeds every point at the origin (as scikit-learn does), with
    zero eigenvalues and stress 0 (the embedding reproduces ``D`` exactly).

    Examples
    --------
    >>> D = [[0, 3, 5], [3, 0, 4], [5, 4, 0]]   # a 3-4-5 right triangle
    >>> res = classical_mds(D)
    >>> res.dim, round(res.stress, 12)
    (2, 0.0)
    >>> huge = classical_mds(np.array(D) * 1e200)  # scale-equivariant
    >>> bool(np.allclose(pairwise_distances(huge.coords), np.array(D) * 1e200)), huge.stress < 1e-20
    (True, True)
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    k = _resolve_dim(dim, n)
    top = float(Dm.max())
    if top == 0.0:
        return MDSResult(coords=np.zeros((n, 1 if k is None else k)), eigenvalues=np.zeros(n), stress=0.0, method="classical")
    with _out_of_memory(f"classical MDS of {n:,} positions", n):
        return _classical_mds(Dm, dim, n, k, top)


@contextmanager
def _out_of_memory(what: str, n: int) -> Iterator[None]:
    """Turn a bare MemoryError into one that says what ran out, how much it needs and the fix."""
    check_fits_in_memory((4, n, n), what)  # the matrix, its double-centred Gram, eigenvectors, workspace
    try:
        yield
    except MemoryError:
        raise MemoryError(
            f"{what} ran out of memory (it needs several {n:,} x {n:,} float64 matrices, about "
            f"{4 * 8 * n * n / 2**30:.1f} GiB); pass fewer positions, or free memory"
        ) from None


def _classical_mds(Dm: np.ndarray, dim: int | None, n: int, k: int | None, top: float) -> MDSResult:
    if _outside_safe_scale(top):
        unit = classical_mds(Dm / top, dim)
        with np.errstate(over="ignore", under="ignore"):
            lam = unit.eigenvalues * top * top  # (lam * top) * top: never 0 * inf
        return MDSResult(coords=unit.coords * top, eigenvalues=lam, stress=unit.stress, method="classical")
    B = double_centered_gram(Dm)
    if k is not None and n >= _PARTIAL_EIG_MIN_N and k <= n // 10:
        # all eigenvalues (they are reported) but only k eigenvectors: ARPACK for the
        # vectors, from a seeded start vector so that the result is deterministic
        from scipy.sparse.linalg import eigsh

        lam = np.linalg.eigvalsh(B)[::-1]
        v0 = np.random.default_rng(0).standard_normal(n)
        top, V = eigsh(B, k=k, which="LA", v0=v0)
        order = np.argsort(top)[::-1]
        V = V[:, order]
        V = V * np.where(V[np.argmax(np.abs(V), axis=0), np.arange(k)] < 0, -1.0, 1.0)
    else:
        lam, V = np.linalg.eigh(B)
        order = np.argsort(lam)[::-1]
        lam, V = lam[order], V[:, order]
    tol = 1e-10 * max(1.0, float(np.abs(lam).max(initial=0.0)))
    if k is None:
        k = max(1, int(np.sum(lam > tol)))
    coords = V[:, :k] * np.sqrt(np.clip(lam[:k], 0.0, None))
    coords = coords - coords.mean(axis=0)
    return MDSResult(coords=coords, eigenvalues=lam, stress=stress(coords, Dm), method="classical")


def _distances_into(X: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of X, written into ``out`` (``tmp``: scratch of
    the same shape): ``sqrt(max(0, |x_i|^2 + |x_j|^2 - 2 x_i.x_j))``, zero diagonal."""
    sq = np.einsum("ij,ij->i", X, X)
    np.add.outer(sq, sq, out=out)
    np.matmul(X, X.T, out=tmp)
    tmp *= 2.0
    out -= tmp
    np.maximum(out, 0.0, out=out)
    np.fill_diagonal(out, 0.0)
    return np.sqrt(out, out=out)


def _smacof(X: np.ndarray, Dm: np.ndarray, max_iter: int, tol: float) -> tuple[np.ndarray, int]:
    """Guttman iterations from X; returns the final configuration and the iteration count.

    One iteration is one distance matrix, one division and one (n, n) x (n, k) product, all
    in preallocated buffers. The stress of X comes with its Guttman transform
    ``Y = B(X) X / n`` at no extra pass over the n x n matrices (de Leeuw's identity, both
    triangles summed): ``sum (delta - d)^2 = sum delta^2 + sum d^2 - 2 sum delta d`` with
    ``sum d^2 = 2n |X|^2 - 2 |sum_i x_i|^2`` and ``sum delta d = 2n <X, Y>``.
    """
    n = X.shape[0]
    dd = float(np.vdot(Dm, Dm))  # both triangles: ratios are unaffected
    E, B = np.empty_like(Dm), np.empty_like(Dm)
    near = np.empty(Dm.shape, dtype=bool)

    def transform(X: np.ndarray, E: np.ndarray) -> tuple[np.ndarray, float]:
        # B = -delta / d off the diagonal (0 where d <= 1e-12), B_ii = -sum_j B_ij; the
        # division runs unmasked (a masked ufunc is ~15x slower) and the rare near-zero
        # distances are zeroed after it
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(Dm, E, out=B)
        np.less_equal(E, 1e-12, out=near)
        np.fill_diagonal(near, False)
        if near.any():
            B[near] = 0.0
        np.negative(B, out=B)
        np.fill_diagonal(B, 0.0)
        np.fill_diagonal(B, -B.sum(axis=1))
        Y = (B @ X) / n
        total = X.sum(axis=0)
        sum_d2 = 2.0 * n * float(np.vdot(X, X)) - 2.0 * float(total @ total)
        return Y, (dd + sum_d2 - 4.0 * n * float(np.vdot(X, Y))) / dd

    Y, s_prev = transform(X, _distances_into(X, E, B))
    it = 0
    for it in range(1, max_iter + 1):
        Y_next, s_new = transform(Y, _distances_into(Y, E, B))
        if s_new > s_prev:  # cannot happen in exact arithmetic; guard against rounding
            break
        X, Y = Y, Y_next
        done = s_prev - s_new <= tol
        s_prev = s_new
        if done:
            break
    return X, it


def stress_optimal_mds(
    D: object,
    dim: int,
    *,
    init: object | None = None,
    max_iter: int = 1000,
    tol: float = 1e-6,
    n_init: int = 0,
    seed: int = 0,
) -> MDSResult:
    r"""Minimise P1's (raw) stress directly with SMACOF, started from classical MDS.

    SMACOF (majorisation; de Leeuw 1977) decreases raw stress monotonically at every Guttman
    transform, so the result is never worse than its start: started from
    ``classical_mds(D, dim)`` it is never worse than classical MDS. Optional random restarts
    (``n_init``) can only improve the returned value.

    Parameters
    ----------
    D : array_like, shape (n, n)
    dim : int
        Embedding dimension, 1 <= dim <= n.
    init : array_like, shape (n, dim), optional
        Start configuration; default the classical MDS solution.
    max_iter : int
        Maximum Guttman iterations per start, 0 <= max_iter <= 100000.
    tol : float
        Stop when one iteration lowers the (normalised) stress by less than ``tol`` (finite,
        >= 0), an absolute criterion like scikit-learn's ``eps``.
    n_init : int
        Extra random starts (Gaussian, seeded by ``seed``) besides the classical one,
        0 <= n_init <= 1000.
    seed : int
        Non-negative seed of the random starts.

    Returns
    -------
    MDSResult
        ``method="smacof"``; ``eigenvalues`` are those of classical MDS on ``D``.

    Notes
    -----
    Like :func:`classical_mds`, a ``D`` whose largest distance is outside [1e-50, 1e50] is
    embedded as ``D / s`` (``init`` likewise divided) and scaled back, and an all-zero ``D``
    embeds every point at the origin (stress 0, no iteration).

    Examples
    --------
    Three points at mutual distance 1, embedded on a line: the stress optimum is 1/9.

    >>> D = 1 - np.eye(3)
    >>> round(stress_optimal_mds(D, 1).stress, 6)
    0.111111
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    k = _resolve_dim(dim, n)
    if k is None:
        raise ValueError("dim is required for stress_optimal_mds; pass an int between 1 and n")
    max_iter = check_int(max_iter, "max_iter", minimum=0, maximum=_MAX_SMACOF_ITER,
                         hint="SMACOF rarely needs more than a few thousand iterations; raise tol instead")
    n_init = check_int(n_init, "n_init", minimum=0, maximum=_MAX_SMACOF_STARTS,
                       hint="each extra start runs up to max_iter iterations")
    tol = check_float(tol, "tol", minimum=0.0, hint="pass a small non-negative stress decrease, e.g. 1e-6")
    seed = check_int(seed, "seed", minimum=0)
    X_init = None
    if init is not None:
        X_init = _check_encoding(init, n, name="init")
        if X_init.shape[1] != k:
            raise ValueError(f"init has {X_init.shape[1]} columns but dim={k}; pass an (n, dim) array")
    top = float(Dm.max())
    if top == 0.0:  # every point at the origin reproduces D exactly
        return MDSResult(coords=np.zeros((n, k)), eigenvalues=np.zeros(n), stress=0.0, method="smacof", n_iter=0)
    if _outside_safe_scale(top):
        unit = stress_optimal_mds(Dm / top, k, init=None if X_init is None else X_init / top,
                                  max_iter=max_iter, tol=tol, n_init=n_init, seed=seed)
        with np.errstate(over="ignore", under="ignore"):
            lam = unit.eigenvalues * top * top
        return MDSResult(coords=unit.coords * top, eigenvalues=lam, stress=unit.stress, method="smacof", n_iter=unit.n_iter)
    with _out_of_memory(f"SMACOF of {n:,} positions", n):
        cmds = classical_mds(Dm, k)
        starts: list[np.ndarray] = []
        if X_init is None:
            starts.append(cmds.coords)
        else:
            starts.append(X_init)
        rng = np.random.default_rng(seed)
        scale = float(np.sqrt(np.mean(Dm**2)))
        for _ in range(n_init):
            starts.append(rng.normal(scale=scale / np.sqrt(2 * k), size=(n, k)))

        best: tuple[float, np.ndarray, int] | None = None
        for X0 in starts:
            X0 = X0 - X0.mean(axis=0)
            s_start = stress(X0, Dm)
            X, it = _smacof(X0, Dm, max_iter, tol)
            s_prev = stress(X, Dm)
            if s_start < s_prev:  # keep the start if iterations did not help (rounding)
                X, s_prev = X0, s_start
            if best is None or s_prev < best[0]:
                best = (s_prev, X, it)
    assert best is not None
    return MDSResult(coords=best[1], eigenvalues=cmds.eigenvalues, stress=best[0], method="smacof", n_iter=best[2])


# --------------------------------------------------------------------------- spectrum
@dataclass(frozen=True)
class SpectrumSummary:
    """Effective-rank summary of a Gram spectrum.

    Attributes
    ----------
    eigenvalues : numpy.ndarray, shape (n,)
        Descending.
    rank_at_energy : int
        Smallest r whose top-r positive eigenvalues hold at least ``energy`` of the positive mass.
    energy : float
        The threshold used.
    entropy_rank : float
        exp(Shannon entropy of the normalised positive spectrum) (Roy & Vetterli, 2007).
    cumulative_energy : numpy.ndarray, shape (n,)
        Share of positive mass in the top r, r = 1..n.
    """

    eigenvalues: np.ndarray
    rank_at_energy: int
    energy: float
    entropy_rank: float
    cumulative_energy: np.ndarray


def effective_rank(eigenvalues: object, *, energy: float = 0.99) -> SpectrumSummary:
    """Effective rank of a spectrum: energy threshold and entropy definitions.

    Parameters
    ----------
    eigenvalues : array_like, shape (n,)
        E.g. ``classical_mds(D).eigenvalues``; negative values are ignored for the energy.
    energy : float in (0, 1], keyword-only

    Returns
    -------
    SpectrumSummary

    Examples
    --------
    >>> s = effective_rank([4.0, 4.0, 0.0, -1.0])
    >>> s.rank_at_energy, round(s.entropy_rank, 6)
    (2, 2.0)
    """
    lam = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    if lam.size == 0 or not np.all(np.isfinite(lam)):
        raise ValueError("eigenvalues must be a non-empty finite 1-D array")
    if not 0 < energy <= 1:
        raise ValueError(f"energy must be in (0, 1], got {energy}")
    pos = np.clip(lam, 0.0, None)
    total = pos.sum()
    if total == 0:
        raise ValueError("no positive eigenvalue: the configuration is a single point")
    cum = np.cumsum(pos) / total
    r = int(np.searchsorted(cum, energy - 1e-12) + 1)
    p = pos[pos > 0] / total
    ent = float(np.exp(-(p * np.log(p)).sum()))
    return SpectrumSummary(eigenvalues=lam, rank_at_energy=min(r, lam.size), energy=energy, entropy_rank=ent, cumulative_energy=cum)


# --------------------------------------------------------------------------- order-free baselines
def _optimal_stress_from_distances(e: np.ndarray, d: np.ndarray) -> float:
    """Scale-optimal stress ``1 - (e.d)^2 / (|e|^2 |d|^2)`` of two vectors of pairwise distances."""
    ee, dd = float(e @ e), float(d @ d)
    if ee == 0.0:
        return 1.0
    return max(0.0, 1.0 - float(e @ d) ** 2 / (ee * dd))


def regular_simplex(n: int) -> np.ndarray:
    """``n`` equidistant points (the vertices of a regular simplex): an encoding that knows no order.

    Every pair is at distance 1, so any ranking of positions by it is a tie. Its
    scale-optimal stress against ``D`` is ``1 - (sum d)^2 / (m sum d^2)`` over the ``m``
    pairs: what a target distance matrix that is nearly constant rewards without any
    positional order.

    Parameters
    ----------
    n : int

    Returns
    -------
    numpy.ndarray, shape (n, n)
        ``I / sqrt(2)``.

    Examples
    --------
    >>> pairwise_distances(regular_simplex(3)).round(12).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]
    """
    n = check_int(n, "n")
    return np.eye(n) / np.sqrt(2.0)


def order_free_baselines(
    D: object,
    encodings: Mapping[str, object],
    *,
    n_permutations: int = 100,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """How much of each encoding's fit to ``D`` comes from positional order?

    Two baselines that ignore order: the scale-optimal regular simplex (every position
    equidistant), and each encoding with its rows permuted at random (the same distances,
    assigned to the wrong pairs of positions). An encoding whose stress is no lower than that
    of its own permutations fits ``D`` by the spread of its distances, not by their order.

    Parameters
    ----------
    D : array-like, shape (n, n)
        Target distances.
    encodings : mapping of str to array-like, shape (n, d)
        Position vectors, one row per position.
    n_permutations : int, keyword-only, default 100
    level : float, keyword-only, default 0.95
        Width of the interval over permutations (percentiles).
    seed : int, keyword-only, default 0

    Returns
    -------
    pandas.DataFrame
        Index: ``"regular simplex"`` then the encodings. Columns: ``optimal`` (scale-optimal
        stress), ``permuted mean``, ``permuted low``, ``permuted high`` (over row
        permutations; the simplex is permutation-invariant, so these equal its stress),
        ``gain`` (``permuted mean - optimal``: what order buys), ``p`` (share of permutations
        fitting at least as well, ``(k + 1) / (n_permutations + 1)``).

    Raises
    ------
    ValueError
        Shapes that do not match ``D``; ``level`` outside (0, 1).

    Examples
    --------
    >>> D = pairwise_distances(np.arange(8.0)[:, None])
    >>> t = order_free_baselines(D, {"line": np.arange(8.0)[:, None]}, n_permutations=50)
    >>> float(t.loc["line", "optimal"]), bool(t.loc["line", "gain"] > 0.2), float(t.loc["line", "p"])
    (0.0, True, 0.0196...)
    """
    Dm = check_distance_matrix(D)
    n = Dm.shape[0]
    B = check_int(n_permutations, "n_permutations", maximum=100_000)
    lv = check_float(level, "level", minimum=0.0, strict_minimum=True)
    if lv >= 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}; e.g. 0.95 for a 95% interval")
    check_int(seed, "seed", minimum=0, maximum=2**63 - 1)
    iu = np.triu_indices(n, k=1)
    d = Dm[iu]
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(n) for _ in range(B)]
    q = ((1 - lv) / 2 * 100, (1 + lv) / 2 * 100)
    simplex = _optimal_stress_from_distances(np.ones_like(d), d)
    rows: dict[str, dict[str, float]] = {
        "regular simplex": {"optimal": simplex, "permuted mean": simplex, "permuted low": simplex,
                            "permuted high": simplex, "gain": 0.0, "p": 1.0},
    }
    for name, P in encodings.items():
        Pm = _check_encoding(P, n, name=name)
        E = pairwise_distances(Pm)
        own = _optimal_stress_from_distances(E[iu], d)
        vals = np.array([_optimal_stress_from_distances(E[np.ix_(p, p)][iu], d) for p in perms])
        lo, hi = np.percentile(vals, q)
        rows[name] = {"optimal": own, "permuted mean": float(vals.mean()), "permuted low": float(lo),
                      "permuted high": float(hi), "gain": float(vals.mean() - own),
                      "p": float((np.sum(vals <= own) + 1) / (B + 1))}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "encoding"
    return df
