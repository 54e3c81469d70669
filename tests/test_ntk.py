"""Tests for posgeo._ntk (monotonicity of learned tables, frozen-attention training)."""

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
from posgeo import Transformer, TrainConfig, TransformerConfig, evaluate, monotonicity_violation_rate, train
from posgeo.experiments import ntk as ex
from posgeo.experiments.ntk import (
    NTKSettings,
    OrderDetectionTask,
    attention_prefixes,
    local_violation_rate,
    metric_bounds,
    monotonicity_table,
    ntk_marginals,
    ntk_settings,
    ntk_task,
    train_position_table,
    width_learning_rate,
    width_sweep,
)


def _brute_local(P: np.ndarray, w: int) -> float:
    """Literal loops: anchors i, pairs j, k within offset w, ordered by offset, ties half.

    Ties are equal up to rounding, as in monotonicity_violations: the points lie on a grid of
    step 0.1, so distances equal in exact arithmetic differ by rounding (about 1e-15) and
    distinct ones by far more than the 1e-10 used here.
    """
    from scipy.spatial.distance import pdist, squareform

    n = P.shape[0]
    E = squareform(pdist(P))  # the distances monotonicity_violations uses
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


# ----------------------------------------------------------------- settings and tasks
def test_settings_profiles() -> None:
    small, full = ntk_settings("small"), ntk_settings("full")
    assert small.profile == "small" and small.device == "cpu"
    assert full.widths[-1] > small.widths[-1] and full.steps > small.steps and len(full.seeds) > 1
    with pytest.raises(ValueError, match="unknown profile"):
        ntk_settings("huge")


def test_line_marginals_are_nearly_monotone_in_offset() -> None:
    from posgeo import hellinger_matrix

    s = ntk_settings("small")
    D = hellinger_matrix(ntk_marginals(s))
    # the bumps are truncated at the ends of the line: a few pairs near the ends flip
    assert 0.0 < monotonicity_violation_rate(distances=D, progress=False) < 0.005
    # with peaked bumps (no overlap across the line) the order is exact
    D4 = hellinger_matrix(ntk_marginals(dataclasses.replace(s, concentration=4.0)))
    assert monotonicity_violation_rate(distances=D4, progress=False) == 0.0


def test_attention_prefixes_match_exactly_the_attention_parameters() -> None:
    cfg = TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=11, d_ff=8, max_len=4)
    names = [n for n, _ in Transformer(cfg).named_parameters()]
    prefixes = attention_prefixes(11)
    matched = [n for n in names if n.startswith(prefixes)]
    assert sorted(matched) == sorted(n for n in names if ".attn." in n)
    assert len(matched) == 11 * 4  # qkv weight/bias and out weight/bias per block
    # block 1's prefix must not reach block 10
    assert not any(n.startswith("blocks.10.") for n in names if n.startswith(prefixes[1]))
    with pytest.raises(ValueError):
        attention_prefixes(0)


def test_order_detection_labels_and_multisets() -> None:
    n = 6
    mu = np.eye(n)  # position i always holds token i: the in-order sequence is 0..n-1
    task = OrderDetectionTask(mu, name="identity")
    b = task.sample(400, torch.Generator().manual_seed(3))
    assert task.seq_len == n + 1 and task.vocab_size == n + 1
    assert bool((b.tokens[:, 0] == n).all())
    body = b.tokens[:, 1:]
    in_order = (body == torch.arange(n)).all(dim=1)
    # every row is a permutation of 0..n-1 (same multiset in both classes)
    assert bool((body.sort(dim=1).values == torch.arange(n)).all())
    assert bool(in_order[b.targets == 1].all())
    # label-0 rows are shuffled: almost never the identity (probability 1/720 each)
    assert float(in_order[b.targets == 0].float().mean()) < 0.02
    assert 0.4 < float(b.targets.float().mean()) < 0.6
    b2 = task.sample(400, torch.Generator().manual_seed(3))
    assert torch.equal(b.tokens, b2.tokens) and torch.equal(b.targets, b2.targets)


def test_order_detection_is_at_chance_without_positions() -> None:
    mu = ntk_marginals(ntk_settings("small"))
    task = OrderDetectionTask(mu, name="line")
    cfg = TransformerConfig(vocab_size=task.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=16,
                            max_len=task.seq_len, position="none", n_classes=2, pooling="first")
    model = Transformer(cfg, seed=0)
    with torch.no_grad():
        model.cls_head.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    acc = evaluate(model, task, n_batches=8, batch_size=256)
    assert 0.45 < acc < 0.55


def test_order_detection_validates_marginals() -> None:
    with pytest.raises(ValueError, match="rows summing to 1"):
        OrderDetectionTask(np.full((3, 2), 0.7), name="bad")
    with pytest.raises(ValueError, match="shape"):
        OrderDetectionTask(np.ones((1, 2)) / 2, name="bad")


# ----------------------------------------------------------------- frozen attention
@pytest.mark.parametrize("objective", ["mlm", "cls"])
def test_frozen_attention_training_leaves_attention_bitwise_unchanged(objective: str) -> None:
    s = dataclasses.replace(ntk_settings("small"), batch_size=8)
    task = ntk_task(s, objective)  # type: ignore[arg-type]
    run = train_position_table(s, objective=objective, regime="frozen", d_model=8, steps=6, progress=False, cache=False)
    assert run.attention_unchanged and run.attention_change == 0.0
    # independent check against a fresh initialisation, tensor by tensor
    from posgeo.experiments.ntk import _model_config

    cfg = _model_config(s, objective, 8)
    tc = TrainConfig(steps=6, batch_size=8, lr=s.lr, device="cpu", freeze=attention_prefixes(cfg.n_layers))
    res = train(cfg, tc, task, progress=False, cache=False)
    init = Transformer(cfg, seed=0).state_dict()
    attn = [k for k in init if ".attn." in k]
    assert attn and all(torch.equal(init[k], res.state_dict[k]) for k in attn)
    # ... while the position table did move (so the check above is not vacuous)
    assert not torch.equal(init["pos"], res.state_dict["pos"])
    assert not np.array_equal(run.table, run.initial_table)


def test_full_training_changes_attention() -> None:
    s = dataclasses.replace(ntk_settings("small"), batch_size=8)
    run = train_position_table(s, regime="full", d_model=8, steps=6, progress=False, cache=False)
    assert not run.attention_unchanged and run.attention_change > 0.0


def test_cls_table_drops_the_cls_row() -> None:
    s = dataclasses.replace(ntk_settings("small"), batch_size=8)
    run = train_position_table(s, objective="cls", d_model=8, steps=2, progress=False, cache=False)
    assert run.table.shape == (s.n_positions, 8)


def test_bad_arguments_raise() -> None:
    s = ntk_settings("small")
    with pytest.raises(ValueError, match="objective"):
        train_position_table(s, objective="lm", progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="regime"):
        train_position_table(s, regime="lazy", progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr_scaling"):
        width_sweep(s, lr_scaling="sqrt", progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr_scaling"):
        width_learning_rate(s, 8, lr_scaling="sqrt")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="d_model must be an int >= 1"):
        width_learning_rate(s, 0)
    with pytest.raises(TypeError, match="d_model must be an int"):
        width_learning_rate(s, 16.0)  # type: ignore[arg-type]


def test_comparison_and_sweep_train_every_seed_and_pair_the_regimes() -> None:
    from posgeo import seed_summary
    from posgeo.experiments.ntk import ntk_comparison

    s = dataclasses.replace(ntk_settings("small"), n_positions=6, vocab_size=12, d_model=8, widths=(8, 16),
                            steps=2, batch_size=4, seeds=(0, 1))
    comp = ntk_comparison(s, progress=False)
    assert comp.index.names == ["objective", "regime", "seed"] and len(comp) == 2 * 2 * 2
    assert (comp.xs("frozen", level="regime")["attention change"] == 0).all()
    assert (comp.xs("frozen", level="regime")["stress* vs frozen"] == 0).all()  # each against its own seed
    # the regimes of one seed start from the same table; two seeds from different ones
    init = comp["initial rate"]
    assert init.loc[("mlm", "frozen", 0)] == init.loc[("mlm", "full", 0)]
    assert comp["farthest from 0"].between(1, s.n_positions - 1).all()
    summary = seed_summary(comp.reset_index(), by=["objective", "regime"], metrics="rate (offset)")
    assert summary[("rate (offset)", "seeds")].eq(2).all()
    sweep = width_sweep(s, progress=False)
    assert sweep.index.names == ["d_model", "seed"] and list(sweep.index) == [(8, 0), (8, 1), (16, 0), (16, 1)]
    assert sweep.loc[(8, 0), "lr factor"] == 1.0 and sweep.loc[(16, 1), "lr factor"] == 0.5
    # every column of both tables has a range, and each run lies in it
    for table in (comp, sweep):
        for metric, (low, high) in metric_bounds(table.columns).items():
            assert (table[metric] >= low).all() and (high is None or (table[metric] <= high).all()), metric


def test_metric_bounds_by_kind_and_bad_names() -> None:
    assert metric_bounds(["rate (offset)", "accuracy frozen", "stress* vs corpus", "attention change"]) == {
        "rate (offset)": (0.0, 1.0), "accuracy frozen": (0.0, 1.0),
        "stress* vs corpus": (0.0, None), "attention change": (0.0, None)}
    assert metric_bounds("lr factor") == {"lr factor": (0.0, None)}
    with pytest.raises(ValueError, match=r"no known range for \['loss'\].*columns are"):
        metric_bounds(["accuracy", "loss"])  # a signed or unknown metric is not guessed
    with pytest.raises(TypeError, match="sequence of column names"):
        metric_bounds(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of column names"):
        metric_bounds(["accuracy", 1])  # type: ignore[list-item]


# ----------------------------------------------------------------- local violation rate
@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(4, 9), st.integers(1, 3)),
              elements=st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 1))),
       st.integers(2, 8))
def test_local_rate_matches_brute_force(P: np.ndarray, w: int) -> None:
    expected = _brute_local(P, w)
    assert local_violation_rate(P, max_offset=w) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(3, 12), st.integers(1, 4)), elements=st.floats(-5, 5, allow_nan=False)))
def test_local_rate_with_full_window_is_the_global_rate(P: np.ndarray) -> None:
    n = P.shape[0]
    assert local_violation_rate(P, max_offset=n - 1) == monotonicity_violation_rate(P, progress=False)


def test_local_rate_sees_a_fold_that_the_global_rate_punishes() -> None:
    t = np.linspace(0, 1.9 * np.pi, 30)
    arc = np.c_[np.cos(t), np.sin(t)]  # a curve that comes back towards its start
    assert local_violation_rate(arc, max_offset=4) == 0.0
    assert monotonicity_violation_rate(arc, progress=False) > 0.1
    with pytest.raises(ValueError, match="max_offset"):
        local_violation_rate(arc, max_offset=0)


# ----------------------------------------------------------------- monotonicity table
def test_monotonicity_table_matches_direct_calls_and_fills_nan() -> None:
    rng = np.random.default_rng(0)
    n = 7
    D1 = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    X = rng.normal(size=(n, 3))
    D2 = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    geoms = {"a": SimpleNamespace(distances=D1, hybrid=D2), "b": SimpleNamespace(distances=D2, hybrid=D1)}
    P = rng.normal(size=(n, 4))
    t = monotonicity_table(geoms, {"a": {"P": P, "Q": X}, "b": {"P": P}}, progress=False)
    assert t.loc["P", ("a", "offset")] == monotonicity_violation_rate(P, progress=False)
    assert t.loc["P", ("a", "corrected")] == monotonicity_violation_rate(P, reference=D2, progress=False)
    assert t.loc["P", ("b", "hellinger")] == monotonicity_violation_rate(P, reference=D2, progress=False)
    assert t.loc["Q", ("a", "corrected")] == 0.0  # X ordered by its own distances
    assert np.isnan(t.loc["Q", ("b", "offset")])
    with pytest.raises(ValueError, match="unknown order"):
        monotonicity_table(geoms, {}, orders=("rank",), progress=False)


@pytest.mark.slow
def test_frozen_mlm_table_is_far_more_monotone_than_its_initialisation() -> None:
    s = ntk_settings("small")
    run = train_position_table(s, objective="mlm", regime="frozen", d_model=16, progress=False, cache=False)
    init = monotonicity_violation_rate(run.initial_table, progress=False)
    final = monotonicity_violation_rate(run.table, progress=False)
    assert init > 0.4 and final < 0.25
    assert isinstance(s, NTKSettings)


def _tiny_separation_settings():
    from posgeo.experiments.separation import separation_settings

    return dataclasses.replace(
        separation_settings("small"), d_model=8, n_heads=2, d_ff=16, steps=3, snapshot_every=1,
        text_seq_len=6, top_k=10,
    )


def test_text_tables_are_the_separation_chapters_runs(tmp_path, monkeypatch) -> None:
    from posgeo.experiments.ntk import from_scratch_text_tables
    from posgeo import load_corpus
    from posgeo.experiments.separation import run_separation_experiments, separation_experiments

    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    s = _tiny_separation_settings()
    corpus = load_corpus("synthetic", n_sequences=60)
    tables = from_scratch_text_tables({"toy": corpus}, s, progress=False)
    name = f"{corpus.name} MLM"
    run = run_separation_experiments({name: separation_experiments(s, text=corpus)[name]}, s, progress=False)[name]
    np.testing.assert_array_equal(tables["toy"], run.model().position_table())
    assert tables["toy"].shape == (6, 8)
    # the initial table differs from the trained one: the run really trained the positions
    assert not np.allclose(run.snapshots[0], tables["toy"])


def test_text_tables_reject_bad_inputs() -> None:
    from posgeo.experiments.ntk import from_scratch_text_tables
    from posgeo import load_corpus

    with pytest.raises(TypeError, match="SeparationSettings"):
        from_scratch_text_tables({"toy": load_corpus("synthetic", n_sequences=10)}, settings="small", progress=False)
    with pytest.raises(TypeError, match="load_corpus"):
        from_scratch_text_tables({"toy": [[1, 2, 3]]}, _tiny_separation_settings(), progress=False)


def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_anchor_plot_is_an_altair_chart_with_the_reference_in_its_legend():
    from posgeo.experiments.ntk import plot_anchor_distances

    rng = np.random.default_rng(0)
    tables = {"mlm frozen": rng.normal(size=(12, 4)), "cls full": rng.normal(size=(12, 4))}
    from posgeo import pairwise_distances

    reference = pairwise_distances(np.arange(12.0)[:, None])
    spec = plot_anchor_distances(tables, anchors=(0, 6), reference=reference).to_dict()
    assert spec["description"] and len(spec["concat"]) == 2
    rows = _rows(spec)
    assert {r["table"] for r in rows if "table" in r} == {"mlm frozen", "cls full", "true Hellinger distance (reference)"}
    panel = spec["concat"][1]["layer"]
    assert [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in panel] == ["line", "point", "rule"]
    # rescaled to a maximum of 1: the reference from anchor 6 reaches 1 at the far end
    ref = [r for r in rows if r.get("table") == "true Hellinger distance (reference)"]
    assert max(r["distance"] for r in ref) == pytest.approx(1.0)


def test_width_sweep_plot_has_one_tick_per_width_on_a_log2_axis():
    from posgeo.experiments.ntk import plot_width_sweep

    index = pd.MultiIndex.from_product([[16, 32, 64, 128], [0, 1, 2]], names=["d_model", "seed"])
    spread = np.tile([0.9, 1.0, 1.1], 4)  # per-seed factors: geometric mean 0.997 of the width's value
    sweeps = {"lr ~ 1/width": pd.DataFrame({"attention change": np.repeat([2.0, 1.0, 0.6, 0.3], 3) * spread,
                                            "stress* full vs frozen": np.repeat([0.2, 0.1, 0.04, 0.01], 3) * spread}, index=index),
              "constant lr": pd.DataFrame({"attention change": np.repeat([2.0, 1.6, 1.3, 1.1], 3) * spread,
                                           "stress* full vs frozen": np.repeat([0.2, 0.15, 0.12, 0.2], 3) * spread}, index=index)}
    spec = plot_width_sweep(sweeps).to_dict()
    assert len(spec["concat"]) == 2
    for panel in spec["concat"]:
        x = panel["layer"][0]["encoding"]["x"]
        assert x["scale"]["type"] == "log" and x["scale"]["base"] == 2 and x["axis"]["values"] == [16, 32, 64, 128]
        assert [layer["mark"]["type"] for layer in panel["layer"]] == ["line", "area", "point"]  # the band
    assert "stress*" in spec["concat"][1]["layer"][0]["encoding"]["y"]["title"]
    assert "scale-optimal" in spec["concat"][1]["layer"][0]["encoding"]["y"]["title"]
    rows = _rows(spec)
    assert {r["learning rate"] for r in rows} == {"lr ~ 1/width", "constant lr"}
    row = next(r for r in rows if r["learning rate"] == "lr ~ 1/width" and r["d_model"] == 128 and r["quantity"] == "stress*")
    geo = 0.01 * (0.9 * 1.0 * 1.1) ** (1 / 3)
    assert row["value"] == pytest.approx(geo, rel=1e-3) and row["low"] < geo < row["high"] and row["seeds"] == 3
    with pytest.raises(ValueError, match="per-seed"):
        plot_width_sweep({"x": sweeps["constant lr"].groupby("d_model").mean()})


# --------------------------------------------------------------------------- violation_intervals
@pytest.fixture(scope="module")
def small_boot():
    corpus = pg.synthetic_corpus(n_sequences=400, n_positions=12, nonstationarity=2.0)
    return pg.bootstrap_geometry(corpus, 12, n_boot=6, estimator="hybrid", progress=False)


def test_violation_intervals_are_paired_and_centred_on_the_estimate(small_boot):
    line = np.arange(12.0)[:, None]
    noise = pg.random_encoding(12, 16, seed=0)
    table = ex.violation_intervals(small_boot, {"line": line, "random": noise}, differences=[("line", "random")])
    exact = pg.monotonicity_violation_rate(line, reference=small_boot.estimate, progress=False)
    assert table.loc["line", "rate"] == pytest.approx(exact)
    assert table.loc["line - random", "rate"] == pytest.approx(table.loc["line", "rate"] - table.loc["random", "rate"])
    assert (table["low"] <= table["rate"]).all() and (table["rate"] <= table["high"]).all()
    # the difference's interval is not the naive one from the two marginal intervals
    assert table.loc["line - random", "high"] - table.loc["line - random", "low"] != pytest.approx(
        (table.loc["line", "high"] - table.loc["line", "low"]) + (table.loc["random", "high"] - table.loc["random", "low"]))


def test_violation_intervals_reject_bad_input(small_boot):
    with pytest.raises(ValueError, match="one row per position"):
        ex.violation_intervals(small_boot, {"short": np.zeros((5, 2))})
    with pytest.raises(ValueError, match="names 'nope'"):
        ex.violation_intervals(small_boot, {"line": np.arange(12.0)[:, None]}, differences=[("line", "nope")])
