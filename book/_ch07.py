"""Helpers of the chapter "Minimal parametrisation and effective rank" (07_low_rank)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import torch

import posgeo as pg
from posgeo.experiments.papers import PAPER_P1_LOWRANK

POSITION_PARAMETERS = ("pos", "pos_a", "pos_b")  # the trainable tables: learned (pos), lowrank (pos_a @ pos_b.T)


# ----------------------------------------------------------------------------- effective rank
def spectra(matrices):
    """Eigenvalues (descending) of the double-centred Gram matrix of each distance matrix."""
    return {label: np.sort(np.linalg.eigvalsh(pg.double_centered_gram(D)))[::-1] + 0.0 for label, D in matrices.items()}


def rank_table(matrices, energies=(0.9, 0.99), top=3):
    """Exact rank, ranks at each energy, entropy rank, top-`top` energy and negative share of each B."""
    rows = {}
    for label, lam in spectra(matrices).items():
        summary = pg.effective_rank(lam)
        tol = 1e-10 * max(float(np.abs(lam).max()), 1e-300)
        row = {"n": lam.size, "exact rank": int(np.sum(lam > tol))}
        row |= {f"rank {100 * e:g}%": pg.effective_rank(lam, energy=e).rank_at_energy for e in energies}
        row["entropy rank"] = summary.entropy_rank
        row[f"energy top {top}"] = float(summary.cumulative_energy[top - 1])
        row["negative share"] = max(0.0, float(-lam[lam < -tol].sum() / np.abs(lam).sum()))
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def parameter_count(n, d, r):
    """Parameters of a rank-r table P = A B^T with A (n, r) and B (d, r): r (n + d)."""
    return r * (n + d)


def positional_parameters(model):
    """Trainable parameters of a posgeo Transformer's position table (0 for fixed or absent tables)."""
    return sum(p.numel() for name, p in model.named_parameters() if name in POSITION_PARAMETERS and p.requires_grad)


# ----------------------------------------------------------------------------- stress against rank
def stress_curve(D, ranks, smacof_max_iter=300, boot=None):
    """Energy kept, raw and scale-optimal stress of rank-r classical MDS and SMACOF, per rank (with intervals from `boot`)."""
    D = pg.check_distance_matrix(D)
    B = pg.double_centered_gram(D)
    mass = float(np.clip(np.linalg.eigvalsh(B), 0.0, None).sum())
    lam, V = pg.top_eigenpairs(B, max(ranks), method="full")
    rows, encodings = {}, {}
    for r in sorted(ranks):
        coords = V[:, :r] * np.sqrt(np.clip(lam[:r], 0.0, None))
        fit = pg.stress_optimal_mds(D, r, init=coords, max_iter=smacof_max_iter)
        rows[r] = {"energy": float(np.clip(lam[:r], 0.0, None).sum() / mass),
                   "classical raw": pg.stress(coords, D), "classical optimal": pg.stress(coords, D, scale="optimal"),
                   "SMACOF raw": fit.stress, "SMACOF optimal": pg.stress(fit.coords, D, scale="optimal")}
        encodings |= {f"SMACOF {r}": fit.coords, f"classical {r}": coords}
    out = pd.DataFrame.from_dict(rows, orient="index").rename_axis("rank")
    if boot is not None:  # the encoding fitted to D held fixed, the geometry resampled
        table = pg.stress_intervals(boot, encodings, n_permutations=1)
        for method in ("classical", "SMACOF"):
            for end in ("low", "high"):
                out[f"{method} optimal {end}"] = [float(table.loc[f"{method} {r}", end]) for r in out.index]
    return out


def claim_table(D, d=128, rank=3):
    """P1's low-rank claim beside ours: rank-r MDS against the sinusoidal table of width d, by raw and scale-optimal stress."""
    n = D.shape[0]
    sin = pg.sinusoidal_encoding(n, d)
    curve = stress_curve(D, [rank], smacof_max_iter=1000).loc[rank]
    s_raw, s_opt = pg.stress(sin, D), pg.stress(sin, D, scale="optimal")
    cols = {}
    for label, prefix in (("classical MDS", "classical"), ("SMACOF", "SMACOF")):
        raw, opt = float(curve[f"{prefix} raw"]), float(curve[f"{prefix} optimal"])
        cols[label] = {"stress reduction (raw)": 1 - raw / s_raw, "stress reduction (scale-optimal)": 1 - opt / s_opt,
                       "parameter saving": 1 - parameter_count(n, d, rank) / (n * d),
                       "parameters (rank r)": float(parameter_count(n, d, rank)), "parameters (free table)": float(n * d),
                       "stress rank r (raw)": raw, "stress sinusoidal (raw)": s_raw,
                       "stress rank r (scale-optimal)": opt, "stress sinusoidal (scale-optimal)": s_opt}
    paper = dict.fromkeys(cols["SMACOF"], np.nan)
    paper |= {"stress reduction (raw)": PAPER_P1_LOWRANK["stress_reduction"],
              "parameter saving": PAPER_P1_LOWRANK["parameter_saving"],
              "parameters (rank r)": 480.0, "parameters (free table)": 4096.0}
    return pd.DataFrame({"P1": paper, **cols})


# ----------------------------------------------------------------------------- training
@dataclass(frozen=True)
class Settings:
    """The synthetic corpus, the model, the training and the sweep (ranks; encodings trained over every seed)."""

    n_positions: int = 32
    vocab_size: int = 64
    nonstationarity: float = 0.5
    concentration: float = 4.0
    corpus_seed: int = 0
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 64
    ranks: tuple = (1, 2, 3, 8)
    steps: int = 400
    batch_size: int = 64
    lr: float = 5e-3
    mask_prob: float = 0.15
    seeds: tuple = (0, 1, 2, 3, 4)
    seed_encodings: tuple | None = ("rank 2", "learned")  # None: every encoding over every seed
    eval_batches: int = 8
    eval_batch_size: int = 256


PROFILES = {"small": Settings(),
            "full": Settings(d_model=128, n_layers=2, d_ff=256, ranks=(1, 2, 3, 4, 8, 16, 32), steps=4000, batch_size=128,
                             lr=2e-3, seed_encodings=None, eval_batches=32)}


def settings(profile=None):
    """The sweep's settings for a profile (``$POSGEO_PROFILE``, default small)."""
    return PROFILES[pg.current_profile(profile)]


def mlm_task(s):
    """The masked-token task on the synthetic ring corpus of `s`, and its true marginals (n, V)."""
    mu = pg.synthetic_marginals(s.n_positions, s.vocab_size, nonstationarity=s.nonstationarity,
                                concentration=s.concentration, seed=s.corpus_seed, geometry="ring")
    name = f"synthetic-ring-n{s.n_positions}-V{s.vocab_size}-ns{s.nonstationarity:g}-c{s.concentration:g}-seed{s.corpus_seed}"
    return pg.MLMTask(pg.MarginalSampler(mu), n_tokens=s.vocab_size, seq_len=s.n_positions, name=name,
                      mask_prob=s.mask_prob), mu


CROSS_CORPORA = {"ring": dict(geometry="ring", nonstationarity=0.0), "line": dict(geometry="line", nonstationarity=0.0),
                 "mixture": dict(geometry="ring", nonstationarity=1.0)}
"""Three synthetic corpora with different geometries: a ring, a line, and a ring mixed half-and-half with an accelerating bump."""
CROSS_CONCENTRATION = 1.0
"""Broad bumps (the sweep's corpus has 4.0), so that far positions keep telling the three geometries apart."""
CROSS_FILE = Path(__file__).resolve().parent / "data" / "ch07_cross.csv"


def cross_task(s, corpus: str):
    """The masked-token task on one of :data:`CROSS_CORPORA`, and its true marginals (n, V)."""
    if corpus not in CROSS_CORPORA:
        raise ValueError(f"unknown corpus {corpus!r}; choose from {list(CROSS_CORPORA)}")
    kw = CROSS_CORPORA[corpus]
    mu = pg.synthetic_marginals(s.n_positions, s.vocab_size, concentration=CROSS_CONCENTRATION, seed=s.corpus_seed, **kw)
    name = (f"synthetic-{kw['geometry']}-n{s.n_positions}-V{s.vocab_size}-ns{kw['nonstationarity']:g}"
            f"-c{CROSS_CONCENTRATION:g}-seed{s.corpus_seed}")
    return pg.MLMTask(pg.MarginalSampler(mu), n_tokens=s.vocab_size, seq_len=s.n_positions, name=name,
                      mask_prob=s.mask_prob), mu


def cross_fit(tables: dict, geometries: dict) -> pd.DataFrame:
    """Scale-optimal stress of every table against every geometry: one row per (trained on, seed, scored against).

    ``tables`` maps (corpus trained on, seed) to an n x d table; ``geometries`` maps a corpus to its n x n distances.
    """
    rows = [{"trained on": corpus, "seed": seed, "scored against": target, "stress": pg.stress(P, D, scale="optimal")}
            for (corpus, seed), P in tables.items() for target, D in geometries.items()]
    return pd.DataFrame(rows)


def cross_tables(s, *, seeds=None) -> dict:
    """A free table trained on each of :data:`CROSS_CORPORA` (the sweep's model and steps), by (corpus, seed)."""
    out = {}
    for corpus in CROSS_CORPORA:
        task, _ = cross_task(s, corpus)
        cfg = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=s.d_model, n_heads=s.n_heads, n_layers=s.n_layers,
                                   d_ff=s.d_ff, max_len=s.n_positions, position="learned")
        for seed in seeds or s.seeds:
            tc = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=seed, log_every=max(1, s.steps // 10))
            with pg.torch_threads(1):
                out[(corpus, seed)] = pg.train(cfg, tc, task, progress=False).model().position_table()
    return out


def cross_runs(s, *, seeds=None) -> pd.DataFrame:
    """:func:`cross_fit` of :func:`cross_tables`, beside each table's stress at initialisation ("initial")."""
    geometries = {c: pg.hellinger_matrix(cross_task(s, c)[1]) for c in CROSS_CORPORA}
    fits = cross_fit(cross_tables(s, seeds=seeds), geometries)
    cfg = lambda: pg.TransformerConfig(vocab_size=s.vocab_size + 1, d_model=s.d_model, n_heads=s.n_heads,  # noqa: E731
                                       n_layers=s.n_layers, d_ff=s.d_ff, max_len=s.n_positions, position="learned")
    initial = cross_fit({("initial", seed): pg.Transformer(cfg(), seed=seed).position_table() for seed in seeds or s.seeds},
                        geometries)
    return pd.concat([fits, initial], ignore_index=True)


def own_corpus_margin(fits: pd.DataFrame) -> pd.DataFrame:
    """For each geometry: the stress of the tables trained on another corpus minus that of its own corpus's tables.

    Paired by seed (the runs of one seed share their initialisation); one row per (geometry, other corpus),
    with its 95% interval over seeds. Positive: the own corpus's tables fit better.
    """
    rows = {}
    for target, g in fits.groupby("scored against", sort=False):
        by = g.pivot(index="seed", columns="trained on", values="stress")
        for other in by.columns.drop(target):
            d = pg.seed_difference(by[other].to_numpy(), by[target].to_numpy(), paired=True)
            rows[(target, other)] = {"mean": d.mean, "low": d.low, "high": d.high, "separated": d.excludes_zero}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["scored against", "trained on"])


def encodings(s):
    """The sweep's encodings, (label, position kind, rank): none, sinusoidal, each rank, learned."""
    return [("none", "none", None), ("sinusoidal", "sinusoidal", None),
            *((f"rank {r}", "lowrank", r) for r in s.ranks), ("learned", "learned", None)]


def references(mu):
    """Bayes and position-blind accuracies, and the mutual information between position and token (nats)."""
    blind = mu.mean(axis=0)
    return {"bayes_accuracy": float(mu.max(axis=1).mean()),
            "blind_accuracy": float(mu[:, int(np.argmax(blind))].mean()),
            "mutual_information": float(np.mean(np.sum(mu * (np.log(mu) - np.log(blind)), axis=1)))}


def marginal_metrics(model, task, mu, n_batches=8, batch_size=256, seed=12345):
    """Expected accuracy mu_i(argmax q) and excess loss KL(mu_i || q) at the masked positions of fresh batches."""
    g = torch.Generator().manual_seed(seed)
    mu_t = torch.as_tensor(mu, dtype=torch.float64)
    log_mu = torch.log(mu_t.clamp_min(1e-300))
    acc, kl, count = 0.0, 0.0, 0
    with torch.no_grad():
        for _ in range(n_batches):
            batch = task.sample(batch_size, g)
            masked = batch.targets != pg.IGNORE_INDEX
            pos = torch.nonzero(masked)[:, 1]
            logq = torch.log_softmax(model.eval()(batch.tokens).logits.to(torch.float64), dim=-1)[masked][:, : task.n_tokens]
            p = mu_t[pos]
            acc += float(p[torch.arange(pos.numel()), logq.argmax(-1)].sum())
            kl += float((p * (log_mu[pos] - logq)).sum())
            count += int(pos.numel())
    return {"accuracy": acc / count, "excess_loss": kl / count}


def score(result, task, mu, s):
    """A trained run's parameters, accuracy, excess loss and the stress of its table (trained and at init) against mu's geometry."""
    model = result.model()
    D = pg.hellinger_matrix(mu)
    row = {"parameters": positional_parameters(model),
           **marginal_metrics(model, task, mu, n_batches=s.eval_batches, batch_size=s.eval_batch_size)}
    table = model.position_table()
    if table is not None:
        row["stress"] = pg.stress(table[: s.n_positions], D, scale="optimal")
        row["stress at init"] = pg.stress(result.snapshots[0][: s.n_positions], D, scale="optimal")
    return row


def sweep(runs, mu):
    """One row per encoding, the mean over its seeds, with the information used and the number of seeds."""
    runs = runs.assign(information=1 - runs["excess_loss"] / references(mu)["mutual_information"])
    grouped = runs.groupby("encoding", sort=False)
    out = grouped[["position", "rank"]].first().join(grouped[["parameters", "accuracy", "information", "stress",
                                                              "stress at init"]].mean())
    out["seeds"] = grouped["seed"].count()
    out.index.name = None
    out.attrs.update(references(mu))
    return out.astype({"parameters": int})


# ----------------------------------------------------------------------------- charts
_HEIGHT = 220


def plot_rank_stress_curves(curves, columns=("classical optimal", "SMACOF optimal")):
    """Scale-optimal stress against the rank, one panel per method (bands from the curves' intervals), and the energy left out."""
    r_min, r_max = min(min(c.index) for c in curves.values()), max(max(c.index) for c in curves.values())
    r_ticks = [r for r in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512) if r_min <= r <= r_max]
    titles = {"classical optimal": "classical MDS", "SMACOF optimal": "SMACOF", "energy": "spectral energy left out"}
    panels = []
    for col in [*columns, "energy"]:
        parts = []
        for label, curve in curves.items():
            r = np.asarray(curve.index, dtype=int)
            y = 1.0 - curve["energy"].to_numpy() if col == "energy" else curve[col].to_numpy()
            part = pd.DataFrame({"rank": r, "value": y, "geometry": label, "low": np.nan, "high": np.nan})
            if f"{col} low" in curve.columns:  # on the log axis a lower end of 0 is drawn at 1e-8
                part["low"] = np.clip(curve[f"{col} low"].to_numpy(), 1e-8, None)
                part["high"] = curve[f"{col} high"].to_numpy()
            parts.append(part[part["value"] > 1e-8])
        frame = pd.concat(parts, ignore_index=True)
        band = bool(frame["low"].notna().any())
        chart = pg.series_chart(
            frame, x="rank", y="value", series="geometry", lower="low" if band else None, upper="high" if band else None,
            points=True, x_title="rank r", series_title="geometry", title=titles[col],
            y_title="1 - energy (share of spectral mass left out)" if col == "energy" else "scale-optimal stress",
            x_scale={"type": "log", "domain": [r_min, r_max], "nice": False}, y_scale={"type": "log"},
            width=pg.PANEL_WIDTH, height=_HEIGHT)
        for layer in chart.layer:
            layer.encoding.x.axis = alt.Axis(values=r_ticks, format="~g")
            if layer.mark.type == "area":  # the legend shows the lines, not the faint bands
                layer.encoding.color.legend = None
            layer.encoding.y.axis = alt.Axis(format="~e" if frame["value"].min() < 1e-3 else "~g")
        panels.append(chart)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared", strokeDash="shared"),
        description=("Stress of the rank-r encoding against the rank r, one panel per method (log-log), and the "
                     f"share of spectral energy it leaves out, for {', '.join(curves)}; "
                     "corrected geometries are dashed in their corpus colour."))


def plot_accuracy_vs_parameters(table):
    """Accuracy, information used and table stress of the trained encodings against their positional parameters (symlog)."""
    base = pd.DataFrame({"encoding": np.where(table["position"] == "lowrank", "low-rank (rank r)", table["position"]),
                         "table": [str(i) for i in table.index], "parameters": table["parameters"].to_numpy(dtype=float)})
    x_max = float(base["parameters"].max())
    constant = float(base["parameters"][base["parameters"] > 0].min()) / 2
    ticks = [0.0] + [m * 10.0**k for k in range(int(np.floor(np.log10(constant))), int(np.ceil(np.log10(x_max))) + 1)
                     for m in (1, 2, 5) if constant <= m * 10.0**k <= x_max * 1.15]
    x_scale = {"type": "symlog", "constant": constant, "domain": [0, x_max * 1.15], "nice": False}
    refs = {"accuracy": [("Bayes optimum (reference)", table.attrs["bayes_accuracy"]),
                         ("position-blind optimum (chance)", table.attrs["blind_accuracy"])],
            "information": [("all information (reference)", 1.0), ("no information (chance)", 0.0)]}
    panels = []
    for col, y_title, title in [("accuracy", "masked-token accuracy (expected)", "accuracy"),
                                ("information", "information used (share)", "information used"),
                                ("stress", "scale-optimal stress of the table", "table stress vs the true geometry")]:
        frame = base.assign(value=table[col].to_numpy(dtype=float))
        frame = frame[np.isfinite(frame["value"])]
        for name, level in refs.get(col, []):
            frame = pd.concat([frame, pd.DataFrame({"encoding": name, "table": name, "parameters": [0.0, x_max * 1.15],
                                                    "value": float(level)})], ignore_index=True)
        chart = pg.series_chart(frame, x="parameters", y="value", series="encoding", points=True, zoom=False,
                                x_title="positional parameters", y_title=y_title, series_title="encoding", title=title,
                                x_scale=x_scale, tooltip=["table"], width=pg.PANEL_WIDTH, height=_HEIGHT)
        for layer in chart.layer:  # the ticks of a symmetric-log axis: 0 and 1, 2, 5 times the powers of ten
            layer.encoding.x.axis = alt.Axis(values=ticks, format="d")
            if layer.mark.type == "line":  # two legend columns: the panel's legend fits below it
                layer.encoding.color.legend = alt.Legend(symbolType="stroke", columns=2)
        panels.append(chart)
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="independent", strokeDash="independent"),
        description=("Masked-token accuracy, share of the positional information used, and scale-optimal stress of the "
                     "trained position table against its number of positional parameters (symmetric-log axis), for no, "
                     "sinusoidal, low-rank and free tables, with the Bayes and position-blind optima as references."))


# ----------------------------------------------------------------------------- low rank on real text
LOWRANK_TEXT_FILE = Path(__file__).resolve().parent / "data" / "ch07_lowrank_imdb.csv"
"""IMDB masked tokens at 128 positions, learned tables of rank 1-64 beside a free one and none (make p1-controls)."""


def lowrank_text_shape(path=LOWRANK_TEXT_FILE) -> tuple[int, int]:
    """(rows, width) of the sweep's position tables, from the settings recorded beside its file:
    the masked-token model has one row more than the positions (as the constructive chapter builds it)."""
    import json

    settings = json.loads(Path(path).with_suffix(".json").read_text())["settings"]
    (_, n_positions), = settings["corpora"]
    return n_positions + 1, settings["d_model"]


def text_table_parameters(encoding: str, n_rows: int, d: int) -> tuple[int, int]:
    """(rank, trainable positional parameters) of a sweep's table: "none", "learned" or "lowrank k=R"."""
    if encoding == "none":
        return 0, 0
    if encoding == "learned":
        return min(n_rows, d), n_rows * d
    rank = int(encoding.removeprefix("lowrank k="))
    return rank, parameter_count(n_rows, d, rank)


def lowrank_text_table(frame: pd.DataFrame, *, n_rows: int, d: int) -> pd.DataFrame:
    """Per table: rank, parameters, held-out loss over seeds and, paired by seed, its gap to the free table
    and the share of the free table's gain over no positions that it recovers (means with 95% intervals)."""
    loss = frame.pivot(index="seed", columns="encoding", values="loss")
    if not {"none", "learned"} <= set(loss.columns) or loss.isna().any().any():
        raise ValueError("the sweep needs 'none' and 'learned' and every table at every seed; finish make p1-controls")
    gain = loss["none"] - loss["learned"]
    rows = {}
    for enc in loss.columns:
        rank, params = text_table_parameters(enc, n_rows, d)
        label = "none" if enc == "none" else "learned (free)" if enc == "learned" else f"rank {rank}"
        row = {"rank": rank, "parameters": params, **{f"loss {k}": v for k, v in pg.seed_interval(loss[enc]).as_dict().items()
                                                      if k in ("mean", "low", "high")}}
        if enc not in ("none", "learned"):
            gap = pg.seed_difference(loss[enc].to_numpy(), loss["learned"].to_numpy(), paired=True)
            share = pg.seed_interval(((loss["none"] - loss[enc]) / gain).to_numpy())
            row.update({"gap mean": gap.mean, "gap low": gap.low, "gap high": gap.high,
                        "share mean": share.mean, "share low": share.low, "share high": share.high})
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index").sort_values("parameters")


def plot_lowrank_text(table: pd.DataFrame):
    """Held-out loss of the low-rank tables against their positional parameters, with no and free tables as references."""
    low = table[table.index.str.startswith("rank")]
    frame = pd.DataFrame({"series": "low-rank (rank r)", "parameters": low["parameters"].astype(float),
                          "loss": low["loss mean"], "low": low["loss low"], "high": low["loss high"],
                          "table": low.index})
    x_max = float(table["parameters"].max()) * 1.3
    x_min = float(low["parameters"].min()) / 1.3
    for name, key in (("no positions (reference)", "none"), ("learned, free table (reference)", "learned (free)")):
        level = table.loc[key]
        frame = pd.concat([frame, pd.DataFrame({"series": name, "parameters": [x_min, x_max], "loss": level["loss mean"],
                                                "low": level["loss low"], "high": level["loss high"], "table": key})],
                          ignore_index=True)
    chart = pg.series_chart(frame, x="parameters", y="loss", series="series", lower="low", upper="high", points=True,
                            zoom=False, x_title="trainable positional parameters (log scale)",
                            y_title="held-out masked-token loss (nats)", series_title="table",
                            x_scale={"type": "log", "domain": [x_min, x_max], "nice": False},
                            y_scale={"zero": False}, tooltip=["table"])
    return pg.finish_chart(chart, description=(
        "Held-out masked-token loss on IMDB (128 positions) of learned position tables factorised at rank 1 to 64, "
        "against their number of trainable positional parameters (log scale), mean over seeds with 95% bands, "
        "beside no positions and a free table."))


if __name__ == "__main__":  # python _ch07.py cross data/ch07_cross.csv (15 runs, about 4 CPU minutes)
    import sys

    torch.set_num_threads(1)
    if sys.argv[1:2] != ["cross"] or len(sys.argv) != 3:
        raise SystemExit("usage: python _ch07.py cross OUT.csv")
    cross_runs(settings()).to_csv(sys.argv[2], index=False)
