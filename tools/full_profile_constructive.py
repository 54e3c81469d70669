"""The constructive chapter's full profile on a GPU, in steps (the GPU machine has no data and no network).

1. ``prepare OUT.pkl.gz`` (here, on the CPU): builds the full profile's tasks from the
   corpora (``POSGEO_DATA_DIR``) with ``tasks`` of the chapter's helper ``book/_ch10.py`` and
   pickles them (the pickle refers to ``_ch10``'s classes: this script puts ``book/`` on the path).
2. ``run TASKS.pkl.gz --out RUNS.csv --workers P --budget SECONDS`` (on the GPU machine, with
   the repository's ``book/`` beside this script): trains the helper's ``jobs`` of the full
   profile with its ``run_job``, ``P`` processes sharing the GPU, one seed of every task and
   encoding before the next seed; each finished run is appended to the CSV at once, and no run
   starts after ``SECONDS`` (what was not trained is listed in RUNS.json).

3. ``merge TASKS.pkl.gz --into SHIPPED.csv RUNS.csv [RUNS.csv ...]`` (here): adds the runs of one
   or more ``run`` calls to the shipped CSV and its JSON (the ``stress`` column computed from the
   prepared tasks, the commands taken from each RUNS.json); refuses runs that are not jobs of the
   prepared settings, a run present twice, and shipped stresses the tasks no longer give.

The chapter reads the shipped CSV (``book/data/constructive_full.csv`` through the helper's
``full_profile_runs``) and shows it beside the small profile. The commands that produced it are
listed in the JSON beside it.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import multiprocessing
import os
import pickle
import platform
import shlex
import sys
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book"))  # the chapter's helper, _ch10 (workers too)

RUN_FIELDS = ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy", "seconds"]


def prepare(path: str) -> None:
    import _ch10 as ch

    s = ch.settings("full")
    t0 = time.perf_counter()
    corpora = {name: ch.tasks(name, n, s) for name, n, _ in s.corpora}
    with gzip.open(path, "wb", compresslevel=6) as f:
        pickle.dump({"settings": s, "corpora": corpora}, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"prepared {len(corpora)} corpora in {time.perf_counter() - t0:.0f} s: {path} ({os.path.getsize(path) / 2**20:.1f} MiB)")


_STATE: dict = {}


def _init(path: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    with gzip.open(path, "rb") as f:
        _STATE.update(pickle.load(f))
    import _ch10 as ch

    _STATE["tables"] = {name: ch.fixed_tables(ct.geometry, _STATE["settings"])
                        for name, ct in _STATE["corpora"].items()}


def _one(job):
    import _ch10 as ch

    t0 = time.perf_counter()
    row = ch.run_job(job, _STATE["settings"], _STATE["corpora"], tables=_STATE["tables"][job.corpus],
                                  cache=False)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def run(path: str, out: str, workers: int, budget: float, *, skip: str | None = None, tasks: str | None = None,
        seeds: str | None = None, limit: int | None = None) -> None:
    import torch

    import _ch10 as ch

    t0 = time.perf_counter()
    with gzip.open(path, "rb") as f:
        state = pickle.load(f)
    s, corpora = state["settings"], state["corpora"]
    jobs = ch.jobs(s, corpora)
    # seed-major: whatever the budget allows, every task has the same seeds (+-1) trained
    jobs = sorted(jobs, key=lambda j: s.seeds.index(j.seed))
    if skip:  # runs an earlier call trained (its CSV)
        with open(skip) as fh:
            trained = {(r["corpus"], r["objective"], r["encoding"], int(r["seed"])) for r in csv.DictReader(fh)}
        jobs = [j for j in jobs if (j.corpus, j.objective, j.encoding, j.seed) not in trained]
    if tasks:  # e.g. imdb:mlm,sst2:cls
        wanted = [tuple(t.split(":")) for t in tasks.split(",")]
        # still seed-major; within a seed, in the order given
        jobs = sorted((j for j in jobs if (j.corpus, j.objective) in wanted),
                      key=lambda j: (s.seeds.index(j.seed), wanted.index((j.corpus, j.objective))))
    if seeds:
        jobs = [j for j in jobs if j.seed in {int(x) for x in seeds.split(",")}]
    if limit is not None:
        jobs = jobs[:limit]
    fields = RUN_FIELDS
    done, failed = [], []
    threads = max(1, (os.cpu_count() or 2) // workers)
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        fh.flush()
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(path, threads)) as pool:
            queue = list(jobs)
            running = {}
            while queue or running:
                while queue and len(running) < 2 * workers and time.perf_counter() - t0 < budget:
                    job = queue.pop(0)
                    running[pool.submit(_one, job)] = job
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    job = running.pop(fut)
                    try:
                        row = fut.result()
                    except Exception as exc:  # noqa: BLE001 - recorded, the others go on
                        failed.append({"job": job.__dict__, "error": f"{type(exc).__name__}: {exc}"})
                        print("FAILED", job, exc, flush=True)
                        continue
                    writer.writerow(row)
                    fh.flush()
                    done.append(job)
                    if len(done) % 10 == 0:
                        print(f"{len(done)}/{len(jobs)} runs, {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    meta = {
        "profile": "full",
        "command": " ".join(["python", "tools/full_profile_constructive.py", *sys.argv[1:]]),
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.__dict__.items()},
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu",
        "torch": torch.__version__,
        "workers": workers,
        "wall_seconds": round(wall, 1),
        "runs_done": len(done),
        "runs_planned": len(jobs),
        "not_trained": [j.__dict__ for j in jobs if j not in done and all(f["job"] != j.__dict__ for f in failed)],
        "failed": failed,
        "date": time.strftime("%Y-%m-%d"),
    }
    with open(os.path.splitext(out)[0] + ".json", "w") as fh:
        json.dump(meta, fh, indent=1)
    print(f"done: {len(done)} of {len(jobs)} runs in {wall:.0f} s on {meta['device']} ({len(failed)} failed)")


_NAMES = {"mlm": "masked tokens", "cls": "classification"}


def _key(row) -> tuple:
    return (row["corpus"], row["objective"], row["encoding"], int(row["seed"]))


def _portable(command: str) -> str:
    """A `run` call's command with its --out as a file name (the device's output folder means nothing here)."""
    words = shlex.split(command)
    for i, word in enumerate(words[:-1]):
        if word == "--out":
            words[i + 1] = os.path.basename(words[i + 1])
    return shlex.join(words)


def coverage(runs, settings) -> str:
    """Which seeds of which task the runs hold, as a sentence (for the JSON's ``what``)."""
    parts = []
    for corpus, _, objectives in settings.corpora:
        for objective in objectives:
            sub = runs[(runs["corpus"] == corpus) & (runs["objective"] == objective)]
            full = [sd for sd in settings.seeds
                    if set(sub.loc[sub["seed"] == sd, "encoding"]) == set(settings.encodings)]
            some = sorted(set(sub["seed"]) - set(full))
            text = f"{corpus} {_NAMES.get(objective, objective)}: " + (
                ("seed " if len(full) == 1 else "seeds ") + ", ".join(map(str, full)) if full else "no seed"
            ) + " of every encoding"
            if some:
                text += " (and some encodings of seeds " + ", ".join(map(str, some)) + ")"
            parts.append(text)
    return "; ".join(parts)


def merge(path: str, into: str, new: list[str]) -> None:
    import numpy as np
    import pandas as pd

    import _ch10 as ch

    with gzip.open(path, "rb") as f:
        state = pickle.load(f)
    s, corpora = state["settings"], state["corpora"]
    meta_path = os.path.splitext(into)[0] + ".json"
    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.__dict__.items()}
    if os.path.exists(into):
        old = pd.read_csv(into)
        with open(meta_path) as fh:
            meta = json.load(fh)
        if json.loads(json.dumps(settings)) != meta["settings"]:
            raise SystemExit(f"merge: the prepared tasks ({path}) have other settings than {meta_path}; prepare "
                             "them again with the code that trained the shipped runs, or ship a new CSV")
    else:
        old, meta = pd.DataFrame(columns=RUN_FIELDS + ["stress"]), {"profile": s.profile, "commands": [],
                                                                     "settings": settings}
    frames, commands, devices = [], [], []
    for csv_path in new:
        df = pd.read_csv(csv_path)
        missing = [c for c in RUN_FIELDS if c not in df.columns]
        if missing:
            raise SystemExit(f"merge: {csv_path} lacks the columns {missing}: pass the --out CSV of a `run` call")
        frames.append(df[RUN_FIELDS])
        side = os.path.splitext(csv_path)[0] + ".json"
        if not os.path.exists(side):
            raise SystemExit(f"merge: {side} (written by the `run` call beside its CSV) is missing: it holds the "
                             "command, device and versions the shipped JSON records")
        with open(side) as fh:
            run_meta = json.load(fh)
        commands.append(f"{_portable(run_meta['command'])}   # {run_meta['runs_done']} runs in {run_meta['wall_seconds']:.0f} s "
                        f"on {run_meta['device']} ({run_meta['date']}, torch {run_meta['torch']})")
        devices.append(run_meta)
    added = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=RUN_FIELDS)
    runs = pd.concat([old.drop(columns="stress"), added], ignore_index=True)
    order = {(j.corpus, j.objective, j.encoding, j.seed): i for i, j in enumerate(ch.jobs(s, corpora))}
    keys = [_key(r) for _, r in runs.iterrows()]
    unknown = sorted({k for k in keys if k not in order})
    if unknown:
        raise SystemExit(f"merge: {len(unknown)} run(s) are not jobs of the prepared settings, e.g. {unknown[:3]}")
    twice = sorted(k for k, c in Counter(keys).items() if c > 1)
    if twice:
        raise SystemExit(f"merge: {len(twice)} run(s) appear twice (already shipped, or in two CSVs), e.g. {twice[:3]}; "
                         "a `run` call with --skip the shipped CSV trains only new runs")
    stresses = ch.table_stresses(corpora, s)["plug-in"]
    stress = np.array([stresses.get((c, e), np.nan) for c, e in zip(runs["corpus"], runs["encoding"])], dtype=float)
    shipped = np.asarray(old["stress"], dtype=float)
    if not np.allclose(np.nan_to_num(stress[: len(old)], nan=-1), np.nan_to_num(shipped, nan=-1), rtol=1e-5, atol=0):
        raise SystemExit("merge: the prepared tasks give other stresses than the shipped CSV: the tables changed "
                         "since those runs; retrain them rather than mix the two")
    runs = runs.assign(stress=stress)
    runs = runs.iloc[np.argsort([order[k] for k in keys], kind="stable")]
    tmp = into + ".tmp"
    runs.to_csv(tmp, index=False, float_format="%.6g")
    planned = len(order)
    seconds = runs["seconds"].astype(float)
    meta.update({
        "what": (f"The constructive chapter's full profile (book/_ch10.py, settings('{s.profile}')), "
                 f"{len(runs)} of its {planned} runs: {coverage(runs, s)}. One run took {seconds.min():.0f}-"
                 f"{seconds.max():.0f} s with several runs sharing the device ({s.steps:,} steps each)."),
        "runs_done": len(runs),
        "runs_planned": planned,
        "commands": meta["commands"] + commands + [
            f"python tools/full_profile_constructive.py merge {path} --into {os.path.basename(into)} "
            + " ".join(os.path.basename(p) for p in new)],
    })
    if devices:
        latest = max(devices, key=lambda m: m["date"])
        meta.update(date=latest["date"], device=latest["device"], torch=latest["torch"])
    with open(meta_path + ".tmp", "w") as fh:
        json.dump(meta, fh, indent=1)
    os.replace(tmp, into)  # both written before either replaces the shipped files
    os.replace(meta_path + ".tmp", meta_path)
    print(f"merged {len(added)} new run(s) into {into}: {len(runs)} of {planned}; {coverage(runs, s)}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("path")
    r = sub.add_parser("run")
    r.add_argument("path")
    r.add_argument("--out", required=True)
    r.add_argument("--workers", type=int, default=8)
    r.add_argument("--budget", type=float, default=420.0, help="no run starts after this many seconds")
    r.add_argument("--skip", help="a CSV of runs already trained (an earlier call's --out)")
    r.add_argument("--tasks", help="only these corpus:objective pairs, comma-separated (within a seed, in this order)")
    r.add_argument("--seeds", help="only these seeds, comma-separated")
    r.add_argument("--limit", type=int, help="only the first LIMIT of the selected runs (in the order above)")
    m = sub.add_parser("merge", help="add the runs of `run` calls to the shipped CSV and JSON")
    m.add_argument("path", help="the prepared tasks (the stress column is computed from them)")
    m.add_argument("--into", required=True, help="the shipped CSV (created with its JSON if absent)")
    m.add_argument("new", nargs="+", help="CSVs written by `run` (each with its JSON beside it)")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        prepare(a.path)
    elif a.cmd == "merge":
        merge(a.path, a.into, a.new)
    else:
        run(a.path, a.out, a.workers, a.budget, skip=a.skip, tasks=a.tasks, seeds=a.seeds, limit=a.limit)


if __name__ == "__main__":
    main()
