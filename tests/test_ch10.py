"""Tests of book/_ch10.py, the helper of the constructive chapter (fixed corpus tables, trained)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

import _ch10 as ch
import posgeo as pg


@pytest.fixture(autouse=True)
def _private(private_cache):
    """Every test gets its own empty posgeo cache (tests/conftest.py)."""


def line_geometry(n: int = 8) -> np.ndarray:
    return pg.pairwise_distances(np.arange(float(n))[:, None])


def tiny_settings(**changes) -> ch.Settings:
    base = dict(corpora=(("synthetic", 8, ("cls",)),), encodings=("PMDS k=3", "none"), seeds=(0, 1), steps=60, ranks=(3,))
    return dataclasses.replace(ch.settings("small"), **{**base, **changes})


def test_tables_have_the_model_norm_and_reproduce_the_geometry():
    D = line_geometry(8)
    tables = ch.position_tables(D, d=16, norm=0.5, ranks=(1, 3))
    assert set(tables) == {"PMDS k=1", "PMDS k=3", "PMDS full", "SMACOF k=1", "SMACOF k=3", "sinusoidal (fixed)"}
    for P in tables.values():
        assert P.shape == (8, 16)
        assert np.sqrt((P**2).sum(axis=1).mean()) == pytest.approx(0.5)
        assert np.allclose(P.mean(axis=0), 0.0, atol=1e-12)
    # a line is exactly one-dimensional: every corpus table fits it with zero scale-optimal stress
    for name in ("PMDS k=1", "PMDS full", "SMACOF k=1"):
        assert pg.stress(tables[name], D, scale="optimal") < 1e-10


def test_fixed_tables_take_the_token_embeddings_norm():
    t = ch.fixed_tables(line_geometry(10), ch.settings("small"))
    assert t["PMDS k=3"].shape == (10, 32)
    assert np.sqrt((t["PMDS k=3"] ** 2).sum(axis=1).mean()) == pytest.approx(0.02 * np.sqrt(32))


def test_classification_task_samples_with_masks_and_keys_by_content():
    rows = np.array([[9, 1, 2, 8], [9, 3, 8, 8]])
    task = ch.ClassificationTask(rows, np.array([0, 1]), vocab_size=10, pad_id=8, name="toy")
    b = task.sample(6, torch.Generator().manual_seed(0))
    assert b.tokens.shape == (6, 4) and b.kind == "cls"
    assert torch.equal(b.attention_mask, b.tokens != 8)
    assert set(b.targets.tolist()) <= {0, 1}
    other = ch.ClassificationTask(rows, np.array([1, 1]), vocab_size=10, pad_id=8, name="toy")
    assert task.cache_key() != other.cache_key()


def test_windows_keep_the_first_tokens_remapped_and_pad_the_short_ones():
    seqs = pg.Sequences.from_list([[5, 5, 2], [5, 7, 2, 9], [7]], vocab_size=10)
    lookup = np.full(10, 2)  # everything else: UNK = 2
    lookup[[5, 2]] = [0, 1]
    assert ch.windows(seqs, lookup, 3, 3).tolist() == [[0, 0, 1], [0, 2, 1], [2, 3, 3]]


def test_fixed_table_stays_fixed_through_training():
    table = ch.position_tables(line_geometry(6), d=8, norm=0.3, ranks=(2,))["PMDS k=2"]
    cfg = pg.TransformerConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=7, position="learned",
                               n_classes=2, pooling="first")
    res = pg.train(cfg, pg.TrainConfig(steps=5, batch_size=8, lr=1e-2, device="cpu", freeze=("pos",)),
                   pg.FirstMarkerTask(seq_len=7, n_filler=4), prepare=ch.fixed_table_prepare(table, 1), cache=False,
                   progress=False)
    pos = res.model().pos.detach().numpy()
    assert np.allclose(pos[0], 0.0) and np.allclose(pos[1:], table, atol=1e-7)


def test_a_frozen_learned_table_is_the_table_added_to_the_token_embeddings():
    """What the chapter builds by hand: the library's model with the table written in equals a
    position-free model whose input is the token embeddings plus the table."""
    table = ch.position_tables(line_geometry(6), d=8, norm=0.3, ranks=(2,))["SMACOF k=2"]
    cfg = pg.TransformerConfig(vocab_size=6, d_model=8, n_heads=2, n_layers=2, d_ff=16, max_len=7, position="learned")
    library = ch.fixed_table_prepare(table)(pg.Transformer(cfg, seed=3))
    body = pg.Transformer(dataclasses.replace(cfg, position="none"), seed=3)
    body.load_state_dict(library.state_dict(), strict=False)
    tokens = torch.randint(0, 6, (4, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        mine = body(inputs_embeds=body.tok(tokens) + torch.as_tensor(table, dtype=torch.float32)).logits
        assert torch.equal(mine, library(tokens).logits)
        shifted = body(inputs_embeds=body.tok(tokens) + torch.as_tensor(table[::-1].copy(), dtype=torch.float32)).logits
    assert (shifted - mine).abs().max() > 1e-4  # the check can fail: another table gives other logits


def test_run_all_is_tidy_and_positions_matter_on_the_reversal_task():
    s = tiny_settings()
    corpora = {"synthetic": ch.tasks("synthetic", 8, s)}
    runs = ch.run_all(s, corpora, cache=False)
    assert list(runs.columns) == ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy"]
    assert len(runs) == 4
    acc = runs.groupby("encoding")["accuracy"].mean()
    assert acc["none"] < 0.6 < acc["PMDS k=3"]  # without positions a reversal cannot be seen


def test_one_job_reproduces_its_row_of_the_whole_run_and_takes_a_table_of_ones_own():
    s = tiny_settings(encodings=("PMDS k=3", "rope"), steps=20)
    corpora = {"synthetic": ch.tasks("synthetic", 8, s)}
    jobs = ch.jobs(s, corpora)
    assert [(j.encoding, j.seed) for j in jobs] == [("PMDS k=3", 0), ("PMDS k=3", 1), ("rope", 0), ("rope", 1)]
    runs = ch.run_all(s, corpora, cache=False)
    assert ch.run_job(jobs[1], s, corpora, cache=False) == runs.iloc[1].to_dict()  # the tables computed here
    mine = {"mine": ch.fixed_tables(corpora["synthetic"].geometry, s)["PMDS k=3"]}
    own = ch.run_job(dataclasses.replace(jobs[1], encoding="mine"), s, corpora, tables=mine, cache=False)
    assert own["accuracy"] == runs.iloc[1]["accuracy"]


def test_summaries_keep_accuracy_intervals_in_range_and_contrasts_see_a_gap():
    runs = pd.DataFrame({"corpus": "c", "objective": "o", "seed": list(range(5)) * 2,
                         "encoding": ["a"] * 5 + ["b"] * 5,
                         "accuracy": [1.0, 1.0, 0.7, 1.0, 1.0, 0.5, 0.52, 0.49, 0.5, 0.51]})
    summary = ch.summarise(runs)
    assert summary.loc[("c", "o", "a"), "high"] == 1.0 and summary["low"].min() >= 0  # a t interval would pass 1
    assert ch.interval_table(summary).loc["a", ("c", "o")] == "0.94 [0.77, 1.00]"
    out = ch.contrasts(runs, [("a", "b")])
    assert bool(out.loc[("c", "o", "a − b"), "separated"]) and out.loc[("c", "o", "a − b"), "mean"] == pytest.approx(0.436)


def test_stress_performance_sees_a_perfect_anticorrelation():
    encs = ["a", "b", "c", "d"]
    runs = pd.DataFrame([{"corpus": "c", "objective": "o", "encoding": e, "seed": s, "accuracy": 0.9 - 0.1 * i + 0.001 * s}
                         for i, e in enumerate(encs) for s in range(3)])
    stresses = pd.Series([0.1, 0.2, 0.3, 0.4], index=pd.MultiIndex.from_product([["c"], encs], names=["corpus", "encoding"]))
    out = ch.stress_performance(runs, stresses, n_boot=50)
    assert out.loc[("c", "o"), "rho"] == pytest.approx(-1.0) and out.loc[("c", "o"), "high"] < 0


def test_accuracy_plot_draws_intervals_in_the_book_colours():
    index = pd.MultiIndex.from_tuples([("sst2", "cls", "PMDS k=3"), ("sst2", "cls", "none"), ("synthetic", "mlm", "PMDS k=3")],
                                      names=["corpus", "objective", "encoding"])
    summary = pd.DataFrame({"mean": [0.64, 0.63, 0.06], "low": [0.62, 0.61, 0.05], "high": [0.66, 0.65, 0.07]}, index=index)
    spec = ch.plot_accuracy(summary).to_dict()
    assert spec["description"] and len(spec["concat"]) == 2  # one panel per (corpus, objective)
    rule, point = spec["concat"][0]["layer"]
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "low" and rule["encoding"]["x2"]["field"] == "high"
    assert point["mark"]["type"] == "point" and point["encoding"]["shape"]["field"] == "kind"
    colours = dict(zip(point["encoding"]["color"]["scale"]["domain"], point["encoding"]["color"]["scale"]["range"]))
    assert colours["PMDS k=3"] == pg.series_colour("PMDS") and colours["none"] == pg.series_colour("none")
    points = ch.plot_accuracy(summary.drop(columns=["low", "high"])).to_dict()  # runs without intervals: points only
    assert [layer["mark"]["type"] for layer in points["concat"][0]["layer"]] == ["point"]


def test_the_full_profile_trains_on_a_gpu_when_there_is_one_and_the_small_on_the_cpu():
    assert ch.settings("small").device == "cpu"
    assert ch.settings("full").device == "auto"
    with pytest.raises(ValueError):
        ch.settings("huge")


def test_the_stored_full_profile_runs_match_the_full_profile_of_the_code():
    runs, meta = ch.full_profile_runs()
    s = ch.settings("full")
    planned = ch.jobs(s, {name: None for name, _, _ in s.corpora})
    assert meta["runs_done"] == len(runs) and meta["runs_planned"] == len(planned) and meta["profile"] == "full"
    assert list(runs.columns) == ["corpus", "objective", "encoding", "seed", "final_loss", "accuracy", "seconds", "stress"]
    assert not runs.duplicated(["corpus", "objective", "encoding", "seed"]).any()
    # stale data would be shown as the code's full profile: the settings it ran with are the code's
    assert meta["settings"] == json.loads(json.dumps(dataclasses.asdict(s)))
    assert set(runs["encoding"]) <= set(s.encodings) and runs["accuracy"].between(0, 1).all()
    learned = runs["encoding"].isin(["learned", "lowrank", "none"])  # no table before training; RoPE, ALiBi: their vector forms
    assert runs.loc[learned, "stress"].isna().all() and runs.loc[~learned, "stress"].notna().all()
