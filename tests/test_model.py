"""Tests for posgeo._model: the small transformer with pluggable positions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import sinusoidal_encoding
from posgeo._encodings import alibi_slopes
from posgeo import (
    Transformer,
    TransformerConfig,
    TransformerOutput,
    count_parameters,
)
from posgeo._model import POSITION_KINDS
from posgeo._model import _rotate

N = 7  # sequence length used by the property tests


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def small(position: str = "none", **kw) -> TransformerConfig:
    base = dict(vocab_size=13, d_model=16, n_heads=4, n_layers=2, d_ff=32, max_len=10, position=position, n_classes=3)
    if position == "lowrank":
        base["rank"] = 2
    base.update(kw)
    return TransformerConfig(**base)


def model64(cfg: TransformerConfig, seed: int = 0) -> Transformer:
    """A float64 copy in eval mode, with weights large enough (std 0.3) that every effect is obvious."""
    return Transformer(dataclasses.replace(cfg, init_std=0.3), seed=seed).double().eval()


def equivariance_gap(model: Transformer, perm: list[int], *, seed: int = 0) -> float:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.config.vocab_size, (3, len(perm)), generator=g)
    p = torch.tensor(perm)
    with torch.no_grad():
        out = model(tokens, return_hidden=True)
        out_p = model(tokens[:, p], return_hidden=True)
    gaps = [(out_p.logits - out.logits[:, p]).abs().max()]
    gaps += [(hp - h[:, p]).abs().max() for h, hp in zip(out.hidden_states, out_p.hidden_states)]
    return float(max(gaps))


# ---------------------------------------------------------------- symmetry (Theorem 1)

_ENCODER = model64(small("none"))


@settings(max_examples=25, deadline=None)
@given(perm=st.permutations(list(range(N))), seed=st.integers(0, 1000))
def test_position_free_encoder_is_permutation_equivariant(perm, seed):
    assert equivariance_gap(_ENCODER, perm, seed=seed) < 1e-10


@settings(max_examples=10, deadline=None)
@given(perm=st.permutations(list(range(N))))
def test_position_free_encoder_cls_is_permutation_invariant(perm):
    tokens = torch.randint(0, 13, (2, N), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a = _ENCODER(tokens).cls_logits
        b = _ENCODER(tokens[:, torch.tensor(perm)]).cls_logits
    assert float((a - b).abs().max()) < 1e-10


SWAP = [1, 0] + list(range(2, N))  # exchange the first two tokens
REVERSAL = list(range(N))[::-1]


@pytest.mark.parametrize("position", [p for p in POSITION_KINDS if p != "none"])
def test_any_positional_signal_breaks_equivariance(position):
    assert equivariance_gap(model64(small(position)), SWAP) > 1e-2


def test_causal_mask_breaks_equivariance():
    assert equivariance_gap(model64(small("none", causal=True)), SWAP) > 1e-2
    assert equivariance_gap(model64(small("none", causal=True)), REVERSAL) > 1e-2


def test_bidirectional_alibi_is_equivariant_under_reversal_only():
    # -m|i-j| is invariant under i -> n-1-i, so reversal is a symmetry of a non-causal ALiBi
    # encoder (it has no other positional signal), while RoPE's signed offsets are not.
    assert equivariance_gap(model64(small("alibi")), REVERSAL) < 1e-10
    assert equivariance_gap(model64(small("alibi")), SWAP) > 1e-2
    assert equivariance_gap(model64(small("rope")), REVERSAL) > 1e-2


def test_causal_outputs_ignore_the_future():
    m = model64(small("learned", causal=True))
    t = torch.randint(0, 13, (2, 8), generator=torch.Generator().manual_seed(0))
    t2 = t.clone()
    t2[:, 5:] = (t2[:, 5:] + 1) % 13
    with torch.no_grad():
        a, b = m(t).logits, m(t2).logits
    assert float((a[:, :5] - b[:, :5]).abs().max()) < 1e-12
    assert float((a[:, 5:] - b[:, 5:]).abs().max()) > 1e-6


# ---------------------------------------------------------------- positional mechanisms


def test_position_tables():
    assert Transformer(small("learned")).position_table().shape == (10, 16)
    P = Transformer(small("lowrank", rank=3)).position_table()
    assert P.shape == (10, 16) and P.dtype == np.float64
    assert np.linalg.matrix_rank(P, tol=1e-6) == 3  # float32 factors
    np.testing.assert_allclose(Transformer(small("sinusoidal")).position_table(), sinusoidal_encoding(10, 16), atol=1e-15)
    for kind in ("none", "rope", "alibi"):
        assert Transformer(small(kind)).position_table() is None


def test_lowrank_table_is_a_times_b_transpose():
    m = Transformer(small("lowrank", rank=2))
    expected = (m.pos_a @ m.pos_b.T).detach().double().numpy()
    np.testing.assert_allclose(m.position_table(), expected, rtol=1e-6)
    assert tuple(m.pos_a.shape) == (10, 2) and tuple(m.pos_b.shape) == (16, 2)


def test_alibi_attention_with_zero_queries_is_softmax_of_the_bias():
    m = model64(small("alibi", n_layers=1))
    with torch.no_grad():
        m.blocks[0].attn.qkv.weight.zero_()  # q = k = 0: the logits are the ALiBi bias alone
    with torch.no_grad():
        att = m(torch.zeros(1, 5, dtype=torch.long), return_attention=True).attentions[0][0]
    i = np.arange(5)
    for h, slope in enumerate(alibi_slopes(4)):
        logits = -slope * np.abs(i[:, None] - i[None, :])
        expected = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(att[h].numpy(), expected, atol=1e-12)


def test_rope_scores_depend_only_on_relative_position():
    g = torch.Generator().manual_seed(0)
    hd = 8
    theta = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    q = torch.randn(1, 1, 1, hd, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 1, hd, generator=g, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        am, an = m * theta, n * theta
        return float((_rotate(q, am.cos(), am.sin()) * _rotate(k, an.cos(), an.sin())).sum())

    assert score(3, 1) == pytest.approx(score(7, 5), abs=1e-12)
    assert score(0, 4) == pytest.approx(score(2, 6), abs=1e-12)
    assert abs(score(3, 1) - score(3, 2)) > 1e-6
    # rotation preserves norms
    a = torch.tensor([0.3, 1.1, 2.0, 0.7], dtype=torch.float64)
    assert float(_rotate(q, a.cos(), a.sin()).norm()) == pytest.approx(float(q.norm()), rel=1e-12)


# ---------------------------------------------------------------- outputs, masks, init


def test_output_shapes_and_attention_rows():
    m = Transformer(small("learned", causal=True))
    out = m(torch.randint(0, 13, (2, 6)), return_hidden=True, return_attention=True)
    assert isinstance(out, TransformerOutput)
    assert out.logits.shape == (2, 6, 13) and out.cls_logits.shape == (2, 3)
    assert len(out.hidden_states) == 3 and out.hidden_states[0].shape == (2, 6, 16)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 4, 6, 6)
    att = out.attentions[1].detach()
    torch.testing.assert_close(att.sum(-1), torch.ones(2, 4, 6))
    assert float(att.triu(1).abs().max()) == 0.0
    plain = m(torch.randint(0, 13, (2, 6)))
    assert plain.hidden_states is None and plain.attentions is None
    assert Transformer(small(n_classes=None))(torch.zeros(1, 3, dtype=torch.long)).cls_logits is None


@pytest.mark.parametrize("pooling", ["mean", "first", "last"])
def test_padding_is_ignored(pooling):
    m = model64(small("learned", pooling=pooling))
    t = torch.randint(1, 13, (1, 5), generator=torch.Generator().manual_seed(3))
    padded = torch.cat([t, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    with torch.no_grad():
        a = m(t)
        b = m(padded, attention_mask=mask)
    torch.testing.assert_close(b.logits[:, :5], a.logits, atol=1e-12, rtol=0)
    torch.testing.assert_close(b.cls_logits, a.cls_logits, atol=1e-12, rtol=0)


def test_inputs_embeds_matches_tokens():
    m = model64(small("rope"))
    t = torch.randint(0, 13, (2, 5))
    with torch.no_grad():
        torch.testing.assert_close(m(t).logits, m(inputs_embeds=m.tok(t)).logits)


def test_seeded_init_is_deterministic_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b, c = Transformer(small("learned"), seed=1), Transformer(small("learned"), seed=1), Transformer(small("learned"), seed=2)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (na, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert torch.equal(pa, pb), na
    assert not torch.equal(a.tok.weight, c.tok.weight)


def test_init_mean_and_std_of_token_embeddings():
    m = Transformer(small("learned", vocab_size=400, d_model=32, init_mean=4.0, init_std=0.2))
    w = m.tok.weight.detach().double()
    assert float(w.mean()) == pytest.approx(4.0, abs=0.01)
    assert float(w.std()) == pytest.approx(0.2, rel=0.05)
    assert float(m.pos.detach().mean()) == pytest.approx(0.0, abs=0.01)


def test_post_norm_and_tied_embeddings():
    cfg = small("learned", norm="post", tie_embeddings=True)
    m = Transformer(cfg)
    assert m.lm_head.weight is m.tok.weight
    untied = Transformer(dataclasses.replace(cfg, tie_embeddings=False))
    assert count_parameters(untied) - count_parameters(m) == 13 * 16
    assert m(torch.zeros(1, 4, dtype=torch.long)).logits.shape == (1, 4, 13)


def test_count_parameters_trainable_only():
    m = Transformer(small("lowrank", rank=2, n_layers=1, n_classes=None))
    d, V, L, ff = 16, 13, 10, 32
    block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d)
    expected = V * d + (L * 2 + d * 2) + block + 2 * d + d * V
    assert count_parameters(m) == expected
    m.tok.weight.requires_grad_(False)
    assert count_parameters(m) == expected - V * d
    assert count_parameters(m, trainable_only=False) == expected
    with pytest.raises(TypeError, match="nn.Module"):
        count_parameters("model")  # type: ignore[arg-type]


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"position": "relative"}, "unknown position 'relative'; choose one of 'none'"),
        ({"d_model": 18, "n_heads": 4}, "not divisible by n_heads=4"),
        ({"position": "rope", "d_model": 12, "n_heads": 4}, "head dimension must be even"),
        ({"position": "lowrank", "rank": None}, "needs rank"),
        ({"position": "lowrank", "rank": 0}, "rank must be an int >= 1"),
        ({"position": "lowrank", "rank": 11}, "exceeds min"),
        ({"position": "learned", "rank": 2}, "only used with position='lowrank'"),
        ({"n_layers": 0}, "n_layers must be an int >= 1"),
        ({"vocab_size": -3}, "vocab_size must be an int >= 1"),
        ({"dropout": 1.0}, "dropout"),
        ({"norm": "sandwich"}, "unknown norm"),
        ({"pooling": "max"}, "unknown pooling"),
        ({"init_std": 0.0}, "init_std"),
        ({"n_classes": 0}, "n_classes"),
    ],
)
def test_bad_configs_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        small(**kwargs) if "position" not in kwargs else small(kwargs.pop("position"), **kwargs)


def test_bad_types_raise_type_errors():
    with pytest.raises(TypeError, match="d_model must be an int"):
        small(d_model=16.0)
    with pytest.raises(TypeError, match="TransformerConfig"):
        Transformer({"vocab_size": 3})  # type: ignore[arg-type]


def test_bad_inputs_raise_clear_errors():
    m = Transformer(small("learned"))
    with pytest.raises(ValueError, match="sequence length 11 exceeds max_len=10"):
        m(torch.zeros(1, 11, dtype=torch.long))
    with pytest.raises(ValueError, match="sequence length 12 exceeds max_len=10"):
        Transformer(small("rope"))(torch.zeros(1, 12, dtype=torch.long))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 13\)"):
        m(torch.tensor([[1, 13]]))
    with pytest.raises(ValueError, match="exactly one"):
        m()
    with pytest.raises(ValueError, match="integer tensor"):
        m(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="inputs_embeds must have shape"):
        m(inputs_embeds=torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        m(torch.zeros(1, 3, dtype=torch.long), attention_mask=torch.ones(1, 4, dtype=torch.bool))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"init_std": float("inf")}, ValueError, "init_std must be finite"),
        ({"dropout": float("nan")}, ValueError, "dropout must be finite"),
        ({"tie_embeddings": "no"}, TypeError, "tie_embeddings must be a bool"),
        ({"vocab_size": 10**12}, ValueError, "vocab_size must be an int <="),
    ],
)
def test_config_refuses_non_finite_values_and_impossible_sizes(kwargs, exc, match):
    base = dict(vocab_size=8, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=8)
    with pytest.raises(exc, match=match):
        TransformerConfig(**{**base, **kwargs})
