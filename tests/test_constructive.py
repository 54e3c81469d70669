"""Tests of posgeo.experiments.constructive (chapter 12: fixed corpus tables, trained)."""

from __future__ import annotations

import dataclasses

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
