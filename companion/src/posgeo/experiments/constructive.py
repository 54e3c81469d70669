"""Chapter 10 (does a better-fitting encoding train better?): P1's constructive claim.

P1 proposes building a positional encoding from the corpus itself, classical MDS on the
Hellinger distances between per-position token distributions (:math:`P_{\\mathrm{MDS}}`),
and claims it is a better encoding. This module tests the claim where it can be tested: it
trains the book's transformer with *fixed* (frozen) position tables built from the
training corpus (:math:`P_{\\mathrm{MDS}}` and stress-optimal SMACOF tables at several
ranks, and the sinusoidal table, all scaled to the norm of the token embeddings) against
the model's native kinds (a learned table, a low-rank learned table, RoPE, ALiBi, none),
on two objectives (masked-token prediction, and sequence classification from a [CLS]
token), over several seeds, and relates each table's stress to how well its model trains.

The recipes: :func:`constructive_settings` (profiles), :func:`position_tables` (the fixed
tables), :func:`constructive_tasks` (tasks and held-out data per corpus and objective),
:func:`run_constructive` (every run, tidy; :func:`constructive_jobs` and
:func:`run_constructive_job` for one run at a time), :func:`summarise_runs` (means and 95%
intervals over seeds), :func:`table_stresses` and :func:`stress_performance` (does stress
predict performance?).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import altair as alt
import numpy as np
import pandas as pd
import torch

from posgeo import (
    Batch,
    MLMTask,
    TrainConfig,
    TransformerConfig,
    alibi_encoding,
    array_digest,
    classical_mds,
    eval_mode,
    evaluate,
    hellinger_matrix,
    load_corpus,
    positional_marginals,
    progress_bar,
    resolve_device,
    rope_encoding,
    sinusoidal_encoding,
    stress,
    stress_optimal_mds,
    train,
)
from posgeo.validation import check_int
import posgeo as pg

from .separation import corpus_mlm_task, marginal_mlm_task

__all__ = [
    "FIXED_TABLES",
    "NATIVE_KINDS",
    "ConstructiveSettings",
    "constructive_settings",
    "position_tables",
    "fixed_tables",
    "ClassificationTask",
    "CorpusTasks",
    "constructive_tasks",
    "fixed_table_prepare",
    "run_constructive",
    "ConstructiveJob",
    "constructive_jobs",
    "run_constructive_job",
    "summarise_runs",
    "interval_table",
    "accuracy_contrasts",
    "plot_accuracy",
    "compare_profiles",
    "full_profile_runs",
    "StoredRuns",
    "plot_runs",
    "table_stresses",
    "stress_performance",
]

FIXED_TABLES = ("PMDS k=3", "PMDS k=8", "PMDS full", "SMACOF k=3", "SMACOF k=8", "sinusoidal (fixed)")
"""The frozen tables built from the training corpus (and the sinusoidal one), in display order."""
NATIVE_KINDS = ("learned", "lowrank", "rope", "alibi", "none")
"""The model's own positional kinds compared with them (:data:`posgeo.POSITION_KINDS`)."""


_SMALL_ENCODINGS = ("PMDS k=3", "PMDS k=8", "PMDS full", "SMACOF k=3", "sinusoidal (fixed)", "learned", "rope", "none")


@dataclass(frozen=True)
class ConstructiveSettings:
    """What chapter 10 trains (see :func:`constructive_settings`)."""

    profile: str
    corpora: tuple[tuple[str, int, tuple[str, ...]], ...]
    encodings: tuple[str, ...] = (*FIXED_TABLES, *NATIVE_KINDS)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 64
    steps: int = 80
    batch_size: int = 32
    lr: float = 3e-3
    top_k: int = 500
    lowrank: int = 3
    eval_sequences: int = 1024
    ranks: tuple[int, ...] = (3, 8)
    device: str = "cpu"


def constructive_settings(profile: str | None = None) -> ConstructiveSettings:
    """The settings of a profile: ``"small"`` (the book on 2 CPU cores) or ``"full"`` (a GPU).

    ``small``: 16 positions of each corpus, a 1-layer model of width 32, 80 steps of 32
    sequences, 5 seeds; both objectives on the synthetic corpus, classification on SST-2 and
    IMDB (masked-token prediction on the real corpora needs more training than the small
    profile affords: after 150 steps every model predicts the frequent tokens alike); eight
    encodings (``PMDS k=3``, ``PMDS k=8``, ``PMDS full``, ``SMACOF k=3``, the fixed
    sinusoids, a learned table, RoPE, none): 160 runs of about half a second. ``full``: 64 positions
    of IMDB, 32 of SST-2 (masked-token prediction trains on texts that reach every position:
    3,255 of SST-2's 67,349 training sentences reach 32 WordPiece tokens, 2 reach 64) and 32
    of the synthetic corpus, 4 layers of width 128, 3,000 steps of 128, 5 seeds, both
    objectives everywhere, every table.

    Parameters
    ----------
    profile : {"small", "full"}, optional
        Default: ``$POSGEO_PROFILE``, else ``"small"``.

    Returns
    -------
    ConstructiveSettings

    Examples
    --------
    >>> s = constructive_settings("small")
    >>> [(name, n, objectives) for name, n, objectives in s.corpora], len(s.seeds)
    ([('synthetic', 16, ('mlm', 'cls')), ('sst2', 16, ('cls',)), ('imdb', 16, ('cls',))], 5)
    """
    from posgeo import current_profile

    p = current_profile(profile)
    if p == "full":
        both = ("mlm", "cls")
        return ConstructiveSettings(
            profile=p, corpora=(("synthetic", 32, both), ("sst2", 32, both), ("imdb", 64, both)), d_model=128,
            n_heads=4, n_layers=4, d_ff=512, steps=3000, batch_size=128, lr=1e-3, top_k=2000, eval_sequences=4096,
            device="auto",
        )
    return ConstructiveSettings(
        profile=p, corpora=(("synthetic", 16, ("mlm", "cls")), ("sst2", 16, ("cls",)), ("imdb", 16, ("cls",))),
        encodings=_SMALL_ENCODINGS,
    )


# --------------------------------------------------------------------------- tables
def _pad_and_scale(P: np.ndarray, d: int, norm: float) -> np.ndarray:
    """Centre the rows, zero-pad (or cut) to d columns, scale to RMS row norm ``norm``."""
    P = np.asarray(P, dtype=np.float64)
    P = P - P.mean(axis=0, keepdims=True)
    out = np.zeros((P.shape[0], d))
    k = min(d, P.shape[1])
    out[:, :k] = P[:, :k]
    rms = float(np.sqrt((out**2).sum(axis=1).mean()))
    return out * (norm / rms) if rms > 0 else out


def position_tables(D: np.ndarray, *, d: int, norm: float, ranks: tuple[int, ...] = (3, 8)) -> dict[str, np.ndarray]:
    """The fixed tables of chapter 10 for a corpus geometry ``D`` (n x n).

    ``PMDS k=r`` (classical MDS, P1's Algorithm 1, rank r), ``PMDS full`` (all positive
    eigenvalues), ``SMACOF k=r`` (the stress-optimal embedding of rank r, from the
    classical start) and ``sinusoidal (fixed)``: each centred, zero-padded to ``d``
    columns and scaled to RMS row norm ``norm`` (the model's token-embedding norm), so that
    only the *shape* of a table differs between them.

    Parameters
    ----------
    D : numpy.ndarray, shape (n, n)
    d : int, keyword-only
        Model width (>= every rank, and >= n - 1 for ``PMDS full`` to fit uncut).
    norm : float, keyword-only
    ranks : tuple of int, keyword-only, default (3, 8)

    Returns
    -------
    dict of str to numpy.ndarray, each (n, d)

    Examples
    --------
    >>> D = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0))) ** 0.5
    >>> t = position_tables(D, d=8, norm=1.0, ranks=(2,))
    >>> sorted(t), t["PMDS k=2"].shape
    (['PMDS full', 'PMDS k=2', 'SMACOF k=2', 'sinusoidal (fixed)'], (6, 8))
    >>> round(float(np.sqrt((t["PMDS full"] ** 2).sum(1).mean())), 6)
    1.0
    """
    D = np.asarray(D, dtype=np.float64)
    n = D.shape[0]
    d = check_int(d, "d")
    out: dict[str, np.ndarray] = {}
    for r in ranks:
        out[f"PMDS k={r}"] = _pad_and_scale(classical_mds(D, r).coords, d, norm)
    out["PMDS full"] = _pad_and_scale(classical_mds(D).coords, d, norm)
    for r in ranks:
        out[f"SMACOF k={r}"] = _pad_and_scale(stress_optimal_mds(D, r).coords, d, norm)
    out["sinusoidal (fixed)"] = _pad_and_scale(sinusoidal_encoding(n, d), d, norm)
    return out


# --------------------------------------------------------------------------- tasks
def fixed_tables(geometry: np.ndarray, settings: ConstructiveSettings) -> dict[str, np.ndarray]:
    """The fixed tables a model of ``settings`` trains with: :func:`position_tables` at the
    model's width, scaled to its token embeddings' norm ``init_std * sqrt(d_model)``, at the
    settings' ranks.

    Parameters
    ----------
    geometry : numpy.ndarray, shape (n, n)
        A corpus geometry (:attr:`CorpusTasks.geometry`).
    settings : ConstructiveSettings

    Returns
    -------
    dict of str to numpy.ndarray, each (n, settings.d_model)

    Examples
    --------
    >>> D = np.abs(np.subtract.outer(np.arange(10.0), np.arange(10.0)))
    >>> t = fixed_tables(D, constructive_settings("small"))
    >>> t["PMDS k=3"].shape, round(float(np.sqrt((t["PMDS k=3"] ** 2).sum(1).mean())), 4)  # 0.02 * sqrt(32)
    ((10, 32), 0.1131)
    """
    norm = 0.02 * math.sqrt(settings.d_model)
    return position_tables(geometry, d=settings.d_model, norm=norm, ranks=settings.ranks)


@dataclass(frozen=True)
class ClassificationTask:
    """Sequence classification from a [CLS] token: ``rows`` (m, seq_len) start with the CLS
    id, ``labels`` (m,); padding ``pad_id`` is masked out of attention.

    Follows the :class:`posgeo.Task` protocol (``kind="cls"``)."""

    rows: np.ndarray
    labels: np.ndarray
    vocab_size: int
    pad_id: int
    name: str
    n_classes: int = 2
    order_sensitive: bool = True
    kind: str = "cls"

    @property
    def seq_len(self) -> int:
        """Length of every row (CLS included)."""
        return int(self.rows.shape[1])

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Rows drawn uniformly with replacement, with their labels."""
        idx = torch.randint(0, self.rows.shape[0], (batch_size,), generator=generator).numpy()
        tokens = torch.from_numpy(self.rows[idx])
        return Batch(tokens, torch.from_numpy(self.labels[idx]), "cls", attention_mask=tokens != self.pad_id)

    def cache_key(self) -> dict[str, Any]:
        """The rows and labels by content."""
        return {"task": "ClassificationTask", "name": self.name, "data": array_digest(self.rows, self.labels)}


@dataclass(frozen=True, eq=False)
class CorpusTasks:
    """The tasks and held-out data of one corpus (see :func:`constructive_tasks`).

    Attributes
    ----------
    name : str
    n_positions : int
        Text positions (the CLS task's rows have one more: the CLS token first).
    geometry : numpy.ndarray, shape (n, n)
        Plug-in chord Hellinger distances of the training corpus' first n positions (P1's).
    tasks : dict of str to Task
        ``"mlm"`` and ``"cls"``.
    held_out : dict of str to Task
        The same tasks on held-out data (validation split, IMDB's test split, fresh
        synthetic sequences).
    vocab_size : int
        Model vocabulary (both objectives).
    """

    name: str
    n_positions: int
    geometry: np.ndarray
    tasks: dict[str, Any]
    held_out: dict[str, Any]
    vocab_size: int


def _cls_rows(windows: np.ndarray, cls_id: int) -> np.ndarray:
    return np.concatenate([np.full((windows.shape[0], 1), cls_id, dtype=np.int64), windows], axis=1)


def _windows(seqs: Any, remap: Any, n: int) -> np.ndarray:
    """First n tokens of every sequence, remapped, padded with PAD."""
    lengths = np.asarray(seqs.lengths)
    rows = np.full((lengths.size, n), remap.pad_id, dtype=np.int64)
    take = np.minimum(lengths, n)
    col = np.arange(n)
    valid = col[None, :] < take[:, None]
    src = (np.asarray(seqs.offsets[:-1])[:, None] + col[None, :])[valid]
    rows[valid] = remap.apply(np.asarray(seqs.tokens)[src])
    return rows


def _subset(rows: np.ndarray, labels: np.ndarray, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if rows.shape[0] <= m:
        return rows, labels
    idx = np.sort(np.random.default_rng(seed).choice(rows.shape[0], size=m, replace=False))
    return rows[idx], labels[idx]


def constructive_tasks(name: str, n_positions: int, settings: ConstructiveSettings) -> CorpusTasks:
    """Build chapter 10's MLM and [CLS] classification tasks for one corpus.

    - ``synthetic``: the book's synthetic corpus (its true per-position marginals); MLM on
      fresh draws; classification: is the sequence reversed? (balanced; an order task).
    - ``sst2``, ``imdb``: the first n tokens of each text, the vocabulary cut to the
      ``top_k`` most frequent tokens plus UNK and PAD; MLM on texts of at least n tokens;
      classification of the sentiment label from all texts (shorter ones padded).
      Held out: SST-2's validation split, IMDB's test split (``eval_sequences`` of them).

    Parameters
    ----------
    name : {"synthetic", "sst2", "imdb"}
    n_positions : int
    settings : ConstructiveSettings

    Returns
    -------
    CorpusTasks
    """
    n = check_int(n_positions, "n_positions", minimum=2)
    if name not in ("synthetic", "sst2", "imdb"):
        raise ValueError(f"unknown corpus {name!r}; chapter 10 trains on 'synthetic', 'sst2' or 'imdb'")
    if name == "synthetic":
        corpus = load_corpus("synthetic", "train")
        mu = np.asarray(corpus.true_marginals)[:n]
        V = int(mu.shape[1])
        D = hellinger_matrix(positional_marginals(corpus.sequences, n, V))
        mlm = marginal_mlm_task(mu)
        cls_id = V + 1  # after MLM's mask token V
        vocab = V + 2

        def reversed_task(seed: int, m: int, label: str) -> ClassificationTask:
            from posgeo import sample_synthetic_sequences

            x = sample_synthetic_sequences(mu, m, seed=seed).tokens.reshape(m, n).astype(np.int64)
            y = np.random.default_rng(seed + 1).integers(0, 2, size=m)
            x[y == 1] = x[y == 1, ::-1]
            return ClassificationTask(_cls_rows(x, cls_id), y.astype(np.int64), vocab, pad_id=-1,
                                      name=f"synthetic-reversed-n{n}-{label}")

        held_mlm = marginal_mlm_task(mu)  # fresh draws: evaluate() uses its own seed
        tasks = {"mlm": mlm, "cls": reversed_task(1, 20000, "train")}
        held = {"mlm": held_mlm, "cls": reversed_task(2, settings.eval_sequences, "held-out")}
        return CorpusTasks(name, n, D, tasks, held, vocab)

    held_split = {"sst2": "validation", "imdb": "test"}[name]
    corpus = load_corpus(name, "train")
    D = hellinger_matrix(positional_marginals(corpus.sequences, n, corpus.vocab_size))
    mlm, remap = corpus_mlm_task(corpus, seq_len=n, top_k=settings.top_k)
    cls_id = remap.n_tokens + 1  # n_tokens is the MLM mask id
    vocab = remap.n_tokens + 2
    held_corpus = load_corpus(name, held_split)
    rows = _windows(corpus.sequences, remap, n)
    held_rows, held_labels = _subset(_windows(held_corpus.sequences, remap, n), np.asarray(held_corpus.labels),
                                     settings.eval_sequences, seed=0)
    cls = ClassificationTask(_cls_rows(rows, cls_id), np.asarray(corpus.labels, dtype=np.int64), vocab,
                             remap.pad_id, name=f"{name}-sentiment-n{n}-top{settings.top_k}")
    held_cls = ClassificationTask(_cls_rows(held_rows, cls_id), held_labels.astype(np.int64), vocab, remap.pad_id,
                                  name=f"{name}-{held_split}-sentiment-n{n}-top{settings.top_k}")
    long_enough = held_corpus.sequences.lengths >= n
    held_mlm_rows = _windows(held_corpus.sequences, remap, n)[long_enough][: settings.eval_sequences]
    from .separation import CorpusSampler

    held_mlm = MLMTask(CorpusSampler(rows=held_mlm_rows, name=f"{name}-{held_split}-n{n}", pad_id=remap.pad_id),
                       n_tokens=remap.n_tokens, seq_len=n, name=f"{name}-{held_split}-n{n}-top{settings.top_k}")
    return CorpusTasks(name, n, D, {"mlm": mlm, "cls": cls}, {"mlm": held_mlm, "cls": held_cls}, vocab)


# --------------------------------------------------------------------------- training
def fixed_table_prepare(table: np.ndarray, offset: int = 0) -> Callable[[Any], Any]:
    """A ``prepare`` hook for :func:`posgeo.train`: write ``table`` into the learned position
    rows from ``offset`` (a CLS row 0 stays at zero) and zero every other row; train with
    ``TrainConfig(freeze=("pos",))`` to keep it fixed.

    Parameters
    ----------
    table : numpy.ndarray, shape (n, d_model)
    offset : int, default 0

    Returns
    -------
    callable
        ``prepare(model) -> model``.
    """

    def prepare(model: Any) -> Any:
        with torch.no_grad():
            model.pos.zero_()
            model.pos[offset : offset + table.shape[0]] = torch.as_tensor(table, dtype=model.pos.dtype)
        return model

    return prepare


def _held_out_accuracy(model: Any, task: Any) -> float:
    if isinstance(task, ClassificationTask):
        correct = 0
        with eval_mode(model), torch.no_grad():
            device = next(model.parameters()).device
            for s in range(0, task.rows.shape[0], 512):
                tokens = torch.from_numpy(task.rows[s : s + 512]).to(device)
                out = model(tokens, attention_mask=tokens != task.pad_id)
                correct += int((out.cls_logits.argmax(-1).cpu().numpy() == task.labels[s : s + 512]).sum())
        return correct / task.rows.shape[0]
    return float(evaluate(model, task, n_batches=4, batch_size=256, seed=12345))


@dataclass(frozen=True)
class ConstructiveJob:
    """One training run of chapter 10 (see :func:`constructive_jobs`)."""

    corpus: str
    objective: str
    encoding: str
    seed: int


def constructive_jobs(settings: ConstructiveSettings, corpora: Mapping[str, CorpusTasks]) -> list[ConstructiveJob]:
    """Every (corpus, objective, encoding, seed) that :func:`run_constructive` trains, in its order.

    Parameters
    ----------
    settings : ConstructiveSettings
    corpora : mapping of str to CorpusTasks

    Returns
    -------
    list of ConstructiveJob
        Grouped by corpus, then objective (a task's runs are contiguous), then encoding.

    Examples
    --------
    >>> s = constructive_settings("small")
    >>> len(constructive_jobs(s, {"synthetic": None}))  # both objectives, 8 encodings, 5 seeds
    80
    """
    objectives = {name: objs for name, _, objs in settings.corpora}
    return [ConstructiveJob(name, objective, encoding, seed) for name in corpora
            for objective in objectives.get(name, ("mlm", "cls")) for encoding in settings.encodings
            for seed in settings.seeds]


def run_constructive_job(
    job: ConstructiveJob,
    settings: ConstructiveSettings,
    corpora: Mapping[str, CorpusTasks],
    *,
    tables: Mapping[str, np.ndarray] | None = None,
    cache: bool = True,
) -> dict[str, Any]:
    """Train one run of chapter 10 and evaluate it on the held-out data.

    The model is the same :class:`posgeo.Transformer` (``settings``) for every encoding;
    a fixed table enters as a frozen learned table (``TrainConfig.freeze=("pos",)``) written
    by a ``prepare`` hook, scaled to the token embeddings' norm ``init_std * sqrt(d_model)``.
    It trains and evaluates on ``settings.device``.

    Parameters
    ----------
    job : ConstructiveJob
    settings : ConstructiveSettings
    corpora : mapping of str to CorpusTasks
        Must hold ``job.corpus``.
    tables : mapping of str to numpy.ndarray, keyword-only, optional
        The corpus' :func:`fixed_tables`, when computed once for many runs; default:
        computed here.
    cache : bool, keyword-only, default True

    Returns
    -------
    dict
        ``corpus``, ``objective``, ``encoding``, ``seed``, ``final_loss`` (mean of the last
        10% of the training losses), ``accuracy`` (held out).
    """
    s = settings
    if not isinstance(job, ConstructiveJob):
        raise TypeError(f"job must be a ConstructiveJob (from constructive_jobs), got {type(job).__name__}")
    if job.corpus not in corpora:
        raise ValueError(f"job {job} names corpus {job.corpus!r}, not among {sorted(corpora)}; build it with constructive_tasks")
    ct = corpora[job.corpus]
    if tables is None:
        tables = fixed_tables(ct.geometry, s)
    table = tables.get(job.encoding)
    task = ct.tasks[job.objective]
    offset = 1 if job.objective == "cls" else 0
    position = "learned" if table is not None else job.encoding
    cfg = TransformerConfig(
        vocab_size=ct.vocab_size, d_model=s.d_model, n_heads=s.n_heads, n_layers=s.n_layers, d_ff=s.d_ff,
        max_len=ct.n_positions + 1, position=position, rank=s.lowrank if position == "lowrank" else None,
        n_classes=2 if job.objective == "cls" else None, pooling="first",
    )
    tcfg = TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=job.seed, device=s.device,
                       log_every=max(1, s.steps // 50), freeze=("pos",) if table is not None else ())
    options = {"fixed_table": array_digest(table), "offset": offset} if table is not None else None
    res = train(cfg, tcfg, task, prepare=fixed_table_prepare(table, offset) if table is not None else None,
                cache_namespace="constructive", cache_options=options, progress=False, cache=cache)
    losses = [h["loss"] for h in res.history if "loss" in h]
    tail = losses[-max(1, len(losses) // 10):]
    return {"corpus": job.corpus, "objective": job.objective, "encoding": job.encoding, "seed": job.seed,
            "final_loss": float(np.mean(tail)),
            "accuracy": _held_out_accuracy(res.model().to(resolve_device(s.device)), ct.held_out[job.objective])}


def run_constructive(
    settings: ConstructiveSettings,
    corpora: Mapping[str, CorpusTasks],
    *,
    progress: bool = True,
    cache: bool = True,
) -> pd.DataFrame:
    """Train every (corpus, objective, encoding, seed) of chapter 10
    (:func:`constructive_jobs`, each by :func:`run_constructive_job`).

    Parameters
    ----------
    settings : ConstructiveSettings
    corpora : mapping of str to CorpusTasks
    progress : bool, keyword-only, default True
    cache : bool, keyword-only, default True

    Returns
    -------
    pandas.DataFrame
        Tidy: ``corpus``, ``objective``, ``encoding``, ``seed``, ``final_loss`` (mean of the
        last 10% of the training losses), ``accuracy`` (held out).
    """
    tables = {name: fixed_tables(ct.geometry, settings) for name, ct in corpora.items()}
    jobs = constructive_jobs(settings, corpora)
    rows = [run_constructive_job(job, settings, corpora, tables=tables[job.corpus], cache=cache)
            for job in progress_bar(jobs, enabled=progress, desc="chapter 10", unit="run")]
    return pd.DataFrame(rows)


def summarise_runs(runs: pd.DataFrame, *, metric: str = "accuracy", level: float = 0.95) -> pd.DataFrame:
    """Mean and t interval over seeds of ``metric`` per (corpus, objective, encoding).

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`run_constructive`.
    metric : str, keyword-only, default "accuracy"
    level : float, keyword-only, default 0.95

    Returns
    -------
    pandas.DataFrame
        Index (corpus, objective, encoding); columns ``mean``, ``low``, ``high``, ``sd``,
        ``seeds``.

    Examples
    --------
    >>> runs = pd.DataFrame({"corpus": "c", "objective": "o", "encoding": "e", "seed": range(5),
    ...                      "accuracy": [0.5, 0.6, 0.55, 0.65, 0.6]})
    >>> summarise_runs(runs).round(3).iloc[0].tolist()
    [0.58, 0.509, 0.651, 0.057, 5.0]
    """
    from posgeo import seed_summary

    out = seed_summary(runs, by=["corpus", "objective", "encoding"], metrics=metric, level=level)[metric]
    out.columns.name = None
    return out.astype({"seeds": float})


def interval_table(summary: pd.DataFrame, *, digits: int = 2) -> pd.DataFrame:
    """The means and intervals of :func:`summarise_runs` as text, ``"mean [low, high]"``
    (formatted by :func:`posgeo.interval_table`), one column per (corpus, objective), one row
    per encoding.

    Parameters
    ----------
    summary : pandas.DataFrame
        From :func:`summarise_runs`.
    digits : int, keyword-only, default 2

    Returns
    -------
    pandas.DataFrame

    Examples
    --------
    >>> s = pd.DataFrame({"mean": [0.58], "low": [0.509], "high": [0.651]},
    ...                  index=pd.MultiIndex.from_tuples([("c", "cls", "e")], names=["corpus", "objective", "encoding"]))
    >>> interval_table(s).loc["e", ("c", "cls")]
    '0.58 [0.51, 0.65]'
    """
    from posgeo import interval_table as format_intervals

    stats = pd.concat({"value": summary[["mean", "low", "high"]]}, axis=1, names=["metric", "statistic"])
    return format_intervals(stats, digits=digits)["value"].unstack(["corpus", "objective"])


def table_stresses(
    corpora: Mapping[str, CorpusTasks],
    settings: ConstructiveSettings,
    *,
    corrected: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Scale-optimal stress of every fixed table (and of RoPE's and ALiBi's vector forms)
    against the corpus' plug-in geometry and, when given, its corrected one.

    Parameters
    ----------
    corpora : mapping of str to CorpusTasks
    settings : ConstructiveSettings
    corrected : mapping of str to BootstrapGeometry, keyword-only, optional
        Half-sample intervals of the corrected geometry of the same positions
        (e.g. :func:`posgeo.experiments.statistics.corpus_bootstrap`): adds
        ``corrected``, ``corrected low``, ``corrected high``.

    Returns
    -------
    pandas.DataFrame
        Index (corpus, encoding); columns ``plug-in`` and (optionally) the corrected ones.
    """
    from posgeo import stress_intervals

    parts = {}
    for name, ct in corpora.items():
        n = ct.n_positions
        enc = fixed_tables(ct.geometry, settings)
        if "rope" in settings.encodings:
            enc["rope"] = rope_encoding(n, settings.d_model, head_dim=settings.d_model // settings.n_heads)
        if "alibi" in settings.encodings:
            enc["alibi"] = alibi_encoding(n, settings.n_heads)
        enc = {k: v for k, v in enc.items() if k in settings.encodings}
        table = pd.DataFrame({"plug-in": {k: stress(P, ct.geometry, scale="optimal") for k, P in enc.items()}})
        if corrected is not None and name in corrected:
            iv = stress_intervals(corrected[name], enc, n_permutations=1)
            table["corrected"] = iv["stress"].reindex(table.index)
            table["corrected low"] = iv["low"].reindex(table.index)
            table["corrected high"] = iv["high"].reindex(table.index)
        parts[name] = table
    return pd.concat(parts, names=["corpus", "encoding"])


def stress_performance(
    runs: pd.DataFrame,
    stresses: pd.DataFrame,
    *,
    column: str = "corrected",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Does stress predict performance? Spearman correlation, over the encodings that have
    a stress, between a table's stress and its model's held-out accuracy, per (corpus,
    objective), with a 95% interval from resampling the seeds of every encoding.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`run_constructive`.
    stresses : pandas.DataFrame
        From :func:`table_stresses`.
    column : str, keyword-only, default "corrected"
        Which stress.
    n_boot : int, keyword-only, default 1000
    seed : int, keyword-only, default 0

    Returns
    -------
    pandas.DataFrame
        Index (corpus, objective); ``rho`` (negative: lower stress, higher accuracy),
        ``low``, ``high``, ``encodings``.
    """
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    rows = {}
    for (corpus, objective), g in runs.groupby(["corpus", "objective"], sort=False):
        s = stresses.loc[corpus, column]
        g = g[g["encoding"].isin(s.index)]
        encs = list(dict.fromkeys(g["encoding"]))
        x = s.reindex(encs).to_numpy()
        acc = {e: g.loc[g["encoding"] == e, "accuracy"].to_numpy() for e in encs}
        means = np.array([acc[e].mean() for e in encs])
        rho = float(spearmanr(x, means).statistic)
        boots = []
        for _ in range(n_boot):
            m = np.array([rng.choice(acc[e], size=acc[e].size).mean() for e in encs])
            r = spearmanr(x, m).statistic
            if np.isfinite(r):
                boots.append(r)
        lo, hi = np.quantile(boots, [0.025, 0.975]) if boots else (np.nan, np.nan)
        rows[(corpus, objective)] = {"rho": rho, "low": float(lo), "high": float(hi), "encodings": len(encs)}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.names = ["corpus", "objective"]
    return out


def accuracy_contrasts(
    runs: pd.DataFrame,
    reference: str,
    others: tuple[str, ...],
    *,
    level: float = 0.95,
) -> pd.DataFrame:
    """Difference of mean held-out accuracy, ``reference`` minus each of ``others``, per
    (corpus, objective), with a Welch t interval over the seeds.

    Parameters
    ----------
    runs : pandas.DataFrame
        From :func:`run_constructive`.
    reference : str
    others : tuple of str
    level : float, keyword-only, default 0.95

    Returns
    -------
    pandas.DataFrame
        Index (corpus, objective, other); ``difference``, ``low``, ``high``, ``separated``
        (the interval excludes 0).

    Examples
    --------
    >>> runs = pd.DataFrame({"corpus": "c", "objective": "o", "seed": list(range(5)) * 2,
    ...                      "encoding": ["a"] * 5 + ["b"] * 5,
    ...                      "accuracy": [0.9, 0.91, 0.92, 0.9, 0.91, 0.5, 0.52, 0.49, 0.5, 0.51]})
    >>> bool(accuracy_contrasts(runs, "a", ("b",)).loc[("c", "o", "b"), "separated"])
    True
    """
    from posgeo import seed_difference

    rows = {}
    for (corpus, objective), g in runs.groupby(["corpus", "objective"], sort=False):
        a = g.loc[g["encoding"] == reference, "accuracy"].to_numpy()
        for other in others:
            b = g.loc[g["encoding"] == other, "accuracy"].to_numpy()
            if a.size < 2 or b.size < 2:
                continue
            d = seed_difference(a, b, level=level)
            rows[(corpus, objective, other)] = {"difference": d.mean, "low": d.low, "high": d.high,
                                                "separated": d.excludes_zero}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.names = ["corpus", "objective", "other"]
    return out


def plot_accuracy(summary: pd.DataFrame, *, level: str = "95%") -> Any:
    """Held-out accuracy of every encoding, one panel per (corpus, objective): the mean over
    seeds (point) and its interval (error bar), from :func:`summarise_runs`.

    Encodings take the book's colours; the point's shape tells the fixed tables built from
    the corpus (and the sinusoids) from the model's own positional kinds.

    Parameters
    ----------
    summary : pandas.DataFrame
        From :func:`summarise_runs`: index (corpus, objective, encoding); columns ``mean``,
        ``low``, ``high`` (and ``seeds``, shown on hover).
    level : str, keyword-only, default "95%"
        The interval's level, for the axis title and the tooltips.

    Returns
    -------
    altair chart

    Examples
    --------
    >>> s = pd.DataFrame({"mean": [0.9, 0.5], "low": [0.85, 0.45], "high": [0.95, 0.55]},
    ...                  index=pd.MultiIndex.from_tuples([("c", "cls", "learned"), ("c", "cls", "none")],
    ...                                                  names=["corpus", "objective", "encoding"]))
    >>> spec = plot_accuracy(s).to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['rule', 'point']
    """
    frame = summary.reset_index()
    if "seeds" not in frame.columns:
        frame["seeds"] = np.nan
    return _accuracy_chart(frame, f"held-out accuracy (mean, {level} interval)", level=level,
                           what=f"the mean over seeds (point) and its {level} interval (bar)")


def plot_runs(runs: pd.DataFrame, *, note: str = "each seed a point") -> Any:
    """Held-out accuracy of every run as a point, one panel per (corpus, objective): for runs
    too few to give an interval (the full profile's single seed), or to show every seed.

    Parameters
    ----------
    runs : pandas.DataFrame
        Tidy, as :func:`run_constructive` returns (``corpus``, ``objective``, ``encoding``,
        ``seed``, ``accuracy``).
    note : str, keyword-only
        Said in the axis title (e.g. ``"one seed: no interval"``).

    Returns
    -------
    altair chart

    Examples
    --------
    >>> runs = pd.DataFrame({"corpus": "c", "objective": "mlm", "encoding": ["learned", "none"], "seed": 0,
    ...                      "accuracy": [0.3, 0.1]})
    >>> [layer["mark"]["type"] for layer in plot_runs(runs).to_dict()["layer"]]
    ['point']
    """
    frame = runs.rename(columns={"accuracy": "mean"}).assign(low=np.nan, high=np.nan, seeds=runs["seed"])
    return _accuracy_chart(frame, f"held-out accuracy ({note})", level=None, what=note)


def _accuracy_chart(frame: pd.DataFrame, x_title: str, *, level: str | None, what: str) -> Any:
    frame = frame.copy()
    frame["encoding"] = frame["encoding"].astype(str)
    frame["kind"] = np.where(frame["encoding"].isin(FIXED_TABLES), "fixed table (from the corpus)", "the model's own")
    encodings = list(dict.fromkeys(frame["encoding"]))
    colour = alt.Color("encoding:N", scale=pg.colour_scale(encodings), title="encoding", legend=None)
    shape = alt.Shape("kind:N", title="table", scale=alt.Scale(domain=["fixed table (from the corpus)", "the model's own"],
                                                                range=["circle", "square"]))
    if level is not None:
        tips = [alt.Tooltip("encoding:N"), alt.Tooltip("kind:N", title="table"),
                alt.Tooltip("mean:Q", title="mean accuracy", format=".3f"),
                alt.Tooltip("low:Q", title=f"{level} low", format=".3f"),
                alt.Tooltip("high:Q", title=f"{level} high", format=".3f"), alt.Tooltip("seeds:Q")]
    else:
        tips = [alt.Tooltip("encoding:N"), alt.Tooltip("kind:N", title="table"),
                alt.Tooltip("mean:Q", title="accuracy", format=".3f"), alt.Tooltip("seeds:Q", title="seed")]
    panels = []
    for (corpus, objective), task in frame.groupby(["corpus", "objective"], sort=False):
        y = alt.Y("encoding:N", sort=encodings, title=None)
        x = alt.X("mean:Q", title=x_title, scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=5))
        rows = task["encoding"].nunique()
        base = alt.Chart(task, title=f"{corpus}, {objective}").properties(width=pg.PANEL_WIDTH - 50, height=22 * rows)
        points = base.mark_point(filled=True, size=60, opacity=1).encode(x=x, y=y, color=colour, shape=shape, tooltip=tips)
        if level is not None:
            bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("low:Q", title=x_title, scale=alt.Scale(zero=False),
                                                                  axis=alt.Axis(tickCount=5)), x2="high:Q",
                                                         y=y, color=colour, tooltip=tips)
            panels.append(bars + points)
        else:
            panels.append(alt.layer(points))
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2),
        description=(f"Held-out accuracy of each encoding, one panel per corpus and objective: {what}; circles are "
                     "fixed tables built from the corpus, squares the model's own positional kinds."),
    )


@dataclass(frozen=True, eq=False)
class StoredRuns:
    """Runs of a profile trained elsewhere (a GPU) and committed as data (:func:`full_profile_runs`).

    Attributes
    ----------
    runs : pandas.DataFrame
        Tidy, as :func:`run_constructive` returns, with ``seconds`` (wall time of the run)
        and ``stress`` (plug-in scale-optimal stress of a fixed table, or of RoPE's and
        ALiBi's vector forms, as :func:`table_stresses`; empty for a learned or low-rank
        table and for none).
    meta : dict
        ``what`` was trained, ``date``, ``device``, ``torch``, the ``commands`` that
        produced it, ``runs_done`` of ``runs_planned``, the ``settings``.
    """

    runs: pd.DataFrame
    meta: dict


def full_profile_runs() -> StoredRuns:
    """The full profile's runs of chapter 10, trained on a GPU and shipped with posgeo.

    Returns
    -------
    StoredRuns

    Examples
    --------
    >>> stored = full_profile_runs()
    >>> stored.meta["profile"], stored.meta["runs_done"] == len(stored.runs)
    ('full', True)
    """
    import json
    from importlib.resources import files

    base = files("posgeo.experiments") / "results"
    with (base / "constructive_full.csv").open("r") as fh:
        runs = pd.read_csv(fh)
    meta = json.loads((base / "constructive_full.json").read_text())
    return StoredRuns(runs, meta)


def compare_profiles(small: pd.DataFrame, full: pd.DataFrame) -> pd.DataFrame:
    """The small profile's mean and interval over seeds beside the full profile's runs.

    Parameters
    ----------
    small : pandas.DataFrame
        From :func:`summarise_runs` (index corpus, objective, encoding).
    full : pandas.DataFrame
        Tidy runs of the full profile (:attr:`StoredRuns.runs`); several seeds are averaged.

    Returns
    -------
    pandas.DataFrame
        Index (corpus, objective, encoding), in the full profile's order; columns ``small
        mean``, ``small low``, ``small high`` (empty where the small profile has no such
        task or encoding), ``full`` (accuracy), ``full seeds``, ``full stress`` (plug-in).

    Examples
    --------
    >>> small = pd.DataFrame({"mean": [0.6], "low": [0.5], "high": [0.7]},
    ...                      index=pd.MultiIndex.from_tuples([("c", "cls", "learned")], names=["corpus", "objective", "encoding"]))
    >>> full = pd.DataFrame({"corpus": "c", "objective": "cls", "encoding": ["learned", "alibi"], "seed": 0,
    ...                      "accuracy": [0.8, 0.7], "stress": [np.nan, 0.2]})
    >>> compare_profiles(small, full)["small mean"].tolist()
    [0.6, nan]
    """
    keys = ["corpus", "objective", "encoding"]
    agg = {"full": ("accuracy", "mean"), "full seeds": ("seed", "nunique")}
    if "stress" in full.columns:
        agg["full stress"] = ("stress", "first")
    f = full.groupby(keys, sort=False).agg(**agg)
    s = small[["mean", "low", "high"]].rename(columns=lambda c: f"small {c}")
    return s.reindex(f.index).join(f)
