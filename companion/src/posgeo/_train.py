"""Training the small transformer of :mod:`posgeo._model` on order-sensitive toy tasks.

One loop (:func:`train`) trains sequence classification, masked-language modelling and causal
language modelling: a *task* produces :class:`Batch` objects whose ``kind`` says which loss
applies. Runs are seeded end to end (model init, batches, dropout), deterministic on the CPU,
and cached on disk through :func:`posgeo.cached`.

Tasks provided here:

- :class:`SortedTask`: is a sequence of random tokens sorted (non-decreasing)? Balanced classes.
- :class:`FirstMarkerTask`: two markers A and B among filler tokens; does A come before B?
- :class:`MLMTask`: masked-token prediction on sequences from any sampler function.
- :class:`LMTask`: next-token prediction on sequences from any sampler function.

In the first two, the two classes have the same distribution of token *multisets*: a model
blind to order (a position-free encoder with mean pooling) cannot beat chance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence, runtime_checkable
import numpy as np
import torch
import torch.nn.functional as F
from ._progress import progress_bar
from ._cache import cached, function_digest
from ._model import Transformer, TransformerConfig, eval_mode
from .validation import check_float, check_int

__all__ = [
    'IGNORE_INDEX',
    'torch_threads',
    'Batch',
    'FirstMarkerTask',
    'MLMTask',
    'resolve_device',
    'TrainConfig',
    'TrainResult',
    'evaluate',
    'train',
    'optimize',
]


IGNORE_INDEX = -100
"""Target value of token positions that do not count in the LM/MLM loss and accuracy."""

_KINDS = ("cls", "lm", "mlm")


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run a block with ``threads`` torch intra-op threads, restoring the previous count.

    The book's models are tiny: one thread is faster than two on a 2-core machine and makes
    runs independent of the machine's thread count. ``None`` leaves torch's setting alone.

    Parameters
    ----------
    threads : int or None

    Raises
    ------
    ValueError
        If ``threads`` is not a positive int or None.

    Examples
    --------
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    if threads is None:
        yield
        return
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive int or None (keep torch's setting), got {threads!r}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(old)


# --------------------------------------------------------------------------- batches and tasks


@dataclass(frozen=True)
class Batch:
    """One training batch.

    Attributes
    ----------
    tokens : torch.Tensor, shape (B, n), int64
        Input token ids.
    targets : torch.Tensor, int64
        ``kind="cls"``: shape (B,), class labels. ``"lm"``/``"mlm"``: shape (B, n), the token
        to predict at each position, :data:`IGNORE_INDEX` where nothing is predicted.
    kind : {"cls", "lm", "mlm"}
        Which loss applies.
    attention_mask : torch.Tensor or None, shape (B, n), bool
        ``False`` at padding positions.
    """

    tokens: torch.Tensor
    targets: torch.Tensor
    kind: str
    attention_mask: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown batch kind {self.kind!r}; choose one of {', '.join(map(repr, _KINDS))}")
        if self.tokens.ndim != 2:
            raise ValueError(f"tokens must have shape (B, n), got {tuple(self.tokens.shape)}")
        want = self.tokens.shape[:1] if self.kind == "cls" else self.tokens.shape
        if tuple(self.targets.shape) != tuple(want):
            raise ValueError(
                f"{self.kind} targets must have shape {tuple(want)}, got {tuple(self.targets.shape)}"
            )

    def to(self, device: torch.device | str) -> "Batch":
        """The same batch on ``device``."""
        mask = self.attention_mask.to(device) if self.attention_mask is not None else None
        return Batch(self.tokens.to(device), self.targets.to(device), self.kind, mask)


@runtime_checkable
class Task(Protocol):
    """What :func:`train` and :func:`evaluate` need from a task.

    Attributes
    ----------
    vocab_size : int
        Token ids lie in ``[0, vocab_size)`` (the model needs at least this many).
    seq_len : int
        Length of every sequence (the model's ``max_len`` must be at least this).
    kind : {"cls", "lm", "mlm"}
    n_classes : int or None
        Number of classes for ``kind="cls"``.
    order_sensitive : bool
        Whether the answer depends on token order (not only on the multiset of tokens).
    """

    vocab_size: int
    seq_len: int
    kind: str
    n_classes: int | None
    order_sensitive: bool

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw a batch using only ``generator`` for randomness."""
        ...

    def cache_key(self) -> dict[str, Any]:
        """A JSON-serialisable description that determines the task's distribution."""
        ...


def _is_sorted(tokens: torch.Tensor) -> torch.Tensor:
    return (tokens[:, 1:] >= tokens[:, :-1]).all(dim=1)


@dataclass(frozen=True)
class SortedTask:
    """Binary classification: is the sequence sorted (non-decreasing)?

    Label 1 rows are sorted draws of ``seq_len`` uniform tokens; label 0 rows are random
    shuffles of such draws, redrawn until they are not sorted. Classes are balanced in
    expectation (each label has probability 1/2).

    Parameters
    ----------
    vocab_size : int, default 16
        Tokens are uniform on ``[0, vocab_size)``; at least 2.
    seq_len : int, default 8
        At least 2.

    Examples
    --------
    >>> task = SortedTask(vocab_size=10, seq_len=5)
    >>> b = task.sample(4, torch.Generator().manual_seed(0))
    >>> tuple(b.tokens.shape), b.kind, task.order_sensitive
    ((4, 5), 'cls', True)
    >>> bool(((b.tokens[:, 1:] >= b.tokens[:, :-1]).all(1).long() == b.targets).all())
    True
    """

    vocab_size: int = 16
    seq_len: int = 8
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        check_int(self.vocab_size, "vocab_size", minimum=2)
        check_int(self.seq_len, "seq_len", minimum=2)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` labelled sequences (see the class docstring)."""
        B = check_int(batch_size, "batch_size")
        labels = torch.randint(0, 2, (B,), generator=generator)
        tokens = torch.randint(0, self.vocab_size, (B, self.seq_len), generator=generator)
        tokens = torch.where(labels[:, None] == 1, tokens.sort(dim=1).values, tokens)
        bad = (labels == 0) & _is_sorted(tokens)
        while bool(bad.any()):  # rare for long sequences; redraw the offending rows
            k = int(bad.sum())
            tokens[bad] = torch.randint(0, self.vocab_size, (k, self.seq_len), generator=generator)
            bad = (labels == 0) & _is_sorted(tokens)
        return Batch(tokens, labels, "cls")

    def cache_key(self) -> dict[str, Any]:
        """Class name and parameters."""
        return {"task": type(self).__name__, "vocab_size": self.vocab_size, "seq_len": self.seq_len}


@dataclass(frozen=True)
class FirstMarkerTask:
    """Binary classification: does marker A come before marker B?

    Each sequence has ``seq_len - 2`` filler tokens uniform on ``[0, n_filler)``, and the
    markers ``A = n_filler`` and ``B = n_filler + 1`` at two distinct uniformly random
    positions. Label 1 when A precedes B. Both labels have probability exactly 1/2, and the
    multiset of tokens is independent of the label.

    Parameters
    ----------
    seq_len : int, default 8
        At least 2.
    n_filler : int, default 8
        Number of filler token values (at least 1).

    Examples
    --------
    >>> task = FirstMarkerTask(seq_len=6, n_filler=4)
    >>> task.vocab_size, task.marker_a, task.marker_b
    (6, 4, 5)
    >>> b = task.sample(3, torch.Generator().manual_seed(0))
    >>> pos_a = (b.tokens == 4).long().argmax(1); pos_b = (b.tokens == 5).long().argmax(1)
    >>> bool(((pos_a < pos_b).long() == b.targets).all())
    True
    """

    seq_len: int = 8
    n_filler: int = 8
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        check_int(self.seq_len, "seq_len", minimum=2)
        check_int(self.n_filler, "n_filler", minimum=1)

    @property
    def vocab_size(self) -> int:
        """``n_filler + 2``: fillers, then A, then B."""
        return self.n_filler + 2

    @property
    def marker_a(self) -> int:
        """Token id of marker A."""
        return self.n_filler

    @property
    def marker_b(self) -> int:
        """Token id of marker B."""
        return self.n_filler + 1

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` labelled sequences (see the class docstring)."""
        B = check_int(batch_size, "batch_size")
        tokens = torch.randint(0, self.n_filler, (B, self.seq_len), generator=generator)
        pos = torch.rand(B, self.seq_len, generator=generator).argsort(dim=1)[:, :2]  # two distinct slots
        rows = torch.arange(B)
        tokens[rows, pos[:, 0]] = self.marker_a
        tokens[rows, pos[:, 1]] = self.marker_b
        return Batch(tokens, (pos[:, 0] < pos[:, 1]).long(), "cls")

    def cache_key(self) -> dict[str, Any]:
        """Class name and parameters."""
        return {"task": type(self).__name__, "seq_len": self.seq_len, "n_filler": self.n_filler}


Sampler = Callable[[int, int], np.ndarray]
"""``sampler(batch_size, seed) -> int array (batch_size, seq_len)`` of token ids."""


def _draw(sampler: Sampler, batch_size: int, generator: torch.Generator, n_tokens: int, seq_len: int) -> torch.Tensor:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    arr = np.asarray(sampler(batch_size, seed))
    if arr.shape != (batch_size, seq_len) or arr.dtype.kind not in "iu":
        raise ValueError(
            f"sampler(batch_size, seed) must return an int array of shape ({batch_size}, {seq_len}), "
            f"got dtype {arr.dtype} and shape {arr.shape}"
        )
    if arr.size and (arr.min() < 0 or arr.max() >= n_tokens):
        raise ValueError(f"sampler returned token ids outside [0, {n_tokens}); fix the sampler or n_tokens")
    return torch.as_tensor(arr, dtype=torch.long)


@dataclass(frozen=True)
class MLMTask:
    """Masked-token prediction on sequences drawn by any sampler.

    Every position is masked independently with probability ``mask_prob`` (at least one per
    sequence), replaced by the mask token ``n_tokens`` (no BERT 80/10/10 mixing: always the
    mask token); the model predicts the original token at masked positions only.

    Parameters
    ----------
    sampler : callable
        ``sampler(batch_size, seed) -> int array (batch_size, seq_len)`` with ids in
        ``[0, n_tokens)``; e.g. ``lambda b, s: sample_synthetic_sequences(mu, b, seed=s).tokens.reshape(b, -1)``.
    n_tokens : int
        Size of the sampler's vocabulary; the task's ``vocab_size`` is ``n_tokens + 1``.
    seq_len : int
    name : str
        Identifies the sampler (and all its parameters) in cache keys: two different samplers
        must never share a name.
    mask_prob : float, default 0.15
    order_sensitive : bool, default True
        Whether the sampler's sequences carry order information (position-dependent marginals,
        grammar); set ``False`` for exchangeable (i.i.d.) sequences.

    Examples
    --------
    >>> task = MLMTask(lambda b, s: np.random.default_rng(s).integers(0, 5, (b, 6)), n_tokens=5,
    ...                seq_len=6, name="uniform-5")
    >>> b = task.sample(4, torch.Generator().manual_seed(0))
    >>> task.vocab_size, b.kind, bool(((b.tokens == 5) == (b.targets != IGNORE_INDEX)).all())
    (6, 'mlm', True)
    """

    sampler: Sampler
    n_tokens: int
    seq_len: int
    name: str
    mask_prob: float = 0.15
    order_sensitive: bool = True
    kind: str = field(default="mlm", init=False)
    n_classes: None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not callable(self.sampler):
            raise TypeError("sampler must be callable: sampler(batch_size, seed) -> int array (batch_size, seq_len)")
        check_int(self.n_tokens, "n_tokens")
        check_int(self.seq_len, "seq_len")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("name must be a non-empty string identifying the sampler (used in cache keys)")
        if not 0.0 < float(self.mask_prob) <= 1.0:
            raise ValueError(f"mask_prob must be in (0, 1], got {self.mask_prob}")

    @property
    def vocab_size(self) -> int:
        """``n_tokens + 1`` (the last id is the mask token)."""
        return self.n_tokens + 1

    @property
    def mask_token(self) -> int:
        """Token id of the mask token, ``n_tokens``."""
        return self.n_tokens

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw sequences from the sampler and mask them."""
        B = check_int(batch_size, "batch_size")
        original = _draw(self.sampler, B, generator, self.n_tokens, self.seq_len)
        masked = torch.rand(B, self.seq_len, generator=generator) < float(self.mask_prob)
        forced = torch.randint(0, self.seq_len, (B,), generator=generator)
        masked[torch.arange(B), forced] |= ~masked.any(dim=1)  # at least one masked position per row
        tokens = original.masked_fill(masked, self.mask_token)
        targets = original.masked_fill(~masked, IGNORE_INDEX)
        return Batch(tokens, targets, "mlm")

    def cache_key(self) -> dict[str, Any]:
        """Class name, sampler name and parameters."""
        return {
            "task": type(self).__name__, "name": self.name, "n_tokens": self.n_tokens,
            "seq_len": self.seq_len, "mask_prob": float(self.mask_prob),
        }


@dataclass(frozen=True)
class LMTask:
    """Causal next-token prediction on sequences drawn by any sampler.

    ``targets[:, i] = tokens[:, i + 1]``; the last position predicts nothing. Train it with a
    causal model (``TransformerConfig(causal=True)``); :func:`train` refuses a bidirectional
    one, which could read the answer.

    Parameters
    ----------
    sampler : callable
        ``sampler(batch_size, seed) -> int array (batch_size, seq_len)`` with ids in ``[0, n_tokens)``.
    n_tokens : int
        Vocabulary size (the task's ``vocab_size``).
    seq_len : int
        At least 2.
    name : str
        Identifies the sampler in cache keys.
    order_sensitive : bool, default True

    Examples
    --------
    >>> task = LMTask(lambda b, s: np.tile(np.arange(4), (b, 1)), n_tokens=4, seq_len=4, name="ramp")
    >>> task.sample(1, torch.Generator().manual_seed(0)).targets.tolist()
    [[1, 2, 3, -100]]
    """

    sampler: Sampler
    n_tokens: int
    seq_len: int
    name: str
    order_sensitive: bool = True
    kind: str = field(default="lm", init=False)
    n_classes: None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not callable(self.sampler):
            raise TypeError("sampler must be callable: sampler(batch_size, seed) -> int array (batch_size, seq_len)")
        check_int(self.n_tokens, "n_tokens")
        check_int(self.seq_len, "seq_len", minimum=2)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("name must be a non-empty string identifying the sampler (used in cache keys)")

    @property
    def vocab_size(self) -> int:
        """``n_tokens``."""
        return self.n_tokens

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw sequences and their shifted targets."""
        B = check_int(batch_size, "batch_size")
        tokens = _draw(self.sampler, B, generator, self.n_tokens, self.seq_len)
        targets = torch.full_like(tokens, IGNORE_INDEX)
        targets[:, :-1] = tokens[:, 1:]
        return Batch(tokens, targets, "lm")

    def cache_key(self) -> dict[str, Any]:
        """Class name, sampler name and parameters."""
        return {"task": type(self).__name__, "name": self.name, "n_tokens": self.n_tokens, "seq_len": self.seq_len}


# --------------------------------------------------------------------------- training


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available else CPU; anything else is passed to ``torch.device``.

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"unknown device {device!r}; pass 'auto', 'cpu' or 'cuda'") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device {device!r} was asked for but this torch build has no usable CUDA device "
            f"(torch {torch.__version__}); pass device='auto' or 'cpu'"
        )
    return dev


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of :func:`train` (AdamW, constant learning rate).

    Parameters
    ----------
    steps : int, default 500
        Optimiser steps (one fresh batch each).
    batch_size : int, default 64
    lr : float, default 1e-3
    weight_decay : float, default 0.0
    seed : int, default 0
        Seeds the model initialisation, the batches and dropout.
    device : str, default "auto"
        ``"auto"``: CUDA when available, else CPU. Results on different devices differ in
        the last bits, so the device type is part of the cache key.
    log_every : int, default 10
        Record the training-batch loss and accuracy every this many steps (and at the last).
    eval_every : int, default 0
        Every this many steps (and at the end) run the evaluation (``eval_fn`` or
        :func:`evaluate` on ``eval_batches`` fresh batches); 0 = never.
    eval_batches : int, default 4
    grad_clip : float or None, default 1.0
        Clip the global gradient norm; ``None`` disables clipping.
    freeze : tuple of str, default ()
        Parameter-name prefixes to keep fixed at their initial values, e.g.
        ``("blocks.0.attn", "blocks.1.attn")`` to freeze attention, ``("tok",)`` for the token
        embeddings. Names are those of ``Transformer.named_parameters()``.
    snapshot_every : int, default 0
        Every this many steps (plus step 0 and the end) store the position table
        (``Transformer.position_table()``); 0 = never. Needs an additive position kind.

    Examples
    --------
    >>> TrainConfig(steps=10, freeze=["tok"]).freeze
    ('tok',)
    """

    steps: int = 500
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "auto"
    log_every: int = 10
    eval_every: int = 0
    eval_batches: int = 4
    grad_clip: float | None = 1.0
    freeze: tuple[str, ...] = ()
    snapshot_every: int = 0

    def __post_init__(self) -> None:
        check_int(self.steps, "steps")
        check_int(self.batch_size, "batch_size")
        check_int(self.log_every, "log_every")
        check_int(self.eval_every, "eval_every", minimum=0)
        check_int(self.eval_batches, "eval_batches")
        check_int(self.snapshot_every, "snapshot_every", minimum=0)
        check_int(self.seed, "seed", minimum=0, maximum=2**62)  # seed + 2 must fit a torch seed
        check_float(self.lr, "lr", minimum=0.0, strict_minimum=True)
        check_float(self.weight_decay, "weight_decay", minimum=0.0)
        if self.grad_clip is not None:
            check_float(self.grad_clip, "grad_clip", minimum=0.0, strict_minimum=True)
        if isinstance(self.freeze, str):
            raise TypeError(f"freeze must be a tuple of prefixes, got the string {self.freeze!r}; pass ({self.freeze!r},)")
        object.__setattr__(self, "freeze", tuple(self.freeze))
        if not all(isinstance(p, str) and p for p in self.freeze):
            raise TypeError(f"freeze must hold non-empty strings (parameter-name prefixes), got {self.freeze!r}")
        resolve_device(self.device)

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TrainResult:
    """The outcome of :func:`train`.

    Attributes
    ----------
    model_config : TransformerConfig
    train_config : TrainConfig
    task_key : dict
        The task's ``cache_key()``.
    state_dict : dict of str to torch.Tensor
        Final weights, on the CPU.
    history : tuple of dict
        Records with ``step`` and either ``loss``/``accuracy`` (training batch) or
        ``eval_*`` keys; ``pandas.DataFrame(result.history)`` tabulates them.
    snapshots : dict of int to numpy.ndarray, each (max_len, d_model)
        Position tables by step (empty unless ``snapshot_every > 0``).
    wall_time : float
        Seconds the training took (when it was computed, not when read from the cache).
    device : str
        Where it ran.
    """

    model_config: TransformerConfig
    train_config: TrainConfig
    task_key: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    history: tuple[dict[str, float], ...]
    snapshots: dict[int, np.ndarray]
    wall_time: float
    device: str

    def model(self) -> Transformer:
        """Rebuild the trained model (on the CPU, in eval mode)."""
        m = Transformer(self.model_config, seed=self.train_config.seed)
        m.load_state_dict(self.state_dict)
        return m.eval()

    def final(self, key: str = "loss") -> float:
        """The last recorded value of ``key`` (e.g. ``"loss"``, ``"eval_accuracy"``)."""
        for row in reversed(self.history):
            if key in row:
                return float(row[key])
        raise KeyError(f"{key!r} was never recorded; available: {sorted({k for r in self.history for k in r})}")


def _loss_and_accuracy(model: Transformer, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(batch.tokens, attention_mask=batch.attention_mask)
    if batch.kind == "cls":
        if out.cls_logits is None:
            raise ValueError("a classification task needs a model with n_classes set")
        logits, targets = out.cls_logits, batch.targets
        loss = F.cross_entropy(logits, targets)
        acc = (logits.argmax(-1) == targets).float().mean()
        return loss, acc
    logits = out.logits.reshape(-1, out.logits.shape[-1])
    targets = batch.targets.reshape(-1)
    loss = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
    keep = targets != IGNORE_INDEX
    acc = (logits.argmax(-1)[keep] == targets[keep]).float().mean()
    return loss, acc


def _check_compatible(cfg: TransformerConfig, task: Any) -> None:
    for attr in ("vocab_size", "seq_len", "kind", "sample", "cache_key"):
        if not hasattr(task, attr):
            raise TypeError(
                f"task must follow the posgeo Task protocol (vocab_size, seq_len, kind, n_classes, "
                f"order_sensitive, sample(), cache_key()); {type(task).__name__} lacks {attr!r}"
            )
    if task.seq_len > cfg.max_len:
        raise ValueError(
            f"the task's sequence length {task.seq_len} exceeds the model's max_len={cfg.max_len}; "
            f"build the model with max_len >= {task.seq_len}"
        )
    if task.vocab_size > cfg.vocab_size:
        raise ValueError(
            f"the task uses {task.vocab_size} token ids but the model's vocab_size is {cfg.vocab_size}; "
            f"pass vocab_size >= {task.vocab_size}"
        )
    if task.kind == "cls":
        if cfg.n_classes is None or cfg.n_classes < task.n_classes:
            raise ValueError(
                f"the task has {task.n_classes} classes but the model has n_classes={cfg.n_classes}; "
                f"pass n_classes={task.n_classes}"
            )
    elif task.kind == "lm" and not cfg.causal:
        raise ValueError("a causal LM task needs causal=True (a bidirectional model would see the next token)")


def evaluate(
    model: Transformer,
    task: Task,
    *,
    n_batches: int = 8,
    batch_size: int = 256,
    seed: int = 12345,
) -> float:
    """Accuracy of ``model`` on fresh batches of ``task``.

    Parameters
    ----------
    model : Transformer
    task : Task
    n_batches : int, keyword-only, default 8
    batch_size : int, keyword-only, default 256
    seed : int, keyword-only, default 12345
        Seed of the evaluation batches (use one different from training's).

    Returns
    -------
    float
        Fraction of correct class predictions (``cls``) or of correctly predicted target
        tokens (``lm``/``mlm``), weighting every batch equally.

    Examples
    --------
    >>> task = FirstMarkerTask(seq_len=6, n_filler=4)
    >>> cfg = TransformerConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6,
    ...                         position="none", n_classes=2)
    >>> 0.4 < evaluate(Transformer(cfg), task, n_batches=4) < 0.6  # blind to order: chance
    True
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a posgeo Transformer, got {type(model).__name__}")
    _check_compatible(model.config, task)
    n_batches = check_int(n_batches, "n_batches")
    batch_size = check_int(batch_size, "batch_size")
    device = next(model.parameters()).device
    g = torch.Generator().manual_seed(int(seed))
    accs = []
    with eval_mode(model):
        with torch.no_grad():
            for _ in range(n_batches):
                batch = task.sample(batch_size, g).to(device)
                accs.append(float(_loss_and_accuracy(model, batch)[1]))
    return float(np.mean(accs))


# Parameters of the additive position tables (``learned``: pos; ``lowrank``: pos_a, pos_b).
POSITION_PARAMETERS = ("pos", "pos_a", "pos_b")
"""Names of the additive position-table parameters of a :class:`Transformer` (``learned``:
``pos``; ``lowrank``: ``pos_a``, ``pos_b``): the group that ``position_weight_decay`` applies to."""


def optimize(
    param_groups: Sequence[Mapping[str, Any]],
    step_loss: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    *,
    steps: int,
    lr: float,
    grad_clip: float | None = None,
    clip_parameters: Sequence[torch.nn.Parameter] | None = None,
    log_every: int = 1,
    after_step: Callable[[int], None] | None = None,
    history: list[dict[str, float]] | None = None,
    progress: bool = True,
    desc: str = "train",
    start: int = 0,
    optimizer_state: Mapping[str, Any] | None = None,
    checkpoint: Callable[[int, dict[str, Any]], None] | None = None,
    checkpoint_every: int | None = None,
    optimizer: str = "adamw",
) -> list[dict[str, float]]:
    """The library's one optimisation loop: AdamW (or plain SGD) steps on a loss, with logging and hooks.

    :func:`train` runs it on a posgeo :class:`Transformer`; recipes that train another model
    (e.g. fine-tuning a pretrained Hugging Face encoder) call it directly, so every model in
    the book is trained by the same steps. Each step calls ``step_loss(step)``, zeroes the
    gradients, back-propagates, clips the gradient norm (if ``grad_clip``), takes the AdamW
    step, logs every ``log_every`` steps (and the last) and then calls ``after_step(done)``.

    Parameters
    ----------
    param_groups : sequence of dict
        AdamW parameter groups (each with ``"params"`` and its own ``"weight_decay"``): the
        extension point for per-group weight decay.
    step_loss : callable
        ``step_loss(step) -> (loss, accuracy)``, two scalar tensors; it draws its own batch.
    steps : int, keyword-only
    lr : float, keyword-only
    grad_clip : float, keyword-only, optional
        Maximum gradient norm.
    clip_parameters : sequence of parameters, keyword-only, optional
        The parameters whose joint norm is clipped (default: every parameter of the groups, in
        order).
    log_every : int, keyword-only, default 1
    after_step : callable, keyword-only, optional
        ``after_step(done)`` after each step (``done`` = steps taken): evaluations, snapshots.
    history : list, keyword-only, optional
        Append the log to this list (so ``after_step`` can interleave its own records).
    progress : bool, keyword-only, default True
    desc : str, keyword-only, default "train"
    start : int, keyword-only, default 0
        Steps already taken: resume an interrupted run at step ``start`` (``0 <= start <= steps``).
        The caller restores what it owns as it was after that step (the parameters, its batch
        and dropout generators, ``history``); the loop restores AdamW from ``optimizer_state``.
    optimizer_state : mapping, keyword-only, optional
        ``torch.optim.AdamW.state_dict()`` as ``checkpoint`` received it; required when
        ``start > 0`` (AdamW's moments are part of the run).
    checkpoint : callable, keyword-only, optional
        ``checkpoint(done, optimizer_state)``, called after ``after_step`` every
        ``checkpoint_every`` steps (not after the last): save what a resumed run needs. The
        state dict refers to the optimizer's live tensors: serialise or copy it there.
    checkpoint_every : int, keyword-only, optional
        Required with ``checkpoint``.
    optimizer : {"adamw", "sgd"}, keyword-only, default "adamw"
        ``"sgd"``: plain gradient descent, ``p -= lr * grad`` (no momentum; the groups'
        ``weight_decay`` is applied as L2), the steps of a gradient-flow argument.

    Returns
    -------
    list of dict
        ``history``: ``{"step", "loss", "accuracy"}`` records (plus any ``after_step`` added).

    Raises
    ------
    ValueError
        Bad sizes, ``start > 0`` without ``optimizer_state``, or ``checkpoint`` without
        ``checkpoint_every``.

    Examples
    --------
    >>> w = torch.nn.Parameter(torch.tensor([3.0]))
    >>> log = optimize([{"params": [w], "weight_decay": 0.0}], lambda step: ((w**2).sum(), torch.tensor(0.0)),
    ...                steps=50, lr=0.1, log_every=25, progress=False)
    >>> [r["step"] for r in log], abs(float(w.detach())) < 3.0
    ([0, 25, 49], True)

    Interrupted after step 30 and resumed from its checkpoint, a run ends where the
    uninterrupted one does:

    >>> import copy
    >>> loss = lambda step: ((w**2).sum(), torch.tensor(0.0))
    >>> w = torch.nn.Parameter(torch.tensor([3.0]))
    >>> _ = optimize([{"params": [w], "weight_decay": 0.0}], loss, steps=50, lr=0.1, progress=False)
    >>> uninterrupted, saved = float(w.detach()), {}
    >>> def save_then_stop_at_30(done, optimizer_state):
    ...     saved.update(done=done, w=w.detach().clone(), opt=copy.deepcopy(optimizer_state))
    ...     if done == 30:
    ...         raise KeyboardInterrupt
    >>> w = torch.nn.Parameter(torch.tensor([3.0]))
    >>> try:
    ...     _ = optimize([{"params": [w], "weight_decay": 0.0}], loss, steps=50, lr=0.1,
    ...                  checkpoint=save_then_stop_at_30, checkpoint_every=10, progress=False)
    ... except KeyboardInterrupt:
    ...     pass
    >>> w = torch.nn.Parameter(saved["w"])
    >>> _ = optimize([{"params": [w], "weight_decay": 0.0}], loss, steps=50, lr=0.1,
    ...              start=saved["done"], optimizer_state=saved["opt"], progress=False)
    >>> float(w.detach()) == uninterrupted, saved["done"]
    (True, 30)
    """
    steps = check_int(steps, "steps")
    log_every = check_int(log_every, "log_every")
    lr = check_float(lr, "lr", minimum=0.0, strict_minimum=True)
    start = check_int(start, "start", minimum=0)
    if start > steps:
        raise ValueError(f"start={start} is past the last step (steps={steps}); resume with start <= steps")
    if start > 0 and optimizer_state is None:
        raise ValueError(
            f"start={start} needs optimizer_state (the AdamW state saved with the run's checkpoint): "
            "without its moments the resumed run is another run"
        )
    if optimizer not in ("adamw", "sgd"):
        raise ValueError(f"unknown optimizer {optimizer!r}; choose 'adamw' or 'sgd'")
    if (checkpoint is None) != (checkpoint_every is None):
        raise ValueError("pass checkpoint and checkpoint_every together (a callable and a step interval), or neither")
    if checkpoint_every is not None:
        checkpoint_every = check_int(checkpoint_every, "checkpoint_every")
    groups = [dict(g) for g in param_groups]
    if not groups or any("params" not in g for g in groups):
        raise ValueError("param_groups must be a non-empty sequence of dicts with 'params'")
    opt = torch.optim.AdamW(groups, lr=lr) if optimizer == "adamw" else torch.optim.SGD(groups, lr=lr)
    if optimizer_state is not None:
        opt.load_state_dict(dict(optimizer_state))
    clip = list(clip_parameters) if clip_parameters is not None else [p for g in groups for p in g["params"]]
    log: list[dict[str, float]] = [] if history is None else history
    bar = progress_bar(range(start, steps), enabled=progress, desc=desc, leave=False, initial=start, total=steps)
    for step in bar:
        loss, acc = step_loss(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(clip, float(grad_clip))
        opt.step()
        done = step + 1
        if step % log_every == 0 or done == steps:
            loss_v = float(loss.detach())
            log.append({"step": step, "loss": loss_v, "accuracy": float(acc)})
            bar.set_postfix(loss=f"{loss_v:.4f}")
        if after_step is not None:
            after_step(done)
        if checkpoint is not None and checkpoint_every is not None and done % checkpoint_every == 0 and done < steps:
            checkpoint(done, opt.state_dict())
    bar.close()
    return log


def _run(
    model_config: TransformerConfig,
    train_config: TrainConfig,
    task: Task,
    eval_fn: Callable[[Transformer], dict[str, float]] | None,
    progress: bool,
    *,
    prepare: Callable[[Transformer], Transformer] | None = None,
    position_weight_decay: float | None = None,
    desc: str = "train",
) -> TrainResult:
    """The training loop of :func:`train` (uncached): the library's one loop.

    ``prepare(model)`` runs right after the seeded initialisation and returns the model to
    train (e.g. with degenerate attention, or redrawn token embeddings); it must not draw
    from the global RNG. ``position_weight_decay`` gives the position table its own AdamW
    decay (``train_config.weight_decay`` then applies to every other parameter).
    """
    tc = train_config
    device = resolve_device(tc.device)
    start = time.perf_counter()
    fork_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=fork_devices):  # dropout draws from the global RNG
        torch.manual_seed(tc.seed)
        model = Transformer(model_config, seed=tc.seed).to(device)
        if prepare is not None:
            model = prepare(model)
        names = [n for n, _ in model.named_parameters()]
        for prefix in tc.freeze:
            if not any(n.startswith(prefix) for n in names):
                raise ValueError(f"freeze prefix {prefix!r} matches no parameter; parameter names are {names}")
        for n, p in model.named_parameters():
            if any(n.startswith(prefix) for prefix in tc.freeze):
                p.requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError(f"freeze={tc.freeze!r} leaves nothing to train; freeze fewer parameters")
        if position_weight_decay is None:
            groups: list[dict[str, Any]] = [{"params": params, "weight_decay": float(tc.weight_decay)}]
        else:
            trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            groups = [
                {"params": [p for n, p in trainable if n not in POSITION_PARAMETERS], "weight_decay": float(tc.weight_decay)},
                {"params": [p for n, p in trainable if n in POSITION_PARAMETERS], "weight_decay": float(position_weight_decay)},
            ]
        g = torch.Generator().manual_seed(tc.seed + 1)  # batches: a stream apart from the init
        history: list[dict[str, float]] = []
        snapshots: dict[int, np.ndarray] = {}

        def do_eval(step: int) -> None:
            if eval_fn is not None:
                model.eval()
                with torch.no_grad():
                    metrics = eval_fn(model)
                model.train()
                history.append({"step": step, **{f"eval_{k}": float(v) for k, v in metrics.items()}})
            else:
                acc = evaluate(model, task, n_batches=tc.eval_batches, batch_size=tc.batch_size, seed=tc.seed + 2)
                history.append({"step": step, "eval_accuracy": acc})

        if tc.snapshot_every:
            snapshots[0] = model.position_table()  # type: ignore[assignment]
        model.train()

        def step_loss(step: int) -> tuple[torch.Tensor, torch.Tensor]:
            return _loss_and_accuracy(model, task.sample(tc.batch_size, g).to(device))

        def after_step(done: int) -> None:
            if tc.eval_every and (done % tc.eval_every == 0 or done == tc.steps):
                do_eval(done)
            if tc.snapshot_every and (done % tc.snapshot_every == 0 or done == tc.steps):
                snapshots[done] = model.position_table()  # type: ignore[assignment]

        optimize(
            groups, step_loss, steps=tc.steps, lr=tc.lr, grad_clip=tc.grad_clip, clip_parameters=params,
            log_every=tc.log_every, after_step=after_step, history=history, progress=progress, desc=desc,
        )
    state = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
    return TrainResult(
        model_config=model_config,
        train_config=train_config,
        task_key=task.cache_key(),
        state_dict=state,
        history=tuple(history),
        snapshots=snapshots,
        wall_time=time.perf_counter() - start,
        device=str(device),
    )


def train(
    model_config: TransformerConfig,
    train_config: TrainConfig,
    task: Task,
    *,
    eval_fn: Callable[[Transformer], dict[str, float]] | None = None,
    prepare: Callable[[Transformer], Transformer] | None = None,
    position_weight_decay: float | None = None,
    cache_namespace: str = "train",
    cache_options: Mapping[str, Any] | None = None,
    desc: str = "train",
    progress: bool = True,
    cache: bool = True,
) -> TrainResult:
    """Train a fresh :class:`Transformer` on a task, seeded and (optionally) cached.

    Each step draws a fresh batch from ``task.sample`` (a local ``torch.Generator`` seeded
    from ``train_config.seed``), computes the loss its ``kind`` asks for (cross-entropy on the
    class logits, or on the token logits at non-ignored targets) and takes an AdamW step on the
    parameters not frozen. The model initialisation uses the same seed; dropout runs under
    :func:`torch.random.fork_rng`, so the global RNG is untouched. On the CPU two runs with
    the same arguments are bit-identical.

    Parameters
    ----------
    model_config : TransformerConfig
    train_config : TrainConfig
    task : Task
        Any object following the :class:`Task` protocol (e.g. :class:`FirstMarkerTask`).
    eval_fn : callable, keyword-only, optional
        ``eval_fn(model) -> dict of float``, run (in eval mode, without gradients) every
        ``eval_every`` steps; its values are recorded as ``eval_<name>``. Default: task
        accuracy on fresh batches (``eval_accuracy``). It must be deterministic; its code,
        closure and the globals it reads enter the cache key (:func:`posgeo.function_digest`),
        so two lambdas are two keys. With ``cache=True`` a function whose result could depend
        on state the key cannot see (a random generator, an open file) raises ``ValueError``;
        pass ``cache=False`` for it.
    prepare : callable, keyword-only, optional
        Extension point: ``prepare(model) -> model`` runs right after the seeded
        initialisation and returns the model to train (e.g. with degenerate attention, or
        redrawn token embeddings). It must not draw from the global RNG. With ``cache=True``
        describe it in ``cache_options`` (the cache cannot see inside a function).
    position_weight_decay : float, keyword-only, optional
        Extension point (parameter groups): the additive position table
        (:data:`POSITION_PARAMETERS`) gets its own AdamW weight decay; ``weight_decay`` of
        ``train_config`` applies to every other parameter. Needs ``position`` learned or lowrank.
    cache_namespace : str, keyword-only, default "train"
        File-name prefix of the cached result: variants built on this loop keep their own.
    cache_options : mapping, keyword-only, optional
        JSON-serialisable description of everything else that changes the result (what
        ``prepare`` does); it enters the cache key.
    desc : str, keyword-only, default "train"
        Label of the progress bar.
    progress : bool, keyword-only, default True
        Show a tqdm progress bar.
    cache : bool, keyword-only, default True
        Read/write the result through :func:`posgeo.cached` (``POSGEO_CACHE_DIR``), keyed on
        both configs, the resolved device type, the task's ``cache_key()``, the code of
        ``eval_fn`` (and of ``prepare`` where it can be hashed), ``position_weight_decay``,
        ``cache_options`` and, on the CPU, torch's intra-op thread count (one and two
        threads sum in different orders and give different weights; on CUDA the weights do
        not depend on it). An entry that is not a :class:`TrainResult` is recomputed.

    Returns
    -------
    TrainResult

    Raises
    ------
    TypeError
        Configs of the wrong type, or a task without the protocol's attributes.
    ValueError
        A task longer than ``max_len``, with more tokens than ``vocab_size``, more classes than
        ``n_classes``; a causal-LM task on a bidirectional model; a ``freeze`` prefix that
        matches nothing; ``snapshot_every`` without an additive position table; with
        ``cache=True``, an ``eval_fn`` that cannot be hashed (the message says to pass
        ``cache=False``).

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=6, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=6,
    ...                         position="learned", n_classes=2)
    >>> res = train(cfg, TrainConfig(steps=30, batch_size=32, lr=3e-3, device="cpu"),
    ...             FirstMarkerTask(seq_len=6, n_filler=4), progress=False, cache=False)
    >>> len(res.history), res.final("loss") < res.history[0]["loss"]
    (4, True)
    """
    _check_run(model_config, train_config, task)
    if eval_fn is not None and not callable(eval_fn):
        raise TypeError("eval_fn must be callable: eval_fn(model) -> dict of float")
    if prepare is not None and not callable(prepare):
        raise TypeError("prepare must be callable: prepare(model) -> model")
    if position_weight_decay is not None:
        position_weight_decay = check_float(position_weight_decay, "position_weight_decay", minimum=0.0)
        if model_config.position not in ("learned", "lowrank"):
            raise ValueError(
                f"position_weight_decay needs a trainable position table, got position={model_config.position!r}; "
                "use position='learned' or 'lowrank'"
            )
    if cache_options is not None and not isinstance(cache_options, Mapping):
        raise TypeError(f"cache_options must be a mapping, got {type(cache_options).__name__}")
    if prepare is not None and cache and not cache_options:
        raise ValueError(
            "prepare= changes the result but the cache cannot see inside a function: describe it in "
            "cache_options= (e.g. {'uniform_attention': True}) or pass cache=False"
        )
    options = dict(cache_options or {})
    if position_weight_decay is not None:
        options["position_weight_decay"] = position_weight_decay
    key: dict[str, Any] = {}
    if cache:  # functions by their code and closure, never by name: every lambda is "<lambda>"
        eval_key = None
        if eval_fn is not None:
            try:
                eval_key = {"name": getattr(eval_fn, "__qualname__", type(eval_fn).__qualname__),
                            "digest": function_digest(eval_fn)}
            except ValueError as exc:
                raise ValueError(f"train() cannot cache a run with this eval_fn: {exc}") from exc
        key = _run_key(model_config, train_config, task, eval_fn=eval_key, **options)
        runtime: dict[str, Any] = {}
        if prepare is not None:  # described by cache_options (required above); its code too when hashable
            with contextlib.suppress(ValueError):
                runtime["prepare"] = function_digest(prepare)
        if resolve_device(train_config.device).type == "cpu":  # reduction order: 1 vs 2 threads differ
            runtime["torch_threads"] = torch.get_num_threads()
        key["_runtime"] = runtime
    return cached(
        cache_namespace,
        key,
        lambda: _run(
            model_config, train_config, task, eval_fn, progress,
            prepare=prepare, position_weight_decay=position_weight_decay, desc=desc,
        ),
        enabled=cache,
        expect=TrainResult,
    )


def _check_run(model_config: TransformerConfig, train_config: TrainConfig, task: Task) -> None:
    """The checks of :func:`train` before a run."""
    if not isinstance(model_config, TransformerConfig):
        raise TypeError(f"model_config must be a TransformerConfig, got {type(model_config).__name__}")
    if not isinstance(train_config, TrainConfig):
        raise TypeError(f"train_config must be a TrainConfig, got {type(train_config).__name__}")
    _check_compatible(model_config, task)
    if train_config.snapshot_every and model_config.position not in ("learned", "lowrank", "sinusoidal"):
        raise ValueError(
            f"snapshot_every stores the additive position table, but position={model_config.position!r} has none; "
            "use learned/lowrank/sinusoidal or snapshot_every=0"
        )


def _run_key(model_config: TransformerConfig, train_config: TrainConfig, task: Task, **options: Any) -> dict[str, Any]:
    """Cache key of a run: both configs, the device type, the task, and the variant's own ``options``."""
    return {
        "model": model_config.to_dict(),
        "train": train_config.to_dict(),
        "device_type": resolve_device(train_config.device).type,
        "task": task.cache_key(),
        **options,
    }
