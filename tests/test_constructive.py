"""Tests of posgeo.experiments.constructive (chapter 10: fixed corpus tables, trained)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

import posgeo as pg
from posgeo.experiments import constructive as ex


@pytest.fixture(autouse=True)
def _private(private_cache):
    """Every test gets its own empty posgeo cache (tests/conftest.py)."""


def line_geometry(n: int = 8) -> np.ndarray:
    return pg.pairwise_distances(np.arange(float(n))[:, None])


def test_tables_have_the_model_norm_and_reproduce_the_geometry():
    D = line_geometry(8)
    tables = ex.position_tables(D, d=16, norm=0.5, ranks=(1, 3))
    assert set(tables) == {"PMDS k=1", "PMDS k=3", "PMDS full", "SMACOF k=1", "SMACOF k=3", "sinusoidal (fixed)"}
    for P in tables.values():
        assert P.shape == (8, 16)
        assert np.sqrt((P**2).sum(axis=1).mean()) == pytest.approx(0.5)
        assert np.allclose(P.mean(axis=0), 0.0, atol=1e-12)
    # a line is exactly one-dimensional: every corpus table fits it with zero scale-optimal stress
    for name in ("PMDS k=1", "PMDS full", "SMACOF k=1"):
        assert pg.stress(tables[name], D, scale="optimal") < 1e-10


def test_classification_task_samples_with_masks_and_keys_by_content():
    rows = np.array([[9, 1, 2, 8], [9, 3, 8, 8]])
    task = ex.ClassificationTask(rows, np.array([0, 1]), vocab_size=10, pad_id=8, name="toy")
    b = task.sample(6, torch.Generator().manual_seed(0))
    assert b.tokens.shape == (6, 4) and b.kind == "cls"
    assert torch.equal(b.attention_mask, b.tokens != 8)
    assert set(b.targets.tolist()) <= {0, 1}
    other = ex.ClassificationTask(rows, np.array([1, 1]), vocab_size=10, pad_id=8, name="toy")
    assert task.cache_key() != other.cache_key()


def test_fixed_table_stays_fixed_through_training():
    table = ex.position_tables(line_geometry(6), d=8, norm=0.3, ranks=(2,))["PMDS k=2"]
    cfg = pg.TransformerConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=7, position="learned",
                               n_classes=2, pooling="first")
    res = pg.train(cfg, pg.TrainConfig(steps=5, batch_size=8, lr=1e-2, device="cpu", freeze=("pos",)),
                   pg.FirstMarkerTask(seq_len=7, n_filler=4), prepare=ex.fixed_table_prepare(table, 1), cache=False,
                   progress=False)
    pos = res.model().pos.detach().numpy()
    assert np.allclose(pos[0], 0.0) and np.allclose(pos[1:], table, atol=1e-7)


def test_run_constructive_is_tidy_and_positions_matter_on_the_reversal_task():
    s = dataclasses.replace(ex.constructive_settings("small"), corpora=(("synthetic", 8, ("cls",)),),
                            encodings=("PMDS k=3", "none"), seeds=(0, 1), steps=60, ranks=(3,))
    corpora = {"synthetic": ex.constructive_tasks("synthetic", 8, s)}
    runs = ex.run_constructive(s, corpora, progress=False, cache=False)
    assert list(runs.columns) == ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy"]
    assert len(runs) == 4
    acc = runs.groupby("encoding")["accuracy"].mean()
    assert acc["none"] < 0.6 < acc["PMDS k=3"]  # without positions a reversal cannot be seen


def test_stress_performance_sees_a_perfect_anticorrelation():
    encs = ["a", "b", "c", "d"]
    runs = pd.DataFrame([{"corpus": "c", "objective": "o", "encoding": e, "seed": s, "accuracy": 0.9 - 0.1 * i + 0.001 * s}
                         for i, e in enumerate(encs) for s in range(3)])
    stresses = pd.DataFrame({"corrected": [0.1, 0.2, 0.3, 0.4]},
                            index=pd.MultiIndex.from_product([["c"], encs], names=["corpus", "encoding"]))
    out = ex.stress_performance(runs, stresses, n_boot=50)
    assert out.loc[("c", "o"), "rho"] == pytest.approx(-1.0) and out.loc[("c", "o"), "high"] < 0


def test_bad_inputs():
    s = ex.constructive_settings("small")
    with pytest.raises(ValueError, match="unknown corpus"):
        ex.constructive_tasks("wikitext", 8, s)
    with pytest.raises((TypeError, ValueError)):
        ex.constructive_tasks("synthetic", 1, s)
    with pytest.raises(ValueError):
        ex.constructive_settings("huge")


def test_accuracy_plot_draws_intervals_in_the_book_colours():
    index = pd.MultiIndex.from_tuples([("sst2", "cls", "PMDS k=3"), ("sst2", "cls", "none"), ("synthetic", "mlm", "PMDS k=3")],
                                      names=["corpus", "objective", "encoding"])
    summary = pd.DataFrame({"mean": [0.64, 0.63, 0.06], "low": [0.62, 0.61, 0.05], "high": [0.66, 0.65, 0.07], "seeds": 5}, index=index)
    spec = ex.plot_accuracy(summary).to_dict()
    assert spec["description"] and len(spec["concat"]) == 2  # one panel per (corpus, objective)
    rule, point = spec["concat"][0]["layer"]
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "low" and rule["encoding"]["x2"]["field"] == "high"
    assert point["mark"]["type"] == "point" and point["encoding"]["shape"]["field"] == "kind"
    colours = dict(zip(point["encoding"]["color"]["scale"]["domain"], point["encoding"]["color"]["scale"]["range"]))
    assert colours["PMDS k=3"] == pg.series_colour("PMDS") and colours["none"] == pg.series_colour("none")
    rows = [r for rows in spec["datasets"].values() for r in rows]
    assert {(r["encoding"], r["kind"]) for r in rows} >= {("PMDS k=3", "fixed table (from the corpus)"), ("none", "the model's own")}


def test_one_job_reproduces_its_row_of_the_whole_run_and_names_a_missing_corpus():
    s = dataclasses.replace(ex.constructive_settings("small"), corpora=(("synthetic", 8, ("cls",)),),
                            encodings=("PMDS k=3", "rope"), seeds=(0, 1), steps=20, ranks=(3,))
    corpora = {"synthetic": ex.constructive_tasks("synthetic", 8, s)}
    jobs = ex.constructive_jobs(s, corpora)
    assert [(j.encoding, j.seed) for j in jobs] == [("PMDS k=3", 0), ("PMDS k=3", 1), ("rope", 0), ("rope", 1)]
    runs = ex.run_constructive(s, corpora, progress=False, cache=False)
    one = ex.run_constructive_job(jobs[1], s, corpora, cache=False)  # the tables computed here, not passed
    assert one == runs.iloc[1].to_dict()
    with pytest.raises(ValueError, match="constructive_tasks"):
        ex.run_constructive_job(dataclasses.replace(jobs[0], corpus="imdb"), s, corpora, cache=False)
    with pytest.raises(TypeError, match="ConstructiveJob"):
        ex.run_constructive_job(("synthetic", "cls", "rope", 0), s, corpora, cache=False)


def test_the_full_profile_trains_on_a_gpu_when_there_is_one_and_the_small_on_the_cpu():
    assert ex.constructive_settings("small").device == "cpu"  # the book's outputs: CPU kernels
    assert ex.constructive_settings("full").device == "auto"


def test_the_shipped_full_profile_runs_match_the_full_profile_of_the_code():
    stored = ex.full_profile_runs()
    runs, meta = stored.runs, stored.meta
    s = ex.constructive_settings("full")
    planned = ex.constructive_jobs(s, {name: None for name, _, _ in s.corpora})
    assert meta["runs_done"] == len(runs) and meta["runs_planned"] == len(planned) and meta["profile"] == "full"
    assert list(runs.columns) == ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy", "seconds", "stress"]
    assert not runs.duplicated(["corpus", "objective", "encoding", "seed"]).any()
    # stale data would be shown as the code's full profile: the settings it ran with are the code's
    assert meta["settings"] == json.loads(json.dumps(dataclasses.asdict(ex.constructive_settings("full"))))
    assert set(runs["encoding"]) <= set(s.encodings) and runs["accuracy"].between(0, 1).all()
    learned = runs["encoding"].isin(["learned", "lowrank", "none"])  # no table before training; RoPE, ALiBi: their vector forms
    assert runs.loc[learned, "stress"].isna().all() and runs.loc[~learned, "stress"].notna().all()


def test_compare_profiles_puts_the_small_interval_beside_the_full_runs():
    idx = pd.MultiIndex.from_tuples([("c", "cls", "learned"), ("c", "cls", "none")], names=["corpus", "objective", "encoding"])
    small = pd.DataFrame({"mean": [0.6, 0.5], "low": [0.55, 0.45], "high": [0.65, 0.55], "sd": 0.1, "seeds": 5.0}, index=idx)
    full = pd.DataFrame({"corpus": "c", "objective": "cls", "encoding": ["none", "none", "learned", "alibi"],
                         "seed": [0, 1, 0, 0], "accuracy": [0.5, 0.7, 0.9, 0.8], "stress": np.nan})
    out = ex.compare_profiles(small, full)
    assert list(out.index.get_level_values("encoding")) == ["none", "learned", "alibi"]  # the full runs' order
    assert out.loc[("c", "cls", "none"), "full"] == pytest.approx(0.6) and out.loc[("c", "cls", "none"), "full seeds"] == 2
    assert out.loc[("c", "cls", "learned"), "small low"] == 0.55 and np.isnan(out.loc[("c", "cls", "alibi"), "small mean"])


def test_plot_runs_draws_every_run_and_no_interval():
    runs = pd.DataFrame({"corpus": "c", "objective": "mlm", "encoding": ["learned", "none", "PMDS k=3"], "seed": 0,
                         "accuracy": [0.3, 0.1, 0.2]})
    spec = ex.plot_runs(runs, note="one seed").to_dict()
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["point"]
    assert "one seed" in spec["layer"][0]["encoding"]["x"]["title"]
    assert len(spec["datasets"][spec["data"]["name"]]) == 3
