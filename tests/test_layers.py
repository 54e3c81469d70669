"""Tests for posgeo._layers (projected stress of positions through attention maps)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from posgeo import Sequences, pairwise_distances, stress
from posgeo.experiments.layers import (
    frequent_tokens,
    head_stress_table,
    hidden_stress_table,
    layers_settings,
    random_map_stress,
)
from posgeo import (
    layer_stress_table,
    positional_hidden_states,
    positional_input,
    projected_stress,
    query_key_maps,
)


@pytest.fixture(scope="module")
def tiny_bert() -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=24, attn_implementation="eager")
    model = BertModel(cfg).eval()
    with torch.no_grad():  # a non-trivial LayerNorm gain, so that the test sees it
        model.embeddings.LayerNorm.weight.copy_(torch.linspace(0.5, 1.5, 8))
    return model


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(n, 5))
    D = pairwise_distances(rng.normal(size=(n, 3)))
    return P, D


# ----------------------------------------------------------------- projected stress
@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(1, 6)), elements=st.floats(-100, 100, allow_nan=False)),
       st.sampled_from(["raw", "optimal"]))
def test_identity_projection_equals_plain_stress_exactly(P: np.ndarray, scale: str) -> None:
    n, d = P.shape
    D = np.abs(np.subtract.outer(np.arange(n, dtype=float), np.arange(n, dtype=float)))
    assert projected_stress(P, D, np.eye(d), scale=scale) == stress(P, D, scale=scale)  # type: ignore[arg-type]


def test_orthogonal_maps_preserve_stress() -> None:
    P, D = _points(10, 1)
    Q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(5, 5)))
    assert projected_stress(P, D, Q) == pytest.approx(stress(P, D), rel=1e-12)


def test_concatenated_maps_add_squared_distances() -> None:
    P, D = _points(9, 3)
    rng = np.random.default_rng(4)
    A, B = rng.normal(size=(5, 2)), rng.normal(size=(5, 3))
    expected = stress(np.hstack([P @ A, P @ B]), D, scale="optimal")
    assert projected_stress(P, D, [A, B], scale="optimal") == pytest.approx(expected, abs=1e-14)
    # the concatenated configuration's squared distances are the sums of the parts'
    E = pairwise_distances(np.hstack([P @ A, P @ B])) ** 2
    assert np.allclose(E, pairwise_distances(P @ A) ** 2 + pairwise_distances(P @ B) ** 2)


def test_translation_does_not_change_projected_stress() -> None:
    P, D = _points(8, 5)
    W = np.random.default_rng(6).normal(size=(5, 4))
    shifted = P + np.arange(5.0)  # like a bias: the same vector added to every row
    assert projected_stress(shifted, D, W) == pytest.approx(projected_stress(P, D, W), rel=1e-10)


def test_projected_stress_validates_shapes() -> None:
    P, D = _points(6, 7)
    with pytest.raises(ValueError, match="projection must have shape"):
        projected_stress(P, D, np.eye(4))
    with pytest.raises(ValueError, match="empty"):
        projected_stress(P, D, [])
    with pytest.raises(ValueError, match="shape"):
        projected_stress(P[0], D, np.eye(5))


def test_random_map_stress_is_seeded_and_scale_free() -> None:
    P, D = _points(10, 8)
    a = random_map_stress(P, D, (4, 4), n_draws=6, seed=3)
    b = random_map_stress(P, D, (4, 4), n_draws=6, seed=3)
    c = random_map_stress(10.0 * P, D, (4, 4), n_draws=6, seed=3)
    assert np.array_equal(a, b) and np.allclose(a, c, atol=1e-12)
    assert not np.array_equal(a, random_map_stress(P, D, (4, 4), n_draws=6, seed=4))
    with pytest.raises(ValueError, match="widths"):
        random_map_stress(P, D, ())


# ----------------------------------------------------------------- model access
def test_query_key_maps_orientation(tiny_bert: torch.nn.Module) -> None:
    maps = query_key_maps(tiny_bert)
    assert len(maps) == 2
    X = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    att = tiny_bert.encoder.layer[1].attention.self
    with torch.no_grad():
        q = (att.query(X) - att.query.bias).double().numpy()
        k = (att.key(X) - att.key.bias).double().numpy()
    assert np.allclose(X.double().numpy() @ maps[1]["query"], q, atol=1e-6)
    assert np.allclose(X.double().numpy() @ maps[1]["key"], k, atol=1e-6)


def test_positional_input_matches_its_definition(tiny_bert: torch.nn.Module) -> None:
    emb = tiny_bert.embeddings
    W = emb.word_embeddings.weight.detach().double().numpy()
    T = emb.position_embeddings.weight.detach().double().numpy()
    s0 = emb.token_type_embeddings.weight.detach().double().numpy()[0]
    gamma = emb.LayerNorm.weight.detach().double().numpy()
    # brute force: every (token, row) pair
    X = W[:, None, :] + s0 + T[None, :, :]
    sigma_bar = np.sqrt(X.var(axis=2).mean())
    rows = T[3:3 + 6]
    expected = gamma * (rows - rows.mean(axis=1, keepdims=True)) / sigma_bar
    got = positional_input(tiny_bert, 6, offset=3)
    assert np.allclose(got, expected, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="do not fit"):
        positional_input(tiny_bert, 24, offset=1)


def test_positional_input_is_the_embedding_layers_positional_part(tiny_bert: torch.nn.Module) -> None:
    """Differences of the embedding output between positions, for a fixed token, are close to
    differences of the positional input (exact up to the token's own sigma)."""
    ids = torch.full((1, 10), 7)
    with torch.no_grad():
        out = tiny_bert.embeddings(input_ids=ids)[0].double().numpy()  # (10, 8)
    Pi = positional_input(tiny_bert, 10, offset=0)
    dout = out - out[0]
    dpi = Pi - Pi[0]
    cos = (dout * dpi).sum() / np.linalg.norm(dout) / np.linalg.norm(dpi)
    assert cos > 0.9


def test_positional_input_error_vanishes_when_sigma_is_constant(tiny_bert: torch.nn.Module) -> None:
    import copy

    from posgeo.experiments.layers import positional_input_error

    loose = positional_input_error(tiny_bert, 8, [5, 6, 7])
    assert loose["median"] > 1e-2  # random tiny embeddings: sigma varies with the position
    # Exact case: positions on coordinates 0-3, words on 4-7 with zero mean and the same
    # large spread, no token type. Then word and position are uncorrelated, every token has
    # the same sigma, and sigma hardly depends on the position: the linearisation is exact.
    model = copy.deepcopy(tiny_bert)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        w = torch.zeros(40, 8)
        w[:, 4:] = torch.randn(40, 4, generator=g)
        w[:, 4:] -= w[:, 4:].mean(1, keepdim=True)
        w *= 30.0 / w.std(1, unbiased=False, keepdim=True)  # large, but within float32 precision
        model.embeddings.word_embeddings.weight.copy_(w)
        model.embeddings.position_embeddings.weight[:, 4:] = 0.0
        model.embeddings.token_type_embeddings.weight.zero_()
    tight = positional_input_error(model, 8, [5, 6, 7])
    assert tight["max"] < 1e-3 and tight["median cosine"] > 0.999999
    with pytest.raises(ValueError, match="empty"):
        positional_input_error(model, 8, [])


def test_non_bert_model_is_rejected() -> None:
    with pytest.raises(ValueError, match="BERT-architecture"):
        query_key_maps(torch.nn.Linear(2, 2))


def test_layer_and_head_tables(tiny_bert: torch.nn.Module) -> None:
    n = 6
    D = np.abs(np.subtract.outer(np.arange(n, dtype=float), np.arange(n, dtype=float)))
    lt = layer_stress_table(tiny_bert, D)
    X = positional_input(tiny_bert, n)
    assert lt.index.tolist() == [0, 1, 2]
    assert lt.loc[0, "raw"] == stress(X, D)
    maps = query_key_maps(tiny_bert)
    assert lt.loc[2, "optimal"] == projected_stress(X, D, [maps[1]["query"], maps[1]["key"]], scale="optimal")
    ht = head_stress_table(tiny_bert, D, scale="raw")
    assert ht.shape == (2, 2)
    assert ht.loc[1, 1] == projected_stress(X, D, [maps[0]["query"][:, 4:], maps[0]["key"][:, 4:]])
    enc = np.random.default_rng(0).normal(size=(n, 8))
    assert layer_stress_table(tiny_bert, D, encoding=enc).loc[0, "raw"] == stress(enc, D)


# ----------------------------------------------------------------- hidden states
def test_positional_hidden_states_average(tiny_bert: torch.nn.Module) -> None:
    seqs = Sequences.from_list([[5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15, 16], [1, 2]], vocab_size=40)
    corpus = SimpleNamespace(sequences=seqs, options=None)
    H = positional_hidden_states(tiny_bert, corpus, 3, max_sequences=10, batch_size=2, cls_token_id=3,
                                 sep_token_id=4, progress=False, cache=False)
    assert H.shape == (3, 3, 8)
    # sequences 0, 1, 2 reach 3 tokens; each is cut to 3 tokens and wrapped as [CLS] .. [SEP]
    manual = []
    for toks in ([5, 6, 7], [9, 10, 11], [12, 13, 14]):
        with torch.no_grad():
            out = tiny_bert(input_ids=torch.tensor([[3, *toks, 4]]), output_hidden_states=True)
        manual.append(torch.stack(out.hidden_states)[:, 0, 1:4].double().numpy())
    assert np.allclose(H, np.mean(manual, axis=0), atol=1e-6)
    with pytest.raises(ValueError, match="no sequence"):
        positional_hidden_states(tiny_bert, corpus, 9, progress=False, cache=False)


def test_hidden_stress_table() -> None:
    D = np.abs(np.subtract.outer(np.arange(5.0), np.arange(5.0)))
    H = np.stack([np.arange(5.0)[:, None] * [1.0, 0.0], np.arange(5.0)[:, None] * [3.0, 0.0]])
    t = hidden_stress_table(H, D)
    assert t.loc[0, "raw"] == 0.0 and t.loc[1, "raw"] == pytest.approx(4.0) and t.loc[1, "optimal"] == 0.0
    with pytest.raises(ValueError, match="shape"):
        hidden_stress_table(H[0], D)


def test_settings() -> None:
    small, full = layers_settings("small"), layers_settings("full")
    assert small.model is None and full.model == "bert-base-uncased"
    assert small.n_positions == {"sst2": 48, "imdb": 510}
    with pytest.raises(ValueError):
        layers_settings("medium")


def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_layer_stress_plot_colours_by_corpus_and_dashes_the_corrected_target():
    import pandas as pd

    from posgeo.experiments.layers import plot_layer_stress

    t = pd.DataFrame({"optimal": [0.1, 0.2, 0.15], "raw": [1.0, 5.0, 3.0]}, index=pd.Index([0, 1, 2], name="layer"))
    spec = plot_layer_stress({"sst2, plug-in": t, "sst2, corrected": t}, title="projected").to_dict()
    line = spec["layer"][0]
    assert line["mark"]["type"] == "line"
    colours = dict(zip(line["encoding"]["color"]["scale"]["domain"], line["encoding"]["color"]["scale"]["range"]))
    assert colours["sst2, plug-in"] == colours["sst2, corrected"] == "#D55E00"
    dashes = dict(zip(line["encoding"]["strokeDash"]["scale"]["domain"], line["encoding"]["strokeDash"]["scale"]["range"]))
    assert dashes["sst2, corrected"] != dashes["sst2, plug-in"]
    assert {r["stress"] for r in _rows(spec)} == {0.1, 0.2, 0.15}
    assert "scale" not in line["encoding"]["y"]
    logged = plot_layer_stress({"imdb, plug-in": t}, log=True).to_dict()
    assert logged["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"


def test_head_stress_plot_is_a_hoverable_heatmap_with_one_colour_bar():
    import pandas as pd

    from posgeo.experiments.layers import plot_head_stress

    t = pd.DataFrame([[0.1, 0.2], [0.3, 0.4]], index=pd.Index([1, 2], name="layer"), columns=pd.Index([0, 1], name="head"))
    spec = plot_head_stress({"sst2": t, "imdb": t * 0.5}).to_dict()
    assert len(spec["concat"]) == 2 and spec["resolve"]["scale"]["color"] == "shared"
    panel = spec["concat"][0]
    assert panel["mark"]["type"] == "rect"
    assert panel["encoding"]["color"]["scale"]["domain"] == [0.0, 0.4]
    assert {tip["field"] for tip in panel["encoding"]["tooltip"]} == {"layer", "head", "stress"}
    assert {(r["layer"], r["head"], r["stress"]) for r in _rows(spec)} >= {(2, 1, 0.4), (1, 0, 0.05)}


@settings(max_examples=50, deadline=None)
@given(tokens=arrays(np.int64, st.integers(0, 300), elements=st.integers(0, 2999)), k=st.integers(1, 3000))
def test_frequent_tokens_order_is_fixed(tokens, k):
    """Most frequent first, ties by ascending id. With 3,000 ids and at most 300 tokens most ids
    tie (at zero or one), and numpy's unstable argsort scrambles such ties (on arrays above
    its insertion-sort cut-off)."""
    top = frequent_tokens(tokens, k, vocab_size=3000)
    counts = np.bincount(tokens, minlength=3000)
    expected = sorted(range(3000), key=lambda v: (-counts[v], v))[:k]
    assert top.tolist() == expected


def test_frequent_tokens_bad_input():
    with pytest.raises(ValueError, match="k=5 is more than"):
        frequent_tokens([1, 2], 5, vocab_size=4)
    with pytest.raises(ValueError, match="token id 9 is outside"):
        frequent_tokens([1, 9], 2, vocab_size=4)
    with pytest.raises(ValueError, match="negative"):
        frequent_tokens([1, -1], 2, vocab_size=4)
    with pytest.raises(TypeError, match="integer token ids"):
        frequent_tokens([1.5, 2.0], 2, vocab_size=4)
