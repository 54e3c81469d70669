"""The controlled runs of the constructive chapter (10_constructive): does fit matter at matched rank and scale?

Masked-token prediction of SST-2 and IMDB by a 2-layer encoder, long enough that positions matter,
with the corpus table P_MDS beside its controls: the same table with its rows permuted (same
spectrum, wrong geometry), random tables at full rank and at rank 8 with the same norm, P_MDS from
the noise-corrected distances, P_MDS as the start of a learned table, and several tables at 0.5x
and 2x their scale. Every learned table is also merged position pair by position pair (Theorem 4's
merge test). Run once, resumably, by ``make p1-controls``::

    python _ch10_controls.py run data/ch10_controls.csv --jobs 2

It writes ``ch10_controls.csv`` (one row per run), ``ch10_controls_merge.csv`` (one row per merged
pair) and ``ch10_controls.json`` (settings, command, versions); the chapter reads them.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import math
import multiprocessing
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

import posgeo as pg
from posgeo.validation import check_int
import _ch10 as ch

DATA = Path(__file__).resolve().parent / "data"
FIXED = ("PMDS full", "PMDS permuted", "random full", "PMDS corrected", "PMDS k=8", "random k=8", "sinusoidal (fixed)")
"""The fixed tables: built by :func:`control_table`, frozen in training."""
OWN = ("none", "learned", "learned from PMDS")
"""The model's own tables: none, a learned table from the usual initialisation, a learned table started at P_MDS."""
SCALES = (0.5, 2.0)


@dataclass(frozen=True)
class ControlSettings:
    """What the controlled runs train (see the module docstring)."""

    corpora: tuple[tuple[str, int], ...] = (("imdb", 32), ("sst2", 16))
    encodings: tuple[str, ...] = (
        "none", "learned", "PMDS full", "PMDS permuted", "random full", "PMDS corrected", "learned from PMDS",
        "PMDS k=8", "random k=8", "sinusoidal (fixed)",
        "PMDS full ×0.5", "PMDS permuted ×0.5", "random full ×0.5", "PMDS full ×2", "PMDS permuted ×2", "random full ×2")
    cls_encodings: tuple[str, ...] = ("none", "learned")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    steps: int = 1800
    cls_steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    top_k: int = 500
    eval_rows: int = 2048
    eval_masks: int = 2
    merge_rows: int = 512
    table_seed: int = 0

    def digest(self) -> str:
        """Identifies the settings in the files (a file made with other settings is never extended)."""
        return pg.array_digest(np.frombuffer(json.dumps(dataclasses.asdict(self), sort_keys=True).encode(), np.uint8))

    def base(self, n_positions: int) -> ch.Settings:
        """The constructive chapter's settings with this model (for ``ch.tasks`` and ``ch.model_config``)."""
        return dataclasses.replace(ch.settings("small"), d_model=self.d_model, n_heads=self.n_heads,
                                   n_layers=self.n_layers, d_ff=self.d_ff, top_k=self.top_k, eval_sequences=self.eval_rows)


# --------------------------------------------------------------------------- tables
MERGE_MAX_POSITIONS = 32
"""The merge test runs on learned tables of at most this many positions (it scores every pair)."""


def lowrank_rank(name: str) -> int | None:
    """``"lowrank k=4"`` -> 4 (a learned table factorised at that rank); None for any other name."""
    if isinstance(name, str) and name.startswith("lowrank k="):
        try:
            rank = int(name.removeprefix("lowrank k="))
        except ValueError:
            raise ValueError(f"the rank of {name!r} is not an integer; write e.g. 'lowrank k=4'") from None
        if rank < 1:
            raise ValueError(f"the rank of {name!r} must be at least 1")
        return rank
    return None


def parse_encoding(name: str) -> tuple[str, float]:
    """``"PMDS full ×2"`` -> ``("PMDS full", 2.0)``; an unknown name or a scale <= 0 is an error."""
    if not isinstance(name, str):
        raise TypeError(f"an encoding name must be a string, got {name!r}")
    if lowrank_rank(name) is not None:
        return name, 1.0
    base, _, scale = name.partition(" ×")
    if base not in FIXED + OWN:
        raise ValueError(f"unknown control {base!r}; choose from {FIXED + OWN} or 'lowrank k=R', optionally with a "
                         "scale such as ' ×0.5'")
    if not scale:
        return base, 1.0
    try:
        factor = float(scale)
    except ValueError:
        raise ValueError(f"the scale of {name!r} is not a number; write e.g. 'PMDS full ×0.5'") from None
    if not factor > 0 or not math.isfinite(factor):
        raise ValueError(f"the scale of {name!r} must be a positive number, got {scale}")
    if base in OWN:
        raise ValueError(f"{base!r} is not a fixed table, so it has no scale; drop ' ×{scale}'")
    return base, factor


def random_table(n: int, d: int, *, rank: int, norm: float, seed: int) -> np.ndarray:
    """An n x d Gaussian table of the given rank, rows centred (rank at most n - 1), RMS row norm ``norm``.

    >>> P = random_table(8, 16, rank=3, norm=1.0, seed=0)
    >>> P.shape, np.linalg.matrix_rank(P), round(float(np.sqrt((P**2).sum(1).mean())), 6)
    ((8, 16), 3, 1.0)
    """
    n, d, rank = (check_int(v, k) for v, k in ((n, "n"), (d, "d"), (rank, "rank")))
    if rank > min(n - 1, d):
        raise ValueError(f"rank {rank} is more than a centred {n} x {d} table can have ({min(n - 1, d)}); "
                         "lower the rank or add positions or columns")
    rng = np.random.default_rng(seed)
    return ch.fit_to_model(rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d)), d, norm)


def control_table(name: str, D, *, d: int, norm: float, corrected=None, seed: int = 0) -> np.ndarray | None:
    """The n x d table of one encoding of :data:`FIXED` (scaled by its ``×`` suffix), None for the model's own.

    ``D`` is the plug-in geometry (n x n) and ``corrected`` the noise-corrected one (needed by
    "PMDS corrected"); ``seed`` draws the permutation and the random tables. Every table is
    centred and has RMS row norm ``norm`` times its scale.
    >>> D = pg.pairwise_distances(np.arange(6.0)[:, None])
    >>> P, Q = control_table("PMDS full", D, d=8, norm=1.0), control_table("PMDS permuted ×2", D, d=8, norm=1.0)
    >>> bool(np.allclose(np.linalg.svd(2 * P, compute_uv=False), np.linalg.svd(Q, compute_uv=False)))
    True
    """
    base, scale = parse_encoding(name)
    if base in OWN or lowrank_rank(base) is not None:
        return None
    D = np.asarray(D, dtype=np.float64)
    n = D.shape[0]
    if base == "PMDS full":
        P = ch.fit_to_model(pg.classical_mds(D).coords, d, norm)
    elif base == "PMDS permuted":
        P = ch.fit_to_model(pg.classical_mds(D).coords, d, norm)[np.random.default_rng(seed).permutation(n)]
    elif base == "PMDS k=8":
        P = ch.fit_to_model(pg.classical_mds(D, min(8, n - 1)).coords, d, norm)
    elif base == "PMDS corrected":
        if corrected is None:
            raise ValueError("'PMDS corrected' needs the corrected geometry: pass corrected= (an n x n distance matrix)")
        P = ch.fit_to_model(pg.classical_mds(np.asarray(corrected, dtype=np.float64)).coords, d, norm)
    elif base == "random full":
        P = random_table(n, d, rank=min(n - 1, d), norm=norm, seed=seed + 1)
    elif base == "random k=8":
        P = random_table(n, d, rank=min(8, n - 1, d), norm=norm, seed=seed + 2)
    else:  # sinusoidal (fixed)
        P = ch.fit_to_model(pg.sinusoidal_encoding(n, d), d, norm)
    return P * scale


# --------------------------------------------------------------------------- data
@dataclass(frozen=True, eq=False)
class ControlCorpus:
    """One corpus: its geometries, the training tasks (``mlm``, ``cls``) and held-out masked-token rows."""

    name: str
    n_positions: int
    geometry: np.ndarray
    corrected: np.ndarray
    tasks: dict
    held_out_cls: Any
    held_out_rows: np.ndarray
    vocab_size: int
    mask_token: int


def control_corpus(name: str, n: int, s: ControlSettings, *, corrected=None) -> ControlCorpus:
    """The corpus's tasks as in the chapter, with every held-out text of at least ``n`` tokens (up to ``eval_rows``).

    The corrected geometry is estimated only when one of ``s.encodings`` is "PMDS corrected"
    (otherwise ``corrected`` stays NaN unless given).

    SST-2's held-out text is its validation and test sentences (its test labels are hidden,
    but masked tokens need none); IMDB's is its test reviews.
    """
    ct = ch.tasks(name, n, s.base(n))
    mlm = ct.tasks["mlm"]
    if name == "synthetic":
        held = np.asarray(mlm.sampler(s.eval_rows, 987654321))
    else:
        lookup_rows = []
        splits = {"sst2": ("validation", "test"), "imdb": ("test",)}[name]
        lookup = ch.vocabulary_lookup(pg.load_corpus(name, "train", progress=False).sequences, s.top_k)
        for split in splits:
            seqs = pg.load_corpus(name, split, progress=False).sequences
            lookup_rows.append(ch.windows(seqs, lookup, s.top_k + 1, n)[np.asarray(seqs.lengths) >= n])
        held = np.concatenate(lookup_rows)
        if held.shape[0] > s.eval_rows:
            held = held[np.sort(np.random.default_rng(0).choice(held.shape[0], size=s.eval_rows, replace=False))]
    if corrected is None:
        needed = any(parse_encoding(e)[0] == "PMDS corrected" for e in s.encodings)
        corrected = ex_stats_corrected(name, n) if needed else np.full((n, n), np.nan)
    return ControlCorpus(name, n, ct.geometry, np.asarray(corrected, dtype=np.float64), ct.tasks, ct.held_out["cls"],
                         held.astype(np.int64), ct.vocab_size, mlm.mask_token)


def ex_stats_corrected(name: str, n: int) -> np.ndarray:
    """The book's corrected geometry of the first ``n`` positions (the hybrid estimate, cached)."""
    from posgeo.experiments import statistics as ex_stats

    return ex_stats.corpus_bootstrap(name, n, widened=True, progress=False).estimate


# --------------------------------------------------------------------------- evaluation
def masked_rows(rows: np.ndarray, mask_token: int, *, n_masks: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_masks`` masked copies of every row as ``pg.MLMTask`` masks (15%, at least one per row): tokens, targets."""
    g = torch.Generator().manual_seed(seed)
    original = torch.as_tensor(np.tile(rows, (n_masks, 1)), dtype=torch.long)
    B, n = original.shape
    masked = torch.rand(B, n, generator=g) < 0.15
    forced = torch.randint(0, n, (B,), generator=g)
    masked[torch.arange(B), forced] |= ~masked.any(dim=1)
    return original.masked_fill(masked, mask_token), original.masked_fill(~masked, pg.IGNORE_INDEX)


def masked_loss(model, tokens: torch.Tensor, targets: torch.Tensor, *, batch: int = 512) -> tuple[float, float]:
    """Mean cross-entropy and accuracy over every masked token of ``tokens`` (no gradient)."""
    total, correct, count = 0.0, 0, 0
    device = next(model.parameters()).device
    with pg.eval_mode(model), torch.no_grad():
        for i in range(0, tokens.shape[0], batch):
            logits = model(tokens[i : i + batch].to(device)).logits
            y = targets[i : i + batch].to(device)
            keep = y != pg.IGNORE_INDEX
            total += float(F.cross_entropy(logits[keep], y[keep], reduction="sum"))
            correct += int((logits[keep].argmax(-1) == y[keep]).sum())
            count += int(keep.sum())
    return total / count, correct / count


def merged(model, i: int, j: int):
    """A copy of ``model`` whose position vectors i and j are both replaced by their mean."""
    import copy

    out = copy.deepcopy(model)
    with torch.no_grad():
        mean = (out.pos[i] + out.pos[j]) / 2
        out.pos[i] = mean
        out.pos[j] = mean
    return out


def merge_test(model, tokens: torch.Tensor, targets: torch.Tensor, n: int) -> pd.DataFrame:
    """Held-out loss with every pair of the first n position vectors merged, minus the loss unmerged."""
    base, _ = masked_loss(model, tokens, targets)
    rows = []
    for i in range(n):
        for j in range(i + 1, n):
            loss, _ = masked_loss(merged(model, i, j), tokens, targets)
            rows.append({"i": i, "j": j, "loss rise": loss - base})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class Run:
    """One training run."""

    corpus: str
    objective: str
    encoding: str
    seed: int


def runs(s: ControlSettings) -> list[Run]:
    """Every run, in the order they train: seed by seed, the (short) classification arm, then the encodings.

    Seed-major, so that a run cut short by a budget leaves whole seeds (every encoding), which the
    paired differences need.
    """
    return [r for seed in s.seeds for r in
            [Run(c, "cls", e, seed) for e in s.cls_encodings for c, _ in s.corpora]
            + [Run(c, "mlm", e, seed) for e in s.encodings for c, _ in s.corpora]]


def train_run(run: Run, s: ControlSettings, cc: ControlCorpus, *, cache: bool = True,
              device: str = "cpu") -> tuple[dict, pd.DataFrame | None]:
    """Train one run; return its row (held-out loss and accuracy) and, for a learned table, its merge test."""
    base, _ = parse_encoding(run.encoding)
    norm = 0.02 * math.sqrt(s.d_model)
    table = control_table(run.encoding, cc.geometry, d=s.d_model, norm=norm, corrected=cc.corrected, seed=s.table_seed)
    start = control_table("PMDS full", cc.geometry, d=s.d_model, norm=norm) if base == "learned from PMDS" else None
    offset = 1 if run.objective == "cls" else 0
    ct = ch.CorpusTasks(cc.name, cc.n_positions, cc.geometry, cc.tasks, {}, cc.vocab_size)
    rank = lowrank_rank(base)
    if rank is not None and rank > cc.n_positions:
        raise ValueError(f"{run.encoding!r}: a rank above the number of positions ({cc.n_positions}) saves nothing; "
                         f"use 'learned' or a rank <= {cc.n_positions}")
    position = "none" if base == "none" else "lowrank" if rank is not None else "learned"
    cfg = ch.model_config(dataclasses.replace(s.base(cc.n_positions), lowrank=rank or 3), ct, run.objective, position)
    steps = s.steps if run.objective == "mlm" else s.cls_steps
    tcfg = pg.TrainConfig(steps=steps, batch_size=s.batch_size, lr=s.lr, seed=run.seed, device=device,
                          log_every=max(1, steps // 50), freeze=("pos",) if table is not None else ())
    written = table if table is not None else start
    options = {"fixed_table": pg.array_digest(written), "offset": offset, "frozen": table is not None} if written is not None else None
    t0 = time.time()
    res = pg.train(cfg, tcfg, cc.tasks[run.objective], cache_namespace="constructive-controls", cache_options=options,
                   prepare=ch.fixed_table_prepare(written, offset) if written is not None else None,
                   progress=False, cache=cache)
    model = res.model().to(pg.resolve_device(device))
    losses = [h["loss"] for h in res.history if "loss" in h]
    row = {**dataclasses.asdict(run), "train_loss": float(np.mean(losses[-max(1, len(losses) // 10):]))}
    merge = None
    if run.objective == "mlm":
        tokens, targets = masked_rows(cc.held_out_rows, cc.mask_token, n_masks=s.eval_masks, seed=4321)
        row["loss"], row["accuracy"] = masked_loss(model, tokens, targets)
        if base in ("learned", "learned from PMDS") and cc.n_positions <= MERGE_MAX_POSITIONS:
            mt, my = masked_rows(cc.held_out_rows[: s.merge_rows], cc.mask_token, n_masks=1, seed=8765)
            merge = merge_test(model, mt, my, cc.n_positions).assign(corpus=run.corpus, encoding=run.encoding, seed=run.seed)
    else:
        row["loss"] = float("nan")
        row["accuracy"] = ch.held_out_accuracy(model, cc.held_out_cls)
    row["seconds"] = round(time.time() - t0, 1)
    return row, merge


# --------------------------------------------------------------------------- the resumable command
_WORKER: dict[str, Any] = {}


def _work(run: Run):
    torch.set_num_threads(1)
    return train_run(run, _WORKER["settings"], _WORKER["corpora"][run.corpus], device=_WORKER.get("device", "cpu"))


def paths(out: str | Path) -> tuple[Path, Path, Path]:
    """The run file, its merge-test file and its record (``X.csv``, ``X_merge.csv``, ``X.json``)."""
    out = Path(out)
    return out, out.with_name(out.stem + "_merge.csv"), out.with_suffix(".json")


def geometry_path(out: str | Path) -> Path:
    """The file of the distances the runs used (``X_geometry.csv``)."""
    out = Path(out)
    return out.with_name(out.stem + "_geometry.csv")


def geometry_frame(corpora: dict) -> pd.DataFrame:
    """Every pair i < j of every corpus with its offset, plug-in and corrected Hellinger distance."""
    parts = []
    for name, c in corpora.items():
        i, j = np.triu_indices(c.n_positions, k=1)
        parts.append(pd.DataFrame({"corpus": name, "i": i, "j": j, "offset": j - i,
                                   "plug-in": c.geometry[i, j], "corrected": c.corrected[i, j]}))
    return pd.concat(parts, ignore_index=True)


def merge_correlations(merge: pd.DataFrame, geometry: pd.DataFrame) -> pd.DataFrame:
    """Spearman's rho of the merge test's loss rise with each distance, per (corpus, encoding, seed)."""
    from scipy.stats import spearmanr

    joined = merge.merge(geometry, on=["corpus", "i", "j"], validate="many_to_one")
    rows = []
    for (corpus, encoding, seed), g in joined.groupby(["corpus", "encoding", "seed"], sort=False):
        rows.append({"corpus": corpus, "encoding": encoding, "seed": seed,
                     **{f"rho with {k}": float(spearmanr(g["loss rise"], g[k]).statistic)
                        for k in ("plug-in", "corrected", "offset")},
                     "share of pairs raising the loss": float((g["loss rise"] > 0).mean())})
    return pd.DataFrame(rows)


def done(out: str | Path, s: ControlSettings) -> set[Run]:
    """The runs already in ``out``; a file written with other settings is an error (use another path)."""
    csv, _, record = paths(out)
    if not csv.exists():
        return set()
    info = json.loads(record.read_text()) if record.exists() else {}
    if info.get("digest") != s.digest():
        raise ValueError(f"{csv} was written with other settings (digest {info.get('digest')}, these {s.digest()}); "
                         "write to another path or delete it")
    frame = pd.read_csv(csv)
    return {Run(r.corpus, r.objective, r.encoding, int(r.seed)) for r in frame.itertuples()}


def run_all(out: str | Path, s: ControlSettings, *, jobs: int = 1, limit: int | None = None, corpora=None,
            device: str = "cpu", budget: float | None = None) -> pd.DataFrame:
    """Train every run of ``s`` not yet in ``out``, appending each finished run (a failure keeps the others).

    ``device`` ("cpu", "cuda") is where the runs train; it is recorded, not part of the settings.
    ``corpora`` (from :func:`prepare`) replaces building them from the data; no run starts
    after ``budget`` seconds (the rest is left for the next call).
    """
    csv, merge_csv, record = paths(out)
    todo = [r for r in runs(s) if r not in done(out, s)][:limit]
    csv.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({
        "digest": s.digest(), "settings": dataclasses.asdict(s),
        "command": "python _ch10_controls.py " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["run"] else "run_all",
        "posgeo": pg.__version__, "torch": torch.__version__, "device": device}, indent=1, ensure_ascii=False) + "\n")
    if not todo:
        return pd.read_csv(csv)
    corpora = corpora or {name: control_corpus(name, n, s) for name, n in s.corpora}
    if any(c.n_positions <= MERGE_MAX_POSITIONS for c in corpora.values()):  # what the merge test is scored against
        geometry_frame(corpora).to_csv(geometry_path(out), index=False)
    _WORKER.update(settings=s, corpora=corpora, device=device)

    def keep(row, merge):
        pd.DataFrame([row]).to_csv(csv, mode="a", header=not csv.exists(), index=False)
        if merge is not None:
            merge.to_csv(merge_csv, mode="a", header=not merge_csv.exists(), index=False)
        print(f"{row['corpus']} {row['objective']} {row['encoding']} seed {row['seed']}: loss {row['loss']:.4f} "
              f"accuracy {row['accuracy']:.4f} ({row['seconds']} s)", flush=True)

    t0 = time.monotonic()
    in_time = lambda: budget is None or time.monotonic() - t0 < budget  # noqa: E731
    queue = list(todo)
    if jobs <= 1:
        while queue and in_time():
            keep(*_work(queue.pop(0)))
    else:
        with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            running = set()
            while queue or running:
                while queue and len(running) < jobs and in_time():
                    running.add(pool.submit(_work, queue.pop(0)))
                if not running:
                    break
                finished, running = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    keep(*fut.result())
    if queue:
        print(f"budget of {budget} s spent: {len(queue)} runs left for the next call", flush=True)
    return pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=[f.name for f in dataclasses.fields(Run)])


def prepare(path: str | Path, s: ControlSettings) -> None:
    """Pickle ``s`` and its corpora (for a machine without the data: ``run --prepared PATH``)."""
    import gzip
    import pickle

    corpora = {name: control_corpus(name, n, s) for name, n in s.corpora}
    with gzip.open(path, "wb", compresslevel=6) as f:
        pickle.dump({"settings": s, "corpora": corpora}, f, protocol=pickle.HIGHEST_PROTOCOL)


def load_prepared(path: str | Path) -> tuple[ControlSettings, dict]:
    """The settings and corpora pickled by :func:`prepare`."""
    import gzip
    import pickle

    with gzip.open(path, "rb") as f:
        state = pickle.load(f)
    return state["settings"], state["corpora"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train the runs not yet in OUT (resumable)")
    r.add_argument("out")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--limit", type=int, default=None, help="train at most this many runs now")
    r.add_argument("--device", default="cpu", help="cpu or cuda (recorded in the .json, not a setting)")
    r.add_argument("--set", nargs="*", default=[], help="override settings, e.g. steps=5 seeds=0,1")
    r.add_argument("--prepared", default=None, help="settings and corpora from `prepare` (no --set; no data needed)")
    r.add_argument("--budget", type=float, default=None, help="start no run after this many seconds")
    g = sub.add_parser("geometry", help="write OUT's distances file (X_geometry.csv) without training")
    g.add_argument("out")
    q = sub.add_parser("prepare", help="pickle the settings and corpora into OUT.pkl.gz for `run --prepared`")
    q.add_argument("out")
    q.add_argument("--set", nargs="*", default=[], help="override settings, as for run")
    a = p.parse_args(argv)
    if a.cmd == "geometry":
        s = ControlSettings()
        geometry_frame({name: control_corpus(name, n, s) for name, n in s.corpora}).to_csv(geometry_path(a.out), index=False)
        return
    if a.cmd == "run" and a.prepared:
        if a.set:
            raise SystemExit("--prepared carries its settings: drop --set (or prepare again with them)")
        s, corpora = load_prepared(a.prepared)
        run_all(a.out, s, jobs=a.jobs, limit=a.limit, device=a.device, budget=a.budget, corpora=corpora)
        return
    s = parse_settings(a.set)
    if a.cmd == "prepare":
        prepare(a.out, s)
        return
    run_all(a.out, s, jobs=a.jobs, limit=a.limit, device=a.device, budget=a.budget)


def parse_settings(items) -> ControlSettings:
    """The settings that ``--set key=value ...`` asks for (``corpora=imdb:32,sst2:16``, lists comma-separated).

    >>> parse_settings(["corpora=imdb:128", "seeds=0,1", "cls_encodings="]).corpora
    (('imdb', 128),)
    """
    fields = {f.name for f in dataclasses.fields(ControlSettings)}
    changes = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in fields:
            raise SystemExit(f"unknown setting {key!r}; choose from {sorted(fields)}")
        default = getattr(ControlSettings(), key)
        if key == "corpora":
            changes[key] = tuple((c.split(":")[0], int(c.split(":")[1])) for c in value.split(","))
        elif isinstance(default, tuple):
            changes[key] = tuple(type(default[0])(v) for v in value.split(",") if v)
        else:
            changes[key] = type(default)(value)
    return ControlSettings(**changes)


if __name__ == "__main__":
    main()
