"""Tests for posgeo._geometry: Hellinger distances, MDS, stress."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from posgeo import (
    check_distance_matrix,
    classical_mds,
    double_centered_gram,
    effective_rank,
    hellinger_matrix,
    pairwise_distances,
    stress,
    stress_optimal_mds,
)
from posgeo._geometry import scale_optimal_alpha


def random_distributions(rng, n, v, sparsity=0.0):
    mu = rng.gamma(0.5, size=(n, v))
    if sparsity:
        mu[rng.random((n, v)) < sparsity] = 0.0
        mu[:, 0] += 1e-3
    return mu / mu.sum(axis=1, keepdims=True)


def random_orthogonal(rng, k):
    q, r = np.linalg.qr(rng.normal(size=(k, k)))
    return q * np.sign(np.diag(r))


# ----------------------------------------------------------------------------- Hellinger
def test_hellinger_identical_is_zero_and_disjoint_is_one():
    p = np.array([0.2, 0.3, 0.5, 0.0, 0.0])
    q = np.array([0.0, 0.0, 0.0, 0.4, 0.6])
    D = hellinger_matrix(np.stack([p, p, q]))
    assert D[0, 1] == 0.0
    assert D[0, 2] == pytest.approx(1.0, abs=1e-15)
    fr = hellinger_matrix(np.stack([p, p, q]), metric="fisher-rao")
    assert fr[0, 1] == 0.0 and fr[0, 2] == pytest.approx(np.pi)


def test_hellinger_matches_definition_and_fisher_rao_relation():
    rng = np.random.default_rng(0)
    mu = random_distributions(rng, 6, 20)
    D = hellinger_matrix(mu)
    naive = np.array([[np.sqrt(0.5 * np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)) for b in mu] for a in mu])
    np.testing.assert_allclose(D, naive, atol=1e-12)
    fr = hellinger_matrix(mu, metric="fisher-rao")
    bc = np.sqrt(mu) @ np.sqrt(mu).T
    np.testing.assert_allclose(fr, 2 * np.arccos(np.clip(bc, -1, 1)), atol=1e-7)
    # chord = sqrt(2) sin(theta/2) with theta = FR/2, so chord <= FR / (2 sqrt 2): the chord is shorter than the arc
    assert np.all(D <= fr / (2 * np.sqrt(2)) + 1e-12)
    off = ~np.eye(6, dtype=bool)
    assert np.all(D[off] < fr[off] / (2 * np.sqrt(2)))


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=3, max_value=8), st.integers(min_value=2, max_value=12), st.integers(0, 10**6), st.sampled_from(["chord", "fisher-rao"]))
def test_hellinger_triangle_inequality(n, v, seed, metric):
    rng = np.random.default_rng(seed)
    D = hellinger_matrix(random_distributions(rng, n, v, sparsity=0.3), metric=metric)
    assert np.all(D >= 0) and np.allclose(D, D.T)
    viol = D[:, :, None] - (D[:, None, :] + D[None, :, :])  # d(i,k) <= d(i,j) + d(j,k)
    assert viol.max() <= 1e-9


def test_chord_hellinger_is_exactly_euclidean():
    rng = np.random.default_rng(1)
    mu = random_distributions(rng, 12, 30)
    D = hellinger_matrix(mu)
    np.testing.assert_allclose(pairwise_distances(np.sqrt(mu) / np.sqrt(2)), D, atol=1e-12)
    res = classical_mds(D)
    assert res.stress < 1e-20
    assert res.eigenvalues.min() > -1e-12  # no negative eigenvalue: Euclidean
    # the geodesic distance is not Euclidean in general (40 points on a 5-token simplex)
    fr = classical_mds(hellinger_matrix(random_distributions(rng, 40, 5), metric="fisher-rao"))
    assert fr.eigenvalues.min() < -1e-6  # the geodesic distance is not Euclidean
    assert fr.negative_fraction > 0


@pytest.mark.parametrize(
    "bad, exc, msg",
    [
        ([[0.5, 0.6]], ValueError, "sums to"),
        ([[-0.5, 1.5]], ValueError, "negative"),
        ([[np.nan, 1.0]], ValueError, "NaN"),
        ([0.5, 0.5], ValueError, "2-D"),
        ([["a", "b"]], TypeError, "numeric"),
    ],
)
def test_hellinger_bad_input(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        hellinger_matrix(bad)


def test_hellinger_unknown_metric():
    with pytest.raises(ValueError, match="unknown metric"):
        hellinger_matrix([[1.0]], metric="kl")


# ----------------------------------------------------------------------------- distance checks
@pytest.mark.parametrize(
    "D, msg",
    [
        (np.zeros((2, 3)), "square"),
        (np.array([[0, 1], [2, 0]]), "symmetric"),
        (np.array([[0, -1], [-1, 0]]), "negative"),
        (np.array([[0, np.nan], [np.nan, 0]]), "NaN"),
        (np.array([[1, 1], [1, 1]]), "diagonal"),
        (np.zeros((1, 1)), "at least 2"),
    ],
)
def test_distance_matrix_errors(D, msg):
    with pytest.raises(ValueError, match=msg):
        check_distance_matrix(D)
    with pytest.raises(ValueError, match=msg):
        classical_mds(D)
    with pytest.raises(ValueError, match=msg):
        stress(np.zeros((D.shape[0], 1)), D)


def test_distance_matrix_type_error():
    with pytest.raises(TypeError, match="numeric"):
        check_distance_matrix([["0", "1"], ["1", "0"]])


def test_encoding_shape_mismatch_and_dim_errors():
    D = 1 - np.eye(4)
    with pytest.raises(ValueError, match="rows but the distance matrix describes 4"):
        stress(np.zeros((3, 2)), D)
    with pytest.raises(ValueError, match="larger than the number of points"):
        classical_mds(D, dim=5)
    with pytest.raises(ValueError, match="larger than the number of points"):
        stress_optimal_mds(D, 5)
    with pytest.raises(ValueError, match=">= 1"):
        classical_mds(D, dim=0)
    with pytest.raises(TypeError, match="int"):
        classical_mds(D, dim=2.0)
    with pytest.raises(ValueError, match="unknown scale"):
        stress(np.zeros((4, 1)), D, scale="best")
    with pytest.raises(ValueError, match="all target distances are zero"):
        stress(np.zeros((3, 1)), np.zeros((3, 3)))


# ----------------------------------------------------------------------------- MDS
@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=3, max_value=15), st.integers(min_value=1, max_value=4), st.integers(0, 10**6))
def test_classical_mds_recovers_euclidean_configuration(n, k, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, k))
    D = pairwise_distances(X)
    res = classical_mds(D, dim=min(k, n))
    assert res.stress < 1e-16
    np.testing.assert_allclose(pairwise_distances(res.coords), D, atol=1e-7)
    # up to rotation/reflection and translation: orthogonal Procrustes aligns exactly
    Xc = X - X.mean(0)
    if res.coords.shape[1] == k:
        u, _, vt = np.linalg.svd(res.coords.T @ Xc)
        np.testing.assert_allclose(res.coords @ (u @ vt), Xc, atol=1e-6)


def test_classical_mds_reports_all_eigenvalues_descending_with_negatives():
    D = np.array([[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 3], [1, 1, 3, 0.0]])  # violates Euclidean
    res = classical_mds(D)
    assert res.eigenvalues.shape == (4,)
    assert np.all(np.diff(res.eigenvalues) <= 1e-12)
    assert res.eigenvalues.min() < -1e-6
    assert np.isclose(res.eigenvalues.sum(), np.trace(double_centered_gram(D)))


def test_three_point_counterexample():
    D = 1.0 - np.eye(3)
    cl = classical_mds(D, dim=1)
    assert cl.eigenvalues[0] == pytest.approx(cl.eigenvalues[1])  # the tie
    assert cl.stress >= 1 / 6 - 1e-12
    opt = stress_optimal_mds(D, 1, tol=1e-14)
    assert opt.stress == pytest.approx(1 / 9, abs=1e-9)
    x = np.sort(opt.coords[:, 0])
    np.testing.assert_allclose(x, [-2 / 3, 0, 2 / 3], atol=1e-6)
    assert opt.stress < cl.stress


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=4, max_value=14), st.integers(min_value=1, max_value=3), st.integers(0, 10**6))
def test_stress_optimal_never_worse_than_classical(n, k, seed):
    rng = np.random.default_rng(seed)
    D = hellinger_matrix(random_distributions(rng, n, 10), metric="fisher-rao")
    cl = classical_mds(D, dim=k)
    op = stress_optimal_mds(D, k, max_iter=200)
    assert op.stress <= cl.stress + 1e-12
    assert op.stress == pytest.approx(stress(op.coords, D))


def test_stress_optimal_restarts_and_init():
    rng = np.random.default_rng(3)
    D = hellinger_matrix(random_distributions(rng, 10, 8), metric="fisher-rao")
    a = stress_optimal_mds(D, 2, n_init=3, seed=1)
    b = stress_optimal_mds(D, 2, n_init=3, seed=1)
    assert a.stress == b.stress
    assert a.stress <= stress_optimal_mds(D, 2).stress + 1e-12
    with pytest.raises(ValueError, match="columns but dim"):
        stress_optimal_mds(D, 2, init=np.zeros((10, 3)))


def _guttman_reference(X, D, max_iter, tol):
    """SMACOF as the textbook writes it (de Leeuw 1977; Borg & Groenen, ch. 8), stress computed
    directly from the distances at every step."""
    n = X.shape[0]

    def dist(Y):
        return np.sqrt(((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1))

    def sigma(Y):
        return ((dist(Y) - D) ** 2).sum() / (D**2).sum()

    s_prev, it = sigma(X), 0
    for it in range(1, max_iter + 1):
        E = dist(X)
        B = np.zeros_like(D)
        off = E > 1e-12
        B[off] = -D[off] / E[off]
        np.fill_diagonal(B, 0.0)
        np.fill_diagonal(B, -B.sum(axis=1))
        X_new = B @ X / n
        s_new = sigma(X_new)
        if s_new > s_prev:
            break
        X, done, s_prev = X_new, s_prev - s_new <= tol, s_new
        if done:
            break
    return X, it


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=3, max_value=12), st.integers(min_value=1, max_value=3), st.integers(0, 10**6),
       st.booleans())
def test_stress_optimal_mds_follows_the_textbook_guttman_iterations(n, k, seed, coincident):
    """The buffered iteration (stress from de Leeuw's identity, unmasked division) takes the
    same steps as the plain algorithm, and reaches the same stress from a start with
    coincident points."""
    rng = np.random.default_rng(seed)
    D = hellinger_matrix(random_distributions(rng, n, 10))
    X0 = rng.normal(size=(n, k))
    if coincident:
        X0[1] = X0[0]  # a zero distance: its B entry is 0 in both
    X0 -= X0.mean(axis=0)
    first, _ = _guttman_reference(X0, D, 1, 0.0)  # one step: the zero distance's B entry is 0
    np.testing.assert_allclose(stress_optimal_mds(D, k, init=X0, max_iter=1).coords, first, atol=1e-9)
    ref, it = _guttman_reference(X0, D, 40, 1e-9)
    got = stress_optimal_mds(D, k, init=X0, max_iter=40, tol=1e-9)
    assert got.stress == pytest.approx(stress(ref, D), rel=1e-6)
    if not coincident:  # (points that part from a coincident start are near, where the Gram
        # form of the distance loses digits that the reference's differences keep)
        np.testing.assert_allclose(got.coords, ref, atol=1e-9)
        assert got.n_iter == it


# ----------------------------------------------------------------------------- stress
@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=3, max_value=12), st.integers(min_value=1, max_value=5), st.integers(0, 10**6))
def test_stress_invariant_to_rotation_and_translation(n, k, seed):
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(n, k))
    D = pairwise_distances(rng.normal(size=(n, 3)))
    Q = random_orthogonal(rng, k)
    t = rng.normal(size=k) * 10
    for scale in ("raw", "optimal"):
        assert stress(P @ Q + t, D, scale=scale) == pytest.approx(stress(P, D, scale=scale), rel=1e-9, abs=1e-12)


def test_stress_analytic_values_and_scale():
    D = pairwise_distances(np.arange(4.0)[:, None])
    P = 3 * np.arange(4.0)[:, None]
    assert stress(P, D) == pytest.approx(4.0)  # every distance is 3x: (3d-d)^2/d^2 = 4
    assert stress(P, D, scale="optimal") == pytest.approx(0.0, abs=1e-15)
    assert scale_optimal_alpha(P, D) == pytest.approx(1 / 3)
    assert stress(np.zeros((4, 2)), D) == 1.0
    assert stress(np.zeros((4, 2)), D, scale="optimal") == 1.0


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, (6, 2), elements=st.floats(-5, 5)), st.integers(0, 1000))
def test_scale_optimal_stress_is_minimum_over_alpha(P, seed):
    rng = np.random.default_rng(seed)
    D = pairwise_distances(rng.normal(size=(6, 2)))
    s_opt = stress(P, D, scale="optimal")
    assert 0.0 <= s_opt <= 1.0
    for alpha in np.geomspace(1e-3, 1e3, 25):
        assert s_opt <= stress(alpha * P, D) + 1e-9
    a = scale_optimal_alpha(P, D)
    if 0 < a < np.inf:  # alpha* overflows for subnormal encodings (distances ~1e-313)
        assert stress(a * P, D) == pytest.approx(s_opt, abs=1e-9)


# ----------------------------------------------------------------------------- spectrum
def test_partial_eigendecomposition_matches_full():
    from posgeo import _geometry

    rng = np.random.default_rng(5)
    n = _geometry._PARTIAL_EIG_MIN_N
    X = rng.normal(size=(n, 6)) * [6, 5, 4, 3, 2, 1]
    D = pairwise_distances(X)
    part = classical_mds(D, dim=3)  # partial path
    B = double_centered_gram(D)
    lam, V = np.linalg.eigh(B)
    np.testing.assert_allclose(part.eigenvalues, lam[::-1], atol=1e-8)
    full_coords = V[:, ::-1][:, :3] * np.sqrt(lam[::-1][:3])
    # same embedding up to the sign of each axis
    np.testing.assert_allclose(np.abs(part.coords.T @ full_coords) / (np.linalg.norm(part.coords, axis=0) * np.linalg.norm(full_coords, axis=0))[:, None], np.eye(3), atol=1e-6)
    assert part.stress == pytest.approx(stress(full_coords, D), rel=1e-9)
    again = classical_mds(D, dim=3)
    np.testing.assert_array_equal(part.coords, again.coords)  # deterministic


def test_effective_rank_of_low_rank_configuration():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3)) * [5, 2, 1]
    res = classical_mds(pairwise_distances(X))
    s = effective_rank(res.eigenvalues, energy=0.999)
    assert s.rank_at_energy == 3
    assert 1 < s.entropy_rank < 3
    assert s.cumulative_energy[-1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="energy"):
        effective_rank(res.eigenvalues, energy=0)
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        effective_rank([0.0, -1.0])


# ----------------------------------------------------------------------------- degenerate and extreme inputs
def _decimal_hellinger(p, q):
    """Chord and Fisher-Rao distances of two float vectors, evaluated in 60-digit decimal arithmetic."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    s = sum((Decimal(float(a)).sqrt() - Decimal(float(b)).sqrt()) ** 2 for a, b in zip(p, q))
    x = s.sqrt() / 2  # sin of a quarter of the Fisher-Rao angle: FR = 4 arcsin(|sqrt p - sqrt q| / 2)
    arcsin = x + x**3 / 6 + 3 * x**5 / 40  # x < 1e-4 here: the series is exact to 1e-28
    return float((s / 2).sqrt()), float(4 * arcsin)


def test_all_zero_distances_embed_every_point_at_the_origin():
    Z = np.zeros((4, 4))
    full = classical_mds(Z)
    assert full.coords.shape == (4, 1) and not full.coords.any()
    assert full.stress == 0.0 and not full.eigenvalues.any() and full.eigenvalues.shape == (4,)
    assert full.negative_fraction == 0.0
    two = classical_mds(Z, dim=2)
    assert two.coords.shape == (4, 2) and not two.coords.any() and two.stress == 0.0
    for kwargs in ({}, {"n_init": 2}, {"init": np.ones((4, 2))}):
        sm = stress_optimal_mds(Z, 2, **kwargs)
        assert sm.coords.shape == (4, 2) and not sm.coords.any()
        assert sm.stress == 0.0 and sm.n_iter == 0 and sm.method == "smacof"
    with pytest.raises(ValueError, match="columns but dim"):
        stress_optimal_mds(Z, 2, init=np.ones((4, 3)))  # init is still checked


TRIANGLE = np.array([[0.0, 3.0, 5.0], [3.0, 0.0, 4.0], [5.0, 4.0, 0.0]])  # 3-4-5 right triangle


@pytest.mark.parametrize("s", [1e-300, 1e-170, 1e-120, 1e120, 1e170, 1e200, 1e300])
def test_extreme_scales_are_equivariant(s):
    # classical MDS reproduces the triangle exactly at any scale
    res = classical_mds(TRIANGLE * s)
    assert res.dim == 2 and res.stress < 1e-20
    np.testing.assert_allclose(pairwise_distances(res.coords), TRIANGLE * s, rtol=1e-12)
    ref = classical_mds(TRIANGLE)
    if 1e-150 < s < 1e150:  # the eigenvalues (scale s**2) are representable
        np.testing.assert_allclose(res.eigenvalues, ref.eigenvalues * s**2, rtol=1e-12, atol=1e-12 * s**2 * 16)
        assert res.negative_fraction == pytest.approx(ref.negative_fraction, abs=1e-12)
    else:  # s**2 is not a float64: the eigenvalues overflow (or underflow) and say so
        assert np.isnan(res.negative_fraction) if s > 1 else not res.eigenvalues.any()
    # SMACOF: three equidistant points on a line, optimum 1/9 at s * (-2/3, 0, 2/3)
    eq = stress_optimal_mds((1.0 - np.eye(3)) * s, 1, tol=1e-14)
    assert eq.stress == pytest.approx(1 / 9, abs=1e-9)
    np.testing.assert_allclose(np.sort(eq.coords[:, 0]) / s, [-2 / 3, 0, 2 / 3], atol=1e-6)
    # stress, its scale-optimal version and alpha*
    P = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    for scale in ("raw", "optimal"):
        assert stress(P * s, TRIANGLE * s, scale=scale) == pytest.approx(stress(P, TRIANGLE, scale=scale), rel=1e-12)
    assert stress(P, TRIANGLE * s, scale="optimal") == pytest.approx(stress(P, TRIANGLE, scale="optimal"), rel=1e-12)
    assert scale_optimal_alpha(P, TRIANGLE * s) == pytest.approx(s * scale_optimal_alpha(P, TRIANGLE), rel=1e-12)
    np.testing.assert_allclose(pairwise_distances(P * s), pairwise_distances(P) * s, rtol=1e-15)


def test_stress_of_huge_targets_is_finite():
    D = pairwise_distances(np.arange(4.0)[:, None])
    # the encoding's distances are negligible next to the targets: raw stress is 1 (not NaN)
    assert stress(np.arange(4.0)[:, None], D * 1e200) == pytest.approx(1.0, abs=1e-12)
    assert stress(np.arange(4.0)[:, None], D * 1e200, scale="optimal") == pytest.approx(0.0, abs=1e-15)


def test_hellinger_small_distances_are_accurate():
    p, q = [0.5, 0.5], [0.5 + 1e-9, 0.5 - 1e-9]
    chord, fisher_rao = _decimal_hellinger(p, q)
    assert chord == pytest.approx(1e-9 / np.sqrt(2), rel=1e-6)  # about 7.1e-10
    D = hellinger_matrix([p, q])
    assert D[0, 1] == pytest.approx(chord, rel=1e-12) and D[1, 0] == D[0, 1]
    fr = hellinger_matrix([p, q], metric="fisher-rao")
    assert fr[0, 1] == pytest.approx(fisher_rao, rel=1e-12) and fr[1, 0] == fr[0, 1]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.floats(-14, -5.5), st.sampled_from([0.0, 0.5]))
def test_hellinger_matches_high_precision_reference(seed, log_eps, sparsity):
    rng = np.random.default_rng(seed)
    p = random_distributions(rng, 1, 12, sparsity=sparsity)[0]
    q = p * np.exp(10**log_eps * rng.normal(size=12))  # a nearby distribution, same support
    q /= q.sum()
    far = random_distributions(rng, 1, 12)[0]
    mu = np.stack([p, q, far])
    for metric, col in (("chord", 0), ("fisher-rao", 1)):
        D = hellinger_matrix(mu, metric=metric)
        assert D[0, 1] == pytest.approx(_decimal_hellinger(p, q)[col], rel=1e-12, abs=1e-300)
        np.testing.assert_array_equal(D, D.T)
    assert hellinger_matrix(np.stack([p, p]))[0, 1] == 0.0  # identical rows: exactly zero


def test_stress_optimal_mds_checks_its_options():
    D = 1.0 - np.eye(3)
    with pytest.raises(ValueError, match="n_init must be an int >= 0"):
        stress_optimal_mds(D, 1, n_init=-3)
    with pytest.raises(ValueError, match="n_init must be an int <= 1000"):
        stress_optimal_mds(D, 1, n_init=10**8)
    with pytest.raises(TypeError, match="n_init must be an int"):
        stress_optimal_mds(D, 1, n_init=1e8)
    with pytest.raises(ValueError, match="max_iter must be an int <= 100000"):
        stress_optimal_mds(D, 1, max_iter=10**9)
    with pytest.raises(ValueError, match="max_iter must be an int >= 0"):
        stress_optimal_mds(D, 1, max_iter=-1)
    with pytest.raises(ValueError, match="tol must be finite"):
        stress_optimal_mds(D, 1, tol=float("nan"))
    with pytest.raises(ValueError, match="tol must be >= 0"):
        stress_optimal_mds(D, 1, tol=-1e-6)
    with pytest.raises(TypeError, match="seed must be an int"):
        stress_optimal_mds(D, 1, seed=0.5)
    assert stress_optimal_mds(D, 1, max_iter=0, tol=0.0).n_iter == 0


# --------------------------------------------------------------------------- order-free baselines
def test_regular_simplex_is_equidistant():
    from posgeo._geometry import regular_simplex

    E = pairwise_distances(regular_simplex(6))
    off = E[~np.eye(6, dtype=bool)]
    assert np.allclose(off, 1.0) and np.allclose(np.diag(E), 0.0)


def test_order_free_baselines_closed_forms():
    from posgeo import order_free_baselines

    D = pairwise_distances(np.arange(10.0)[:, None])
    line = np.arange(10.0)[:, None]
    noise = np.random.default_rng(1).normal(size=(10, 3))
    t = order_free_baselines(D, {"line": line, "noise": noise}, n_permutations=200, seed=0)
    # the encoding's own column equals the library's scale-optimal stress
    assert t.loc["line", "optimal"] == pytest.approx(stress(line, D, scale="optimal"), abs=1e-12)
    assert t.loc["noise", "optimal"] == pytest.approx(stress(noise, D, scale="optimal"), abs=1e-12)
    # the simplex: 1 - (sum d)^2 / (m sum d^2)
    d = D[np.triu_indices(10, 1)]
    assert t.loc["regular simplex", "optimal"] == pytest.approx(1 - d.sum() ** 2 / (d.size * (d @ d)))
    # the line knows the order: no permutation fits as well; the permuted interval brackets its mean
    assert t.loc["line", "p"] == pytest.approx(1 / 201) and t.loc["line", "gain"] > 0.1
    assert t.loc["line", "permuted low"] <= t.loc["line", "permuted mean"] <= t.loc["line", "permuted high"]
    # seeded
    again = order_free_baselines(D, {"line": line, "noise": noise}, n_permutations=200, seed=0)
    pd.testing.assert_frame_equal(t, again)


def test_order_free_baselines_reject_bad_input():
    from posgeo import order_free_baselines

    D = pairwise_distances(np.arange(5.0)[:, None])
    with pytest.raises(ValueError, match="level"):
        order_free_baselines(D, {}, level=1.0)
    with pytest.raises(ValueError):
        order_free_baselines(D, {"short": np.zeros((4, 2))})
    with pytest.raises(ValueError, match="n_permutations"):
        order_free_baselines(D, {}, n_permutations=0)


def test_hellinger_of_stored_counts_equals_dense():
    """hellinger_matrix takes PositionalCounts: sparse square-root products, equal to rounding."""
    from posgeo import PositionalCounts, positional_marginals, synthetic_corpus

    corpus = synthetic_corpus(n_sequences=400, seed=2)
    c = PositionalCounts.from_sequences(corpus, 24)
    mu = positional_marginals(corpus, 24, corpus.vocab_size)
    for metric in ("chord", "fisher-rao"):
        assert np.allclose(hellinger_matrix(c, metric=metric), hellinger_matrix(mu, metric=metric), atol=1e-10, rtol=0)


# --------------------------------------------------------------------------- issue 46: inputs and memory
def test_hellinger_matrix_of_a_scipy_sparse_matrix_is_that_of_its_dense_form() -> None:
    """It said "dtype object" (numpy.asarray of a sparse matrix is a 0-d object array)."""
    import scipy.sparse

    mu = np.array([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75], [1.0, 0.0, 0.0]])
    for fmt in (scipy.sparse.csr_matrix, scipy.sparse.coo_matrix, scipy.sparse.csr_array):
        np.testing.assert_array_equal(hellinger_matrix(fmt(mu)), hellinger_matrix(mu))


def test_mds_out_of_memory_says_what_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """A MemoryError inside MDS was raised bare; now it names the computation, its size and the fix."""
    D = pairwise_distances(np.arange(12.0).reshape(6, 2))

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np.linalg, "eigh", exhausted)
    with pytest.raises(MemoryError, match=r"classical MDS of 6 positions ran out of memory .*pass fewer positions"):
        classical_mds(D)
    with pytest.raises(MemoryError, match=r"SMACOF of 6 positions ran out of memory"):
        stress_optimal_mds(D, 2)
    import posgeo.validation

    monkeypatch.setattr(posgeo.validation, "physical_memory", lambda: 1000)  # a machine of 1,000 bytes
    with pytest.raises(ValueError, match=r"classical MDS of 6 positions .*would need"):  # refused before allocating
        classical_mds(D)
