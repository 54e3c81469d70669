"""Helpers of the chapter "Does a better-fitting encoding train better?" (10_constructive).

The full profile's runs (a GPU) are stored in book/data/constructive_full.csv and .json; they are
made and merged by tools/full_profile_constructive.py (see the appendix on the full-scale runs).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import torch

import posgeo as pg

DATA = Path(__file__).resolve().parent / "data"
FIXED_TABLES = ("PMDS k=3", "PMDS k=8", "PMDS full", "SMACOF k=3", "SMACOF k=8", "sinusoidal (fixed)")
NATIVE_KINDS = ("learned", "lowrank", "rope", "alibi", "none")
_SMALL_ENCODINGS = ("PMDS k=3", "PMDS k=8", "PMDS full", "SMACOF k=3", "sinusoidal (fixed)", "learned", "rope", "none")


@dataclass(frozen=True)
class Settings:
    """What the chapter trains (see :func:`settings`)."""

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


def settings(profile: str | None = None) -> Settings:
    """The small profile (16 positions, 1 layer of width 32, 80 steps) or the full one (a GPU)."""
    if pg.current_profile(profile) == "full":
        both = ("mlm", "cls")
        return Settings(profile="full", corpora=(("synthetic", 32, both), ("sst2", 32, both), ("imdb", 64, both)),
                        d_model=128, n_layers=4, d_ff=512, steps=3000, batch_size=128, lr=1e-3, top_k=2000,
                        eval_sequences=4096, device="auto")
    return Settings(profile="small", corpora=(("synthetic", 16, ("mlm", "cls")), ("sst2", 16, ("cls",)),
                                              ("imdb", 16, ("cls",))), encodings=_SMALL_ENCODINGS)


# --------------------------------------------------------------------------- tables
def fit_to_model(P, d: int, norm: float) -> np.ndarray:
    """Centre the rows, zero-pad (or cut) to d columns, scale to RMS row norm ``norm``."""
    P = np.asarray(P, dtype=np.float64)
    P = P - P.mean(axis=0, keepdims=True)
    out = np.zeros((P.shape[0], d))
    out[:, : min(d, P.shape[1])] = P[:, :d]
    rms = float(np.sqrt((out**2).sum(axis=1).mean()))
    return out * (norm / rms) if rms > 0 else out


def position_tables(D, *, d: int, norm: float, ranks=(3, 8)) -> dict[str, np.ndarray]:
    """P_MDS at each rank and full rank, SMACOF at each rank and the sinusoids, each fitted to the model."""
    out = {f"PMDS k={r}": fit_to_model(pg.classical_mds(D, r).coords, d, norm) for r in ranks}
    out["PMDS full"] = fit_to_model(pg.classical_mds(D).coords, d, norm)
    out |= {f"SMACOF k={r}": fit_to_model(pg.stress_optimal_mds(D, r).coords, d, norm) for r in ranks}
    out["sinusoidal (fixed)"] = fit_to_model(pg.sinusoidal_encoding(D.shape[0], d), d, norm)
    return out


def fixed_tables(geometry, s: Settings) -> dict[str, np.ndarray]:
    """The tables a model of ``s`` trains with, scaled to its token embeddings' norm 0.02 * sqrt(d_model)."""
    return position_tables(geometry, d=s.d_model, norm=0.02 * math.sqrt(s.d_model), ranks=s.ranks)


# --------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class ClassificationTask:
    """Classify a row from its [CLS] token (row[0]); ``pad_id`` is masked out of attention."""

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

    def sample(self, batch_size: int, generator: torch.Generator) -> pg.Batch:
        """Rows drawn uniformly with replacement, with their labels."""
        idx = torch.randint(0, self.rows.shape[0], (batch_size,), generator=generator).numpy()
        tokens = torch.from_numpy(self.rows[idx])
        return pg.Batch(tokens, torch.from_numpy(self.labels[idx]), "cls", attention_mask=tokens != self.pad_id)

    def cache_key(self) -> dict[str, Any]:
        """The rows and labels by content."""
        return {"task": "ClassificationTask", "name": self.name, "data": pg.array_digest(self.rows, self.labels)}


@dataclass(frozen=True, eq=False)
class RowSampler:
    """``sampler(batch_size, seed)``: rows drawn uniformly with replacement."""

    rows: np.ndarray
    name: str

    def __call__(self, batch_size: int, seed: int) -> np.ndarray:
        return self.rows[np.random.default_rng(seed).integers(0, self.rows.shape[0], size=int(batch_size))]


@dataclass(frozen=True, eq=False)
class CorpusTasks:
    """One corpus: its plug-in geometry (n x n), training tasks and held-out tasks by objective."""

    name: str
    n_positions: int
    geometry: np.ndarray
    tasks: dict
    held_out: dict
    vocab_size: int


def windows(seqs, lookup: np.ndarray, pad_id: int, n: int) -> np.ndarray:
    """First n tokens of every sequence, remapped by ``lookup``, padded with ``pad_id``."""
    lengths = np.asarray(seqs.lengths)
    rows = np.full((lengths.size, n), pad_id, dtype=np.int64)
    valid = np.arange(n)[None, :] < np.minimum(lengths, n)[:, None]
    src = (np.asarray(seqs.offsets[:-1])[:, None] + np.arange(n)[None, :])[valid]
    rows[valid] = lookup[np.asarray(seqs.tokens)[src].astype(np.int64)]
    return rows


def _with_cls(rows: np.ndarray, cls_id: int) -> np.ndarray:
    return np.concatenate([np.full((rows.shape[0], 1), cls_id, dtype=np.int64), rows], axis=1)


def vocabulary_lookup(seqs, top_k: int) -> np.ndarray:
    """Token id -> its rank among the ``top_k`` most frequent ids of ``seqs`` (ties by id); every other id -> ``top_k``."""
    counts = np.bincount(seqs.tokens.astype(np.int64), minlength=seqs.vocab_size)
    kept = np.lexsort((np.arange(counts.size), -counts))[:top_k]  # by count, then id
    lookup = np.full(seqs.vocab_size, top_k, dtype=np.int64)
    lookup[kept] = np.arange(top_k)
    return lookup


def tasks(name: str, n: int, s: Settings) -> CorpusTasks:
    """Masked tokens and [CLS] classification of one corpus: reversal (synthetic) or sentiment (sst2, imdb)."""
    corpus = pg.load_corpus(name, "train", progress=False)
    if name == "synthetic":
        mu = np.asarray(corpus.true_marginals)[:n]
        V = int(mu.shape[1])
        D = pg.hellinger_matrix(pg.positional_marginals(corpus.sequences, n, V))
        sampler = pg.MarginalSampler(mu)
        mlm = pg.MLMTask(sampler, n_tokens=V, seq_len=n, name=sampler.name, order_sensitive=not sampler.identical)
        cls_id, vocab = V + 1, V + 2  # after MLM's mask token V

        def reversed_task(seed: int, m: int, label: str) -> ClassificationTask:
            x = pg.sample_synthetic_sequences(mu, m, seed=seed).tokens.reshape(m, n).astype(np.int64)
            y = np.random.default_rng(seed + 1).integers(0, 2, size=m)
            x[y == 1] = x[y == 1, ::-1]
            return ClassificationTask(_with_cls(x, cls_id), y.astype(np.int64), vocab, pad_id=-1,
                                      name=f"synthetic-reversed-n{n}-{label}")

        return CorpusTasks(name, n, D, {"mlm": mlm, "cls": reversed_task(1, 20000, "train")},
                           {"mlm": mlm, "cls": reversed_task(2, s.eval_sequences, "held-out")}, vocab)
    seqs = corpus.sequences
    D = pg.hellinger_matrix(pg.positional_marginals(seqs, n, corpus.vocab_size))
    lookup = vocabulary_lookup(seqs, s.top_k)  # UNK = top_k, PAD = top_k + 1, mask = top_k + 2
    pad, n_tokens = s.top_k + 1, s.top_k + 2
    cls_id, vocab = n_tokens + 1, n_tokens + 2
    rows = windows(seqs, lookup, pad, n)
    long_rows = rows[seqs.lengths >= n]
    name_mlm = f"{name}-train-top{s.top_k}-n{n}-min{n}-{pg.array_digest(seqs.tokens, seqs.offsets)}"
    mlm = pg.MLMTask(RowSampler(long_rows, name_mlm), n_tokens=n_tokens, seq_len=n, name=name_mlm)
    split = {"sst2": "validation", "imdb": "test"}[name]
    held = pg.load_corpus(name, split, progress=False)
    held_rows, held_labels = windows(held.sequences, lookup, pad, n), np.asarray(held.labels)
    if held_rows.shape[0] > s.eval_sequences:
        pick = np.sort(np.random.default_rng(0).choice(held_rows.shape[0], size=s.eval_sequences, replace=False))
        held_cls_rows, held_labels = held_rows[pick], held_labels[pick]
    else:
        held_cls_rows = held_rows
    held_mlm_rows = held_rows[held.sequences.lengths >= n][: s.eval_sequences]
    tag = f"n{n}-top{s.top_k}"
    cls = ClassificationTask(_with_cls(rows, cls_id), np.asarray(corpus.labels, dtype=np.int64), vocab, pad,
                             name=f"{name}-sentiment-{tag}")
    held_cls = ClassificationTask(_with_cls(held_cls_rows, cls_id), held_labels.astype(np.int64), vocab, pad,
                                  name=f"{name}-{split}-sentiment-{tag}")
    held_mlm = pg.MLMTask(RowSampler(held_mlm_rows, f"{name}-{split}-n{n}"), n_tokens=n_tokens, seq_len=n,
                          name=f"{name}-{split}-{tag}")
    return CorpusTasks(name, n, D, {"mlm": mlm, "cls": cls}, {"mlm": held_mlm, "cls": held_cls}, vocab)


# --------------------------------------------------------------------------- training
def fixed_table_prepare(table: np.ndarray, offset: int = 0):
    """``prepare`` hook of pg.train: write ``table`` into the position rows from ``offset``, zero the others."""

    def prepare(model):
        with torch.no_grad():
            model.pos.zero_()
            model.pos[offset : offset + table.shape[0]] = torch.as_tensor(table, dtype=model.pos.dtype)
        return model

    return prepare


def model_config(s: Settings, ct: CorpusTasks, objective: str, position: str = "learned") -> pg.TransformerConfig:
    """The chapter's transformer for one corpus and objective (a fixed table rides in a frozen ``learned`` table)."""
    return pg.TransformerConfig(
        vocab_size=ct.vocab_size, d_model=s.d_model, n_heads=s.n_heads, n_layers=s.n_layers, d_ff=s.d_ff,
        max_len=ct.n_positions + 1, position=position, rank=s.lowrank if position == "lowrank" else None,
        n_classes=2 if objective == "cls" else None, pooling="first")


def held_out_accuracy(model, task) -> float:
    """Accuracy on every held-out row (classification) or on 4 batches of 256 (masked tokens)."""
    if not isinstance(task, ClassificationTask):
        return float(pg.evaluate(model, task, n_batches=4, batch_size=256, seed=12345))
    correct = 0
    with pg.eval_mode(model), torch.no_grad():
        device = next(model.parameters()).device
        for i in range(0, task.rows.shape[0], 512):
            tokens = torch.from_numpy(task.rows[i : i + 512]).to(device)
            out = model(tokens, attention_mask=tokens != task.pad_id)
            correct += int((out.cls_logits.argmax(-1).cpu().numpy() == task.labels[i : i + 512]).sum())
    return correct / task.rows.shape[0]


@dataclass(frozen=True)
class Job:
    """One training run."""

    corpus: str
    objective: str
    encoding: str
    seed: int


def jobs(s: Settings, corpora) -> list[Job]:
    """Every (corpus, objective, encoding, seed), grouped by corpus, objective, encoding."""
    objectives = {name: objs for name, _, objs in s.corpora}
    return [Job(name, objective, encoding, seed) for name in corpora for objective in objectives.get(name, ("mlm", "cls"))
            for encoding in s.encodings for seed in s.seeds]


def run_job(job: Job, s: Settings, corpora, *, tables=None, cache: bool = True) -> dict:
    """Train one run (a fixed table frozen in the position rows) and measure its held-out accuracy."""
    ct = corpora[job.corpus]
    table = (fixed_tables(ct.geometry, s) if tables is None else tables).get(job.encoding)
    offset = 1 if job.objective == "cls" else 0  # the [CLS] slot keeps a zero row
    cfg = model_config(s, ct, job.objective, "learned" if table is not None else job.encoding)
    tcfg = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=job.seed, device=s.device,
                          log_every=max(1, s.steps // 50), freeze=("pos",) if table is not None else ())
    options = {"fixed_table": pg.array_digest(table), "offset": offset} if table is not None else None
    res = pg.train(cfg, tcfg, ct.tasks[job.objective], prepare=fixed_table_prepare(table, offset) if table is not None else None,
                   cache_namespace="constructive", cache_options=options, progress=False, cache=cache)
    losses = [h["loss"] for h in res.history if "loss" in h]
    return {"corpus": job.corpus, "objective": job.objective, "encoding": job.encoding, "seed": job.seed,
            "final_loss": float(np.mean(losses[-max(1, len(losses) // 10):])),
            "accuracy": held_out_accuracy(res.model().to(pg.resolve_device(s.device)), ct.held_out[job.objective])}


def run_all(s: Settings, corpora, *, cache: bool = True) -> pd.DataFrame:
    """Every job of ``s``, one row per run."""
    tables = {name: fixed_tables(ct.geometry, s) for name, ct in corpora.items()}
    return pd.DataFrame([run_job(j, s, corpora, tables=tables[j.corpus], cache=cache) for j in jobs(s, corpora)])


# --------------------------------------------------------------------------- summaries
def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean accuracy and 95% t interval over seeds (cut to [0, 1]) per (corpus, objective, encoding)."""
    out = pg.seed_summary(runs, by=["corpus", "objective", "encoding"], metrics="accuracy", bounds={"accuracy": (0, 1)})
    return out["accuracy"].rename_axis(columns=None)


def interval_table(summary: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """``"mean [low, high]"``, one column per (corpus, objective)."""
    f = lambda r: f"{r['mean']:.{digits}f} [{r['low']:.{digits}f}, {r['high']:.{digits}f}]"  # noqa: E731
    return summary.apply(f, axis=1).unstack(["corpus", "objective"], sort=False)


def contrasts(runs: pd.DataFrame, pairs) -> pd.DataFrame:
    """Difference of mean accuracies (a minus b) with its 95% Welch interval, for each pair (a, b) and task."""
    rows = {}
    for (corpus, objective), g in runs.groupby(["corpus", "objective"], sort=False):
        acc = g.groupby("encoding")["accuracy"].apply(np.asarray)
        for a, b in pairs:
            d = pg.seed_difference(acc[a], acc[b])
            rows[(corpus, objective, f"{a} − {b}")] = {"mean": d.mean, "low": d.low, "high": d.high,
                                                        "separated": d.excludes_zero}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["corpus", "objective", "comparison"])


def table_stresses(corpora, s: Settings, *, corrected=None) -> pd.DataFrame:
    """Scale-optimal stress of every fixed table (and RoPE's, ALiBi's vector forms): plug-in, and corrected with interval."""
    parts = {}
    for name, ct in corpora.items():
        enc = fixed_tables(ct.geometry, s)
        enc["rope"] = pg.rope_encoding(ct.n_positions, s.d_model, head_dim=s.d_model // s.n_heads)
        enc["alibi"] = pg.alibi_encoding(ct.n_positions, s.n_heads)
        enc = {k: v for k, v in enc.items() if k in s.encodings}
        table = pd.DataFrame({"plug-in": {k: pg.stress(P, ct.geometry, scale="optimal") for k, P in enc.items()}})
        if corrected is not None:
            iv = pg.stress_intervals(corrected[name], enc, n_permutations=1).reindex(table.index)
            table[["corrected", "corrected low", "corrected high"]] = iv[["stress", "low", "high"]].to_numpy()
        parts[name] = table
    return pd.concat(parts, names=["corpus", "encoding"])


def stress_performance(runs: pd.DataFrame, stresses: pd.Series, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Spearman correlation of stress and mean accuracy over the encodings with a stress, 95% interval by resampling seeds."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    rows = {}
    for (corpus, objective), g in runs.groupby(["corpus", "objective"], sort=False):
        x = stresses.loc[corpus]
        encs = [e for e in dict.fromkeys(g["encoding"]) if e in x.index]
        acc = [g.loc[g["encoding"] == e, "accuracy"].to_numpy() for e in encs]
        x = x.reindex(encs).to_numpy()
        boots = [spearmanr(x, [rng.choice(a, size=a.size).mean() for a in acc]).statistic for _ in range(n_boot)]
        lo, hi = np.nanquantile(boots, [0.025, 0.975])
        rows[(corpus, objective)] = {"rho": float(spearmanr(x, [a.mean() for a in acc]).statistic),
                                     "low": float(lo), "high": float(hi), "encodings": len(encs)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["corpus", "objective"])


def full_profile_runs() -> tuple[pd.DataFrame, dict]:
    """The full profile's runs (trained on a GPU) and their record: data/constructive_full.csv and .json."""
    return pd.read_csv(DATA / "constructive_full.csv"), json.loads((DATA / "constructive_full.json").read_text())


# --------------------------------------------------------------------------- charts
def plot_accuracy(frame: pd.DataFrame, x_title: str = "held-out accuracy (mean, 95% interval)", what: str = "",
                  fixed=FIXED_TABLES, measure: str = "accuracy") -> Any:
    """Accuracy (or ``measure``) per encoding, one panel per (corpus, objective): a point at ``mean``, a bar to ``low``, ``high``.

    ``fixed`` names the encodings drawn as fixed tables (circles); the others are squares.
    """
    frame = frame.reset_index() if "encoding" not in frame.columns else frame.copy()
    frame["kind"] = np.where(frame["encoding"].isin(list(fixed)), "fixed table", "the model's own")
    encodings = list(dict.fromkeys(frame["encoding"]))
    colour = alt.Color("encoding:N", scale=pg.colour_scale(encodings), legend=None)
    shape = alt.Shape("kind:N", title="table", scale=alt.Scale(domain=["fixed table", "the model's own"],
                                                                range=["circle", "square"]))
    tips = ["encoding:N", alt.Tooltip("mean:Q", title=measure, format=".3f")]
    bars = "low" in frame.columns
    if bars:
        tips += [alt.Tooltip("low:Q", title="95% low", format=".3f"), alt.Tooltip("high:Q", title="95% high", format=".3f")]
    x = alt.X("mean:Q", title=x_title, scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=5))
    panels = []
    for (corpus, objective), task in frame.groupby(["corpus", "objective"], sort=False):
        y = alt.Y("encoding:N", sort=encodings, title=None)
        base = alt.Chart(task, title=f"{corpus}, {objective}").properties(
            width=pg.PANEL_WIDTH - 50, height=22 * task["encoding"].nunique())
        layer = base.mark_point(filled=True, size=60, opacity=1).encode(x=x, y=y, color=colour, shape=shape, tooltip=tips)
        if bars:
            low = alt.X("low:Q", title=x_title, scale=alt.Scale(zero=False), axis=alt.Axis(tickCount=5))
            layer = base.mark_rule(strokeWidth=2).encode(x=low, x2="high:Q", y=y, color=colour, tooltip=tips) + layer
        panels.append(layer if bars else alt.layer(layer))
    return pg.finish_chart(pg.panel_grid(panels, columns=2), description=(
        f"Held-out {measure} of each encoding, one panel per corpus and objective{what}; circles are fixed tables, "
        "squares the model's own positional kinds."))
