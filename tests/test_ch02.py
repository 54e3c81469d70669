"""Tests for book/_ch02.py, the helper of the permutation-equivariance chapter (P1, Theorem 1)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import _ch02 as ch
import posgeo as pg
from posgeo._train import SortedTask  # the library's own, which the chapter's copy must match

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((3, 7))
W2 = RNG.standard_normal((7, 2))
X = RNG.standard_normal((2, 6, 3))


class Map(torch.nn.Module):
    """A function of (B, n, d) tensors, called like an encoder: ``model(inputs_embeds=X).last_hidden_state``."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.dtype_anchor = torch.nn.Parameter(torch.zeros((), dtype=torch.float64))

    def forward(self, inputs_embeds):
        return SimpleNamespace(last_hidden_state=self.fn(inputs_embeds))


def mlp(Z):
    """A position-wise MLP written as broadcast sums, so that every token's arithmetic is identical: exactly equivariant."""
    hidden = torch.tanh((Z[..., :, None] * torch.as_tensor(W1)).sum(dim=-2))
    return (hidden[..., :, None] * torch.as_tensor(W2)).sum(dim=-2)


def attention(Z):
    """Single-head softmax self-attention without positions: equivariant up to rounding."""
    return torch.softmax(Z @ Z.transpose(1, 2), dim=-1) @ Z


def cumsum(Z):
    """Token t sees tokens 0..t: order matters."""
    return torch.cumsum(Z, dim=1)


def encoder(position="none", causal=False, n_layers=1):
    cfg = pg.TransformerConfig(vocab_size=2, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, max_len=16,
                               position=position, causal=causal, rank=2 if position == "lowrank" else None, init_std=0.2)
    return pg.Transformer(cfg, seed=0).double().eval()


# --------------------------------------------------------------------------- the error, on analytic maps


@settings(max_examples=30, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_position_wise_map_is_exactly_equivariant(perm):
    res = ch.equivariance_errors(Map(mlp), X, permutations=np.array(perm))
    assert res.errors.shape == (1,) and res.errors[0] == 0.0  # row-wise arithmetic, reordered: bit-identical


@settings(max_examples=30, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_attention_is_equivariant_to_rounding(perm):
    assert ch.equivariance_errors(Map(attention), X, permutations=np.array(perm)).errors[0] < 1e-12


@settings(max_examples=30, deadline=None)
@given(perm=st.permutations(list(range(6))))
def test_cumulative_sum_is_not_equivariant(perm):
    error = ch.equivariance_errors(Map(cumsum), X, permutations=np.array(perm)).errors[0]
    if perm == list(range(6)):
        assert error == 0.0  # the identity is always harmless
    else:
        assert error > 1e-3  # the first slot whose input changes gets a different prefix sum


def test_error_and_scale_match_a_hand_computed_case():
    Z = np.arange(3.0).reshape(1, 3, 1)  # tokens 0, 1, 2
    res = ch.equivariance_errors(Map(cumsum), Z, permutations=[2, 1, 0])
    # cumsum of (2, 1, 0) = (2, 3, 3); reversed cumsum of (0, 1, 2) = (3, 1, 0): max difference 3
    assert res.errors.tolist() == [3.0] and res.scale == 3.0 and res.relative.tolist() == [1.0]


def test_random_permutations_are_seeded_and_valid():
    a = ch.equivariance_errors(Map(cumsum), X, n_permutations=15, seed=3)
    b = ch.equivariance_errors(Map(cumsum), X, n_permutations=15, seed=3)
    c = ch.equivariance_errors(Map(cumsum), X, n_permutations=15, seed=4)
    assert a.permutations.shape == (15, 6)
    assert np.array_equal(a.permutations, b.permutations) and np.array_equal(a.errors, b.errors)
    assert not np.array_equal(a.permutations, c.permutations)
    assert (np.sort(a.permutations, axis=1) == np.arange(6)).all()


def test_chunking_does_not_change_the_errors():
    ref = ch.equivariance_errors(Map(cumsum), X, n_permutations=10, chunk=1)
    for chunk in (3, 10, 64):
        assert np.array_equal(ch.equivariance_errors(Map(cumsum), X, n_permutations=10, chunk=chunk).errors, ref.errors)


def test_errors_agree_with_a_direct_computation_per_permutation():
    res = ch.equivariance_errors(Map(cumsum), X, n_permutations=7, seed=5)
    direct = [np.abs(np.cumsum(X[:, p], axis=1) - np.cumsum(X, axis=1)[:, p]).max() for p in res.permutations]
    assert np.allclose(res.errors, direct, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- the encoders the chapter checks


def test_position_free_transformer_is_equivariant_and_every_signal_breaks_it():
    Z = np.random.default_rng(1).standard_normal((2, 16, 32))
    errs = {(position, causal): ch.equivariance_errors(encoder(position, causal), Z, n_permutations=10).relative.max()
            for position, causal in [("none", False), ("none", True), ("sinusoidal", False), ("learned", False),
                                     ("lowrank", False), ("rope", False), ("alibi", False)]}
    assert errs.pop(("none", False)) < 1e-12
    assert min(errs.values()) > 1e-2


def test_alibi_keeps_the_reversal_and_nothing_else():
    Z = np.random.default_rng(2).standard_normal((2, 16, 32))
    rev = np.arange(16)[::-1]
    assert ch.equivariance_errors(encoder("alibi"), Z, permutations=rev).relative.max() < 1e-12
    assert ch.equivariance_errors(encoder("alibi", causal=True), Z, permutations=rev).relative.max() > 1e-2
    assert ch.equivariance_errors(encoder("rope"), Z, permutations=rev).relative.max() > 1e-2


def test_a_slot_dependent_term_is_caught():
    """Fault injection: the smallest positional signal, a bias on one slot, makes the check fail."""
    bump = torch.zeros(1, 6, 1, dtype=torch.float64)
    bump[0, 0] = 1e-3
    res = ch.equivariance_errors(Map(lambda Z: mlp(Z + bump)), X, n_permutations=20)
    assert res.errors.max() > 1e-6


def test_outputs_follow_the_model_dtype():
    float32 = Map(lambda Z: Z * 1.0).float()
    assert ch.outputs(float32, np.full((1, 2, 1), 1 / 3))[0, 0, 0] == np.float32(1 / 3)


def test_mean_pooled_position_free_classifier_answers_a_sequence_and_its_marker_swap_alike():
    """The chapter's swap argument: same logits on a sequence and its A/B swap, hence accuracy 1/2."""
    task = pg.FirstMarkerTask(seq_len=12, n_filler=8)
    cfg = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=12,
                               position="none", n_classes=2, pooling="mean", init_std=0.2)
    model = pg.Transformer(cfg, seed=0).double().eval()
    tokens = task.sample(64, torch.Generator().manual_seed(0)).tokens
    a, b = task.n_filler, task.n_filler + 1
    swapped = torch.where(tokens == a, b, torch.where(tokens == b, a, tokens))
    with torch.no_grad():
        assert torch.allclose(model(tokens).cls_logits, model(swapped).cls_logits, rtol=0, atol=1e-12)


def test_mean_pooled_alibi_classifier_answers_a_sequence_and_its_reversal_alike():
    task = pg.FirstMarkerTask(seq_len=12, n_filler=8)
    cfg = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=12,
                               position="alibi", n_classes=2, pooling="mean", init_std=0.2)
    model = pg.Transformer(cfg, seed=0).double().eval()
    tokens = task.sample(64, torch.Generator().manual_seed(0)).tokens
    with torch.no_grad():
        assert torch.allclose(model(tokens).cls_logits, model(tokens.flip(1)).cls_logits, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- the sorted task


def test_sorted_task_labels_and_balance():
    task = ch.SortedTask(vocab_size=16, seq_len=12)
    batch = task.sample(4096, torch.Generator().manual_seed(0))
    is_sorted = (batch.tokens[:, 1:] >= batch.tokens[:, :-1]).all(dim=1).long()
    assert torch.equal(is_sorted, batch.targets)
    assert abs(batch.targets.float().mean().item() - 0.5) < 0.03
    assert batch.tokens.min() >= 0 and batch.tokens.max() < 16 and batch.kind == "cls"


def test_sorted_task_redraws_unsorted_rows_that_came_out_sorted():
    task = ch.SortedTask(vocab_size=2, seq_len=2)  # a random pair is sorted 3 times in 4
    batch = task.sample(2000, torch.Generator().manual_seed(1))
    unsorted = batch.targets == 0
    assert (batch.tokens[unsorted, 0] > batch.tokens[unsorted, 1]).all()


@pytest.mark.skipif(not hasattr(pg, "SortedTask"), reason="the library no longer has SortedTask")
def test_sorted_task_is_the_library_task_it_replaces():
    mine, theirs = ch.SortedTask(vocab_size=16, seq_len=12), SortedTask(vocab_size=16, seq_len=12)
    a, b = mine.sample(256, torch.Generator().manual_seed(3)), theirs.sample(256, torch.Generator().manual_seed(3))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.targets, b.targets)
    assert mine.cache_key() == theirs.cache_key()  # the chapter's cached runs stay valid


# --------------------------------------------------------------------------- intervals


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (1024, 2048), (2040, 2048), (3, 50)])
def test_clopper_pearson_is_scipys_exact_interval(k, n):
    low, high = ch.clopper_pearson(k, n)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert low == pytest.approx(ref.low, abs=1e-12) and high == pytest.approx(ref.high, abs=1e-12)
    assert 0.0 <= low <= k / n <= high <= 1.0


# --------------------------------------------------------------------------- charts


def test_equivariance_plot_has_its_layers_data_and_reference_lines():
    good = ch.equivariance_errors(Map(attention), X, n_permutations=8)
    bad = ch.equivariance_errors(Map(cumsum), X, n_permutations=8)
    spec = ch.plot_equivariance_errors({"attention": good, "cumsum": bad}).to_dict()
    rules, boxes, dots = spec["layer"]
    assert (rules["mark"]["type"], boxes["mark"]["type"], dots["mark"]["type"]) == ("rule", "boxplot", "point")
    assert dots["encoding"]["x"]["scale"]["type"] == "log" and dots["encoding"]["y"]["sort"] == ["attention", "cumsum"]
    points = spec["datasets"][dots["data"]["name"]]
    assert len(points) == 16
    assert {p["group"] for p in points if p["map"] == "cumsum"} == {"some above 1e-05"}
    assert {p["group"] for p in points if p["map"] == "attention"} == {"all below 1e-05"}
    assert max(p["relative error"] for p in points if p["map"] == "cumsum") == pytest.approx(bad.relative.max())
    lines = spec["datasets"][rules["data"]["name"]]
    assert [line["reference line"] for line in lines] == [
        "equivariant below 1e-05", "not equivariant above 1e-02", "reference: float64 eps", "reference: float32 eps"]
    assert spec["description"]


def test_accuracy_plot_draws_every_model_and_the_chance_band():
    import pandas as pd

    table = pd.DataFrame({"positional signal": ["none", "none", "rope", "rope"], "task": ["a", "b", "a", "b"],
                          "accuracy": [0.5, 0.51, 1.0, 0.99], "low": [0.48, 0.49, 0.998, 0.985], "high": [0.52, 0.53, 1.0, 0.995]})
    spec = ch.plot_accuracies(table, (0.4717, 0.5283)).to_dict()
    band, bars, dots = spec["layer"]
    assert spec["datasets"][band["data"]["name"]][0]["low"] == 0.4717
    assert len(spec["datasets"][dots["data"]["name"]]) == 4
    assert dots["encoding"]["y"]["sort"] == ["none", "rope"]
    assert spec["description"]
