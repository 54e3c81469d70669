"""Tests of book/_ch10_controls.py, the controlled runs of the constructive chapter."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import _ch10_controls as cc
import posgeo as pg

DATA = Path(__file__).resolve().parents[1] / "book" / "data"


@pytest.fixture(autouse=True)
def _private(private_cache):
    """Every test gets its own empty posgeo cache (tests/conftest.py)."""


def line(n: int = 10) -> np.ndarray:
    return pg.pairwise_distances(np.arange(float(n))[:, None])


def tiny(**changes) -> cc.ControlSettings:
    base = dict(corpora=(("synthetic", 8),), encodings=("none", "learned", "PMDS full", "PMDS permuted ×2"),
                cls_encodings=("none",), seeds=(0, 1), steps=4, cls_steps=3, eval_rows=32, merge_rows=8)
    return cc.ControlSettings(**{**base, **changes})


def test_a_permuted_table_keeps_the_spectrum_and_loses_the_geometry():
    D = line(10)
    P = cc.control_table("PMDS full", D, d=16, norm=1.0)
    Q = cc.control_table("PMDS permuted", D, d=16, norm=1.0)
    assert np.allclose(np.linalg.svd(P, compute_uv=False), np.linalg.svd(Q, compute_uv=False))
    assert sorted(map(tuple, np.round(P, 12))) == sorted(map(tuple, np.round(Q, 12)))  # the same rows
    assert pg.stress(P, D, scale="optimal") < 1e-10 < 0.1 < pg.stress(Q, D, scale="optimal")


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 20), d=st.integers(2, 24), data=st.data(), norm=st.floats(0.01, 10.0), seed=st.integers(0, 99))
def test_random_tables_have_the_stated_rank_and_norm(n, d, data, norm, seed):
    rank = data.draw(st.integers(1, min(n - 1, d)))
    P = cc.random_table(n, d, rank=rank, norm=norm, seed=seed)
    assert P.shape == (n, d)
    assert np.linalg.matrix_rank(P, tol=1e-9 * norm) == rank
    assert np.sqrt((P**2).sum(axis=1).mean()) == pytest.approx(norm)
    assert np.allclose(P.mean(axis=0), 0.0, atol=1e-12 * max(1.0, norm))


def test_every_fixed_table_is_centred_at_its_scaled_norm():
    D = line(12)
    corrected = D * 0.9
    for name in cc.FIXED:
        for scale in (1.0, 0.5, 2.0):
            label = name if scale == 1.0 else f"{name} ×{scale:g}"
            P = cc.control_table(label, D, d=16, norm=0.3, corrected=corrected)
            assert P.shape == (12, 16)
            assert np.sqrt((P**2).sum(axis=1).mean()) == pytest.approx(0.3 * scale), label
            assert np.allclose(P.mean(axis=0), 0.0, atol=1e-12)
    assert np.linalg.matrix_rank(cc.control_table("random k=8", D, d=16, norm=1.0)) == 8
    assert np.linalg.matrix_rank(cc.control_table("random full", D, d=16, norm=1.0)) == 11
    for own in cc.OWN:
        assert cc.control_table(own, D, d=16, norm=1.0) is None


@pytest.mark.parametrize("name, message", [
    ("PMDS half", "unknown control"), ("PMDS full ×0", "positive"), ("PMDS full ×-1", "positive"),
    ("PMDS full ×two", "not a number"), ("learned ×2", "not a fixed table"), (3, "string"),
])
def test_bad_encoding_names_are_explained(name, message):
    with pytest.raises((ValueError, TypeError), match=message):
        cc.control_table(name, line(6), d=8, norm=1.0)


def test_a_rank_above_the_positions_is_explained():
    with pytest.raises(ValueError, match="more than a centred 6 x 8 table"):
        cc.random_table(6, 8, rank=6, norm=1.0, seed=0)
    with pytest.raises(ValueError, match="corrected"):
        cc.control_table("PMDS corrected", line(6), d=8, norm=1.0)


def model_with_equal_rows(i: int, j: int) -> pg.Transformer:
    cfg = pg.TransformerConfig(vocab_size=12, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=6, position="learned")
    model = pg.Transformer(cfg, seed=0).eval()
    with torch.no_grad():
        model.pos.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(1))
        model.pos[j] = model.pos[i]
    return model


def test_merging_two_equal_vectors_changes_nothing_and_other_pairs_do():
    model = model_with_equal_rows(1, 4)
    rows = np.random.default_rng(0).integers(0, 11, size=(40, 6))
    tokens, targets = cc.masked_rows(rows, 11, n_masks=2, seed=0)
    same = cc.merged(model, 1, 4)
    assert torch.equal(same.pos, model.pos)
    table = cc.merge_test(model, tokens, targets, 6).set_index(["i", "j"])["loss rise"]
    assert table.loc[(1, 4)] == 0.0
    assert (table.drop((1, 4)).abs() > 0).all()
    other = cc.merged(model, 0, 2)  # only rows 0 and 2 move, both to their mean
    assert torch.equal(other.pos[[1, 3, 4, 5]], model.pos[[1, 3, 4, 5]])
    assert torch.allclose(other.pos[0], (model.pos[0] + model.pos[2]) / 2) and torch.equal(other.pos[0], other.pos[2])


def test_masked_rows_mask_at_least_one_token_and_target_only_the_masked():
    rows = np.arange(60).reshape(10, 6) % 9
    tokens, targets = cc.masked_rows(rows, 9, n_masks=3, seed=5)
    assert tokens.shape == (30, 6)
    masked = tokens == 9
    assert masked.any(dim=1).all()
    assert torch.equal(masked, targets != pg.IGNORE_INDEX)
    assert torch.equal(targets[masked], torch.as_tensor(np.tile(rows, (3, 1)))[masked])
    again, _ = cc.masked_rows(rows, 9, n_masks=3, seed=5)
    assert torch.equal(tokens, again)


def test_the_masked_loss_is_the_cross_entropy_of_the_masked_tokens():
    model = model_with_equal_rows(0, 1)
    rows = np.random.default_rng(1).integers(0, 11, size=(7, 6))
    tokens, targets = cc.masked_rows(rows, 11, n_masks=1, seed=0)
    loss, acc = cc.masked_loss(model, tokens, targets, batch=3)
    with torch.no_grad():
        logits = model(tokens).logits
    keep = targets != pg.IGNORE_INDEX
    assert loss == pytest.approx(float(torch.nn.functional.cross_entropy(logits[keep], targets[keep])), rel=1e-6)
    assert acc == pytest.approx(float((logits[keep].argmax(-1) == targets[keep]).float().mean()))


def test_the_command_resumes_and_records_what_the_direct_call_gives(tmp_path):
    s = tiny()
    out = tmp_path / "c.csv"
    first = cc.run_all(out, s, limit=3)
    assert len(first) == 3
    frame = cc.run_all(out, s, jobs=2)
    expected = cc.runs(s)
    assert len(frame) == len(expected) and set(map(tuple, frame[["corpus", "objective", "encoding", "seed"]].to_numpy())) \
        == {tuple(dataclasses.astuple(r)) for r in expected}
    assert cc.run_all(out, s).equals(frame)  # nothing left to train
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["digest"] == s.digest() and record["settings"]["steps"] == 4
    merge = pd.read_csv(tmp_path / "c_merge.csv")
    assert len(merge) == 2 * 8 * 7 // 2  # the learned table's two seeds, every pair of 8 positions
    # a row equals the run trained directly
    corpus = cc.control_corpus("synthetic", 8, s)
    row, _ = cc.train_run(cc.Run("synthetic", "mlm", "PMDS permuted ×2", 1), s, corpus, cache=False)
    kept = frame.set_index(["objective", "encoding", "seed"]).loc[("mlm", "PMDS permuted ×2", 1)]
    assert kept["loss"] == pytest.approx(row["loss"], rel=1e-6) and kept["accuracy"] == pytest.approx(row["accuracy"])
    with pytest.raises(ValueError, match="other settings"):
        cc.run_all(out, dataclasses.replace(s, steps=5))


def test_runs_go_seed_by_seed_so_a_budget_cut_leaves_whole_seeds():
    s = tiny(seeds=(0, 1, 2))
    order = cc.runs(s)
    per_seed = len(order) // 3
    for k in range(3):
        assert {r.seed for r in order[k * per_seed:(k + 1) * per_seed]} == {k}
    assert len(set(order)) == len(order) == 3 * (len(s.encodings) + len(s.cls_encodings))


def test_a_prepared_call_trains_the_same_runs_and_a_spent_budget_trains_none(tmp_path):
    s = tiny(seeds=(0,), encodings=("none", "PMDS permuted ×2"), cls_encodings=())
    cc.prepare(tmp_path / "p.pkl.gz", s)
    loaded, corpora = cc.load_prepared(tmp_path / "p.pkl.gz")
    assert loaded == s and set(corpora) == {"synthetic"}
    assert cc.run_all(tmp_path / "none.csv", s, corpora=corpora, budget=0).empty  # nothing starts
    assert not (tmp_path / "none.csv").exists()
    frame = cc.run_all(tmp_path / "a.csv", s, corpora=corpora, budget=3600, jobs=2)
    direct = cc.run_all(tmp_path / "b.csv", s)
    key = ["encoding", "seed"]
    assert np.allclose(frame.sort_values(key)["loss"], direct.sort_values(key)["loss"], rtol=1e-6)
    with pytest.raises(SystemExit, match="drop --set"):
        cc.main(["run", str(tmp_path / "c.csv"), "--prepared", str(tmp_path / "p.pkl.gz"), "--set", "steps=5"])


def test_the_shipped_runs_belong_to_the_settings_and_are_whole():
    csv, merge_csv, record = cc.paths(DATA / "ch10_controls.csv")
    if not csv.exists():
        pytest.skip("make p1-controls has not been run")
    s = cc.ControlSettings()
    info = json.loads(record.read_text())
    assert info["digest"] == s.digest() and info["command"].startswith("python _ch10_controls.py run")
    frame = pd.read_csv(csv)
    keys = set(map(tuple, frame[["corpus", "objective", "encoding", "seed"]].to_numpy()))
    assert len(keys) == len(frame) and keys <= {dataclasses.astuple(r) for r in cc.runs(s)}
    mlm = frame[frame["objective"] == "mlm"]
    assert mlm["loss"].notna().all() and mlm["accuracy"].between(0, 1).all()
    learned = mlm[mlm["encoding"].isin(["learned", "learned from PMDS"])]
    assert merge_csv.exists() == (len(learned) > 0)  # every learned table is merge-tested
    if learned.empty:
        return
    merge = pd.read_csv(merge_csv)
    assert len(merge.groupby(["corpus", "encoding", "seed"])) == len(learned)
    n = dict(s.corpora)
    for (corpus, encoding, seed), g in merge.groupby(["corpus", "encoding", "seed"]):
        assert len(g) == n[corpus] * (n[corpus] - 1) // 2
        assert (corpus, "mlm", encoding, seed) in keys


def test_the_geometry_file_lists_every_pair_and_the_correlations_read_it():
    class C:  # a stand-in corpus: a line of 5 positions, its corrected distances halved
        n_positions = 5
        geometry = line(5)
        corrected = line(5) / 2

    g = cc.geometry_frame({"toy": C()})
    assert len(g) == 10 and (g["offset"] == g["j"] - g["i"]).all() and np.allclose(g["corrected"], g["plug-in"] / 2)
    merge = g[["i", "j"]].assign(corpus="toy", encoding="learned", seed=0, **{"loss rise": g["plug-in"] ** 2})
    rho = cc.merge_correlations(merge, g)
    assert rho.loc[0, "rho with plug-in"] == pytest.approx(1.0) and rho.loc[0, "share of pairs raising the loss"] == 1.0


def test_lowrank_tables_are_named_by_their_rank_and_checked_against_the_positions():
    assert cc.lowrank_rank("lowrank k=4") == 4 and cc.lowrank_rank("learned") is None
    assert cc.parse_encoding("lowrank k=2") == ("lowrank k=2", 1.0)
    assert cc.control_table("lowrank k=2", line(6), d=8, norm=1.0) is None
    for bad, message in (("lowrank k=x", "not an integer"), ("lowrank k=0", "at least 1")):
        with pytest.raises(ValueError, match=message):
            cc.parse_encoding(bad)
    s = tiny(encodings=("lowrank k=2", "lowrank k=9"), cls_encodings=())
    corpus = cc.control_corpus("synthetic", 8, s)
    row, merge = cc.train_run(cc.Run("synthetic", "mlm", "lowrank k=2", 0), s, corpus, cache=False)
    assert merge is None and 0 <= row["accuracy"] <= 1
    with pytest.raises(ValueError, match="rank above the number of positions"):
        cc.train_run(cc.Run("synthetic", "mlm", "lowrank k=9", 0), s, corpus, cache=False)


def _make_settings(variable: str) -> cc.ControlSettings:
    """The settings a Makefile variable passes to ``--set`` (parsed as the command line parses them)."""
    import re
    import shlex

    text = (DATA.parents[1] / "Makefile").read_text().replace("\\\n", " ")
    return cc.parse_settings(shlex.split(re.search(rf"^{variable} = (.*)$", text, re.M).group(1)))


def test_the_shipped_lowrank_sweep_is_the_make_targets_and_whole():
    csv, _, record = cc.paths(DATA / "ch07_lowrank_imdb.csv")
    if not csv.exists():
        pytest.skip("make p1-controls has not written ch07_lowrank_imdb.csv")
    s = _make_settings("P1_LOWRANK")
    assert json.loads(record.read_text())["digest"] == s.digest()
    frame = pd.read_csv(csv)
    assert {dataclasses.astuple(r) for r in cc.runs(s)} == set(map(tuple, frame[["corpus", "objective", "encoding", "seed"]].to_numpy()))
    assert frame["loss"].notna().all() and len(frame) == len(cc.runs(s))


def test_the_gpu_settings_are_valid_and_name_ranks_the_model_allows():
    for variable in ("P1_GPU_LOWRANK", "P1_GPU_CONTROLS"):
        s = _make_settings(variable)
        for name in s.encodings:
            cc.parse_encoding(name)
            rank = cc.lowrank_rank(name)
            assert rank is None or rank <= min(s.d_model, min(n for _, n in s.corpora)), name
        assert s.d_model % s.n_heads == 0
