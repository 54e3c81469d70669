"""Tests for book/_ch11.py, the helper of the chapter on position without positional encodings (P2)."""

from __future__ import annotations

import hashlib
import math
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import _ch11 as ch
import posgeo as pg
from posgeo.experiments.papers import P2_MAX_LEN, P2_REPORTED

TINY = SimpleNamespace(**(ch.SMALL | dict(
    d_model=16, n_heads=2, d_ff=32, n_layers=1, steps=5, batch_size=8, n_train=64, n_test=32, seeds=(0, 1),
    init_seeds=(0,), sweep_layers=(1, 2), sweep_widths=(8, 16), init_means=(0.0, 4.0), init_stds=(0.002, 0.2), ablation_steps=2, probe_steps=20,
    probe_hidden=8)))


@pytest.fixture(autouse=True)
def _own_cache(private_cache):
    """Every run of these tests is cached in an empty directory of its own."""
    return private_cache


def tiny_model(*, causal=True, max_len=40, **kw):
    cfg = ch.model_config(TINY, max_len, **kw)
    return pg.Transformer(pg.TransformerConfig(**{**cfg.to_dict(), "causal": causal}), seed=0)


# ----------------------------------------------------------------------------- the tasks
FORMATS = {  # an independent restatement of the formats: prompt and answer
    "addition": (r"(0|[1-9]\d*)\+(0|[1-9]\d*)=", r"0|[1-9]\d*"),
    "reversal": (r"rev\(\d+\)=", r"\d+"),
    "indexing": (r"wherex\(\d+,\d\)=", r"\d+"),
    "sorting": (r"sort\(\d+,\d+\)=", r"\d+"),
}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), task=st.sampled_from(ch.TASKS))
def test_every_sample_is_well_formed_and_correct(seed, task):
    for prompt, answer in ch.make_samples(task, 50, seed=seed):
        assert re.fullmatch(FORMATS[task][0], prompt) and re.fullmatch(FORMATS[task][1], answer)
        assert len(prompt) <= P2_MAX_LEN[task]
        assert answer == ch.correct_answer(prompt)
        if task == "sorting":
            src, tgt = prompt[5:-2].split(",")
            assert len(set(src)) == len(src) and sorted(src) == sorted(tgt)


def test_p2_examples():
    assert ch.correct_answer("123+456=") == "579" and ch.correct_answer("rev(1234)=") == "4321"
    assert ch.correct_answer("wherex(134504392,4)=") == "2" and len("wherex(134504392,4)=") == P2_MAX_LEN["indexing"]
    assert ch.correct_answer("sort(3142,4213)=") == "2310"


@pytest.mark.parametrize("task", ch.TASKS)
def test_samples_are_seeded_and_cover_the_lengths(task):
    assert ch.make_samples(task, 30, seed=7) == ch.make_samples(task, 30, seed=7) != ch.make_samples(task, 30, seed=8)
    lengths = {len(p) for p, _ in ch.make_samples(task, 2000, seed=0)}
    slope, off, lo, _ = ch._FORMAT[task]
    assert lengths == {slope * s + off for s in range(lo, 40) if slope * s + off <= P2_MAX_LEN[task]}
    narrow = ch.make_samples(task, 200, min_len=min(lengths) + 2, max_len=min(lengths) + 4, seed=1)
    assert all(min(lengths) + 2 <= len(p) <= min(lengths) + 4 for p, _ in narrow)


def test_sorting_is_capped_at_ten_distinct_digits():
    assert max(len(p) for p, _ in ch.make_samples("sorting", 300, max_len=100, seed=0)) == 28


def test_encode_and_decode_round_trip():
    ids = ch.encode("rev(12)=") + [ch.EOS, ch.PAD]
    assert ids[:8] == [20, 17, 23, 14, 3, 4, 15, 13] and len(ch.TOKENS) == 26
    assert ch.decode(ids) == "rev(12)=" and ch.decode(torch.tensor([ch.PAD, 2, ch.EOS, 3])) == "0"


@pytest.mark.parametrize("task", ch.TASKS)
def test_p2task_batches_target_only_the_answer(task):
    pool = ch.P2Task(task, n_samples=40, seed=3)
    b = pool.batch()
    assert b.kind == "lm" and b.tokens.shape == (40, pool.seq_len) == b.targets.shape
    for row, (prompt, answer) in enumerate(pool.samples):
        ids = ch.encode(prompt) + ch.encode(answer) + [ch.EOS]
        assert b.tokens[row, :len(ids)].tolist() == ids and (b.tokens[row, len(ids):] == ch.PAD).all()
        assert b.attention_mask[row].tolist() == [True] * len(ids) + [False] * (pool.seq_len - len(ids))
        # position i predicts token i + 1; only the answer tokens and <eos> are predicted
        expected = [pg.IGNORE_INDEX] * (len(prompt) - 1) + ids[len(prompt):] + [pg.IGNORE_INDEX] * (pool.seq_len - len(ids) + 1)
        assert b.targets[row].tolist() == expected
        assert ch.decode([t for t in expected if t != pg.IGNORE_INDEX]) == answer


def test_p2task_sample_is_seeded_and_draws_pool_rows():
    pool = ch.P2Task("sorting", n_samples=30, seed=0)
    a, b = pool.sample(16, torch.Generator().manual_seed(5)), pool.sample(16, torch.Generator().manual_seed(5))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.targets, b.targets)
    rows = {tuple(r) for r in pool.tokens.tolist()}
    assert all(tuple(r) in rows for r in a.tokens.tolist())


@settings(max_examples=25, deadline=None)
@given(task=st.sampled_from(ch.TASKS), extra=st.integers(0, 12), seed=st.integers(0, 1000))
def test_seq_len_bounds_every_encoding_and_depends_on_the_lengths_only(task, extra, seed):
    slope, off, lo, _ = ch._FORMAT[task]
    pool = ch.P2Task(task, n_samples=30, max_len=slope * lo + off + extra, seed=seed)
    assert max(len(p) + len(a) + 1 for p, a in pool.samples) <= pool.seq_len
    assert pool.seq_len == ch.P2Task(task, n_samples=5, max_len=slope * lo + off + extra, seed=seed + 1).seq_len


def test_seq_len_is_attained_at_p2s_lengths():
    assert {t: ch.P2Task(t, n_samples=1).seq_len for t in ch.TASKS} == {"addition": 17, "reversal": 39, "indexing": 22, "sorting": 24}
    assert ch.P2Task("reversal", n_samples=1, min_len=22, max_len=22).seq_len == 39
    toks = ch.analysis_tokens("reversal", 6, seed=0)
    assert toks.shape == (6, 39) and (toks != ch.PAD).all()


# ----------------------------------------------------------------------------- training and accuracy
def test_p2task_trains_and_exact_match_equals_greedy_decoding():
    pool = ch.P2Task("indexing", n_samples=200, max_len=13, seed=0)  # one- or two-digit strings: answers 0 or 1
    cfg = ch.model_config(TINY, pool.seq_len)
    res = pg.train(cfg, pg.TrainConfig(steps=40, batch_size=32, lr=1e-2, device="cpu", log_every=5), pool,
                   progress=False, cache=False)
    assert res.final("loss") < res.history[0]["loss"]
    model = res.model()
    exact, token = ch.accuracy(model, pool)
    greedy = []
    with torch.no_grad():  # greedy decoding, token by token
        for prompt, _ in pool.samples:
            ids = ch.encode(prompt)
            while len(ids) < pool.seq_len:
                nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
                if nxt == ch.EOS:
                    break
                ids.append(nxt)
            greedy.append(ch.decode(ids[len(prompt):]))
    assert exact == pytest.approx(np.mean([g == a for g, (_, a) in zip(greedy, pool.samples)]))
    assert 0.0 <= exact <= token <= 1.0


def test_constant_answer_is_the_share_of_the_most_common_answer():
    pool, test = ch.P2Task("indexing", n_samples=64, seed=0), ch.P2Task("indexing", n_samples=32, seed=1000)
    common = pd.Series([a for _, a in pool.samples]).value_counts().index[0]
    assert ch.constant_answer(pool, test) == pytest.approx(np.mean([a == common for _, a in test.samples]))
    assert ch.constant_answer(pool) == pytest.approx(np.mean([a == common for _, a in pool.samples]))
    res = ch.train("indexing", TINY)
    row = ch.accuracy_row(res, "indexing", TINY)
    assert row["best constant answer"] == pytest.approx(ch.constant_answer(pool, test))
    assert 0.0 <= row["exact match"] <= row["token accuracy"] <= 1.0


def test_train_is_seeded_and_the_seed_changes_the_run():
    a, b, c = ch.train("sorting", TINY), ch.train("sorting", TINY), ch.train("sorting", TINY, seed=1)
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    assert a.final("loss") != c.final("loss")
    assert a.model_config.position == "none" and a.model_config.causal and a.train_config.log_every == 1


def test_a_new_width_keeps_the_head_dimension_and_the_mlp_ratio():
    small = ch.settings("small")
    cfg = ch.model_config(small, 30, d_model=128)
    assert (cfg.n_heads, cfg.d_ff, cfg.position, cfg.causal) == (8, 256, "none", True)
    full = ch.settings("full")
    n_full = pg.count_parameters(pg.Transformer(ch.model_config(full, 40)))
    assert abs(n_full / P2_REPORTED.n_params - 1) < 0.01  # P2's 10.6M
    assert full.sweep_layers == P2_REPORTED.sweep_layers and full.sweep_widths == P2_REPORTED.sweep_widths
    assert small.init_means == P2_REPORTED.init_means and small.init_stds == P2_REPORTED.init_stds


# ----------------------------------------------------------------------------- scores
def test_layer_scores_agree_with_the_library_and_known_patterns():
    model = tiny_model(n_layers=2)
    toks = ch.analysis_tokens("reversal", 6, seed=0)
    H = ch.hidden_states(model, toks)
    assert H.shape == (3, 6, 39, 16) and H.dtype == np.float64
    direct = [pg.adjacency_score(pg.cosine_similarity_matrix(h), include_diagonal=False, ties="half", progress=False) for h in H]
    assert ch.layer_scores(H).tolist() == pytest.approx(direct)
    prof = ch.profile(model, toks)
    assert prof.scores.tolist() == pytest.approx(direct) and prof.mean_similarity.shape == (3, 39, 39)
    X = np.random.default_rng(0).normal(size=(4, 20, 32))
    random_, ordered = ch.layer_scores(np.stack([X, np.cumsum(np.abs(X), axis=1)]))
    assert abs(random_ - 0.5) < 0.05 and ordered > 0.9


def test_chance_with_the_diagonal_matches_random_matrices_row_by_row():
    X = np.random.default_rng(0).normal(size=(4000, 12, 64))
    C = pg.cosine_similarity_matrix(X)
    K = np.arange(2, 13)  # 1-based rows with a pair
    rows = [np.mean([(C[:, r - 1, j] > C[:, r - 1, i]).mean() for i in range(r) for j in range(i + 1, r)]) for r in K]
    assert rows == pytest.approx(0.5 + 1.0 / K, abs=0.01)  # 1/2 + 1/K: the diagonal beats every other entry
    assert np.mean(0.5 + 1.0 / K) == pytest.approx(pg.adjacency_score(C, include_diagonal=True, progress=False), abs=0.005)


# ----------------------------------------------------------------------------- the causal average
def test_causal_means_follow_the_closed_form():
    n, d = 24, 4096
    e = np.random.default_rng(0).normal(size=(8, n, d))
    C = pg.cosine_similarity_matrix(np.cumsum(e, axis=1) / np.arange(1, n + 1)[:, None])
    k = np.arange(1, n + 1)
    np.testing.assert_allclose(C.mean(axis=0), np.sqrt(np.minimum.outer(k, k) / np.maximum.outer(k, k)), atol=0.02)
    decay = ch.cosine_by_offset(C)
    assert decay[0] == pytest.approx(1.0) and np.all(np.diff(decay) < 0)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(3, 40), r=st.floats(0.0, 50.0))
def test_the_closed_form_rows_increase_towards_the_diagonal(n, r):
    k = np.arange(1, n + 1, dtype=float)
    C = (r + 1 / np.maximum.outer(k, k)) / np.sqrt(np.outer(r + 1 / k, r + 1 / k))  # with a common mean, r = |m|^2 / (s^2 d)
    np.testing.assert_allclose(np.diag(C), 1.0)
    assert all(np.all(np.diff(C[i, :i + 1]) > 0) for i in range(1, n))
    assert pg.adjacency_score(C, **ch.SCORE) == 1.0


def test_attention_is_uniform_for_tiny_weights_and_the_hook_rebuilds_layer_one():
    toks = ch.random_tokens(3, 12, seed=0)
    assert ch.attention_to_uniform(tiny_model(init_std=1e-5), toks) < 1e-3
    model = tiny_model(init_std=0.5)
    assert ch.attention_to_uniform(model, toks) > 0.05
    H = ch.hidden_states(model, toks)
    A = torch.as_tensor(ch.first_attention_output(model, toks), dtype=torch.float32)
    with torch.no_grad():
        block = model.blocks[0]
        x = torch.as_tensor(H[0], dtype=torch.float32) + A
        np.testing.assert_allclose((x + block.mlp(block.ln2(x))).numpy(), H[1], atol=1e-5)  # h_1 = e + a + mlp


def test_averaging_table_puts_the_constructions_at_their_limits():
    model = tiny_model(d_model=64)
    t = ch.averaging_table(model, model, ch.random_tokens(32, 24, seed=1))
    assert t.loc["uniform mean of N(0, I)", "attention output"] > 0.95 and abs(t.loc["uniform mean of N(0, I)", "inputs"] - 0.5) < 0.05
    assert (t.loc[["uniform mean of N(0, I)", "uniform mean of token embeddings"], "attention TV to uniform"] == 0).all()


# ----------------------------------------------------------------------------- initialisation and sweeps
def test_with_embedding_init_changes_only_the_embeddings():
    model = tiny_model()
    new = ch.with_embedding_init(model, mean=8.0, std=0.002, seed=1)
    assert abs(float(new.tok.weight.detach().mean()) - 8.0) < 0.01 and abs(float(new.tok.weight.detach().std()) - 0.002) < 0.001
    for (name, p), (_, q) in zip(model.state_dict().items(), new.state_dict().items()):
        assert torch.equal(p, q) == (name != "tok.weight"), name


def test_small_embedding_std_gives_a_stronger_layer_one_pattern():
    toks = ch.analysis_tokens("indexing", 16, seed=0)
    base = pg.Transformer(ch.model_config(ch.settings("small"), 22, n_layers=1), seed=0)
    s = {std: ch.layer_scores(ch.hidden_states(ch.with_embedding_init(base, mean=0.0, std=std, seed=0), toks))[1]
         for std in (0.002, 0.2)}
    assert s[0.002] > 0.85 and s[0.2] < 0.65


def test_train_with_embedding_init_is_seeded_and_keyed_apart(private_cache):
    pool = ch.P2Task("indexing", n_samples=32, seed=0)
    cfg, tc = ch.model_config(TINY, pool.seq_len), pg.TrainConfig(steps=4, batch_size=8, device="cpu")
    a = ch.train_with_embedding_init(cfg, tc, pool, mean=4.0, std=0.02)
    b = ch.train_with_embedding_init(cfg, tc, pool, mean=4.0, std=0.02)
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    assert abs(float(a.model().tok.weight.detach().mean()) - 4.0) < 0.05
    plain = pg.train(cfg, tc, pool, progress=False)
    assert abs(float(plain.model().tok.weight.detach().mean())) < 0.05  # another cache entry: the default initialisation
    assert len(list(private_cache.glob("train-embinit-*.pkl"))) == 1 and len(list(private_cache.glob("train-*.pkl"))) == 2


def test_init_ablation_runs_are_per_seed_and_paired():
    toks = ch.analysis_tokens("indexing", 6, seed=0)
    runs = ch.init_ablation_runs(TINY, toks)
    assert runs[["mean", "std", "seed"]].values.tolist() == [[m, s, seed] for m in TINY.init_means for s in TINY.init_stds
                                                           for seed in TINY.seeds]
    trained = runs[runs["mean"] == 0.0]
    assert trained["layer 1 (trained)"].notna().all() and runs.loc[runs["mean"] == 4.0, "layer 1 (trained)"].isna().all()
    a, b = trained[trained.seed == 0], trained[trained.seed == 1]
    assert not np.allclose(a["layer 1"], b["layer 1"]) and not np.allclose(a["layer 1 (trained)"], b["layer 1 (trained)"])
    ratio = trained.pivot(index="seed", columns="std", values="update/embedding")
    assert (ratio[0.002] > ratio[0.2]).all()  # small embeddings: the update dominates


# ----------------------------------------------------------------------------- probes and the mask
def test_probe_features_leave_the_diagonal_out():
    H = np.random.default_rng(0).normal(size=(3, 6, 5))
    cos, var = ch.probe_features(H, "cosine"), ch.probe_features(H, "variance")
    assert cos.shape == (3, 6, 5) and var.shape == (3, 6, 1)
    np.testing.assert_allclose(cos[1, 2], np.delete(pg.cosine_similarity_matrix(H)[1, 2], 2))
    np.testing.assert_allclose(var[..., 0], H.var(axis=-1))


def test_probe_reads_informative_features_and_not_noise():
    rng = np.random.default_rng(0)
    k = np.arange(12.0)
    good = np.tile(np.stack([np.sqrt(k), np.log1p(k)], axis=-1), (40, 1, 1)) + 0.01 * rng.normal(size=(40, 12, 2))
    nrmse, r = ch.train_position_probe(good, hidden=16, steps=150, seed=0)
    assert nrmse < 0.15 and r > 0.98 and (nrmse, r) == ch.train_position_probe(good, hidden=16, steps=150, seed=0)
    nrmse, r = ch.train_position_probe(rng.normal(size=(40, 12, 6)), hidden=16, steps=60, seed=0)
    assert nrmse > 0.9 and abs(r) < 0.3  # early stopping: noise gives no better than the mean position


def test_without_the_mask_the_model_is_equivariant_and_scores_chance():
    # width 128: untrained, the causal layer-1 pattern needs width (at 64 it is about 0.53 here)
    model = pg.Transformer(ch.model_config(ch.settings("small"), 30, d_model=128), seed=0)
    df = ch.causal_contrast(model, ch.random_tokens(64, 30, seed=1))
    layers = [c for c in df.columns if c.startswith("layer")]
    assert (df.loc["no mask", layers] - 0.5).abs().max() < 0.02 and df.loc["causal mask", "layer 1"] > 0.6
    assert bool(df.loc["no mask", "equivariant"]) and not bool(df.loc["causal mask", "equivariant"])


def test_the_equivariance_check_catches_a_positional_signal():
    # fault injection: a learned position table breaks the symmetry even without the mask
    model = pg.Transformer(pg.TransformerConfig(**{**ch.model_config(TINY, 12).to_dict(), "position": "learned",
                                                   "init_std": 0.5}), seed=0)
    assert not ch.causal_contrast(model, ch.random_tokens(4, 12))["equivariant"].any()


# ----------------------------------------------------------------------------- charts
def _rows(spec):
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_charts_carry_their_data():
    prof = ch.profile(tiny_model(n_layers=2), ch.random_tokens(4, 10, seed=0))
    grid = ch.plot_similarity_grid({"a": prof, "b": prof}).to_dict()
    assert [p["title"].split(":")[0] for p in grid["concat"]][:2] == ["a, layer 0", "b, layer 0"]
    assert grid["concat"][0]["encoding"]["color"]["scale"] == {"domain": [-1.0, 1.0], "scheme": "blueorange"}
    runs = pd.DataFrame({"mean": [0.0] * 4 + [4.0] * 4, "std": [0.002, 0.002, 0.2, 0.2] * 2, "seed": [0, 1] * 4,
                         "layer 1": [0.9, 0.88, 0.5, 0.52, 0.91, 0.9, 0.45, 0.47]})
    rows = _rows(ch.plot_init_ablation(pg.seed_summary(runs, by=["mean", "std"], metrics="layer 1"), ["layer 1"]).to_dict())
    assert {r["series"] for r in rows} == {"layer 1, mean 0", "layer 1, mean 4", "chance"}
    row = next(r for r in rows if r["series"] == "layer 1, mean 4" and r["std"] == 0.2)
    assert row["score"] == pytest.approx(0.46) and row["low"] < 0.46 < row["high"]
    rows = _rows(ch.plot_offset_decay({"limit": np.linspace(1, 0, 8)}).to_dict())
    assert [r["cosine"] for r in rows][-1] == 0.0


# ----------------------------------------------------------------------------- the control task and the learned runs
def test_counting_samples_are_well_formed_correct_and_within_the_lengths():
    samples = ch.make_samples(ch.CONTROL, 3000, seed=0)
    for prompt, answer in samples:
        assert re.fullmatch(r"tot\(\d+,\d\)=", prompt) and re.fullmatch(r"[1-5]", answer)
        digits, x = prompt[4:-2].split(",")
        assert answer == ch.correct_answer(prompt) == str(digits.count(x))
    assert {len(p) for p, _ in samples} == set(range(9, ch.MAX_LEN[ch.CONTROL] + 1))
    assert ch.MAX_LEN[ch.CONTROL] == P2_MAX_LEN["indexing"] and ch.P2Task(ch.CONTROL, n_samples=1).seq_len == 22
    share = pd.Series([a for _, a in samples]).value_counts(normalize=True)
    assert share.index[0] == "1" and share.iloc[0] < 0.35  # the counts 1..5: no answer dominates
    assert ch.make_samples(ch.CONTROL, 30, seed=7) == ch.make_samples(ch.CONTROL, 30, seed=7) != ch.make_samples(ch.CONTROL, 30, seed=8)
    assert ch.correct_answer("tot(31415926,1)=") == "2" and ch.correct_answer("tot(0000,0)=") == "4"


@settings(max_examples=50, deadline=None)
@given(digits=st.lists(st.integers(0, 9), min_size=1, max_size=12), x=st.integers(0, 9), data=st.data())
def test_counting_needs_no_position(digits, x, data):
    """The control's answer is invariant to permuting the digits (and is the count, zero included)."""
    perm = data.draw(st.permutations(digits))
    prompt = f"tot({''.join(map(str, digits))},{x})="
    assert ch.correct_answer(prompt) == ch.correct_answer(f"tot({''.join(map(str, perm))},{x})=") == str(digits.count(x))


def test_the_tasks_and_the_token_ids_are_unchanged():
    assert ch.TASKS == ("addition", "reversal", "indexing", "sorting") and ch.LEARNED_TASKS == (*ch.TASKS, "counting")
    assert ch.TOKENS == ("<pad>", "<eos>", *"0123456789+=(),ehorstvwx")  # the chapter's stored outputs depend on the ids
    assert set("tot(0123456789,)=") <= set(ch.TOKENS)
    assert all(ch.MAX_LEN[t] == P2_MAX_LEN[t] for t in ch.TASKS)
    assert ch.make_samples("indexing", 3, seed=0) == [("wherex(23000186,6)=", "7"), ("wherex(569765,7)=", "3"),
                                                      ("wherex(92860,2)=", "1")]
    digests = {t: hashlib.sha256(repr(ch.make_samples(t, 500, seed=0)).encode()).hexdigest()[:16] for t in ch.TASKS}
    assert digests == {"addition": "08f613764508f836", "reversal": "70ba8395c4e2d0f7", "indexing": "322590d067122298",
                       "sorting": "1c7c1c4c2212d7ad"}  # the four tasks' samples as before the control was added


TINY_LEARNED = ch.learned_settings(tasks=("indexing", ch.CONTROL), seeds=(0, 1), d_model=16, n_heads=2, n_layers=1, d_ff=32,
                                   steps=12, batch_size=8, lr=3e-3, warmup=4, segment=2, n_train=64, n_test=40, curve_every=4)


def test_the_schedule_warms_up_then_decays_and_is_held_over_segments():
    s = ch.learned_settings(steps=1000, warmup=100, segment=50, lr=1e-3, min_lr=0.1)
    lr = [ch.learning_rate(s, t) for t in range(s.steps)]
    assert lr[0] == pytest.approx(1e-5) and lr[99] == pytest.approx(1e-3) and lr[-1] == pytest.approx(1e-4, rel=1e-4)
    assert np.all(np.diff(lr[:100]) > 0) and np.all(np.diff(lr[100:]) <= 0)
    seg = ch.segment_learning_rates(s)
    assert len(seg) == 20 and seg[0] == pytest.approx(ch.learning_rate(s, 25)) and seg[5] == pytest.approx(ch.learning_rate(s, 275))
    flat = ch.learned_settings(warmup=0, min_lr=1.0)
    assert set(ch.segment_learning_rates(flat)) == {flat.lr}


def test_clopper_pearson_matches_known_values():
    assert ch.clopper_pearson(0, 10) == (0.0, pytest.approx(0.3084971, abs=1e-6))
    low, high = ch.clopper_pearson(5, 10)
    assert (low, high) == (pytest.approx(0.1870860, abs=1e-6), pytest.approx(0.8129140, abs=1e-6))
    assert ch.clopper_pearson(10, 10)[1] == 1.0


def test_a_learned_run_at_a_constant_rate_is_pg_train_bit_for_bit():
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"warmup": 0, "min_lr": 1.0}))
    row, curve, model = ch.learned_run("indexing", 1, s)
    pool = ch.P2Task("indexing", n_samples=s.n_train, seed=1)
    tc = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, weight_decay=s.weight_decay, grad_clip=s.grad_clip,
                        seed=1, device="cpu", log_every=1)
    res = pg.train(ch.model_config(s, pool.seq_len), tc, pool, progress=False, cache=False)
    assert all(torch.equal(model.state_dict()[k], res.state_dict[k]) for k in res.state_dict)
    assert [c["step"] for c in curve] == [0, 4, 8, 12]
    assert curve[-1]["train loss"] == pytest.approx(np.mean([r["loss"] for r in res.history[8:12]]))
    test = ch.P2Task("indexing", n_samples=s.n_test, seed=ch.TEST_SEED)
    assert (row["exact match"], row["token accuracy"]) == ch.accuracy(res.model(), test)
    assert row["best constant answer"] == ch.constant_answer(pool, test)
    assert row["exact match low"] <= row["exact match"] <= row["exact match high"]


def test_a_learned_run_resumes_from_its_checkpoint_with_the_same_result(tmp_path):
    ckpt = tmp_path / "run.pt"
    calls = []

    def stop_once():  # interrupt after the first checkpoint (step 4), as a killed command would
        calls.append(1)
        return len(calls) == 2

    with pytest.raises(SystemExit):
        ch.learned_run(ch.CONTROL, 0, TINY_LEARNED, checkpoint=ckpt, stop_if=stop_once)
    assert torch.load(ckpt, weights_only=False)["state"]["done"] == 4
    row, curve, model = ch.learned_run(ch.CONTROL, 0, TINY_LEARNED, checkpoint=ckpt)
    row2, curve2, model2 = ch.learned_run(ch.CONTROL, 0, TINY_LEARNED)
    assert all(torch.equal(model.state_dict()[k], model2.state_dict()[k]) for k in model.state_dict())
    pd.testing.assert_frame_equal(pd.DataFrame(curve), pd.DataFrame(curve2))  # step 0 has no train loss: NaN
    assert {k: v for k, v in row.items() if k != "wall seconds"} == {k: v for k, v in row2.items() if k != "wall seconds"}
    assert ch.settings_digest(TINY_LEARNED) != ch.settings_digest(ch.learned_settings(**(vars(TINY_LEARNED) | {"lr": 1e-3})))
    assert ch.settings_digest(TINY_LEARNED) == ch.settings_digest(ch.learned_settings(**(vars(TINY_LEARNED) | {"seeds": (5,)})))


def test_the_learned_command_writes_resumes_and_refuses_other_settings(tmp_path, monkeypatch):
    out = tmp_path / "learned.csv"
    calls = []
    real = ch.learned_run
    monkeypatch.setattr(ch, "learned_run", lambda task, seed, s, **kw: calls.append((task, seed)) or real(task, seed, s, **kw))
    one = ch.learned_settings(**(vars(TINY_LEARNED) | {"seeds": (0,)}))
    assert ch.learned_runs(out, one, log=None) == [("indexing", 0), (ch.CONTROL, 0)] == calls
    first = out.stat().st_mtime_ns
    assert ch.learned_runs(out, TINY_LEARNED, log=None) == [("indexing", 1), (ch.CONTROL, 1)]  # the finished runs are kept
    assert calls == [("indexing", 0), (ch.CONTROL, 0), ("indexing", 1), (ch.CONTROL, 1)]
    assert ch.learned_runs(out, TINY_LEARNED, log=None) == [] and len(calls) == 4
    table, curves = ch.read_learned(out)
    assert list(zip(table.task, table.seed)) == [("indexing", 0), ("indexing", 1), (ch.CONTROL, 0), (ch.CONTROL, 1)]
    assert set(table.settings) == set(curves.settings) == {ch.settings_digest(TINY_LEARNED)}
    assert len(curves) == 4 * 4 and sorted(set(curves.step)) == [0, 4, 8, 12]
    assert table[["exact match", "exact match low", "exact match high", "token accuracy", "best constant answer"]].apply(
        lambda c: c.between(0, 1)).all().all() and (table["wall seconds"] > 0).all() and (table["n test"] == 40).all()
    last = curves[curves.step == 12].set_index(["task", "seed"])["exact match"]
    assert table.set_index(["task", "seed"])["exact match"].equals(last)  # the curve ends at the table's number
    assert out.stat().st_mtime_ns > first and not list(tmp_path.glob(".*.tmp"))
    summary = ch.learned_summary(table)
    assert list(summary.index) == ["indexing", ch.CONTROL] and (summary.seeds == 2).all()
    assert summary.loc["indexing", "exact match"] == pytest.approx(table[table.task == "indexing"]["exact match"].mean())
    assert (summary["low"] <= summary["exact match"]).all() and (summary["exact match"] <= summary["high"]).all()
    kept = ch.learned_checkpoint("indexing", 0, ch.settings_digest(TINY_LEARNED)).parent
    assert {p.name for p in kept.glob("*.pt")} == {ch.learned_model_path(t, sd, ch.settings_digest(TINY_LEARNED)).name
                                                   for t, sd in zip(table.task, table.seed)}  # final weights, no checkpoint
    other = ch.learned_settings(**(vars(TINY_LEARNED) | {"steps": 8}))
    with pytest.raises(ValueError, match="other settings"):
        ch.learned_runs(out, other, log=None)
    assert len(calls) == 4 and ch.read_learned(out)[0].equals(table)


def test_the_learned_command_runs_two_processes_and_matches_one(tmp_path):
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"tasks": ("sorting",)}))
    ch.learned_runs(tmp_path / "two.csv", s, jobs=2, log=None)
    ch.learned_runs(tmp_path / "one.csv", s, jobs=1, log=None)
    (t2, c2), (t1, c1) = ch.read_learned(tmp_path / "two.csv"), ch.read_learned(tmp_path / "one.csv")
    pd.testing.assert_frame_equal(t2.drop(columns="wall seconds"), t1.drop(columns="wall seconds"))
    pd.testing.assert_frame_equal(c2, c1)


def test_a_run_stopped_at_its_deadline_is_not_recorded_and_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"tasks": (ch.CONTROL,), "seeds": (0,)}))
    asked = []

    def past(deadline):  # the deadline passes after the run's first checkpoint (step 4): asked at the start, then per segment
        asked.append(deadline)
        return deadline is not None and len(asked) > 3

    monkeypatch.setattr(ch, "_past", past)
    out = tmp_path / "learned.csv"
    assert ch.learned_runs(out, s, log=None, deadline=1.0) == [(ch.CONTROL, 0)]
    assert not out.exists() and torch.load(ch.learned_checkpoint(ch.CONTROL, 0, ch.settings_digest(s)),
                                           weights_only=False)["state"]["done"] == 4
    assert ch.learned_runs(out, s, log=None, deadline=1.0) == [(ch.CONTROL, 0)] and not out.exists()  # past it: not started
    ch.learned_runs(out, s, log=None)  # no deadline: resumed from step 4
    row, curve, _ = ch.learned_run(ch.CONTROL, 0, s)
    table, curves = ch.read_learned(out)
    assert table.drop(columns="wall seconds").iloc[0].to_dict() == pytest.approx(
        {k: v for k, v in row.items() if k != "wall seconds"}, nan_ok=True)
    pd.testing.assert_frame_equal(curves, pd.DataFrame(curve), check_dtype=False)


def test_the_full_profile_plans_p2s_scale_and_its_sweep_without_repeating_a_run(tmp_path):
    plans = ch.full_plans(tmp_path)
    main = dict(plans)[tmp_path / "ch11_full.csv"]
    n_main = pg.count_parameters(pg.Transformer(ch.model_config(main, ch.MAX_LEN["reversal"])))
    assert n_main == pytest.approx(P2_REPORTED.n_params, rel=0.02)  # P2's decoder
    assert set(main.tasks) == set(ch.LEARNED_TASKS) and len(main.seeds) == 5
    sweep = {(s.n_layers, s.d_model): s for out, s in plans if out.parent.name == "ch11_full_sweep"}
    grid = {(L, W) for L in ch.FULL_SWEEP["layers"] for W in ch.FULL_SWEEP["widths"]}
    assert set(sweep) == grid - {(main.n_layers, main.d_model)}  # that setting is the main file's addition run
    assert all(s.d_model // s.n_heads == 64 and s.d_ff == 4 * s.d_model for s in sweep.values())
    assert len({ch.settings_digest(s) for _, s in plans}) == len(plans) == len({out for out, _ in plans})
    assert plans[0][1].n_layers == max(ch.FULL_SWEEP["layers"])  # the longest runs start first


def test_the_full_profile_keeps_to_its_budget_and_a_second_call_resumes(tmp_path, monkeypatch):
    monkeypatch.setitem(ch.ANALYSIS, "n_prompts", 16)
    monkeypatch.setitem(ch.ANALYSIS, "n_random", 16)
    monkeypatch.setitem(ch.ANALYSIS, "probe_steps", 10)
    monkeypatch.setitem(ch.ANALYSIS, "test_n", 40)
    one = ch.learned_settings(**(vars(TINY_LEARNED) | {"tasks": (ch.CONTROL,), "seeds": (0,)}))
    plans = [(tmp_path / "a" / "one.csv", one), (tmp_path / "two.csv", ch.learned_settings(**(vars(one) | {"n_layers": 2})))]
    assert ch.full_profile(plans, jobs=1, device="cpu", budget=0, log=None) == (
        [(plans[0][0], ch.CONTROL, 0), (plans[1][0], ch.CONTROL, 0)], [])  # no time: nothing starts
    assert not any(out.exists() for out, _ in plans)
    trained, analysed = ch.full_profile(plans, jobs=1, device="cpu", budget=float("inf"), log=None)
    assert len(trained) == len(analysed) == 2
    for out, s in plans:
        assert len(ch.read_learned(out)[0]) == 1 and set(ch.read_learned_analysis(out, s)["task"]) == {ch.CONTROL}
    assert ch.full_profile(plans, jobs=1, device="cpu", budget=float("inf"), log=None) == ([], [])


def test_the_learned_settings_learn_every_task_on_the_cpu():
    s = ch.learned_settings()
    assert s.tasks == ch.LEARNED_TASKS and len(s.seeds) >= 3 and s.n_train == 20_000 and s.n_test >= 2000
    assert s.steps % s.segment == 0 and s.curve_every % s.segment == 0 and 8 <= s.steps // s.curve_every <= 12
    cfg = ch.model_config(s, 40)
    assert (cfg.position, cfg.causal) == ("none", True)


def test_learned_curves_chart_carries_the_mean_and_band_over_seeds():
    curves = pd.DataFrame({"task": ["a"] * 6 + ["b"] * 3, "seed": [0, 0, 0, 1, 1, 1, 0, 0, 0], "step": [0, 10, 20] * 3,
                           "train loss": [np.nan, 1.0, 0.5, np.nan, 1.2, 0.7, np.nan, 2.0, 1.0],
                           "exact match": [0.0, 0.4, 0.8, 0.0, 0.6, 0.9, 0.0, 0.1, 0.2]})
    rows = _rows(ch.plot_learned_curves(curves).to_dict())
    assert {r["series"] for r in rows} == {"a (mean of 2 seeds)", "b (seed 0)"}
    a20 = [r for r in rows if r["series"] == "a (mean of 2 seeds)" and r["step"] == 20]
    assert sorted(r["value"] for r in a20) == pytest.approx([0.6, 0.85])  # train loss and exact match
    assert all(r["low"] <= r["value"] <= r["high"] for r in a20)
    assert not any(r["step"] == 0 and r["value"] > 1 for r in rows)  # step 0 has no training loss: left out


def test_the_learned_file_holds_every_run_of_the_settings_and_what_they_learned():
    path = ch.Path(ch.__file__).parent / "data" / "ch11_learned.csv"
    if not path.exists():
        pytest.skip("book/data/ch11_learned.csv not written yet (make p2-learned)")
    s = ch.learned_settings()
    table, curves = ch.read_learned(path)
    assert set(table.settings) == set(curves.settings) == {ch.settings_digest(s)}
    assert list(zip(table.task, table.seed)) == [(t, k) for t in s.tasks for k in s.seeds]
    steps = list(range(0, s.steps + 1, s.curve_every))
    assert all(g.step.tolist() == steps for _, g in curves.groupby(["task", "seed"])) and len(curves) == len(table) * len(steps)
    assert (table["n test"] == s.n_test).all() and (table["exact match low"] <= table["exact match"]).all()
    learned = table[table.task != "sorting"]  # every seed of every other task far above its constant answer
    assert (learned["exact match low"] > learned["best constant answer"] + 0.25).all()
    sorting = ch.P2Task("sorting", n_samples=s.n_test, seed=ch.TEST_SEED)  # sorting: a random valid permutation's match
    guess = np.mean([1 / math.factorial(len(a)) for _, a in sorting.samples])
    assert table.loc[table.task == "sorting", "exact match"].sub(guess).abs().max() < 0.03


def test_the_longer_runs_file_holds_every_run_of_its_settings_with_curves_to_the_last_step():
    path = ch.DATA / "ch11_learned_long.csv"
    if not path.exists():
        pytest.skip("book/data/ch11_learned_long.csv not written yet (make p2-learned-long)")
    s = ch.learned_settings(**ch.LONG_RUNS)
    table, curves = ch.read_learned(path)
    assert set(table.settings) == set(curves.settings) == {ch.settings_digest(s)} != {ch.settings_digest(ch.learned_settings())}
    assert sorted(zip(table.task, table.seed)) == sorted((t, k) for t in s.tasks for k in s.seeds)
    steps = list(range(0, s.steps + 1, s.curve_every))
    assert all(g.step.tolist() == steps for _, g in curves.groupby(["task", "seed"]))
    last = curves[curves.step == s.steps].set_index(["task", "seed"])["exact match"]
    assert table.set_index(["task", "seed"])["exact match"].equals(last.loc[list(zip(table.task, table.seed))])


def test_the_shipped_full_profile_files_if_any_are_the_plans_runs():
    for out, s in ch.full_plans():
        if out.exists():
            table, curves = ch.read_learned(out)
            assert set(table.settings) == {ch.settings_digest(s)} and set(table.task) <= set(s.tasks)
            if ch.learned_analysis_path(out).exists():
                assert set(zip(*ch.read_learned_analysis(out, s)[["task", "seed"]].T.values)) <= set(zip(table.task, table.seed))


# ----------------------------------------------------------------------------- what the learned models use (issue 48)


@settings(max_examples=25, deadline=None)
@given(st.integers(5, 12), st.integers(0, 2**31 - 1))
def test_the_visible_set_features_do_not_see_the_order_of_the_earlier_positions(t, seed):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(3, 14, 6))
    P = H.copy()
    P[:, :t] = H[:, np.roll(np.arange(t), 1)]  # the positions before t permuted (none kept in place)
    k = 4
    top, top_p = ch.visible_set_feature(H, k), ch.visible_set_feature(P, k)
    assert np.allclose(top[:, t - k:], top_p[:, t - k:])  # every position from t on sees the same set
    cos, cos_p = ch.probe_features(H, "cosine"), ch.probe_features(P, "cosine")
    assert not np.allclose(cos[:, t:], cos_p[:, t:])  # while the cosine row, in positional order, changes
    # the k random earlier cosines: a permutation of the earlier positions only relabels what is drawn
    C = pg.cosine_similarity_matrix(H)
    drawn = ch.visible_set_feature(H, k, draw=0)
    for b, pos in ((0, k), (2, 13)):
        assert set(np.round(drawn[b, pos - k], 12)) <= set(np.round(C[b, pos, :pos], 12))


def test_the_layout_free_features_have_their_shapes_and_refuse_an_unknown_kind():
    H = np.random.default_rng(0).normal(size=(2, 9, 5))
    shapes = {kind: ch.layout_free_features(H, kind, 3).shape for kind in ch.PROBE_KINDS}
    assert shapes == {"hidden state": (2, 6, 5), "direction": (2, 6, 5), "norm": (2, 6, 1), "top-k earlier": (2, 6, 4),
                      "k random earlier": (2, 6, 3), "cosine row": (2, 6, 8)}
    assert np.allclose(np.linalg.norm(ch.layout_free_features(H, "direction", 3), axis=-1), 1)
    with pytest.raises(ValueError, match="unknown probe feature 'variance'; choose from hidden state"):
        ch.layout_free_features(H, "variance", 3)


def test_a_probe_reads_position_from_a_norm_that_shrinks_with_it_and_not_from_noise():
    rng = np.random.default_rng(0)
    t = np.arange(1, 21)
    H = rng.normal(size=(200, 20, 256)) / np.sqrt(t)[None, :, None]  # a causal mean's norm: 1 / sqrt(t), sharp at width 256
    nrmse, r = ch.train_position_probe(ch.layout_free_features(H, "norm", 4), hidden=16, steps=150, first=4)
    assert nrmse < 0.6 and r > 0.8
    nrmse, r = ch.train_position_probe(ch.layout_free_features(H, "direction", 4), hidden=16, steps=150, first=4)
    assert nrmse > 0.95  # the directions of i.i.d. vectors carry no position


def _tiny_learned_model(seed=0):
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"n_layers": 2}))
    return ch.learned_run("indexing", seed, s)[2].eval()


def test_the_norm_interventions_set_the_norms_they_claim_at_the_prompt_positions_only():
    model = _tiny_learned_model()
    tokens = ch.analysis_tokens("indexing", 8)
    where = ch.prompt_positions(tokens)
    assert where[:, 0].all() and not where.all(dim=1).any()  # the prompt, never its answer
    captured = {}
    for kind, part in (("equal norms after layer 1", "block"), ("equal attention norms in layer 1", "attention")):
        hook = ch.Intervention(kind, scale=3.0, where=where)
        handles = [model.blocks[0].attn.register_forward_hook(hook.on_attention), model.blocks[0].register_forward_hook(hook.on_block)]
        grab = (model.blocks[0] if part == "block" else model.blocks[0].attn).register_forward_hook(
            lambda m, a, o: captured.__setitem__(kind, o[0].detach()))  # registered last: sees the changed output
        try:
            with torch.no_grad():
                model(tokens)
        finally:
            for h in handles + [grab]:
                h.remove()
        norms = captured[kind].norm(dim=-1)
        assert torch.allclose(norms[where], torch.tensor(3.0), rtol=1e-5)
        assert not torch.allclose(norms[~where], torch.tensor(3.0), rtol=1e-3)  # the answer's positions untouched
    with pytest.raises(ValueError, match="unknown intervention 'shuffle'"):
        ch.Intervention("shuffle")


def test_the_other_prompt_intervention_keeps_the_norms_and_takes_the_next_prompts_directions():
    model = _tiny_learned_model()
    tokens = ch.analysis_tokens("indexing", 6)
    a = torch.as_tensor(ch.first_attention_output(model, tokens))
    hook = ch.Intervention("another prompt's prefix in layer 1", where=ch.prompt_positions(tokens))
    changed, _ = hook.on_attention(None, None, (a, None))
    where = ch.prompt_positions(tokens)
    assert torch.allclose(changed.norm(dim=-1), a.norm(dim=-1), rtol=1e-6)
    cos = torch.nn.functional.cosine_similarity(changed, a.roll(1, dims=0), dim=-1)
    assert torch.allclose(cos[where], torch.tensor(1.0, dtype=cos.dtype), atol=1e-6) and torch.equal(changed[~where], a[~where])


def test_an_intervention_at_no_position_is_the_plain_accuracy_and_leaves_no_hook_behind(monkeypatch):
    model = _tiny_learned_model()
    pool = ch.P2Task("indexing", n_samples=60, seed=ch.TEST_SEED)
    scales = ch.intervention_scales(model, ch.analysis_tokens("indexing", 16))
    assert scales["attention"] > 0 and scales["layer 1"] > 0
    plain = ch.accuracy(model, pool)
    for kind in ch.INTERVENTIONS[1:]:
        ch.intervened_accuracy(model, pool, kind, scales)
    assert ch.accuracy(model, pool) == plain  # the hooks are gone (that they act: the two tests above)
    monkeypatch.setattr(ch, "prompt_positions", lambda tokens: torch.zeros(tokens.shape, dtype=torch.bool))
    assert all(ch.intervened_accuracy(model, pool, kind, scales) == plain for kind in ch.INTERVENTIONS[1:])


def test_the_first_attention_reads_its_prefix_as_a_set():
    model = _tiny_learned_model()
    tokens = ch.analysis_tokens("indexing", 5)
    with torch.no_grad():
        x = model.blocks[0].ln1(model.tok(tokens))
        causal = torch.tril(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool))
        plain = model.blocks[0].attn(x, causal, None, None)[0]
    once = ch.prefix_permuted_attention(model.blocks[0].attn, x, seed=0)
    twice = ch.prefix_permuted_attention(model.blocks[0].attn, x, seed=1)
    assert torch.allclose(once, plain, atol=1e-6) and torch.allclose(twice, once, atol=1e-6)
    assert torch.allclose(torch.as_tensor(ch.first_attention_output(model, tokens)), plain.double(), atol=1e-6)


def test_the_log_position_kernel_is_the_cosine_of_causal_means_of_gaussian_vectors():
    K = ch.ou_kernel(12)
    k = np.arange(1, 13)
    assert np.allclose(K, np.exp(-np.abs(np.log(k)[:, None] - np.log(k)[None, :]) / 2)) and np.allclose(np.diag(K), 1)
    e = np.random.default_rng(0).normal(size=(400, 12, 256))
    h = np.cumsum(e, axis=1) / k[None, :, None]
    C = pg.cosine_similarity_matrix(h).mean(axis=0)
    r, rmse = ch.kernel_fit(C, K)
    assert r > 0.999 and rmse < 0.01  # the sampling error of a mean of 400 cosines at width 256 is about 0.003
    assert ch.kernel_fit(np.ones((12, 12)) * 0.5 + 0.1 * np.eye(12)[::-1], K)[1] > 0.2  # a flat matrix is far from it


def test_the_analysis_file_is_written_resumed_and_refused_under_another_analysis(tmp_path, monkeypatch):
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"seeds": (0,)}))
    monkeypatch.setitem(ch.ANALYSIS, "n_prompts", 16)
    monkeypatch.setitem(ch.ANALYSIS, "n_random", 16)
    monkeypatch.setitem(ch.ANALYSIS, "probe_steps", 10)
    monkeypatch.setitem(ch.ANALYSIS, "test_n", 40)
    out = tmp_path / "learned.csv"
    ch.learned_runs(out, s, log=None)
    assert ch.learned_analyses(out, s, log=None) == [("indexing", 0), (ch.CONTROL, 0)]
    frame = ch.read_learned_analysis(out, s)
    assert set(frame["measure"]) == {"adjacency score", "kernel r", "kernel rmse", "probe NRMSE", "probe R", "exact match",
                                     "token accuracy"}
    table = ch.read_learned(out)[0]
    none = frame[(frame.measure == "exact match") & (frame.feature == "none")].set_index("task")["value"]
    assert np.allclose(none.loc[list(table.task)].to_numpy(), table["exact match"].to_numpy())  # the same model and prompts
    assert ch.learned_analyses(out, s, log=None) == []  # resumed: nothing left
    monkeypatch.setitem(ch.ANALYSIS, "probe_steps", 11)  # another analysis: the loader and the command refuse the file
    with pytest.raises(ValueError, match="made by another command or version"):
        ch.read_learned_analysis(out, s)
    with pytest.raises(ValueError, match="holds another analysis"):
        ch.learned_analyses(out, s, log=None)
    monkeypatch.setattr(ch.pg, "__version__", "0.0.0")
    assert ch.analysis_digest(s) != frame["analysis"].iloc[0]


def test_learned_settings_refuse_an_unknown_name_and_init_std_sets_the_embedding_std():
    with pytest.raises(ValueError, match="unknown setting.*n_layer;"):
        ch.learned_settings(n_layer=6)
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"init_std": 0.5, "steps": 2, "segment": 2, "curve_every": 2}))
    assert ch.settings_digest(s) != ch.settings_digest(ch.learned_settings(**(vars(s) | {"init_std": 0.02})))
    model = ch.learned_run(ch.CONTROL, 0, s)[2]
    assert 0.4 < float(model.tok.weight.detach().std()) < 0.6  # two small steps move it little


def test_a_kept_model_is_loaded_not_trained_again(monkeypatch):
    s = ch.learned_settings(**(vars(TINY_LEARNED) | {"seeds": (0,)}))
    model, row = ch.learned_model("indexing", 0, s)
    assert row is not None and ch.learned_model_path("indexing", 0, ch.settings_digest(s)).exists()
    monkeypatch.setattr(ch, "learned_run", lambda *a, **k: pytest.fail("trained again"))
    again, none = ch.learned_model("indexing", 0, s)
    assert none is None and all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_the_random_permutation_level_is_the_mean_of_one_over_m_factorial():
    assert ch.random_permutation_level([("sort(1,1)=", "0"), ("sort(12,21)=", "10"), ("sort(123,312)=", "120")]) == \
        pytest.approx((1 + 1 / 2 + 1 / 6) / 3)
    samples = ch.make_samples("sorting", 3000, seed=3)  # a uniformly drawn permutation is right with probability 1/m!
    rng = np.random.default_rng(0)
    hits = [answer == "".join(map(str, rng.permutation(len(answer)).tolist())) for _, answer in samples]
    assert abs(np.mean(hits) - ch.random_permutation_level(samples)) < 3 * math.sqrt(0.25 / len(samples))


def test_the_analysis_views_pivot_summarise_and_pair_by_seed():
    rows = [{"task": t, "seed": s, "measure": "exact match", "input": "test prompts", "layer": -1, "feature": f,
             "value": v + 0.01 * s}
            for t in ("addition", "counting") for s in (0, 1, 2) for f, v in (("none", 0.9), ("equal norms after layer 1", 0.5))]
    frame = pd.DataFrame(rows)
    wide = ch.analysis_runs(frame, "exact match", by="feature")
    assert list(wide.columns) == ["task", "seed", "none", "equal norms after layer 1"] and len(wide) == 6
    summary = ch.summary_over_seeds(wide, ["none", "equal norms after layer 1"])
    assert list(summary.index) == ["addition", "counting"]
    assert summary.loc["addition", ("none", "mean")] == pytest.approx(0.91)
    drops = ch.paired_drops(wide, "none", ["equal norms after layer 1"])
    iv = drops["counting"]["equal norms after layer 1"]
    assert iv.mean == pytest.approx(-0.4) and iv.high - iv.low < 1e-9  # the same drop in every seed: no spread


@pytest.mark.parametrize("stem, changed", [("ch11_learned", {}), ("ch11_learned_deep", {"n_layers": 6}),
                                           ("ch11_learned_width64", {"d_model": 64, "n_heads": 4, "d_ff": 128}),
                                           ("ch11_learned_init_0.002", {"init_std": 0.002}),
                                           ("ch11_learned_init_0.2", {"init_std": 0.2})])
def test_the_shipped_analysis_covers_every_run_with_the_models_of_its_table(stem, changed):
    path = ch.DATA / f"{stem}.csv"
    if not ch.learned_analysis_path(path).exists():
        pytest.skip(f"{ch.learned_analysis_path(path).name} not written yet (make p2-learned, p2-learned-extra)")
    s = ch.learned_settings(**changed)
    table, _ = ch.read_learned(path)
    frame = ch.read_learned_analysis(path, s)  # the loader accepts it: this command, these settings, this version
    assert set(table["settings"]) == {ch.settings_digest(s)}
    assert set(zip(frame.task, frame.seed)) == set(zip(table.task, table.seed))
    none = ch.analysis_runs(frame, "exact match", by="feature").set_index(["task", "seed"])["none"]
    assert np.allclose(none.loc[list(zip(table.task, table.seed))].to_numpy(), table["exact match"].to_numpy(), atol=0.02)
    layers = frame[frame.measure == "adjacency score"]["layer"]
    assert set(layers) == set(range(s.n_layers + 1))
