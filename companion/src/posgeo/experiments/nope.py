"""Position information without positional encodings: P2's adjacency pattern, measured.

P2 (Zuo, Guerzhoy & Guerzhoy 2024) trains causal transformers *without* positional
encodings (NoPE) on four synthetic tasks (:mod:`posgeo.experiments.tasks`) and observes that, from the
first causal attention layer on, hidden states of nearby positions are more similar than those
of distant ones. This module provides everything the book's chapter needs to measure that:

* :class:`P2Task`: a task of :mod:`posgeo.experiments.tasks` as a :class:`posgeo.Task` for
  :func:`posgeo.train` (causal LM, loss on the answer only);
* :func:`answer_accuracy`, :func:`greedy_answers`: exact-match accuracy;
* :func:`layer_hidden_states`, :func:`adjacency_by_layer`, :func:`similarity_profile`: the
  cosine self-similarity matrices of every layer and their adjacency scores;
* :func:`cumulative_mean_states`, :func:`expected_cumulative_cosine`,
  :func:`cosine_by_offset`, :func:`attention_uniformity`: the averaging argument;
* :func:`with_token_embedding_init`, :func:`train_with_embedding_init`,
  :func:`init_ablation_runs`, :func:`ablation_summary`: the initialisation ablation (token
  embeddings only), seed by seed and averaged;
* :func:`probe_features`, :func:`train_position_probe`, :func:`probe_by_layer`: MLP probes of
  position from cosine-similarity or variance features;
* :func:`without_causal_mask`: the same weights without the causal mask;
* :func:`seed_runs`, :func:`seed_accuracy_table`, :func:`seed_adjacency_table`,
  :func:`learning_curves`: the trained results over seeds, as tidy tables for
  :func:`posgeo.seed_summary`;
* :func:`adjacency_chance`: the score of a matrix without positional structure, under either
  diagonal convention;
* :class:`NopeSettings`, :func:`nope_settings`: the ``small``/``full`` experiment profiles;
* plots returning Altair charts (:mod:`posgeo`'s theme and palette).

Score convention
----------------
Unless stated otherwise, adjacency scores here use :func:`posgeo.adjacency_score` with
``include_diagonal=False`` and ``ties="half"`` (:data:`SCORE_OPTIONS`): with the diagonal
(P2's normaliser), a random matrix scores ``1/2 + 1/K`` on the 1-based row ``K`` (row
``k = K - 1`` of :func:`posgeo.adjacency_row_scores`, which counts from 0), because the
diagonal entry 1 beats every other entry (:func:`adjacency_chance`), and with strict ties the repeated tokens of a prompt (identical embeddings, exactly
equal cosines) pull the score of the embedding layer *below* 1/2. With both choices a matrix
without positional structure scores 1/2 in expectation, the chance level P2 reports for the
embedding layer.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence
import altair as alt
import numpy as np
import pandas as pd
import torch
from torch import nn
from posgeo import eval_mode
from posgeo import adjacency_score, cosine_similarity_matrix
from posgeo import Transformer, TransformerConfig, count_parameters
from posgeo import current_profile
from posgeo import progress_bar
from .tasks import TASKS, TaskSample, TaskVocab, encode_task_batch, make_task_samples, task_length_range
from posgeo import IGNORE_INDEX, Batch, TrainConfig, TrainResult, train
from .papers import P2_MAX_LEN, P2_REPORTED
import posgeo as pg

__all__ = [
    'SCORE_OPTIONS',
    'NopeSettings',
    'nope_settings',
    'P2Task',
    'task_examples',
    'train_nope_model',
    'seed_runs',
    'seed_accuracy_table',
    'seed_adjacency_table',
    'learning_curves',
    'adjacency_chance',
    'AnswerAccuracy',
    'answer_accuracy',
    'greedy_answers',
    'analysis_tokens',
    'random_tokens',
    'layer_hidden_states',
    'adjacency_by_layer',
    'SimilarityProfile',
    'similarity_profile',
    'without_causal_mask',
    'cumulative_mean_states',
    'expected_cumulative_cosine',
    'cosine_by_offset',
    'attention_uniformity',
    'with_token_embedding_init',
    'train_with_embedding_init',
    'ProbeResult',
    'probe_features',
    'train_position_probe',
    'probe_by_layer',
    'accuracy_table',
    'adjacency_table',
    'first_attention_output',
    'averaging_table',
    'embedding_null_scores',
    'embedding_null_table',
    'init_ablation_runs',
    'init_ablation',
    'ablation_summary',
    'depth_width_sweep',
    'sweep_training_runs',
    'causal_contrast',
    'plot_similarity_grid',
    'plot_offset_decay',
    'plot_adjacency_by_layer',
    'plot_init_ablation',
    'plot_learning_curves',
    'plot_probe_results',
]


SCORE_OPTIONS: dict[str, Any] = {"include_diagonal": False, "ties": "half"}
"""Options of :func:`posgeo.adjacency_score` used throughout (see the module docstring)."""

# P2's maximum prompt lengths (characters, "=" included), as in posgeo.experiments.tasks


# ============================================================================ settings


@dataclass(frozen=True)
class NopeSettings:
    """Sizes of the chapter's experiments for one profile (see :func:`nope_settings`).

    Attributes
    ----------
    profile : str
        ``"small"`` (2-core CPU, what the book runs) or ``"full"`` (P2's scale, for a GPU).
    d_model, n_layers, n_heads, d_ff : int
        The NoPE causal decoder trained on every task.
    steps, batch_size, lr : int, int, float
        Training: AdamW steps (one batch each), batch size and learning rate.
    seeds : tuple of int
        Training seeds of the results the chapter draws conclusions from (5 in both
        profiles): :func:`seed_runs` trains every task of ``seed_tasks`` once per seed, and
        :func:`init_ablation_runs` trains (and measures) every trained grid point once per
        seed. Seed ``s`` seeds the training pool, the initialisation and the batches; seed 0
        is the run that the seed-0 illustrations show.
    seed_tasks : tuple of str
        The tasks trained over all ``seeds`` (``small``: sorting, to fit the CPU budget
        beside the ablation's five seeds of indexing; ``full``: all four). The other tasks are
        trained with seed 0 only.
    n_train, n_test : int
        Training pool and test set per task (P2: 20,000 each).
    n_analysis : int
        Sequences whose cosine matrices are averaged.
    init_seeds : tuple of int
        Seeds over which the untrained statistics of the depth and width sweep are averaged.
    sweep_layers, sweep_widths : tuple of int
        The depth and width sweep at initialisation (:func:`depth_width_sweep`).
    sweep_trained : tuple of (int, int)
        The ``(layers, width)`` configurations that :func:`sweep_training_runs` trains once
        per seed of ``seeds`` (``small``: depths 1, 2, 4 at width 64 and widths 32, 64 at
        depth 2, what fits the CPU budget; ``full``: the whole sweep).
    sweep_steps : int
        Training steps per configuration and seed of the trained sweep.
    sweep_task : str
        The task the trained sweep trains on.
    init_means, init_stds : tuple of float
        The initialisation grid (token embeddings); measured over ``seeds``.
    ablation_steps : int
        Training steps per point and seed of the initialisation grid (0: at initialisation only).
    ablation_train_means : tuple of float
        The means whose grid points are also trained (all of ``init_means`` in ``full``).
    ablation_task : str
        The task the ablation trains on.
    probe_steps, probe_hidden : int
        Full-batch Adam steps and hidden width of the 4-layer MLP probes.
    """

    profile: str
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    steps: int
    batch_size: int
    lr: float
    seeds: tuple[int, ...]
    seed_tasks: tuple[str, ...]
    n_train: int
    n_test: int
    n_analysis: int
    init_seeds: tuple[int, ...]
    sweep_layers: tuple[int, ...]
    sweep_widths: tuple[int, ...]
    sweep_trained: tuple[tuple[int, int], ...]
    sweep_steps: int
    sweep_task: str
    init_means: tuple[float, ...]
    init_stds: tuple[float, ...]
    ablation_steps: int
    ablation_train_means: tuple[float, ...]
    ablation_task: str
    probe_steps: int
    probe_hidden: int

    @property
    def head_dim(self) -> int:
        """``d_model // n_heads``; the sweep keeps it fixed when it changes the width."""
        return self.d_model // self.n_heads

    def model_config(self, *, max_len: int = 64, causal: bool = True, **overrides: Any) -> TransformerConfig:
        """The NoPE decoder of this profile as a :class:`posgeo.TransformerConfig`.

        Parameters
        ----------
        max_len : int, keyword-only, default 64
            Longest sequence.
        causal : bool, keyword-only, default True
        **overrides
            Any other :class:`TransformerConfig` field (``n_layers``, ``d_model``, ...). When
            ``d_model`` is overridden and ``n_heads`` is not, the head dimension is kept
            (``n_heads = max(1, d_model // head_dim)``).

        Returns
        -------
        TransformerConfig
            ``position="none"``, the task vocabulary (26 tokens), no dropout.

        Examples
        --------
        >>> cfg = nope_settings("small").model_config(d_model=32)
        >>> cfg.position, cfg.causal, cfg.d_model
        ('none', True, 32)
        """
        kwargs: dict[str, Any] = {
            "vocab_size": TaskVocab().size,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "n_layers": self.n_layers,
            "d_ff": self.d_ff,
            "max_len": max_len,
            "position": "none",
            "causal": causal,
        }
        if "d_model" in overrides:
            d = overrides["d_model"]
            kwargs.setdefault("n_heads", self.n_heads)
            if "n_heads" not in overrides:
                overrides = {**overrides, "n_heads": max(1, int(d) // self.head_dim)}
            if "d_ff" not in overrides:
                overrides = {**overrides, "d_ff": int(d) * (self.d_ff // self.d_model)}
        kwargs.update(overrides)
        return TransformerConfig(**kwargs)

    def train_config(self, *, steps: int | None = None, seed: int = 0) -> TrainConfig:
        """The :class:`posgeo.TrainConfig` of this profile (``steps`` overrides the default)."""
        return TrainConfig(
            steps=self.steps if steps is None else steps,
            batch_size=self.batch_size,
            lr=self.lr,
            seed=seed,
            device="auto",
            log_every=max(1, (self.steps if steps is None else steps) // 20),
        )

    def table(self) -> pd.DataFrame:
        """All settings as a one-column DataFrame (for display)."""
        return pd.DataFrame({"value": {k: str(v) for k, v in dataclasses.asdict(self).items()}})


def nope_settings(profile: str | None = None) -> NopeSettings:
    """Return the experiment sizes of the NoPE chapter for a profile.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default: :func:`posgeo.current_profile` (``$POSGEO_PROFILE``, else ``"small"``).

    Returns
    -------
    NopeSettings
        ``small``: a 2-layer, 64-wide decoder trained for a few hundred steps on CPU; sweep
        and ablation at initialisation plus short training. ``full``: P2's 6-layer, 384-wide
        NanoGPT-size decoder (about 10.6M parameters), 20,000 training samples per task, the
        6/12/24 x 192/384/768 sweep; meant for a GPU.

    Raises
    ------
    ValueError
        For an unknown profile.

    Examples
    --------
    >>> s = nope_settings("full")
    >>> s.n_layers, s.d_model, s.sweep_layers, s.seeds
    (6, 384, (6, 12, 24), (0, 1, 2, 3, 4))
    """
    name = current_profile(profile)
    if name == "full":
        return NopeSettings(
            profile="full", d_model=384, n_layers=6, n_heads=6, d_ff=1536,
            steps=5000, batch_size=128, lr=5e-4, seeds=(0, 1, 2, 3, 4), seed_tasks=tuple(TASKS), n_train=20_000, n_test=20_000, n_analysis=512,
            init_seeds=(0, 1, 2, 3, 4), sweep_layers=(6, 12, 24), sweep_widths=(192, 384, 768),
            sweep_trained=tuple((L, w) for L in (6, 12, 24) for w in (192, 384, 768)), sweep_steps=2000, sweep_task="reversal", init_means=(0.0, 4.0, 8.0), init_stds=(0.002, 0.02, 0.2),
            ablation_steps=2000, ablation_train_means=(0.0, 4.0, 8.0), ablation_task="reversal",
            probe_steps=2000, probe_hidden=128,
        )
    return NopeSettings(
        profile="small", d_model=64, n_layers=2, n_heads=4, d_ff=128,
        steps=300, batch_size=64, lr=2e-3, seeds=(0, 1, 2, 3, 4), seed_tasks=("sorting",), n_train=5000, n_test=1000, n_analysis=128,
        init_seeds=(0, 1, 2), sweep_layers=(1, 2, 4), sweep_widths=(32, 64, 128, 384),
        sweep_trained=((1, 64), (2, 32), (2, 64), (4, 64)), sweep_steps=150, sweep_task="sorting", init_means=(0.0, 4.0, 8.0), init_stds=(0.002, 0.02, 0.2),
        ablation_steps=150, ablation_train_means=(0.0,), ablation_task="indexing",
        probe_steps=300, probe_hidden=32,
    )


# ============================================================================ the task


def _check_task_name(task: Any) -> str:
    if not isinstance(task, str) or task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return task


def _max_encoded_length(task: str, max_len: int) -> int:
    """Longest ``prompt + answer + <eos>`` of a task whose prompts have at most ``max_len`` characters."""
    if task == "addition":  # da + db + 2 characters; the sum has at most max(da, db) + 1 <= P - 2 digits
        return max_len + (max_len - 2) + 1
    if task == "reversal":
        return max_len + (max_len - 6) + 1
    if task == "indexing":
        size = max_len - 11
        return max_len + len(str(max(size - 1, 0))) + 1
    size = min((max_len - 8) // 2, 10)  # sorting: 2 L + 8 characters, L <= 10 distinct digits
    return (2 * size + 8) + size + 1


@dataclass(frozen=True, eq=False)
class P2Task:
    """One of P2's four synthetic tasks as a causal-LM :class:`posgeo.Task` with an answer-only loss.

    A fixed pool of ``n_samples`` samples (:func:`posgeo.make_task_samples`) is encoded once as
    ``prompt + answer + <eos>``, right-padded to :attr:`seq_len`; :meth:`sample` draws rows of
    the pool with replacement. Targets follow :class:`posgeo.LMTask` (``targets[:, i]`` is the
    token ``i + 1``) but are :data:`posgeo.IGNORE_INDEX` everywhere except where token ``i + 1``
    is an answer character or the final ``<eos>``: the prompt is context, never predicted.

    Parameters
    ----------
    task : {"addition", "reversal", "indexing", "sorting"}
    n_samples : int, default 20000
        Pool size (P2 trains on 20,000 samples per task).
    max_len, min_len : int, optional
        Prompt-length range, as in :func:`posgeo.make_task_samples` (default: P2's maximum).
    seed : int, default 0
        Seed of the pool.

    Attributes
    ----------
    vocab_size : int
        26 (:class:`posgeo.TaskVocab`).
    seq_len : int
        The longest possible encoded sample for ``max_len`` (so pools of any seed share it).
    kind : str
        ``"lm"``.
    samples : tuple of TaskSample
        The pool.

    Raises
    ------
    ValueError
        Unknown task, ``n_samples < 1``, or a prompt-length range the task cannot fill (see
        :func:`posgeo.make_task_samples`).

    Examples
    --------
    >>> task = P2Task("reversal", n_samples=8, max_len=10, seed=0)
    >>> task.seq_len
    15
    >>> b = task.sample(2, torch.Generator().manual_seed(0))
    >>> TaskVocab().decode(b.tokens[0]), b.kind
    ('rev(28)=82', 'lm')
    >>> b.targets[0].tolist()  # only '8', '2' and <eos> (id 1) are predicted
    [-100, -100, -100, -100, -100, -100, -100, 10, 4, 1, -100, -100, -100, -100, -100]
    """

    task: str
    n_samples: int = 20_000
    max_len: int | None = None
    min_len: int | None = None
    seed: int = 0
    kind: str = field(default="lm", init=False)
    n_classes: None = field(default=None, init=False)
    order_sensitive: bool = field(default=True, init=False)
    seq_len: int = field(default=0, init=False)
    samples: tuple[TaskSample, ...] = field(default=(), init=False, repr=False)
    _tokens: torch.Tensor = field(default=None, init=False, repr=False)  # type: ignore[assignment]
    _answer: torch.Tensor = field(default=None, init=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        _check_task_name(self.task)
        if isinstance(self.n_samples, bool) or not isinstance(self.n_samples, (int, np.integer)) or self.n_samples < 1:
            raise ValueError(f"n_samples must be a positive int, got {self.n_samples!r}; pass e.g. n_samples=20000")
        max_len = P2_MAX_LEN[self.task] if self.max_len is None else int(self.max_len)
        samples = make_task_samples(self.task, int(self.n_samples), max_len=max_len, min_len=self.min_len, seed=self.seed)
        hi = task_length_range(self.task)[1]
        seq_len = _max_encoded_length(self.task, max_len if hi is None else min(max_len, hi))
        tokens, answer = encode_task_batch(samples, TaskVocab(), max_len=seq_len)
        object.__setattr__(self, "seq_len", seq_len)
        object.__setattr__(self, "samples", tuple(samples))
        object.__setattr__(self, "_tokens", tokens)
        object.__setattr__(self, "_answer", answer)

    @property
    def vocab_size(self) -> int:
        """26: padding, end of sequence and 24 characters."""
        return TaskVocab().size

    @property
    def tokens(self) -> torch.Tensor:
        """The encoded pool, shape (n_samples, seq_len), int64 (a copy)."""
        return self._tokens.clone()

    @property
    def answer_mask(self) -> torch.Tensor:
        """True at answer characters and the final ``<eos>``, shape (n_samples, seq_len) (a copy)."""
        return self._answer.clone()

    def batch(self, rows: torch.Tensor | Sequence[int] | None = None) -> Batch:
        """The pool rows ``rows`` (default: all) as a :class:`posgeo.Batch`.

        Parameters
        ----------
        rows : sequence of int or 1-D LongTensor, optional

        Returns
        -------
        Batch
            ``kind="lm"``; ``attention_mask`` is False at padding.
        """
        idx = torch.arange(len(self.samples)) if rows is None else torch.as_tensor(rows, dtype=torch.long)
        tokens = self._tokens[idx]
        answer = self._answer[idx]
        targets = torch.full_like(tokens, IGNORE_INDEX)
        targets[:, :-1] = torch.where(answer[:, 1:], tokens[:, 1:], torch.full_like(tokens[:, 1:], IGNORE_INDEX))
        return Batch(tokens, targets, "lm", tokens != TaskVocab.pad_id)

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` pool rows (with replacement) using only ``generator``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        return self.batch(torch.randint(0, len(self.samples), (int(batch_size),), generator=generator))

    def cache_key(self) -> dict[str, Any]:
        """Class name, task and pool parameters."""
        return {
            "task": type(self).__name__, "name": self.task, "n_samples": int(self.n_samples),
            "max_len": self.max_len, "min_len": self.min_len, "seed": int(self.seed), "seq_len": self.seq_len,
        }


def task_examples(n_per_task: int = 2, *, seed: int = 0) -> pd.DataFrame:
    """A table of samples of the four tasks, with their lengths.

    Parameters
    ----------
    n_per_task : int, default 2
    seed : int, keyword-only, default 0

    Returns
    -------
    pandas.DataFrame
        Columns ``task, prompt, answer, prompt_len, tokens`` (``tokens``: encoded length with
        ``<eos>``) and ``P2 max prompt_len``.

    Raises
    ------
    ValueError
        ``n_per_task`` is not a positive int.

    Examples
    --------
    >>> task_examples(1, seed=0)["prompt"].tolist()[:2]
    ['1230+618=', 'rev(65230001869569)=']
    """
    if isinstance(n_per_task, bool) or not isinstance(n_per_task, (int, np.integer)) or n_per_task < 1:
        raise ValueError(f"n_per_task must be a positive int, got {n_per_task!r}")
    rows = []
    for t in TASKS:
        for s in make_task_samples(t, int(n_per_task), seed=seed):
            rows.append({
                "task": t, "prompt": s.prompt, "answer": s.answer, "prompt_len": len(s.prompt),
                "tokens": len(s.prompt) + len(s.answer) + 1, "P2 max prompt_len": P2_MAX_LEN[t],
            })
    return pd.DataFrame(rows)


# ============================================================================ training and accuracy


def train_nope_model(
    task: str,
    settings: NopeSettings,
    *,
    seed: int = 0,
    steps: int | None = None,
    progress: bool = True,
    cache: bool = True,
    **model_overrides: Any,
) -> TrainResult:
    """Train the profile's NoPE causal decoder on one of P2's tasks (seeded, cached).

    Parameters
    ----------
    task : {"addition", "reversal", "indexing", "sorting"}
    settings : NopeSettings
    seed : int, keyword-only, default 0
        Seeds the training pool (:class:`P2Task`), the initialisation and the batches.
    steps : int, keyword-only, optional
        Override ``settings.steps``.
    progress, cache : bool, keyword-only
        Passed to :func:`posgeo.train`.
    **model_overrides
        Passed to :meth:`NopeSettings.model_config` (e.g. ``n_layers=1``).

    Returns
    -------
    TrainResult

    Raises
    ------
    ValueError
        Unknown task; TypeError when ``settings`` is not a :class:`NopeSettings`.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1, n_train=64)
    >>> res = train_nope_model("sorting", s, steps=2, progress=False, cache=False)
    >>> res.model_config.position, res.model_config.causal, res.train_config.steps
    ('none', True, 2)
    """
    _check_task_name(task)
    if not isinstance(settings, NopeSettings):
        raise TypeError(f"settings must be a NopeSettings (from nope_settings()), got {type(settings).__name__}")
    p2 = P2Task(task, n_samples=settings.n_train, seed=seed)
    cfg = settings.model_config(max_len=p2.seq_len, **model_overrides)
    return train(cfg, settings.train_config(steps=steps, seed=seed), p2, progress=progress, cache=cache)


@dataclass(frozen=True)
class AnswerAccuracy:
    """Accuracy on a task's answers (see :func:`answer_accuracy`).

    Attributes
    ----------
    exact_match : float
        Fraction of samples whose every answer token (and the final ``<eos>``) is predicted.
    token_accuracy : float
        Fraction of answer tokens (with ``<eos>``) predicted.
    n_samples : int
    """

    exact_match: float
    token_accuracy: float
    n_samples: int


def _check_model(model: Any) -> Transformer:
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a posgeo Transformer, got {type(model).__name__}")
    return model


@torch.no_grad()
def answer_accuracy(model: Transformer, task: P2Task, *, batch_size: int = 512) -> AnswerAccuracy:
    """Teacher-forced exact-match accuracy of a causal model on a task's pool.

    The model reads ``prompt + answer`` and, at every position whose next token is an answer
    token or the final ``<eos>``, predicts it by argmax. A sample counts as correct when *all*
    of these predictions are right. This equals the exact-match accuracy of greedy decoding
    (:func:`greedy_answers`): if every teacher-forced prediction is right, greedy decoding
    reproduces the answer token by token, and conversely the first wrong teacher-forced
    prediction is the first token greedy decoding gets wrong.

    Parameters
    ----------
    model : Transformer
        A causal model (``causal=True``).
    task : P2Task
        Its pool is evaluated (build one with a seed different from training for a test set).
    batch_size : int, keyword-only, default 512

    Returns
    -------
    AnswerAccuracy

    Raises
    ------
    TypeError
        ``model`` is not a :class:`posgeo.Transformer` or ``task`` not a :class:`P2Task`.
    ValueError
        A bidirectional model (it would read the answer), or a model too short for the task.

    Examples
    --------
    >>> task = P2Task("indexing", n_samples=50, seed=1)
    >>> cfg = nope_settings("small").model_config(max_len=task.seq_len, d_model=16, n_layers=1)
    >>> acc = answer_accuracy(Transformer(cfg, seed=0), task)
    >>> acc.n_samples, acc.exact_match <= acc.token_accuracy
    (50, True)
    """
    model = _check_model(model)
    if not isinstance(task, P2Task):
        raise TypeError(f"task must be a P2Task, got {type(task).__name__}")
    if not model.config.causal:
        raise ValueError("answer_accuracy needs a causal model (causal=True); a bidirectional one reads the answer")
    if task.seq_len > model.config.max_len:
        raise ValueError(f"the task's sequences have {task.seq_len} tokens but max_len={model.config.max_len}; "
                         f"build the model with max_len >= {task.seq_len}")
    device = next(model.parameters()).device
    correct_rows, n_tok, n_tok_ok = [], 0, 0
    with eval_mode(model):
        for start in range(0, len(task.samples), int(batch_size)):
            b = task.batch(torch.arange(start, min(start + int(batch_size), len(task.samples)))).to(device)
            pred = model(b.tokens, attention_mask=b.attention_mask).logits.argmax(-1)
            keep = b.targets != IGNORE_INDEX
            ok = (pred == b.targets) | ~keep
            correct_rows.append(ok.all(dim=1).cpu())
            n_tok += int(keep.sum())
            n_tok_ok += int(((pred == b.targets) & keep).sum())
    rows = torch.cat(correct_rows)
    return AnswerAccuracy(float(rows.float().mean()), n_tok_ok / max(n_tok, 1), int(rows.numel()))


@torch.no_grad()
def greedy_answers(model: Transformer, prompts: Sequence[str], *, max_new_tokens: int = 20) -> list[str]:
    """Greedy decoding: extend each prompt by argmax tokens until ``<eos>``.

    Parameters
    ----------
    model : Transformer
        A causal model over :class:`posgeo.TaskVocab`.
    prompts : sequence of str
        Task prompts (ending in ``"="``).
    max_new_tokens : int, keyword-only, default 20
        Stop after this many tokens (or at ``max_len``) if no ``<eos>`` came.

    Returns
    -------
    list of str
        The generated answers (without ``<eos>``; padding is dropped).

    Raises
    ------
    TypeError
        ``model`` is not a Transformer.
    ValueError
        A bidirectional model, or ``prompts`` given as a single string.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(max_len=16, d_model=16, n_layers=1)
    >>> out = greedy_answers(Transformer(cfg, seed=0), ["rev(12)="], max_new_tokens=3)
    >>> len(out), len(out[0]) <= 3
    (1, True)
    """
    model = _check_model(model)
    if isinstance(prompts, str):
        raise ValueError("prompts must be a sequence of strings; wrap a single prompt in a list")
    if not model.config.causal:
        raise ValueError("greedy_answers needs a causal model (causal=True)")
    vocab = TaskVocab()
    device = next(model.parameters()).device
    out = []
    with eval_mode(model):
        for p in prompts:
            ids = vocab.encode(p)
            new: list[int] = []
            while len(new) < int(max_new_tokens) and len(ids) + len(new) < model.config.max_len:
                x = torch.tensor([ids + new], dtype=torch.long, device=device)
                nxt = int(model(x).logits[0, -1].argmax())
                if nxt == vocab.eos_id:
                    break
                new.append(nxt)
            out.append(vocab.decode(new))
    return out


# ============================================================================ similarity by layer


def analysis_tokens(task: str, n_sequences: int, *, seed: int = 0, prompt_len: int | None = None) -> torch.Tensor:
    """Token ids of equal-length task sequences for the similarity analysis.

    All prompts have the same length (default: P2's maximum for the task), and every sequence
    (``prompt + answer + <eos>``) is cut to the shortest one so that no position is padding.
    In a causal model the hidden states of the kept positions do not depend on the cut.

    Parameters
    ----------
    task : str
        One of :data:`posgeo.TASKS`.
    n_sequences : int
    seed : int, keyword-only, default 0
    prompt_len : int, keyword-only, optional
        Prompt length (must be feasible for the task).

    Returns
    -------
    torch.LongTensor of shape (n_sequences, n)

    Raises
    ------
    ValueError
        Unknown task, ``n_sequences < 1`` or an infeasible ``prompt_len``.

    Examples
    --------
    >>> tuple(analysis_tokens("reversal", 3, seed=0).shape)
    (3, 39)
    """
    _check_task_name(task)
    length = P2_MAX_LEN[task] if prompt_len is None else int(prompt_len)
    samples = make_task_samples(task, n_sequences, min_len=length, max_len=length, seed=seed)
    tokens, _ = encode_task_batch(samples, TaskVocab())
    n = min(len(s.prompt) + len(s.answer) + 1 for s in samples)
    return tokens[:, :n].contiguous()


def random_tokens(n_sequences: int, n: int, *, vocab_size: int = 26, seed: int = 0) -> torch.Tensor:
    """I.i.d. uniform token ids in ``[2, vocab_size)`` (no padding, no ``<eos>``).

    Parameters
    ----------
    n_sequences, n : int
    vocab_size : int, keyword-only, default 26
    seed : int, keyword-only, default 0

    Returns
    -------
    torch.LongTensor of shape (n_sequences, n)

    Raises
    ------
    ValueError
        Non-positive sizes or ``vocab_size < 3``.

    Examples
    --------
    >>> random_tokens(2, 4, seed=0).tolist()
    [[22, 17, 7, 2], [21, 5, 21, 9]]
    """
    for name, v in (("n_sequences", n_sequences), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if vocab_size < 3:
        raise ValueError(f"vocab_size must be >= 3 (ids 0 and 1 are padding and <eos>), got {vocab_size}")
    g = torch.Generator().manual_seed(int(seed))
    return torch.randint(2, int(vocab_size), (int(n_sequences), int(n)), generator=g)


@torch.no_grad()
def layer_hidden_states(model: Transformer, tokens: torch.Tensor) -> np.ndarray:
    """Hidden states of every layer: the embedding output, then the output of each block.

    Parameters
    ----------
    model : Transformer
    tokens : torch.LongTensor of shape (B, n)

    Returns
    -------
    numpy.ndarray of shape (n_layers + 1, B, n, d_model), float64
        Index 0 is the embedding layer (layer 0), index ``l`` the residual stream after block ``l``.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`posgeo.Transformer`.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=2)
    >>> layer_hidden_states(Transformer(cfg), random_tokens(3, 5)).shape
    (3, 3, 5, 16)
    """
    model = _check_model(model)
    with eval_mode(model):
        device = next(model.parameters()).device
        hs = model(tokens.to(device), return_hidden=True).hidden_states
    assert hs is not None
    return np.stack([h.detach().to("cpu", torch.float64).numpy() for h in hs])


def _check_hidden(hidden: Any, ndim: int = 4) -> np.ndarray:
    H = np.asarray(hidden, dtype=np.float64)
    if H.ndim != ndim:
        want = "(n_layers + 1, B, n, d)" if ndim == 4 else "(B, n, d)"
        raise ValueError(f"hidden must have shape {want}, got shape {H.shape}; use layer_hidden_states(model, tokens)")
    return H


def adjacency_by_layer(hidden: Any, **score_options: Any) -> np.ndarray:
    """Adjacency score of every layer (mean over the batch of per-sequence scores).

    Parameters
    ----------
    hidden : array of shape (n_layers + 1, B, n, d)
        From :func:`layer_hidden_states`.
    **score_options
        Override :data:`SCORE_OPTIONS` (``include_diagonal``, ``ties``).

    Returns
    -------
    numpy.ndarray of shape (n_layers + 1,)

    Raises
    ------
    ValueError
        Wrong shape.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(4, 16, 8))
    >>> adjacency_by_layer(np.stack([X, np.cumsum(X, axis=1)])).round(2).tolist()
    [0.52, 0.9]
    """
    H = _check_hidden(hidden)
    opts = {**SCORE_OPTIONS, **score_options, "progress": False}
    return np.array([adjacency_score(cosine_similarity_matrix(h), **opts) for h in H])


@dataclass(frozen=True)
class SimilarityProfile:
    """Cosine self-similarity by layer (see :func:`similarity_profile`).

    Attributes
    ----------
    mean_similarity : numpy.ndarray of shape (n_layers + 1, n, n)
        The cosine matrix ``C`` of every layer, averaged over the batch.
    scores : numpy.ndarray of shape (n_layers + 1,)
        Adjacency scores (:data:`SCORE_OPTIONS`; mean over sequences of per-sequence scores).
    """

    mean_similarity: np.ndarray
    scores: np.ndarray

    @property
    def n_layers(self) -> int:
        """Number of blocks (``len(scores) - 1``)."""
        return len(self.scores) - 1


def similarity_profile(model: Transformer, tokens: torch.Tensor) -> SimilarityProfile:
    """Cosine self-similarity matrices and adjacency scores of every layer of a model.

    Parameters
    ----------
    model : Transformer
    tokens : torch.LongTensor of shape (B, n)

    Returns
    -------
    SimilarityProfile

    Raises
    ------
    TypeError
        ``model`` is not a :class:`posgeo.Transformer`.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> prof = similarity_profile(Transformer(cfg), random_tokens(4, 6))
    >>> prof.mean_similarity.shape, prof.n_layers
    ((2, 6, 6), 1)
    """
    H = layer_hidden_states(model, tokens)
    C = np.stack([cosine_similarity_matrix(h) for h in H])  # (L+1, B, n, n)
    opts = {**SCORE_OPTIONS, "progress": False}
    scores = np.array([adjacency_score(c, **opts) for c in C])
    return SimilarityProfile(C.mean(axis=1), scores)


def without_causal_mask(model: Transformer) -> Transformer:
    """The same weights in a bidirectional model (``causal=False``), in eval mode.

    Without positional encodings and without the mask, every layer is permutation-equivariant:
    permuting the input tokens permutes the hidden states, so no hidden state can encode its
    position (Theorem 1 of P1; the Tsai et al. argument cited by P2).

    Parameters
    ----------
    model : Transformer

    Returns
    -------
    Transformer
        A new model; ``model`` is unchanged.

    Raises
    ------
    TypeError
        ``model`` is not a :class:`posgeo.Transformer`.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> without_causal_mask(Transformer(cfg)).config.causal
    False
    """
    model = _check_model(model)
    twin = Transformer(dataclasses.replace(model.config, causal=False))
    twin.load_state_dict(model.state_dict())
    return twin.eval()


# ============================================================================ the averaging argument


def cumulative_mean_states(
    n: int, d: int, *, batch: int = 64, mean: float = 0.0, std: float = 1.0, seed: int = 0
) -> np.ndarray:
    """Uniform causal attention over random embeddings: ``h_k = (e_1 + ... + e_k) / k``.

    The first causal layer of an untrained model attends almost uniformly (queries and keys
    are small), so its output at position ``k`` is close to the mean of the first ``k``
    (transformed) embeddings: adjacent positions share all but one term.

    Parameters
    ----------
    n, d : int
        Positions and dimension.
    batch : int, keyword-only, default 64
        Independent sequences.
    mean, std : float, keyword-only
        Embeddings are i.i.d. ``N(mean, std^2)`` per coordinate.
    seed : int, keyword-only, default 0

    Returns
    -------
    numpy.ndarray of shape (batch, n, d)

    Raises
    ------
    ValueError
        Non-positive sizes or ``std <= 0``.

    Examples
    --------
    >>> H = cumulative_mean_states(3, 2, batch=1, seed=0)
    >>> bool(np.allclose(H[0, 2] * 3, H[0, 1] * 2 + (H[0, 2] * 3 - H[0, 1] * 2)))
    True
    """
    for name, v in (("n", n), ("d", d), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not std > 0:
        raise ValueError(f"std must be > 0, got {std}")
    e = np.random.default_rng(seed).normal(mean, std, size=(batch, n, d))
    return np.cumsum(e, axis=1) / np.arange(1, n + 1)[None, :, None]


def expected_cumulative_cosine(n: int, *, snr: float = 0.0) -> np.ndarray:
    """Large-``d`` limit of the cosine between cumulative means ``h_k`` and ``h_l``.

    With embeddings ``e_i = m + z_i``, ``z_i ~ N(0, s^2 I_d)`` and ``r = |m|^2 / (s^2 d)``
    (``snr``), ``h_k . h_l -> |m|^2 + s^2 d / max(k, l)`` and ``|h_k|^2 -> |m|^2 + s^2 d / k``,
    so (1-based ``k``, ``l``)

    .. math:: C_{kl} = \\frac{r + 1/\\max(k,l)}{\\sqrt{(r + 1/k)(r + 1/l)}},

    which is ``sqrt(min(k,l)/max(k,l))`` for zero-mean embeddings. Every row increases towards
    the diagonal, so the adjacency score is 1; a large mean pushes every cosine towards 1
    without changing their order.

    Parameters
    ----------
    n : int
        Positions.
    snr : float, keyword-only, default 0
        ``|m|^2 / (s^2 d)``, the squared mean over the noise energy (``>= 0``).

    Returns
    -------
    numpy.ndarray of shape (n, n)
        Rows and columns are the 0-based positions ``k - 1``.

    Raises
    ------
    ValueError
        ``n < 1`` or ``snr < 0``.

    Examples
    --------
    >>> expected_cumulative_cosine(4)[3].round(3).tolist()  # sqrt(k / 4)
    [0.5, 0.707, 0.866, 1.0]
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not snr >= 0:
        raise ValueError(f"snr must be >= 0, got {snr}")
    k = np.arange(1, n + 1, dtype=np.float64)
    far = np.maximum(k[:, None], k[None, :])
    return (snr + 1.0 / far) / np.sqrt((snr + 1.0 / k[:, None]) * (snr + 1.0 / k[None, :]))


def cosine_by_offset(C: Any, *, max_offset: int | None = None) -> np.ndarray:
    """Mean cosine at each offset ``t = k - i >= 0`` below the diagonal (causal part).

    Parameters
    ----------
    C : array of shape (n, n) or (B, n, n)
        Cosine matrices (batches are averaged first).
    max_offset : int, keyword-only, optional
        Largest offset (default ``n - 1``).

    Returns
    -------
    numpy.ndarray of shape (max_offset + 1,)
        Entry ``t`` is the mean of ``C[k, k - t]`` over ``k >= t`` (entry 0 is 1 for cosines).

    Raises
    ------
    ValueError
        ``C`` is not square or ``max_offset`` is out of range.

    Examples
    --------
    >>> cosine_by_offset(expected_cumulative_cosine(3)).round(3).tolist()
    [1.0, 0.762, 0.577]
    """
    A = np.asarray(C, dtype=np.float64)
    if A.ndim == 3:
        A = A.mean(axis=0)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"C must have shape (n, n) or (B, n, n), got {np.shape(C)}")
    n = A.shape[0]
    t_max = n - 1 if max_offset is None else int(max_offset)
    if not 0 <= t_max < n:
        raise ValueError(f"max_offset must be in [0, {n - 1}], got {max_offset}")
    return np.array([np.diagonal(A, offset=-t).mean() for t in range(t_max + 1)])


@torch.no_grad()
def attention_uniformity(model: Transformer, tokens: torch.Tensor, *, layer: int = 0) -> float:
    """Mean total-variation distance between a layer's attention rows and uniform causal attention.

    Parameters
    ----------
    model : Transformer
        A causal model.
    tokens : torch.LongTensor of shape (B, n)
    layer : int, keyword-only, default 0
        Block index (0 = the first attention layer).

    Returns
    -------
    float
        ``mean over sequences, heads and rows k of 0.5 * sum_j |a_kj - 1/(k+1)|`` over the causal
        prefix: 0 for exactly uniform averaging, close to 1 for one-hot attention on long rows.

    Raises
    ------
    ValueError
        A bidirectional model or a layer index out of range.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1, init_std=1e-4)
    >>> attention_uniformity(Transformer(cfg), random_tokens(2, 8)) < 1e-3  # tiny weights: uniform
    True
    """
    model = _check_model(model)
    if not model.config.causal:
        raise ValueError("attention_uniformity compares with uniform *causal* attention; pass a causal model")
    if not 0 <= int(layer) < model.config.n_layers:
        raise ValueError(f"layer must be in [0, {model.config.n_layers - 1}], got {layer}")
    with eval_mode(model):
        att = model(tokens.to(next(model.parameters()).device), return_attention=True).attentions
    assert att is not None
    a = att[int(layer)].to("cpu", torch.float64)  # (B, H, n, n)
    n = a.shape[-1]
    uniform = torch.tril(torch.ones(n, n, dtype=torch.float64)) / torch.arange(1, n + 1, dtype=torch.float64)[:, None]
    return float(0.5 * (a - uniform).abs().sum(-1).mean())


# ============================================================================ initialisation ablation


def with_token_embedding_init(model: Transformer, *, mean: float, std: float, seed: int = 0) -> Transformer:
    """A copy of ``model`` whose token embeddings are redrawn i.i.d. ``N(mean, std^2)``.

    Only the token-embedding table changes (P2's initialisation ablation); attention, MLP and
    output layers keep their initialisation. (:class:`posgeo.TransformerConfig`'s ``init_std``
    sets the standard deviation of *every* weight matrix, a different experiment.)

    Parameters
    ----------
    model : Transformer
    mean, std : float, keyword-only
        Mean and standard deviation (``std > 0``).
    seed : int, keyword-only, default 0
        Seed of a local ``torch.Generator``.

    Returns
    -------
    Transformer
        A new model (``model`` is unchanged).

    Raises
    ------
    ValueError
        ``std <= 0`` or a non-finite ``mean``.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> m = with_token_embedding_init(Transformer(cfg), mean=4.0, std=0.2, seed=0)
    >>> round(float(m.tok.weight.detach().mean()), 1)
    4.0
    """
    model = _check_model(model)
    if not (isinstance(std, (int, float)) and std > 0 and math.isfinite(std)):
        raise ValueError(f"std must be a positive finite number, got {std!r}")
    if not (isinstance(mean, (int, float)) and math.isfinite(mean)):
        raise ValueError(f"mean must be a finite number, got {mean!r}")
    twin = Transformer(model.config)
    twin.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        w = twin.tok.weight
        w.copy_(torch.randn(w.shape, generator=g, dtype=torch.float32).to(w.dtype) * float(std) + float(mean))
    twin.train(model.training)
    return twin


def train_with_embedding_init(
    model_config: TransformerConfig,
    train_config: TrainConfig,
    task: Any,
    *,
    embedding_mean: float,
    embedding_std: float,
    progress: bool = True,
    cache: bool = True,
) -> TrainResult:
    """Like :func:`posgeo.train`, but starting from token embeddings drawn ``N(mean, std^2)``.

    The loop of :func:`posgeo.train` itself (AdamW, fresh seeded batches, the same loss,
    gradient clipping, dropout under a forked RNG, evaluation every ``eval_every`` steps),
    without freezing or snapshots; the model is :func:`with_token_embedding_init` applied to
    ``Transformer(model_config, seed)``.

    Parameters
    ----------
    model_config : TransformerConfig
    train_config : TrainConfig
        ``freeze`` and ``snapshot_every`` must be unset.
    task : Task
        E.g. a :class:`P2Task`.
    embedding_mean, embedding_std : float, keyword-only
    progress, cache : bool, keyword-only

    Returns
    -------
    TrainResult
        ``result.model()`` rebuilds the trained model (the embeddings are in the state dict).

    Raises
    ------
    TypeError
        Configs of the wrong type.
    ValueError
        ``freeze``/``snapshot_every`` set, a bidirectional model on an LM task, or an invalid
        ``embedding_std``.

    Examples
    --------
    >>> task = P2Task("indexing", n_samples=64, seed=0)
    >>> cfg = nope_settings("small").model_config(max_len=task.seq_len, d_model=16, n_layers=1)
    >>> res = train_with_embedding_init(cfg, TrainConfig(steps=3, batch_size=8, device="cpu"), task,
    ...                                 embedding_mean=4.0, embedding_std=0.02, progress=False, cache=False)
    >>> round(float(res.state_dict["tok.weight"].mean()), 1)
    4.0
    """
    if train_config.freeze or train_config.snapshot_every:
        raise ValueError("train_with_embedding_init supports neither freeze nor snapshot_every; use posgeo.train")
    if not (isinstance(embedding_std, (int, float)) and embedding_std > 0):
        raise ValueError(f"embedding_std must be > 0, got {embedding_std!r}")
    mean, std = float(embedding_mean), float(embedding_std)
    return train(
        model_config, train_config, task,
        prepare=lambda model: with_token_embedding_init(model, mean=mean, std=std, seed=train_config.seed),
        cache_namespace="train-embinit", cache_options={"embedding_init": [mean, std]},
        desc=f"train (mean={mean}, std={std})", progress=progress, cache=cache,
    )


# ============================================================================ probes


@dataclass(frozen=True)
class ProbeResult:
    """Test performance of a position probe (see :func:`train_position_probe`).

    Attributes
    ----------
    nrmse : float
        Root-mean-square error over the standard deviation of the true positions (1: no better
        than predicting the mean position; 0: exact).
    pearson_r : float
        Pearson correlation between predicted and true positions (``nan`` for constant predictions).
    n_train, n_test : int
        Tokens used for fitting and for testing (split by sequence; the validation tokens
        used for early stopping are in neither).
    """

    nrmse: float
    pearson_r: float
    n_train: int
    n_test: int


_PROBE_KINDS = ("cosine", "variance")


def probe_features(hidden: Any, kind: str) -> np.ndarray:
    """Per-token features for a position probe, from one layer's hidden states.

    Parameters
    ----------
    hidden : array of shape (B, n, d)
    kind : {"cosine", "variance"}
        ``"cosine"``: the token's row of the cosine self-similarity matrix of its sequence,
        *without the diagonal* (``n - 1`` values ``C[k, j]``, ``j != k``, in order; the
        diagonal 1 would give the position away by its index). The adjacency hypothesis of P2
        predicts that the row peaks around ``k``. ``"variance"``: the variance of the hidden
        state over its ``d`` coordinates (one value), the quantity Chi et al. (2023) find to
        shrink with position.

    Returns
    -------
    numpy.ndarray of shape (B, n, n - 1) or (B, n, 1)

    Raises
    ------
    ValueError
        Unknown ``kind``, wrong shape, or ``n < 2``.

    Examples
    --------
    >>> H = np.random.default_rng(0).normal(size=(2, 5, 3))
    >>> probe_features(H, "cosine").shape, probe_features(H, "variance").shape
    ((2, 5, 4), (2, 5, 1))
    """
    if kind not in _PROBE_KINDS:
        raise ValueError(f"unknown probe feature kind {kind!r}; choose one of {_PROBE_KINDS}")
    H = _check_hidden(hidden, ndim=3)
    B, n, _ = H.shape
    if n < 2:
        raise ValueError(f"need at least 2 positions per sequence, got n={n}")
    if kind == "variance":
        return H.var(axis=-1)[..., None]
    C = cosine_similarity_matrix(H)
    off = ~np.eye(n, dtype=bool)
    return C[:, off].reshape(B, n, n - 1)


def _mlp(n_in: int, hidden: int, depth: int, generator: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = n_in
    for _ in range(depth - 1):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, 1))
    net = nn.Sequential(*layers)
    with torch.no_grad():
        for m in net:
            if isinstance(m, nn.Linear):
                bound = 1.0 / math.sqrt(m.in_features)
                m.weight.copy_((torch.rand(m.weight.shape, generator=generator) * 2 - 1) * bound)
                m.bias.zero_()
    return net


def train_position_probe(
    features: Any,
    *,
    test_fraction: float = 0.25,
    hidden: int = 64,
    depth: int = 4,
    steps: int = 400,
    lr: float = 3e-3,
    seed: int = 0,
) -> ProbeResult:
    """Fit an MLP that predicts each token's position from its features; report test NRMSE and R.

    Sequences (not tokens) are split into test, validation and fitting sets (the validation
    set is a fifth of the non-test sequences), so a test token's sequence is never seen in
    training. Features are standardised with fitting statistics; the target is the position
    ``k`` (standardised). The MLP has ``depth`` linear layers with ReLU in between (P2: a
    4-layer MLP), trained full-batch with Adam on the mean squared error; the weights with the
    lowest validation error (checked every 10 steps, and at step 0) are kept (early stopping),
    so uninformative features give an NRMSE near 1 instead of an overfitted probe.

    Parameters
    ----------
    features : array of shape (B, n, f)
        E.g. :func:`probe_features`; token ``k`` of every sequence has position ``k``.
    test_fraction : float, keyword-only, default 0.25
    hidden : int, keyword-only, default 64
    depth : int, keyword-only, default 4
        Number of linear layers (``>= 1``; 1 is a linear probe).
    steps : int, keyword-only, default 400
    lr : float, keyword-only, default 3e-3
    seed : int, keyword-only, default 0
        Seeds the split and the MLP initialisation (the global RNG is untouched).

    Returns
    -------
    ProbeResult

    Raises
    ------
    ValueError
        Wrong shape, non-finite features, fewer than 2 sequences in a split, or invalid sizes.

    Examples
    --------
    >>> k = np.arange(10.0)
    >>> feats = np.tile(np.stack([k, k ** 2], axis=-1), (10, 1, 1))  # position is readable
    >>> r = train_position_probe(feats, steps=200, seed=0)
    >>> r.nrmse < 0.1, r.pearson_r > 0.99
    (True, True)
    """
    X = np.asarray(features, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(f"features must have shape (B, n, f), got {X.shape}; see probe_features")
    if not np.all(np.isfinite(X)):
        raise ValueError("features contain NaN or infinite values; remove them first")
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    for name, v in (("hidden", hidden), ("depth", depth), ("steps", steps)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    B, n, f = X.shape
    n_test = int(round(B * float(test_fraction)))
    n_val = int(round((B - n_test) / 5))
    if min(n_test, n_val, B - n_test - n_val) < 2:
        raise ValueError(f"need at least 2 sequences in the test, validation and fitting sets, got B={B} with "
                         f"test_fraction={test_fraction}; pass more sequences")
    order = np.random.default_rng(seed).permutation(B)
    test, val, fit = order[:n_test], order[n_test:n_test + n_val], order[n_test + n_val:]
    pos = np.broadcast_to(np.arange(n, dtype=np.float64), (B, n))
    mu, sd = X[fit].reshape(-1, f).mean(0), X[fit].reshape(-1, f).std(0)
    sd = np.where(sd > 1e-12, sd, 1.0)
    ymu, ysd = pos[fit].mean(), pos[fit].std()

    def tensors(rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.as_tensor((X[rows].reshape(-1, f) - mu) / sd, dtype=torch.float32)
        y = torch.as_tensor((pos[rows].reshape(-1) - ymu) / ysd, dtype=torch.float32)
        return x, y

    (xf, yf), (xv, yv), (xt, _) = tensors(fit), tensors(val), tensors(test)
    yte = pos[test].reshape(-1)
    net = _mlp(f, int(hidden), int(depth), torch.Generator().manual_seed(int(seed)))
    opt = torch.optim.Adam(net.parameters(), lr=float(lr))

    def val_loss() -> float:
        with torch.no_grad():
            return float(((net(xv).squeeze(-1) - yv) ** 2).mean())

    best, best_state = val_loss(), {k: v.clone() for k, v in net.state_dict().items()}
    for step in range(int(steps)):
        loss = ((net(xf).squeeze(-1) - yf) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 10 == 0 or step + 1 == int(steps):
            v = val_loss()
            if v < best:
                best, best_state = v, {k: t.clone() for k, t in net.state_dict().items()}
    net.load_state_dict(best_state)
    with torch.no_grad():
        pred = net(xt).squeeze(-1).double().numpy() * ysd + ymu
    nrmse = float(np.sqrt(np.mean((pred - yte) ** 2)) / yte.std())
    r = float(np.corrcoef(pred, yte)[0, 1]) if pred.std() > 1e-12 else float("nan")
    return ProbeResult(nrmse, r, int(fit.size * n), int(yte.size))


def probe_by_layer(
    hidden: Any,
    *,
    kinds: Sequence[str] = _PROBE_KINDS,
    hidden_width: int = 64,
    steps: int = 400,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Position probes on every layer, for each feature kind.

    Parameters
    ----------
    hidden : array of shape (n_layers + 1, B, n, d)
        From :func:`layer_hidden_states`.
    kinds : sequence of {"cosine", "variance"}, keyword-only
    hidden_width, steps, seed : keyword-only
        Passed to :func:`train_position_probe` (``hidden=hidden_width``).
    progress : bool, keyword-only, default True

    Returns
    -------
    pandas.DataFrame
        Index ``layer``; columns ``NRMSE (<kind>)`` and ``R (<kind>)``.

    Raises
    ------
    ValueError
        Wrong shape or unknown kind.

    Examples
    --------
    >>> H = np.random.default_rng(0).normal(size=(2, 12, 6, 4))
    >>> probe_by_layer(H, steps=5, hidden_width=4, progress=False).shape
    (2, 4)
    """
    H = _check_hidden(hidden)
    for k in kinds:
        if k not in _PROBE_KINDS:
            raise ValueError(f"unknown probe feature kind {k!r}; choose from {_PROBE_KINDS}")
    rows = []
    for layer in progress_bar(range(H.shape[0]), enabled=progress, desc="probes"):
        row: dict[str, float] = {"layer": layer}
        for k in kinds:
            res = train_position_probe(probe_features(H[layer], k), hidden=hidden_width, steps=steps, seed=seed)
            row[f"NRMSE ({k})"] = res.nrmse
            row[f"R ({k})"] = res.pearson_r
        rows.append(row)
    return pd.DataFrame(rows).set_index("layer")


# ============================================================================ experiment tables


def _layer_columns(n_layers_plus_one: int) -> list[str]:
    return [f"layer {i}" for i in range(n_layers_plus_one)]


def accuracy_table(
    results: Mapping[str, TrainResult], settings: NopeSettings, *, test_seed: int = 1000, batch_size: int = 512
) -> pd.DataFrame:
    """Exact-match and token accuracy of trained models on fresh test sets of their tasks.

    Parameters
    ----------
    results : mapping of task name to TrainResult
        E.g. ``{t: train_nope_model(t, settings) for t in TASKS}``.
    settings : NopeSettings
        ``n_test`` test samples per task, drawn with ``test_seed``.
    test_seed : int, keyword-only, default 1000
        Seed of the test pool (the training pools use the training seed).
    batch_size : int, keyword-only, default 512

    Returns
    -------
    pandas.DataFrame
        Index: task; columns ``exact match``, ``token accuracy`` (answer tokens and ``<eos>``,
        teacher-forced, see :func:`answer_accuracy`), ``final train loss``, ``steps``,
        ``test prompts seen in training`` (fraction of test prompts that also occur in the
        training pool: short additions repeat) and ``best constant answer``: the exact match
        of a model that ignores the prompt and always gives the training pool's most common
        answer (the chance level a trained model must beat).

    Raises
    ------
    ValueError
        An unknown task name.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1,
    ...                         n_train=64, n_test=16)
    >>> res = train_nope_model("indexing", s, steps=2, progress=False, cache=False)
    >>> accuracy_table({"indexing": res}, s).columns.tolist()[:2]
    ['exact match', 'token accuracy']
    """
    rows = {}
    for name, res in results.items():
        _check_task_name(name)
        test = P2Task(name, n_samples=settings.n_test, seed=test_seed)
        acc = answer_accuracy(res.model(), test, batch_size=batch_size)
        pool = P2Task(name, n_samples=settings.n_train, seed=res.train_config.seed).samples
        train_prompts = {s.prompt for s in pool}
        seen = np.mean([s.prompt in train_prompts for s in test.samples])
        answers = pd.Series([s.answer for s in pool]).value_counts()
        constant = np.mean([s.answer == answers.index[0] for s in test.samples])
        rows[name] = {
            "exact match": acc.exact_match,
            "token accuracy": acc.token_accuracy,
            "final train loss": res.final("loss"),
            "steps": res.train_config.steps,
            "test prompts seen in training": float(seen),
            "best constant answer": float(constant),
        }
    return pd.DataFrame(rows).T.astype({"steps": int})


def seed_runs(
    settings: NopeSettings,
    *,
    tasks: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    progress: bool = True,
    cache: bool = True,
) -> dict[tuple[str, int], TrainResult]:
    """Train the profile's NoPE decoder on each task once per seed (:func:`train_nope_model`).

    Seed 0 is the same run (same cache entry) as ``train_nope_model(task, settings)``.

    Parameters
    ----------
    settings : NopeSettings
    tasks : sequence of str, keyword-only, optional
        Default ``settings.seed_tasks``.
    seeds : sequence of int, keyword-only, optional
        Default ``settings.seeds``.
    progress, cache : bool, keyword-only
        Passed to :func:`posgeo.train`.

    Returns
    -------
    dict of (task, seed) to TrainResult
        In the order task by task, seed by seed.

    Raises
    ------
    ValueError
        An unknown task, no task or no seed, or a repeated seed.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1, n_train=64)
    >>> runs = seed_runs(s, tasks=["sorting"], seeds=(0, 1), progress=False, cache=False)
    >>> list(runs), [r.train_config.seed for r in runs.values()]
    ([('sorting', 0), ('sorting', 1)], [0, 1])
    """
    names = [_check_task_name(t) for t in (settings.seed_tasks if tasks is None else tasks)]
    seed_list = [int(x) for x in (settings.seeds if seeds is None else seeds)]
    if not names or not seed_list:
        raise ValueError("seed_runs needs at least one task and one seed")
    if len(set(seed_list)) != len(seed_list):
        raise ValueError(f"seeds must be distinct, got {seed_list}")
    return {(t, s): train_nope_model(t, settings, seed=s, progress=progress, cache=cache) for t in names for s in seed_list}


def _check_runs(runs: Any) -> Mapping[tuple[str, int], TrainResult]:
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must be a non-empty mapping {(task, seed): TrainResult}, as seed_runs returns")
    for key in runs:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"runs keys must be (task, seed) pairs, as seed_runs returns; got {key!r}")
        _check_task_name(key[0])
    return runs


def seed_accuracy_table(runs: Mapping[tuple[str, int], TrainResult], settings: NopeSettings, *,
                        test_seed: int = 1000) -> pd.DataFrame:
    """:func:`accuracy_table` of every run, one row per (task, seed): a tidy table for :func:`posgeo.seed_summary`.

    Parameters
    ----------
    runs : mapping of (task, seed) to TrainResult
        From :func:`seed_runs`.
    settings : NopeSettings
    test_seed : int, keyword-only, default 1000
        The test pool (the same for every seed: the seeds vary the training, not the test).

    Returns
    -------
    pandas.DataFrame
        Columns ``task``, ``seed`` and those of :func:`accuracy_table`.

    Raises
    ------
    ValueError
        ``runs`` is empty or its keys are not (task, seed) pairs.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1, n_train=64, n_test=16)
    >>> runs = seed_runs(s, tasks=["indexing"], seeds=(0, 1), progress=False, cache=False)
    >>> seed_accuracy_table(runs, s)[["task", "seed"]].values.tolist()
    [['indexing', 0], ['indexing', 1]]
    """
    rows = []
    for (task, seed), res in _check_runs(runs).items():
        row = accuracy_table({task: res}, settings, test_seed=test_seed).iloc[0].to_dict()
        rows.append({"task": task, "seed": int(seed), **row})
    return pd.DataFrame(rows)


def seed_adjacency_table(
    runs: Mapping[tuple[str, int], TrainResult],
    tokens: Mapping[str, torch.Tensor],
    *,
    include_diagonal: Sequence[bool] = (False, True),
) -> pd.DataFrame:
    """Adjacency score of every layer of every run, untrained and trained, under both diagonal conventions.

    The untrained model of a run is its own initialisation (``Transformer(config,
    seed=seed)``), so ``init`` and ``trained`` rows of one seed are paired
    (:func:`posgeo.seed_difference` with ``paired=True``). Ties count 1/2 in both conventions.

    Parameters
    ----------
    runs : mapping of (task, seed) to TrainResult
        From :func:`seed_runs`.
    tokens : mapping of task to torch.LongTensor of shape (B, n)
        The analysis sequences of each task (:func:`analysis_tokens`).
    include_diagonal : sequence of bool, keyword-only, default (False, True)
        The conventions to score: without the diagonal (the book's, :data:`SCORE_OPTIONS`) and
        with it (P2's normaliser; its chance level is :func:`adjacency_chance`).

    Returns
    -------
    pandas.DataFrame
        One row per (task, state, diagonal, seed): columns ``task``, ``state`` (``init`` or
        ``trained``), ``diagonal`` (``"without"`` or ``"with (P2)"``), ``seed``,
        ``layer 0 .. layer L`` and ``chance`` (:func:`adjacency_chance` for the tokens' length).

    Raises
    ------
    ValueError
        Bad ``runs``, or a task without analysis tokens.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1, n_train=64)
    >>> runs = seed_runs(s, tasks=["sorting"], seeds=(0, 1), progress=False, cache=False)
    >>> t = seed_adjacency_table(runs, {"sorting": analysis_tokens("sorting", 4)})
    >>> len(t), t.columns.tolist()
    (8, ['task', 'state', 'diagonal', 'seed', 'layer 0', 'layer 1', 'chance'])
    """
    rows = []
    for (task, seed), res in _check_runs(runs).items():
        if task not in tokens:
            raise ValueError(f"no analysis tokens for task {task!r}; pass tokens={{{task!r}: analysis_tokens({task!r}, n)}}")
        toks = tokens[task]
        for state, model in (("init", Transformer(res.model_config, seed=res.train_config.seed)), ("trained", res.model())):
            H = layer_hidden_states(model, toks)
            for diag in include_diagonal:
                sc = adjacency_by_layer(H, include_diagonal=bool(diag))
                rows.append({"task": task, "state": state, "diagonal": "with (P2)" if diag else "without", "seed": int(seed),
                             **dict(zip(_layer_columns(len(sc)), sc.tolist())),
                             "chance": adjacency_chance(int(toks.shape[1]), include_diagonal=bool(diag))})
    return pd.DataFrame(rows)


def adjacency_chance(n: int, *, include_diagonal: bool = False) -> float:
    """Expected adjacency score of an ``n x n`` matrix without positional structure.

    For a row whose off-diagonal causal entries are exchangeable (and ties count 1/2), every
    pair of them is ascending with probability 1/2. Without the diagonal (pairs
    ``i < j < k``) that is the score of every row, so the chance level is 1/2. With the
    diagonal (P2's normaliser, pairs ``i < j <= k``), the diagonal entry 1 is the largest of
    its row, so the ``K - 1`` pairs that end on it always count: the 1-based row ``K`` (with
    ``K`` entries) scores

    .. math:: \\frac{(K - 1) + \\binom{K - 1}{2} / 2}{\\binom{K}{2}} = \\frac12 + \\frac1K ,

    and the score, the mean over the rows ``K = 2 .. n`` that have a pair, is
    ``1/2 + (H_n - 1) / (n - 1)`` with ``H_n`` the harmonic number.

    Parameters
    ----------
    n : int
        Positions (``>= 2``; ``>= 3`` without the diagonal).
    include_diagonal : bool, keyword-only, default False

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``n`` too small.

    Examples
    --------
    >>> adjacency_chance(39), round(adjacency_chance(39, include_diagonal=True), 4)
    (0.5, 0.5856)
    >>> adjacency_chance(2, include_diagonal=True)  # one row, K = 2: 1/2 + 1/2
    1.0
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < (2 if include_diagonal else 3):
        raise ValueError(f"n must be an int >= {2 if include_diagonal else 3}, got {n!r}")
    if not include_diagonal:
        return 0.5
    K = np.arange(2, int(n) + 1, dtype=np.float64)
    return float(np.mean(0.5 + 1.0 / K))


def learning_curves(runs: Mapping[tuple[str, int], TrainResult]) -> pd.DataFrame:
    """The recorded training loss and batch token accuracy of every run (no extra training).

    Parameters
    ----------
    runs : mapping of (task, seed) to TrainResult
        From :func:`seed_runs` (or ``{(task, 0): train_nope_model(task, settings)}``).

    Returns
    -------
    pandas.DataFrame
        One row per (task, seed, logged step): ``task``, ``seed``, ``step`` (the updates
        taken before that step's batch), ``loss`` and ``token accuracy`` (of that batch,
        answer tokens and ``<eos>``, teacher-forced).

    Raises
    ------
    ValueError
        Bad ``runs``.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), d_model=16, n_heads=2, d_ff=32, n_layers=1, n_train=64)
    >>> runs = seed_runs(s, tasks=["sorting"], seeds=(0,), progress=False, cache=False)
    >>> learning_curves(runs).columns.tolist()
    ['task', 'seed', 'step', 'loss', 'token accuracy']
    """
    rows = []
    for (task, seed), res in _check_runs(runs).items():
        for rec in res.history:
            if "loss" in rec:
                rows.append({"task": task, "seed": int(seed), "step": int(rec["step"]), "loss": float(rec["loss"]),
                             "token accuracy": float(rec.get("accuracy", np.nan))})
    return pd.DataFrame(rows, columns=["task", "seed", "step", "loss", "token accuracy"])


def adjacency_table(profiles: Mapping[str, SimilarityProfile], *, reported: bool = True) -> pd.DataFrame:
    """Adjacency score per layer of several models, with P2's reported values beside them.

    Parameters
    ----------
    profiles : mapping of str to SimilarityProfile
        Row label -> profile (all with the same number of layers).
    reported : bool, keyword-only, default True
        Add the columns ``P2 layer 0`` (0.5) and ``P2 layer 1`` (``"0.8-1.0"``).

    Returns
    -------
    pandas.DataFrame
        Rows: labels; columns ``layer 0 .. layer L`` (and P2's values).

    Raises
    ------
    ValueError
        Profiles with different depths.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> prof = similarity_profile(Transformer(cfg), random_tokens(4, 8))
    >>> adjacency_table({"random init": prof}).columns.tolist()
    ['layer 0', 'layer 1', 'P2 layer 0', 'P2 layer 1']
    """
    depths = {p.n_layers for p in profiles.values()}
    if len(depths) > 1:
        raise ValueError(f"profiles have different numbers of layers {sorted(depths)}; tabulate them separately")
    df = pd.DataFrame({k: p.scores for k, p in profiles.items()}).T
    df.columns = _layer_columns(df.shape[1])
    if reported:
        lo, hi = P2_REPORTED.layer1_score_range
        df["P2 layer 0"] = P2_REPORTED.embedding_score
        df["P2 layer 1"] = f"{lo:.1f}-{hi:.1f}"
    return df


@torch.no_grad()
def first_attention_output(model: Transformer, tokens: torch.Tensor) -> np.ndarray:
    """The output of the first attention sublayer alone (before the residual sum and the MLP).

    Captured with a forward hook on ``model.blocks[0].attn``: in a pre-norm block the first
    layer's output is ``h_1 = e + a + mlp(...)`` with ``a`` this attention output.

    Parameters
    ----------
    model : Transformer
    tokens : torch.LongTensor of shape (B, n)

    Returns
    -------
    numpy.ndarray of shape (B, n, d_model), float64

    Raises
    ------
    TypeError
        ``model`` is not a :class:`posgeo.Transformer`.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> first_attention_output(Transformer(cfg), random_tokens(2, 5)).shape
    (2, 5, 16)
    """
    model = _check_model(model)
    captured: list[torch.Tensor] = []
    handle = model.blocks[0].attn.register_forward_hook(lambda mod, inp, out: captured.append(out[0].detach()))
    with eval_mode(model):
        try:
            model(tokens.to(next(model.parameters()).device))
        finally:
            handle.remove()
    return captured[0].to("cpu", torch.float64).numpy()


def averaging_table(
    init_model: Transformer, trained_model: Transformer, tokens: torch.Tensor, *, seed: int = 0
) -> pd.DataFrame:
    """The averaging argument in numbers: uniform causal means versus real first layers.

    Rows: ``uniform mean of N(0, I)`` (:func:`cumulative_mean_states` with the tokens' shape and
    the model width), ``uniform mean of token embeddings`` (the cumulative mean of the model's
    own embedding layer on ``tokens``), ``1-layer model, init`` and ``1-layer model, trained``.
    Columns: the adjacency score of the ``inputs`` (the vectors averaged; layer 0 for the
    models), of the ``attention output`` (the means themselves; the first attention sublayer
    alone for the models, :func:`first_attention_output`), of the ``layer 1`` output (the
    residual stream ``e + a + mlp``; equal to the means for the constructions), and the
    total-variation distance of the first attention layer from uniform causal attention
    (:func:`attention_uniformity`; 0 for the constructions).

    Parameters
    ----------
    init_model, trained_model : Transformer
        Causal models (typically 1 layer; block 1 is read).
    tokens : torch.LongTensor of shape (B, n)
    seed : int, keyword-only, default 0
        Seed of the Gaussian vectors.

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    ValueError
        Bidirectional models.

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> t = averaging_table(Transformer(cfg, seed=0), Transformer(cfg, seed=1), random_tokens(8, 12))
    >>> t.index.tolist()[0], t.columns.tolist()
    ('uniform mean of N(0, I)', ['inputs', 'attention output', 'layer 1', 'attention TV to uniform'])
    """
    B, n = tokens.shape
    d = init_model.config.d_model
    opts = {**SCORE_OPTIONS, "progress": False}

    def score(X: np.ndarray) -> float:
        return adjacency_score(cosine_similarity_matrix(X), **opts)

    rows = {}
    E = np.random.default_rng(seed).normal(size=(B, n, d))
    M = np.cumsum(E, axis=1) / np.arange(1, n + 1)[None, :, None]
    rows["uniform mean of N(0, I)"] = (score(E), score(M), score(M), 0.0)
    H0 = layer_hidden_states(init_model, tokens)[0]
    M0 = np.cumsum(H0, axis=1) / np.arange(1, n + 1)[None, :, None]
    rows["uniform mean of token embeddings"] = (score(H0), score(M0), score(M0), 0.0)
    for label, m in (("1-layer model, init", init_model), ("1-layer model, trained", trained_model)):
        H = layer_hidden_states(m, tokens)
        A = first_attention_output(m, tokens)
        rows[label] = (score(H[0]), score(A), score(H[1]), attention_uniformity(m, tokens))
    return pd.DataFrame(rows, index=["inputs", "attention output", "layer 1", "attention TV to uniform"]).T


def embedding_null_scores(tokens: torch.Tensor, *, d_model: int, n_draws: int = 20, seed: int = 0) -> np.ndarray:
    """Embedding-layer adjacency scores of ``tokens`` under random embedding tables.

    Each draw gives every token id an i.i.d. ``N(0, I_d)`` vector and scores the embedded
    sequences (:data:`SCORE_OPTIONS`). This is the distribution of the layer-0 score of an
    untrained model: about 1/2, but not exactly, because task prompts repeat characters at
    fixed positions (``rev(`` ... ``)=``), so the rows of ``C`` are not exchangeable.

    Parameters
    ----------
    tokens : torch.LongTensor of shape (B, n)
    d_model : int, keyword-only
    n_draws : int, keyword-only, default 20
    seed : int, keyword-only, default 0

    Returns
    -------
    numpy.ndarray of shape (n_draws,)

    Raises
    ------
    ValueError
        Non-positive ``d_model`` or ``n_draws``, or tokens that are not a 2-D integer tensor.

    Examples
    --------
    >>> s = embedding_null_scores(random_tokens(64, 16, seed=1), d_model=32, n_draws=5)
    >>> bool(abs(s.mean() - 0.5) < 0.02)
    True
    """
    for name, v in (("d_model", d_model), ("n_draws", n_draws)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    ids = np.asarray(tokens)
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        raise ValueError(f"tokens must be an integer array of shape (B, n), got dtype {ids.dtype} and shape {ids.shape}")
    rng = np.random.default_rng(seed)
    V = int(ids.max()) + 1
    return np.array([adjacency_by_layer(rng.normal(size=(V, int(d_model)))[ids][None])[0] for _ in range(int(n_draws))])


def embedding_null_table(
    tokens: Mapping[str, torch.Tensor], scores: pd.DataFrame, *, d_model: int, n_draws: int = 20, seed: int = 0
) -> pd.DataFrame:
    """Embedding-layer scores of models beside the null distribution of random embedding tables.

    Parameters
    ----------
    tokens : mapping of task name to torch.LongTensor of shape (B, n)
        The analysis sequences of each task.
    scores : pandas.DataFrame
        An :func:`adjacency_table` whose index labels read ``"<task>, <state>"`` (e.g.
        ``"reversal, init"``) and which has a ``layer 0`` column.
    d_model : int, keyword-only
        Width of the random tables.
    n_draws, seed : int, keyword-only
        Passed to :func:`embedding_null_scores`.

    Returns
    -------
    pandas.DataFrame
        Index: task; columns ``null mean``, ``null sd`` and, for every state, its layer-0 score
        and ``<state> (z)`` = (score - null mean) / null sd.

    Raises
    ------
    ValueError
        ``scores`` has no ``layer 0`` column.

    Examples
    --------
    >>> toks = {"reversal": analysis_tokens("reversal", 4)}
    >>> scores = pd.DataFrame({"layer 0": [0.5]}, index=["reversal, init"])
    >>> embedding_null_table(toks, scores, d_model=8, n_draws=3).columns.tolist()
    ['null mean', 'null sd', 'init', 'init (z)']
    """
    if "layer 0" not in scores.columns:
        raise ValueError("scores needs a 'layer 0' column; pass the output of adjacency_table")
    rows = {}
    for task, toks in tokens.items():
        null = embedding_null_scores(toks, d_model=d_model, n_draws=n_draws, seed=seed)
        mean, sd = float(null.mean()), float(null.std(ddof=1))
        row: dict[str, float] = {"null mean": mean, "null sd": sd}
        for label in scores.index:
            if str(label).startswith(f"{task}, "):
                state = str(label)[len(task) + 2:]
                value = float(scores.loc[label, "layer 0"])
                row[state] = value
                row[f"{state} (z)"] = (value - mean) / sd
        rows[task] = row
    return pd.DataFrame(rows).T


def _norm_ratio(H: np.ndarray) -> float:
    """Mean ``|h_1 - h_0| / |h_0|``: how much block 1 adds relative to the token embedding."""
    return float((np.linalg.norm(H[1] - H[0], axis=-1) / np.linalg.norm(H[0], axis=-1)).mean())


def _constant_answer_share(task: P2Task) -> float:
    """The share of ``task``'s pool whose answer is its most common one: the exact match of a
    model that ignores the prompt."""
    answers = pd.Series([x.answer for x in task.samples]).value_counts()
    return float(answers.iloc[0] / len(task.samples))


def init_ablation_runs(
    settings: NopeSettings,
    tokens: torch.Tensor,
    *,
    task: str | None = None,
    steps: int | None = None,
    seeds: Sequence[int] | None = None,
    train_means: Sequence[float] | None = None,
    progress: bool = True,
    cache: bool = True,
) -> pd.DataFrame:
    """Adjacency scores for token-embedding initialisations ``N(mean, std^2)``, one row per grid point and seed.

    For every ``mean`` in ``settings.init_means``, ``std`` in ``settings.init_stds`` and seed,
    the profile's model ``Transformer(cfg, seed=seed)`` is built, its token embeddings redrawn
    (:func:`with_token_embedding_init`, seeded by the same seed), and the scores of its layers
    measured on ``tokens``. With ``steps > 0`` the grid points whose mean is in
    ``train_means`` are also trained on ``task`` from that same initialisation
    (:func:`train_with_embedding_init`, training pool and batches seeded by the seed) and
    measured again, so the untrained and trained values of one seed are paired.

    Parameters
    ----------
    settings : NopeSettings
    tokens : torch.LongTensor of shape (B, n)
        Analysis sequences (e.g. :func:`analysis_tokens`).
    task : str, keyword-only, optional
        Training task; default ``settings.ablation_task``.
    steps : int, keyword-only, optional
        Default ``settings.ablation_steps``.
    seeds : sequence of int, keyword-only, optional
        Default ``settings.seeds``.
    train_means : sequence of float, keyword-only, optional
        Means whose grid points are trained; default ``settings.ablation_train_means``.
    progress, cache : bool, keyword-only

    Returns
    -------
    pandas.DataFrame
        Columns ``mean``, ``std``, ``seed``, ``layer 0``, ``layer 1``, ``last layer``,
        ``update/embedding`` (mean ``|h_1 - h_0| / |h_0|``) and, with ``steps > 0``,
        ``layer 1 (trained)``, ``last layer (trained)``, ``exact match (trained)`` (on the
        training pool) and ``best constant answer`` (the share of the pool's most common
        answer: the exact match of a model that ignores the prompt), ``nan`` at the means not
        trained.

    Raises
    ------
    ValueError
        An unknown task, no seed or a repeated seed.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), init_means=(0.0,), init_stds=(0.2,), ablation_steps=0)
    >>> init_ablation_runs(s, random_tokens(4, 8), seeds=(0, 1), progress=False)[["std", "seed"]].values.tolist()
    [[0.2, 0.0], [0.2, 1.0]]
    """
    steps = settings.ablation_steps if steps is None else int(steps)
    seeds = tuple(int(x) for x in (settings.seeds if seeds is None else seeds))
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty sequence of distinct ints, got {seeds}")
    task = _check_task_name(settings.ablation_task if task is None else task)
    train_means = tuple(settings.ablation_train_means if train_means is None else train_means)
    cfg = settings.model_config(max_len=max(tokens.shape[1], P2Task(task, n_samples=1).seq_len))
    grid = [(m, s) for m in settings.init_means for s in settings.init_stds]
    rows = []
    for mean, std in progress_bar(grid, enabled=progress, desc="init ablation"):
        for seed in seeds:
            model = with_token_embedding_init(Transformer(cfg, seed=seed), mean=mean, std=std, seed=seed)
            H = layer_hidden_states(model, tokens)
            sc = adjacency_by_layer(H)
            row: dict[str, float] = {"mean": mean, "std": std, "seed": seed, "layer 0": float(sc[0]), "layer 1": float(sc[1]),
                                     "last layer": float(sc[-1]), "update/embedding": _norm_ratio(H)}
            if steps > 0:
                row.update({"layer 1 (trained)": np.nan, "last layer (trained)": np.nan, "exact match (trained)": np.nan,
                            "best constant answer": np.nan})
                if mean in train_means:
                    p2 = P2Task(task, n_samples=settings.n_train, seed=seed)
                    res = train_with_embedding_init(
                        cfg, settings.train_config(steps=steps, seed=seed), p2,
                        embedding_mean=mean, embedding_std=std, progress=False, cache=cache,
                    )
                    trained = res.model()
                    sct = adjacency_by_layer(layer_hidden_states(trained, tokens))
                    row.update({"layer 1 (trained)": float(sct[1]), "last layer (trained)": float(sct[-1]),
                                "exact match (trained)": answer_accuracy(trained, p2).exact_match,
                                "best constant answer": _constant_answer_share(p2)})
            rows.append(row)
    return pd.DataFrame(rows)


def init_ablation(
    settings: NopeSettings,
    tokens: torch.Tensor,
    *,
    task: str | None = None,
    steps: int | None = None,
    seeds: Sequence[int] | None = None,
    train_means: Sequence[float] | None = None,
    level: float = 0.95,
    progress: bool = True,
    cache: bool = True,
) -> pd.DataFrame:
    """:func:`init_ablation_runs` averaged over seeds, with intervals: one row per grid point.

    Parameters
    ----------
    settings, tokens, task, steps, seeds, train_means, progress, cache
        As in :func:`init_ablation_runs`.
    level : float, keyword-only, default 0.95
        Level of the intervals (Student t over the seeds, :func:`posgeo.seed_interval`).

    Returns
    -------
    pandas.DataFrame
        Index ``(mean, std)``; the means over seeds of the columns of
        :func:`init_ablation_runs`, ``layer 1 sd`` (over seeds), and ``<column> low`` /
        ``<column> high`` (the interval) for ``layer 1`` and ``layer 1 (trained)``; ``nan``
        where a point is not trained or there is a single seed.

    Raises
    ------
    ValueError
        As :func:`init_ablation_runs`.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), init_means=(0.0,),
    ...                         init_stds=(0.002, 0.2), ablation_steps=0)
    >>> init_ablation(s, random_tokens(4, 8), seeds=(0, 1), progress=False).index.tolist()
    [(0.0, 0.002), (0.0, 0.2)]
    """
    runs = init_ablation_runs(settings, tokens, task=task, steps=steps, seeds=seeds, train_means=train_means,
                              progress=progress, cache=cache)
    return ablation_summary(runs, level=level)


def ablation_summary(runs: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """The per-seed rows of :func:`init_ablation_runs` averaged over seeds, with intervals.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`init_ablation_runs`.
    level : float, keyword-only, default 0.95

    Returns
    -------
    pandas.DataFrame
        As :func:`init_ablation`.

    Raises
    ------
    ValueError
        ``runs`` lacks the columns ``mean``, ``std``, ``seed`` or ``layer 1``.

    Examples
    --------
    >>> runs = pd.DataFrame({"mean": [0.0] * 3, "std": [0.2] * 3, "seed": [0, 1, 2], "layer 1": [0.5, 0.52, 0.48]})
    >>> ablation_summary(runs)[["layer 1", "layer 1 low"]].round(3).values.tolist()
    [[0.5, 0.45]]
    """
    from posgeo import seed_interval

    if not isinstance(runs, pd.DataFrame) or not {"mean", "std", "seed", "layer 1"} <= set(runs.columns):
        raise ValueError("ablation_summary: pass the table of init_ablation_runs (columns mean, std, seed, layer 1, ...)")
    metrics = [c for c in runs.columns if c not in ("mean", "std", "seed")]
    rows = []
    for (mean, std), group in runs.groupby(["mean", "std"], sort=False):
        row: dict[str, float] = {"mean": mean, "std": std}
        for c in metrics:
            v = group[c].to_numpy(dtype=float)
            row[c] = float(np.mean(v)) if np.isfinite(v).all() else np.nan
            if c in ("layer 1", "layer 1 (trained)"):
                iv = seed_interval(v, level=level) if v.size > 1 and np.isfinite(v).all() else None
                if c == "layer 1":
                    row["layer 1 sd"] = iv.sd if iv else np.nan
                row[f"{c} low"] = iv.low if iv else np.nan
                row[f"{c} high"] = iv.high if iv else np.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index(["mean", "std"])


def depth_width_sweep(
    settings: NopeSettings,
    tokens: torch.Tensor,
    *,
    seeds: Sequence[int] | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Adjacency scores of untrained NoPE decoders of several depths and widths (default initialisation).

    The head dimension of the profile is kept (``n_heads = width // head_dim``) and
    ``d_ff / d_model`` too. The same configurations trained over seeds:
    :func:`sweep_training_runs`.

    Parameters
    ----------
    settings : NopeSettings
        ``sweep_layers`` x ``sweep_widths``.
    tokens : torch.LongTensor of shape (B, n)
    seeds : sequence of int, keyword-only, optional
        Initialisation seeds whose scores are averaged; default ``settings.init_seeds``.
    progress : bool, keyword-only

    Returns
    -------
    pandas.DataFrame
        Index ``(layers, width)``; columns ``parameters``, ``layer 0``, ``layer 1``,
        ``last layer``, ``mean over layers >= 1`` and ``update/embedding``.

    Raises
    ------
    ValueError
        No seed.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), init_seeds=(0,), sweep_layers=(1,), sweep_widths=(16, 32))
    >>> depth_width_sweep(s, random_tokens(4, 8), progress=False).index.tolist()
    [(1, 16), (1, 32)]
    """
    seeds = tuple(int(x) for x in (settings.init_seeds if seeds is None else seeds))
    if not seeds:
        raise ValueError("depth_width_sweep needs at least one seed")
    grid = [(L, w) for L in settings.sweep_layers for w in settings.sweep_widths]
    rows = []
    for L, w in progress_bar(grid, enabled=progress, desc="depth x width"):
        cfg = settings.model_config(max_len=tokens.shape[1], n_layers=L, d_model=w)
        rec: dict[str, list[float]] = {}
        for seed in seeds:
            H = layer_hidden_states(Transformer(cfg, seed=seed), tokens)
            sc = adjacency_by_layer(H)
            for k, v in (("layer 0", sc[0]), ("layer 1", sc[1]), ("last layer", sc[-1]),
                         ("mean over layers >= 1", sc[1:].mean()), ("update/embedding", _norm_ratio(H))):
                rec.setdefault(k, []).append(float(v))
        n_params = count_parameters(Transformer(cfg))
        rows.append({"layers": L, "width": w, "parameters": n_params, **{k: float(np.mean(v)) for k, v in rec.items()}})
    return pd.DataFrame(rows).set_index(["layers", "width"])


def sweep_training_runs(
    settings: NopeSettings,
    tokens: torch.Tensor,
    *,
    configs: Sequence[tuple[int, int]] | None = None,
    task: str | None = None,
    steps: int | None = None,
    seeds: Sequence[int] | None = None,
    progress: bool = True,
    cache: bool = True,
) -> pd.DataFrame:
    """Train NoPE decoders of several depths and widths once per seed; one row per configuration and seed.

    For every ``(layers, width)`` and seed, ``Transformer(cfg, seed=seed)`` is measured, then
    trained from that initialisation on ``task`` (training pool and batches seeded by the
    seed, :func:`posgeo.train`) and measured again, so the untrained and trained values of one
    seed are paired (:func:`posgeo.seed_difference` with ``paired=True``). The head dimension
    and ``d_ff / d_model`` of the profile are kept, as in :func:`depth_width_sweep`.

    Parameters
    ----------
    settings : NopeSettings
    tokens : torch.LongTensor of shape (B, n)
        Analysis sequences (e.g. :func:`analysis_tokens` of ``task``).
    configs : sequence of (int, int), keyword-only, optional
        ``(layers, width)`` pairs; default ``settings.sweep_trained``.
    task : str, keyword-only, optional
        Default ``settings.sweep_task``.
    steps : int, keyword-only, optional
        Training steps (``>= 1``); default ``settings.sweep_steps``.
    seeds : sequence of int, keyword-only, optional
        Default ``settings.seeds``.
    progress, cache : bool, keyword-only
        ``progress``: one bar over the runs; ``cache``: passed to :func:`posgeo.train`.

    Returns
    -------
    pandas.DataFrame
        Columns ``layers``, ``width``, ``seed``, ``parameters``, ``layer 1 (init)``,
        ``layer 1 (trained)``, ``last layer (trained)``, ``exact match (trained)`` (on the
        training pool) and ``best constant answer`` (the share of the pool's most common
        answer: the exact match of a model that ignores the prompt).

    Raises
    ------
    ValueError
        An unknown task, no configuration, a configuration that is not two positive ints
        with the width a multiple of the head dimension, ``steps < 1``, no seed or a
        repeated seed.

    Examples
    --------
    >>> s = dataclasses.replace(nope_settings("small"), n_train=32)
    >>> runs = sweep_training_runs(s, random_tokens(4, 8), configs=[(1, 16)], steps=2, seeds=(0, 1),
    ...                            progress=False, cache=False)
    >>> runs[["layers", "width", "seed"]].values.tolist()
    [[1, 16, 0], [1, 16, 1]]
    """
    steps = settings.sweep_steps if steps is None else steps
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}; for untrained models use depth_width_sweep")
    seeds = tuple(int(x) for x in (settings.seeds if seeds is None else seeds))
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be a non-empty sequence of distinct ints, got {seeds}")
    task = _check_task_name(settings.sweep_task if task is None else task)
    grid = list(settings.sweep_trained if configs is None else configs)
    if not grid:
        raise ValueError("sweep_training_runs needs at least one (layers, width) configuration")
    for c in grid:
        ok = isinstance(c, tuple) and len(c) == 2 and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1 for x in c)
        if not ok or c[1] % settings.head_dim:
            raise ValueError(f"each configuration must be (layers, width) with positive ints and the width a multiple "
                             f"of the head dimension {settings.head_dim}; got {c!r}")
    pool = {seed: P2Task(task, n_samples=settings.n_train, seed=seed) for seed in seeds}
    max_len = max(tokens.shape[1], pool[seeds[0]].seq_len)
    rows = []
    bar = progress_bar(None, enabled=progress, total=len(grid) * len(seeds), desc="depth x width, trained")
    try:
        for L, w in grid:
            cfg = settings.model_config(max_len=max_len, n_layers=int(L), d_model=int(w))
            n_params = count_parameters(Transformer(cfg))
            for seed in seeds:
                sc0 = adjacency_by_layer(layer_hidden_states(Transformer(cfg, seed=seed), tokens))
                res = train(cfg, settings.train_config(steps=int(steps), seed=seed), pool[seed], progress=False, cache=cache)
                trained = res.model()
                sct = adjacency_by_layer(layer_hidden_states(trained, tokens))
                rows.append({"layers": int(L), "width": int(w), "seed": seed, "parameters": n_params,
                             "layer 1 (init)": float(sc0[1]), "layer 1 (trained)": float(sct[1]),
                             "last layer (trained)": float(sct[-1]),
                             "exact match (trained)": answer_accuracy(trained, pool[seed]).exact_match,
                             "best constant answer": _constant_answer_share(pool[seed])})
                bar.update(1)
    finally:
        bar.close()
    return pd.DataFrame(rows)


def causal_contrast(model: Transformer, tokens: torch.Tensor, *, seed: int = 0) -> pd.DataFrame:
    """Adjacency scores of a causal model and of the same weights without the causal mask.

    Parameters
    ----------
    model : Transformer
        A causal NoPE model.
    tokens : torch.LongTensor of shape (B, n)
    seed : int, keyword-only, default 0
        Seed of the random permutation used for the equivariance check.

    Returns
    -------
    pandas.DataFrame
        Rows ``causal mask`` and ``no mask``; columns ``layer 0 .. layer L`` and
        ``equivariant``: whether ``max |h(x[perm]) - h(x)[perm]| / max |h(x)|`` over the last
        layer is below ``1e-4`` for one random permutation of the positions (it is zero up to
        float rounding for a permutation-equivariant model).

    Raises
    ------
    ValueError
        A model with positional encodings (the contrast is about NoPE models).

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> causal_contrast(Transformer(cfg), random_tokens(8, 10))["equivariant"].tolist()
    [False, True]
    """
    model = _check_model(model)
    if model.config.position != "none":
        raise ValueError(f"causal_contrast compares NoPE models; got position={model.config.position!r}")
    perm = torch.as_tensor(np.random.default_rng(seed).permutation(tokens.shape[1]))
    rows = {}
    for label, m in (("causal mask", dataclasses.replace(model.config, causal=True)),
                     ("no mask", dataclasses.replace(model.config, causal=False))):
        twin = Transformer(m)
        twin.load_state_dict(model.state_dict())
        twin.eval()
        H = layer_hidden_states(twin, tokens)
        Hp = layer_hidden_states(twin, tokens[:, perm])
        err = float(np.abs(Hp[-1] - H[-1][:, perm.numpy()]).max()) / float(np.abs(H[-1]).max())
        rows[label] = {**dict(zip(_layer_columns(H.shape[0]), adjacency_by_layer(H))), "equivariant": err < 1e-4}
    return pd.DataFrame(rows).T


# ============================================================================ plots

#: Height in px of one panel of a two-column grid (as the book's other two-column charts).
_PANEL_HEIGHT = 220


def _tidy_series(chart: alt.LayerChart) -> alt.LayerChart:
    """A :func:`posgeo.series_chart` on an ordinal x axis (layers, grid values) with upright labels."""
    chart = chart.copy(deep=True)
    for layer in chart.layer:
        enc = layer.encoding
        if enc.x is not alt.Undefined and getattr(enc.x, "shorthand", "").endswith(":O"):
            enc.x.axis = alt.Axis(labelAngle=0)
    return chart


def _signed_heatmap(matrix: np.ndarray, *, title: str, value_title: str) -> alt.Chart:
    """:func:`posgeo.heatmap_chart` on the diverging scale [-1, 1], with a gradient colour bar.

    Each cell is outlined in its own colour (``stroke``, as heatmap_chart does, to hide hairline
    seams between cells), on a scale whose domain is a hair wider than the colour bar's:
    Vega-Lite merges the legends of scales with equal domains, and a colour legend merged with
    a stroke legend is drawn as a list of symbols instead of a colour bar.
    """
    chart = pg.heatmap_chart(matrix, title=title, value_title=value_title, domain=(-1.0, 1.0), scheme="blueorange",
                             x_title="position j", y_title="position i", width=pg.PANEL_WIDTH)
    outline = alt.Scale(scheme="blueorange", domain=[-1.001, 1.001])  # 4 significant digits: survives the renderer's rounding
    return chart.encode(stroke=alt.Stroke("value:Q", scale=outline, legend=None))


def plot_similarity_grid(profiles: Mapping[str, SimilarityProfile], *, layers: Sequence[int] | None = None,
                         columns: int = 2) -> Any:
    """Batch-averaged cosine self-similarity matrices, one heatmap per (layer, model).

    The panels share one diverging colour scale from -1 to 1 (cosines are signed), so the
    layers and models compare directly; each title gives the layer's adjacency score. Panels
    are ordered layer by layer, the models side by side (with two models: one row per layer,
    one column per model). Hover a cell for its positions and value.

    Parameters
    ----------
    profiles : mapping of str to SimilarityProfile
        Model label -> profile (:func:`similarity_profile`).
    layers : sequence of int, keyword-only, optional
        Layers to show (default all).
    columns : int, keyword-only, default 2
        Panels per row.

    Returns
    -------
    altair.ConcatChart (a single :class:`altair.Chart` for one panel)

    Examples
    --------
    >>> cfg = nope_settings("small").model_config(d_model=16, n_layers=1)
    >>> spec = plot_similarity_grid({"init": similarity_profile(Transformer(cfg), random_tokens(2, 6))}).to_dict()
    >>> len(spec["concat"]), spec["concat"][0]["mark"]["type"]
    (2, 'rect')
    """
    if not profiles:
        raise ValueError("plot_similarity_grid: no profiles given; pass {label: similarity_profile(...)}")
    first = next(iter(profiles.values()))
    layers = list(range(first.n_layers + 1)) if layers is None else [int(layer) for layer in layers]
    panels = []
    for layer in layers:
        for label, prof in profiles.items():
            if not 0 <= layer <= prof.n_layers:
                raise ValueError(f"plot_similarity_grid: {label!r} has layers 0..{prof.n_layers}, not {layer}")
            panels.append(_signed_heatmap(prof.mean_similarity[layer], title=f"{label}, layer {layer}: score {prof.scores[layer]:.3f}",
                                          value_title="cosine similarity (batch mean)"))
    grid = pg.panel_grid(panels, columns=columns)
    if len(panels) > 1:
        grid = grid.resolve_scale(color="shared")
    return pg.finish_chart(
        grid,
        description=(f"Heatmaps of the batch-averaged cosine similarity between the hidden states of positions i (rows) "
                     f"and j (columns), one panel per layer and model ({', '.join(profiles)}), on one colour scale "
                     "from -1 (blue) to 1 (orange); each title gives the layer's adjacency score. Hover a cell for its value."),
        canvas=len(panels) * first.mean_similarity.shape[-1] ** 2 > 4000,
    )


def plot_offset_decay(curves: Mapping[str, np.ndarray], *, reference: np.ndarray | None = None,
                      reference_label: str = "large-d limit") -> Any:
    """Mean cosine against offset ``k - i`` for several constructions or layers.

    Parameters
    ----------
    curves : mapping of str to (T,) arrays
        E.g. :func:`cosine_by_offset` of several matrices.
    reference : (T,) array, keyword-only, optional
        Drawn dotted, as the series ``"reference: <reference_label>"`` (e.g. the offsets of
        :func:`expected_cumulative_cosine`).
    reference_label : str, keyword-only

    Returns
    -------
    altair.LayerChart

    Examples
    --------
    >>> spec = plot_offset_decay({"limit": cosine_by_offset(expected_cumulative_cosine(8))}).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['line', 'point']
    """
    items = list(curves.items())
    if reference is not None:
        items.append((f"reference: {reference_label}", reference))
    if not items:
        raise ValueError("plot_offset_decay: no curves given")
    frame = pd.concat(
        [pd.DataFrame({"offset": np.arange(len(y)), "cosine": np.asarray(y, dtype=float), "curve": str(label)})
         for label, y in items],
        ignore_index=True,
    )
    chart = pg.series_chart(frame, x="offset", y="cosine", series="curve", x_title="offset k - i (positions)",
                            y_title="mean cosine C[k, i]", series_title="curve", width=pg.COLUMN_WIDTH, height=280)
    return pg.finish_chart(
        chart,
        description=("Mean cosine similarity between the hidden states of positions k and i against their offset k - i, "
                     f"one line per construction or layer ({', '.join(str(k) for k, _ in items)})."),
    )


def plot_adjacency_by_layer(table: pd.DataFrame) -> Any:
    """Adjacency score against layer, one line per row of an :func:`adjacency_table`.

    P2's reported values are drawn in grey: a square at 0.5 for layer 0 and the band 0.8-1.0
    from layer 1 on; the dotted "chance" line is 1/2, a matrix without positional structure.
    Click a legend entry to show one model alone (shift-click for several).

    Parameters
    ----------
    table : pandas.DataFrame
        Columns ``layer 0 .. layer L`` (other columns are ignored); one row per model.

    Returns
    -------
    altair.LayerChart

    Examples
    --------
    >>> table = pd.DataFrame({"layer 0": [0.5], "layer 1": [0.9]}, index=["model, init"])
    >>> spec = plot_adjacency_by_layer(table).to_dict()
    >>> sorted({row["model"] for rows in spec["datasets"].values() for row in rows if "model" in row})
    ['chance', 'model, init']
    """
    cols = [c for c in table.columns if str(c).startswith("layer ") and str(c).split()[-1].isdigit()]
    if not cols:
        raise ValueError(f"plot_adjacency_by_layer: no 'layer k' columns in the table; it has {list(table.columns)}")
    layer_ids = [int(str(c).split()[-1]) for c in cols]
    long = pd.DataFrame([{"layer": layer, "score": float(v), "model": str(label)}
                         for label, row in table[cols].iterrows() for layer, v in zip(layer_ids, row.to_numpy(dtype=float))])
    long = pd.concat([long, pd.DataFrame({"layer": layer_ids, "score": 0.5, "model": "chance"})], ignore_index=True)
    lo, hi = P2_REPORTED.layer1_score_range
    finite = long["score"][np.isfinite(long["score"])]
    bottom = min(0.3, math.floor(float(finite.min()) * 10) / 10) if len(finite) else 0.3
    lines = _tidy_series(pg.series_chart(long, x="layer", y="score", series="model", x_type="ordinal", points=True,
                            x_title="layer (0 = token embeddings)", y_title="adjacency score", series_title="model",
                            y_scale={"domain": [bottom, 1.0]}, width=pg.COLUMN_WIDTH, height=300))
    band_name = f"P2 reported, layers 1 and up ({lo:g}-{hi:g})"
    band = pd.DataFrame({"layer": [k for k in layer_ids if k >= 1], "low": lo, "high": hi, "reference": band_name})
    square_name = f"P2 reported, layer 0 ({P2_REPORTED.embedding_score:g})"
    square = pd.DataFrame({"layer": [k for k in layer_ids if k == 0], "score": P2_REPORTED.embedding_score, "reference": square_name})
    x_axis = alt.X("layer:O", title="layer (0 = token embeddings)", axis=alt.Axis(labelAngle=0))
    y_axis = alt.Y("low:Q", title="adjacency score", scale=alt.Scale(domain=[bottom, 1.0]))
    p2_band = alt.Chart(band).mark_area(opacity=0.5).encode(
        x=x_axis, y=y_axis, y2="high:Q",
        fill=alt.Fill("reference:N", scale=alt.Scale(domain=[band_name], range=["#BBBBBB"]), title="P2",
                      legend=alt.Legend(symbolType="square")),
        tooltip=[alt.Tooltip("reference:N", title="reference"), alt.Tooltip("layer:O"),
                 alt.Tooltip("low:Q", title="lowest reported"), alt.Tooltip("high:Q", title="highest reported")])
    p2_square = alt.Chart(square).mark_point(filled=True, size=90, color="#555555").encode(
        x=x_axis, y=alt.Y("score:Q", title="adjacency score", scale=alt.Scale(domain=[bottom, 1.0])),
        shape=alt.Shape("reference:N", scale=alt.Scale(domain=[square_name], range=["square"]), title=None),
        tooltip=[alt.Tooltip("reference:N", title="reference"), alt.Tooltip("score:Q", title="reported score")])
    return pg.finish_chart(
        alt.layer(p2_band, p2_square, lines),
        description=("Adjacency score of every layer (0 = token embeddings) for each model, before and after training, "
                     "with P2's reported values (a grey square at layer 0, a grey band from layer 1 on) and the chance "
                     "level of one half dotted. Click a legend entry to show one model."),
    )


def plot_init_ablation(table: pd.DataFrame, *, columns: Sequence[str] = ("layer 1",)) -> Any:
    """Adjacency scores over the initialisation grid: score against embedding std, one line per mean.

    One series per (column, embedding mean); where the table has ``"<column> low"`` and
    ``"<column> high"`` columns (the 95% interval over seeds, :func:`init_ablation`), a band
    between them, else, where it has a ``"<column> sd"`` column, a band of one standard
    deviation either side. Grid points a column does not have (NaN: not trained) are left out.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`init_ablation`: index ``(mean, std)``.
    columns : sequence of str, keyword-only
        Score columns to draw (e.g. ``["layer 1", "layer 1 (trained)"]``).

    Returns
    -------
    altair.LayerChart

    Examples
    --------
    >>> t = pd.DataFrame({"mean": [0.0, 0.0], "std": [0.02, 0.2], "layer 1": [0.8, 0.5], "layer 1 sd": [0.03, 0.04]})
    >>> spec = plot_init_ablation(t.set_index(["mean", "std"])).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['line', 'area', 'point']
    """
    missing = [c for c in columns if c not in table.columns]
    if missing or not list(columns):
        raise ValueError(f"plot_init_ablation: columns {missing or list(columns)} not in the table; it has {list(table.columns)}")
    flat = table.reset_index()
    if not {"mean", "std"} <= set(flat.columns):
        raise ValueError("plot_init_ablation: the table must have levels or columns 'mean' and 'std' (from init_ablation)")
    parts = []
    banded = []
    for col in columns:
        v = flat[col].to_numpy(dtype=float)
        if f"{col} low" in flat and f"{col} high" in flat:
            low, high = flat[f"{col} low"].to_numpy(dtype=float), flat[f"{col} high"].to_numpy(dtype=float)
            banded.append("95% interval")
        else:
            sd = flat[f"{col} sd"].to_numpy(dtype=float) if f"{col} sd" in flat else np.full(len(flat), np.nan)
            low, high = v - sd, v + sd
            if f"{col} sd" in flat:
                banded.append("one standard deviation")
        part = pd.DataFrame({"std": flat["std"].to_numpy(dtype=float), "score": v, "low": low, "high": high,
                             "series": [f"{col}, mean {m:g}" for m in flat["mean"]]})
        parts.append(part[np.isfinite(part["score"])])
    frame = pd.concat(parts, ignore_index=True)
    stds = sorted(set(frame["std"]))
    frame = pd.concat([frame, pd.DataFrame({"std": stds, "score": 0.5, "low": np.nan, "high": np.nan, "series": "chance"})],
                      ignore_index=True)
    chart = _tidy_series(pg.series_chart(frame, x="std", y="score", series="series", lower="low", upper="high", x_type="ordinal",
                            points=True, x_title="token-embedding std σ (log-spaced grid)", y_title="adjacency score",
                            series_title="score, embedding mean μ", width=pg.COLUMN_WIDTH, height=280))
    return pg.finish_chart(
        chart,
        description=("Adjacency score against the standard deviation of the token-embedding initialisation, one line per "
                     f"embedding mean and score column ({', '.join(columns)}), with a band "
                     f"({' or '.join(dict.fromkeys(banded)) or 'none'}) over seeds where there are several seeds, "
                     "and the chance level of one half dotted."),
    )


def plot_learning_curves(curves: pd.DataFrame, *, level: float = 0.95) -> Any:
    """Training loss and batch token accuracy against step, one line per task.

    A task with several seeds is drawn as the mean over its seeds with a band of the
    ``level`` interval (:func:`posgeo.seed_interval` at every logged step) and labelled with
    its number of seeds; a task with one seed as that seed's line, labelled ``seed s``.

    Parameters
    ----------
    curves : pandas.DataFrame
        From :func:`learning_curves`.
    level : float, keyword-only, default 0.95

    Returns
    -------
    altair.ConcatChart

    Examples
    --------
    >>> c = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 2, "seed": [0, 0, 1, 1, 0, 0], "step": [0, 10] * 3,
    ...                   "loss": [2.0, 1.0, 2.1, 1.2, 2.0, 1.5], "token accuracy": [0.1, 0.5, 0.1, 0.4, 0.1, 0.3]})
    >>> spec = plot_learning_curves(c).to_dict()
    >>> sorted({row["series"] for rows in spec["datasets"].values() for row in rows if "series" in row})
    ['a (mean of 2 seeds)', 'b (seed 0)']
    """
    from posgeo import seed_interval

    need = {"task", "seed", "step", "loss", "token accuracy"}
    if not isinstance(curves, pd.DataFrame) or not need <= set(curves.columns) or curves.empty:
        raise ValueError(f"plot_learning_curves: pass the table of learning_curves (columns {sorted(need)})")
    titles = {"loss": "training loss (answer tokens)", "token accuracy": "batch token accuracy"}
    panels = []
    order = []
    for metric, title in titles.items():
        parts = []
        for task, group in curves.groupby("task", sort=False):
            seeds = sorted(group["seed"].unique())
            if len(seeds) > 1:
                label = f"{task} (mean of {len(seeds)} seeds)"
                rows = []
                for step, at in group.groupby("step", sort=True):
                    iv = seed_interval(at[metric].to_numpy(dtype=float), level=level)
                    rows.append({"step": int(step), "value": iv.mean, "low": iv.low, "high": iv.high})
                part = pd.DataFrame(rows)
            else:
                label = f"{task} (seed {seeds[0]})"
                part = pd.DataFrame({"step": group["step"].astype(int), "value": group[metric].astype(float),
                                     "low": np.nan, "high": np.nan})
            part["series"] = label
            parts.append(part)
            if label not in order:
                order.append(label)
        frame = pd.concat(parts, ignore_index=True)
        panels.append(pg.series_chart(frame, x="step", y="value", series="series", lower="low", upper="high",
                                      x_title="training step", y_title=title, series_title="task",
                                      title=title, width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT, series_order=order))
    return pg.finish_chart(
        alt.hconcat(*panels).resolve_scale(color="shared", strokeDash="shared"),
        description=("Training loss (left) and token accuracy of the training batch (right) against the training step, "
                     "one line per task: the mean over seeds with its 95% interval as a band where the task was trained "
                     "with several seeds, else the single seed's line."),
    )


def plot_probe_results(tables: Mapping[str, pd.DataFrame]) -> Any:
    """Probe NRMSE and Pearson R against layer, for each model and feature kind.

    Two panels (NRMSE, R), one line per (model, feature kind); the dotted reference is a
    probe without positional information (predicting the mean position: NRMSE 1, R 0).

    Parameters
    ----------
    tables : mapping of str to DataFrame
        Model label -> :func:`probe_by_layer` table (index: layer).

    Returns
    -------
    altair.ConcatChart

    Examples
    --------
    >>> df = pd.DataFrame({"NRMSE (cosine)": [1.0, 0.6], "R (cosine)": [0.0, 0.8]})
    >>> spec = plot_probe_results({"model": df}).to_dict()
    >>> [panel["layer"][0]["mark"]["type"] for panel in spec["hconcat"]]
    ['line', 'line']
    """
    reference = "reference: no positional information"
    frames: dict[str, list[pd.DataFrame]] = {"NRMSE": [], "R": []}
    layers: set[int] = set()
    for label, df in tables.items():
        for kind in _PROBE_KINDS:
            for metric in frames:
                if f"{metric} ({kind})" in df:
                    frames[metric].append(pd.DataFrame({"layer": np.asarray(df.index, dtype=int),
                                                        "value": df[f"{metric} ({kind})"].to_numpy(dtype=float),
                                                        "probe": f"{label}, {kind}"}))
                    layers |= {int(k) for k in df.index}
    if not frames["NRMSE"]:
        raise ValueError("plot_probe_results: no 'NRMSE (<kind>)' columns in the tables (from probe_by_layer)")
    titles = {"NRMSE": "test NRMSE (1 = predicting the mean position)", "R": "test Pearson R"}
    panels = []
    for metric, parts in frames.items():
        ref = pd.DataFrame({"layer": sorted(layers), "value": 1.0 if metric == "NRMSE" else 0.0, "probe": reference})
        frame = pd.concat([*parts, ref], ignore_index=True)
        panels.append(_tidy_series(pg.series_chart(frame, x="layer", y="value", series="probe", x_type="ordinal", points=True,
                                      x_title="layer (0 = token embeddings)", y_title=titles[metric],
                                      series_title="model, features", title=f"probe {metric}",
                                      width=pg.PANEL_WIDTH, height=_PANEL_HEIGHT)))
    return pg.finish_chart(
        alt.hconcat(*panels).resolve_scale(color="shared", strokeDash="shared"),
        description=("Position probes by layer: test NRMSE (left; 1 means no better than predicting the mean position) "
                     "and test Pearson R (right), one line per model and feature kind (cosine rows or variance), with "
                     "the dotted reference of a probe that has no positional information."),
    )
