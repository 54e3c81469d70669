"""Helpers of the monotonicity chapter (08_monotonicity_ntk): the line corpus, frozen-attention runs, plots."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import torch

import posgeo as pg

N_POSITIONS = {"synthetic": 32, "sst2": 48, "imdb": 510}  # the book's corpora and their windows
OBJECTIVES, REGIMES = ("mlm", "cls"), ("frozen", "full")


@dataclass(frozen=True)
class Settings:
    """Sizes of the chapter's runs (FULL below: the full-scale profile)."""

    n_positions: int = 32
    vocab_size: int = 64
    concentration: float = 1.0
    d_model: int = 32
    widths: tuple = (8, 16, 32, 64)
    n_heads: int = 2
    layers: dict = field(default_factory=lambda: {"mlm": 1, "cls": 2})
    ff_mult: int = 2
    steps: int = 300
    batch_size: int = 32
    lr: float = 1e-3
    seeds: tuple = (0, 1, 2, 3, 4)
    device: str = "cpu"


FULL = Settings(widths=(16, 32, 64, 128, 256, 512), steps=3000, batch_size=128, device="auto")


def settings(profile: str | None = None) -> Settings:
    """The small settings, or FULL under POSGEO_PROFILE=full."""
    return FULL if pg.current_profile(profile) == "full" else Settings()


def _digest(mu: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(mu, dtype=np.float64).tobytes()).hexdigest()[:16]


def line_marginals(s: Settings) -> np.ndarray:
    """Token distributions of the line corpus: a Gaussian bump moving along the vocabulary."""
    return pg.synthetic_marginals(s.n_positions, s.vocab_size, nonstationarity=0.0, geometry="line",
                                  concentration=s.concentration)


# --------------------------------------------------------------------------- tasks
@dataclass(frozen=True, eq=False)
class OrderDetectionTask:
    """[CLS] classification: is a sequence drawn from `marginals` in its order (1) or shuffled (0)?"""

    marginals: np.ndarray
    name: str
    kind: str = field(default="cls", init=False)
    n_classes: int = field(default=2, init=False)
    order_sensitive: bool = field(default=True, init=False)

    @property
    def vocab_size(self) -> int:
        return self.marginals.shape[1] + 1  # the corpus tokens, then [CLS]

    @property
    def seq_len(self) -> int:
        return self.marginals.shape[0] + 1

    def sample(self, batch_size: int, generator: torch.Generator) -> pg.Batch:
        """Draw `batch_size` labelled sequences, [CLS] first, using only `generator`."""
        n, V = self.marginals.shape
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        tokens = torch.as_tensor(pg.MarginalSampler(self.marginals)(batch_size, seed))
        labels = torch.randint(0, 2, (batch_size,), generator=generator)
        shuffled = torch.gather(tokens, 1, torch.rand(batch_size, n, generator=generator).argsort(dim=1))
        tokens = torch.where(labels[:, None] == 1, tokens, shuffled)
        cls = torch.full((batch_size, 1), V, dtype=torch.long)
        return pg.Batch(torch.cat([cls, tokens], dim=1), labels, "cls")

    def cache_key(self) -> dict:
        return {"task": type(self).__name__, "name": self.name, "marginals": _digest(self.marginals)}


@dataclass(frozen=True, eq=False)
class ShiftedLineSampler:
    """Sequences of a line corpus read through a window at a random offset: the tokens of a sequence depend on each other.

    Position i of a sequence draws its token from row ``i + c`` of ``base`` (n + shift rows), with
    one offset ``c`` in ``0..shift`` per sequence; a token's neighbours tell ``c``, so context
    helps predict it. The per-position marginals are the mixtures :meth:`marginals`.
    """

    base: np.ndarray
    n_positions: int

    @property
    def shift(self) -> int:
        return self.base.shape[0] - self.n_positions

    def marginals(self) -> np.ndarray:
        """Token distribution of each position, averaged over the offsets (n_positions x V)."""
        return np.mean([self.base[c : c + self.n_positions] for c in range(self.shift + 1)], axis=0)

    def __call__(self, batch_size: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        c = rng.integers(0, self.shift + 1, size=batch_size)
        cdf = np.cumsum(self.base, axis=1)
        rows = cdf[c[:, None] + np.arange(self.n_positions)[None, :]]  # (B, n, V)
        u = rng.random((batch_size, self.n_positions, 1))
        return np.minimum((u > rows).sum(axis=2), self.base.shape[1] - 1).astype(np.int64)


SHIFT = 8


def shifted_sampler(s: Settings) -> ShiftedLineSampler:
    """The shifted line: the line corpus on n + 8 positions, read through an n-position window at a random offset."""
    base = pg.synthetic_marginals(s.n_positions + SHIFT, s.vocab_size, nonstationarity=0.0, geometry="line",
                                  concentration=s.concentration)
    return ShiftedLineSampler(base, s.n_positions)


def task(s: Settings, objective: str = "mlm"):
    """Masked-token prediction ("mlm"), order detection ("cls") on the line corpus, or masked tokens of the shifted line."""
    mu = line_marginals(s)
    name = f"ntk-line-n{s.n_positions}-V{s.vocab_size}-c{s.concentration:g}"
    if objective == "mlm-shifted":
        sampler = shifted_sampler(s)
        return pg.MLMTask(sampler, n_tokens=s.vocab_size, seq_len=s.n_positions,
                          name=f"{name}-shift{SHIFT}-{_digest(sampler.base)}")
    if objective == "mlm":
        return pg.MLMTask(pg.MarginalSampler(mu), n_tokens=s.vocab_size, seq_len=s.n_positions,
                          name=f"{name}-{_digest(mu)}")
    return OrderDetectionTask(mu, name=name)


def model_config(s: Settings, objective: str, d_model: int) -> pg.TransformerConfig:
    """A pre-LayerNorm encoder with a learned table; [CLS] read-out for "cls"."""
    t = task(s, objective)
    return pg.TransformerConfig(
        vocab_size=t.vocab_size, d_model=d_model, n_heads=s.n_heads, n_layers=s.layers[objective.split("-")[0]],
        d_ff=s.ff_mult * d_model, max_len=t.seq_len, position="learned",
        n_classes=2 if objective == "cls" else None, pooling="first")


def attention_prefixes(n_layers: int) -> tuple[str, ...]:
    """Parameter-name prefixes of every block's attention (query, key, value and output maps)."""
    return tuple(f"blocks.{layer}.attn." for layer in range(n_layers))


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class Run:
    """A trained position table and what training did to the attention."""

    objective: str
    regime: str
    d_model: int
    seed: int
    table: np.ndarray
    initial_table: np.ndarray
    attention_change: float
    attention_unchanged: bool
    accuracy: float


def train_position_table(s: Settings, *, objective: str = "mlm", regime: str = "frozen", d_model: int | None = None,
                         steps: int | None = None, lr: float | None = None, seed: int | None = None,
                         progress: bool = True, cache: bool = True) -> Run:
    """Train on the line corpus with attention frozen at initialisation ("frozen") or not ("full")."""
    d = d_model or s.d_model
    seed = s.seeds[0] if seed is None else seed
    t, cfg = task(s, objective), model_config(s, objective, d)
    prefixes = attention_prefixes(cfg.n_layers)
    tc = pg.TrainConfig(steps=steps or s.steps, batch_size=s.batch_size, lr=lr or s.lr, seed=seed,
                        device=s.device, log_every=50, freeze=prefixes if regime == "frozen" else ())
    with pg.torch_threads(1):
        result = pg.train(cfg, tc, t, progress=progress, cache=cache)
        model, initial = result.model(), pg.Transformer(cfg, seed=seed)
        accuracy = pg.evaluate(model, t, n_batches=4, batch_size=256, seed=12345)
    before, after = initial.state_dict(), result.state_dict
    keys = [k for k in before if k.startswith(prefixes)]
    change = sum(float((after[k].double() - before[k].double()).pow(2).sum()) for k in keys if k.endswith("weight"))
    size = sum(float(before[k].double().pow(2).sum()) for k in keys if k.endswith("weight"))
    rows = slice(1, None) if objective == "cls" else slice(None)  # drop the [CLS] row
    return Run(objective, regime, d, seed, model.position_table()[rows], initial.position_table()[rows],
               float(np.sqrt(change / size)), all(torch.equal(before[k], after[k].to(before[k].dtype)) for k in keys),
               float(accuracy))


@dataclass(frozen=True)
class LinearisedRun:
    """A run of the linearised model: its position table, the table's displacement, accuracy and movement."""

    objective: str
    d_model: int
    seed: int
    table: np.ndarray
    displacement: np.ndarray
    initial_table: np.ndarray
    accuracy: float
    relative_change: float


def linearised(model: pg.Transformer):
    """``f(tokens, delta)``: the model's first-order expansion around its weights, ``f0 + J delta`` (logits).

    ``delta`` maps parameter names to displacements; the expansion is exact in ``delta`` to
    first order and linear in it (``torch.func.jvp``), so it can be trained by gradient descent.
    """
    from torch.func import functional_call, jvp

    theta0 = {k: v.detach() for k, v in model.named_parameters()}

    def f(tokens, delta):
        def logits(params):
            out = functional_call(model, params, (tokens,))
            return out.cls_logits if out.cls_logits is not None else out.logits

        value, tangent = jvp(logits, (theta0,), ({k: delta[k] for k in theta0},))
        return value + tangent

    return f


def train_linearised(s: Settings, *, objective: str = "cls", d_model: int | None = None, steps: int | None = None,
                     lr: float = 0.05, seed: int = 0) -> LinearisedRun:
    """SGD on the linearised model (first-order expansion around the initialisation), every weight displaced."""
    d = d_model or s.d_model
    t, cfg = task(s, objective), model_config(s, objective, d)
    model = pg.Transformer(cfg, seed=seed).eval()
    f = linearised(model)
    delta = {k: torch.nn.Parameter(torch.zeros_like(v)) for k, v in model.named_parameters()}
    gen = torch.Generator().manual_seed(seed + 1)

    def loss_of(batch):
        logits = f(batch.tokens, delta)
        if batch.kind == "cls":
            return torch.nn.functional.cross_entropy(logits, batch.targets), (logits.argmax(-1) == batch.targets).float().mean()
        y, z = batch.targets.reshape(-1), logits.reshape(-1, logits.shape[-1])
        keep = y != pg.IGNORE_INDEX
        return torch.nn.functional.cross_entropy(z[keep], y[keep]), (z[keep].argmax(-1) == y[keep]).float().mean()

    with pg.torch_threads(1):
        pg.optimize([{"params": list(delta.values()), "weight_decay": 0.0}], lambda step: loss_of(t.sample(s.batch_size, gen)),
                    steps=steps or s.steps, lr=lr, optimizer="sgd", log_every=50, progress=False)
        eval_gen = torch.Generator().manual_seed(12345)
        with torch.no_grad():
            accuracy = float(np.mean([float(loss_of(t.sample(256, eval_gen))[1]) for _ in range(4)]))
    rows = slice(1, None) if objective == "cls" else slice(None)
    p0, dp = model.pos.detach().double().numpy(), delta["pos"].detach().double().numpy()
    moved = sum(float(v.detach().double().pow(2).sum()) for v in delta.values())
    size = sum(float(v.detach().double().pow(2).sum()) for v in model.parameters())
    return LinearisedRun(objective, d, seed, (p0 + dp)[rows], dp[rows], p0[rows], accuracy, float(np.sqrt(moved / size)))


def train_without_layernorm(s: Settings, *, seed: int = 0, objective: str = "mlm") -> np.ndarray:
    """The frozen-attention run with every LayerNorm replaced by the identity; its position table (n x d)."""
    t, cfg = task(s, objective), model_config(s, objective, s.d_model)

    def strip(model):
        for block in model.blocks:
            block.ln1, block.ln2 = torch.nn.Identity(), torch.nn.Identity()
        model.ln_f = torch.nn.Identity()
        return model

    tc = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=seed, device=s.device, log_every=50,
                        freeze=attention_prefixes(cfg.n_layers))
    with pg.torch_threads(1):
        result = pg.train(cfg, tc, t, prepare=strip, progress=False, cache=False)
    rows = slice(1, None) if objective == "cls" else slice(None)
    return result.state_dict["pos"].double().numpy()[rows]


LINEARISED_FILE = Path(__file__).resolve().parent / "data" / "ch08_linearised.csv"
LINEARISED = {"objectives": ("mlm", "mlm-shifted"), "widths": (16, 32, 64), "lr": 0.3, "steps": 1000}
"""The linearised runs of the chapter's data file: SGD at learning rate 0.3, 1,000 steps of 32 sequences."""


def linearised_rows(s: Settings, *, seeds=None, widths=None, objectives=None, steps=None) -> pd.DataFrame:
    """One row per linearised run (objective, width, seed), beside the AdamW runs of the shifted line at width s.d_model."""
    rate = pg.monotonicity_violation_rate
    rows = []
    for objective in objectives or LINEARISED["objectives"]:
        D = pg.hellinger_matrix(shifted_sampler(s).marginals() if objective == "mlm-shifted" else line_marginals(s))
        for d in widths or LINEARISED["widths"]:
            for seed in seeds or s.seeds:
                r = train_linearised(s, objective=objective, d_model=d, seed=seed, lr=LINEARISED["lr"],
                                     steps=steps or LINEARISED["steps"])
                rows.append({"objective": objective, "model": "linearised", "d_model": d, "seed": seed,
                             "rate (offset)": rate(r.table, progress=False),
                             "rate (Hellinger)": rate(r.table, reference=D, progress=False),
                             "rate of the displacement": rate(r.displacement, progress=False),
                             "initial rate": rate(r.initial_table, progress=False),
                             "farthest from 0": int(np.argmax(pg.pairwise_distances(r.table)[0])),
                             "accuracy": r.accuracy, "relative change": r.relative_change})
                print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def layernorm_rows(s: Settings, *, seeds=None) -> pd.DataFrame:
    """Frozen-attention masked-token runs of the line corpus with and without LayerNorm: rate and fold per seed."""
    rows = []
    for seed in seeds or s.seeds:
        for label, table in (("with LayerNorm", train_position_table(s, objective="mlm", seed=seed, progress=False).table),
                             ("without LayerNorm", train_without_layernorm(s, seed=seed))):
            rows.append({"model": label, "seed": seed, "rate (offset)": pg.monotonicity_violation_rate(table, progress=False),
                         "farthest from 0": int(np.argmax(pg.pairwise_distances(table)[0]))})
    return pd.DataFrame(rows)


def local_violation_rate(P: np.ndarray, *, max_offset: int, tie_rtol: float = 1e-12) -> float:
    """The violation rate over pairs j, k within `max_offset` of the anchor (offset order, ties half)."""
    E, n = pg.pairwise_distances(np.asarray(P, dtype=np.float64)), len(P)
    bad = comparable = 0.0
    for i in range(n):
        near = [j for j in range(n) if j != i and abs(i - j) <= max_offset]
        r, e = np.abs(np.array(near) - i), E[i, near]
        closer = r[:, None] < r[None, :]
        diff, tol = e[:, None] - e[None, :], tie_rtol * e.max()
        comparable += closer.sum()
        bad += (closer & (diff > tol)).sum() + 0.5 * (closer & (np.abs(diff) <= tol)).sum()
    return float(bad / comparable)


def _row(run: Run, D: np.ndarray, frozen: Run) -> dict:
    rate = pg.monotonicity_violation_rate
    return {
        "rate (offset)": rate(run.table, progress=False),
        "rate (Hellinger)": rate(run.table, reference=D, progress=False),
        "local rate (offset <= 4)": local_violation_rate(run.table, max_offset=4),
        "initial rate": rate(run.initial_table, progress=False),
        "stress* vs corpus": pg.stress(run.table, D, scale="optimal"),
        "attention change": run.attention_change,
        "accuracy": run.accuracy,
        "stress* vs frozen": pg.stress(run.table, pg.pairwise_distances(frozen.table), scale="optimal"),
        "farthest from 0": int(np.argmax(pg.pairwise_distances(run.table)[0])),
    }


def ntk_comparison(s: Settings, *, progress: bool = True) -> pd.DataFrame:
    """Both regimes and objectives at width s.d_model, one row per (objective, regime, seed)."""
    D = pg.hellinger_matrix(line_marginals(s))
    jobs = [(o, r, seed) for o in OBJECTIVES for seed in s.seeds for r in REGIMES]
    runs = {job: train_position_table(s, objective=job[0], regime=job[1], seed=job[2], progress=False)
            for job in pg.progress_bar(jobs, enabled=progress, desc="frozen and full runs")}
    rows = {(o, r, seed): _row(run, D, runs[(o, "frozen", seed)]) for (o, r, seed), run in runs.items()}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["objective", "regime", "seed"])
    return out


def width_learning_rate(s: Settings, d_model: int, lr_scaling: str = "inverse") -> float:
    """s.lr * s.d_model / d_model ("inverse", AdamW's analogue of the NTK step) or s.lr ("constant")."""
    return s.lr * (s.d_model / d_model if lr_scaling == "inverse" else 1.0)


def width_sweep(s: Settings, *, lr_scaling: str = "inverse", seeds: tuple | None = None, objective: str = "cls",
                progress: bool = True) -> pd.DataFrame:
    """Full against frozen-attention training at every width and seed, one row per (d_model, seed)."""
    rows = []
    jobs = [(d, seed) for d in s.widths for seed in (seeds or s.seeds)]
    for d, seed in pg.progress_bar(jobs, enabled=progress, desc="width sweep"):
        lr = width_learning_rate(s, d, lr_scaling)
        fr, fu = (train_position_table(s, objective=objective, regime=r, d_model=d, lr=lr, seed=seed, progress=False)
                  for r in REGIMES)
        rows.append({
            "d_model": d, "seed": seed, "lr factor": lr / s.lr, "attention change": fu.attention_change,
            "rate frozen": pg.monotonicity_violation_rate(fr.table, progress=False),
            "rate full": pg.monotonicity_violation_rate(fu.table, progress=False),
            "stress* full vs frozen": pg.stress(fu.table, pg.pairwise_distances(fr.table), scale="optimal"),
            "accuracy frozen": fr.accuracy, "accuracy full": fu.accuracy,
        })
    return pd.DataFrame(rows).set_index(["d_model", "seed"])


LR_SCALINGS = {"inverse": "lr ~ 1/width", "constant": "constant lr"}
SWEEP_FILE = Path(__file__).resolve().parent / "data" / "ch08_width_sweep.csv"


def read_width_sweep(path=SWEEP_FILE) -> dict[str, pd.DataFrame]:
    """The five-seed sweep of both scalings, as written by `python _ch08.py sweep data/ch08_width_sweep.csv`."""
    table = pd.read_csv(path)
    return {label: g.drop(columns="lr scaling").set_index(["d_model", "seed"])
            for label, g in table.groupby("lr scaling", sort=False)}


IMDB_COMPARED = ["PMDS k=3", "ALiBi 12 heads", "MiniLM learned"]
IMDB_PAIRS = [("ALiBi 12 heads", "PMDS k=3"), ("MiniLM learned", "PMDS k=3")]
IMDB_FILE = SWEEP_FILE.parent / "ch08_imdb_intervals.csv"


def imdb_intervals() -> pd.DataFrame:
    """Corrected-order rates on IMDB (510 positions) with their widened half-sample intervals."""
    from posgeo.experiments import statistics

    g = pg.corpus_geometry(pg.load_corpus("imdb", "train"), 510, min_count=1000)
    encodings = {"PMDS k=3": pg.classical_mds(g.distances, 3).coords, "ALiBi 12 heads": pg.alibi_encoding(510, 12),
                 "MiniLM learned": pg.learned_position_table()[1:511]}
    boot = statistics.corpus_bootstrap("imdb", 510, widened=True, progress=False)
    return violation_intervals(boot, encodings, differences=IMDB_PAIRS)


def read_imdb_intervals(path=IMDB_FILE) -> pd.DataFrame:
    """The table imdb_intervals() returns, as written by `python _ch08.py imdb data/ch08_imdb_intervals.csv`."""
    return pd.read_csv(path, index_col="encoding")


# the range of each column above, to cut intervals over seeds (pg.seed_summary's bounds)
_FRACTIONS = ("rate", "accuracy")


def metric_bounds(metrics) -> dict:
    """[0, 1] for rates and accuracies, [0, inf) for every other column of the tables above."""
    return {m: (0.0, 1.0) if any(w in m for w in _FRACTIONS) else (0.0, None) for m in metrics}


# --------------------------------------------------------------------------- tables of encodings
def model_encodings(n: int, learned: np.ndarray) -> dict[str, np.ndarray]:
    """The fixed encodings of the MDS chapter at d = 384 and 768 (12 heads), and a learned table."""
    out = {}
    for d in (384, 768):
        out[f"sinusoidal d={d}"] = pg.sinusoidal_encoding(n, d)
    for d in (384, 768):
        out[f"RoPE d={d} (head {d // 12})"] = pg.rope_encoding(n, d, head_dim=d // 12)
    out["ALiBi 12 heads"] = pg.alibi_encoding(n, 12)
    out["random d=384"] = pg.random_encoding(n, 384, seed=0)
    out["MiniLM learned"] = np.asarray(learned, dtype=np.float64)
    return out


def monotonicity_table(geometries: dict, encodings: dict, *, progress: bool = True) -> pd.DataFrame:
    """Violation rates, pairs ordered by offset, plug-in and corrected Hellinger distances (corpus, order)."""
    parts = {}
    for corpus in pg.progress_bar(list(geometries), enabled=progress, desc="monotonicity"):
        g = geometries[corpus]
        refs = {"offset": None, "hellinger": g.distances, "corrected": g.hybrid}
        parts[corpus] = pd.DataFrame.from_dict(
            {e: {o: pg.monotonicity_violation_rate(np.asarray(P, dtype=np.float64), reference=R, progress=False)
                 for o, R in refs.items()} for e, P in encodings[corpus].items()}, orient="index")
    out = pd.concat(parts, axis=1).reindex(list(dict.fromkeys(e for c in encodings.values() for e in c)))
    out.index.name = "encoding"
    return out


def violation_intervals(boot, encodings: dict, differences=()) -> pd.DataFrame:
    """Corrected-order rates and paired differences, with the half-sample intervals of `boot`."""
    names = list(encodings)

    def statistic(D):
        r = {e: pg.monotonicity_violation_rate(np.asarray(P, dtype=np.float64), reference=D, progress=False)
             for e, P in encodings.items()}
        return np.array([r[e] for e in names] + [r[a] - r[b] for a, b in differences])

    est, low, high = boot.interval(statistic)
    out = pd.DataFrame({"rate": est, "low": low, "high": high},
                       index=pd.Index(names + [f"{a} - {b}" for a, b in differences], name="encoding"))
    null = np.r_[np.full(len(names), 0.5), np.zeros(len(differences))]  # random vectors' rate; no difference
    out["separated"] = (out["low"] > null) | (out["high"] < null)
    return out


# --------------------------------------------------------------------------- tables trained from scratch
def from_scratch_tables(mu: np.ndarray, s: Settings, *, progress: bool = True) -> dict[str, np.ndarray]:
    """Learned tables of a one-block MLM on marginals `mu` and a FirstMarkerTask classifier (d = 32)."""
    n, V = mu.shape
    tasks = {"MLM from scratch": pg.MLMTask(pg.MarginalSampler(mu), n_tokens=V, seq_len=n,
                                            name=f"synthetic-default-{_digest(mu)}"),
             "classifier from scratch": pg.FirstMarkerTask(seq_len=n, n_filler=8)}
    out = {}
    for label, t in pg.progress_bar(list(tasks.items()), enabled=progress, desc="from scratch"):
        cfg = pg.TransformerConfig(vocab_size=t.vocab_size, d_model=32, n_heads=s.n_heads, n_layers=1, d_ff=64,
                                   max_len=n, position="learned", n_classes=2 if t.kind == "cls" else None)
        tc = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=s.seeds[0], device=s.device,
                            log_every=50)
        with pg.torch_threads(1):
            out[label] = pg.train(cfg, tc, t, progress=False).model().position_table()
    return out


def text_mlm_task(corpus, *, seq_len: int = 16, top_k: int = 1000) -> pg.MLMTask:
    """Masked tokens on the first `seq_len` tokens of sentences at least that long, top_k tokens + UNK + PAD."""
    seqs = corpus.sequences
    counts = np.bincount(seqs.tokens, minlength=seqs.vocab_size)
    kept = np.lexsort((np.arange(counts.size), -counts))[:top_k]  # by count, then id
    remap = np.full(counts.size, top_k, dtype=np.int64)  # UNK = top_k (PAD = top_k + 1 never occurs here)
    remap[kept] = np.arange(top_k)
    starts = seqs.offsets[:-1][seqs.lengths >= seq_len]
    rows = remap[seqs.tokens[starts[:, None] + np.arange(seq_len)]]
    name = f"{corpus.name}-{corpus.split}-top{top_k}-n{seq_len}-min{seq_len}-{pg.array_digest(seqs.tokens, seqs.offsets)}"
    return pg.MLMTask(lambda b, seed: rows[np.random.default_rng(seed).integers(0, len(rows), size=b)],
                      n_tokens=top_k + 2, seq_len=seq_len, name=name)


def text_tables(corpora: dict, *, seq_len: int = 16, progress: bool = True) -> dict[str, np.ndarray]:
    """The separation chapter's text MLM recipe (2 blocks, width 32, 500 AdamW steps), one table per corpus."""
    out = {}
    for label in pg.progress_bar(list(corpora), enabled=progress, desc="text MLM runs"):
        t = text_mlm_task(corpora[label], seq_len=seq_len)
        cfg = pg.TransformerConfig(vocab_size=t.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                                   max_len=seq_len, position="learned", n_classes=None, pooling="mean")
        tc = pg.TrainConfig(steps=500, batch_size=64, lr=3e-3, weight_decay=0.0, seed=0, device="cpu", log_every=50,
                            eval_every=500, eval_batches=8, snapshot_every=50)
        with pg.torch_threads(1):
            out[label] = pg.train(cfg, tc, t, progress=False).model().position_table()
    return out


# --------------------------------------------------------------------------- plots
def plot_anchor_distances(tables: dict, *, anchors=(0, 16), reference: np.ndarray | None = None):
    """Distance from each anchor to every position, each curve divided by its maximum; one panel per anchor."""
    curves = {name: pg.pairwise_distances(P) for name, P in tables.items()}
    if reference is not None:
        curves["true Hellinger distance (reference)"] = np.asarray(reference, dtype=float)
    shown = f"the tables {', '.join(tables)}" + (" and the true Hellinger distance (dotted reference)" if reference is not None else "")
    panels = []
    for a in anchors:
        frame = pd.concat([pd.DataFrame({"position": np.arange(len(E)), "distance": E[a] / E[a].max(), "table": name})
                           for name, E in curves.items()], ignore_index=True)
        lines = pg.series_chart(frame, x="position", y="distance", series="table", points=True,
                                x_title="position j", y_title="distance to the anchor / its maximum",
                                series_title="table", title=f"anchor position {a} (grey rule)",
                                x_scale={"domain": [0, int(frame["position"].max())], "nice": False},
                                y_scale={"domain": [0, 1]}, width=pg.PANEL_WIDTH, height=220)
        rule = alt.Chart(pd.DataFrame({"anchor": [a]})).mark_rule(color="#888888", strokeWidth=1).encode(
            x="anchor:Q", tooltip=[alt.Tooltip("anchor:Q", title="anchor position")])
        panels.append(lines + rule)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description=f"Distance from an anchor position to every position, rescaled to a maximum of 1, one panel per "
                    f"anchor, for {shown}.")


def plot_width_sweep(sweeps: dict, *, level: float = 0.95):
    """Attention change and stress* of full vs frozen tables against width: geometric means over seeds, bands."""
    parts = []
    for label, sweep in sweeps.items():
        tidy = sweep.reset_index()
        for column, quantity in (("attention change", "attention change"), ("stress* full vs frozen", "stress*")):
            logs = tidy[["d_model", "seed"]].assign(value=np.log10(tidy[column].to_numpy(dtype=float)))
            summary = pg.seed_summary(logs, by="d_model", metrics="value", level=level)["value"]
            parts.append(pd.DataFrame({
                "d_model": summary.index.to_numpy(dtype=int), "quantity": quantity, "learning rate": label,
                "value": 10 ** summary["mean"].to_numpy(), "low": 10 ** summary["low"].to_numpy(),
                "high": 10 ** summary["high"].to_numpy(), "seeds": summary["seeds"].to_numpy(dtype=int)}))
    frame = pd.concat(parts, ignore_index=True)
    widths = sorted(int(d) for d in frame["d_model"].unique())
    x_scale = {"type": "log", "base": 2, "domain": [widths[0] / 1.25, widths[-1] * 1.25], "nice": False}
    panels = []
    for quantity, y_title, title in (
        ("attention change", "relative change of the attention weights", "attention weights under full training"),
        ("stress*", "stress* (scale-optimal) of full vs frozen table", "departure from the frozen-attention table"),
    ):
        chart = pg.series_chart(frame[frame["quantity"] == quantity], x="d_model", y="value", series="learning rate",
                                lower="low", upper="high", points=True, zoom=False, x_title="width d_model",
                                y_title=y_title, series_title="learning rate", title=title, x_scale=x_scale,
                                y_scale={"type": "log"}, width=pg.PANEL_WIDTH, height=220, tooltip=("seeds",))
        for layer in chart.layer:
            layer.encoding.x.axis = alt.Axis(values=widths, format="d")
        panels.append(chart)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description="Against the model width (log scale): the relative change of the attention weights under full "
                    "training (left) and the scale-optimal stress (stress*) between the full-training and the "
                    f"frozen-attention position tables (right), for each learning-rate scaling: geometric mean over "
                    f"seeds with its {level:.0%} interval as a band.")


if __name__ == "__main__":  # the data files, one thread: python _ch08.py sweep data/ch08_width_sweep.csv (about
    torch.set_num_threads(1)  # 3 CPU minutes; POSGEO_PROFILE=full: widths to 512, 3,000 steps) and
    what, out = sys.argv[1:3]  # python _ch08.py imdb data/ch08_imdb_intervals.csv (about 2 CPU minutes)
    if what == "linearised":  # python _ch08.py linearised data/ch08_linearised.csv (30 runs, about 15 CPU minutes)
        linearised_rows(settings()).to_csv(out, index=False)
    elif what == "sweep":
        sweeps = {label: width_sweep(settings(), lr_scaling=k) for k, label in LR_SCALINGS.items()}
        pd.concat(sweeps, names=["lr scaling"]).reset_index().to_csv(out, index=False)
    else:
        imdb_intervals().to_csv(out)
