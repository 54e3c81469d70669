"""Helpers of the chapter "Positional separation" (05_positional_separation).

The five-seed runs of the weight-decay probe are stored in book/data/ch05_seeds.csv (small
profile). To remake it (about 3 minutes on one core), with the Makefile's EXECUTE_ENV as for the
chapters; with POSGEO_PROFILE=full (a GPU) it writes book/data/ch05_seeds_full.csv instead:

    cd book && env $EXECUTE_ENV OMP_NUM_THREADS=1 POSGEO_DATA_DIR=/path/to/data ../.venv/bin/python _ch05.py

The same runs at five strengths of the merge penalty (``SWEEP_DECAYS``, about 15 minutes on one
core; part of ``make p1-controls``) are stored in book/data/ch05_sweep.csv by ``python _ch05.py sweep``.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import altair as alt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from scipy.spatial.distance import pdist

import posgeo as pg

DATA = Path(__file__).resolve().parent / "data"
CONTRAST_RUNS = ["synthetic MLM", "(b) i.i.d. MLM", "sst2 MLM", "(b) sst2 shuffled"]

_PROFILES = {
    "small": dict(
        seq_len=32, vocab_size=64, n_filler=8, d_model=32, n_layers=2, n_heads=4, d_ff=64, steps=500, batch_size=64,
        lr=3e-3, snapshot_every=50, decay=10.0, text_seq_len=16, top_k=1000, threads=1, device="cpu",
        pretrained=None, finetune_corpora=("sst2",), finetune_steps=80, finetune_batch_size=16, finetune_lr=5e-5,
        finetune_weight_decay=0.01, finetune_snapshot_every=20, finetune_max_length={"sst2": 64},
        finetune_eval_size=256, seeds=(0, 1, 2, 3, 4)),
    "full": dict(
        seq_len=64, vocab_size=128, n_filler=16, d_model=128, n_layers=4, n_heads=8, d_ff=512, steps=5000,
        batch_size=128, lr=1e-3, snapshot_every=250, decay=10.0, text_seq_len=32, top_k=5000, threads=None,
        device="auto", pretrained="bert-base-uncased", finetune_corpora=("sst2", "imdb"), finetune_steps=2000,
        finetune_batch_size=32, finetune_lr=2e-5, finetune_weight_decay=0.01, finetune_snapshot_every=200,
        finetune_max_length={"sst2": 128, "imdb": 512}, finetune_eval_size=2000, seeds=(0, 1, 2, 3, 4)),
}


def settings(profile: str | None = None) -> SimpleNamespace:
    """The chapter's sizes for a profile (``$POSGEO_PROFILE``, default small)."""
    name = pg.current_profile(profile)
    return SimpleNamespace(profile=name, **_PROFILES[name])


def seeds_file(s) -> Path:
    """The stored five-seed runs of a profile: data/ch05_seeds.csv (small), data/ch05_seeds_full.csv (full)."""
    return DATA / ("ch05_seeds.csv" if s.profile == "small" else f"ch05_seeds_{s.profile}.csv")


def model_config(s, task, pooling: str = "mean") -> pg.TransformerConfig:
    """A small encoder with a learned position table, sized for ``task``."""
    return pg.TransformerConfig(vocab_size=task.vocab_size, d_model=s.d_model, n_heads=s.n_heads, n_layers=s.n_layers,
                                d_ff=s.d_ff, max_len=task.seq_len, position="learned", n_classes=task.n_classes,
                                pooling=pooling)


def train_config(s, seed: int = 0) -> pg.TrainConfig:
    """AdamW without weight decay, the table recorded every ``snapshot_every`` steps."""
    return pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, weight_decay=0.0, seed=seed,
                          device=s.device, log_every=50, eval_every=s.steps, eval_batches=8,
                          snapshot_every=s.snapshot_every)


def trajectory(snapshots: dict, rows: int | None = None) -> pd.DataFrame:
    """``pg.separation_stats`` of every snapshot of a table, one row per step."""
    return pd.DataFrame([{"step": int(k), **pg.separation_stats(np.asarray(snapshots[k])[:rows]).as_dict()}
                         for k in sorted(snapshots)])


# --------------------------------------------------------------------------- tasks
def marginal_mlm_task(mu) -> pg.MLMTask:
    """Masked tokens drawn position by position from the marginals ``mu`` (n, V)."""
    sampler = pg.MarginalSampler(mu)
    n, V = sampler.marginals.shape
    return pg.MLMTask(sampler, n_tokens=V, seq_len=n, name=sampler.name, order_sensitive=not sampler.identical)


@dataclass(frozen=True, eq=False)
class BagOfTokensTask:
    """Label 1 when more than ``threshold`` tokens lie in the low half of the vocabulary: order-insensitive."""

    marginals: np.ndarray
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=False, init=False)

    def __post_init__(self):
        object.__setattr__(self, "_sampler", pg.MarginalSampler(self.marginals))
        n, V = self._sampler.marginals.shape
        pmf = np.array([1.0])  # the exact distribution of the low-half count (Poisson-binomial)
        for p in self._sampler.marginals[:, : V // 2].sum(axis=1):
            pmf = np.convolve(pmf, [1.0 - p, p])
        object.__setattr__(self, "threshold", int(np.argmin(np.abs(1.0 - np.cumsum(pmf) - 0.5))))
        object.__setattr__(self, "seq_len", n)
        object.__setattr__(self, "vocab_size", V)

    def sample(self, batch_size: int, generator: torch.Generator) -> pg.Batch:
        """Draw ``batch_size`` labelled sequences."""
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        tokens = torch.as_tensor(self._sampler(batch_size, seed), dtype=torch.long)
        return pg.Batch(tokens, ((tokens < self.vocab_size // 2).sum(dim=1) > self.threshold).long(), "cls")

    def cache_key(self) -> dict:
        """Class name and a hash of the marginals."""
        return {"task": "BagOfTokensTask", "marginals": self._sampler.name}


def text_mlm_task(corpus, seq_len: int, top_k: int, shuffle: bool = False) -> pg.MLMTask:
    """Masked tokens on the first ``seq_len`` tokens of sentences at least that long; top_k tokens + UNK + PAD."""
    seqs = corpus.sequences
    counts = np.bincount(seqs.tokens.astype(np.int64), minlength=seqs.vocab_size)
    kept = np.lexsort((np.arange(counts.size), -counts))[:top_k]  # by count, then id
    remap = np.full(counts.size, top_k, dtype=np.int64)  # UNK = top_k (PAD = top_k + 1: no sentence is short)
    remap[kept] = np.arange(top_k)
    starts = seqs.offsets[:-1][seqs.lengths >= seq_len]
    rows = remap[seqs.tokens[starts[:, None] + np.arange(seq_len)]]

    def sampler(batch_size, seed):
        rng = np.random.default_rng(seed)
        out = rows[rng.integers(0, rows.shape[0], size=int(batch_size))]
        if shuffle:  # a fresh order at every draw: every position has the same distribution
            out = np.take_along_axis(out, np.argsort(rng.random(out.shape), axis=1, kind="stable"), axis=1)
        return out

    name = f"ch05-{corpus.name}-{corpus.split}-top{top_k}-n{seq_len}-{pg.array_digest(seqs.tokens, seqs.offsets)}"
    return pg.MLMTask(sampler, n_tokens=top_k + 2, seq_len=seq_len, name=name + ("-shuffled" if shuffle else ""),
                      order_sensitive=not shuffle)


@dataclass(frozen=True, eq=False)
class Run:
    """One run of the chapter: a task, its read-out, and which of the theorem's conditions hold."""

    task: object
    pooling: str
    uniform_attention: bool
    nonstationary: bool
    order_sensitive: bool

    @property
    def conditions_hold(self) -> bool:
        """All three conditions of Theorem 4."""
        return self.nonstationary and self.order_sensitive and not self.uniform_attention


def runs(s, text=None) -> dict[str, Run]:
    """The roster: runs that satisfy Theorem 4's conditions, and probes that break one."""
    mu = pg.synthetic_marginals(s.seq_len, s.vocab_size, nonstationarity=1.0)
    ring = pg.synthetic_marginals(s.seq_len, s.vocab_size, nonstationarity=0.0)
    iid = np.tile(mu.mean(axis=0), (s.seq_len, 1))
    marker = pg.FirstMarkerTask(seq_len=s.seq_len, n_filler=s.n_filler)
    out = {"synthetic MLM": Run(marginal_mlm_task(mu), "mean", False, True, True),
           "ring MLM (shift-invariant)": Run(marginal_mlm_task(ring), "mean", False, True, True),
           "first marker": Run(marker, "first", False, False, True)}
    if text is not None:
        out[f"{text.name} MLM"] = Run(text_mlm_task(text, s.text_seq_len, s.top_k), "mean", False, True, True)
    out["(a) bag of tokens"] = Run(BagOfTokensTask(mu), "first", False, True, False)
    out["(b) i.i.d. MLM"] = Run(marginal_mlm_task(iid), "mean", False, False, False)
    if text is not None:
        out[f"(b) {text.name} shuffled"] = Run(text_mlm_task(text, s.text_seq_len, s.top_k, shuffle=True),
                                               "mean", False, False, False)
    out["(c) first marker, uniform attn"] = Run(marker, "first", True, False, True)
    out["(c) synthetic MLM, uniform attn"] = Run(marginal_mlm_task(mu), "mean", True, True, True)
    return out


# --------------------------------------------------------------------------- training
def uniform_attention(model: pg.Transformer) -> pg.Transformer:
    """Hold every query and key projection at zero (gradient hooks): each attention weight is 1/n."""
    d = model.config.d_model
    keep = torch.ones(3 * d, 1)
    keep[: 2 * d] = 0.0  # rows of qkv: [queries | keys | values]
    with torch.no_grad():
        for block in model.blocks:
            qkv = block.attn.qkv
            qkv.weight[: 2 * d].zero_()
            qkv.bias[: 2 * d].zero_()
            qkv.weight.register_hook(lambda g, m=keep: g * m)
            qkv.bias.register_hook(lambda g, m=keep[:, 0]: g * m)
    return model


def train(s, roster: dict[str, Run], decay: float | None = None, seed: int = 0) -> dict[str, pg.TrainResult]:
    """One ``pg.train`` run per entry, ``decay`` on the position table alone (None: no decay anywhere)."""
    out = {}
    with pg.torch_threads(s.threads):
        for name, r in roster.items():
            extra = dict(prepare=uniform_attention, cache_namespace="train-separation",
                         cache_options={"uniform_attention": True}) if r.uniform_attention else {}
            out[name] = pg.train(model_config(s, r.task, r.pooling), train_config(s, seed), r.task,
                                 position_weight_decay=decay, progress=False, **extra)
    return out


def summary(results: dict[str, pg.TrainResult]) -> pd.DataFrame:
    """Accuracy and separation per run; ``late`` = mean over the checkpoints of the second half."""
    rows = {}
    for name, res in results.items():
        t = trajectory(res.snapshots)
        late = t[t["step"] >= t["step"].max() / 2]
        rows[name] = {"accuracy": res.final("eval_accuracy"), "min at init": t["min_dist"].iloc[0],
                      "lowest min": t["min_dist"].min(), "final min": t["min_dist"].iloc[-1],
                      "late min": late["min_dist"].mean(), "late median": late["q50"].mean(),
                      "late normalised": late["normalised"].mean(), "late relative": late["relative"].mean()}
    return pd.DataFrame.from_dict(rows, orient="index")


def contrasts(table: pd.DataFrame, specs, level: float = 0.95) -> pd.DataFrame:
    """Welch interval of mean(A) - k * mean(B) over seeds, one row per (A, B, metric, k, label)."""
    rows = {}
    for a, b, metric, k, label in specs:
        x = table.loc[table["run"] == a, metric].to_numpy(float)
        y = k * table.loc[table["run"] == b, metric].to_numpy(float)
        iv = pg.seed_difference(x, y, paired=False, level=level)
        rows[label] = {"A": x.mean(), "k × B": y.mean(), "difference": iv.mean, "low": iv.low, "high": iv.high}
    return pd.DataFrame.from_dict(rows, orient="index")


def seed_table(s, text) -> pd.DataFrame:
    """The four contrast runs under the probe's decay, once per seed: one row per (run, seed)."""
    roster = {name: r for name, r in runs(s, text).items() if name in CONTRAST_RUNS}
    return pd.concat([summary(train(s, roster, decay=s.decay, seed=k)).rename_axis("run").reset_index()
                      .assign(seed=k) for k in s.seeds], ignore_index=True)


SWEEP_DECAYS = (1.0, 3.0, 10.0, 30.0, 100.0)
"""The merge penalty's strengths of the sweep (the probe's is 10)."""


def sweep_file(s) -> Path:
    """The stored penalty sweep of a profile: data/ch05_sweep.csv (small), data/ch05_sweep_full.csv (full)."""
    return DATA / ("ch05_sweep.csv" if s.profile == "small" else f"ch05_sweep_{s.profile}.csv")


def sweep_table(s, text, decays=SWEEP_DECAYS) -> pd.DataFrame:
    """The four contrast runs at every penalty strength and seed: one row per (decay, run, seed)."""
    if not all(decay > 0 for decay in decays):
        raise ValueError(f"a penalty strength must be positive, got {decays}; use the plain runs for no penalty")
    roster = {name: r for name, r in runs(s, text).items() if name in CONTRAST_RUNS}
    parts = []
    for decay in decays:
        for k in s.seeds:
            parts.append(summary(train(s, roster, decay=float(decay), seed=k)).rename_axis("run").reset_index()
                         .assign(seed=k, decay=float(decay)))
    return pd.concat(parts, ignore_index=True)


SWEEP_CONTRASTS = (("synthetic MLM", "(b) i.i.d. MLM"), ("sst2 MLM", "(b) sst2 shuffled"))


def sweep_ratios(sweep: pd.DataFrame, metric: str = "late median", level: float = 0.95) -> pd.DataFrame:
    """Per strength and matched contrast, the ratio of the geometric means over seeds of ``metric``, A over B,
    with a Welch interval (on the logarithms; the ratio's interval is exp of theirs): one row per (decay, A)."""
    rows = []
    for decay, g in sweep.groupby("decay"):
        for a, b in SWEEP_CONTRASTS:
            x = np.log(g.loc[g["run"] == a, metric].to_numpy(float))
            y = np.log(g.loc[g["run"] == b, metric].to_numpy(float))
            iv = pg.seed_difference(x, y, paired=False, level=level)
            rows.append({"decay": decay, "run": a, "control": b, "ratio": float(np.exp(iv.mean)),
                         "low": float(np.exp(iv.low)), "high": float(np.exp(iv.high))})
    return pd.DataFrame(rows)


def floor_slopes(sweep: pd.DataFrame, metric: str = "late median") -> pd.DataFrame:
    """Per run, the slope of log(metric) against log(decay), fitted per seed, with its interval over seeds
    (a random walk held by decay predicts -1/2)."""
    rows = {}
    for run, g in sweep.groupby("run", sort=False):
        slopes = [np.polyfit(np.log(h["decay"].to_numpy(float)), np.log(h[metric].to_numpy(float)), 1)[0]
                  for _, h in g.groupby("seed")]
        rows[run] = pg.seed_interval(slopes).as_dict()
    return pd.DataFrame.from_dict(rows, orient="index")[["mean", "low", "high"]]


def plot_sweep(sweep: pd.DataFrame, metric: str = "late median"):
    """``metric`` of the four contrast runs against the penalty's strength (log-log), mean over seeds with bands."""
    summary = pg.seed_summary(sweep, by=["run", "decay"], metrics=metric, bounds={metric: (0, None)})[metric]
    frame = summary.reset_index()[["run", "decay", "mean", "low", "high"]]
    chart = pg.series_chart(frame, x="decay", y="mean", series="run", lower="low", upper="high", points=True,
                            zoom=False, x_title="λ, weight decay on the position table (log scale)",
                            y_title=f"{metric} distance (log scale)", series_title="run",
                            x_scale={"type": "log", "nice": False}, y_scale={"type": "log", "nice": False},
                            series_order=CONTRAST_RUNS)
    return pg.finish_chart(chart, description=(
        f"The {metric} pairwise distance of the position table, averaged over the second half of training, for the "
        "synthetic and SST-2 masked-token runs and their matched exchangeable controls, against the strength of the "
        "merge penalty (log-log), mean over five seeds with 95% bands."))


# --------------------------------------------------------------------------- fine-tuning
@dataclass(frozen=True)
class Finetuned:
    """Snapshots of the position table during fine-tuning, accuracies before/after, rows the inputs reached."""

    snapshots: dict
    eval_accuracy: tuple
    positions_seen: int

    def drift(self, rows: int | None = None) -> pd.DataFrame:
        """||P_t - P_0||_F / ||P_0||_F at every snapshot."""
        P0 = self.snapshots[0][:rows]
        return pd.DataFrame([{"step": k, "relative_change": np.linalg.norm(P[:rows] - P0) / np.linalg.norm(P0)}
                             for k, P in sorted(self.snapshots.items())])


def _finetune(texts, labels, eval_texts, eval_labels, model, c) -> Finetuned:
    """Fine-tune a copy of the pretrained encoder with a linear head on [CLS]; every parameter trains."""
    device = pg.resolve_device(c["device"])
    if model is None:
        tokenizer = pg.default_tokenizer()
    else:
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(model)
    rng = np.random.default_rng(c["seed"])
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        torch.manual_seed(c["seed"])
        base = copy.deepcopy(pg.load_pretrained(model)).to(device)
        g = torch.Generator().manual_seed(c["seed"])
        head = torch.nn.Linear(base.config.hidden_size, int(labels.max()) + 1)
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=g) * 0.02)
            head.bias.zero_()
        head = head.to(device)
        params = [p for p in base.parameters() if p.requires_grad] + list(head.parameters())

        def encode(batch):
            enc = tokenizer(batch, truncation=True, max_length=c["max_length"], padding=True, return_tensors="pt")
            return {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}

        def accuracy():
            correct = 0
            with pg.eval_mode(base), torch.no_grad():
                for i in range(0, len(eval_texts), 64):
                    logits = head(base(**encode(eval_texts[i : i + 64])).last_hidden_state[:, 0])
                    correct += int((logits.argmax(-1).cpu().numpy() == eval_labels[i : i + 64]).sum())
            return correct / len(eval_texts)

        evals, snapshots, seen = [(0, accuracy())], {0: pg.learned_position_table(base)}, [0]
        base.train()
        head.train()

        def step_loss(step):
            idx = rng.choice(len(texts), size=min(c["batch_size"], len(texts)), replace=False)
            enc = encode([texts[i] for i in idx])
            seen[0] = max(seen[0], int(enc["input_ids"].shape[1]))
            y = torch.as_tensor(labels[idx], device=device)
            logits = head(base(**enc).last_hidden_state[:, 0])
            return F.cross_entropy(logits, y), (logits.argmax(-1) == y).float().mean()

        def after_step(done):
            if done % c["snapshot_every"] == 0 or done == c["steps"]:
                snapshots[done] = pg.learned_position_table(base)

        pg.optimize([{"params": params, "weight_decay": c["weight_decay"]}], step_loss, steps=c["steps"], lr=c["lr"],
                    grad_clip=1.0, log_every=10, after_step=after_step, progress=False)
        evals.append((c["steps"], accuracy()))
    return Finetuned(snapshots, tuple(evals), seen[0])


def finetune(s) -> dict[str, Finetuned]:
    """Fine-tune the profile's pretrained model on each of its corpora (cached)."""
    out = {}
    for corpus in s.finetune_corpora:
        tr = pg.load_texts(corpus, "train")
        ev = pg.load_texts(corpus, {"sst2": "validation", "imdb": "test"}[corpus])
        ev = ev.sample(n=min(s.finetune_eval_size, len(ev)), random_state=0)
        c = {"steps": s.finetune_steps, "batch_size": s.finetune_batch_size, "lr": s.finetune_lr,
             "weight_decay": s.finetune_weight_decay, "max_length": s.finetune_max_length[corpus],
             "snapshot_every": s.finetune_snapshot_every, "seed": 0, "device": s.device}
        texts, labels = list(tr["text"]), tr["label"].to_numpy(np.int64)
        ev_texts, ev_labels = list(ev["text"]), ev["label"].to_numpy(np.int64)
        digest = hashlib.sha256("\0".join(texts + ev_texts).encode() + labels.tobytes() + ev_labels.tobytes())
        key = {"model": s.pretrained or pg.MINILM, "data": digest.hexdigest()[:16], **c}
        with pg.torch_threads(s.threads):
            out[corpus] = pg.cached("ch05-finetune", key,
                                    lambda: _finetune(texts, labels, ev_texts, ev_labels, s.pretrained, c))
    return out


# --------------------------------------------------------------------------- plots
_LABELS = {"min_dist": "min separation min ||p_i − p_j||", "normalised": "min separation / mean row norm",
           "q50": "median pairwise distance ||p_i − p_j||"}


def _key(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:6]


def plot_trajectories(trajectories: dict, columns=("min_dist", "normalised"), dashed=(), log=()):
    """Separation statistics over training: one line per run (dashed: ``dashed``), one panel per column."""
    names = list(trajectories)
    frame = pd.concat([t[["step", *columns]].assign(run=n) for n, t in trajectories.items()], ignore_index=True)
    key = _key("trajectories", tuple(names), tuple(columns), len(frame))
    pick = alt.selection_point(fields=["run"], bind="legend", name=f"pick_runs_{key}")
    colour = alt.Color("run:N", scale=pg.colour_scale(names), sort=names, title="run",
                       legend=alt.Legend(symbolType="stroke", columns=2, symbolStrokeWidth=2.5))
    dash = alt.StrokeDash("run:N", sort=names, title="run",
                          scale=alt.Scale(domain=names, range=[[6, 3] if n in dashed else [1, 0] for n in names]))
    x = alt.X("step:Q", title="training step", axis=alt.Axis(tickCount=5))
    panels = []
    for k, col in enumerate(columns):
        title = _LABELS[col] + (" (log scale)" if col in log else "")
        y = alt.Y(f"{col}:Q", title=title, axis=alt.Axis(tickCount=5, format="~g"),
                  scale=alt.Scale(type="log", nice=False, padding=8) if col in log else alt.Scale(zero=True))
        base = alt.Chart(frame).properties(width=pg.PANEL_WIDTH, height=220)
        line = base.mark_line(strokeWidth=1.8).encode(
            x=x, y=y, color=colour, strokeDash=dash, opacity=alt.condition(pick, alt.value(1.0), alt.value(0.1)))
        line = line.add_params(pick, alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_{key}_{k}"))
        points = base.mark_point(filled=True, size=18).encode(
            x=x, y=y, color=colour, opacity=alt.condition(pick, alt.value(0.9), alt.value(0.05)),
            tooltip=["run:N", "step:Q", alt.Tooltip(f"{col}:Q", title=_LABELS[col], format=".4~g")])
        panels.append(alt.layer(line, points))
    chart = pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared")
    return pg.finish_chart(chart, description=(
        f"Separation of the position table over training, one line per run ({', '.join(names)}), one panel per "
        f"statistic: {'; '.join(_LABELS[c] for c in columns)}. Dashed: {', '.join(dashed) or 'none'}."))


def plot_distances(snapshot_sets: dict, n_checkpoints: int = 4):
    """Box plots of all pairwise distances of each run's table at a few checkpoints (log scale)."""
    names, records = list(snapshot_sets), []
    for name, snaps in snapshot_sets.items():
        steps = sorted(snaps)
        for step in sorted({steps[int(round(t))] for t in np.linspace(0, len(steps) - 1, n_checkpoints)}):
            q = np.quantile(pdist(snaps[step]), [0, 0.25, 0.5, 0.75, 1])
            records.append({"run": name, "step": step, "min": q[0], "q1": q[1], "median": q[2], "q3": q[3], "max": q[4]})
    frame = pd.DataFrame(records)
    pick = alt.selection_point(fields=["run"], bind="legend", name=f"pick_boxes_{_key('boxes', tuple(names))}")
    scale = alt.Scale(type="log", nice=False, padding=8)
    base = alt.Chart(frame).encode(
        x=alt.X("step:O", title="training step (checkpoint)", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("run:N", sort=names),
        color=alt.Color("run:N", scale=pg.colour_scale(names), sort=names, title="run", legend=alt.Legend(columns=2)),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.1)),
        tooltip=["run:N", "step:O"] + [alt.Tooltip(f"{c}:Q", format=".4~g") for c in ("min", "q1", "median", "q3", "max")])
    whiskers = base.mark_rule(strokeWidth=1.5).encode(
        y=alt.Y("min:Q", title="pairwise distance ||p_i − p_j|| (log scale)", scale=scale,
                axis=alt.Axis(tickCount=6, format="~g")), y2="max:Q").add_params(pick)
    boxes = base.mark_bar(size=14, fillOpacity=0.35).encode(y=alt.Y("q1:Q", scale=scale), y2="q3:Q")
    medians = base.mark_tick(thickness=2.5, size=14).encode(y=alt.Y("median:Q", scale=scale), color=alt.value("black"))
    return pg.finish_chart(alt.layer(whiskers, boxes, medians).properties(width=pg.COLUMN_WIDTH, height=280), description=(
        f"Box plots of all pairwise distances between the rows of the position table at {frame['step'].nunique()} "
        f"checkpoints, one box per run ({', '.join(names)}): quartiles, black median, whiskers from the minimum "
        "(the minimum separation) to the maximum."))


def plot_row_drift(snapshots: dict, seen: int, rows: int):
    """Relative change of each row between the first and last snapshot (log scale), coloured by seen/unseen."""
    steps = sorted(snapshots)
    first, last = snapshots[steps[0]][:rows], snapshots[steps[-1]][:rows]
    change = np.linalg.norm(last - first, axis=1) / np.linalg.norm(first, axis=1)
    what = f"||p_i({steps[-1]}) − p_i(0)|| / ||p_i(0)||"
    groups = [f"reached by the inputs (i < {seen})", f"never reached (i ≥ {seen})"]
    frame = pd.DataFrame({"position": np.arange(rows), "relative change": change,
                          "rows": np.where(np.arange(rows) < seen, groups[0], groups[1])})
    points = alt.Chart(frame).mark_point(filled=True, size=22, opacity=0.85).encode(
        x=alt.X("position:Q", title="position i", scale=alt.Scale(domain=[0, rows], nice=False)),
        y=alt.Y("relative change:Q", title=f"{what} (log scale)", scale=alt.Scale(type="log", nice=False, padding=8),
                axis=alt.Axis(format=".0e", tickCount=6)),
        color=alt.Color("rows:N", title="rows", sort=groups, scale=pg.colour_scale(groups)),
        tooltip=["position:Q", alt.Tooltip("relative change:Q", title=what, format=".3~e"), "rows:N"])
    rule = alt.Chart(pd.DataFrame({"position": [seen - 0.5]})).mark_rule(strokeDash=[6, 3], color="#444444").encode(
        x="position:Q")
    return pg.finish_chart(alt.layer(points, rule).properties(width=pg.COLUMN_WIDTH, height=240), description=(
        f"Relative change of each of the first {rows} rows of the position table between steps 0 and {steps[-1]} "
        f"(log scale), coloured by whether the training inputs reach the row; dashed line at row {seen}."))


if __name__ == "__main__":  # remake the profile's seed file (``python _ch05.py``) or its penalty sweep (``... sweep``)
    s = settings()
    sweep = sys.argv[1:2] == ["sweep"]
    text = pg.load_corpus("sst2", "train")
    table = sweep_table(s, text) if sweep else seed_table(s, text)
    DATA.mkdir(exist_ok=True)
    with open(sweep_file(s) if sweep else seeds_file(s), "w") as f:
        f.write(f"# made by: cd book && env $(EXECUTE_ENV of the Makefile) OMP_NUM_THREADS=1 POSGEO_DATA_DIR=... "
                f"python _ch05.py{' sweep' if sweep else ''}  (profile {s.profile}, posgeo {pg.__version__}, "
                f"torch {torch.__version__}, {datetime.date.today()})\n")
        table.to_csv(f, index=False, float_format="%.6g")
    print(table.to_string(), file=sys.stderr)
