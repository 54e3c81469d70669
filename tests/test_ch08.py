"""Tests of book/_ch08.py, the monotonicity chapter's helper: the line corpus, frozen-attention runs, the rates."""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import posgeo as pg
import _ch08 as ch
from posgeo import monotonicity_violation_rate


def _tiny(**changes) -> ch.Settings:
    return dataclasses.replace(ch.Settings(), **changes)


def _brute_local(P: np.ndarray, w: int) -> float:
    """Literal loops: anchors i, pairs j, k within offset w, ordered by offset, ties half.

    The points lie on a grid of step 0.1, so distances equal in exact arithmetic differ by
    rounding (about 1e-15) and distinct ones by far more than the 1e-10 used here.
    """
    from scipy.spatial.distance import pdist, squareform

    n = P.shape[0]
    E = squareform(pdist(P))
    viol = ties = comp = 0
    for i in range(n):
        near = [j for j in range(n) if j != i and abs(i - j) <= w]
        for j, k in itertools.permutations(near, 2):
            if abs(i - j) < abs(i - k):
                comp += 1
                if abs(E[i, j] - E[i, k]) <= 1e-10:
                    ties += 1
                elif E[i, j] > E[i, k]:
                    viol += 1
    return (viol + 0.5 * ties) / comp


# ----------------------------------------------------------------- settings, corpus and tasks
def test_full_settings_are_larger_and_chosen_by_the_profile() -> None:
    small, full = ch.settings("small"), ch.settings("full")
    assert small == ch.Settings() and full == ch.FULL
    assert full.widths[-1] > small.widths[-1] and full.steps > small.steps and full.seeds == small.seeds


def test_line_marginals_are_nearly_monotone_in_offset() -> None:
    s = ch.Settings()
    D = pg.hellinger_matrix(ch.line_marginals(s))
    # the bumps are truncated at the ends of the line: a few pairs near the ends flip
    assert 0.0 < monotonicity_violation_rate(distances=D, progress=False) < 0.005
    # with peaked bumps (no overlap across the line) the order is exact
    D4 = pg.hellinger_matrix(ch.line_marginals(_tiny(concentration=4.0)))
    assert monotonicity_violation_rate(distances=D4, progress=False) == 0.0


def test_attention_prefixes_match_exactly_the_attention_parameters() -> None:
    cfg = pg.TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=11, d_ff=8, max_len=4)
    names = [n for n, _ in pg.Transformer(cfg).named_parameters()]
    prefixes = ch.attention_prefixes(11)
    matched = [n for n in names if n.startswith(prefixes)]
    assert sorted(matched) == sorted(n for n in names if ".attn." in n)
    assert len(matched) == 11 * 4  # qkv weight/bias and out weight/bias per block
    assert not any(n.startswith("blocks.10.") for n in names if n.startswith(prefixes[1]))  # "1." is not "10."


def test_order_detection_labels_and_multisets() -> None:
    n = 6
    task = ch.OrderDetectionTask(np.eye(n), name="identity")  # position i always holds token i
    b = task.sample(400, torch.Generator().manual_seed(3))
    assert task.seq_len == n + 1 and task.vocab_size == n + 1
    assert bool((b.tokens[:, 0] == n).all())  # [CLS] first
    body = b.tokens[:, 1:]
    in_order = (body == torch.arange(n)).all(dim=1)
    assert bool((body.sort(dim=1).values == torch.arange(n)).all())  # the same multiset in both classes
    assert bool(in_order[b.targets == 1].all())
    assert float(in_order[b.targets == 0].float().mean()) < 0.02  # shuffled: the identity has probability 1/720
    assert 0.4 < float(b.targets.float().mean()) < 0.6
    b2 = task.sample(400, torch.Generator().manual_seed(3))
    assert torch.equal(b.tokens, b2.tokens) and torch.equal(b.targets, b2.targets)


def test_order_detection_is_at_chance_without_positions() -> None:
    task = ch.OrderDetectionTask(ch.line_marginals(ch.Settings()), name="line")
    cfg = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=16,
                               max_len=task.seq_len, position="none", n_classes=2, pooling="first")
    model = pg.Transformer(cfg, seed=0)
    with torch.no_grad():
        model.cls_head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    assert 0.45 < pg.evaluate(model, task, n_batches=8, batch_size=256) < 0.55


def test_text_task_keeps_the_frequent_tokens_and_the_first_positions() -> None:
    seqs = pg.Sequences.from_list([[1, 2, 3, 4], [2, 2, 1], [3], [2, 4, 2, 2, 1]], vocab_size=5)
    corpus = SimpleNamespace(sequences=seqs, name="toy", split="train")
    task = ch.text_mlm_task(corpus, seq_len=3, top_k=2)  # kept: 2 (6 times), then 1 (3 times, before 4 and 3)
    assert task.vocab_size == 2 + 2 + 1  # kept tokens, UNK, PAD, then the mask token
    rows = task.sampler(1000, 0)
    assert {tuple(r) for r in rows.tolist()} == {(1, 0, 2), (0, 0, 1), (0, 2, 0)}  # 3 is UNK (2); [3] is too short
    assert np.array_equal(rows, task.sampler(1000, 0))


# ----------------------------------------------------------------- frozen attention
@pytest.mark.parametrize("objective", ["mlm", "cls"])
def test_frozen_attention_training_leaves_attention_bitwise_unchanged(objective: str) -> None:
    s = _tiny(batch_size=8)
    run = ch.train_position_table(s, objective=objective, regime="frozen", d_model=8, steps=6, progress=False,
                                  cache=False)
    assert run.attention_unchanged and run.attention_change == 0.0
    # independently, tensor by tensor, against a fresh initialisation
    cfg = ch.model_config(s, objective, 8)
    tc = pg.TrainConfig(steps=6, batch_size=8, lr=s.lr, device="cpu", freeze=ch.attention_prefixes(cfg.n_layers))
    res = pg.train(cfg, tc, ch.task(s, objective), progress=False, cache=False)
    init = pg.Transformer(cfg, seed=0).state_dict()
    attn = [k for k in init if ".attn." in k]
    assert attn and all(torch.equal(init[k], res.state_dict[k]) for k in attn)
    assert not torch.equal(init["pos"], res.state_dict["pos"])  # while the table moved: the check is not vacuous
    assert not np.array_equal(run.table, run.initial_table)


def test_full_training_changes_attention_and_the_cls_row_is_dropped() -> None:
    s = _tiny(batch_size=8)
    run = ch.train_position_table(s, objective="cls", regime="full", d_model=8, steps=6, progress=False, cache=False)
    assert not run.attention_unchanged and run.attention_change > 0.0
    assert run.table.shape == (s.n_positions, 8)


def test_comparison_and_sweep_train_every_seed_and_pair_the_regimes() -> None:
    s = _tiny(n_positions=6, vocab_size=12, d_model=8, widths=(8, 16), steps=2, batch_size=4, seeds=(0, 1))
    comp = ch.ntk_comparison(s, progress=False)
    assert comp.index.names == ["objective", "regime", "seed"] and len(comp) == 2 * 2 * 2
    assert (comp.xs("frozen", level="regime")["attention change"] == 0).all()
    assert (comp.xs("frozen", level="regime")["stress* vs frozen"] == 0).all()  # each against its own seed
    init = comp["initial rate"]  # the regimes of one seed start from the same table
    assert init.loc[("mlm", "frozen", 0)] == init.loc[("mlm", "full", 0)]
    assert comp["farthest from 0"].between(1, s.n_positions - 1).all()
    sweep = ch.width_sweep(s, progress=False)
    assert sweep.index.names == ["d_model", "seed"] and list(sweep.index) == [(8, 0), (8, 1), (16, 0), (16, 1)]
    assert sweep.loc[(8, 0), "lr factor"] == 1.0 and sweep.loc[(16, 1), "lr factor"] == 0.5
    assert ch.width_sweep(s, lr_scaling="constant", seeds=(1,), progress=False)["lr factor"].eq(1.0).all()
    for table in (comp, sweep):  # every column has a range, and each run lies in it
        for metric, (low, high) in ch.metric_bounds(table.columns).items():
            assert (table[metric] >= low).all() and (high is None or (table[metric] <= high).all()), metric


def test_metric_bounds_by_kind() -> None:
    assert ch.metric_bounds(["rate (offset)", "accuracy frozen", "stress* vs corpus", "attention change"]) == {
        "rate (offset)": (0.0, 1.0), "accuracy frozen": (0.0, 1.0),
        "stress* vs corpus": (0.0, None), "attention change": (0.0, None)}


@pytest.mark.slow
def test_frozen_mlm_table_is_far_more_monotone_than_its_initialisation() -> None:
    run = ch.train_position_table(ch.Settings(), objective="mlm", regime="frozen", d_model=16, progress=False,
                                  cache=False)
    assert monotonicity_violation_rate(run.initial_table, progress=False) > 0.4
    assert monotonicity_violation_rate(run.table, progress=False) < 0.25


# ----------------------------------------------------------------- the committed sweep
def test_committed_sweep_has_every_run_of_its_command() -> None:
    sweeps = ch.read_width_sweep()
    s = ch.Settings()
    assert list(sweeps) == list(ch.LR_SCALINGS.values())
    tiny = ch.width_sweep(_tiny(n_positions=6, vocab_size=12, widths=(8,), steps=1, batch_size=4, seeds=(0,)),
                          progress=False)
    for label, sweep in sweeps.items():
        assert list(sweep.columns) == list(tiny.columns)
        assert list(sweep.index) == list(itertools.product(s.widths, s.seeds))
        expected = [ch.width_learning_rate(s, d, k) / s.lr for k in ch.LR_SCALINGS if ch.LR_SCALINGS[k] == label
                    for d in s.widths for _ in s.seeds]
        assert np.allclose(sweep["lr factor"], expected)
    # at d = d_model both scalings train the same runs
    a, b = (sweeps[label].xs(s.d_model, level="d_model") for label in ch.LR_SCALINGS.values())
    pd.testing.assert_frame_equal(a, b)


def test_committed_imdb_intervals_are_consistent() -> None:
    t = ch.read_imdb_intervals()
    assert list(t.index) == ch.IMDB_COMPARED + [f"{a} - {b}" for a, b in ch.IMDB_PAIRS]
    assert list(t.columns) == ["rate", "low", "high", "separated"]
    for a, b in ch.IMDB_PAIRS:  # a difference row is the difference of the two rates' estimates
        assert t.loc[f"{a} - {b}", "rate"] == pytest.approx(t.loc[a, "rate"] - t.loc[b, "rate"], abs=1e-12)
    null = np.r_[np.full(len(ch.IMDB_COMPARED), 0.5), np.zeros(len(ch.IMDB_PAIRS))]
    assert ((t["low"] > null) | (t["high"] < null)).tolist() == t["separated"].tolist()
    assert (t["low"] <= t["rate"]).all() and (t["rate"] <= t["high"]).all()


@pytest.mark.slow
def test_committed_sweep_reproduces_its_first_run() -> None:
    s = ch.Settings()
    row = ch.width_sweep(dataclasses.replace(s, widths=(8,)), seeds=(0,), progress=False).iloc[0]
    stored = ch.read_width_sweep()["lr ~ 1/width"].loc[(8, 0)]
    assert np.allclose(row.to_numpy(), stored.to_numpy(), rtol=0.3, atol=0.12)  # as across CPU kernel paths


# ----------------------------------------------------------------- local violation rate
@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(4, 9), st.integers(1, 3)),
              elements=st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 1))),
       st.integers(2, 8))
def test_local_rate_matches_brute_force(P: np.ndarray, w: int) -> None:
    assert ch.local_violation_rate(P, max_offset=w) == pytest.approx(_brute_local(P, w), abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(3, 12), st.integers(1, 4)), elements=st.integers(-50, 50).map(lambda k: k / 10)))
def test_local_rate_with_full_window_is_the_global_rate(P: np.ndarray) -> None:
    # coordinates on a grid of 0.1: exact ties included, but no subnormal scales (a 1e-205 table's
    # squared distances underflow in one computation and not in the other)
    assert ch.local_violation_rate(P, max_offset=len(P) - 1) == monotonicity_violation_rate(P, progress=False)


def test_local_rate_sees_a_fold_that_the_global_rate_punishes() -> None:
    t = np.linspace(0, 1.9 * np.pi, 30)
    arc = np.c_[np.cos(t), np.sin(t)]  # a curve that comes back towards its start
    assert ch.local_violation_rate(arc, max_offset=4) == 0.0
    assert monotonicity_violation_rate(arc, progress=False) > 0.1


# ----------------------------------------------------------------- tables of rates
def test_monotonicity_table_matches_direct_calls_and_fills_nan() -> None:
    rng = np.random.default_rng(0)
    n = 7
    D1 = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    X = rng.normal(size=(n, 3))
    D2 = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    geoms = {"a": SimpleNamespace(distances=D1, hybrid=D2), "b": SimpleNamespace(distances=D2, hybrid=D1)}
    P = rng.normal(size=(n, 4))
    t = ch.monotonicity_table(geoms, {"a": {"P": P, "Q": X}, "b": {"P": P}}, progress=False)
    assert t.loc["P", ("a", "offset")] == monotonicity_violation_rate(P, progress=False)
    assert t.loc["P", ("a", "corrected")] == monotonicity_violation_rate(P, reference=D2, progress=False)
    assert t.loc["P", ("b", "hellinger")] == monotonicity_violation_rate(P, reference=D2, progress=False)
    assert t.loc["Q", ("a", "corrected")] == 0.0  # X ordered by its own distances
    assert np.isnan(t.loc["Q", ("b", "offset")])


def test_model_encodings_alibi_is_a_line_and_random_is_near_half() -> None:
    enc = ch.model_encodings(40, learned=np.zeros((40, 3)))
    assert monotonicity_violation_rate(enc["ALiBi 12 heads"], progress=False) == 0.0
    assert abs(monotonicity_violation_rate(enc["random d=384"], progress=False) - 0.5) < 0.05
    assert enc["RoPE d=768 (head 64)"].shape[0] == 40


@pytest.fixture(scope="module")
def small_boot():
    corpus = pg.load_corpus("synthetic", n_sequences=400, n_positions=12, nonstationarity=2.0)
    return pg.bootstrap_geometry(corpus, 12, n_boot=6, estimator="hybrid", progress=False)


def test_violation_intervals_are_paired_and_centred_on_the_estimate(small_boot):
    line = np.arange(12.0)[:, None]
    noise = pg.random_encoding(12, 16, seed=0)
    table = ch.violation_intervals(small_boot, {"line": line, "random": noise}, differences=[("line", "random")])
    exact = monotonicity_violation_rate(line, reference=small_boot.estimate, progress=False)
    assert table.loc["line", "rate"] == pytest.approx(exact)
    assert table.loc["line - random", "rate"] == pytest.approx(table.loc["line", "rate"] - table.loc["random", "rate"])
    assert (table["low"] <= table["rate"]).all() and (table["rate"] <= table["high"]).all()
    # the difference's interval is not the naive one from the two marginal intervals
    assert table.loc["line - random", "high"] - table.loc["line - random", "low"] != pytest.approx(
        (table.loc["line", "high"] - table.loc["line", "low"]) + (table.loc["random", "high"] - table.loc["random", "low"]))


# ----------------------------------------------------------------- plots
def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_anchor_plot_has_the_reference_rescaled_to_one():
    rng = np.random.default_rng(0)
    tables = {"mlm frozen": rng.normal(size=(12, 4)), "cls full": rng.normal(size=(12, 4))}
    reference = pg.pairwise_distances(np.arange(12.0)[:, None])
    spec = ch.plot_anchor_distances(tables, anchors=(0, 6), reference=reference).to_dict()
    assert spec["description"] and len(spec["concat"]) == 2
    rows = _rows(spec)
    assert {r["table"] for r in rows if "table" in r} == {"mlm frozen", "cls full", "true Hellinger distance (reference)"}
    ref = [r for r in rows if r.get("table") == "true Hellinger distance (reference)"]
    assert max(r["distance"] for r in ref) == pytest.approx(1.0)


def test_width_sweep_plot_has_one_tick_per_width_and_geometric_means():
    index = pd.MultiIndex.from_product([[16, 32, 64, 128], [0, 1, 2]], names=["d_model", "seed"])
    spread = np.tile([0.9, 1.0, 1.1], 4)
    sweeps = {"lr ~ 1/width": pd.DataFrame({"attention change": np.repeat([2.0, 1.0, 0.6, 0.3], 3) * spread,
                                            "stress* full vs frozen": np.repeat([0.2, 0.1, 0.04, 0.01], 3) * spread},
                                           index=index)}
    spec = ch.plot_width_sweep(sweeps).to_dict()
    for panel in spec["concat"]:
        x = panel["layer"][0]["encoding"]["x"]
        assert x["scale"]["type"] == "log" and x["scale"]["base"] == 2 and x["axis"]["values"] == [16, 32, 64, 128]
    row = next(r for r in _rows(spec) if r["d_model"] == 128 and r["quantity"] == "stress*")
    geo = 0.01 * (0.9 * 1.0 * 1.1) ** (1 / 3)
    assert row["value"] == pytest.approx(geo, rel=1e-3) and row["low"] < geo < row["high"] and row["seeds"] == 3


def test_the_linearised_model_is_the_first_order_expansion() -> None:
    """f_lin(delta) = f(theta0) + J delta: exact at 0, linear in delta, and within O(eps^2) of the model at theta0 + delta."""
    s = _tiny(n_positions=6, vocab_size=8, d_model=8)
    cfg = ch.model_config(s, "cls", 8)
    model = pg.Transformer(cfg, seed=0).eval()
    f = ch.linearised(model)
    tokens = ch.task(s, "cls").sample(5, torch.Generator().manual_seed(0)).tokens
    theta0 = {k: v.detach().clone() for k, v in model.named_parameters()}
    g = torch.Generator().manual_seed(1)
    v = {k: torch.randn(p.shape, generator=g, dtype=p.dtype) * (p.abs().mean() + 0.02) for k, p in theta0.items()}
    with torch.no_grad():
        zero = {k: torch.zeros_like(p) for k, p in theta0.items()}
        assert torch.allclose(f(tokens, zero), model(tokens).cls_logits, atol=1e-6)
        half = f(tokens, {k: 0.5 * x for k, x in v.items()}) - f(tokens, zero)
        assert torch.allclose(2 * half, f(tokens, v) - f(tokens, zero), atol=1e-5)  # linear in delta
        gaps = []
        for eps in (1e-2, 5e-3):
            moved = pg.Transformer(cfg, seed=0).eval()
            for k, p in moved.named_parameters():
                p.copy_(theta0[k] + eps * v[k])
            gaps.append(float((f(tokens, {k: eps * x for k, x in v.items()}) - moved(tokens).cls_logits).abs().max()))
        assert 2.5 < gaps[0] / gaps[1] < 6  # halving eps quarters the gap: second order
        assert gaps[0] > 1e-7  # the model is not linear itself, so the check can fail


def test_linearised_training_moves_every_weight_and_keeps_the_initial_table() -> None:
    s = _tiny(n_positions=6, vocab_size=8, d_model=8, batch_size=8)
    r = ch.train_linearised(s, objective="mlm", steps=5, lr=0.5, seed=0)
    initial = pg.Transformer(ch.model_config(s, "mlm", 8), seed=0).position_table()
    assert np.allclose(r.initial_table, initial) and np.allclose(r.table, r.initial_table + r.displacement)
    assert r.relative_change > 0 and np.abs(r.displacement).max() > 0 and 0 <= r.accuracy <= 1


def test_the_shifted_line_draws_from_its_mixture_marginals() -> None:
    s = _tiny(n_positions=6, vocab_size=10)
    sampler = ch.shifted_sampler(s)
    x = sampler(20000, 0)
    assert x.shape == (20000, 6) and x.min() >= 0 and x.max() < 10
    freq = np.stack([np.bincount(x[:, i], minlength=10) / x.shape[0] for i in range(6)])
    assert np.abs(freq - sampler.marginals()).max() < 0.02
    assert np.allclose(sampler.marginals().sum(axis=1), 1.0)
    # the offset is shared by a sequence: neighbouring tokens are dependent, unlike the line corpus's
    a, b = x[:, 2].astype(float), x[:, 3].astype(float)
    assert np.corrcoef(a, b)[0, 1] > 0.2


def test_without_layernorm_the_run_has_no_normalisation_and_its_own_table() -> None:
    s = _tiny(n_positions=6, vocab_size=8, d_model=8, steps=3, seeds=(0,))
    stripped = ch.train_without_layernorm(s, seed=0)
    with_ln = ch.train_position_table(s, objective="mlm", seed=0, progress=False, cache=False).table
    assert stripped.shape == with_ln.shape == (6, 8)
    assert not np.allclose(stripped, with_ln)
    rows = ch.layernorm_rows(s, seeds=(0,))
    assert rows["model"].tolist() == ["with LayerNorm", "without LayerNorm"]
    assert rows["farthest from 0"].between(1, 5).all()


def test_the_shipped_linearised_runs_are_every_run_of_their_command() -> None:
    if not ch.LINEARISED_FILE.exists():
        pytest.skip("make p1-controls has not written ch08_linearised.csv")
    runs = pd.read_csv(ch.LINEARISED_FILE)
    s = ch.settings("small")
    expected = {(o, d, seed) for o in ch.LINEARISED["objectives"] for d in ch.LINEARISED["widths"] for seed in s.seeds}
    assert set(map(tuple, runs[["objective", "d_model", "seed"]].to_numpy().tolist())) == expected and len(runs) == len(expected)
    assert runs[["rate (offset)", "rate (Hellinger)", "initial rate", "accuracy"]].stack().between(0, 1).all()


def test_linearised_rows_on_a_tiny_setting_have_the_shipped_columns() -> None:
    s = _tiny(n_positions=6, vocab_size=8, batch_size=8)
    rows = ch.linearised_rows(s, seeds=(0,), widths=(8,), objectives=("mlm-shifted",), steps=2)
    assert len(rows) == 1 and rows.loc[0, "model"] == "linearised"
    if ch.LINEARISED_FILE.exists():
        assert list(rows.columns) == list(pd.read_csv(ch.LINEARISED_FILE).columns)
