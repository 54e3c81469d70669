"""Tests for posgeo.experiments.separation: separation statistics, tasks, training probes, fine-tuning, plots."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posgeo as pg
from posgeo import Corpus, Sequences
from posgeo import TransformerConfig
from posgeo.experiments.separation import (
    BagOfTokensTask,
    FinetuneResult,
    SeparationSettings,
    corpus_mlm_task,
    finetune_position_table,
    marginal_mlm_task,
    plot_distance_distributions,
    plot_row_drift,
    plot_separation_trajectories,
    remap_vocabulary,
    run_separation_experiments,
    run_separation_seeds,
    separation_contrasts,
    separation_experiments,
    separation_seed_table,
    separation_settings,
    separation_table,
    separation_trajectory,
    train_separation,
)
from posgeo import MarginalSampler, separation_stats
from posgeo import synthetic_marginals
from posgeo import FirstMarkerTask, TrainConfig, train


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("spacing", [0.25, 1.0, 4.0])  # exact in binary: ties break to (0, 1)
def test_points_on_a_line_have_min_distance_equal_to_spacing(spacing):
    P = spacing * np.arange(7.0)[:, None]
    s = separation_stats(P)
    assert s.min_dist == pytest.approx(spacing)
    assert s.argmin == (0, 1)
    # mean of |i - j| * spacing over pairs of 0..6: sum_k (7 - k) k / 21 = 56 / 21
    assert s.mean_dist == pytest.approx(spacing * 56 / 21)
    assert s.mean_norm == pytest.approx(spacing * 3.0)
    assert s.normalised == pytest.approx(1 / 3)
    assert s.quantile(0.5) == pytest.approx(np.median([abs(i - j) for i in range(7) for j in range(i + 1, 7)]) * spacing)


def test_duplicated_row_gives_zero_and_the_duplicate_pair():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(6, 4))
    P[4] = P[1]
    s = separation_stats(P)
    assert s.min_dist == 0.0 and s.normalised == 0.0 and s.relative == 0.0
    assert s.argmin == (1, 4)


def test_nearly_coincident_rows_are_measured_accurately():
    P = np.array([[1e3, 1e3, 1e3], [1e3, 1e3, 1e3 + 1e-7], [0.0, 0.0, 0.0]])
    assert separation_stats(P).min_dist == pytest.approx(1e-7, rel=1e-3)


def test_argmin_is_the_closest_pair_for_a_random_table():
    rng = np.random.default_rng(3)
    P = rng.normal(size=(9, 3))
    s = separation_stats(P)
    D = np.linalg.norm(P[:, None] - P[None, :], axis=-1)
    np.fill_diagonal(D, np.inf)
    i, j = np.unravel_index(np.argmin(D), D.shape)
    assert s.argmin == (min(i, j), max(i, j))
    assert s.min_dist == pytest.approx(D.min())


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0), n=st.integers(2, 12))
def test_scaling_multiplies_distances_and_keeps_the_normalised_values(seed, scale, n):
    P = np.random.default_rng(seed).normal(size=(n, 5))
    a, b = separation_stats(P), separation_stats(scale * P)
    assert b.min_dist == pytest.approx(scale * a.min_dist, rel=1e-9)
    assert b.normalised == pytest.approx(a.normalised, rel=1e-9)
    assert b.relative == pytest.approx(a.relative, rel=1e-9)
    assert b.argmin == a.argmin


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(0.5, 50.0))
def test_a_common_offset_keeps_distances_but_lowers_the_norm_normalised_value(seed, shift):
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(8, 4))
    offset = shift * np.ones(4)
    a, b = separation_stats(P), separation_stats(P + offset)
    assert b.min_dist == pytest.approx(a.min_dist, rel=1e-6)
    assert b.relative == pytest.approx(a.relative, rel=1e-6)
    if shift > 10:
        assert b.normalised < a.normalised


def test_separation_stats_accepts_torch_tensors_and_lists():
    assert separation_stats(torch.tensor([[0.0], [2.0]])).min_dist == 2.0
    assert separation_stats([[0, 0], [3, 4]]).min_dist == 5.0


@pytest.mark.parametrize(
    "bad, exc, words",
    [
        (np.arange(4.0), ValueError, "2-d"),
        (np.zeros((1, 3)), ValueError, "at least 2 positions"),
        (np.array([[0.0, np.nan], [1.0, 1.0]]), ValueError, "NaN"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "numeric"),
    ],
)
def test_separation_stats_rejects_bad_tables(bad, exc, words):
    with pytest.raises(exc, match=words):
        separation_stats(bad)


def test_quantile_lookup_rejects_unstored_levels():
    with pytest.raises(KeyError, match="not stored"):
        separation_stats(np.eye(3)).quantile(0.3)


def test_trajectory_has_one_sorted_row_per_snapshot():
    line = np.arange(5.0)[:, None]
    tr = separation_trajectory({20: 3 * line, 0: line, 10: 2 * line})
    assert tr.shape[0] == 3
    assert tr["step"].tolist() == [0, 10, 20]
    assert tr["min_dist"].tolist() == pytest.approx([1.0, 2.0, 3.0])
    assert tr["normalised"].tolist() == pytest.approx([0.5, 0.5, 0.5])
    assert {"step", "min_dist", "normalised", "relative", "q05", "q50", "q95", "i", "j"} <= set(tr.columns)
    assert separation_trajectory({0: line}, rows=2)["min_dist"].iloc[0] == 1.0


def test_trajectory_rows_restricts_the_positions():
    P = np.array([[0.0], [10.0], [10.001]])
    assert separation_trajectory({0: P}, rows=2)["min_dist"].iloc[0] == pytest.approx(10.0)
    assert separation_trajectory({0: P})["min_dist"].iloc[0] == pytest.approx(0.001)


@pytest.mark.parametrize(
    "snaps, kw, exc, words",
    [
        ({}, {}, ValueError, "empty"),
        ([np.eye(2)], {}, TypeError, "mapping"),
        ({0: np.eye(3)}, {"rows": 5}, ValueError, "exceeds"),
        ({0: np.eye(3)}, {"rows": 1}, ValueError, "rows"),
        ({"a": np.eye(3)}, {}, TypeError, "int steps"),
    ],
)
def test_trajectory_rejects_bad_input(snaps, kw, exc, words):
    with pytest.raises(exc, match=words):
        separation_trajectory(snaps, **kw)


# --------------------------------------------------------------------------- synthetic tasks


def test_marginal_sampler_follows_point_masses_and_is_seeded():
    mu = np.zeros((4, 5))
    mu[np.arange(4), [3, 1, 4, 0]] = 1.0
    s = MarginalSampler(mu)
    assert s(6, 1).tolist() == [[3, 1, 4, 0]] * 6
    soft = MarginalSampler(synthetic_marginals(6, 12, nonstationarity=1.0))
    assert np.array_equal(soft(20, 7), soft(20, 7)) and not np.array_equal(soft(20, 7), soft(20, 8))
    assert s.name != soft.name and not s.identical and MarginalSampler(np.full((3, 2), 0.5)).identical


def test_marginal_sampler_rejects_non_distributions():
    with pytest.raises(ValueError, match="rows summing to 1"):
        MarginalSampler(np.ones((3, 4)))
    with pytest.raises(ValueError, match="shape"):
        MarginalSampler(np.ones(4) / 4)


def test_marginal_mlm_task_flags_exchangeable_corpora_as_order_insensitive():
    mu = synthetic_marginals(8, 16, nonstationarity=1.0)
    assert marginal_mlm_task(mu).order_sensitive
    assert not marginal_mlm_task(np.tile(mu.mean(0), (8, 1))).order_sensitive
    b = marginal_mlm_task(mu).sample(16, torch.Generator().manual_seed(0))
    assert b.tokens.shape == (16, 8) and int(b.tokens.max()) <= 16


def test_bag_of_tokens_labels_ignore_token_order():
    task = BagOfTokensTask(synthetic_marginals(10, 16, nonstationarity=1.0))
    b = task.sample(256, torch.Generator().manual_seed(1))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(2))
    shuffled = b.tokens[:, perm]
    relabel = ((shuffled < 8).sum(1) > task.threshold).long()
    assert torch.equal(relabel, b.targets)
    assert not task.order_sensitive and task.kind == "cls"


def test_bag_of_tokens_is_roughly_balanced():
    task = BagOfTokensTask(synthetic_marginals(16, 32, nonstationarity=1.0))
    assert 0.3 < task.positive_rate < 0.7
    b = task.sample(4000, torch.Generator().manual_seed(0))
    assert float(b.targets.float().mean()) == pytest.approx(task.positive_rate, abs=0.04)


def test_bag_threshold_for_fair_coins():
    # 5 fair coins: P(count > 2) = 1/2 exactly
    task = BagOfTokensTask(np.full((5, 2), 0.5))
    assert task.threshold == 2 and task.positive_rate == pytest.approx(0.5)


# --------------------------------------------------------------------------- vocabulary remap and corpus sampler


SEQS = Sequences.from_list([[4, 4, 1, 2, 9], [4, 1, 1, 4], [7, 4, 2], [3]], vocab_size=10)


def test_remap_keeps_most_frequent_and_maps_the_rest_to_unk():
    r = remap_vocabulary(SEQS, 2)  # counts: 4 -> 5, 1 -> 3, 2 -> 2, others 1
    assert r.kept.tolist() == [4, 1]
    assert (r.unk_id, r.pad_id, r.n_tokens) == (2, 3, 4)
    assert r.coverage == pytest.approx(8 / 13)
    assert r.apply(np.array([4, 1, 2, 9, 0])).tolist() == [0, 1, 2, 2, 2]


def test_remap_ties_are_broken_by_smaller_id():
    r = remap_vocabulary(Sequences.from_list([[5, 3, 8]], vocab_size=9), 2)
    assert r.kept.tolist() == [3, 5]


@pytest.mark.parametrize("k, exc, words", [(0, ValueError, "positive"), (20, ValueError, "distinct tokens")])
def test_remap_rejects_bad_sizes(k, exc, words):
    with pytest.raises(exc, match=words):
        remap_vocabulary(SEQS, k)


def test_remap_rejects_foreign_ids_and_wrong_inputs():
    r = remap_vocabulary(SEQS, 2)
    with pytest.raises(ValueError, match="wrong vocabulary"):
        r.apply([10])
    with pytest.raises(TypeError, match="Sequences"):
        remap_vocabulary([[1, 2]], 1)  # type: ignore[arg-type]


def test_corpus_sampler_rows_are_sentence_beginnings():
    task, remap = corpus_mlm_task(SEQS, seq_len=3, top_k=3)
    # sequences with >= 3 tokens, first 3 tokens, remapped (4 -> 0, 1 -> 1, 2 -> 2, else UNK 3)
    assert task.sampler.rows.tolist() == [[0, 0, 1], [0, 1, 1], [3, 0, 2]]
    assert task.vocab_size == remap.n_tokens + 1 == 6
    drawn = task.sampler(50, 0)
    assert drawn.shape == (50, 3) and {tuple(r) for r in drawn.tolist()} <= {tuple(r) for r in task.sampler.rows.tolist()}
    assert np.array_equal(task.sampler(8, 3), task.sampler(8, 3))


def test_corpus_sampler_pads_short_sequences_at_the_end():
    task, remap = corpus_mlm_task(SEQS, seq_len=4, top_k=3, min_length=1)
    rows = task.sampler.rows
    assert rows.shape == (4, 4)
    assert rows[3].tolist() == [remap.unk_id, remap.pad_id, remap.pad_id, remap.pad_id]


def test_shuffled_windows_keep_their_tokens_and_padding():
    plain, remap = corpus_mlm_task(SEQS, seq_len=4, top_k=3, min_length=1)
    shuf, _ = corpus_mlm_task(SEQS, seq_len=4, top_k=3, min_length=1, shuffle=True)
    a, b = plain.sampler(200, 5), shuf.sampler(200, 5)  # same rows drawn, then shuffled
    for x, y in zip(a, b):
        assert sorted(x.tolist()) == sorted(y.tolist())
        assert (y == remap.pad_id).tolist() == (x == remap.pad_id).tolist()
    assert not np.array_equal(a, b)
    assert plain.order_sensitive and not shuf.order_sensitive and plain.name != shuf.name


def test_shuffling_makes_every_position_look_alike():
    seqs = Sequences.from_list([[0, 1, 2, 3]] * 5, vocab_size=4)
    shuf, _ = corpus_mlm_task(seqs, seq_len=4, top_k=4, shuffle=True)
    draws = shuf.sampler(4000, 0)
    freq = np.stack([np.bincount(draws[:, i], minlength=6)[:4] / 4000 for i in range(4)])
    assert np.allclose(freq, 0.25, atol=0.03)  # unshuffled, position i always holds token i


def test_corpus_mlm_task_errors():
    with pytest.raises(ValueError, match="min_length"):
        corpus_mlm_task(SEQS, seq_len=8, top_k=2)
    with pytest.raises(TypeError, match="Corpus or Sequences"):
        corpus_mlm_task([[1, 2, 3]], seq_len=2, top_k=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seq_len"):
        corpus_mlm_task(SEQS, seq_len=1, top_k=2)


@pytest.mark.skipif(not os.environ.get("POSGEO_DATA_DIR"), reason="needs POSGEO_DATA_DIR with sst2/*.parquet")
def test_sst2_mlm_task_on_real_data():
    from posgeo import load_corpus

    corpus = load_corpus("sst2", "validation", progress=False)
    task, remap = corpus_mlm_task(corpus, seq_len=12, top_k=300)
    rows = task.sampler.rows
    long = np.flatnonzero(corpus.sequences.lengths >= 12)
    assert rows.shape == (long.size, 12)
    assert rows.max() < remap.n_tokens and remap.pad_id not in rows  # long enough: no padding
    first = corpus.sequences[int(long[0])][:12]
    assert rows[0].tolist() == remap.apply(first).tolist()
    assert 0.5 < remap.coverage < 1.0  # 300 word pieces cover most running text
    # the most frequent kept token is indeed the most frequent token of the corpus
    counts = np.bincount(corpus.sequences.tokens, minlength=corpus.vocab_size)
    assert remap.kept[0] == int(np.argmax(counts))


# --------------------------------------------------------------------------- training probes

MARKER = FirstMarkerTask(seq_len=6, n_filler=4)
CFG = TransformerConfig(vocab_size=6, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=6, n_classes=2, pooling="first")
TC = TrainConfig(steps=12, batch_size=16, lr=3e-3, device="cpu", snapshot_every=4, log_every=4)


def test_uniform_attention_keeps_queries_and_keys_at_zero():
    res = train_separation(CFG, TC, MARKER, uniform_attention=True, progress=False, cache=False)
    w = res.state_dict["blocks.0.attn.qkv.weight"]
    assert float(w[:32].abs().max()) == 0.0 and float(w[32:].abs().max()) > 0
    out = res.model()(MARKER.sample(3, torch.Generator().manual_seed(0)).tokens, return_attention=True)
    assert torch.allclose(out.attentions[0], torch.full_like(out.attentions[0], 1 / 6))
    assert sorted(res.snapshots) == [0, 4, 8, 12]


def test_custom_loop_without_options_matches_posgeo_train():
    # position_weight_decay=0 goes through the separate loop; it must reproduce train() exactly
    a = train(CFG, TC, MARKER, progress=False, cache=False)
    b = train_separation(CFG, TC, MARKER, position_weight_decay=0.0, progress=False, cache=False)
    for k in a.state_dict:
        assert torch.allclose(a.state_dict[k], b.state_dict[k], atol=1e-6), k


def test_position_weight_decay_shrinks_only_the_table():
    tc = dataclasses.replace(TC, steps=40, lr=1e-2, snapshot_every=40)
    free = train_separation(CFG, tc, MARKER, position_weight_decay=0.0, progress=False, cache=False)
    decayed = train_separation(CFG, tc, MARKER, position_weight_decay=20.0, progress=False, cache=False)
    assert np.linalg.norm(decayed.snapshots[40]) < 0.5 * np.linalg.norm(free.snapshots[40])
    tok_free, tok_dec = free.state_dict["tok.weight"].norm(), decayed.state_dict["tok.weight"].norm()
    assert float(tok_dec) > 0.5 * float(tok_free)  # the rest of the network is not decayed


@pytest.mark.parametrize(
    "kw, exc, words",
    [
        ({"threads": 0}, ValueError, "threads"),
        ({"position_weight_decay": -1.0}, ValueError, ">= 0"),
        ({"position_weight_decay": "1"}, TypeError, "real number"),
        ({"uniform_attention": 1}, TypeError, "bool"),
    ],
)
def test_train_separation_rejects_bad_options(kw, exc, words):
    with pytest.raises(exc, match=words):
        train_separation(CFG, TC, MARKER, progress=False, cache=False, **kw)


def test_position_weight_decay_needs_a_trainable_table():
    cfg = dataclasses.replace(CFG, position="rope")
    with pytest.raises(ValueError, match="trainable position table"):
        train_separation(cfg, dataclasses.replace(TC, snapshot_every=0), MARKER, position_weight_decay=1.0, progress=False, cache=False)


def test_threads_are_restored():
    torch.set_num_threads(1)
    train_separation(CFG, dataclasses.replace(TC, steps=2), MARKER, threads=2, progress=False, cache=False)
    assert torch.get_num_threads() == 1


# --------------------------------------------------------------------------- settings, roster, table, plots


def test_settings_follow_the_profile(monkeypatch):
    small, full = separation_settings("small"), separation_settings("full")
    assert small.pretrained is None and full.pretrained == "bert-base-uncased"
    assert full.steps > small.steps and full.d_model > small.d_model
    assert set(full.finetune_corpora) == {"sst2", "imdb"}
    monkeypatch.setenv("POSGEO_PROFILE", "full")
    assert separation_settings().profile == "full"
    with pytest.raises(ValueError, match="unknown profile"):
        separation_settings("huge")
    with pytest.raises(ValueError, match="finetune_max_length"):
        dataclasses.replace(small, finetune_corpora=("sst2", "imdb"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.steps = 1  # type: ignore[misc]


def _tiny_settings() -> SeparationSettings:
    return dataclasses.replace(
        separation_settings("small"), seq_len=6, vocab_size=12, n_filler=3, d_model=8, n_heads=2, d_ff=16,
        steps=4, batch_size=8, snapshot_every=2, text_seq_len=3, top_k=3,
    )


def test_roster_flags_the_conditions_and_adds_text_runs():
    text = Corpus(name="toy", split="train", sequences=SEQS, labels=None, vocab_size=10, description="toy")
    ex = separation_experiments(_tiny_settings(), text=text)
    assert list(ex)[:4] == ["synthetic MLM", "ring MLM (shift-invariant)", "first marker", "toy MLM"]
    assert "(b) toy shuffled" in ex and len(ex) == 9
    holds = {name for name, e in ex.items() if e.conditions_hold}
    assert holds == {"synthetic MLM", "ring MLM (shift-invariant)", "toy MLM"}
    assert ex["(c) first marker, uniform attn"].uniform_attention
    assert not ex["(a) bag of tokens"].order_sensitive and ex["(a) bag of tokens"].nonstationary
    with pytest.raises(TypeError, match="SeparationSettings"):
        separation_experiments("small")  # type: ignore[arg-type]


def test_run_and_tabulate_a_tiny_roster():
    s = _tiny_settings()
    ex = {k: v for k, v in separation_experiments(s).items() if k in ("first marker", "(c) first marker, uniform attn")}
    runs = run_separation_experiments(ex, s, position_weight_decay=1.0, progress=False, cache=False)
    table = separation_table(runs, ex)
    assert list(table.index) == list(ex)
    assert table.loc["(c) first marker, uniform attn", "(iii) attention"] == "uniform"
    assert (table["final min"] > 0).all() and (table["lowest min"] <= table["final min"]).all()
    assert (table["lowest min"] <= table["late min"]).all()
    assert table["accuracy"].between(0, 1).all()
    with pytest.raises(TypeError, match="SeparationExperiment"):
        run_separation_experiments({"x": MARKER}, s, progress=False, cache=False)  # type: ignore[dict-item]


def test_plots_return_altair_charts_and_reject_empty_input():
    rng = np.random.default_rng(0)
    snaps = {step: rng.normal(size=(6, 3)) / (1 + step) for step in (0, 5, 10, 15, 20)}
    tr = separation_trajectory(snaps)
    spec = plot_separation_trajectories({"a": tr, "b": tr}, dashed=["b"]).to_dict()
    assert len(spec["concat"]) == 2 and spec["resolve"]["scale"]["color"] == "shared"
    line, points = spec["concat"][0]["layer"]
    assert line["mark"]["type"] == "line" and points["mark"]["type"] == "point" and "tooltip" in points["encoding"]
    assert line["encoding"]["y"]["field"] == "min_dist" and line["encoding"]["y"]["scale"]["type"] == "log"
    assert spec["concat"][1]["layer"][0]["encoding"]["y"]["field"] == "normalised"
    assert line["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0], [6, 3]]  # "b" dashed
    legend_pick = [p for p in spec["params"] if p.get("bind") == "legend"]
    assert len(legend_pick) == 1 and len(legend_pick[0]["views"]) == 2  # one legend toggles both panels
    rows = spec["datasets"][spec["data"]["name"]]  # the panels share one data set
    assert {r["run"] for r in rows} == {"a", "b"} and len(rows) == 10
    assert rows[0]["min_dist"] == pytest.approx(tr["min_dist"].iloc[0])

    spec2 = plot_distance_distributions({"a": snaps, "b": snaps, "c": snaps, "d": snaps}, n_checkpoints=3).to_dict()
    assert [layer["mark"]["type"] for layer in spec2["layer"]] == ["rule", "bar", "tick"]
    boxes = spec2["datasets"][spec2["data"]["name"]]
    assert len(boxes) == 12 and sorted({b["step"] for b in boxes}) == [0, 10, 20]
    first = next(b for b in boxes if b["run"] == "a" and b["step"] == 0)
    assert first["min"] == pytest.approx(separation_trajectory({0: snaps[0]})["min_dist"].iloc[0]) and first["pairs"] == 15
    assert spec2["layer"][0]["encoding"]["y"]["scale"]["type"] == "log" and "tooltip" in spec2["layer"][0]["encoding"]
    with pytest.raises(ValueError, match="empty"):
        plot_separation_trajectories({})
    with pytest.raises(ValueError, match="lacks columns"):
        plot_separation_trajectories({"a": tr[["step"]]})
    with pytest.raises(ValueError, match="n_checkpoints"):
        plot_distance_distributions({"a": snaps}, n_checkpoints=0)

    spec3 = plot_row_drift(snaps, seen=3).to_dict()
    points, rule = spec3["layer"]
    assert points["mark"]["type"] == "point" and rule["mark"]["type"] == "rule"
    drift = spec3["datasets"][points["data"]["name"]]
    assert len(drift) == 6 and [d["rows"] for d in drift].count("reached by the inputs (i < 3)") == 3
    expected = np.linalg.norm(snaps[20][0] - snaps[0][0]) / np.linalg.norm(snaps[0][0])
    assert drift[0]["relative change"] == pytest.approx(expected)
    assert spec3["datasets"][rule["data"]["name"]][0]["line"].startswith("reference")
    assert "layer" in plot_row_drift(snaps).to_dict()
    with pytest.raises(ValueError, match="at least two"):
        plot_row_drift({0: snaps[0]})


# --------------------------------------------------------------------------- fine-tuning


def test_finetune_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        finetune_position_table(["a", "b"], [0, 1, 1], progress=False, cache=False)
    with pytest.raises(ValueError, match="two classes"):
        finetune_position_table(["a", "b"], [1, 1], progress=False, cache=False)
    with pytest.raises(TypeError, match="sequence of strings"):
        finetune_position_table("ab", [0, 1], progress=False, cache=False)
    with pytest.raises(ValueError, match="both eval_texts and eval_labels"):
        finetune_position_table(["a", "b"], [0, 1], eval_texts=["c"], progress=False, cache=False)
    with pytest.raises(ValueError, match="max_length"):
        finetune_position_table(["a", "b"], [0, 1], max_length=2, progress=False, cache=False)


def test_finetune_moves_only_the_rows_it_sees():  # about 10 s (loads MiniLM): not marked slow
    from posgeo import learned_position_table, load_pretrained

    before = learned_position_table(load_pretrained())
    texts = ["a truly wonderful film", "dull and lifeless", "great fun", "a total mess of a movie"] * 3
    labels = [1, 0, 1, 0] * 3
    res = finetune_position_table(
        texts, labels, eval_texts=texts[:4], eval_labels=labels[:4], steps=3, batch_size=4, lr=1e-3,
        weight_decay=0.0, max_length=8, snapshot_every=1, device="cpu", progress=False, cache=False,
    )
    assert isinstance(res, FinetuneResult) and sorted(res.snapshots) == [0, 1, 2, 3]
    seen = res.positions_seen
    assert 3 <= seen <= 8
    P0, P3 = res.snapshots[0], res.snapshots[3]
    assert np.array_equal(P0, before)
    assert np.array_equal(P3[seen:], P0[seen:])  # no gradient, no weight decay: untouched
    assert not np.allclose(P3[:seen], P0[:seen])
    assert np.array_equal(learned_position_table(load_pretrained()), before)  # shared model untouched
    drift = res.drift(rows=seen)
    assert drift["relative_change"].iloc[0] == 0.0 and drift["relative_change"].iloc[-1] > 0
    assert [s for s, _ in res.eval_accuracy] == [0, 3]


def _die_at_third_snapshot(monkeypatch):
    """Fault injection for the fine-tuning: its third position-table snapshot raises KeyboardInterrupt.

    Returns the list of ``start`` values ``optimize`` is called with (recorded from now on) and a
    function that removes the fault.
    """
    import posgeo
    from posgeo.experiments import separation as sep

    real_snapshot, real_optimize = posgeo.learned_position_table, sep.optimize
    calls, starts = [], []

    def snapshot_then_die(model):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_snapshot(model)

    def recording_optimize(*args, **kwargs):
        starts.append(kwargs["start"])
        return real_optimize(*args, **kwargs)

    monkeypatch.setattr(posgeo, "learned_position_table", snapshot_then_die)
    monkeypatch.setattr(sep, "optimize", recording_optimize)
    return starts, lambda: monkeypatch.setattr(posgeo, "learned_position_table", real_snapshot)


def test_finetune_interrupted_resumes_from_its_checkpoint_and_ends_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """Fault injection: the run is killed after its second checkpoint; run again, it continues."""
    texts = ["a truly wonderful film", "dull and lifeless", "great fun", "a total mess of a movie"] * 3
    labels = [1, 0, 1, 0] * 3
    kw = dict(eval_texts=texts[:4], eval_labels=labels[:4], steps=6, batch_size=4, lr=1e-3, max_length=8,
              snapshot_every=2, device="cpu", progress=False)
    whole = finetune_position_table(texts, labels, cache=False, **kw)  # the uninterrupted run
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    # snapshots at steps 0, 2, 4: die at step 4's, after step 2's checkpoint
    starts, restore = _die_at_third_snapshot(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        finetune_position_table(texts, labels, **kw)
    partial = list(tmp_path.glob("finetune-positions-*.partial.pkl"))
    assert len(partial) == 1 and not list(tmp_path.glob("finetune-positions-*[0-9a-f].pkl"))
    restore()
    resumed = finetune_position_table(texts, labels, **kw)
    assert starts == [0, 2]  # the second run took only steps 3-6
    assert sorted(resumed.snapshots) == sorted(whole.snapshots) == [0, 2, 4, 6]
    for step in whole.snapshots:
        assert np.array_equal(resumed.snapshots[step], whole.snapshots[step])
    assert resumed.history == whole.history and resumed.eval_accuracy == whole.eval_accuracy
    assert resumed.positions_seen == whole.positions_seen
    assert not list(tmp_path.glob("*.partial.pkl"))  # the saved state is gone once the result is stored
    assert finetune_position_table(texts, labels, **kw).history == whole.history  # now from the cache
    assert starts == [0, 2]


def test_finetune_ignores_a_saved_state_it_did_not_write(tmp_path, monkeypatch):
    import pickle

    texts, labels = ["good", "bad", "fine film", "poor film"] * 2, [1, 0, 1, 0] * 2
    kw = dict(steps=2, batch_size=2, max_length=6, snapshot_every=1, device="cpu", progress=False)
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    starts, restore = _die_at_third_snapshot(monkeypatch)  # the snapshot of step 2, after step 1's checkpoint
    with pytest.raises(KeyboardInterrupt):
        finetune_position_table(texts, labels, **kw)
    (partial,) = tmp_path.glob("*.partial.pkl")
    partial.write_bytes(pickle.dumps({"done": 1}))  # e.g. saved by another version of the function
    restore()
    res = finetune_position_table(texts, labels, **kw)
    assert starts == [0, 0] and sorted(res.snapshots) == [0, 1, 2]


# --------------------------------------------------------------------------- runs over seeds


def test_settings_have_five_seeds_and_seed_zero_keeps_the_single_seed_config():
    for profile in ("small", "full"):
        s = separation_settings(profile)
        assert s.seeds == (0, 1, 2, 3, 4)
        assert s.train_config() == s.train_config(seed=0)  # the cache key of the single-seed runs
        assert s.train_config(seed=3).seed == 3
        assert dataclasses.replace(s.train_config(seed=3), seed=0) == s.train_config()
    assert "seeds" in separation_settings("small").table().index


@pytest.mark.parametrize("seeds", [(), (0, 0), (-1,), (0.5,), [0, 1], (True,)])
def test_settings_reject_bad_seeds(seeds):
    with pytest.raises(ValueError, match="seeds"):
        dataclasses.replace(separation_settings("small"), seeds=seeds)


def test_bad_seed_is_rejected_before_training():
    s = _tiny_settings()
    ex = {k: v for k, v in separation_experiments(s).items() if k == "first marker"}
    with pytest.raises(ValueError, match="seed"):
        run_separation_experiments(ex, s, seed=-1, progress=False, cache=False)
    with pytest.raises(ValueError, match="seeds"):
        run_separation_seeds(ex, s, seeds=(1, 1), progress=False, cache=False)


def test_runs_over_seeds_differ_by_seed_and_repeat_under_a_seed():
    s = _tiny_settings()
    ex = {k: v for k, v in separation_experiments(s).items() if k in ("synthetic MLM", "(b) i.i.d. MLM")}
    runs = run_separation_seeds(ex, s, seeds=(0, 1), position_weight_decay=1.0, progress=False, cache=False)
    assert list(runs) == [0, 1] and all(list(r) == list(ex) for r in runs.values())
    for name in ex:
        last = max(runs[0][name].snapshots)
        t0, t1 = runs[0][name].snapshots[last], runs[1][name].snapshots[last]
        assert not np.allclose(t0, t1), name  # another seed: another initialisation and other batches
        assert not np.allclose(runs[0][name].snapshots[0], runs[1][name].snapshots[0]), name
    again = run_separation_experiments(ex, s, position_weight_decay=1.0, seed=1, progress=False, cache=False)
    for name in ex:
        for step, table in runs[1][name].snapshots.items():
            np.testing.assert_array_equal(table, again[name].snapshots[step])  # same seed: the same run
    default = run_separation_experiments(ex, s, position_weight_decay=1.0, progress=False, cache=False)
    for name in ex:
        np.testing.assert_array_equal(default[name].snapshots[0], runs[0][name].snapshots[0])  # default seed is 0

    tidy = separation_seed_table(runs, ex)
    assert list(tidy.columns[:2]) == ["run", "seed"]
    assert tidy[["run", "seed"]].to_numpy().tolist() == [[n, k] for n in ex for k in (0, 1)]
    assert tidy.loc[0, "late min"] == pytest.approx(separation_table(runs[0])["late min"].iloc[0])
    summary = pg.seed_summary(tidy, by="run", metrics=["late min", "late median"])
    assert list(summary.index) == list(ex) and (summary[("late min", "seeds")] == 2).all()


def test_seed_table_rejects_mismatched_rosters():
    s = _tiny_settings()
    ex = {k: v for k, v in separation_experiments(s).items() if k == "first marker"}
    run = run_separation_experiments(ex, s, progress=False, cache=False)["first marker"]
    with pytest.raises(ValueError, match="same roster"):
        separation_seed_table({0: {"a": run}, 1: {"b": run}})
    with pytest.raises(ValueError, match="at least one seed"):
        separation_seed_table({})


def test_contrasts_are_welch_differences_with_a_factor_and_paired_own_columns():
    t = pd.DataFrame({
        "run": ["a"] * 4 + ["b"] * 4, "seed": [0, 1, 2, 3] * 2,
        "late min": [0.30, 0.32, 0.31, 0.33, 0.10, 0.11, 0.09, 0.12],
        "min at init": [0.50, 0.52, 0.49, 0.51, 0.5, 0.5, 0.5, 0.5],
    })
    c = separation_contrasts(t, [
        ("a", "b", "late min", 1.0, "a > b"),
        ("a", "b", "late min", 3.0, "a > 3 b"),
        ("a", "@min at init", "late min", 0.5, "a < half its start"),
    ])
    expected = pg.seed_difference(t["late min"][:4], t["late min"][4:])
    assert c.loc["a > b", "difference"] == pytest.approx(expected.mean)
    assert c.loc["a > b", "low"] == pytest.approx(expected.low) and c.loc["a > b", "low"] > 0
    assert c.loc["a > 3 b", "B"] == pytest.approx(3 * 0.105)
    assert c.loc["a > 3 b", "low"] < 0 < c.loc["a > 3 b", "high"]  # 0.315 vs 0.315: not supported
    own = pg.seed_difference(t["late min"][:4], 0.5 * t["min at init"][:4], paired=True)
    assert c.loc["a < half its start", "high"] == pytest.approx(own.high)
    with pytest.raises(ValueError, match="no run"):
        separation_contrasts(t, [("a", "zzz", "late min", 1.0, "x")])
    with pytest.raises(ValueError, match="no metric"):
        separation_contrasts(t, [("a", "b", "nope", 1.0, "x")])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        separation_contrasts(t[t["seed"] == 0], [("a", "b", "late min", 1.0, "x")])
