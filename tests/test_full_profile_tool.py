"""Tests of tools/full_profile_constructive.py (chapter 12's full profile on a GPU): the runner
trains what it is asked, writes each run at once, and lists what its budget left."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from posgeo.experiments import constructive as ex

TOOL = Path(__file__).resolve().parents[1] / "tools" / "full_profile_constructive.py"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    s = dataclasses.replace(ex.constructive_settings("small"), corpora=(("synthetic", 8, ("mlm", "cls")),),
                            encodings=("PMDS k=3", "none"), seeds=(0, 1), steps=3, ranks=(3,), eval_sequences=64)
    path = tmp_path_factory.mktemp("full") / "tasks.pkl.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump({"settings": s, "corpora": {"synthetic": ex.constructive_tasks("synthetic", 8, s)}}, f)
    return path


def _run(tasks, out, *args):
    proc = subprocess.run([sys.executable, str(TOOL), "run", str(tasks), "--out", str(out), "--workers", "1", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    return rows, json.loads(Path(out).with_suffix(".json").read_text())


@pytest.mark.slow
def test_runs_seed_major_then_skips_what_is_done_and_filters(tasks, tmp_path):
    rows, meta = _run(tasks, tmp_path / "a.csv")
    keys = [(r["objective"], r["encoding"], int(r["seed"])) for r in rows]
    assert sorted(keys) == sorted((o, e, s) for o in ("mlm", "cls") for e in ("PMDS k=3", "none") for s in (0, 1))
    assert [k[2] for k in keys][:4] == [0, 0, 0, 0]  # every task's seed 0 first
    assert meta["runs_done"] == meta["runs_planned"] == 8 and meta["not_trained"] == [] and meta["failed"] == []
    assert all(0 <= float(r["accuracy"]) <= 1 and float(r["seconds"]) > 0 for r in rows)
    # the same runs as the library's own loop (the runner adds processes, not another recipe)
    with gzip.open(tasks) as f:
        state = pickle.load(f)
    own = ex.run_constructive_job(ex.ConstructiveJob("synthetic", "cls", "none", 1), state["settings"], state["corpora"],
                                  cache=False)
    mine = next(r for r in rows if (r["objective"], r["encoding"], r["seed"]) == ("cls", "none", "1"))
    assert float(mine["accuracy"]) == pytest.approx(own["accuracy"]) and float(mine["final_loss"]) == pytest.approx(own["final_loss"])
    done, meta = _run(tasks, tmp_path / "b.csv", "--skip", str(tmp_path / "a.csv"))
    assert done == [] and meta["runs_planned"] == 0
    some, meta = _run(tasks, tmp_path / "c.csv", "--tasks", "synthetic:cls", "--seeds", "1")
    assert sorted((r["objective"], r["encoding"], r["seed"]) for r in some) == [("cls", "PMDS k=3", "1"), ("cls", "none", "1")]


def test_a_spent_budget_trains_nothing_and_lists_every_run(tasks, tmp_path):
    rows, meta = _run(tasks, tmp_path / "none.csv", "--budget", "0")
    assert rows == [] and meta["runs_done"] == 0 and len(meta["not_trained"]) == 8


def test_tasks_order_the_runs_within_a_seed_and_limit_takes_the_first(tasks, tmp_path):
    _, meta = _run(tasks, tmp_path / "order.csv", "--budget", "0", "--tasks", "synthetic:cls,synthetic:mlm")
    planned = [(j["objective"], j["seed"]) for j in meta["not_trained"]]
    assert planned == [("cls", 0)] * 2 + [("mlm", 0)] * 2 + [("cls", 1)] * 2 + [("mlm", 1)] * 2
    _, limited = _run(tasks, tmp_path / "limit.csv", "--budget", "0", "--tasks", "synthetic:mlm,synthetic:cls",
                      "--limit", "3")
    assert limited["runs_planned"] == 3
    assert [(j["objective"], j["seed"]) for j in limited["not_trained"]] == [("mlm", 0), ("mlm", 0), ("cls", 0)]
