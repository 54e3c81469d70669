"""Shared linear algebra: top eigenpairs of symmetric matrices and BLAS threading for small sizes."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Literal
import numpy as np
from .validation import check_int

__all__ = ['small_blas', 'top_eigenpairs']


# --------------------------------------------------------------------------- BLAS threads
_SMALL_N = 1024


@contextmanager
def small_blas(n: int) -> Iterator[None]:
    """One BLAS thread while working on an n x n problem with n <= 1024 (restored on exit).

    Matrices this small gain nothing from threads, and on a busy machine OpenBLAS threads
    that wait for a core make SMACOF and eigh many times slower (measured: 10x the CPU
    time for the rank-r curve of a 510 x 510 matrix with 2 threads on a loaded 2-core
    machine). Uses threadpoolctl when it is installed; otherwise changes nothing.
    """
    if n > _SMALL_N:
        yield
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# --------------------------------------------------------------------------- eigenpairs
Method = Literal["auto", "full", "subset", "arpack"]
_AUTO_FULL_BELOW_N = 1024  # below this a full eigh costs well under 0.2 s (benchmarks/bench_rank.py)
_AUTO_ARPACK_MAX_SHARE = 1 / 16  # Lanczos pays for few eigenpairs; syevr (subset) for more


def resolve_eig_method(method: str, n: int, k: int) -> str:
    """The eigensolver :func:`top_eigenpairs` uses for ``k`` eigenpairs of an ``n x n`` matrix.

    Parameters
    ----------
    method : {"auto", "full", "subset", "arpack"}
        ``"auto"`` picks by size: a full ``eigh`` below 1024, ARPACK (Lanczos) for few
        eigenpairs (``k <= n / 16``), LAPACK's subset solver otherwise.
    n, k : int

    Returns
    -------
    str
        ``"full"``, ``"subset"`` or ``"arpack"``.

    Examples
    --------
    >>> resolve_eig_method("auto", 4096, 16), resolve_eig_method("auto", 100, 3)
    ('arpack', 'full')
    """
    if method not in ("auto", "full", "subset", "arpack"):
        raise ValueError(f"unknown method {method!r}; use 'auto', 'full', 'subset' or 'arpack'")
    if method != "auto":
        return method
    if n < _AUTO_FULL_BELOW_N:
        return "full"
    return "arpack" if k <= _AUTO_ARPACK_MAX_SHARE * n else "subset"


def _symmetric(B: object) -> np.ndarray:
    A = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise ValueError(f"B must be square, got shape {A.shape}; pass a (n, n) symmetric matrix")
    if not np.all(np.isfinite(A)):
        raise ValueError("B has NaN or infinite entries; pass a finite matrix")
    scale = max(1.0, float(np.abs(A).max(initial=0.0)))
    if not np.allclose(A, A.T, rtol=0.0, atol=1e-8 * scale):
        raise ValueError("B must be symmetric; pass 0.5 * (B + B.T) if it is so up to rounding")
    return 0.5 * (A + A.T)


def top_eigenpairs(B: object, k: int, *, method: Method = "auto") -> tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues of a symmetric matrix and their eigenvectors.

    Parameters
    ----------
    B : array_like, shape (n, n)
        Symmetric (e.g. ``double_centered_gram(D)``).
    k : int
        Number of eigenpairs, ``1 <= k <= n``.
    method : {"auto", "full", "subset", "arpack"}, keyword-only
        ``"full"``: :func:`numpy.linalg.eigh` of the whole matrix. ``"subset"``:
        :func:`scipy.linalg.eigh` with ``subset_by_index`` (LAPACK ``syevr``: tridiagonal
        reduction, then only the wanted eigenpairs). ``"arpack"``:
        :func:`scipy.sparse.linalg.eigsh` (Lanczos to machine precision; needs ``k < n``;
        the start vector is fixed, so results are deterministic). ``"auto"``: ``"full"``
        for ``n < 1024``, else ``"arpack"`` when ``k <= n / 16`` and ``"subset"`` otherwise.
        ``benchmarks/bench_rank.py`` (one BLAS thread, k = 16): at n = 4096 a full
        decomposition takes about 9-10 s of CPU, ``"subset"`` about 5 s and ``"arpack"``
        about 1 s, with eigenvalues equal to 1e-15 relative and identical eigenspaces;
        below n = 1024 every method takes under 0.2 s.

    Returns
    -------
    eigenvalues : numpy.ndarray, shape (k,)
        Descending.
    eigenvectors : numpy.ndarray, shape (n, k)
        Orthonormal columns; each column's sign is fixed so that its entry of largest
        magnitude is positive (methods then agree up to rotations inside tied eigenvalues).

    Raises
    ------
    ValueError
        Non-square, non-symmetric or non-finite ``B``; ``k`` out of range; unknown method;
        ``"arpack"`` with ``k >= n``.
    TypeError
        Non-integer ``k``.

    Examples
    --------
    >>> B = np.diag([3.0, 1.0, 2.0])
    >>> lam, V = top_eigenpairs(B, 2, method="subset")
    >>> lam.tolist(), np.abs(V).round(6).T.tolist()
    ([3.0, 2.0], [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    """
    A = _symmetric(B)
    n = A.shape[0]
    k = check_int(k, "k")
    if k > n:
        raise ValueError(f"k={k} exceeds n={n}; ask for at most n eigenpairs")
    method = resolve_eig_method(method, n, k)
    if method == "full":
        lam, V = np.linalg.eigh(A)
        lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    elif method == "subset":
        from scipy.linalg import eigh

        lam, V = eigh(A, subset_by_index=[n - k, n - 1], driver="evr")
        lam, V = lam[::-1], V[:, ::-1]
    else:
        if k >= n:
            raise ValueError(f"method='arpack' needs k < n, got k={k}, n={n}; use method='full'")
        from scipy.sparse.linalg import eigsh

        # a fixed pseudo-random start (not the constant vector: it is in the null space of
        # every double-centred Gram matrix)
        v0 = np.random.default_rng(0).standard_normal(n)
        lam, V = eigsh(A, k=k, which="LA", v0=v0, tol=0.0)
        order = np.argsort(lam)[::-1]
        lam, V = lam[order], V[:, order]
    V = np.array(V, dtype=np.float64, copy=True)
    pivot = np.argmax(np.abs(V), axis=0)
    V *= np.where(V[pivot, np.arange(k)] < 0, -1.0, 1.0)
    return np.asarray(lam, dtype=np.float64).copy(), V
