"""Tests for posgeo._metrics (adjacency part) (cosine self-similarity and P2's adjacency score)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from posgeo import adjacency_score, cosine_similarity_matrix
from posgeo._metrics import adjacency_row_scores


def _brute_row_scores(C: np.ndarray, ties: str, include_diagonal: bool) -> list[float]:
    """Pure-Python loops: an independent statement of the definition."""
    n = C.shape[0]
    out = []
    for k in range(n):
        last = k if include_diagonal else k - 1
        pairs = [(i, j) for i in range(last + 1) for j in range(i + 1, last + 1)]
        if not pairs:
            out.append(float("nan"))
            continue
        s = 0.0
        for i, j in pairs:
            if C[k, i] < C[k, j]:
                s += 1
            elif C[k, i] == C[k, j] and ties == "half":
                s += 0.5
        out.append(s / len(pairs))
    return out


# ----------------------------------------------------------------- cosine matrix
def test_cosine_matrix_known_values() -> None:
    X = np.array([[1.0, 0.0], [0.0, 3.0], [-2.0, 0.0], [1.0, 1.0]])
    C = cosine_similarity_matrix(X)
    expected = np.array(
        [
            [1, 0, -1, 2**-0.5],
            [0, 1, 0, 2**-0.5],
            [-1, 0, 1, -(2**-0.5)],
            [2**-0.5, 2**-0.5, -(2**-0.5), 1],
        ]
    )
    np.testing.assert_allclose(C, expected, atol=1e-12)
    assert np.all(np.diag(C) == 1.0)


def test_cosine_matrix_batched_and_torch() -> None:
    X = np.random.default_rng(0).normal(size=(3, 5, 4))
    C = cosine_similarity_matrix(X)
    assert C.shape == (3, 5, 5)
    for b in range(3):
        np.testing.assert_allclose(C[b], cosine_similarity_matrix(X[b]))
    Ct = cosine_similarity_matrix(torch.tensor(X, dtype=torch.float32))
    assert isinstance(Ct, torch.Tensor) and Ct.dtype == torch.float32 and Ct.shape == (3, 5, 5)
    np.testing.assert_allclose(Ct.numpy(), C, atol=1e-6)
    assert torch.all(Ct.diagonal(dim1=-2, dim2=-1) == 1.0)
    # scale invariance
    np.testing.assert_allclose(cosine_similarity_matrix(X * 7.0), C, atol=1e-12)


def test_cosine_matrix_errors() -> None:
    with pytest.raises(ValueError, match="zero vectors"):
        cosine_similarity_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="zero vectors"):
        cosine_similarity_matrix(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        cosine_similarity_matrix(np.ones(4))
    with pytest.raises(ValueError, match="NaN"):
        cosine_similarity_matrix(np.array([[1.0, np.nan], [1.0, 1.0]]))


# ----------------------------------------------------------------- analytic fixtures
def test_all_ones_strict_zero_half_one_half() -> None:
    C = np.ones((9, 9))
    assert adjacency_score(C, progress=False) == 0.0
    assert adjacency_score(C, ties="half", progress=False) == 0.5
    assert adjacency_score(C, ties="half", include_diagonal=False, progress=False) == 0.5


def test_perfect_adjacent_pattern_scores_one() -> None:
    k = np.arange(12)
    C = -np.abs(k[:, None] - k[None, :]).astype(float)
    for method in ("fast", "naive"):
        assert adjacency_score(C, method=method, progress=False) == 1.0
        assert adjacency_score(C, method=method, include_diagonal=False, progress=False) == 1.0
    # reversed pattern scores 0
    assert adjacency_score(-C, progress=False) == 0.0


def test_random_symmetric_matrix_near_one_half() -> None:
    rng = np.random.default_rng(0)
    A = rng.normal(size=(200, 200))
    C = (A + A.T) / 2
    # with a random diagonal, the diagonal is not special
    assert abs(adjacency_score(C, progress=False) - 0.5) < 0.02
    assert abs(adjacency_score(C, include_diagonal=False, progress=False) - 0.5) < 0.02


def test_diagonal_inflates_random_cosine_baseline() -> None:
    # cosine diagonal is 1 (largest): row k scores 1/2 + 1/(k+1) in expectation
    X = np.random.default_rng(1).normal(size=(64, 256, 64))
    rows = adjacency_row_scores(cosine_similarity_matrix(X), progress=False).mean(axis=0)
    k = np.arange(1, 256)
    assert np.abs(rows[1:] - (0.5 + 1.0 / (k + 1))).mean() < 0.01


def test_row_scores_shape_and_nan_rows() -> None:
    C = np.random.default_rng(2).random((2, 6, 6))
    rows = adjacency_row_scores(C, progress=False)
    assert rows.shape == (2, 6)
    assert np.isnan(rows[:, 0]).all() and not np.isnan(rows[:, 1:]).any()
    rows_nd = adjacency_row_scores(C, include_diagonal=False, progress=False)
    assert np.isnan(rows_nd[:, :2]).all() and not np.isnan(rows_nd[:, 2:]).any()
    # batch score = mean over the batch of the per-matrix scores
    per = [adjacency_score(c, progress=False) for c in C]
    assert adjacency_score(C, progress=False) == pytest.approx(np.mean(per))


def test_only_causal_part_is_read() -> None:
    C = np.random.default_rng(3).random((7, 7))
    C2 = C.copy()
    C2[np.triu_indices(7, 1)] = 99.0  # strictly upper triangle: the future
    np.testing.assert_array_equal(
        adjacency_row_scores(C, progress=False), adjacency_row_scores(C2, progress=False)
    )


# ----------------------------------------------------------------- fast == naive
@settings(max_examples=150, deadline=None)
@given(
    C=st.integers(2, 12).flatmap(
        lambda n: arrays(
            np.float64,
            st.sampled_from([(n, n), (2, n, n)]),
            elements=st.integers(0, 3).map(float),  # few levels -> many ties
        )
    ),
    ties=st.sampled_from(["strict", "half"]),
    include_diagonal=st.booleans(),
)
def test_fast_equals_naive_equals_brute_force(
    C: np.ndarray, ties: str, include_diagonal: bool
) -> None:
    if not include_diagonal and C.shape[-1] < 3:
        include_diagonal = True
    kw = dict(ties=ties, include_diagonal=include_diagonal, progress=False)
    fast = adjacency_row_scores(C, **kw)
    naive = adjacency_row_scores(C, method="naive", **kw)
    np.testing.assert_array_equal(fast, naive)
    mats = C if C.ndim == 3 else C[None]
    brute = np.array([_brute_row_scores(m, ties, include_diagonal) for m in mats])
    np.testing.assert_allclose(np.atleast_2d(fast), brute, rtol=0, atol=1e-12)


def test_fast_equals_naive_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import posgeo._metrics as mod

    monkeypatch.setattr(mod, "_CHUNK_ELEMENTS", 64)
    C = np.random.default_rng(4).integers(0, 5, size=(3, 17, 17)).astype(float)
    np.testing.assert_array_equal(
        adjacency_row_scores(C, ties="half", progress=False),
        adjacency_row_scores(C, ties="half", method="naive", progress=False),
    )


# ----------------------------------------------------------------- errors
def test_errors() -> None:
    with pytest.raises(ValueError, match=r"square.*\(3, 4\)"):
        adjacency_score(np.zeros((3, 4)), progress=False)
    with pytest.raises(ValueError, match="square"):
        adjacency_score(np.zeros(4), progress=False)
    bad = np.ones((4, 4))
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        adjacency_score(bad, progress=False)
    with pytest.raises(ValueError, match="at least 2"):
        adjacency_score(np.ones((1, 1)), progress=False)
    with pytest.raises(ValueError, match="at least 3"):
        adjacency_score(np.ones((2, 2)), include_diagonal=False, progress=False)
    with pytest.raises(ValueError, match="ties"):
        adjacency_score(np.ones((3, 3)), ties="loose", progress=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method"):
        adjacency_score(np.ones((3, 3)), method="quick", progress=False)  # type: ignore[arg-type]


# ----------------------------------------------------------------- complex input, extreme scales
def test_complex_input_is_refused_not_truncated() -> None:
    X = np.array([[1.0, 0.0], [1j, 0.0], [1.0, 1.0]])  # cos(x0, x1) is not cos of the real parts
    with pytest.raises(TypeError, match="X must be real, got a complex array"):
        cosine_similarity_matrix(X)
    with pytest.raises(TypeError, match="X must be real, got a complex array"):
        cosine_similarity_matrix(torch.tensor(X))
    C = np.eye(3) + 0j
    for f in (adjacency_score, adjacency_row_scores):
        with pytest.raises(TypeError, match="C must be real, got a complex array"):
            f(C, progress=False)
        with pytest.raises(TypeError, match="C must be real, got a complex array"):
            f(torch.tensor(C), progress=False)


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-160, 1e160, 1e200, 1e300])
def test_cosine_is_scale_invariant_per_row(scale: float) -> None:
    X = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, -3.0]])
    expected = cosine_similarity_matrix(X)
    np.testing.assert_allclose(expected[0], [1.0, 1.0, np.sqrt(0.5), -np.sqrt(0.5)], rtol=1e-15)
    for rows in ([0], [0, 1], [0, 1, 2, 3]):
        Y = X.copy()
        Y[rows] *= scale
        np.testing.assert_allclose(cosine_similarity_matrix(Y), expected, rtol=1e-15, atol=1e-16)
        np.testing.assert_allclose(cosine_similarity_matrix(Y[None]), expected[None], rtol=1e-15, atol=1e-16)


def test_cosine_of_huge_rows_in_torch_float32() -> None:
    X = torch.tensor([[1e20, 1e20], [1e20, 1e20], [1e-30, 0.0]], dtype=torch.float32)
    C = cosine_similarity_matrix(X)
    assert C.dtype == torch.float32
    np.testing.assert_allclose(C.numpy(), [[1, 1, 0.70710677], [1, 1, 0.70710677], [0.70710677, 0.70710677, 1]], rtol=1e-6)
