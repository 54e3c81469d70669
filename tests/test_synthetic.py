"""Tests for posgeo._synthetic: the controlled corpus with known positional marginals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import (
    Corpus,
    hellinger_matrix,
    load_corpus,
    positional_marginals,
    sample_synthetic_sequences,
    synthetic_corpus,
    synthetic_marginals,
)
from _ch06 import circulant_distance as circulant_deviation  # the sinusoids chapter's measure (book/_ch06.py)


def chord(mu: np.ndarray) -> np.ndarray:
    """Reference chord Hellinger matrix sqrt(0.5 * sum (sqrt p - sqrt q)^2), written out independently.

    (The difference form is exact on the diagonal, unlike sqrt(1 - sum sqrt(p q)).)
    """
    s = np.sqrt(mu)
    return np.sqrt(0.5 * ((s[:, None, :] - s[None, :, :]) ** 2).sum(axis=-1))


# ----------------------------------------------------------------------------- marginals
@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    V=st.integers(6, 120),
    gamma=st.floats(0.0, 20.0),
    geometry=st.sampled_from(["ring", "line"]),
    kappa=st.floats(0.1, 200.0),
    seed=st.integers(0, 2**31),
)
def test_marginals_are_strictly_positive_distributions(n, V, gamma, geometry, kappa, seed):
    mu = synthetic_marginals(n, V, nonstationarity=gamma, geometry=geometry, concentration=kappa, seed=seed)
    assert mu.shape == (n, V)
    assert np.all(np.isfinite(mu))
    assert np.all(mu > 0)
    np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)


def test_ring_is_von_mises_bump_analytically():
    n, V, kappa = 8, 16, 2.0
    mu = synthetic_marginals(n, V, concentration=kappa)
    v = np.arange(V)
    for i in range(n):
        expected = np.exp(kappa * np.cos(2 * np.pi * v / V - 2 * np.pi * i / n))
        np.testing.assert_allclose(mu[i], expected / expected.sum(), rtol=1e-12)


@pytest.mark.parametrize("n,V", [(32, 64), (16, 16), (10, 50), (7, 700)])
def test_ring_stationary_hellinger_is_exactly_circulant(n, V):
    D = chord(synthetic_marginals(n, V, nonstationarity=0.0, geometry="ring"))
    assert circulant_deviation(D) < 1e-12
    # explicit: d(i, j) depends only on (j - i) mod n
    i = np.arange(n)
    for k in range(n):
        diag = D[i, (i + k) % n]
        np.testing.assert_allclose(diag, diag[0], atol=1e-12)
    assert D[0, n // 2] > D[0, 1] > 0  # and it is not trivially constant


def test_library_hellinger_matrix_agrees_with_reference():
    mu = synthetic_marginals(32, 64, nonstationarity=0.7)
    np.testing.assert_allclose(hellinger_matrix(mu), chord(mu), atol=1e-10)


@pytest.mark.parametrize("geometry", ["ring", "line"])
def test_nonstationarity_breaks_circulant_structure_monotonically(geometry):
    devs = [
        circulant_deviation(chord(synthetic_marginals(32, 64, nonstationarity=g, geometry=geometry)))
        for g in [0.0, 0.25, 1.0, 4.0]
    ]
    if geometry == "ring":
        assert devs[0] < 1e-12
    assert all(b > a for a, b in zip(devs, devs[1:])), devs
    assert devs[-1] > 0.1


@pytest.mark.parametrize("n,V,kappa", [(32, 64, 4.0), (20, 500, 4.0), (12, 30, 0.5), (40, 200, 50.0)])
def test_line_distances_are_monotone_in_separation(n, V, kappa):
    D = chord(synthetic_marginals(n, V, geometry="line", concentration=kappa))
    for i in range(n):
        right, left = D[i, i:], D[i, : i + 1][::-1]
        assert np.all(np.diff(right) >= -1e-12), i
        assert np.all(np.diff(left) >= -1e-12), i
    assert D[0, -1] > D[0, 1]


def test_line_is_not_a_ring():
    D = chord(synthetic_marginals(32, 64, geometry="line"))
    assert D[0, -1] > 5 * D[0, 1]  # the ends are far apart: no wrapping


def test_seed_only_affects_nonstationary_component():
    a = synthetic_marginals(16, 32, nonstationarity=0.0, seed=0)
    b = synthetic_marginals(16, 32, nonstationarity=0.0, seed=1)
    np.testing.assert_array_equal(a, b)
    c = synthetic_marginals(16, 32, nonstationarity=1.0, seed=0)
    d = synthetic_marginals(16, 32, nonstationarity=1.0, seed=1)
    assert not np.allclose(c, d)
    np.testing.assert_array_equal(c, synthetic_marginals(16, 32, nonstationarity=1.0, seed=0))


def test_mixture_weight_is_gamma_over_one_plus_gamma():
    n, V = 16, 32
    stat = synthetic_marginals(n, V, nonstationarity=0.0)
    pure = synthetic_marginals(n, V, nonstationarity=1e12)  # w -> 1
    mid = synthetic_marginals(n, V, nonstationarity=3.0)  # w = 3/4
    np.testing.assert_allclose(mid, 0.25 * stat + 0.75 * pure, atol=1e-10)


def test_boundary_positions_concentrate_on_few_tokens():
    pure = synthetic_marginals(32, 64, nonstationarity=1e12)
    top3 = np.sort(pure, axis=1)[:, -3:].sum(axis=1)
    assert top3[0] >= 0.5 and top3[-1] >= 0.5
    assert set(np.argsort(pure[0])[-3:]).isdisjoint(np.argsort(pure[-1])[-3:])


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"n_positions": 0}, ValueError, "n_positions"),
        ({"vocab_size": 1}, ValueError, "vocab_size"),
        ({"geometry": "torus"}, ValueError, "ring"),
        ({"nonstationarity": -0.1}, ValueError, "nonstationarity"),
        ({"concentration": 0.0}, ValueError, "concentration"),
        ({"vocab_size": 4, "nonstationarity": 1.0}, ValueError, ">= 6"),
    ],
)
def test_marginals_validate(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        synthetic_marginals(**kwargs)


# ----------------------------------------------------------------------------- sampling
def test_sampled_marginals_converge_to_truth():
    mu = synthetic_marginals(16, 32, nonstationarity=0.5)
    s = sample_synthetic_sequences(mu, 40000, seed=3)
    assert len(s) == 40000 and s.vocab_size == 32
    emp = positional_marginals(s, 16, 32)
    assert np.abs(emp - mu).max() < 0.015


def test_sampling_is_seeded():
    mu = synthetic_marginals(8, 16)
    a = sample_synthetic_sequences(mu, 100, seed=1)
    b = sample_synthetic_sequences(mu, 100, seed=1)
    c = sample_synthetic_sequences(mu, 100, seed=2)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)


def test_sampling_degenerate_rows_exactly():
    mu = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    s = sample_synthetic_sequences(mu, 5)
    assert [x.tolist() for x in s] == [[1, 2, 0]] * 5


def test_variable_lengths_are_prefixes():
    mu = synthetic_marginals(8, 16)
    lens = np.array([8, 0, 3, 5, 1])
    full = sample_synthetic_sequences(mu, 5, seed=4)
    var = sample_synthetic_sequences(mu, 5, seed=4, lengths=lens)
    assert var.lengths.tolist() == lens.tolist()
    for f, v in zip(full, var):
        np.testing.assert_array_equal(f[: v.size], v)


@pytest.mark.parametrize(
    "marg,n,kw,match",
    [
        (np.ones(3) / 3, 5, {}, "shape"),
        (np.array([[0.5, 0.6]]), 5, {}, "sum"),
        (np.array([[1.5, -0.5]]), 5, {}, "non-negative"),
        (np.array([[0.5, 0.5]]), 0, {}, "n_sequences"),
        (np.array([[0.5, 0.5]]), 2, {"lengths": np.array([1, 2])}, r"\[0, 1\]"),
        (np.array([[0.5, 0.5]]), 2, {"lengths": np.array([1])}, "shape"),
        (np.array([[0.5, 0.5]]), 2, {"lengths": "half"}, "full"),
    ],
)
def test_sampling_validates(marg, n, kw, match):
    with pytest.raises(ValueError, match=match):
        sample_synthetic_sequences(marg, n, **kw)


# ----------------------------------------------------------------------------- corpus
def test_synthetic_corpus_defaults_and_splits():
    tr = synthetic_corpus("train", n_sequences=500)
    te = synthetic_corpus("test", n_sequences=500)
    assert isinstance(tr, Corpus) and tr.name == "synthetic" and tr.labels is None
    assert tr.true_marginals.shape == (32, 64) and tr.vocab_size == 64
    assert tr.options["nonstationarity"] == 0.5
    np.testing.assert_array_equal(tr.true_marginals, te.true_marginals)
    assert not np.array_equal(tr.sequences.tokens, te.sequences.tokens)
    again = synthetic_corpus("train", n_sequences=500)
    np.testing.assert_array_equal(tr.sequences.tokens, again.sequences.tokens)
    with pytest.raises(ValueError, match="train"):
        synthetic_corpus("validation")


def test_load_corpus_synthetic_matches_synthetic_corpus():
    a = load_corpus("synthetic", "test", n_sequences=300, geometry="line", seed=5)
    b = synthetic_corpus("test", n_sequences=300, geometry="line", seed=5)
    np.testing.assert_array_equal(a.sequences.tokens, b.sequences.tokens)
    np.testing.assert_array_equal(a.true_marginals, b.true_marginals)
    sub = load_corpus("synthetic", n_sequences=300, max_sequences=50, seed=5)
    assert len(sub) == 50
    assert len(load_corpus("synthetic").sequences) == 20000
    with pytest.raises(TypeError):
        load_corpus("synthetic", n_sequence=3)  # typo is not silently ignored


def test_circulant_deviation_detects():
    assert circulant_deviation(np.zeros((3, 3))) == 0.0
    rng = np.random.default_rng(0)
    assert circulant_deviation(rng.random((6, 6))) > 0.1
