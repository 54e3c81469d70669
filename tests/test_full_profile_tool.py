"""Tests of tools/full_profile_constructive.py (the constructive chapter's full profile on a GPU): the runner
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

import _ch10 as ch

TOOL = Path(__file__).resolve().parents[1] / "tools" / "full_profile_constructive.py"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    s = dataclasses.replace(ch.settings("small"), corpora=(("synthetic", 8, ("mlm", "cls")),),
                            encodings=("PMDS k=3", "none"), seeds=(0, 1), steps=3, ranks=(3,), eval_sequences=64)
    path = tmp_path_factory.mktemp("full") / "tasks.pkl.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump({"settings": s, "corpora": {"synthetic": ch.tasks("synthetic", 8, s)}}, f)
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
    # the same runs as the helper's own loop (the runner adds processes, not another recipe)
    with gzip.open(tasks) as f:
        state = pickle.load(f)
    own = ch.run_job(ch.Job("synthetic", "cls", "none", 1), state["settings"], state["corpora"],
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


# ----------------------------------------------------------------------------------- merge
def _tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("full_profile_constructive", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_call(path: Path, keys, *, date="2026-12-01", device="a GPU"):
    """A `run` call's CSV and JSON, written by hand (merging needs no training)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["corpus", "objective", "encoding", "seed", "final_loss", "accuracy", "seconds"])
        for i, (obj, enc, seed) in enumerate(keys):
            w.writerow(["synthetic", obj, enc, seed, 2.5 + i / 100, 0.25 + i / 100, 100 + i])
    path.with_suffix(".json").write_text(json.dumps({
        "command": f"python tools/full_profile_constructive.py run tasks --out /device/out/{path.name}",
        "runs_done": len(keys),
        "wall_seconds": 123.4, "device": device, "date": date, "torch": "2.x"}))
    return str(path)


def test_merge_adds_runs_in_job_order_with_stress_and_commands(tasks, tmp_path):
    tool = _tool()
    into = str(tmp_path / "shipped.csv")
    a = _fake_call(tmp_path / "a.csv", [("cls", "none", 0), ("mlm", "PMDS k=3", 0)])
    b = _fake_call(tmp_path / "b.csv", [("mlm", "none", 0), ("cls", "PMDS k=3", 0)], date="2026-12-02", device="H")
    tool.merge(str(tasks), into, [a])
    tool.merge(str(tasks), into, [b])
    import pandas as pd

    runs = pd.read_csv(into)
    with gzip.open(tasks) as f:
        state = pickle.load(f)
    jobs = [(j.objective, j.encoding, j.seed) for j in ch.jobs(state["settings"], state["corpora"])]
    keys = [(r.objective, r.encoding, r.seed) for r in runs.itertuples()]
    assert keys == [k for k in jobs if k in keys] and len(keys) == 4  # the helper's job order
    want = ch.table_stresses(state["corpora"], state["settings"])["plug-in"][("synthetic", "PMDS k=3")]
    assert runs.loc[runs["encoding"] == "PMDS k=3", "stress"].tolist() == pytest.approx([want, want], rel=1e-5)
    assert runs.loc[runs["encoding"] == "none", "stress"].isna().all()
    meta = json.loads((tmp_path / "shipped.json").read_text())
    assert meta["runs_done"] == 4 and meta["runs_planned"] == 8
    assert (meta["date"], meta["device"]) == ("2026-12-02", "H")
    assert [c.split()[2] for c in meta["commands"]] == ["run", "merge", "run", "merge"]
    assert "synthetic masked tokens: seed 0 of every encoding" in meta["what"]
    assert "synthetic classification: seed 0 of every encoding" in meta["what"]
    assert meta["commands"][0].startswith("python tools/full_profile_constructive.py run tasks --out a.csv   # 2 runs")


def test_merge_refuses_duplicates_unknown_runs_and_stale_stress(tasks, tmp_path):
    tool = _tool()
    into = tmp_path / "shipped.csv"
    tool.merge(str(tasks), str(into), [_fake_call(tmp_path / "a.csv", [("cls", "none", 0), ("cls", "PMDS k=3", 1)])])
    before = into.read_bytes(), into.with_suffix(".json").read_bytes()

    def refused(new, match):
        with pytest.raises(SystemExit, match=match):
            tool.merge(str(tasks), str(into), [new])
        assert (into.read_bytes(), into.with_suffix(".json").read_bytes()) == before  # nothing lost or half-written

    refused(_fake_call(tmp_path / "dup.csv", [("mlm", "none", 1), ("cls", "none", 0)]), "appear twice")
    refused(_fake_call(tmp_path / "bad.csv", [("cls", "PMDS k=99", 0)]), "not jobs of the prepared settings")
    refused(_fake_call(tmp_path / "late.csv", [("cls", "none", 7)]), "not jobs of the prepared settings")
    no_json = tmp_path / "nojson.csv"
    no_json.write_text((tmp_path / "late.csv").read_text())
    refused(str(no_json), "is missing")
    good = _fake_call(tmp_path / "good.csv", [("mlm", "none", 1)])
    text = into.read_text().splitlines()
    i = next(i for i, line in enumerate(text) if ",PMDS k=3," in line)
    text[i] = text[i][: text[i].rfind(",")] + ",0.5"  # a shipped stress the tasks do not give
    into.write_text("\n".join(text) + "\n")
    before = into.read_bytes(), into.with_suffix(".json").read_bytes()
    refused(good, "other stresses")
    meta = json.loads(before[1])
    meta["settings"]["steps"] += 1
    into.with_suffix(".json").write_text(json.dumps(meta))
    before = into.read_bytes(), into.with_suffix(".json").read_bytes()
    refused(good, "other settings")
