"""A controlled synthetic corpus whose true positional marginals are known.

Tokens sit on a circle (``geometry="ring"``) or a line (``geometry="line"``); the token at
position ``i`` is drawn from a bump centred at a point that moves with ``i``. With
``nonstationarity=0`` the geometry of the marginals is exactly translation-invariant on the
ring (a circulant Hellinger matrix) and monotone in ``|i - j|`` on the line; the
``nonstationarity`` knob mixes in a component that depends on absolute position.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np
from numpy.typing import ArrayLike, NDArray
from ._sequences import Corpus, Sequences
from typing import Any
from .validation import check_int, check_fits_in_memory
from ._cache import array_digest

__all__ = [
    'MarginalSampler',
    'synthetic_marginals',
    'sample_synthetic_sequences',
    'synthetic_corpus',
]


def _check_marginals(marginals: ArrayLike) -> NDArray[np.float64]:
    mu = np.asarray(marginals, dtype=np.float64)
    if mu.ndim != 2 or mu.shape[0] < 2 or mu.shape[1] < 2:
        raise ValueError(
            f"marginals must have shape (n_positions, vocab_size) with both >= 2, got {mu.shape}; "
            "pass e.g. posgeo.synthetic_marginals(n, V)"
        )
    if not np.all(np.isfinite(mu)) or np.any(mu < 0) or not np.allclose(mu.sum(axis=1), 1.0, atol=1e-8):
        raise ValueError("marginals must be finite and non-negative with rows summing to 1; normalise each row")
    return mu


@dataclass(frozen=True, eq=False)
class MarginalSampler:
    """Sequences whose token at position ``i`` is drawn independently from ``marginals[i]``.

    A callable ``sampler(batch_size, seed) -> int array (batch_size, n)`` as
    :class:`~posgeo.MLMTask` expects, wrapping :func:`~posgeo.sample_synthetic_sequences`.

    Parameters
    ----------
    marginals : array-like, shape (n, V)
        Per-position token distributions (rows summing to 1).

    Raises
    ------
    ValueError
        For marginals of the wrong shape or that are not distributions.

    Examples
    --------
    >>> s = MarginalSampler([[1.0, 0.0], [0.0, 1.0]])
    >>> s(3, 0).tolist(), s.name
    ([[0, 1], [0, 1], [0, 1]], 'marginals-2x2-...')
    """

    marginals: NDArray[np.float64]

    def __post_init__(self) -> None:
        mu = _check_marginals(self.marginals).copy()
        mu.setflags(write=False)
        object.__setattr__(self, "marginals", mu)

    @property
    def name(self) -> str:
        """``"marginals-<n>x<V>-<hash>"``: identifies the distribution in cache keys."""
        n, V = self.marginals.shape
        return f"marginals-{n}x{V}-{array_digest(self.marginals)}"

    @property
    def identical(self) -> bool:
        """Whether every position has the same distribution (the sequences are exchangeable)."""
        return bool(np.allclose(self.marginals, self.marginals[0], rtol=0.0, atol=1e-12))

    def __call__(self, batch_size: int, seed: int) -> NDArray[np.int64]:
        pass

        seqs = sample_synthetic_sequences(self.marginals, batch_size, seed=seed)
        return seqs.tokens.reshape(batch_size, -1).astype(np.int64)

_GEOMETRIES = ("ring", "line")
_LOG_FLOOR = -600.0  # log-probability floor relative to a row's mode: keeps every entry > 0


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    logits = logits - logits.max(axis=1, keepdims=True)
    np.maximum(logits, _LOG_FLOOR, out=logits)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def _bump_logits(coords: np.ndarray, centres: np.ndarray, kappa: np.ndarray, geometry: str) -> np.ndarray:
    """Unnormalised log-probabilities, shape (n, V), of bumps at ``centres`` (fractions of the space).

    Ring: von Mises ``kappa * cos(2 pi (x - c))``. Line: Gaussian with standard deviation
    ``1 / (2 pi sqrt(kappa))``, the small-angle limit of the same von Mises bump.
    """
    delta = coords[None, :] - centres[:, None]
    if geometry == "ring":
        return kappa[:, None] * np.cos(2.0 * np.pi * delta)
    return -0.5 * kappa[:, None] * (2.0 * np.pi * delta) ** 2


def synthetic_marginals(
    n_positions: int = 32,
    vocab_size: int = 64,
    *,
    nonstationarity: float = 0.0,
    geometry: str = "ring",
    concentration: float = 4.0,
    seed: int = 0,
) -> np.ndarray:
    r"""True per-position token distributions of the synthetic corpus.

    Stationary part. ``geometry="ring"``: token ``v`` sits at angle :math:`2\pi v/V` on a
    circle and position ``i``'s distribution is a von Mises bump
    :math:`\propto \exp(\kappa\cos(2\pi v/V - 2\pi i/n))`. Shifting ``i`` by one rotates the
    bump by :math:`V/n` tokens, so when ``vocab_size`` is a multiple of ``n_positions`` the
    Hellinger matrix of the marginals is exactly circulant (depends only on
    :math:`(i-j) \bmod n`); otherwise only approximately. ``geometry="line"``: token ``v`` sits
    at :math:`x_v = v/(V-1)` and the bump is a Gaussian
    :math:`\propto \exp(-\kappa (2\pi (x_v - c_i))^2/2)` whose centre :math:`c_i = i/(n-1)`
    moves from one end of the line to the other without wrapping, so distances grow with
    :math:`|i-j|`.

    Non-stationary part (weight :math:`w = \gamma/(1+\gamma)` for ``nonstationarity`` =
    :math:`\gamma`, so :math:`\mu_i = (1-w)\,\mathrm{stationary}_i + w\,\mathrm{nonstationary}_i`):
    on a seeded random permutation of the vocabulary, a bump of the same geometry whose centre
    accelerates, :math:`c_i = (i/(n-1))^2`, and whose concentration grows,
    :math:`\kappa_i = \kappa (1 + 3 i/(n-1))`; at the first and last positions half of its
    mass goes instead to a few seeded "boundary" tokens (3 start tokens, 3 end tokens), a
    sentence start/end flavour.

    Parameters
    ----------
    n_positions : int, default 32
        Number of positions ``n``.
    vocab_size : int, default 64
        Number of tokens ``V`` (>= 2; >= 6 when ``nonstationarity > 0``).
    nonstationarity : float, default 0.0
        :math:`\gamma \ge 0`; 0 gives the purely stationary corpus, :math:`\gamma\to\infty`
        the purely non-stationary one.
    geometry : {"ring", "line"}, default "ring"
        Where the tokens live.
    concentration : float, default 4.0
        Bump concentration :math:`\kappa > 0` (larger: peakier distributions).
    seed : int, default 0
        Seed of the non-stationary component only (its vocabulary permutation and boundary
        tokens); the stationary part is deterministic.

    Returns
    -------
    numpy.ndarray, shape (n_positions, vocab_size)
        Row ``i`` is the distribution of the token at position ``i``; rows sum to 1 and every
        entry is > 0.

    Raises
    ------
    ValueError
        Bad sizes, an unknown geometry, a negative ``nonstationarity`` or a non-positive
        ``concentration``.

    Examples
    --------
    >>> mu = synthetic_marginals(8, 16)
    >>> mu.shape, bool(np.allclose(mu.sum(axis=1), 1)), bool((mu > 0).all())
    ((8, 16), True, True)
    >>> int(mu[0].argmax()), int(mu[2].argmax())  # the bump moves 16/8 = 2 tokens per position
    (0, 4)
    """
    n = check_int(n_positions, "n_positions")
    V = check_int(vocab_size, "vocab_size", minimum=2)
    check_fits_in_memory((n, V), "the marginals table")
    if geometry not in _GEOMETRIES:
        raise ValueError(f"unknown geometry {geometry!r}; valid geometries are {list(_GEOMETRIES)}")
    gamma = float(nonstationarity)
    if not np.isfinite(gamma) or gamma < 0:
        raise ValueError(f"nonstationarity must be a finite float >= 0, got {nonstationarity!r}")
    kappa = float(concentration)
    if not np.isfinite(kappa) or kappa <= 0:
        raise ValueError(f"concentration must be a finite float > 0, got {concentration!r}")

    i = np.arange(n, dtype=np.float64)
    t = i / (n - 1) if n > 1 else np.zeros(1)
    if geometry == "ring":
        coords = np.arange(V, dtype=np.float64) / V
        centres = i / n
    else:
        coords = np.arange(V, dtype=np.float64) / (V - 1)
        centres = t
    stationary = _softmax_rows(_bump_logits(coords, centres, np.full(n, kappa), geometry))
    if gamma == 0.0:
        return stationary
    if V < 6:
        raise ValueError(f"vocab_size must be >= 6 when nonstationarity > 0 (boundary tokens), got {V}")

    rng = np.random.default_rng(seed)
    perm = rng.permutation(V)
    permuted_coords = coords[perm]  # token v sits where token perm[v] sat
    ns = _softmax_rows(_bump_logits(permuted_coords, t**2, kappa * (1.0 + 3.0 * t), geometry))
    boundary = rng.choice(V, size=6, replace=False)
    start = np.zeros(V)
    start[boundary[:3]] = 1.0 / 3.0
    end = np.zeros(V)
    end[boundary[3:]] = 1.0 / 3.0
    ns[0] = 0.5 * ns[0] + 0.5 * start
    ns[-1] = 0.5 * ns[-1] + 0.5 * end
    w = gamma / (1.0 + gamma)
    mu = (1.0 - w) * stationary + w * ns
    return mu / mu.sum(axis=1, keepdims=True)


def sample_synthetic_sequences(
    marginals: np.ndarray,
    n_sequences: int,
    *,
    seed: int = 0,
    lengths: str | np.ndarray | None = None,
) -> Sequences:
    """Sample sequences whose token at position ``i`` is drawn independently from ``marginals[i]``.

    Parameters
    ----------
    marginals : numpy.ndarray, shape (n, V)
        Per-position distributions (non-negative rows summing to 1).
    n_sequences : int
        Number of sequences ``m``.
    seed : int, default 0
        Seed of ``np.random.default_rng``.
    lengths : "full", None or array of int, shape (m,)
        ``"full"``/``None``: every sequence has length ``n``. An array gives each sequence's
        length (in ``[0, n]``); sequence ``k`` is then the first ``lengths[k]`` tokens of a
        full-length draw, so the marginal at every position it reaches is unchanged.

    Returns
    -------
    Sequences
        ``m`` sequences with ``vocab_size = V``.

    Raises
    ------
    ValueError
        Bad ``marginals`` (shape, negative entries, rows not summing to 1), ``n_sequences``
        or ``lengths``.

    Examples
    --------
    >>> mu = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    >>> s = sample_synthetic_sequences(mu, 4, seed=1)
    >>> s.lengths.tolist(), s.tokens[0::2].tolist()
    ([2, 2, 2, 2], [0, 0, 0, 0])
    >>> sample_synthetic_sequences(mu, 3, lengths=np.array([0, 1, 2])).lengths.tolist()
    [0, 1, 2]
    """
    mu = np.asarray(marginals, dtype=np.float64)
    if mu.ndim != 2 or mu.shape[0] < 1 or mu.shape[1] < 1:
        raise ValueError(f"marginals must have shape (n_positions, vocab_size), got {mu.shape}; pass a 2-d array")
    if not np.all(np.isfinite(mu)) or np.any(mu < 0) or not np.allclose(mu.sum(axis=1), 1.0, atol=1e-8):
        raise ValueError("marginals must be finite, non-negative, with rows summing to 1; normalise each row")
    m = check_int(n_sequences, "n_sequences")
    n, V = mu.shape
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(mu, axis=1)
    cdf /= cdf[:, -1:]
    u = rng.random((m, n))
    tokens = np.empty((m, n), dtype=np.int32)
    for i in range(n):
        tokens[:, i] = np.searchsorted(cdf[i], u[:, i], side="right")
    np.minimum(tokens, V - 1, out=tokens)
    if lengths is None or (isinstance(lengths, str) and lengths == "full"):
        offsets = np.arange(0, m * n + 1, n, dtype=np.int64)
        return Sequences(tokens=tokens.reshape(-1), offsets=offsets, vocab_size=V)
    if isinstance(lengths, str):
        raise ValueError(f"lengths must be 'full', None or an int array, got {lengths!r}")
    lens = np.asarray(lengths)
    if lens.shape != (m,) or lens.dtype.kind not in "iu" or np.any(lens < 0) or np.any(lens > n):
        raise ValueError(
            f"lengths must be an int array of shape ({m},) with values in [0, {n}], got dtype {lens.dtype}, "
            f"shape {lens.shape}"
        )
    keep = np.arange(n)[None, :] < lens[:, None]
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return Sequences(tokens=tokens[keep], offsets=offsets, vocab_size=V)


_SPLIT_STREAM = {"train": 0, "test": 1}


def synthetic_corpus(
    split: str = "train",
    *,
    n_positions: int = 32,
    vocab_size: int = 64,
    n_sequences: int = 20000,
    nonstationarity: float = 0.5,
    geometry: str = "ring",
    concentration: float = 4.0,
    lengths: str | np.ndarray | None = None,
    seed: int = 0,
) -> Corpus:
    r"""The synthetic corpus as a :class:`Corpus` (what ``load_corpus("synthetic")`` returns).

    Defaults: 32 positions (as in P1's controlled corpus), 64 tokens (two per position on the
    ring), 20,000 sequences (plug-in marginals then have a small noise floor) and
    ``nonstationarity=0.5`` (weight :math:`w = 1/3` on the non-stationary component: clearly
    visible, yet the ring still dominates).

    Parameters
    ----------
    split : {"train", "test"}, default "train"
        The two splits share the true marginals but are sampled with different seeds
        (drawn from ``np.random.SeedSequence([seed, 0])`` for train, ``[seed, 1]`` for test).
    n_positions, vocab_size, nonstationarity, geometry, concentration
        See :func:`synthetic_marginals`.
    n_sequences : int, default 20000
        Number of sequences.
    lengths : "full", None or array of int, shape (n_sequences,)
        See :func:`sample_synthetic_sequences`.
    seed : int, default 0
        Seeds the non-stationary component and the sampling.

    Returns
    -------
    Corpus
        With ``true_marginals`` of shape (n_positions, vocab_size) and ``labels=None``.

    Raises
    ------
    ValueError
        Unknown split or bad options.

    Examples
    --------
    >>> a, b = synthetic_corpus("train", n_sequences=50), synthetic_corpus("test", n_sequences=50)
    >>> bool(np.array_equal(a.true_marginals, b.true_marginals)), bool(np.array_equal(a.sequences.tokens, b.sequences.tokens))
    (True, False)
    """
    if split not in _SPLIT_STREAM:
        raise ValueError(f"unknown split {split!r} for 'synthetic'; valid splits are {list(_SPLIT_STREAM)}")
    mu = synthetic_marginals(
        n_positions,
        vocab_size,
        nonstationarity=nonstationarity,
        geometry=geometry,
        concentration=concentration,
        seed=seed,
    )
    sample_seed = int(np.random.SeedSequence([int(seed), _SPLIT_STREAM[split]]).generate_state(1)[0])
    seqs = sample_synthetic_sequences(mu, n_sequences, seed=sample_seed, lengths=lengths)
    options: dict[str, Any] = {
        "n_positions": n_positions,
        "vocab_size": vocab_size,
        "n_sequences": n_sequences,
        "nonstationarity": nonstationarity,
        "geometry": geometry,
        "concentration": concentration,
        "lengths": "full" if lengths is None or isinstance(lengths, str) else "custom",
        "seed": seed,
    }
    desc = (
        f"synthetic {geometry} corpus, {split} split: {n_sequences} sequences, {n_positions} positions, "
        f"{vocab_size} tokens, nonstationarity={nonstationarity:g}, concentration={concentration:g}"
    )
    return Corpus(
        name="synthetic",
        split=split,
        sequences=seqs,
        labels=None,
        vocab_size=int(vocab_size),
        description=desc,
        true_marginals=mu,
        options=options,
    )
