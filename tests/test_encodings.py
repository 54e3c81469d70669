"""Tests for posgeo._encodings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import (
    alibi_encoding,
    pairwise_distances,
    random_encoding,
    rope_encoding,
    sinusoidal_encoding,
)
from posgeo._encodings import alibi_slopes, rope_frequencies


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
        (lambda: sinusoidal_encoding(0, 4), ValueError, ">= 1"),
        (lambda: sinusoidal_encoding(4.0, 4), TypeError, "int"),
        (lambda: alibi_slopes(0), ValueError, ">= 1"),
        (lambda: random_encoding(3, 3, seed=0, std=0), ValueError, "std"),
    ],
)
def test_bad_arguments(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


@pytest.mark.parametrize("base", [0, 0.0, -2.0, 1, 1.0, float("nan"), float("inf"), -float("inf")])
def test_base_must_be_finite_and_above_one(base):
    for call in (
        lambda: sinusoidal_encoding(4, 4, base=base),
        lambda: rope_frequencies(4, base=base),
        lambda: rope_encoding(4, 4, base=base),
    ):
        with pytest.raises(ValueError, match=r"base must be (> 1|finite).*usual value is 10000"):
            call()


def test_base_must_be_a_real_number():
    with pytest.raises(TypeError, match="base must be a real number"):
        rope_frequencies(4, base="10000")
    with pytest.raises(TypeError, match="base must be a real number"):
        sinusoidal_encoding(4, 4, base=True)
    np.testing.assert_allclose(rope_frequencies(4, base=np.float32(100)), [1.0, 0.1], rtol=1e-15)


@pytest.mark.parametrize("d", [1, 3, 7, 15])
def test_odd_d_follows_the_papers_formula(d):
    # Vaswani et al.: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)),
    # read column by column; for odd d the last column (index d-1 = 2i) is a sine
    n, base = 30, 10000.0
    P = sinusoidal_encoding(n, d)
    assert P.shape == (n, d)
    pos = np.arange(n)
    for col in range(d):
        i = col // 2
        f = np.sin if col % 2 == 0 else np.cos
        np.testing.assert_allclose(P[:, col], f(pos / base ** (2 * i / d)), rtol=0, atol=1e-15)
    assert P[0, d - 1] == 0.0  # the lone last column is a sine


def test_even_d_is_unchanged_by_odd_support():
    # the column pairs of even d: exactly the historical computation
    n, d = 40, 16
    omega = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.arange(n, dtype=np.float64)[:, None] * omega[None, :]
    expected = np.empty((n, d))
    expected[:, 0::2], expected[:, 1::2] = np.sin(angles), np.cos(angles)
    np.testing.assert_array_equal(sinusoidal_encoding(n, d), expected)


def test_alibi_refuses_absurd_head_counts():
    with pytest.raises(ValueError, match=r"num_heads must be an int <= 65536"):
        alibi_slopes(2**40)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        alibi_slopes(True)
    s = alibi_slopes(2**16)
    assert s.shape == (2**16,) and np.all((s > 0) & (s < 1))
