"""Tests of the positional-separation chapter's helper (book/_ch05.py) and of the library's
separation statistics it relies on: analytic fixtures, properties, and the probe's mechanics."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import _ch05 as ch
import posgeo as pg
from posgeo import (
    MarginalSampler,
    Sequences,
    separation_stats,
    synthetic_marginals,
)


@pytest.fixture(autouse=True)
def _own_cache(private_cache):
    """Runs trained here are cached in a private directory, not the book's."""


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def tiny(**kw):
    """The small profile shrunk to seconds."""
    s = ch.settings("small")
    for k, v in {**dict(seq_len=6, vocab_size=12, n_filler=3, d_model=8, n_heads=2, d_ff=16, steps=4, batch_size=8,
                        snapshot_every=2, text_seq_len=3, top_k=3), **kw}.items():
        setattr(s, k, v)
    return s


# --------------------------------------------------------------------------- separation statistics (library)


@pytest.mark.parametrize("spacing", [0.25, 1.0, 4.0])  # exact in binary: ties break to (0, 1)
def test_points_on_a_line_have_min_distance_equal_to_spacing(spacing):
    P = spacing * np.arange(7.0)[:, None]
    s = separation_stats(P)
    assert s.min_dist == pytest.approx(spacing) and s.argmin == (0, 1)
    assert s.mean_dist == pytest.approx(spacing * 56 / 21)  # mean |i - j| over pairs of 0..6
    assert s.mean_norm == pytest.approx(spacing * 3.0)
    assert s.normalised == pytest.approx(1 / 3)


def test_duplicated_row_gives_zero_and_the_duplicate_pair():
    P = np.random.default_rng(0).normal(size=(6, 4))
    P[4] = P[1]
    s = separation_stats(P)
    assert s.min_dist == 0.0 and s.normalised == 0.0 and s.relative == 0.0 and s.argmin == (1, 4)


def test_nearly_coincident_rows_are_measured_accurately():
    P = np.array([[1e3, 1e3, 1e3], [1e3, 1e3, 1e3 + 1e-7], [0.0, 0.0, 0.0]])
    assert separation_stats(P).min_dist == pytest.approx(1e-7, rel=1e-3)


def test_argmin_is_the_closest_pair_for_a_random_table():
    P = np.random.default_rng(3).normal(size=(9, 3))
    D = np.linalg.norm(P[:, None] - P[None, :], axis=-1)
    np.fill_diagonal(D, np.inf)
    i, j = np.unravel_index(np.argmin(D), D.shape)
    s = separation_stats(P)
    assert s.argmin == (min(i, j), max(i, j)) and s.min_dist == pytest.approx(D.min())


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100.0), n=st.integers(2, 12))
def test_scaling_multiplies_distances_and_keeps_both_ratios(seed, scale, n):
    P = np.random.default_rng(seed).normal(size=(n, 5))
    a, b = separation_stats(P), separation_stats(scale * P)
    assert b.min_dist == pytest.approx(scale * a.min_dist, rel=1e-9)
    assert b.normalised == pytest.approx(a.normalised, rel=1e-9)
    assert b.relative == pytest.approx(a.relative, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(10.5, 50.0))
def test_a_common_offset_keeps_relative_but_lowers_normalised(seed, shift):
    P = np.random.default_rng(seed).normal(size=(8, 4))
    a, b = separation_stats(P), separation_stats(P + shift)
    assert b.min_dist == pytest.approx(a.min_dist, rel=1e-6) and b.relative == pytest.approx(a.relative, rel=1e-6)
    assert b.normalised < a.normalised


def test_marginal_sampler_follows_point_masses_and_is_seeded():
    mu = np.zeros((4, 5))
    mu[np.arange(4), [3, 1, 4, 0]] = 1.0
    assert MarginalSampler(mu)(6, 1).tolist() == [[3, 1, 4, 0]] * 6
    soft = MarginalSampler(synthetic_marginals(6, 12, nonstationarity=1.0))
    assert np.array_equal(soft(20, 7), soft(20, 7)) and not np.array_equal(soft(20, 7), soft(20, 8))
    assert MarginalSampler(np.full((3, 2), 0.5)).identical and not soft.identical


# --------------------------------------------------------------------------- the merge penalty and the probe


def test_weight_decay_splits_into_the_merge_penalty_and_the_centre():
    """½||P||² = (1/2n) Σ_{i<j} ||p_i - p_j||² + (n/2) ||mean row||², the identity the chapter shows."""
    for seed in range(5):
        P = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
        n = P.shape[0]
        pairs = sum(float((P[i] - P[j]).pow(2).sum()) for i in range(n) for j in range(i + 1, n)) / (2 * n)
        assert 0.5 * float(P.pow(2).sum()) == pytest.approx(pairs + n / 2 * float(P.mean(0).pow(2).sum()), rel=1e-12)


def test_decoupled_decay_shrinks_every_distance_by_one_minus_eta_lambda():
    """With no loss gradient, one AdamW step of the position group multiplies every pairwise distance by 1 - ηλ."""
    pos = torch.nn.Parameter(torch.randn(6, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    before = torch.pdist(pos.detach()).clone()
    opt = torch.optim.AdamW([{"params": [pos], "weight_decay": 10.0}], lr=3e-3)
    pos.grad = torch.zeros_like(pos)
    opt.step()
    assert torch.allclose(torch.pdist(pos.detach()), (1 - 3e-3 * 10.0) * before, rtol=1e-12)


def test_position_decay_shrinks_the_table_and_nothing_else():
    s = tiny(steps=40, lr=1e-2, snapshot_every=40)
    run = {"first marker": ch.runs(s)["first marker"]}
    free = ch.train(s, run, decay=0.0)["first marker"]
    decayed = ch.train(s, run, decay=20.0)["first marker"]
    assert np.linalg.norm(decayed.snapshots[40]) < 0.5 * np.linalg.norm(free.snapshots[40])
    assert float(decayed.state_dict["tok.weight"].norm()) > 0.5 * float(free.state_dict["tok.weight"].norm())


def test_uniform_attention_keeps_queries_and_keys_at_zero():
    s = tiny(steps=12)
    r = ch.runs(s)["(c) first marker, uniform attn"]
    res = ch.train(s, {"x": r})["x"]
    w = res.state_dict["blocks.0.attn.qkv.weight"]
    assert float(w[: 2 * s.d_model].abs().max()) == 0.0 and float(w[2 * s.d_model :].abs().max()) > 0
    out = res.model()(r.task.sample(3, torch.Generator().manual_seed(0)).tokens, return_attention=True)
    assert torch.allclose(out.attentions[0], torch.full_like(out.attentions[0], 1 / s.seq_len))


# --------------------------------------------------------------------------- tasks


def test_marginal_mlm_flags_exchangeable_corpora_as_order_insensitive():
    mu = synthetic_marginals(8, 16, nonstationarity=1.0)
    assert ch.marginal_mlm_task(mu).order_sensitive
    assert not ch.marginal_mlm_task(np.tile(mu.mean(0), (8, 1))).order_sensitive


def test_bag_of_tokens_labels_ignore_token_order():
    task = ch.BagOfTokensTask(synthetic_marginals(10, 16, nonstationarity=1.0))
    b = task.sample(256, torch.Generator().manual_seed(1))
    shuffled = b.tokens[:, torch.randperm(10, generator=torch.Generator().manual_seed(2))]
    assert torch.equal(((shuffled < 8).sum(1) > task.threshold).long(), b.targets)
    assert 0.3 < float(b.targets.float().mean()) < 0.7


def test_bag_threshold_for_fair_coins():
    assert ch.BagOfTokensTask(np.full((5, 2), 0.5)).threshold == 2  # 5 fair coins: P(count > 2) = 1/2


def _toy_corpus():
    seqs = Sequences.from_list([[4, 4, 1, 2, 9], [4, 1, 1, 4], [7, 4, 2], [3]], vocab_size=10)
    return pg.Corpus(name="toy", split="train", sequences=seqs, labels=None, vocab_size=10, description="toy")


def test_text_task_rows_are_remapped_sentence_beginnings():
    task = ch.text_mlm_task(_toy_corpus(), seq_len=3, top_k=3)  # 4 -> 0, 1 -> 1, 2 -> 2, else UNK 3
    drawn = {tuple(r) for r in task.sampler(200, 0).tolist()}
    assert drawn == {(0, 0, 1), (0, 1, 1), (3, 0, 2)} and task.vocab_size == 6


def test_shuffled_windows_keep_their_tokens_and_make_positions_alike():
    plain = ch.text_mlm_task(_toy_corpus(), seq_len=3, top_k=3)
    shuf = ch.text_mlm_task(_toy_corpus(), seq_len=3, top_k=3, shuffle=True)
    a, b = plain.sampler(4000, 5), shuf.sampler(4000, 5)  # same rows drawn, then shuffled
    assert all(sorted(x) == sorted(y) for x, y in zip(a.tolist(), b.tolist()))
    freq = np.stack([np.bincount(b[:, i], minlength=4) / 4000 for i in range(3)])
    assert np.allclose(freq, freq.mean(0), atol=0.03) and not np.allclose(a, b)
    assert plain.order_sensitive and not shuf.order_sensitive and plain.name != shuf.name


def test_roster_flags_the_conditions():
    roster = ch.runs(tiny(), text=_toy_corpus())
    assert len(roster) == 9 and "(b) toy shuffled" in roster
    assert {n for n, r in roster.items() if r.conditions_hold} == {"synthetic MLM", "ring MLM (shift-invariant)", "toy MLM"}
    assert not roster["(a) bag of tokens"].order_sensitive and roster["(a) bag of tokens"].nonstationary


# --------------------------------------------------------------------------- tables


def test_summary_and_contrasts():
    s = tiny()
    roster = {k: r for k, r in ch.runs(s).items() if k in ("synthetic MLM", "(b) i.i.d. MLM")}
    per_seed = []
    for seed in (0, 1):
        res = ch.train(s, roster, decay=1.0, seed=seed)
        t = ch.summary(res)
        assert (t["lowest min"] <= t["late min"]).all() and t["accuracy"].between(0, 1).all()
        per_seed.append(t.rename_axis("run").reset_index().assign(seed=seed))
    assert not np.allclose(*[p["late min"] for p in per_seed])  # another seed, another run
    table = pd.concat(per_seed, ignore_index=True)
    c = ch.contrasts(table, [("synthetic MLM", "(b) i.i.d. MLM", "late min", 2.0, "x")])
    x = table.loc[table["run"] == "synthetic MLM", "late min"].to_numpy()
    y = 2 * table.loc[table["run"] == "(b) i.i.d. MLM", "late min"].to_numpy()
    expected = pg.seed_difference(x, y)
    assert c.loc["x", "difference"] == pytest.approx(expected.mean) and c.loc["x", "low"] == pytest.approx(expected.low)


def test_stored_seed_file_has_five_seeds_of_the_four_contrast_runs():
    t = pd.read_csv(ch.seeds_file(ch.settings("small")), comment="#")
    assert sorted(set(t["run"])) == sorted(ch.CONTRAST_RUNS) and sorted(set(t["seed"])) == [0, 1, 2, 3, 4]
    assert (t["late min"] > 0).all() and t["accuracy"].between(0, 1).all()
    assert ch.seeds_file(ch.settings("small")).read_text().startswith("# made by: cd book && ")


def test_plots_are_charts_of_the_data():
    rng = np.random.default_rng(0)
    snaps = {step: rng.normal(size=(6, 3)) / (1 + step) for step in (0, 5, 10, 15, 20)}
    tr = ch.trajectory(snaps)
    spec = ch.plot_trajectories({"a": tr, "b": tr}, dashed=["b"], log=("min_dist",)).to_dict()
    line = spec["concat"][0]["layer"][0]
    assert line["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0], [6, 3]]
    assert line["encoding"]["y"]["scale"]["type"] == "log"
    boxes = ch.plot_distances({"a": snaps}, n_checkpoints=3).to_dict()
    rows = boxes["datasets"][boxes["data"]["name"]]
    assert sorted(r["step"] for r in rows) == [0, 10, 20] and rows[0]["min"] == pytest.approx(tr["min_dist"].iloc[0])
    drift = ch.plot_row_drift(snaps, seen=3, rows=6).to_dict()
    points = drift["datasets"][drift["layer"][0]["data"]["name"]]
    assert points[0]["relative change"] == pytest.approx(np.linalg.norm(snaps[20][0] - snaps[0][0]) / np.linalg.norm(snaps[0][0]))


# --------------------------------------------------------------------------- fine-tuning


def test_finetune_moves_only_the_rows_it_sees():  # about 10 s (loads MiniLM)
    before = pg.learned_position_table(pg.load_pretrained())
    texts = ["a truly wonderful film", "dull and lifeless", "great fun", "a total mess of a movie"] * 3
    labels = np.array([1, 0, 1, 0] * 3)
    c = {"steps": 3, "batch_size": 4, "lr": 1e-3, "weight_decay": 0.0, "max_length": 8, "snapshot_every": 1,
         "seed": 0, "device": "cpu"}
    res = ch._finetune(texts, labels, texts[:4], labels[:4], None, c)
    seen = res.positions_seen
    assert sorted(res.snapshots) == [0, 1, 2, 3] and 3 <= seen <= 8
    P0, P3 = res.snapshots[0], res.snapshots[3]
    assert np.array_equal(P0, before) and np.array_equal(P3[seen:], P0[seen:])  # no gradient, no decay: untouched
    assert not np.allclose(P3[:seen], P0[:seen])
    assert np.array_equal(pg.learned_position_table(pg.load_pretrained()), before)  # the shared model is untouched
    assert res.drift(rows=seen)["relative_change"].iloc[-1] > 0 and [k for k, _ in res.eval_accuracy] == [0, 3]


@pytest.mark.skipif(not os.environ.get("POSGEO_DATA_DIR"), reason="needs POSGEO_DATA_DIR with sst2/*.parquet")
def test_sst2_task_on_real_data():
    corpus = pg.load_corpus("sst2", "validation", progress=False)
    task = ch.text_mlm_task(corpus, seq_len=12, top_k=300)
    draws = task.sampler(500, 0)
    assert draws.shape == (500, 12) and draws.max() <= 300  # no PAD: every kept sentence is long enough
    counts = np.bincount(corpus.sequences.tokens, minlength=corpus.vocab_size)
    assert (draws == 0).mean() > (draws == 299).mean()  # id 0 is the most frequent word piece
    assert int(np.argmax(counts)) == np.lexsort((np.arange(counts.size), -counts))[0]


def test_seed_table_makes_the_stored_files_columns():
    """The stored file is what seed_table writes: same runs, same columns (on a tiny setting)."""
    seqs = Sequences.from_list([[4, 4, 1, 2, 9], [4, 1, 1, 4], [7, 4, 2]], vocab_size=10)
    corpus = pg.Corpus(name="sst2", split="train", sequences=seqs, labels=None, vocab_size=10, description="toy")
    s = tiny(seeds=(0, 1))
    made = ch.seed_table(s, corpus)
    stored = pd.read_csv(ch.seeds_file(ch.settings("small")), comment="#")
    assert list(made.columns) == list(stored.columns) and sorted(set(made["run"])) == sorted(ch.CONTRAST_RUNS)
    assert sorted(set(made["seed"])) == [0, 1]


# ----------------------------------------------------------------------------- exercise 2's solution
@pytest.mark.slow
def test_exercise_2_solution_numbers():
    """The numbers the solution of exercise 2 quotes (a stronger pull, lambda = 30): computed
    here rather than in the chapter, whose budget its three runs of 500 steps would exceed.
    Quoted values compared within half their size plus 5%, the spread that training shows
    under other CPU kernel paths (as the chapter's tolerance metadata says)."""

    def close(x, quoted, rel=0.5):
        return abs(x - quoted) <= 0.05 * abs(quoted) + rel * abs(quoted)

    s = ch.settings("small")
    roster = ch.runs(s)
    iid10 = ch.summary(ch.train(s, {"(b) i.i.d. MLM": roster["(b) i.i.d. MLM"]}, decay=s.decay)).loc["(b) i.i.d. MLM", "late median"]
    strong = ch.summary(ch.train(s, {name: roster[name] for name in ["(b) i.i.d. MLM", "first marker"]}, decay=30.0))
    iid30 = strong.loc["(b) i.i.d. MLM", "late median"]
    assert close(iid10, 0.020, 0.3) and close(iid30, 0.010, 0.3) and 1.8 < iid10 / iid30 < 2.2
    fm = strong.loc["first marker"]
    assert close(fm["late median"], 0.073) and 5 < fm["late median"] / iid30 < 9
    assert close(fm["late min"], 0.0084) and close(strong.loc["(b) i.i.d. MLM", "late min"], 0.0056)
    assert close(fm["lowest min"], 0.0017, 1.0) and close(strong.loc["(b) i.i.d. MLM", "lowest min"], 0.0050)
    assert fm["lowest min"] < strong.loc["(b) i.i.d. MLM", "lowest min"] < fm["late min"]


# --------------------------------------------------------------------------- the penalty sweep
def _sweep_fixture(floor_slope=-0.5, ratio=3.0):
    """Four runs x 3 strengths x 3 seeds: controls on an exact power law, the task runs `ratio` times above."""
    rows = []
    for decay in (1.0, 10.0, 100.0):
        for seed, noise in enumerate((0.97, 1.0, 1.03)):
            floor = 0.05 * decay**floor_slope * noise
            for a, b in ch.SWEEP_CONTRASTS:
                rows += [{"run": a, "decay": decay, "seed": seed, "late median": ratio * floor},
                         {"run": b, "decay": decay, "seed": seed, "late median": floor}]
    return pd.DataFrame(rows)


def test_sweep_ratios_are_the_ratio_of_means_on_a_log_scale():
    r = ch.sweep_ratios(_sweep_fixture(ratio=3.0))
    assert len(r) == 3 * len(ch.SWEEP_CONTRASTS)
    assert np.allclose(r["ratio"], 3.0) and (r["low"] < 3.0).all() and (r["high"] > 3.0).all()
    one = ch.sweep_ratios(_sweep_fixture(ratio=1.0))
    assert ((one["low"] < 1) & (one["high"] > 1)).all()  # no contrast: every interval holds 1


@pytest.mark.parametrize("slope", [-0.5, -1.0])
def test_floor_slopes_recover_a_power_law(slope):
    fit = ch.floor_slopes(_sweep_fixture(floor_slope=slope))
    assert np.allclose(fit["mean"], slope) and set(fit.index) == set(ch.CONTRAST_RUNS)


def test_sweep_table_rejects_a_strength_that_is_not_positive():
    with pytest.raises(ValueError, match="positive"):
        ch.sweep_table(tiny(), None, decays=(0.0,))


def test_stored_sweep_has_every_strength_run_and_seed_and_agrees_with_the_seed_file():
    path = ch.sweep_file(ch.settings("small"))
    if not path.exists():
        pytest.skip("make p1-controls has not written ch05_sweep.csv")
    t = pd.read_csv(path, comment="#")
    assert (t.groupby(["decay", "run"]).size() == 5).all() and sorted(set(t["decay"])) == list(ch.SWEEP_DECAYS)
    assert sorted(set(t["run"])) == sorted(ch.CONTRAST_RUNS)
    # lambda = 10 is the probe: the same runs as the seed file (same code, same kernels)
    seeds = pd.read_csv(ch.seeds_file(ch.settings("small")), comment="#").set_index(["run", "seed"]).sort_index()
    ten = t[t["decay"] == 10.0].set_index(["run", "seed"]).sort_index()
    assert np.allclose(ten["late median"], seeds["late median"], rtol=1e-4)
    chart = ch.plot_sweep(t).to_dict()
    assert chart["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"
