"""Tests for posgeo._metrics (monotonicity part) (P1 Conjecture 5 violation rate)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from posgeo import monotonicity_violation_rate
from posgeo._metrics import MonotonicityResult, encoding_distances, monotonicity_violations, offset_reference
from posgeo._metrics import _dense_ranks, _merge_near_ties, _strict_inversions


def _brute_force(E: np.ndarray, R: np.ndarray) -> tuple[int, int, int]:
    """Pure-Python loops over (i, j, k): an independent statement of the definition."""
    n = E.shape[0]
    comparable = violations = ties = 0
    for i in range(n):
        for j, k in itertools.permutations([x for x in range(n) if x != i], 2):
            if R[i, j] < R[i, k]:
                comparable += 1
                if E[i, j] > E[i, k]:
                    violations += 1
                elif E[i, j] == E[i, k]:
                    ties += 1
    return comparable, violations, ties


def _counts(res: MonotonicityResult) -> tuple[int, int, int]:
    return res.comparable, res.violations, res.ties


# ----------------------------------------------------------------- analytic fixtures
def test_points_on_a_line_in_order_have_rate_zero() -> None:
    P = np.arange(20.0)[:, None]
    res = monotonicity_violations(P, progress=False)
    assert res.rate == 0.0 and res.violations == 0 and res.ties == 0
    assert res.comparable > 0


def test_distances_decreasing_in_offset_have_rate_one() -> None:
    n = 15
    E = n - offset_reference(n).astype(float)
    np.fill_diagonal(E, 0.0)
    for method in ("fast", "naive"):
        res = monotonicity_violations(distances=E, method=method, progress=False)
        assert res.rate == 1.0
        assert res.violations == res.comparable


def test_comparable_count_formula_for_offset_reference() -> None:
    # per anchor: C(n-1, 2) pairs minus pairs at equal offsets on both sides
    n = 9
    expected = sum(
        (n - 1) * (n - 2) // 2 - min(i, n - 1 - i) for i in range(n)
    )
    res = monotonicity_violations(np.arange(float(n))[:, None], progress=False)
    assert res.comparable == expected


def test_random_encoding_is_near_one_half() -> None:
    rates = [
        monotonicity_violation_rate(np.random.default_rng(s).normal(size=(64, 32)), progress=False)
        for s in range(3)
    ]
    for r in rates:
        assert abs(r - 0.5) < 0.05


def test_reference_only_matters_through_its_order() -> None:
    # a strictly increasing transform of the offset gives the same counts ...
    P = np.random.default_rng(4).normal(size=(12, 3))
    a = monotonicity_violations(P, progress=False)
    b = monotonicity_violations(P, reference=np.sqrt(offset_reference(12)), progress=False)
    assert _counts(a) == _counts(b)
    # ... and a strictly decreasing one swaps violations and concordant pairs
    c = monotonicity_violations(P, reference=-offset_reference(12).astype(float), progress=False)
    assert c.comparable == a.comparable
    assert c.violations == a.comparable - a.violations - a.ties
    # using E itself as the reference leaves nothing to violate
    E = np.random.default_rng(4).random((12, 12))
    assert monotonicity_violations(distances=E, reference=E, progress=False).rate == 0.0


def test_reference_ties_make_pairs_incomparable() -> None:
    E = np.random.default_rng(0).random((6, 6))
    res = monotonicity_violations(distances=E, reference=np.ones((6, 6)), progress=False)
    assert res.comparable == 0 and np.isnan(res.rate)


def test_tie_policies() -> None:
    # all points equal: every comparable pair is tied in E
    P = np.zeros((7, 2))
    res = {
        t: monotonicity_violations(P, ties=t, progress=False)
        for t in ("half", "violation", "ignore")
    }
    assert res["half"].ties == res["half"].comparable > 0
    assert res["half"].rate == 0.5
    assert res["violation"].rate == 1.0
    assert np.isnan(res["ignore"].rate)
    # the counts do not depend on the policy
    assert len({_counts(r) for r in res.values()}) == 1


def test_rate_wrapper_matches_counts() -> None:
    P = np.random.default_rng(5).integers(0, 3, size=(10, 2)).astype(float)
    res = monotonicity_violations(P, progress=False)
    assert res.rate == pytest.approx((res.violations + 0.5 * res.ties) / res.comparable)
    assert monotonicity_violation_rate(P, progress=False) == res.rate


def test_anchor_subset_adds_up() -> None:
    E = np.random.default_rng(2).integers(0, 4, size=(11, 11)).astype(float)
    full = monotonicity_violations(distances=E, progress=False)
    parts = [
        monotonicity_violations(distances=E, anchors=a, progress=False)
        for a in ([0, 3, 5], [1, 2, 4, 6, 7, 8, 9, 10])
    ]
    assert sum(p.violations for p in parts) == full.violations
    assert sum(p.comparable for p in parts) == full.comparable
    assert sum(p.ties for p in parts) == full.ties


def _circle_counts_exact(n: int) -> tuple[int, int, int]:
    """(comparable, violations, ties) of n points closing a circle, in integer arithmetic.

    The chord to the point at signed offset ``d`` grows with ``min(d mod n, -d mod n)``, so the
    chord order is that integer's order: chords at offsets ``t`` and ``n - t`` are equal.
    """
    comparable = violations = ties = 0
    for i in range(n):
        for j, k in itertools.permutations([x for x in range(n) if x != i], 2):
            if abs(i - j) < abs(i - k):
                comparable += 1
                cj, ck = min((j - i) % n, (i - j) % n), min((k - i) % n, (i - k) % n)
                violations += cj > ck
                ties += cj == ck
    return comparable, violations, ties


@pytest.mark.parametrize("n", [8, 13, 32])
def test_closed_circle_counts_equal_exact_arithmetic(n: int) -> None:
    # Equal chords are rounded apart in float64 (by a few ulp, differently on other CPUs):
    # the tie tolerance makes them the ties they are in exact arithmetic.
    t = 2 * np.pi * np.arange(n) / n
    for radius in (1.0, 1e-3, 250.0):
        ring = radius * np.c_[np.cos(t), np.sin(t)]
        for method in ("fast", "naive"):
            res = monotonicity_violations(ring, method=method, progress=False)
            assert _counts(res) == _circle_counts_exact(n), (radius, method)


@settings(max_examples=80, deadline=None)
@given(st.integers(3, 12), st.integers(0, 2**32 - 1),
       st.floats(1e-6, 1e6), st.sampled_from(["fast", "naive"]))
def test_counts_do_not_move_with_rounding_noise(n: int, seed: int, scale: float, method: str) -> None:
    # what another CPU's rounding does: relative changes of 1e-14 leave every count unchanged
    rng = np.random.default_rng(seed)
    E = rng.integers(0, 4, size=(n, n)).astype(float) * scale
    noisy = E * (1 + rng.uniform(-1e-14, 1e-14, size=E.shape))
    a = monotonicity_violations(distances=E, method=method, progress=False)
    b = monotonicity_violations(distances=noisy, method=method, progress=False)
    assert _counts(a) == _counts(b)
    # compared exactly (tie_rtol=0), the unperturbed matrix gives the same counts
    assert _counts(monotonicity_violations(distances=E, tie_rtol=0, method=method, progress=False)) == _counts(a)


@settings(max_examples=100, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 15)),
           elements=st.floats(-10, 10, allow_nan=False)),
    st.sampled_from([0.0, 1e-12, 1e-3]),
)
def test_merge_near_ties_groups_by_gaps(X: np.ndarray, rtol: float) -> None:
    out = _merge_near_ties(X, rtol)
    if rtol == 0.0:
        assert out is X
    for x, y in zip(X, out):
        tol = rtol * np.abs(x).max()
        order = np.argsort(x, kind="stable")
        xs, ys = x[order], y[order]
        assert set(ys.tolist()) <= set(xs.tolist())  # each value becomes one of the row's values
        assert np.all(np.diff(ys) >= 0)  # the order is kept (ties may appear, never reversals)
        for s in range(len(xs) - 1):
            # successive values share a group exactly when their gap is at most the tolerance
            assert (ys[s] == ys[s + 1]) == (xs[s + 1] - xs[s] <= tol)


def test_accepts_torch_tensor() -> None:
    torch = pytest.importorskip("torch")
    P = np.random.default_rng(1).normal(size=(10, 3))
    expected = monotonicity_violation_rate(P, progress=False)
    assert monotonicity_violation_rate(torch.tensor(P), progress=False) == expected


# ----------------------------------------------------------------- fast == naive
@st.composite
def _distance_problems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray | None]:
    n = draw(st.integers(3, 12))
    levels = draw(st.integers(1, 5))  # few integer levels -> many ties
    E = draw(arrays(np.float64, (n, n), elements=st.integers(0, levels).map(float)))
    if draw(st.booleans()):
        R = draw(arrays(np.float64, (n, n), elements=st.integers(0, 3).map(float)))
    else:
        R = None
    return E, R


@settings(max_examples=150, deadline=None)
@given(_distance_problems())
def test_fast_equals_naive_equals_brute_force(
    problem: tuple[np.ndarray, np.ndarray | None],
) -> None:
    E, R = problem
    fast = monotonicity_violations(distances=E, reference=R, progress=False)
    naive = monotonicity_violations(distances=E, reference=R, method="naive", progress=False)
    assert _counts(fast) == _counts(naive)
    ref = offset_reference(E.shape[0]) if R is None else R
    assert _counts(naive) == _brute_force(E, ref)
    for ties in ("half", "violation", "ignore"):
        kw = dict(distances=E, reference=R, ties=ties, progress=False)
        a = monotonicity_violation_rate(**kw)  # type: ignore[arg-type]
        b = monotonicity_violation_rate(method="naive", **kw)  # type: ignore[arg-type]
        assert (np.isnan(a) and np.isnan(b)) or a == b


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(3, 14),
    seed=st.integers(0, 2**32 - 1),
    repeat=st.booleans(),
)
def test_fast_equals_naive_on_encodings_with_repeated_points(
    n: int, seed: int, repeat: bool
) -> None:
    rng = np.random.default_rng(seed)
    P = rng.integers(-2, 3, size=(n, 2)).astype(float)  # integer grid: tied distances
    if repeat:
        P[rng.integers(0, n, size=n // 2)] = P[0]  # repeated points: zero distances
    fast = monotonicity_violations(P, progress=False)
    naive = monotonicity_violations(P, method="naive", progress=False)
    assert _counts(fast) == _counts(naive)


def test_fast_equals_naive_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import posgeo._metrics as mod

    monkeypatch.setattr(mod, "_CHUNK_ELEMENTS", 40)  # several anchors per chunk, many chunks
    E = np.random.default_rng(3).integers(0, 6, size=(21, 21)).astype(float)
    fast = monotonicity_violations(distances=E, progress=False)
    naive = monotonicity_violations(distances=E, method="naive", progress=False)
    assert _counts(fast) == _counts(naive)


@settings(max_examples=100, deadline=None)
@given(
    arrays(np.int64, st.tuples(st.integers(1, 4), st.integers(0, 20)), elements=st.integers(-3, 4))
)
def test_strict_inversion_engine(X: np.ndarray) -> None:
    expected = [
        sum(int(x[s] > x[t]) for s in range(len(x)) for t in range(s + 1, len(x))) for x in X
    ]
    assert _strict_inversions(X).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(1, 12)),
        elements=st.integers(-2, 2).map(float),
    )
)
def test_dense_ranks(X: np.ndarray) -> None:
    ranks, tied = _dense_ranks(X)
    for x, rk, t in zip(X, ranks, tied):
        levels = sorted(set(x.tolist()))
        assert rk.tolist() == [levels.index(v) for v in x.tolist()]
        assert t == sum(int(x[s] == x[u]) for s in range(len(x)) for u in range(s + 1, len(x)))


# ----------------------------------------------------------------- errors
def test_requires_exactly_one_input() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        monotonicity_violations(progress=False)
    with pytest.raises(ValueError, match="exactly one"):
        monotonicity_violations(np.zeros((4, 2)), distances=np.zeros((4, 4)), progress=False)


def test_non_square_distances() -> None:
    with pytest.raises(ValueError, match=r"square.*\(3, 4\)"):
        monotonicity_violations(distances=np.zeros((3, 4)), progress=False)


def test_nan_inputs() -> None:
    E = np.ones((4, 4))
    E[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        monotonicity_violations(distances=E, progress=False)
    P = np.zeros((4, 2))
    P[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        monotonicity_violations(P, progress=False)
    with pytest.raises(ValueError, match="NaN"):
        monotonicity_violations(distances=np.ones((4, 4)), reference=E, progress=False)


def test_shape_mismatch_and_bad_encoding_shape() -> None:
    with pytest.raises(ValueError, match=r"reference has shape \(5, 5\)"):
        monotonicity_violations(np.zeros((4, 2)), reference=np.zeros((5, 5)), progress=False)
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        monotonicity_violations(np.zeros(5), progress=False)


def test_too_few_positions_and_bad_options() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        monotonicity_violations(np.zeros((2, 2)), progress=False)
    with pytest.raises(ValueError, match="ties"):
        monotonicity_violations(
            np.zeros((4, 2)), ties="zero", progress=False  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="method"):
        monotonicity_violations(
            np.zeros((4, 2)), method="slow", progress=False  # type: ignore[arg-type]
        )
    with pytest.raises(ValueError, match="anchors"):
        monotonicity_violations(np.zeros((4, 2)), anchors=[0, 4], progress=False)
    with pytest.raises(TypeError, match="numeric"):
        monotonicity_violations(distances=[["a", "b"], ["c", "d"]], progress=False)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        offset_reference(0)
    for bad in (-1e-9, float("nan"), 0.01):
        with pytest.raises(ValueError, match="tie_rtol.*default is 1e-12"):
            monotonicity_violations(np.zeros((4, 2)), tie_rtol=bad, progress=False)
    with pytest.raises(TypeError, match="tie_rtol must be a real number"):
        monotonicity_violation_rate(np.zeros((4, 2)), tie_rtol="1e-12", progress=False)  # type: ignore[arg-type]


def test_offset_reference_refuses_infinite_float_and_bool() -> None:
    with pytest.raises(TypeError, match="n must be an int"):
        offset_reference(float("inf"))
    with pytest.raises(TypeError, match="n must be an int"):
        offset_reference(True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="n must be an int"):
        offset_reference(3.0)  # type: ignore[arg-type]
    assert offset_reference(np.int64(2)).tolist() == [[0, 1], [1, 0]]


def test_complex_input_is_refused_not_truncated() -> None:
    P = np.arange(5.0)[:, None] * (1 + 1j)  # a line in the complex plane
    E = np.abs(np.subtract.outer(np.arange(5.0), np.arange(5.0)))
    match = "must be real, got a complex array"
    with pytest.raises(TypeError, match="P " + match):
        monotonicity_violations(P, progress=False)
    with pytest.raises(TypeError, match="P " + match):
        monotonicity_violation_rate(P, progress=False)
    with pytest.raises(TypeError, match="distances " + match):
        monotonicity_violations(distances=E + 0j, progress=False)
    with pytest.raises(TypeError, match="reference " + match):
        monotonicity_violations(distances=E, reference=E * 1j, progress=False)
    with pytest.raises(TypeError, match="P " + match):
        encoding_distances(P)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="P " + match):
        monotonicity_violations(torch.tensor(P), progress=False)
    # object arrays of real numbers are still read
    assert monotonicity_violations(distances=E.astype(object), progress=False).rate == 0.0
