r"""Permutation equivariance of transformers without positional signal (P1, Theorem 1).

A map ``f`` from sequences of vectors ``X`` (shape ``(n, d)``) to sequences of vectors
``f(X)`` (shape ``(n, d')``) is *permutation-equivariant* when reordering the input reorders
the output in the same way and changes nothing else,

.. math::

    f(\pi X) = \pi f(X) \quad\text{for every permutation matrix } \pi .

A transformer encoder without positional signal and without a causal mask is such a map:
token-wise layers (embeddings, LayerNorm, the feed-forward block) commute with any
reordering of the rows, and attention :math:`\operatorname{softmax}(QK^\top/\sqrt{d_h})V`
with :math:`Q, K, V = XW_q, XW_k, XW_v` becomes, on the input :math:`\pi X`,
:math:`\pi\,\operatorname{softmax}(QK^\top/\sqrt{d_h})\,\pi^\top \pi V = \pi\,\operatorname{softmax}(QK^\top/\sqrt{d_h}) V`
(the row-wise softmax commutes with permuting rows and columns alike). Mean pooling then
makes the sequence-level output permutation-*invariant*: a classifier on top cannot tell a
sequence from any reordering of it.

This module measures the property numerically (:func:`equivariance_errors`, with adapters for
posgeo and Hugging Face models in :func:`sequence_map`), gives the binomial margin for "at
chance" (:func:`chance_interval`), trains the small encoder with every positional signal on
two order-sensitive tasks (:func:`train_order_tasks`, :func:`order_task_table`), and draws the
errors (:func:`plot_equivariance_errors`). Experiment sizes follow the book's profile
(:func:`equivariance_settings`).
"""

from __future__ import annotations

import dataclasses  # noqa: F401  (used by the doctests)
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence
import numpy as np
import pandas as pd
import torch
import altair as alt
from numpy.typing import ArrayLike, NDArray
import posgeo as pg
from posgeo import torch_threads as _torch_threads
from posgeo import POSITION_KINDS, Transformer, TransformerConfig  # noqa: F401 (Transformer: the doctests)
from posgeo import current_profile
from posgeo import progress_bar
from posgeo import FirstMarkerTask, SortedTask, TrainConfig, TrainResult, evaluate, train

__all__ = [
    'EquivarianceResult',
    'equivariance_errors',
    'sequence_map',
    'ChanceInterval',
    'chance_interval',
    'EquivarianceSettings',
    'equivariance_settings',
    'train_order_tasks',
    'order_task_table',
    'equivariance_table',
    'plot_equivariance_errors',
]


SequenceMap = Callable[[Any], Any]
"""``model_fn(X)``: inputs ``(B, n, d)`` to per-token outputs ``(B, n, d')`` (numpy or torch)."""


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True, eq=False)
class EquivarianceResult:
    """Equivariance errors of one map over a set of permutations.

    Attributes
    ----------
    errors : numpy.ndarray, shape (k,)
        ``max |f(X[:, pi]) - f(X)[:, pi]|`` for each of the ``k`` permutations (maximum over
        batch, tokens and output features).
    permutations : numpy.ndarray, shape (k, n), int
        The permutations, as index arrays: ``X[:, pi]`` puts token ``pi[t]`` at slot ``t``.
    scale : float
        ``max |f(X)|``, the size of the outputs the errors are compared with. Rounding
        errors grow with it: a float32 model with outputs of size 5 has a rounding unit of
        about ``5 * 1.2e-7``, so compare ``relative_errors`` across models.
    """

    errors: NDArray[np.float64]
    permutations: NDArray[np.int64]
    scale: float

    @property
    def max_error(self) -> float:
        """The largest error over all permutations."""
        return float(self.errors.max())

    @property
    def median_error(self) -> float:
        """The median error over all permutations."""
        return float(np.median(self.errors))

    @property
    def relative_errors(self) -> NDArray[np.float64]:
        """``errors / scale``: errors in units of the largest output (compare with the dtype's eps)."""
        return self.errors / self.scale if self.scale > 0 else self.errors.copy()

    @property
    def max_relative_error(self) -> float:
        """The largest relative error over all permutations."""
        return float(self.relative_errors.max())

    @property
    def n_permutations(self) -> int:
        """Number of permutations tried."""
        return int(self.errors.shape[0])


def _to_numpy(value: Any, what: str) -> NDArray[np.float64]:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).numpy()
    if hasattr(value, "last_hidden_state"):
        raise TypeError(
            f"{what} returned a model output object; return its per-token tensor, e.g. "
            "out.last_hidden_state, or wrap the model with sequence_map(model)"
        )
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must return an array or tensor of shape (B, n, d'), got {type(value).__name__}") from exc


def _check_permutations(perms: ArrayLike, n: int) -> NDArray[np.int64]:
    arr = np.asarray(perms)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != n or arr.shape[0] < 1:
        raise ValueError(
            f"permutations must have shape (k, n) = (k, {n}) with k >= 1, got shape {np.asarray(perms).shape}; "
            f"pass index arrays such as np.arange({n})[::-1]"
        )
    if arr.dtype.kind not in "iu":
        raise TypeError(f"permutations must be integer index arrays, got dtype {arr.dtype}")
    target = np.arange(n)
    for row in arr:
        if not np.array_equal(np.sort(row), target):
            raise ValueError(
                f"{row.tolist()} is not a permutation of 0..{n - 1}; every row must hold each index exactly once"
            )
    return arr.astype(np.int64)


def _index(X: Any, perm: NDArray[np.int64]) -> Any:
    if isinstance(X, torch.Tensor):
        return X[:, torch.as_tensor(perm, device=X.device)]
    return X[:, perm]


def equivariance_errors(
    model_fn: SequenceMap,
    X: Any,
    *,
    n_permutations: int | None = None,
    seed: int = 0,
    permutations: ArrayLike | None = None,
    chunk_size: int = 32,
    progress: bool = True,
) -> EquivarianceResult:
    r"""Measure how far a sequence map is from permutation equivariance.

    For each permutation :math:`\pi` of the ``n`` token slots, compares the output on the
    permuted input with the permuted output,
    :math:`e_\pi = \max |f(X_{:, \pi}) - f(X)_{:, \pi}|` (maximum over batch, tokens and
    features). An exactly equivariant map gives :math:`e_\pi = 0` up to rounding; any
    positional signal or causal mask makes it positive.

    Parameters
    ----------
    model_fn : callable
        ``model_fn(X) -> (B, n, d')``: per-token outputs (numpy array or torch tensor), e.g.
        :func:`sequence_map` of a model. It must be deterministic.
    X : numpy.ndarray or torch.Tensor, shape (B, n, d)
        The inputs (a batch of ``B`` sequences of ``n`` vectors), passed to ``model_fn`` as
        given and permuted along axis 1.
    n_permutations : int, keyword-only, optional
        How many uniformly random permutations to draw (default 200). Not allowed together
        with ``permutations``.
    seed : int, keyword-only, default 0
        Seed of the random permutations (``numpy.random.default_rng``).
    permutations : array-like, shape (k, n) or (n,), keyword-only, optional
        Explicit permutations (index arrays) instead of random ones, e.g. the reversal
        ``np.arange(n)[::-1]``.
    chunk_size : int, keyword-only, default 32
        Permuted copies of ``X`` evaluated per call of ``model_fn`` (stacked along the batch
        axis, so ``model_fn`` must treat batch rows independently, as every transformer
        does). Fewer, larger calls are much faster for small models.
    progress : bool, keyword-only, default True
        Show a progress bar over chunks of permutations.

    Returns
    -------
    EquivarianceResult
        Per-permutation errors, the permutations, and ``max |f(X)|``.

    Raises
    ------
    ValueError
        ``X`` not of shape ``(B, n, d)`` with ``n >= 2``; ``n_permutations < 1``; both
        ``n_permutations`` and ``permutations`` given; rows of ``permutations`` that are not
        permutations of ``0..n-1``; ``chunk_size < 1``; ``model_fn`` outputs that are not
        ``(B, n, d')``.
    TypeError
        ``model_fn`` not callable; non-integer ``n_permutations``, ``chunk_size`` or
        ``permutations``.

    Examples
    --------
    A position-wise map is equivariant; a cumulative sum is not:

    >>> X = np.random.default_rng(0).standard_normal((2, 5, 3))
    >>> equivariance_errors(np.tanh, X, n_permutations=20, progress=False).max_error
    0.0
    >>> res = equivariance_errors(lambda x: np.cumsum(x, axis=1), X, n_permutations=20, progress=False)
    >>> res.max_error > 0.1, res.errors.shape
    (True, (20,))
    """
    if not callable(model_fn):
        raise TypeError(f"model_fn must be callable (B, n, d) -> (B, n, d'), got {type(model_fn).__name__}")
    shape = tuple(X.shape) if hasattr(X, "shape") else np.shape(X)
    if len(shape) != 3:
        raise ValueError(
            f"X must have shape (B, n, d) (a batch of sequences of vectors), got shape {shape}; "
            "add a batch axis with X[None] for a single sequence"
        )
    if not isinstance(X, (np.ndarray, torch.Tensor)):
        X = np.asarray(X, dtype=np.float64)
    B, n = shape[0], shape[1]
    if n < 2:
        raise ValueError(f"X has n={n} token slot(s); permutation equivariance needs n >= 2")
    if permutations is not None:
        if n_permutations is not None:
            raise ValueError("pass either n_permutations (random permutations) or permutations (explicit ones), not both")
        perms = _check_permutations(permutations, n)
    else:
        k = 200 if n_permutations is None else n_permutations
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"n_permutations must be an int, got {type(k).__name__} {k!r}")
        if k < 1:
            raise ValueError(f"n_permutations must be >= 1, got {k}; pass e.g. n_permutations=200")
        rng = np.random.default_rng(seed)
        perms = np.stack([rng.permutation(n) for _ in range(int(k))]).astype(np.int64)

    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__} {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}; pass e.g. chunk_size=32")

    reference = _to_numpy(model_fn(X), "model_fn")
    if reference.ndim != 3 or reference.shape[:2] != (B, n):
        raise ValueError(
            f"model_fn must return per-token outputs of shape (B, n, d') = ({B}, {n}, d'), got "
            f"{reference.shape}; pooled (B, d') outputs are invariant, not equivariant: compare them directly"
        )
    errors = np.empty(len(perms))
    starts = range(0, len(perms), int(chunk_size))
    for start in progress_bar(starts, enabled=progress, desc="permutations"):
        chunk = perms[start : start + int(chunk_size)]
        stacked = [_index(X, perm) for perm in chunk]
        inputs = torch.cat(stacked) if isinstance(X, torch.Tensor) else np.concatenate(stacked)
        out = _to_numpy(model_fn(inputs), "model_fn")
        if out.shape[1:] != reference.shape[1:] or out.shape[0] != len(chunk) * B:
            raise ValueError(
                f"model_fn returned shape {out.shape} on {len(chunk) * B} stacked permuted sequences but "
                f"{reference.shape} on X; it must map (B', n, d) to (B', n, d') for any batch size B'"
            )
        for j, perm in enumerate(chunk):
            diff = out[j * B : (j + 1) * B] - reference[:, perm]
            errors[start + j] = float(np.abs(diff).max()) if diff.size else 0.0
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    return EquivarianceResult(errors=errors, permutations=perms, scale=scale)


def sequence_map(model: torch.nn.Module) -> Callable[[Any], NDArray[np.float64]]:
    """Wrap a transformer as a map from input embeddings to per-token outputs.

    Works for a posgeo :class:`~posgeo.Transformer` and for Hugging Face encoders (anything
    accepting ``inputs_embeds=`` and returning ``last_hidden_state``, such as
    :func:`~posgeo.load_pretrained`). Inputs are converted to the model's dtype and device;
    positions, masks and token-type embeddings are whatever the model adds by itself.

    Parameters
    ----------
    model : torch.nn.Module
        The model; not modified. It must not be in training mode with active dropout.

    Returns
    -------
    callable
        ``fn(X) -> numpy.ndarray (B, n, d_model)``, float64, computed without gradients;
        ``X`` is a numpy array or tensor of shape ``(B, n, d_model)``.

    Raises
    ------
    TypeError
        When ``model`` is not a torch module.
    ValueError
        When the model is in training mode with dropout (outputs would be random); call
        ``model.eval()``.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=2, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6, position="none")
    >>> fn = sequence_map(Transformer(cfg).double())
    >>> fn(np.zeros((3, 6, 8))).shape
    (3, 6, 8)
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (a posgeo Transformer or a transformers model), got {type(model).__name__}")
    if model.training and any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        raise ValueError("the model is in training mode with active dropout, so its outputs are random; call model.eval() first")
    param = next(model.parameters())

    def fn(X: Any) -> NDArray[np.float64]:
        x = torch.as_tensor(X).to(device=param.device, dtype=param.dtype)
        with torch.no_grad():
            out = model(inputs_embeds=x)
        hidden = getattr(out, "last_hidden_state", None)
        if hidden is None:
            hidden = out[0] if isinstance(out, (tuple, list)) else out
        return hidden.detach().to("cpu", torch.float64).numpy()

    return fn


# --------------------------------------------------------------------------- chance


@dataclass(frozen=True)
class ChanceInterval:
    """Central binomial interval of the accuracy of a classifier that guesses.

    Attributes
    ----------
    low, high : float
        Bounds on the accuracy (fractions of ``n_samples``); a guessing classifier lands in
        ``[low, high]`` with probability at least ``level``.
    chance : float
        Success probability of one guess.
    n_samples : int
        Evaluation sample size.
    level : float
        Nominal coverage.
    """

    low: float
    high: float
    chance: float
    n_samples: int
    level: float

    def contains(self, accuracy: float) -> bool:
        """Whether ``accuracy`` is compatible with guessing (inside ``[low, high]``)."""
        return bool(self.low <= float(accuracy) <= self.high)


def chance_interval(n_samples: int, *, chance: float = 0.5, level: float = 0.99) -> ChanceInterval:
    r"""Binomial interval for the accuracy of a classifier at chance.

    If each of ``n_samples`` independent predictions is right with probability ``chance``,
    the number right is :math:`K \sim \operatorname{Bin}(N, p)`. The interval runs from the
    :math:`(1-\text{level})/2` quantile to the :math:`(1+\text{level})/2` quantile of
    :math:`K`, divided by :math:`N`; it covers :math:`K/N` with probability at least
    ``level`` (the distribution is discrete, so usually a little more), and removing either
    end point brings the coverage below ``level``.

    Parameters
    ----------
    n_samples : int
        Number of evaluated predictions (>= 1).
    chance : float, keyword-only, default 0.5
        Probability of a correct guess, in (0, 1) (``1 / n_classes`` for balanced classes).
    level : float, keyword-only, default 0.99
        Coverage, in (0, 1).

    Returns
    -------
    ChanceInterval

    Raises
    ------
    TypeError
        Non-integer ``n_samples``.
    ValueError
        ``n_samples < 1``, ``chance`` or ``level`` outside (0, 1).

    Examples
    --------
    >>> ci = chance_interval(2048)
    >>> round(ci.low, 4), round(ci.high, 4), ci.contains(0.51), ci.contains(0.6)
    (0.4717, 0.5283, True, False)
    """
    from scipy.stats import binom

    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an int, got {type(n_samples).__name__} {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}; pass the evaluation sample size")
    if not 0.0 < float(chance) < 1.0:
        raise ValueError(f"chance must be in (0, 1), got {chance}; use 1 / n_classes for balanced classes")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}; e.g. level=0.99")
    alpha = 1.0 - float(level)
    lo = float(binom.ppf(alpha / 2, n_samples, chance))
    hi = float(binom.ppf(1 - alpha / 2, n_samples, chance))
    return ChanceInterval(low=lo / n_samples, high=hi / n_samples, chance=float(chance), n_samples=int(n_samples), level=float(level))


# --------------------------------------------------------------------------- profiles


_VARIANTS: tuple[tuple[str, str, bool], ...] = (
    ("none", "none", False),
    ("sinusoidal", "sinusoidal", False),
    ("learned", "learned", False),
    ("lowrank", "lowrank", False),
    ("rope", "rope", False),
    ("alibi", "alibi", False),
    ("alibi + causal mask", "alibi", True),
    ("none + causal mask", "none", True),
)


@dataclass(frozen=True)
class EquivarianceSettings:
    """Sizes of the permutation-equivariance chapter for one profile.

    Attributes
    ----------
    profile : str
        ``"small"`` or ``"full"``.
    n_permutations : int
        Random permutations per equivariance measurement.
    batch_size, seq_len : int
        Shape ``(B, n)`` of the random inputs of the equivariance checks.
    verify_d_model, verify_n_layers, verify_n_heads, verify_d_ff : int
        The randomly initialised posgeo encoder of the checks.
    verify_init_std : float
        Its weight scale, large enough that attention is far from uniform (at the training
        default 0.02 every query attends almost uniformly, and positional signals inside
        attention, RoPE above all, barely show).
    pretrained : str or None
        The pretrained encoder (:func:`~posgeo.load_pretrained`): ``None`` = all-MiniLM-L6-v2
        (offline), ``"bert-base-uncased"`` (needs the Hugging Face hub).
    pretrained_batch_size, pretrained_seq_len : int
        Shape ``(B, n)`` of the random inputs of its checks.
    task_seq_len, n_filler, sorted_vocab : int
        ``FirstMarkerTask(seq_len, n_filler)`` and ``SortedTask(sorted_vocab, seq_len)``.
    d_model, n_layers, n_heads, d_ff, rank : int
        The trained encoders (``rank`` for ``position="lowrank"``).
    steps, train_batch_size : int
    lr : float
    device : str
        ``TrainConfig.device`` ("auto": CUDA when available).
    eval_batches, eval_batch_size : int
        Evaluation sample: ``eval_batches * eval_batch_size`` fresh sequences.
    variants : tuple of (label, position, causal)
        The trained models: every positional signal, plus ALiBi and no positions with a
        causal mask.
    """

    profile: str
    n_permutations: int
    batch_size: int
    seq_len: int
    verify_d_model: int
    verify_n_layers: int
    verify_n_heads: int
    verify_d_ff: int
    verify_init_std: float
    pretrained: str | None
    pretrained_batch_size: int
    pretrained_seq_len: int
    task_seq_len: int
    n_filler: int
    sorted_vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    rank: int
    steps: int
    train_batch_size: int
    lr: float
    device: str
    eval_batches: int
    eval_batch_size: int
    variants: tuple[tuple[str, str, bool], ...] = _VARIANTS

    def __post_init__(self) -> None:
        for label, position, causal in self.variants:
            if position not in POSITION_KINDS or not isinstance(causal, bool):
                raise ValueError(f"variant {label!r}: position must be one of {POSITION_KINDS} and causal a bool")

    @property
    def eval_samples(self) -> int:
        """Size of the evaluation sample, ``eval_batches * eval_batch_size``."""
        return self.eval_batches * self.eval_batch_size

    def verification_config(self, position: str = "none", *, causal: bool = False) -> TransformerConfig:
        """Config of the randomly initialised encoder of the equivariance checks."""
        return TransformerConfig(
            vocab_size=2, d_model=self.verify_d_model, n_heads=self.verify_n_heads, n_layers=self.verify_n_layers,
            d_ff=self.verify_d_ff, max_len=self.seq_len, position=position, causal=causal,
            rank=min(self.rank, self.verify_d_model) if position == "lowrank" else None, init_std=self.verify_init_std,
        )

    def tasks(self) -> dict[str, Any]:
        """The two order-sensitive tasks, by name."""
        return {
            "first marker": FirstMarkerTask(seq_len=self.task_seq_len, n_filler=self.n_filler),
            "sorted": SortedTask(vocab_size=self.sorted_vocab, seq_len=self.task_seq_len),
        }

    def model_config(self, task: Any, position: str, *, causal: bool = False) -> TransformerConfig:
        """Config of a trained encoder (mean pooling) for ``task``."""
        return TransformerConfig(
            vocab_size=task.vocab_size, d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
            d_ff=self.d_ff, max_len=task.seq_len, position=position, rank=self.rank if position == "lowrank" else None,
            causal=causal, n_classes=task.n_classes, pooling="mean",
        )

    def train_config(self) -> TrainConfig:
        """The training run shared by every model."""
        return TrainConfig(
            steps=self.steps, batch_size=self.train_batch_size, lr=self.lr, device=self.device, log_every=50, seed=0
        )


def equivariance_settings(profile: str | None = None) -> EquivarianceSettings:
    """The chapter's experiment sizes for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default :func:`~posgeo.current_profile` (``$POSGEO_PROFILE``, else ``"small"``).
        ``small`` runs on two CPU cores in well under a minute of training; ``full`` is paper
        scale (bigger models, more steps and permutations, bert-base-uncased), for a GPU.

    Returns
    -------
    EquivarianceSettings

    Raises
    ------
    ValueError
        For an unknown profile.

    Examples
    --------
    >>> s = equivariance_settings("small")
    >>> s.d_model, s.steps, s.eval_samples, s.pretrained is None
    (32, 300, 2048, True)
    >>> equivariance_settings("full").pretrained
    'bert-base-uncased'
    """
    name = current_profile(profile)
    if name == "small":
        return EquivarianceSettings(
            profile=name, n_permutations=200, batch_size=4, seq_len=16,
            verify_d_model=32, verify_n_layers=2, verify_n_heads=4, verify_d_ff=64, verify_init_std=0.2,
            pretrained=None, pretrained_batch_size=2, pretrained_seq_len=16,
            task_seq_len=12, n_filler=8, sorted_vocab=16,
            d_model=32, n_layers=2, n_heads=4, d_ff=64, rank=2,
            steps=300, train_batch_size=64, lr=3e-3, device="auto", eval_batches=8, eval_batch_size=256,
        )
    return EquivarianceSettings(
        profile=name, n_permutations=1000, batch_size=8, seq_len=64,
        verify_d_model=256, verify_n_layers=4, verify_n_heads=8, verify_d_ff=1024, verify_init_std=0.1,
        pretrained="bert-base-uncased", pretrained_batch_size=8, pretrained_seq_len=128,
        task_seq_len=32, n_filler=16, sorted_vocab=32,
        d_model=128, n_layers=4, n_heads=8, d_ff=512, rank=4,
        steps=3000, train_batch_size=128, lr=1e-3, device="auto", eval_batches=32, eval_batch_size=512,
    )


# --------------------------------------------------------------------------- training


def train_order_tasks(
    settings: EquivarianceSettings | None = None,
    *,
    progress: bool = True,
    cache: bool = True,
    num_threads: int | None = 1,
) -> dict[tuple[str, str], TrainResult]:
    """Train one encoder per (task, positional variant) of the settings.

    Parameters
    ----------
    settings : EquivarianceSettings, optional
        Default :func:`equivariance_settings` of the current profile.
    progress : bool, keyword-only, default True
        Progress bar over runs (each run's own bar is off).
    cache : bool, keyword-only, default True
        Cache every run through :func:`~posgeo.train` (``POSGEO_CACHE_DIR``).
    num_threads : int or None, keyword-only, default 1
        CPU threads torch may use while training (restored afterwards); ``None`` keeps the
        current setting. The small profile's models are so small that one thread is
        fastest, and extra threads that wait on each other are very slow on a busy machine.

    Returns
    -------
    dict of (str, str) to TrainResult
        Keyed by ``(task name, variant label)``, tasks in the order of
        ``settings.tasks()``, variants in the order of ``settings.variants``.

    Raises
    ------
    TypeError
        When ``settings`` is not an :class:`EquivarianceSettings`.
    ValueError
        For a ``num_threads`` that is not a positive int or None.

    Examples
    --------
    >>> s = dataclasses.replace(equivariance_settings("small"), steps=2, variants=(("none", "none", False),))
    >>> runs = train_order_tasks(s, progress=False, cache=False)
    >>> sorted(runs)
    [('first marker', 'none'), ('sorted', 'none')]
    """
    s = equivariance_settings() if settings is None else settings
    if not isinstance(s, EquivarianceSettings):
        raise TypeError(f"settings must be an EquivarianceSettings (see equivariance_settings()), got {type(s).__name__}")
    jobs = [(tname, task, v) for tname, task in s.tasks().items() for v in s.variants]
    runs: dict[tuple[str, str], TrainResult] = {}
    with _torch_threads(num_threads):
        for tname, task, (label, position, causal) in progress_bar(jobs, enabled=progress, desc="models"):
            cfg = s.model_config(task, position, causal=causal)
            runs[(tname, label)] = train(cfg, s.train_config(), task, progress=False, cache=cache)
    return runs


def order_task_table(
    runs: Mapping[tuple[str, str], TrainResult],
    settings: EquivarianceSettings | None = None,
    *,
    tolerance: float = 1e-5,
    seed: int = 12345,
    num_threads: int | None = 1,
) -> pd.DataFrame:
    """Accuracy of every trained encoder against chance, and which symmetries it has.

    Parameters
    ----------
    runs : mapping of (task name, variant label) to TrainResult
        As returned by :func:`train_order_tasks`.
    settings : EquivarianceSettings, optional
        For the tasks and the evaluation sample size; default the current profile's.
    tolerance : float, keyword-only, default 1e-5
        A model counts as equivariant when its largest relative error
        (:attr:`EquivarianceResult.max_relative_error`) is below this; float32 rounding
        stays far below it.
    seed : int, keyword-only, default 12345
        Seed of the evaluation batches and of the random inputs and permutations of the
        symmetry checks.
    num_threads : int or None, keyword-only, default 1
        CPU threads torch may use meanwhile (restored afterwards); ``None`` keeps the
        current setting. See :func:`train_order_tasks`.

    Returns
    -------
    pandas.DataFrame
        One row per variant. For each task: ``accuracy`` (on ``settings.eval_samples`` fresh
        sequences) and ``at chance`` (inside the 99% :func:`chance_interval`). Then, measured
        on the first task's model with Gaussian input embeddings: ``permutation-equivariant``
        (over ``settings.n_permutations`` random permutations) and ``reversal-equivariant``
        (under the reversal of the sequence).

    Raises
    ------
    KeyError
        When a (task, variant) pair of the settings is missing from ``runs``.
    ValueError
        For a non-positive tolerance or an invalid ``num_threads``.
    """
    s = equivariance_settings() if settings is None else settings
    if not float(tolerance) > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    tasks = s.tasks()
    chance = chance_interval(s.eval_samples, chance=0.5)
    first = next(iter(tasks))
    with _torch_threads(num_threads):
        rows = _order_task_rows(runs, s, tasks, first, chance, tolerance, seed)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    table.index.name = "positional signal"
    return table


def _order_task_rows(
    runs: Mapping[tuple[str, str], TrainResult],
    s: EquivarianceSettings,
    tasks: dict[str, Any],
    first: str,
    chance: ChanceInterval,
    tolerance: float,
    seed: int,
) -> dict[str, dict[tuple[str, str], Any]]:
    rows = {}
    for label, _, _ in s.variants:
        row: dict[tuple[str, str], Any] = {}
        for tname, task in tasks.items():
            if (tname, label) not in runs:
                raise KeyError(f"no run for task {tname!r} and variant {label!r}; train it with train_order_tasks(settings)")
            acc = evaluate(runs[(tname, label)].model(), task, n_batches=s.eval_batches, batch_size=s.eval_batch_size, seed=seed)
            row[(tname, "accuracy")] = acc
            row[(tname, "at chance")] = chance.contains(acc)
        model = runs[(first, label)].model()
        n = tasks[first].seq_len
        X = torch.randn(s.batch_size, n, model.config.d_model, generator=torch.Generator().manual_seed(seed))
        fn = sequence_map(model)
        perm = equivariance_errors(fn, X, n_permutations=s.n_permutations, seed=seed, progress=False)
        rev = equivariance_errors(fn, X, permutations=np.arange(n)[::-1], progress=False)
        row[("symmetry", "permutation-equivariant")] = perm.max_relative_error < tolerance
        row[("symmetry", "reversal-equivariant")] = rev.max_relative_error < tolerance
        rows[label] = row
    return rows


def equivariance_table(results: Mapping[str, EquivarianceResult], *, tolerance: float = 1e-5) -> pd.DataFrame:
    """Summarise equivariance measurements, rounding tiny numbers to their magnitude.

    Parameters
    ----------
    results : mapping of str to EquivarianceResult
    tolerance : float, keyword-only, default 1e-5
        Threshold of the ``equivariant`` column (on the relative error).

    Returns
    -------
    pandas.DataFrame
        Per result: ``permutations``; ``max error``, ``output scale`` (``max |f(X)|``) and
        ``max relative error`` (their ratio) as strings with one significant digit
        (``"3e-15"``: the digits beyond are rounding noise that varies between machines);
        and ``equivariant`` (``max relative error < tolerance``).

    Examples
    --------
    >>> r = EquivarianceResult(errors=np.array([1.234e-15, 3.0e-16]), permutations=np.zeros((2, 3), int), scale=2.71)
    >>> row = equivariance_table({"f": r}).loc["f"]
    >>> row["max error"], row["output scale"], row["max relative error"], bool(row["equivariant"])
    ('1e-15', '3e+00', '5e-16', True)
    """
    if not float(tolerance) > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    rows = {
        name: {
            "permutations": r.n_permutations,
            "max error": f"{r.max_error:.0e}",
            "output scale": f"{r.scale:.0e}",
            "max relative error": f"{r.max_relative_error:.0e}",
            "equivariant": r.max_relative_error < tolerance,
        }
        for name, r in results.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


# --------------------------------------------------------------------------- plotting


def plot_equivariance_errors(
    results: Mapping[str, EquivarianceResult],
    *,
    thresholds: Sequence[float] = (1e-5, 1e-2),
    floor: float = 1e-18,
    relative: bool = True,
    seed: int = 0,
) -> Any:
    """Per-permutation equivariance errors of several maps, on a log scale.

    One row per map: a box plot of the errors over permutations (box: quartiles, whiskers:
    1.5 interquartile ranges beyond the box) with every error drawn as a
    (vertically jittered) dot. Dots are coloured by whether all of the map's (relative)
    errors lie below the first threshold. Exact zeros are drawn at ``floor``. The thresholds
    (and, for relative errors, the machine epsilons of float64 and float32) are vertical
    reference lines, each a legend entry. Hover a dot for its map, permutation and error.

    Parameters
    ----------
    results : mapping of str to EquivarianceResult
        Label -> result, drawn top to bottom.
    thresholds : sequence of float, keyword-only
        Dashed vertical reference lines (the chapter's "equivariant" and "not equivariant"
        bounds). With ``relative=True``, dotted lines also mark the machine epsilons of
        float64 and float32.
    floor : float, keyword-only
        Where zero errors are drawn (a log axis has no zero).
    relative : bool, keyword-only, default True
        Plot ``relative_errors`` (errors / ``max |f(X)|``) rather than absolute errors.
    seed : int, keyword-only
        Seed of the jitter.

    Returns
    -------
    altair.LayerChart

    Raises
    ------
    ValueError
        When ``results`` is empty or ``floor`` is not positive.

    Examples
    --------
    >>> r = EquivarianceResult(errors=np.array([0.0, 1e-16]), permutations=np.zeros((2, 2), int), scale=1.0)
    >>> spec = plot_equivariance_errors({"f": r}).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['rule', 'boxplot', 'point']
    """
    if not results:
        raise ValueError("results is empty; pass a mapping of label -> EquivarianceResult")
    if not floor > 0:
        raise ValueError(f"floor must be > 0 (a log axis), got {floor}")
    labels = [str(label) for label in results]
    rng = np.random.default_rng(seed)
    tol = float(thresholds[0]) if len(thresholds) else np.inf
    ok, bad = f"all below {tol:.0e}", f"some above {tol:.0e}"
    what = "relative error" if relative else "error"
    frames = []
    for label, r in zip(labels, results.values()):
        values = np.asarray(r.relative_errors if relative else r.errors, dtype=np.float64)
        frames.append(pd.DataFrame({
            "map": label,
            "permutation": np.arange(values.size),
            what: values,
            "jitter": rng.uniform(-0.3, 0.3, size=values.size),
            "group": ok if float(values.max()) < tol else bad,
        }))
    errors = pd.concat(frames, ignore_index=True)
    names = (["equivariant below {:.0e}", "not equivariant above {:.0e}"] if len(thresholds) == 2
             else ["threshold {:.0e}"] * len(thresholds))
    lines = [(name.format(t), float(t)) for name, t in zip(names, thresholds)]
    if relative:
        lines += [(f"reference: {np.dtype(dtype).name} eps", float(np.finfo(dtype).eps)) for dtype in (np.float64, np.float32)]
    references = pd.DataFrame({"reference line": [name for name, _ in lines], "value": [v for _, v in lines]})
    values = [*np.maximum(errors[what], floor), *references["value"]]
    lo, hi = min(values) / 10, max(values) * 10
    title = ("max |f(πX) − πf(X)| / max |f(X)| per permutation (log scale)" if relative
             else "max |f(πX) − πf(X)| per permutation (log scale)")
    x = alt.X("drawn at:Q", title=title, scale=alt.Scale(type="log", domain=[lo, hi], nice=False),
              axis=alt.Axis(format=".0e", tickCount=10, grid=True))
    y = alt.Y("map:N", sort=labels, title=None, axis=alt.Axis(labelLimit=260))
    height = max(160, 30 * len(labels))
    names = list(references["reference line"])
    rules = alt.Chart(references).mark_rule(strokeWidth=1.5, color="#444444").encode(
        x=alt.X("value:Q", scale=alt.Scale(type="log", domain=[lo, hi], nice=False)),
        strokeDash=alt.StrokeDash("reference line:N", sort=names,
                                  scale=alt.Scale(domain=names, range=[[6, 3], [10, 2, 2, 2], [2, 2], [1, 4]][: len(names)]),
                                  legend=alt.Legend(symbolType="stroke", columns=2, title="reference line")),
        tooltip=[alt.Tooltip("reference line:N"), alt.Tooltip("value:Q", format=".3~e")],
    )
    base = alt.Chart(errors).transform_calculate(**{"drawn at": f"max(datum['{what}'], {floor!r})"})
    boxes = base.mark_boxplot(extent=1.5, outliers=False, size=18, color="#777777", opacity=0.45,
                              median={"color": "black"}, rule={"color": "#444444"}, ticks=False).encode(x=x, y=y)
    groups = [ok, bad]
    dots = base.mark_point(filled=True, size=14, opacity=0.55).encode(
        x=x, y=y, yOffset=alt.YOffset("jitter:Q", scale=alt.Scale(domain=[-1, 1])),
        color=alt.Color("group:N", title="the map's errors", scale=pg.colour_scale(groups), sort=groups),
        tooltip=[alt.Tooltip("map:N"), alt.Tooltip("permutation:Q"), alt.Tooltip(f"{what}:Q", format=".3~e"), alt.Tooltip("group:N", title="the map's errors")],
    )
    chart = alt.layer(rules, boxes, dots).properties(width=pg.COLUMN_WIDTH - 120, height=height)
    return pg.finish_chart(
        chart,
        description=(f"Equivariance error of each map under each random permutation ({what}, log axis): a box plot per map "
                     "with every permutation as a dot, coloured by whether all of the map's errors lie below the first "
                     "threshold, and vertical reference lines at the thresholds"
                     + (" and at the float64 and float32 machine epsilons." if relative else ".")),
    )
