"""Tests for posgeo._encodings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import (
    alibi_encoding,
    alibi_slopes,
    pairwise_distances,
    random_encoding,
    rope_encoding,
    rope_frequencies,
    sinusoidal_encoding,
)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 40), st.integers(1, 16).map(lambda k: 2 * k))
def test_sinusoidal_gram_is_exactly_toeplitz(n, d):
    P = sinusoidal_encoding(n, d)
    G = P @ P.T
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    lag = np.subtract.outer(np.arange(n), np.arange(n))
    expected = np.cos(lag[:, :, None] * omega).sum(-1)
    np.testing.assert_allclose(G, expected, atol=1e-9)
    np.testing.assert_allclose(np.diag(G), d / 2)


def test_sinusoidal_matches_vaswani_formula():
    P = sinusoidal_encoding(50, 16)
    pos, i = 17, 3
    assert P[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / 16)))
    assert P[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / 16)))


def test_rope_kernel_equals_sinusoidal_for_same_frequencies():
    R, S = rope_encoding(64, 32), sinusoidal_encoding(64, 32)
    np.testing.assert_allclose(R @ R.T, S @ S.T, atol=1e-9)
    # with per-head frequencies the geometry differs
    Rh = rope_encoding(64, 32, head_dim=8)
    assert not np.allclose(pairwise_distances(Rh), pairwise_distances(S))
    # distances depend only on the offset
    D = pairwise_distances(Rh)
    for k in range(1, 5):
        diag = np.diagonal(D, offset=k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-8)


def test_rope_frequency_errors():
    with pytest.raises(ValueError, match="divide"):
        rope_frequencies(12, head_dim=8)
    with pytest.raises(ValueError, match="even"):
        rope_frequencies(6, head_dim=3)


def test_alibi_slopes_reference_values():
    np.testing.assert_allclose(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    s12 = alibi_slopes(12)
    np.testing.assert_allclose(s12[:8], 2.0 ** -np.arange(1, 9))
    np.testing.assert_allclose(s12[8:], 2.0 ** -np.array([0.5, 1.5, 2.5, 3.5]))
    for h in range(1, 40):
        s = alibi_slopes(h)
        assert s.shape == (h,) and np.all((s > 0) & (s < 1)) and len(set(s.tolist())) == h


def test_alibi_encoding_is_a_line_with_norm_of_slopes():
    P = alibi_encoding(10, 12)
    D = pairwise_distances(P)
    lag = np.abs(np.subtract.outer(np.arange(10), np.arange(10)))
    np.testing.assert_allclose(D, np.linalg.norm(alibi_slopes(12)) * lag, atol=1e-12)
    assert np.linalg.matrix_rank(P) == 1


def test_random_encoding_seeded():
    a, b = random_encoding(5, 4, seed=1), random_encoding(5, 4, seed=1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, random_encoding(5, 4, seed=2))


@pytest.mark.parametrize(
    "call, exc, msg",
    [
        (lambda: sinusoidal_encoding(4, 3), ValueError, "even"),
        (lambda: sinusoidal_encoding(0, 4), ValueError, ">= 1"),
        (lambda: sinusoidal_encoding(4.0, 4), TypeError, "int"),
        (lambda: alibi_slopes(0), ValueError, ">= 1"),
        (lambda: random_encoding(3, 3, seed=0, std=0), ValueError, "std"),
    ],
)
def test_bad_arguments(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()
