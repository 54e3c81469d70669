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
from posgeo import (
    layer_stress_table,
    positional_hidden_states,
    positional_input,
    projected_stress,
    query_key_maps,
)


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


def test_non_bert_model_is_rejected() -> None:
    with pytest.raises(ValueError, match="BERT-architecture"):
        query_key_maps(torch.nn.Linear(2, 2))


def test_layer_stress_table(tiny_bert: torch.nn.Module) -> None:
    n = 6
    D = np.abs(np.subtract.outer(np.arange(n, dtype=float), np.arange(n, dtype=float)))
    lt = layer_stress_table(tiny_bert, D)
    X = positional_input(tiny_bert, n)
    assert lt.index.tolist() == [0, 1, 2]
    assert lt.loc[0, "raw"] == stress(X, D)
    maps = query_key_maps(tiny_bert)
    assert lt.loc[2, "optimal"] == projected_stress(X, D, [maps[1]["query"], maps[1]["key"]], scale="optimal")
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
