r"""Standard positional encodings as position vectors, so that stress can compare them.

Absolute encodings (sinusoidal, learned, random) already are position vectors. RoPE and ALiBi
act inside attention, so turning them into vectors is a modelling choice; the choices here
(documented on each function and argued in the MDS chapter) are:

- **RoPE**: the vector :math:`r_m = R_m u` obtained by rotating a fixed reference vector
  :math:`u` (a unit vector in every rotation plane) by RoPE's rotation at position m. Then
  :math:`\langle r_m, r_n\rangle = \sum_k \cos((m-n)\theta_k)` is exactly RoPE's relative
  kernel :math:`u^\top R_{n-m} u`, and :math:`\lVert r_m - r_n\rVert` depends on :math:`m-n` only.
- **ALiBi**: head h adds :math:`-m_h |i-j|` to the attention logit. The induced "distance" of
  head h is :math:`m_h |i-j|`, realised exactly by the 1-D points :math:`m_h i`; stacking the
  heads gives :math:`p_i = i\,(m_1, \dots, m_H)` with :math:`\lVert p_i - p_j\rVert = \lVert m\rVert |i-j|`.
"""

from __future__ import annotations

import math
import numpy as np
from .validation import check_float, check_int, check_fits_in_memory

__all__ = [
    'sinusoidal_encoding',
    'rope_encoding',
    'alibi_encoding',
    'random_encoding',
]

_MAX_HEADS = 2**16
"""Largest head count :func:`alibi_slopes` accepts (real models use at most a few hundred)."""


def _check_base(base: object) -> float:
    """The frequency base, a finite real number > 1 (else every frequency is 1, 0 or NaN)."""
    return check_float(base, "base", minimum=1.0, strict_minimum=True,
                       hint="the frequencies are base**(-2k/d); the usual value is 10000 (Vaswani et al.)")


def sinusoidal_encoding(n: int, d: int, *, base: float = 10000.0) -> np.ndarray:
    r"""The sinusoidal encoding of Vaswani et al. (2017).

    :math:`P_{m,2k} = \sin(m\,\omega_k)`, :math:`P_{m,2k+1} = \cos(m\,\omega_k)`,
    :math:`\omega_k = \mathrm{base}^{-2k/d}`, column by column as in the paper. For even d its
    Gram matrix :math:`\langle p_m, p_n\rangle = \sum_k \cos((m-n)\omega_k)` is exactly
    Toeplitz. For odd d the same formula makes the last column (index d-1 = 2k) a lone sine
    of frequency :math:`\mathrm{base}^{-(d-1)/d}`, so the Gram matrix is Toeplitz only up to
    that column's term :math:`\sin(m\omega)\sin(n\omega)`.

    Parameters
    ----------
    n : int
        Number of positions (0 .. n-1).
    d : int
        Model dimension (even for sin/cos pairs only; odd d follows the paper's formula).
    base : float, keyword-only
        Finite, > 1.

    Returns
    -------
    numpy.ndarray, shape (n, d)

    Raises
    ------
    TypeError
        ``n`` or ``d`` is not an int, or ``base`` not a real number.
    ValueError
        ``n`` or ``d`` is below 1, or ``base`` is not finite or not > 1.

    Examples
    --------
    >>> P = sinusoidal_encoding(4, 2)
    >>> P[:, 0].round(4).tolist(), P[:, 1].round(4).tolist()
    ([0.0, 0.8415, 0.9093, 0.1411], [1.0, 0.5403, -0.4161, -0.99])
    >>> sinusoidal_encoding(3, 3, base=100.0).round(4).tolist()  # odd d: the last column is a sine
    [[0.0, 1.0, 0.0], [0.8415, 0.5403, 0.0464], [0.9093, -0.4161, 0.0927]]
    """
    n = check_int(n, "n")
    d = check_int(d, "d")
    check_fits_in_memory((n, d), "the encoding")
    base = _check_base(base)
    omega = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # ceil(d/2) frequencies
    angles = np.arange(n, dtype=np.float64)[:, None] * omega[None, :]
    P = np.empty((n, d))
    P[:, 0::2] = np.sin(angles)
    P[:, 1::2] = np.cos(angles[:, : d // 2])
    return P


def rope_frequencies(d: int, *, head_dim: int | None = None, base: float = 10000.0) -> np.ndarray:
    r"""RoPE rotation frequencies for every 2-D plane of a d-dimensional model.

    RoPE is applied per attention head: each head of size ``head_dim`` uses the frequencies
    :math:`\theta_k = \mathrm{base}^{-2k/\mathrm{head\_dim}}`, ``k < head_dim/2``, and the
    heads repeat them. With ``head_dim=None`` (one head spanning d) the frequencies are
    those of :func:`sinusoidal_encoding` with the same ``d``.

    Parameters
    ----------
    d : int
        Model dimension (even).
    head_dim : int, optional
        Per-head dimension (even, divides d). Default d.
    base : float
        Finite, > 1.

    Returns
    -------
    numpy.ndarray, shape (d // 2,)

    Raises
    ------
    TypeError
        ``d`` or ``head_dim`` is not an int, or ``base`` not a real number.
    ValueError
        A size is odd, below 1 or does not divide ``d``, or ``base`` is not finite or not > 1.

    Examples
    --------
    >>> rope_frequencies(8, head_dim=4).round(3).tolist()
    [1.0, 0.01, 1.0, 0.01]
    """
    d = check_int(d, "d")
    hd = d if head_dim is None else check_int(head_dim, "head_dim")
    base = _check_base(base)
    if d % 2 or hd % 2:
        raise ValueError(f"d and head_dim must be even (rotation planes), got d={d}, head_dim={hd}")
    if d % hd:
        raise ValueError(f"head_dim={hd} must divide d={d}; pass d = n_heads * head_dim")
    theta = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    return np.tile(theta, d // hd)


def rope_encoding(n: int, d: int, *, head_dim: int | None = None, base: float = 10000.0) -> np.ndarray:
    r"""RoPE as position vectors: the rotation at position m applied to a reference vector.

    Row m is :math:`R_m u` with :math:`u = (1, 0, 1, 0, \dots)` (one unit vector per rotation
    plane), i.e. :math:`(\cos m\theta_k, \sin m\theta_k)_k`. Inner products are RoPE's relative
    kernel :math:`\sum_k \cos((m-n)\theta_k)`. With ``head_dim=None`` the Gram matrix equals
    that of :func:`sinusoidal_encoding` exactly; with a real model's head size (e.g. 64 for
    BERT-base, 32 for MiniLM) the frequencies repeat per head and the geometry differs.

    Parameters
    ----------
    n : int
        Number of positions.
    d : int
        Model dimension (even).
    head_dim : int, optional
        Per-head dimension; see :func:`rope_frequencies`.
    base : float
        Finite, > 1.

    Returns
    -------
    numpy.ndarray, shape (n, d)

    Examples
    --------
    >>> G1 = rope_encoding(5, 8) @ rope_encoding(5, 8).T
    >>> G2 = sinusoidal_encoding(5, 8) @ sinusoidal_encoding(5, 8).T
    >>> bool(np.allclose(G1, G2))
    True
    """
    n = check_int(n, "n")
    theta = rope_frequencies(d, head_dim=head_dim, base=base)
    check_fits_in_memory((n, 2 * theta.size), "the encoding")
    angles = np.arange(n, dtype=np.float64)[:, None] * theta[None, :]
    P = np.empty((n, 2 * theta.size))
    P[:, 0::2] = np.cos(angles)
    P[:, 1::2] = np.sin(angles)
    return P


def alibi_slopes(num_heads: int) -> np.ndarray:
    r"""ALiBi head slopes (Press et al., 2022), including head counts that are not powers of two.

    For :math:`H = 2^a` heads the slopes are the geometric sequence :math:`2^{-8h/H}`,
    h = 1..H. Otherwise (as in the reference implementation) take the :math:`2^a` slopes for
    the largest power of two :math:`2^a < H`, then the odd-indexed slopes of the sequence for
    :math:`2^{a+1}` heads until H slopes are reached.

    Parameters
    ----------
    num_heads : int
        1 <= num_heads <= 65536 (2**16).

    Returns
    -------
    numpy.ndarray, shape (num_heads,)
        Positive, in (0, 1).

    Raises
    ------
    TypeError
        ``num_heads`` is not an int.
    ValueError
        ``num_heads`` is below 1 or above 65536.

    Examples
    --------
    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(6).round(4).tolist()
    [0.25, 0.0625, 0.0156, 0.0039, 0.5, 0.125]
    """
    h = check_int(num_heads, "num_heads", maximum=_MAX_HEADS,
                  hint="one slope per attention head; real models use at most a few hundred heads")

    def power_of_two(k: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(k) - 3)))
        return [start ** (i + 1) for i in range(k)]

    if math.log2(h).is_integer():
        return np.array(power_of_two(h))
    closest = 2 ** int(math.floor(math.log2(h)))
    extra = power_of_two(2 * closest)[0::2][: h - closest]
    return np.array(power_of_two(closest) + extra)


def alibi_encoding(n: int, num_heads: int) -> np.ndarray:
    r"""ALiBi as position vectors: :math:`p_i = i\,(m_1, \dots, m_H)`.

    Head h's linear bias :math:`-m_h|i-j|` is the (negated) distance of the 1-D embedding
    :math:`i \mapsto m_h i`; stacking heads gives distances :math:`\lVert m\rVert\,|i-j|`.
    The configuration lies on a line (rank 1) whatever the slopes, so its *scale-optimal*
    stress is that of equally spaced points on a line; the slopes set only the raw scale.

    Parameters
    ----------
    n : int
        Number of positions.
    num_heads : int

    Returns
    -------
    numpy.ndarray, shape (n, num_heads)

    Examples
    --------
    >>> alibi_encoding(3, 2).tolist()
    [[0.0, 0.0], [0.0625, 0.00390625], [0.125, 0.0078125]]
    """
    n = check_int(n, "n")
    slopes = alibi_slopes(num_heads)
    check_fits_in_memory((n, len(slopes)), "the encoding")
    return np.arange(n, dtype=np.float64)[:, None] * np.asarray(slopes)[None, :]


def random_encoding(n: int, d: int, *, seed: int, std: float = math.sqrt(0.5)) -> np.ndarray:
    r"""Gaussian random position vectors, i.i.d. :math:`N(0, \mathrm{std}^2)` entries.

    The default std :math:`\sqrt{1/2}` gives the same mean squared norm as the sinusoidal
    encoding (:math:`d/2`), so raw stresses of the two are on the same scale.

    Parameters
    ----------
    n, d : int
    seed : int, keyword-only
    std : float, keyword-only

    Returns
    -------
    numpy.ndarray, shape (n, d)

    Examples
    --------
    >>> random_encoding(2, 3, seed=0).shape
    (2, 3)
    """
    n = check_int(n, "n")
    d = check_int(d, "d")
    check_fits_in_memory((n, d), "the encoding")
    if not std > 0:
        raise ValueError(f"std must be > 0, got {std}")
    return np.random.default_rng(seed).normal(scale=std, size=(n, d))
