"""Chapter 12's full profile on a GPU, in two steps (the GPU machine has no data and no network).

1. ``prepare OUT.pkl.gz`` (here, on the CPU): builds the full profile's tasks from the
   corpora (``POSGEO_DATA_DIR``) with :func:`posgeo.experiments.constructive.constructive_tasks`
   and pickles them.
2. ``run TASKS.pkl.gz --out RUNS.csv --workers P --budget SECONDS`` (on the GPU machine):
   trains :func:`~posgeo.experiments.constructive.constructive_jobs` of the full profile with
   :func:`~posgeo.experiments.constructive.run_constructive_job`, ``P`` processes sharing the
   GPU, one seed of every task and encoding before the next seed; each finished run is appended to the CSV at
   once, and no run starts after ``SECONDS`` (what was not trained is listed in RUNS.json).

The chapter reads the CSV (``book/data/constructive_full.csv``) and shows it beside the small
profile. Command used for the committed data: see ``book/data/constructive_full.json``.
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
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait


def prepare(path: str) -> None:
    from posgeo.experiments import constructive as ex

    s = ex.constructive_settings("full")
    t0 = time.perf_counter()
    corpora = {name: ex.constructive_tasks(name, n, s) for name, n, _ in s.corpora}
    with gzip.open(path, "wb", compresslevel=6) as f:
        pickle.dump({"settings": s, "corpora": corpora}, f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"prepared {len(corpora)} corpora in {time.perf_counter() - t0:.0f} s: {path} ({os.path.getsize(path) / 2**20:.1f} MiB)")


_STATE: dict = {}


def _init(path: str, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    with gzip.open(path, "rb") as f:
        _STATE.update(pickle.load(f))
    from posgeo.experiments import constructive as ex

    _STATE["tables"] = {name: ex.fixed_tables(ct.geometry, _STATE["settings"])
                        for name, ct in _STATE["corpora"].items()}


def _one(job):
    from posgeo.experiments import constructive as ex

    t0 = time.perf_counter()
    row = ex.run_constructive_job(job, _STATE["settings"], _STATE["corpora"], tables=_STATE["tables"][job.corpus],
                                  cache=False)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def run(path: str, out: str, workers: int, budget: float, *, skip: str | None = None, tasks: str | None = None,
        seeds: str | None = None, limit: int | None = None) -> None:
    import torch

    from posgeo.experiments import constructive as ex

    t0 = time.perf_counter()
    with gzip.open(path, "rb") as f:
        state = pickle.load(f)
    s, corpora = state["settings"], state["corpora"]
    jobs = ex.constructive_jobs(s, corpora)
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
    fields = ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy", "seconds"]
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
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        prepare(a.path)
    else:
        run(a.path, a.out, a.workers, a.budget, skip=a.skip, tasks=a.tasks, seeds=a.seeds, limit=a.limit)


if __name__ == "__main__":
    main()
