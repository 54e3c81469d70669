"""Tests for posgeo._equivariance (P1 Theorem 1: permutation equivariance without positions)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from posgeo.experiments.equivariance import (
    ChanceInterval,
    EquivarianceResult,
    EquivarianceSettings,
    chance_interval,
    equivariance_errors,
    equivariance_settings,
    equivariance_table,
    order_task_table,
    plot_equivariance_errors,
    sequence_map,
    train_order_tasks,
)
from posgeo import Transformer

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((3, 7))
W2 = RNG.standard_normal((7, 2))


def mlp(X: np.ndarray) -> np.ndarray:
    """A position-wise MLP (the same weights at every token): exactly equivariant.

    Written as broadcast products and sums (not BLAS matmuls, whose blocking could round
    edge rows differently), so every token's arithmetic is identical wherever it sits.
    """
    hidden = np.tanh((X[..., :, None] * W1).sum(axis=-2))
    return (hidden[..., :, None] * W2).sum(axis=-2)


def cumsum(X: np.ndarray) -> np.ndarray:
    """Token t sees tokens 0..t: order matters."""
    return np.cumsum(X, axis=1)


def attention(X: np.ndarray) -> np.ndarray:
    """Single-head softmax self-attention without positions: equivariant up to rounding."""
    S = X @ X.transpose(0, 2, 1)
    A = np.exp(S - S.max(-1, keepdims=True))
    return (A / A.sum(-1, keepdims=True)) @ X


X = RNG.standard_normal((2, 6, 3))


# --------------------------------------------------------------------------- the error


@settings(max_examples=40, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_position_wise_map_is_exactly_equivariant(perm):
    res = equivariance_errors(mlp, X, permutations=np.array(perm), progress=False)
    assert res.errors.shape == (1,)
    assert res.max_error == 0.0  # row-wise arithmetic, reordered: bit-identical


@settings(max_examples=40, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_attention_is_equivariant_to_rounding(perm):
    assert equivariance_errors(attention, X, permutations=np.array(perm), progress=False).max_error < 1e-12


@settings(max_examples=40, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_cumulative_sum_is_not_equivariant(perm):
    res = equivariance_errors(cumsum, X, permutations=np.array(perm), progress=False)
    if perm == list(range(6)):
        assert res.max_error == 0.0  # the identity permutation is always harmless
    else:
        # the first slot whose input changes: its prefix sum differs by a non-zero vector
        assert res.max_error > 1e-3


def test_error_matches_a_hand_computed_case():
    Z = np.arange(3.0).reshape(1, 3, 1)  # tokens 0, 1, 2
    res = equivariance_errors(cumsum, Z, permutations=[[2, 1, 0]], progress=False)
    # cumsum of (2, 1, 0) = (2, 3, 3); reversed cumsum of (0, 1, 2) = (3, 1, 0): max diff 3
    assert res.errors.tolist() == [3.0]
    assert res.scale == 3.0


def test_random_permutations_are_seeded_and_valid():
    a = equivariance_errors(cumsum, X, n_permutations=15, seed=3, progress=False)
    b = equivariance_errors(cumsum, X, n_permutations=15, seed=3, progress=False)
    c = equivariance_errors(cumsum, X, n_permutations=15, seed=4, progress=False)
    assert a.permutations.shape == (15, 6) and a.n_permutations == 15
    assert np.array_equal(a.permutations, b.permutations) and np.array_equal(a.errors, b.errors)
    assert not np.array_equal(a.permutations, c.permutations)
    assert (np.sort(a.permutations, axis=1) == np.arange(6)).all()
    assert equivariance_errors(mlp, X, progress=False).n_permutations == 200  # the default


def test_chunking_does_not_change_the_errors():
    ref = equivariance_errors(cumsum, X, n_permutations=10, chunk_size=1, progress=False)
    for chunk_size in (3, 10, 64):
        res = equivariance_errors(cumsum, X, n_permutations=10, chunk_size=chunk_size, progress=False)
        assert np.array_equal(res.errors, ref.errors)


def test_torch_inputs_and_outputs_are_accepted():
    T = torch.as_tensor(X)
    res = equivariance_errors(lambda x: torch.cumsum(x, dim=1), T, n_permutations=5, progress=False)
    ref = equivariance_errors(cumsum, X, n_permutations=5, progress=False)
    assert np.allclose(res.errors, ref.errors)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match=r"X must have shape \(B, n, d\).*X\[None\]"):
        equivariance_errors(mlp, X[0], progress=False)
    with pytest.raises(ValueError, match="needs n >= 2"):
        equivariance_errors(mlp, X[:, :1], progress=False)
    with pytest.raises(ValueError, match="n_permutations must be >= 1"):
        equivariance_errors(mlp, X, n_permutations=0, progress=False)
    with pytest.raises(TypeError, match="n_permutations must be an int"):
        equivariance_errors(mlp, X, n_permutations=2.5, progress=False)
    with pytest.raises(ValueError, match="not both"):
        equivariance_errors(mlp, X, n_permutations=3, permutations=[list(range(6))], progress=False)
    with pytest.raises(ValueError, match="is not a permutation of 0..5"):
        equivariance_errors(mlp, X, permutations=[[0, 0, 1, 2, 3, 4]], progress=False)
    with pytest.raises(ValueError, match=r"shape \(k, n\) = \(k, 6\)"):
        equivariance_errors(mlp, X, permutations=[[0, 1, 2]], progress=False)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        equivariance_errors(mlp, X, chunk_size=0, progress=False)
    with pytest.raises(ValueError, match="for any batch size"):
        equivariance_errors(lambda x: np.zeros((2, 6, 1)), X, n_permutations=3, progress=False)
    with pytest.raises(TypeError, match="model_fn must be callable"):
        equivariance_errors("mlp", X, progress=False)
    with pytest.raises(ValueError, match=r"per-token outputs.*pooled"):
        equivariance_errors(lambda x: x.mean(axis=1), X, progress=False)


# --------------------------------------------------------------------------- models


def _config(position: str, causal: bool = False):
    s = equivariance_settings("small")
    return dataclasses.replace(s.verification_config(position, causal=causal), n_layers=1)


def test_position_free_transformer_is_equivariant_and_positions_break_it():
    Z = np.random.default_rng(1).standard_normal((2, 16, 32))
    errs = {}
    for position, causal in [("none", False), ("none", True), ("sinusoidal", False), ("rope", False), ("alibi", False)]:
        fn = sequence_map(Transformer(_config(position, causal), seed=0).double())
        errs[(position, causal)] = equivariance_errors(fn, Z, n_permutations=10, progress=False).max_error
    assert errs[("none", False)] < 1e-12
    assert min(v for k, v in errs.items() if k != ("none", False)) > 1e-3


def test_alibi_encoder_is_reversal_equivariant_but_causal_alibi_is_not():
    Z = np.random.default_rng(2).standard_normal((2, 16, 32))
    rev = np.arange(16)[::-1]
    bidirectional = sequence_map(Transformer(_config("alibi"), seed=0).double())
    causal = sequence_map(Transformer(_config("alibi", causal=True), seed=0).double())
    assert equivariance_errors(bidirectional, Z, permutations=rev, progress=False).max_error < 1e-12
    assert equivariance_errors(causal, Z, permutations=rev, progress=False).max_error > 1e-3


def test_sequence_map_rejects_random_models_and_non_modules():
    model = Transformer(dataclasses.replace(_config("none"), dropout=0.1))
    with pytest.raises(ValueError, match=r"dropout.*model.eval\(\)"):
        sequence_map(model)
    assert sequence_map(model.eval())(np.zeros((1, 4, 32))).shape == (1, 4, 32)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        sequence_map(mlp)


# --------------------------------------------------------------------------- chance


@pytest.mark.parametrize("n,p,level", [(1, 0.5, 0.9), (20, 0.5, 0.99), (2048, 0.5, 0.99), (300, 0.1, 0.95), (57, 0.8, 0.5)])
def test_chance_interval_has_exact_coverage_and_is_tight(n, p, level):
    ci = chance_interval(n, chance=p, level=level)
    lo, hi = round(ci.low * n), round(ci.high * n)
    assert 0 <= lo <= hi <= n
    half = (1 - level) / 2
    assert binom.cdf(hi, n, p) - binom.cdf(lo - 1, n, p) >= level  # coverage
    # equal tails, each at most (1 - level) / 2 ...
    assert binom.cdf(lo - 1, n, p) <= half and binom.sf(hi, n, p) <= half
    # ... and as tight as possible: moving either end point inwards breaks that bound
    assert binom.cdf(lo, n, p) > half - 1e-12 and binom.sf(hi - 1, n, p) > half


def test_chance_interval_covers_simulated_guessing():
    ci = chance_interval(500, level=0.9)
    acc = np.random.default_rng(0).binomial(500, 0.5, size=20_000) / 500
    inside = np.mean([ci.contains(a) for a in acc])
    assert 0.9 <= inside < 0.93
    assert not ci.contains(0.6) and ci.contains(0.5)


def test_chance_interval_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        chance_interval(0)
    with pytest.raises(TypeError, match="n_samples must be an int"):
        chance_interval(10.0)
    with pytest.raises(ValueError, match=r"chance must be in \(0, 1\)"):
        chance_interval(10, chance=1.0)
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\)"):
        chance_interval(10, level=1.0)


# --------------------------------------------------------------------------- settings, tables, plot


def test_profiles_differ_and_build_valid_configs():
    small, full = equivariance_settings("small"), equivariance_settings("full")
    assert isinstance(small, EquivarianceSettings) and small.profile == "small" and full.profile == "full"
    assert full.d_model > small.d_model and full.steps > small.steps and full.n_permutations > small.n_permutations
    for s in (small, full):
        for task in s.tasks().values():
            for _, position, causal in s.variants:
                assert s.model_config(task, position, causal=causal).max_len == task.seq_len
            s.verification_config("lowrank")
    with pytest.raises(ValueError, match="unknown profile"):
        equivariance_settings("huge")


def test_env_var_selects_the_profile(monkeypatch):
    monkeypatch.setenv("POSGEO_PROFILE", "full")
    assert equivariance_settings().profile == "full"


def test_order_task_table_flags_the_position_free_model_at_chance():
    # a few steps only: the position-free model is at chance whatever its weights, and the
    # symmetry columns are properties of the architecture (generic weights suffice)
    s = dataclasses.replace(
        equivariance_settings("small"), steps=3, eval_batches=2, eval_batch_size=128, n_permutations=5,
        variants=(("none", "none", False), ("alibi", "alibi", False), ("learned", "learned", False)),
    )
    table = order_task_table(train_order_tasks(s, progress=False, cache=False), s)
    assert list(table.index) == ["none", "alibi", "learned"]
    accuracy = table[("first marker", "accuracy")].to_numpy()
    assert np.allclose(accuracy * 256, np.round(accuracy * 256))  # fractions of the 256 sequences
    assert bool(table.loc["none", ("first marker", "at chance")])
    assert table[("symmetry", "permutation-equivariant")].tolist() == [True, False, False]
    assert table[("symmetry", "reversal-equivariant")].tolist() == [True, True, False]
    with pytest.raises(KeyError, match="no run for task"):
        order_task_table({}, s)


def test_equivariance_table_and_plot():
    good = equivariance_errors(attention, X, n_permutations=8, progress=False)
    bad = equivariance_errors(cumsum, X, n_permutations=8, progress=False)
    table = equivariance_table({"attention": good, "cumsum": bad})
    assert table["equivariant"].tolist() == [True, False]
    assert table.loc["attention", "permutations"] == 8
    spec = plot_equivariance_errors({"attention": good, "cumsum": bad}).to_dict()
    rules, boxes, dots = spec["layer"]
    assert (rules["mark"]["type"], boxes["mark"]["type"], dots["mark"]["type"]) == ("rule", "boxplot", "point")
    assert dots["encoding"]["x"]["scale"]["type"] == "log" and dots["encoding"]["y"]["sort"] == ["attention", "cumsum"]
    assert "tooltip" in dots["encoding"] and "tooltip" in rules["encoding"]
    points = spec["datasets"][dots["data"]["name"]]
    assert len(points) == 16 and {p["map"] for p in points} == {"attention", "cumsum"}
    assert {p["group"] for p in points if p["map"] == "cumsum"} == {"some above 1e-05"}
    assert max(p["relative error"] for p in points if p["map"] == "cumsum") == pytest.approx(bad.max_relative_error)
    lines = spec["datasets"][rules["data"]["name"]]
    assert [line["reference line"] for line in lines] == [
        "equivariant below 1e-05", "not equivariant above 1e-02", "reference: float64 eps", "reference: float32 eps"]
    assert rules["encoding"]["strokeDash"]["legend"]["title"] == "reference line"
    assert spec["description"]
    absolute = plot_equivariance_errors({"cumsum": bad}, relative=False, thresholds=(0.1,)).to_dict()
    assert [line["reference line"] for line in absolute["datasets"][absolute["layer"][0]["data"]["name"]]] == ["threshold 1e-01"]
    with pytest.raises(ValueError, match="results is empty"):
        plot_equivariance_errors({})


def test_result_properties():
    r = EquivarianceResult(errors=np.array([3.0, 1.0, 2.0]), permutations=np.zeros((3, 2), int), scale=1.0)
    assert (r.max_error, r.median_error, r.n_permutations) == (3.0, 2.0, 3)
    assert ChanceInterval(0.4, 0.6, 0.5, 100, 0.99).contains(0.6)


def test_thread_setting_is_scoped_and_validated():
    before = torch.get_num_threads()
    s = dataclasses.replace(equivariance_settings("small"), steps=1, variants=(("none", "none", False),))
    train_order_tasks(s, progress=False, cache=False, num_threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be a positive int or None"):
        train_order_tasks(s, progress=False, cache=False, num_threads=0)
    assert torch.get_num_threads() == before
