r"""Why sinusoids: circulant and Toeplitz structure, and how Fourier-like MDS eigenvectors are.

P1 (Cirrincione, 2026) justifies the sinusoidal encoding as the approximately optimal MDS
solution of a near-stationary corpus: when the statistics of position ``i`` depend only on
how far it is from ``j``, the double-centred Gram matrix :math:`B` of the Hellinger
distances is (nearly) *circulant*, and every circulant matrix is diagonalised by the
discrete Fourier basis, so the top MDS coordinates are sinusoids. This module measures each
link of that argument:

- :func:`nearest_circulant`, :func:`nearest_toeplitz`, :func:`circulant_distance`: how far
  a matrix is from depending on :math:`(j - i) \bmod n` (circulant, a ring) or on
  :math:`j - i` (Toeplitz, a line);
- :func:`frequency_energy`, :func:`fourier_alignment`: how much of each top eigenvector of
  :math:`B` lies in one Fourier frequency (a cos/sin *pair*, so the arbitrary rotation
  inside the degenerate eigenspaces of a circulant matrix does not matter), and how much of
  the top-k eigenspace lies in the span of the lowest Fourier modes;
- :func:`stationarity_measures`, :func:`stationarity_sweep`, :func:`equivalent_knob`: all of
  the above for a distance matrix, along the non-stationarity knob of the synthetic corpus,
  and where a real corpus sits on that curve;
- plots.

Eigendecompositions of matrices with n <= 1024 run on one BLAS thread (through
threadpoolctl when installed): they gain nothing from threads, and on a busy machine
waiting threads make them many times slower.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence
import numpy as np
import pandas as pd
import altair as alt
from posgeo import check_distance_matrix, double_centered_gram, hellinger_matrix
from posgeo import small_blas, top_eigenpairs
from posgeo import positional_marginals
from posgeo import progress_bar
from posgeo import sample_synthetic_sequences, synthetic_marginals
import posgeo as pg

__all__ = [
    'STATIONARITY_MEASURES',
    'nearest_circulant',
    'nearest_toeplitz',
    'circulant_distance',
    'toeplitz_floor_report',
    'toeplitz_profile',
    'frequency_energy',
    'FourierAlignment',
    'fourier_alignment',
    'stationarity_measures',
    'stationarity_sweep',
    'equivalent_knob',
    'plot_stationarity_sweep',
    'plot_fourier_modes',
    'plot_offset_kernels',
]


Kind = Literal["circulant", "toeplitz"]
Basis = Literal["dft", "sinusoid"]

STATIONARITY_MEASURES: tuple[str, ...] = (
    "circulant distance (B)",
    "Toeplitz distance (B)",
    "Toeplitz distance (D)",
    "DFT alignment",
    "DFT subspace",
    "sinusoid alignment",
    "DCT subspace",
)
"""Columns of :func:`stationarity_measures` / :func:`stationarity_sweep`, in order."""

_GRID_PER_POSITION = 8  # frequency grid of the "sinusoid" basis: 8 n points in (0, pi]


# --------------------------------------------------------------------------- validation
def _square(M: object, name: str = "B") -> np.ndarray:
    try:
        A = np.asarray(M, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric (n, n) array, got {type(M).__name__}") from exc
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"{name} must be square, got shape {A.shape}; pass a (n, n) matrix")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} has NaN or infinite entries; pass a finite matrix")
    return A


def _symmetric(M: object, name: str = "B") -> np.ndarray:
    A = _square(M, name)
    scale = max(1.0, float(np.abs(A).max(initial=0.0)))
    if not np.allclose(A, A.T, rtol=0.0, atol=1e-8 * scale):
        raise ValueError(f"{name} must be symmetric (a Gram matrix); pass 0.5 * (B + B.T) if it is so up to rounding")
    return 0.5 * (A + A.T)


def _check_k(k: object, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and n={n}, got {k}; pass fewer eigenvectors")
    return int(k)


# --------------------------------------------------------------------------- nearest structured matrices
def _offsets(n: int, kind: str) -> tuple[np.ndarray, int]:
    i = np.arange(n)
    if kind == "circulant":
        return (i[None, :] - i[:, None]) % n, n
    if kind == "toeplitz":
        return i[None, :] - i[:, None] + (n - 1), 2 * n - 1
    raise ValueError(f"unknown kind {kind!r}; use 'circulant' (wrapped diagonals, a ring) or 'toeplitz' (diagonals, a line)")


def _diagonal_means(A: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    idx, m = _offsets(A.shape[0], kind)
    sums = np.bincount(idx.ravel(), weights=A.ravel(), minlength=m)
    counts = np.bincount(idx.ravel(), minlength=m)
    return sums / counts, idx


def nearest_circulant(B: object) -> np.ndarray:
    r"""The circulant matrix nearest to ``B`` in Frobenius norm.

    A circulant matrix has :math:`C_{ij} = c_{(j-i) \bmod n}`. The Frobenius-nearest one
    replaces every *wrapped* diagonal :math:`\{(i, (i+k) \bmod n)\}` of ``B`` by its mean
    (the orthogonal projection onto the circulant subspace).

    Parameters
    ----------
    B : array_like, shape (n, n)

    Returns
    -------
    numpy.ndarray, shape (n, n)
        Symmetric when ``B`` is.

    Raises
    ------
    ValueError
        If ``B`` is not square or not finite.

    Examples
    --------
    >>> nearest_circulant([[0.0, 1.0], [3.0, 0.0]]).tolist()
    [[0.0, 2.0], [2.0, 0.0]]
    """
    A = _square(B)
    means, idx = _diagonal_means(A, "circulant")
    return means[idx]


def nearest_toeplitz(B: object) -> np.ndarray:
    r"""The Toeplitz matrix nearest to ``B`` in Frobenius norm.

    A Toeplitz matrix has :math:`T_{ij} = t_{j-i}`. The Frobenius-nearest one replaces every
    diagonal :math:`\{(i, i+k)\}`, :math:`-(n-1) \le k \le n-1`, by its mean.

    Parameters
    ----------
    B : array_like, shape (n, n)

    Returns
    -------
    numpy.ndarray, shape (n, n)

    Raises
    ------
    ValueError
        If ``B`` is not square or not finite.

    Examples
    --------
    >>> nearest_toeplitz([[1.0, 2.0], [4.0, 3.0]]).tolist()
    [[2.0, 2.0], [4.0, 2.0]]
    """
    A = _square(B)
    means, idx = _diagonal_means(A, "toeplitz")
    return means[idx]


def circulant_distance(B: object, *, kind: Kind = "circulant") -> float:
    r"""Relative Frobenius distance of ``B`` to the nearest circulant (or Toeplitz) matrix.

    .. math::
        \frac{\lVert B - \Pi(B)\rVert_F}{\lVert B\rVert_F},

    with :math:`\Pi` :func:`nearest_circulant` or :func:`nearest_toeplitz`. Zero exactly
    when ``B`` is circulant (Toeplitz); in [0, 1] because :math:`\Pi` is an orthogonal
    projection. Every circulant matrix is Toeplitz, so the Toeplitz distance never exceeds
    the circulant one.

    Parameters
    ----------
    B : array_like, shape (n, n)
    kind : {"circulant", "toeplitz"}, keyword-only
        ``"circulant"``: depends on :math:`(j-i) \bmod n` (a ring, P1's setting);
        ``"toeplitz"``: depends on :math:`j - i` (a line, the natural notion for text).

    Returns
    -------
    float
        0.0 for an all-zero ``B``.

    Raises
    ------
    ValueError
        Non-square or non-finite ``B``; unknown ``kind``.

    Examples
    --------
    >>> C = [[2.0, 1.0, 0.5], [0.5, 2.0, 1.0], [1.0, 0.5, 2.0]]   # circulant
    >>> circulant_distance(C)
    0.0
    >>> T = [[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]]   # Toeplitz, not circulant
    >>> circulant_distance(T, kind="toeplitz"), round(circulant_distance(T), 3)
    (0.0, 0.333)
    """
    A = _square(B)
    means, idx = _diagonal_means(A, kind)
    norm = float(np.linalg.norm(A))
    if norm == 0.0:
        return 0.0
    return float(np.linalg.norm(A - means[idx]) / norm)


def toeplitz_floor_report(D: object, *, d: int = 384, n_heads: int = 12) -> pd.Series:
    r"""The Toeplitz floor of a distance matrix beside the stress of offset-based encodings.

    An encoding whose distances depend only on the offset :math:`|i - j|` (sinusoidal, RoPE,
    ALiBi) has a Toeplitz distance matrix, so its scale-optimal stress against ``D`` is at
    least :math:`\min_T \lVert D - T \rVert_F^2 / \lVert D \rVert_F^2`, the squared
    :func:`circulant_distance` of ``D`` with ``kind="toeplitz"`` (the nearest Toeplitz matrix
    is an orthogonal projection; ``D`` and ``T`` are symmetric with zero diagonal, so the
    full-matrix ratio equals the ratio over pairs ``i < j``).

    Parameters
    ----------
    D : array_like, shape (n, n)
        Target distances.
    d : int, keyword-only, default 384
        Width of the sinusoidal and RoPE encodings.
    n_heads : int, keyword-only, default 12
        Heads: RoPE's head size is ``d // n_heads``; ALiBi has ``n_heads`` slopes.

    Returns
    -------
    pandas.Series
        ``Toeplitz floor``, then the scale-optimal stress of ``sinusoidal d=<d>``,
        ``RoPE d=<d> (head <h>)`` and ``ALiBi <n_heads> heads``; each stress is >= the floor.

    Raises
    ------
    ValueError
        If ``D`` is not a distance matrix, or ``d`` is not divisible by ``n_heads``.

    Examples
    --------
    >>> D = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0)))   # a line: Toeplitz
    >>> rep = toeplitz_floor_report(D, d=8, n_heads=2)
    >>> bool(rep["Toeplitz floor"] < 1e-24), bool(rep["ALiBi 2 heads"] < 1e-12)
    (True, True)
    """
    from posgeo import alibi_encoding, rope_encoding, sinusoidal_encoding
    from posgeo import stress

    Dm = check_distance_matrix(D)
    if d % n_heads:
        raise ValueError(f"d={d} is not divisible by n_heads={n_heads}; pass a d that splits into heads")
    n = Dm.shape[0]
    encodings = {
        f"sinusoidal d={d}": sinusoidal_encoding(n, d),
        f"RoPE d={d} (head {d // n_heads})": rope_encoding(n, d, head_dim=d // n_heads),
        f"ALiBi {n_heads} heads": alibi_encoding(n, n_heads),
    }
    values = {"Toeplitz floor": circulant_distance(Dm, kind="toeplitz") ** 2}
    with small_blas(n):
        values.update({name: stress(P, Dm, scale="optimal") for name, P in encodings.items()})
    return pd.Series(values, dtype=np.float64)


def toeplitz_profile(M: object) -> np.ndarray:
    """Mean of ``M`` along each superdiagonal: ``profile[k] = mean_i M[i, i + k]``, k = 0..n-1.

    For a Toeplitz matrix (e.g. the Gram matrix of a sinusoidal encoding) this is exactly its
    defining sequence, the kernel as a function of the offset.

    Parameters
    ----------
    M : array_like, shape (n, n)

    Returns
    -------
    numpy.ndarray, shape (n,)

    Examples
    --------
    >>> toeplitz_profile([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [0.0, 0.0, 5.0]]).tolist()
    [2.3333333333333335, 2.0, 3.0]
    """
    A = _square(M, "M")
    means, _ = _diagonal_means(A, "toeplitz")
    return means[A.shape[0] - 1 :].copy()


# --------------------------------------------------------------------------- Fourier energy
def _as_columns(vectors: object) -> np.ndarray:
    V = np.asarray(vectors, dtype=np.float64)
    if V.ndim == 1:
        V = V[:, None]
    if V.ndim != 2 or V.shape[0] < 2:
        raise ValueError(f"vectors must have shape (n,) or (n, k) with n >= 2, got {V.shape}")
    norms = np.linalg.norm(V, axis=0)
    if not np.all(np.isfinite(V)) or np.any(norms == 0):
        raise ValueError("vectors must be finite and non-zero; drop all-zero columns")
    return V / norms


def frequency_energy(vectors: object) -> np.ndarray:
    r"""Share of each vector's squared norm in each discrete Fourier frequency *pair*.

    Frequency f (cycles over the n positions, f = 0..n//2) owns the plane
    :math:`\mathrm{span}\{\cos(2\pi f i/n), \sin(2\pi f i/n)\}` (a line for f = 0 and,
    when n is even, for f = n/2). Energies are computed with the FFT (Parseval):
    :math:`(|\hat v_f|^2 + |\hat v_{n-f}|^2)/n`. Measuring pairs makes the result invariant
    to rotations inside a plane, i.e. to the phase of a sinusoid and to the arbitrary basis
    an eigensolver returns for a doubly degenerate eigenvalue of a circulant matrix.

    Parameters
    ----------
    vectors : array_like, shape (n,) or (n, k)
        Column vectors (normalised internally).

    Returns
    -------
    numpy.ndarray, shape (n // 2 + 1, k)
        Row f: energy share at frequency f; every column sums to 1.

    Raises
    ------
    ValueError
        For fewer than 2 rows, non-finite entries or an all-zero column.

    Examples
    --------
    >>> i = np.arange(8)
    >>> v = np.cos(2 * np.pi * 3 * i / 8 + 0.7)       # any phase
    >>> frequency_energy(v)[:, 0].round(6).tolist()
    [0.0, 0.0, 0.0, 1.0, 0.0]
    """
    V = _as_columns(vectors)
    n = V.shape[0]
    P = np.abs(np.fft.fft(V, axis=0)) ** 2 / n  # (n, k), columns sum to 1
    half = n // 2
    E = P[: half + 1].copy()
    f = np.arange(1, half + 1)
    mirror = n - f
    paired = mirror != f  # f = n/2 (n even) has no partner
    E[f[paired]] += P[mirror[paired]]
    return E


def _dft_fits(V: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """Projection of each column onto its frequency pair (inverse FFT of two bins)."""
    n = V.shape[0]
    F = np.fft.fft(V, axis=0)
    keep = np.zeros_like(F)
    cols = np.arange(V.shape[1])
    keep[freqs, cols] = F[freqs, cols]
    keep[(n - freqs) % n, cols] = F[(n - freqs) % n, cols]
    return np.real(np.fft.ifft(keep, axis=0))


def _sinusoid_energy(V: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Energy share of unit columns V (n, k) in span{cos(w c), sin(w c)} for each w: (len(w), k).

    With centred indices c = i - (n-1)/2 the cosine is even and the sine odd, so the two are
    orthogonal and the projection is the sum of two one-dimensional ones.
    """
    n = V.shape[0]
    c = np.arange(n) - (n - 1) / 2.0
    arg = np.outer(omega, c)
    C, S = np.cos(arg), np.sin(arg)
    cc, ss = np.einsum("ij,ij->i", C, C), np.einsum("ij,ij->i", S, S)
    tiny = 1e-12 * n
    with np.errstate(divide="ignore", invalid="ignore"):
        ec = np.where(cc[:, None] > tiny, (C @ V) ** 2 / cc[:, None], 0.0)
        es = np.where(ss[:, None] > tiny, (S @ V) ** 2 / ss[:, None], 0.0)
    return ec + es


def _sinusoid_fits(V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best sinusoid of any frequency in (0, pi] and any phase, for each unit column of V."""
    from scipy.optimize import minimize_scalar

    n, k = V.shape
    grid_size = _GRID_PER_POSITION * n
    omega = np.pi * np.arange(1, grid_size + 1) / grid_size  # contains every DFT frequency 2 pi f / n
    E = _sinusoid_energy(V, omega)
    energy = np.empty(k)
    best = np.empty(k)
    for j in range(k):
        g = int(np.argmax(E[:, j]))
        w, e = omega[g], E[g, j]
        lo, hi = omega[max(g - 1, 0)], omega[min(g + 1, grid_size - 1)]
        if hi > lo:
            res = minimize_scalar(
                lambda x: -float(_sinusoid_energy(V[:, j : j + 1], np.array([x]))[0, 0]),
                bounds=(lo, hi),
                method="bounded",
                options={"xatol": 1e-10 * np.pi},
            )
            if -res.fun > e:
                w, e = float(res.x), float(-res.fun)
        energy[j], best[j] = min(e, 1.0), w
    c = np.arange(n) - (n - 1) / 2.0
    fits = np.empty_like(V)
    for j in range(k):
        basis = np.stack([np.cos(best[j] * c), np.sin(best[j] * c)], axis=1)
        coef, *_ = np.linalg.lstsq(basis, V[:, j], rcond=None)
        fits[:, j] = basis @ coef
    return energy, best * n / (2.0 * np.pi), fits


def _lowest_modes(n: int, k: int, basis: str) -> np.ndarray:
    """Orthonormal basis (n, m) of the lowest non-constant Fourier modes, m >= k when possible."""
    i = np.arange(n)
    if basis == "dft":
        cols = []
        for f in range(1, n // 2 + 1):
            cols.append(np.cos(2 * np.pi * f * i / n))
            if 2 * f != n:
                cols.append(np.sin(2 * np.pi * f * i / n))
            if len(cols) >= k:
                break
    else:  # DCT-II: the cosine modes of the path graph, the non-periodic Fourier basis
        cols = [np.cos(np.pi * f * (i + 0.5) / n) for f in range(1, min(k, n - 1) + 1)]
    M = np.stack(cols, axis=1)
    return M / np.linalg.norm(M, axis=0)


@dataclass(frozen=True)
class FourierAlignment:
    """How Fourier-like the top eigenvectors of a Gram matrix are.

    Attributes
    ----------
    basis : str
        ``"dft"`` (discrete Fourier frequencies 2 pi f / n: the eigenvectors of circulant
        matrices) or ``"sinusoid"`` (any frequency in (0, pi] and any phase).
    eigenvalues : numpy.ndarray, shape (k,)
        The top-k eigenvalues of B, descending.
    eigenvectors : numpy.ndarray, shape (n, k)
        The corresponding unit eigenvectors.
    energy : numpy.ndarray, shape (k,)
        For each eigenvector, the share of its squared norm captured by its best-matching
        frequency (cos + sin pair); 1 means the eigenvector *is* a sinusoid.
    frequency : numpy.ndarray, shape (k,)
        That frequency, in cycles over the n positions (an integer for ``"dft"``).
    fits : numpy.ndarray, shape (n, k)
        The best-matching sinusoid: the projection of each eigenvector onto its frequency pair.
    subspace_cosines : numpy.ndarray, shape (k,)
        Cosines of the principal angles between the top-k eigenspace and the span of the
        lowest non-constant Fourier modes (``"dft"``: the cos/sin pairs of frequencies
        1, 2, ... up to at least k vectors; ``"sinusoid"``: the first k DCT-II modes, the
        non-periodic analogue).
    trace : float
        The trace of B (the total variance when B is a Gram matrix).
    """

    basis: str
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    energy: np.ndarray
    frequency: np.ndarray
    fits: np.ndarray
    subspace_cosines: np.ndarray
    trace: float

    @property
    def variance_share(self) -> np.ndarray:
        """``eigenvalues / trace``: the share of the total variance on each eigenvector, shape (k,)."""
        return self.eigenvalues / self.trace if self.trace != 0 else np.full(self.eigenvalues.shape, np.nan)

    @property
    def mean_energy(self) -> float:
        """Mean of ``energy`` over the k eigenvectors (1 for an exactly circulant matrix)."""
        return float(np.mean(self.energy))

    @property
    def subspace_energy(self) -> float:
        """Mean squared principal cosine: the share of the top-k eigenspace inside the lowest modes."""
        return float(np.mean(self.subspace_cosines**2))


def fourier_alignment(B: object, *, k: int = 4, basis: Basis = "dft") -> FourierAlignment:
    r"""Energy of B's top-k eigenvectors in their best-matching Fourier frequency.

    Every circulant matrix is diagonalised by the discrete Fourier basis; a real symmetric
    one has eigenvalue pairs :math:`\lambda_f = \lambda_{n-f}` whose eigenspaces are the planes
    :math:`\mathrm{span}\{\cos(2\pi f i/n), \sin(2\pi f i/n)\}`. An eigensolver returns an
    arbitrary orthonormal basis of such a plane, so energy is measured per frequency *pair*
    (:func:`frequency_energy`): the result is exactly 1 for every eigenvector of an exactly
    circulant matrix, degenerate pairs included. (Only eigenvalues tied *across* different
    frequencies, an accident of special matrices, could mix frequencies in one eigenvector.)

    ``basis="sinusoid"`` asks the weaker question whether each eigenvector is a sinusoid of
    *any* frequency in (0, pi] (fitted on a grid of 8n frequencies, refined by a bounded
    scalar search) and any phase; it is the natural measure for a Toeplitz (non-periodic)
    matrix, whose eigenvectors are approximately, not exactly, sinusoids. Beware that a
    sinusoid with well under half a cycle over the window is nearly a straight line.

    Parameters
    ----------
    B : array_like, shape (n, n)
        Symmetric matrix, e.g. ``double_centered_gram(D)``.
    k : int, keyword-only, default 4
        Number of top eigenvectors (by eigenvalue, descending).
    basis : {"dft", "sinusoid"}, keyword-only

    Returns
    -------
    FourierAlignment

    Raises
    ------
    ValueError
        Non-square, non-symmetric or non-finite ``B``; ``k`` outside [1, n]; unknown basis.
    TypeError
        Non-integer ``k``.

    Examples
    --------
    A symmetric circulant matrix: eigenvalues come in equal pairs, energy is still exactly 1.

    >>> n = 12; i = np.arange(n)
    >>> c = np.exp(-np.minimum(i, n - i) / 2.0)
    >>> C = c[(i[None, :] - i[:, None]) % n]
    >>> fa = fourier_alignment(C, k=4)
    >>> fa.energy.round(6).tolist(), fa.frequency.tolist(), round(fa.subspace_energy, 6)
    ([1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 2.0], 0.75)
    """
    if basis not in ("dft", "sinusoid"):
        raise ValueError(f"unknown basis {basis!r}; use 'dft' (discrete Fourier frequencies) or 'sinusoid' (any frequency)")
    A = _symmetric(B)
    with small_blas(A.shape[0]):
        lam, V = _top_eigenpairs(A, k)
        return _alignment(lam, V, basis, float(np.trace(A)))


def _top_eigenpairs(B: object, k: object) -> tuple[np.ndarray, np.ndarray]:
    """The top-k eigenpairs, with a machine-independent basis inside each tied eigenspace.

    A circulant matrix's eigenvalues come in equal pairs, and an eigensolver may return any
    rotation of each pair's eigenvectors (it differs between LAPACK builds and CPU kernel
    paths). Eigenvalues equal to 1e-8 of the largest form a tied group; its basis is
    replaced by the canonical one: the projections of e_0, e_1, ... onto the group's
    eigenspace, orthonormalised in that order (one more eigenpair is computed so that a
    group cut by k is still recognised).
    """
    A = _symmetric(B)
    n = A.shape[0]
    if n < 2:
        raise ValueError("B must be at least 2 x 2 to have Fourier structure")
    k = _check_k(k, n)
    lam, V = top_eigenpairs(A, min(k + 1, n))
    return lam[:k], _canonical_ties(lam, V)[:, :k]


def _canonical_ties(lam: np.ndarray, V: np.ndarray, rtol: float = 1e-8) -> np.ndarray:
    V = np.array(V, dtype=np.float64, copy=True)
    scale = max(float(np.abs(lam).max(initial=0.0)), np.finfo(float).tiny)
    start = 0
    while start < lam.size:
        stop = start + 1
        while stop < lam.size and abs(lam[stop] - lam[start]) <= rtol * scale:
            stop += 1
        if stop - start > 1:
            U = V[:, start:stop]
            P = U @ U.T  # the projector onto the tied eigenspace: the same whatever basis was returned
            basis: list[np.ndarray] = []
            for j in range(V.shape[0]):
                v = P[:, j].copy()
                for b in basis:
                    v -= (b @ v) * b
                norm = np.linalg.norm(v)
                if norm > 1e-6:
                    basis.append(v / norm)
                if len(basis) == stop - start:
                    break
            V[:, start:stop] = np.column_stack(basis)
        start = stop
    return V


def _alignment(lam: np.ndarray, V: np.ndarray, basis: str, trace: float) -> FourierAlignment:
    n, k = V.shape
    if basis == "dft":
        E = frequency_energy(V)
        freqs = np.argmax(E, axis=0)
        energy = E[freqs, np.arange(k)]
        fits = _dft_fits(V, freqs)
        frequency = freqs.astype(np.float64)
    else:
        energy, frequency, fits = _sinusoid_fits(V)
    modes = _lowest_modes(n, k, basis)
    cos = np.linalg.svd(modes.T @ V, compute_uv=False)
    cos = np.clip(np.concatenate([cos, np.zeros(max(0, k - cos.size))])[:k], 0.0, 1.0)
    return FourierAlignment(
        basis=basis,
        eigenvalues=lam,
        eigenvectors=V,
        energy=np.clip(energy, 0.0, 1.0),
        frequency=frequency,
        fits=fits,
        subspace_cosines=cos,
        trace=trace,
    )


# --------------------------------------------------------------------------- measures and the sweep
def stationarity_measures(D: object, *, k: int = 4) -> pd.Series:
    """Every stationarity / Fourier measure of this module for one distance matrix.

    Parameters
    ----------
    D : array_like, shape (n, n)
        Distance matrix (e.g. Hellinger); ``B = double_centered_gram(D)``.
    k : int, keyword-only, default 4
        Top eigenvectors used by the alignment measures.

    Returns
    -------
    pandas.Series
        Indexed by :data:`STATIONARITY_MEASURES`: ``circulant distance (B)``,
        ``Toeplitz distance (B)``, ``Toeplitz distance (D)`` (see :func:`circulant_distance`),
        ``DFT alignment`` and ``DFT subspace`` (:func:`fourier_alignment` with
        ``basis="dft"``: ``mean_energy`` and ``subspace_energy``), ``sinusoid alignment``
        and ``DCT subspace`` (the same with ``basis="sinusoid"``).

    Raises
    ------
    ValueError
        If ``D`` is not a distance matrix.

    Examples
    --------
    Points equally spaced on a circle: a circulant geometry, perfectly Fourier.

    >>> t = 2 * np.pi * np.arange(10) / 10
    >>> X = np.stack([np.cos(t), np.sin(t)], axis=1)
    >>> D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    >>> s = stationarity_measures(D, k=2)
    >>> bool(s["circulant distance (B)"] < 1e-12), round(float(s["DFT alignment"]), 6)
    (True, 1.0)
    """
    Dm = check_distance_matrix(D)
    B = double_centered_gram(Dm)
    with small_blas(B.shape[0]):
        lam, V = _top_eigenpairs(B, k)
        trace = float(np.trace(B))
        dft = _alignment(lam, V, "dft", trace)
        sin = _alignment(lam, V, "sinusoid", trace)
    values = [
        circulant_distance(B, kind="circulant"),
        circulant_distance(B, kind="toeplitz"),
        circulant_distance(Dm, kind="toeplitz"),
        dft.mean_energy,
        dft.subspace_energy,
        sin.mean_energy,
        sin.subspace_energy,
    ]
    return pd.Series(values, index=list(STATIONARITY_MEASURES), dtype=np.float64)


def stationarity_sweep(
    knobs: Sequence[float],
    *,
    n: int = 32,
    vocab_size: int = 64,
    geometry: str = "ring",
    concentration: float = 4.0,
    k: int = 4,
    marginals: Literal["true", "sampled"] = "true",
    n_sequences: int = 20000,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    r"""The stationarity measures of the synthetic corpus along its non-stationarity knob.

    For each knob :math:`\gamma`, ``mu = synthetic_marginals(n, vocab_size,
    nonstationarity=gamma, geometry=geometry, seed=seed)`` and
    ``D = hellinger_matrix(mu)``; the row is :func:`stationarity_measures` of ``D``.

    Parameters
    ----------
    knobs : sequence of float
        Non-negative values of ``nonstationarity``, increasing.
    n, vocab_size, geometry, concentration : keyword-only
        See :func:`synthetic_marginals`. On the ring with ``vocab_size`` a multiple of ``n``,
        knob 0 gives an exactly circulant geometry.
    k : int, keyword-only, default 4
        Top eigenvectors used by the alignment measures.
    marginals : {"true", "sampled"}, keyword-only
        ``"true"``: the exact marginals; ``"sampled"``: the plug-in marginals of
        ``n_sequences`` sequences drawn from them (:func:`sample_synthetic_sequences`), which
        adds sampling noise.
    n_sequences : int, keyword-only, default 20000
        Sample size for ``marginals="sampled"``.
    seed : int, keyword-only
        Seed of the non-stationary component and of the sample.
    progress : bool, keyword-only

    Returns
    -------
    pandas.DataFrame
        Index ``knob``; columns :data:`STATIONARITY_MEASURES`.

    Raises
    ------
    ValueError
        Empty, negative or non-increasing knobs; an unknown ``marginals``.

    Examples
    --------
    >>> sweep = stationarity_sweep([0.0, 1.0], n=8, vocab_size=16, progress=False)
    >>> sweep["circulant distance (B)"].round(3).tolist(), sweep["DFT alignment"].round(3).tolist()
    ([0.0, 0.443], [1.0, 0.746])
    """
    ks = np.asarray(list(knobs), dtype=np.float64)
    if ks.ndim != 1 or ks.size == 0 or not np.all(np.isfinite(ks)) or np.any(ks < 0):
        raise ValueError(f"knobs must be a non-empty sequence of finite values >= 0, got {knobs!r}")
    if np.any(np.diff(ks) <= 0):
        raise ValueError("knobs must be strictly increasing; sort them and drop duplicates")
    if marginals not in ("true", "sampled"):
        raise ValueError(f"marginals must be 'true' or 'sampled', got {marginals!r}")
    rows = []
    for knob in progress_bar(ks, enabled=progress, desc="stationarity sweep"):
        mu = synthetic_marginals(
            n, vocab_size, nonstationarity=float(knob), geometry=geometry, concentration=concentration, seed=seed
        )
        if marginals == "sampled":
            seqs = sample_synthetic_sequences(mu, n_sequences, seed=seed)
            mu = positional_marginals(seqs, n, vocab_size)
        rows.append(stationarity_measures(hellinger_matrix(mu), k=k))
    out = pd.DataFrame(rows, index=pd.Index(ks, name="knob"))
    return out


def equivalent_knob(sweep: pd.DataFrame, column: str, value: float) -> float:
    """The knob at which a sweep's measure reaches ``value`` (linear interpolation).

    Walks the sweep in knob order and returns the first crossing. A value less
    non-stationary than the sweep's first row returns the first knob; one beyond the last
    row (more non-stationary than anything in the sweep) returns ``inf``.

    Parameters
    ----------
    sweep : pandas.DataFrame
        From :func:`stationarity_sweep` (index: knob).
    column : str
        One of its columns.
    value : float
        The measure of, e.g., a real corpus.

    Returns
    -------
    float

    Raises
    ------
    KeyError
        Unknown column.
    ValueError
        A sweep with fewer than 2 rows, or a constant column.

    Examples
    --------
    >>> sweep = pd.DataFrame({"m": [0.0, 0.2, 0.4]}, index=pd.Index([0.0, 1.0, 2.0], name="knob"))
    >>> equivalent_knob(sweep, "m", 0.3), equivalent_knob(sweep, "m", 0.9)
    (1.5, inf)
    """
    if column not in sweep.columns:
        raise KeyError(f"{column!r} is not a column of the sweep; columns are {list(sweep.columns)}")
    x = np.asarray(sweep.index, dtype=np.float64)
    y = np.asarray(sweep[column], dtype=np.float64)
    if x.size < 2:
        raise ValueError("the sweep needs at least 2 knobs to interpolate")
    if y[-1] == y[0]:
        raise ValueError(f"{column!r} is the same at both ends of the sweep; it cannot locate a value")
    sign = 1.0 if y[-1] > y[0] else -1.0  # direction of growing non-stationarity
    if sign * (value - y[0]) <= 0:
        return float(x[0])
    for j in range(1, x.size):
        if sign * (value - y[j]) <= 0:
            t = (value - y[j - 1]) / (y[j] - y[j - 1])
            return float(x[j - 1] + t * (x[j] - x[j - 1]))
    return math.inf


# --------------------------------------------------------------------------- plots


_PANEL_HEIGHT = 220
# Dash patterns for series that share a colour (several RoPE variants, a corpus' plug-in and
# corrected values): solid first, then clearly different patterns.
_DASHES = ([1, 0], [7, 3], [2, 2], [10, 3, 2, 3], [4, 4])
_SWEEP_DASHES = ([1, 0], [4, 2], [10, 3, 2, 3])


def _key(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:6]


def _symlog_ticks(values: Sequence[float]) -> tuple[list[float], float]:
    """Tick values (0, the smallest positive value, the powers of ten between) and the symlog constant."""
    x = np.asarray(values, dtype=np.float64)
    positive = x[x > 0]
    if positive.size == 0:
        return [0.0], 1.0
    lo, hi = float(positive.min()), float(positive.max())
    ticks = [10.0**k for k in range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)]
    if not ticks or ticks[0] > lo * 1.5:
        ticks.insert(0, lo)
    return ([0.0] if x.min() <= 0 else []) + ticks, lo


def plot_stationarity_sweep(
    sweeps: Mapping[str, pd.DataFrame],
    *,
    columns: Sequence[str] = ("circulant distance (B)", "DFT alignment", "sinusoid alignment"),
    corpora: pd.DataFrame | None = None,
    knob: float | None = None,
) -> Any:
    """Stationarity measures against the non-stationarity knob, with real corpora as reference lines.

    One panel per measure, two per row, with one legend for all of them: click an entry to
    show that sweep or corpus alone in every panel (shift-click for several); hover a point
    or a line for its value. The knob axis is symmetric-log (linear near 0, logarithmic
    beyond the smallest positive knob). A menu below the chart picks one knob, marked in
    every panel (a vertical line and rings on the sweeps' values there).

    Parameters
    ----------
    sweeps : mapping of str to pandas.DataFrame
        Label -> :func:`stationarity_sweep` result (one line each).
    columns : sequence of str, keyword-only
        Measures to draw, one panel each.
    corpora : pandas.DataFrame, optional, keyword-only
        Index: corpus label; columns including ``columns``: drawn as horizontal reference
        lines in the corpus' colour (dashed for corrected estimates, dotted otherwise).
    knob : float, optional, keyword-only
        The knob marked at first (one of the sweeps' knobs; default: the middle one).

    Returns
    -------
    altair chart

    Examples
    --------
    >>> sweep = stationarity_sweep([0.0, 1.0], n=8, vocab_size=16, progress=False)
    >>> spec = plot_stationarity_sweep({"ring": sweep}, columns=["DFT alignment"]).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]], spec["layer"][0]["encoding"]["x"]["scale"]["type"]
    (['line', 'point', 'rule', 'point'], 'symlog')
    """
    if not sweeps:
        raise ValueError("sweeps is empty; pass {label: stationarity_sweep(...)}")
    cols = list(columns)
    for label, sw in sweeps.items():
        missing = [c for c in cols if c not in sw.columns]
        if missing:
            raise ValueError(f"sweep {label!r} lacks the measures {missing}; pass stationarity_sweep results")
    lines = pd.concat(
        [sw[cols].rename_axis("knob").reset_index().melt("knob", var_name="measure", value_name="value").assign(series=str(label))
         for label, sw in sweeps.items()], ignore_index=True)
    names = [str(label) for label in sweeps]
    refs = pd.DataFrame(columns=["series", "measure", "value"])
    if corpora is not None:
        shown = [c for c in cols if c in corpora.columns]
        refs = corpora[shown].rename_axis("series").reset_index().melt("series", var_name="measure", value_name="value")
        refs["series"] = refs["series"].astype(str)
        names += [str(n) for n in corpora.index]
    sweep_names = names[: len(sweeps)]
    # the sweeps are the synthetic corpus: its blue, then shades of it; corpora in their colours
    shades = ["#0072B2", "#56B4E9", "#332288", "#44AA99"]
    scale = alt.Scale(domain=names, range=[shades[j % len(shades)] for j in range(len(sweep_names))]
                      + [pg.series_colour(n) or "#888888" for n in names[len(sweeps):]])
    dashes = [_SWEEP_DASHES[j % len(_SWEEP_DASHES)] for j in range(len(sweep_names))]
    for name in names[len(sweeps):]:
        dashes.append(_DASHES[1] if "corrected" in name.lower() or "hybrid" in name.lower() else _DASHES[2])
    key = _key("sweep", tuple(names), tuple(cols), len(lines))
    pick = alt.selection_point(fields=["series"], bind="legend", name=f"pick_sweep_{key}")
    colour = alt.Color("series:N", scale=scale, sort=names, title="synthetic sweep (dots) or corpus (horizontal line)",
                       legend=alt.Legend(symbolType="stroke", columns=3, symbolStrokeWidth=2.5, titleLimit=500))
    dash = alt.StrokeDash("series:N", sort=names, title="synthetic sweep (dots) or corpus (horizontal line)", scale=alt.Scale(domain=names, range=dashes))
    knobs = sorted(float(v) for v in set(lines["knob"]))
    if knob is not None and float(knob) not in knobs:
        raise ValueError(f"knob={knob!r} is not one of the sweeps' knobs {knobs}")
    marked = alt.param(name=f"knob_{key}", value=float(knob) if knob is not None else knobs[len(knobs) // 2],
                       bind=alt.binding_select(options=knobs, name="mark the knob γ = "))
    ticks, constant = _symlog_ticks(knobs)
    x = alt.X("knob:Q", title="non-stationarity knob γ (symlog scale)",
              scale=alt.Scale(type="symlog", constant=constant, domain=[min(knobs), max(knobs)], nice=False),
              axis=alt.Axis(values=ticks, format="~r", labelFlush=True))
    y = alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.1))
    tips = [alt.Tooltip("series:N", title="sweep or corpus"), alt.Tooltip("measure:N"), alt.Tooltip("knob:Q", title="knob γ"),
            alt.Tooltip("value:Q", format=".4~g")]
    panels = []
    for k, col in enumerate(cols):
        base = alt.Chart(lines).transform_filter(alt.datum.measure == col).properties(width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)
        ytitled = alt.Y("value:Q", title=col, scale=alt.Scale(domain=[0, 1]))
        layers = [
            base.mark_line(strokeWidth=2).encode(x=x, y=ytitled, color=colour, strokeDash=dash, opacity=faded).add_params(pick),
            base.mark_point(filled=True, size=30).encode(x=x, y=y, color=colour, opacity=faded, tooltip=tips),
        ]
        if len(refs):
            ref = alt.Chart(refs).transform_filter(alt.datum.measure == col).mark_rule(strokeWidth=1.8).encode(
                y=y, color=colour, strokeDash=dash, opacity=faded,
                tooltip=[alt.Tooltip("series:N", title="corpus"), alt.Tooltip("measure:N"), alt.Tooltip("value:Q", format=".4~g")])
            layers.append(ref)
        at_knob = f"datum.knob == {marked.name}"
        layers.append(alt.Chart(pd.DataFrame({"knob": knobs})).transform_filter(at_knob).mark_rule(
            color="#666666", strokeWidth=1, strokeDash=[3, 3]).encode(x=x, tooltip=[alt.Tooltip("knob:Q", title="marked knob γ")]))
        layers.append(base.transform_filter(at_knob).mark_point(size=120, filled=False, strokeWidth=2).encode(
            x=x, y=y, color=colour, opacity=faded, tooltip=tips))
        if k == 0:
            layers[0] = layers[0].add_params(marked)
        panels.append(alt.layer(*layers))
    chart = pg.panel_grid(panels, columns=2)
    if len(panels) > 1:
        chart = chart.resolve_scale(color="shared", strokeDash="shared")
    corpus_text = (f"; the corpora ({', '.join(names[len(sweeps):])}) as horizontal reference lines" if len(refs) else "")
    return pg.finish_chart(
        chart,
        description=(f"Stationarity measures ({', '.join(cols)}) against the non-stationarity knob of the synthetic corpus, "
                     f"one panel per measure, one line per sweep ({', '.join(sweep_names)}){corpus_text}."),
    )


def plot_fourier_modes(alignments: Mapping[str, FourierAlignment], *, k: int = 3) -> Any:
    """Top eigenvectors of B (dots) beside their best-matching sinusoids (lines), one panel per matrix.

    Each panel holds the matrix' top ``k`` eigenvectors, one colour each; its subtitle gives
    each eigenvector's best frequency and the share of its energy in it. Click an
    eigenvector in the legend to show it alone in every panel; hover a dot for its values.

    Parameters
    ----------
    alignments : mapping of str to FourierAlignment
        Panel title -> :func:`fourier_alignment` result.
    k : int, keyword-only
        Eigenvectors per panel (at most the alignment's k).

    Returns
    -------
    altair chart

    Examples
    --------
    >>> fa = fourier_alignment(double_centered_gram(hellinger_matrix(synthetic_marginals(8, 16, nonstationarity=0.0))), k=2)
    >>> spec = plot_fourier_modes({"ring": fa}, k=2).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['line', 'point']
    """
    if not alignments:
        raise ValueError("alignments is empty; pass {label: fourier_alignment(...)}")
    k = max(1, min(k, min(a.eigenvectors.shape[1] for a in alignments.values())))
    modes = [f"eigenvector {j + 1}" for j in range(k)]
    key = _key("modes", tuple(alignments), k)
    pick = alt.selection_point(fields=["eigenvector"], bind="legend", name=f"pick_modes_{key}")
    colour = alt.Color("eigenvector:N", scale=pg.colour_scale(modes), sort=modes, title="dots: eigenvector of B; lines: best sinusoid",
                       legend=alt.Legend(symbolType="circle", columns=3, titleLimit=400))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.08))
    panels = []
    def drawn(v: np.ndarray) -> np.ndarray:  # entries at float64 rounding (a node of a sine) are 0: their
        return np.where(np.abs(v) <= 1e-12 * np.abs(v).max(initial=0.0), 0.0, v)  # digits differ by machine

    for label, fa in alignments.items():
        n = fa.eigenvectors.shape[0]
        frame = pd.concat([pd.DataFrame({"position": np.arange(n), "eigenvector": modes[j], "entry": drawn(fa.eigenvectors[:, j]),
                                         "sinusoid": drawn(fa.fits[:, j]), "frequency (cycles)": float(fa.frequency[j]),
                                         "energy": float(fa.energy[j])}) for j in range(k)], ignore_index=True)
        subtitle = [f"v{j + 1}: best frequency {fa.frequency[j]:.2f} cycles, energy {fa.energy[j]:.2f}" for j in range(k)]
        x = alt.X("position:Q", title="position i", scale=alt.Scale(domain=[0, n - 1], nice=False))
        base = alt.Chart(frame).properties(width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT,
                                           title=alt.TitleParams(f"{label} (n = {n})", subtitle=subtitle))
        fit = base.mark_line(strokeWidth=1.6).encode(x=x, y=alt.Y("sinusoid:Q", title="entry of the eigenvector"),
                                                     color=colour, opacity=faded).add_params(pick)
        dots = base.mark_point(filled=True, size=22 if n <= 64 else 6).encode(
            x=x, y="entry:Q", color=colour, opacity=faded,
            tooltip=[alt.Tooltip("eigenvector:N"), alt.Tooltip("position:Q", title="position i"),
                     alt.Tooltip("entry:Q", format=".4~g"), alt.Tooltip("sinusoid:Q", title="best sinusoid", format=".4~g"),
                     alt.Tooltip("frequency (cycles):Q", format=".3~g"), alt.Tooltip("energy:Q", format=".3f")])
        panels.append(alt.layer(fit, dots))
    chart = pg.panel_grid(panels, columns=2)
    if len(panels) > 1:
        chart = chart.resolve_scale(color="shared")
    return pg.finish_chart(
        chart,
        description=(f"The top {k} eigenvectors of the double-centred Gram matrix B (dots) and their best-matching "
                     f"sinusoids (lines) against the position, one panel per matrix ({', '.join(alignments)}), "
                     "one colour per eigenvector."),
        canvas=sum(a.eigenvectors.shape[0] for a in alignments.values()) * k > 2000,
    )


def plot_offset_kernels(encodings: Mapping[str, np.ndarray], *, max_offset: int | None = None) -> Any:
    """The Gram kernel of encodings against the offset, normalised to 1 at offset 0.

    One line per encoding, in the encoding's colour; variants of one encoding (several RoPE
    head sizes) share it, and every line has its own dash. Click an encoding in the legend to show it
    alone; hover a point for its value.

    Parameters
    ----------
    encodings : mapping of str to (n, d) arrays
        Position vectors; each Gram matrix ``P @ P.T`` is summarised by :func:`toeplitz_profile`.
    max_offset : int, optional, keyword-only
        Largest offset drawn (default n - 1).

    Returns
    -------
    altair.LayerChart

    Examples
    --------
    >>> P = np.eye(4)
    >>> spec = plot_offset_kernels({"identity": P}).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['line', 'point']
    """
    if not encodings:
        raise ValueError("encodings is empty; pass {name: (n, d) position vectors}")
    names = [str(name) for name in encodings]
    frames = []
    for name, P in zip(names, encodings.values()):
        P = np.asarray(P, dtype=np.float64)
        prof = toeplitz_profile(P @ P.T)
        m = prof.size if max_offset is None else min(prof.size, max_offset + 1)
        frames.append(pd.DataFrame({"offset": np.arange(m), "kernel": prof[:m] / prof[0], "encoding": name}))
    frame = pd.concat(frames, ignore_index=True)
    scale = pg.colour_scale(names)
    # one dash per line: variants sharing a colour stay apart, and a line that coincides with
    # an earlier one (one-head RoPE on the sinusoids) lets it show through its gaps
    dashes = [_DASHES[j % len(_DASHES)] for j in range(len(names))]
    key = _key("kernels", tuple(names), len(frame))
    pick = alt.selection_point(fields=["encoding"], bind="legend", name=f"pick_kernels_{key}")
    colour = alt.Color("encoding:N", scale=scale, sort=names, title="encoding",
                       legend=alt.Legend(symbolType="stroke", columns=2, symbolStrokeWidth=2.5))
    dash = alt.StrokeDash("encoding:N", sort=names, title="encoding", scale=alt.Scale(domain=names, range=dashes))
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.1))
    x = alt.X("offset:Q", title="offset |i − j| (positions)", scale=alt.Scale(domain=[0, int(frame["offset"].max())], nice=False))
    y = alt.Y("kernel:Q", title="kernel <p_i, p_j> / <p_i, p_i>")
    base = alt.Chart(frame).properties(width=pg.COLUMN_WIDTH, height=260)
    line = base.mark_line(strokeWidth=2.2).encode(x=x, y=y, color=colour, strokeDash=dash, opacity=faded).add_params(
        pick, alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_kernels_{key}"))
    points = base.mark_point(filled=True, size=40).encode(
        x=x, y=y, color=colour, opacity=alt.condition(pick, alt.value(0.01), alt.value(0.0)),
        tooltip=[alt.Tooltip("encoding:N"), alt.Tooltip("offset:Q"), alt.Tooltip("kernel:Q", format=".4~g")])
    return pg.finish_chart(
        alt.layer(line, points),
        description=(f"The Gram kernel of each encoding ({', '.join(names)}) against the offset |i - j|, "
                     "normalised to 1 at offset 0; variants of one encoding share its colour and differ by dash."),
    )
