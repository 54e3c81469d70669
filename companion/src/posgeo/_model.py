r"""A small, readable transformer with a pluggable positional signal.

One architecture, six ways of telling it where tokens are (``TransformerConfig.position``):

============  =================================================================================
``none``      no positional signal at all (NoPE)
``sinusoidal`` the fixed table of :func:`posgeo.sinusoidal_encoding`, added to the embeddings
``learned``   a learned ``(max_len, d_model)`` table, added to the embeddings
``lowrank``   a learned table of rank r, :math:`P = A B^\top` with ``A (max_len, r)``, ``B (d_model, r)``
``rope``      rotary embeddings on queries and keys of every head (interleaved pairs
              ``(2k, 2k+1)``, frequencies :math:`10000^{-2k/d_h}`, as :func:`posgeo.rope_frequencies`)
``alibi``     the additive attention bias :math:`-m_h |i-j|`, slopes :func:`posgeo.alibi_slopes`
============  =================================================================================

Attention is written out explicitly (no fused kernels) so that attention weights can be
returned and float64 runs are exact to rounding. With ``position="none"`` and
``causal=False`` the model is permutation-equivariant token by token; a causal mask or any
positional signal breaks that symmetry (Theorem 1 of the book's P1 chapters).
"""

from __future__ import annotations

import contextlib

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator
import numpy as np
import torch
from torch import nn
from ._encodings import alibi_slopes, rope_frequencies, sinusoidal_encoding
from .validation import check_float, check_int

__all__ = [
    'TransformerConfig',
    'TransformerOutput',
    'Transformer',
    'count_parameters',
    'eval_mode',
]


POSITION_KINDS = ("none", "sinusoidal", "learned", "lowrank", "rope", "alibi")
"""Valid values of :attr:`TransformerConfig.position`."""

_NORMS = ("pre", "post")
_POOLINGS = ("mean", "first", "last")


@dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of :class:`Transformer` (validated on creation).

    Parameters
    ----------
    vocab_size : int
        Number of token ids (embedding rows and LM-head outputs).
    d_model : int, default 64
        Residual-stream width.
    n_heads : int, default 4
        Attention heads; must divide ``d_model``.
    n_layers : int, default 2
        Transformer blocks.
    d_ff : int, default 256
        Hidden width of the feed-forward layers.
    max_len : int, default 64
        Longest sequence accepted (rows of the position table).
    position : str, default "learned"
        One of :data:`POSITION_KINDS`.
    rank : int, optional
        Rank r of ``position="lowrank"`` (required there, ``1 <= r <= min(max_len, d_model)``);
        must be ``None`` for the other kinds.
    causal : bool, default False
        ``False``: bidirectional encoder; ``True``: causal decoder (token i attends to j <= i).
    dropout : float, default 0.0
        Dropout on embeddings, attention weights and residual branches.
    n_classes : int, optional
        Size of the sequence-classification head; ``None`` for an LM/MLM head only.
    pooling : {"mean", "first", "last"}, default "mean"
        How the classification head summarises the sequence: the mean over (non-padding)
        tokens, the token at position 0, or the last non-padding token. ``"mean"`` is the
        default because it adds no positional preference of its own: a position-free
        encoder with mean pooling is exactly permutation-*invariant*.
    init_std, init_mean : float, default 0.02, 0.0
        Token embeddings are initialised i.i.d. N(init_mean, init_std^2) (the initialisation
        ablation of P2, Zuo et al. 2024); linear layers and learned position tables use mean 0
        and the same std (a rank-r table gets factors scaled so that the entries of A B^T have
        std ``init_std``).
    norm : {"pre", "post"}, default "pre"
        LayerNorm placement: pre-norm (GPT-2 style, with a final LayerNorm) or post-norm
        (original Transformer / BERT style).
    tie_embeddings : bool, default False
        Share the token embedding matrix with the LM head.

    Raises
    ------
    ValueError
        Unknown ``position``/``norm``/``pooling``, ``d_model`` not divisible by ``n_heads``,
        odd head dimension with RoPE, odd ``d_model`` with sinusoidal positions, missing or
        invalid ``rank``, non-positive sizes or a dropout outside [0, 1).
    TypeError
        Sizes that are not ints.

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=10, d_model=16, n_heads=2, position="lowrank", rank=3)
    >>> cfg.head_dim, cfg.position
    (8, 'lowrank')
    >>> TransformerConfig(vocab_size=10, d_model=10, n_heads=3)
    Traceback (most recent call last):
    ...
    ValueError: d_model=10 is not divisible by n_heads=3; choose n_heads dividing d_model (e.g. n_heads=2 or n_heads=5)
    """

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 256
    max_len: int = 64
    position: str = "learned"
    rank: int | None = None
    causal: bool = False
    dropout: float = 0.0
    n_classes: int | None = None
    pooling: str = "mean"
    init_std: float = 0.02
    init_mean: float = 0.0
    norm: str = "pre"
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len"):
            check_int(getattr(self, name), name)
        if self.position not in POSITION_KINDS:
            raise ValueError(
                f"unknown position {self.position!r}; choose one of {', '.join(map(repr, POSITION_KINDS))}"
            )
        if self.d_model % self.n_heads:
            divisors = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0 and h > 1][:2]
            hint = " or ".join(f"n_heads={h}" for h in divisors) or "n_heads=1"
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                f"choose n_heads dividing d_model (e.g. {hint})"
            )
        if self.position == "rope" and self.head_dim % 2:
            raise ValueError(
                f"RoPE rotates pairs of coordinates, so the head dimension must be even, got "
                f"d_model/n_heads = {self.d_model}/{self.n_heads} = {self.head_dim}; change d_model or n_heads"
            )
        if self.position == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"sinusoidal positions need an even d_model (sin/cos pairs), got {self.d_model}")
        if self.position == "lowrank":
            if self.rank is None:
                raise ValueError("position='lowrank' needs rank=r (P = A @ B.T with A (max_len, r), B (d_model, r))")
            check_int(self.rank, "rank")
            if self.rank > min(self.max_len, self.d_model):
                raise ValueError(
                    f"rank={self.rank} exceeds min(max_len, d_model) = {min(self.max_len, self.d_model)}; "
                    "pass a smaller rank or use position='learned' for a full-rank table"
                )
        elif self.rank is not None:
            raise ValueError(f"rank={self.rank} is only used with position='lowrank', got position={self.position!r}; pass rank=None")
        if not isinstance(self.causal, bool):
            raise TypeError(f"causal must be a bool, got {self.causal!r}")
        if not 0.0 <= check_float(self.dropout, "dropout") < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.n_classes is not None:
            check_int(self.n_classes, "n_classes")
        if self.pooling not in _POOLINGS:
            raise ValueError(f"unknown pooling {self.pooling!r}; choose one of {', '.join(map(repr, _POOLINGS))}")
        check_float(self.init_std, "init_std", minimum=0.0, strict_minimum=True)
        if not isinstance(self.tie_embeddings, bool):
            raise TypeError(f"tie_embeddings must be a bool, got {self.tie_embeddings!r}")
        if not math.isfinite(float(self.init_mean)):
            raise ValueError(f"init_mean must be finite, got {self.init_mean}")
        if self.norm not in _NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose 'pre' (pre-LayerNorm) or 'post' (post-LayerNorm)")

    @property
    def head_dim(self) -> int:
        """Per-head dimension ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (for cache keys and logging)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TransformerOutput:
    """What :meth:`Transformer.forward` returns.

    Attributes
    ----------
    logits : torch.Tensor, shape (B, n, vocab_size)
        Per-token LM/MLM logits.
    last_hidden_state : torch.Tensor, shape (B, n, d_model)
        The final representation the heads read (after the final LayerNorm in pre-norm models).
    cls_logits : torch.Tensor or None, shape (B, n_classes)
        Sequence-classification logits when ``n_classes`` is set.
    hidden_states : tuple of torch.Tensor or None, each (B, n, d_model)
        With ``return_hidden=True``: the embedding output (tokens + additive positions)
        followed by the residual stream after each of the ``n_layers`` blocks.
    attentions : tuple of torch.Tensor or None, each (B, n_heads, n, n)
        With ``return_attention=True``: the attention probabilities of every layer
        (rows = queries, columns = keys; rows sum to one).
    """

    logits: torch.Tensor
    last_hidden_state: torch.Tensor
    cls_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs ``(x[2k], x[2k+1])`` of ``x (B, H, n, hd)`` by angles with cos/sin ``(n, hd/2)``."""
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


class _Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(
        self, x: torch.Tensor, allowed: torch.Tensor | None, bias: torch.Tensor | None, rope: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        B, n, d = x.shape
        H, hd = self.cfg.n_heads, self.cfg.head_dim
        q, k, v = self.qkv(x).view(B, n, 3, H, hd).permute(2, 0, 3, 1, 4)  # each (B, H, n, hd)
        if rope is not None:
            q, k = _rotate(q, *rope), _rotate(k, *rope)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)  # (B, H, n, n)
        if bias is not None:
            scores = scores + bias
        if allowed is not None:
            # finfo.min (not -inf): a query with no allowed key gets uniform weights, never NaN
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = scores.softmax(dim=-1)
        ctx = self.drop(probs) @ v  # (B, H, n, hd)
        return self.out(ctx.transpose(1, 2).reshape(B, n, d)), probs


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, allowed: torch.Tensor | None, bias: torch.Tensor | None, rope: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pre:
            a, probs = self.attn(self.ln1(x), allowed, bias, rope)
            x = x + self.drop(a)
            x = x + self.drop(self.mlp(self.ln2(x)))
        else:
            a, probs = self.attn(x, allowed, bias, rope)
            x = self.ln1(x + self.drop(a))
            x = self.ln2(x + self.drop(self.mlp(x)))
        return x, probs



# --------------------------------------------------------------------------- the positional kinds
# Each kind of TransformerConfig.position as one row: what it adds to the model at
# construction (``build``: parameters or buffers, created right after the token embedding so
# the parameter order is fixed), how it initialises them from the model's generator
# (``init``, after the token embedding), the additive table it adds to the input (``additive``)
# and what it passes to attention (``attention``: an ALiBi bias or RoPE's cos/sin).
def _nothing(*args: Any) -> None:
    return None


def _no_attention(model: Any, idx: torch.Tensor, dtype: torch.dtype) -> tuple[None, None]:
    return None, None


def _build_learned(model: Any, cfg: "TransformerConfig") -> None:
    model.pos = nn.Parameter(torch.empty(cfg.max_len, cfg.d_model))


def _init_learned(model: Any, g: torch.Generator, std: float) -> None:
    model.pos.copy_(torch.randn(model.pos.shape, generator=g) * std)


def _build_lowrank(model: Any, cfg: "TransformerConfig") -> None:
    assert cfg.rank is not None
    model.pos_a = nn.Parameter(torch.empty(cfg.max_len, cfg.rank))
    model.pos_b = nn.Parameter(torch.empty(cfg.d_model, cfg.rank))


def _init_lowrank(model: Any, g: torch.Generator, std: float) -> None:
    s = math.sqrt(std) / model.config.rank ** 0.25  # entries of A @ B.T then have std `std`
    model.pos_a.copy_(torch.randn(model.pos_a.shape, generator=g) * s)
    model.pos_b.copy_(torch.randn(model.pos_b.shape, generator=g) * s)


def _build_sinusoidal(model: Any, cfg: "TransformerConfig") -> None:
    table = torch.from_numpy(sinusoidal_encoding(cfg.max_len, cfg.d_model))  # float64: exact
    model.register_buffer("pos_fixed", table, persistent=False)


def _build_rope(model: Any, cfg: "TransformerConfig") -> None:
    theta = torch.from_numpy(rope_frequencies(cfg.head_dim))  # float64
    model.register_buffer("rope_theta", theta, persistent=False)  # (head_dim/2,)


def _rope_attention(model: Any, idx: torch.Tensor, dtype: torch.dtype) -> tuple[None, tuple[torch.Tensor, torch.Tensor]]:
    angles = idx[:, None] * model.rope_theta.to(torch.float64)[None, :]  # (n, hd/2)
    return None, (angles.cos().to(dtype), angles.sin().to(dtype))


def _build_alibi(model: Any, cfg: "TransformerConfig") -> None:
    slopes = torch.as_tensor(np.asarray(alibi_slopes(cfg.n_heads), dtype=np.float64))
    model.register_buffer("alibi_m", slopes, persistent=False)  # (n_heads,)


def _alibi_attention(model: Any, idx: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, None]:
    dist = (idx[:, None] - idx[None, :]).abs()  # (n, n)
    return (-model.alibi_m.to(torch.float64)[:, None, None] * dist).to(dtype)[None], None  # (1, H, n, n)


@dataclasses.dataclass(frozen=True)
class _Kind:
    build: Callable[[Any, Any], None] = _nothing
    init: Callable[[Any, torch.Generator, float], None] = _nothing
    additive: Callable[[Any], torch.Tensor | None] = _nothing
    attention: Callable[[Any, torch.Tensor, torch.dtype], tuple[Any, Any]] = _no_attention


_KINDS: dict[str, _Kind] = {
    "none": _Kind(),
    "sinusoidal": _Kind(build=_build_sinusoidal, additive=lambda m: m.pos_fixed),
    "learned": _Kind(build=_build_learned, init=_init_learned, additive=lambda m: m.pos),
    "lowrank": _Kind(build=_build_lowrank, init=_init_lowrank, additive=lambda m: m.pos_a @ m.pos_b.T),
    "rope": _Kind(build=_build_rope, attention=_rope_attention),
    "alibi": _Kind(build=_build_alibi, attention=_alibi_attention),
}
assert tuple(_KINDS) == POSITION_KINDS

class Transformer(nn.Module):
    """Encoder (``causal=False``) or causal decoder with a pluggable positional signal.

    Parameters
    ----------
    config : TransformerConfig
        Architecture; see :class:`TransformerConfig`.
    seed : int, keyword-only, default 0
        Seed of the weight initialisation (a local ``torch.Generator``; the global torch RNG
        is left untouched).

    Examples
    --------
    >>> cfg = TransformerConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1, d_ff=32,
    ...                         max_len=8, position="rope", n_classes=2)
    >>> model = Transformer(cfg, seed=0)
    >>> out = model(torch.tensor([[1, 2, 3, 4]]), return_attention=True)
    >>> tuple(out.logits.shape), tuple(out.cls_logits.shape), tuple(out.attentions[0].shape)
    ((1, 4, 11), (1, 2), (1, 2, 4, 4))
    >>> model.position_table() is None  # RoPE acts inside attention
    True
    """

    def __init__(self, config: TransformerConfig, *, seed: int = 0) -> None:
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        super().__init__()
        self.config = cfg = config
        with torch.random.fork_rng(devices=[]):  # module constructors draw from the global RNG
            self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
            _KINDS[cfg.position].build(self, cfg)
            self.drop = nn.Dropout(cfg.dropout)
            self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
            self.ln_f = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
            self.cls_head = nn.Linear(cfg.d_model, cfg.n_classes) if cfg.n_classes is not None else None
        self._init_weights(seed)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok.weight

    @torch.no_grad()
    def _init_weights(self, seed: int) -> None:
        cfg = self.config
        g = torch.Generator().manual_seed(int(seed))
        std = float(cfg.init_std)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(torch.randn(module.weight.shape, generator=g) * std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        self.tok.weight.copy_(torch.randn(self.tok.weight.shape, generator=g) * std + float(cfg.init_mean))
        _KINDS[cfg.position].init(self, g, std)

    def _additive_table(self) -> torch.Tensor | None:
        return _KINDS[self.config.position].additive(self)

    def position_table(self) -> np.ndarray | None:
        """The effective additive position table, or ``None`` for ``none``/``rope``/``alibi``.

        Returns
        -------
        numpy.ndarray, shape (max_len, d_model), float64, or None
            ``learned``: the table; ``lowrank``: ``A @ B.T``; ``sinusoidal``: the fixed table.
            A detached copy on the CPU.
        """
        table = self._additive_table()
        if table is None:
            return None
        return table.detach().to("cpu", torch.float64).numpy().copy()

    def forward(
        self,
        tokens: torch.Tensor | None = None,
        *,
        inputs_embeds: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        return_hidden: bool = False,
        return_attention: bool = False,
    ) -> TransformerOutput:
        """Run the model.

        Parameters
        ----------
        tokens : torch.Tensor, shape (B, n), integer, optional
            Token ids in ``[0, vocab_size)``.
        inputs_embeds : torch.Tensor, shape (B, n, d_model), keyword-only, optional
            Token embeddings given directly instead of ``tokens`` (positions are still added).
        attention_mask : torch.Tensor, shape (B, n), bool, keyword-only, optional
            ``True`` for real tokens, ``False`` for padding; padding keys get no attention and
            are left out of mean/last pooling.
        return_hidden, return_attention : bool, keyword-only
            Also return the hidden states / attention probabilities of every layer.

        Returns
        -------
        TransformerOutput

        Raises
        ------
        ValueError
            Neither or both of ``tokens`` and ``inputs_embeds``; wrong shapes; token ids out of
            range; a sequence longer than ``max_len``.
        """
        cfg = self.config
        if (tokens is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of tokens (B, n) or inputs_embeds (B, n, d_model)")
        if tokens is not None:
            if tokens.ndim != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
                raise ValueError(
                    f"tokens must be an integer tensor of shape (B, n), got dtype {tokens.dtype} and shape "
                    f"{tuple(tokens.shape)}; pass token ids, or float embeddings via inputs_embeds="
                )
            if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= cfg.vocab_size):
                raise ValueError(
                    f"token ids must lie in [0, {cfg.vocab_size}), got range "
                    f"[{int(tokens.min())}, {int(tokens.max())}]; increase vocab_size or fix the ids"
                )
            x = self.tok(tokens)
        else:
            assert inputs_embeds is not None
            if inputs_embeds.ndim != 3 or inputs_embeds.shape[-1] != cfg.d_model:
                raise ValueError(
                    f"inputs_embeds must have shape (B, n, {cfg.d_model}), got {tuple(inputs_embeds.shape)}"
                )
            x = inputs_embeds
        B, n = x.shape[:2]
        if n > cfg.max_len:
            raise ValueError(
                f"sequence length {n} exceeds max_len={cfg.max_len}; truncate the input or build the "
                f"model with max_len >= {n}"
            )
        table = self._additive_table()
        if table is not None:
            x = x + table[:n].to(x.dtype)
        x = self.drop(x)

        allowed: torch.Tensor | None = None  # (B or 1, 1, n, n) bool: query i may attend to key j
        if cfg.causal:
            allowed = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()[None, None]
        key_mask: torch.Tensor | None = None
        if attention_mask is not None:
            if attention_mask.shape != (B, n):
                raise ValueError(f"attention_mask must have shape (B, n) = {(B, n)}, got {tuple(attention_mask.shape)}")
            key_mask = attention_mask.to(device=x.device, dtype=torch.bool)
            km = key_mask[:, None, None, :]
            allowed = km if allowed is None else allowed & km

        idx = torch.arange(n, device=x.device, dtype=torch.float64)
        bias, rope = _KINDS[cfg.position].attention(self, idx, x.dtype)

        hidden = [x] if return_hidden else None
        attentions = [] if return_attention else None
        for block in self.blocks:
            x, probs = block(x, allowed, bias, rope)
            if hidden is not None:
                hidden.append(x)
            if attentions is not None:
                attentions.append(probs)
        h = self.ln_f(x)
        logits = self.lm_head(h)

        cls_logits = None
        if self.cls_head is not None:
            if cfg.pooling == "first":
                pooled = h[:, 0]
            elif key_mask is None:
                pooled = h.mean(dim=1) if cfg.pooling == "mean" else h[:, -1]
            elif cfg.pooling == "mean":
                w = key_mask.to(h.dtype)[..., None]
                pooled = (h * w).sum(dim=1) / w.sum(dim=1).clamp_min(1.0)
            else:  # last non-padding token
                last = (key_mask.long().cumsum(dim=1).argmax(dim=1))
                pooled = h[torch.arange(B, device=h.device), last]
            cls_logits = self.cls_head(pooled)

        return TransformerOutput(
            logits=logits,
            last_hidden_state=h,
            cls_logits=cls_logits,
            hidden_states=tuple(hidden) if hidden is not None else None,
            attentions=tuple(attentions) if attentions is not None else None,
        )


def count_parameters(module: nn.Module, *, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters of a module, shared tensors counted once.

    Parameters
    ----------
    module : torch.nn.Module
    trainable_only : bool, keyword-only, default True
        Count only parameters with ``requires_grad``.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        When ``module`` is not a ``torch.nn.Module``.

    Examples
    --------
    >>> count_parameters(nn.Linear(3, 2))
    8
    >>> cfg = TransformerConfig(vocab_size=5, d_model=4, n_heads=2, n_layers=1, d_ff=8, max_len=6)
    >>> count_parameters(Transformer(cfg)) - count_parameters(Transformer(dataclasses.replace(cfg, position="none")))
    24
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"count_parameters needs a torch.nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


@contextlib.contextmanager
def eval_mode(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Put a torch module in eval mode for the ``with`` block, then restore its mode.

    The one place that saves ``module.training`` and restores it on every exit path (an
    exception included). Gradients are not switched off: add ``torch.no_grad()`` if needed.

    Parameters
    ----------
    module : torch.nn.Module
        A posgeo :class:`Transformer` or any torch module (a Hugging Face model included).

    Yields
    ------
    torch.nn.Module
        The same module, in eval mode.

    Examples
    --------
    >>> net = torch.nn.Dropout(0.5)
    >>> with eval_mode(net):
    ...     net.training
    False
    >>> net.training
    True
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"eval_mode needs a torch.nn.Module, got {type(module).__name__}")
    was_training = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was_training)
