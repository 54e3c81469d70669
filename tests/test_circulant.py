"""Tests for posgeo.experiments.circulant: circulant/Toeplitz structure and Fourier alignment."""

from __future__ import annotations

import math

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from posgeo.experiments.circulant import (
    STATIONARITY_MEASURES,
    circulant_distance,
    equivalent_knob,
    fourier_alignment,
    frequency_energy,
    nearest_circulant,
    nearest_toeplitz,
    plot_fourier_modes,
    plot_offset_kernels,
    plot_stationarity_sweep,
    stationarity_measures,
    stationarity_sweep,
    toeplitz_floor_report,
    toeplitz_profile,
)
from posgeo import (
    double_centered_gram,
    hellinger_matrix,
    rope_encoding,
    sinusoidal_encoding,
    synthetic_marginals,
)


def symmetric_circulant(c_half: np.ndarray, n: int) -> np.ndarray:
    """Symmetric circulant matrix from c_0..c_{n//2} (c_k = c_{n-k})."""
    k = np.arange(n)
    c = np.asarray(c_half)[np.minimum(k, n - k)]
    return c[(k[None, :] - k[:, None]) % n]


# ----------------------------------------------------------------------------- nearest structures
def test_nearest_circulant_and_toeplitz_average_the_right_diagonals() -> None:
    B = np.arange(9.0).reshape(3, 3)
    C = nearest_circulant(B)
    # wrapped diagonal 1: (0,1)=1, (1,2)=5, (2,0)=6 -> mean 4
    assert C[0, 1] == C[1, 2] == C[2, 0] == pytest.approx(4.0)
    assert np.allclose(np.diag(C), 4.0)
    T = nearest_toeplitz(B)
    # diagonal +1: (0,1)=1, (1,2)=5 -> 3; diagonal -2: (2,0)=6
    assert T[0, 1] == T[1, 2] == pytest.approx(3.0)
    assert T[2, 0] == 6.0 and T[0, 2] == 2.0


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 9), st.integers(2, 9)).map(lambda s: (s[0], s[0])),
              elements=st.floats(-10, 10, allow_nan=False)))
def test_nearest_structures_are_orthogonal_projections(B: np.ndarray) -> None:
    for proj in (nearest_circulant, nearest_toeplitz):
        P = proj(B)
        np.testing.assert_allclose(proj(P), P, atol=1e-12)  # idempotent
        # the residual is orthogonal to the structured matrix: Pythagoras
        assert np.sum((B - P) * P) == pytest.approx(0.0, abs=1e-8 * max(1.0, np.sum(B * B)))
    d_c = circulant_distance(B)
    d_t = circulant_distance(B, kind="toeplitz")
    assert 0.0 <= d_t <= d_c + 1e-12 <= 1.0 + 1e-12  # circulant matrices are Toeplitz


def test_circulant_distance_zero_for_circulant_positive_otherwise() -> None:
    rng = np.random.default_rng(0)
    n = 10
    c = rng.normal(size=n)
    i = np.arange(n)
    C = c[(i[None, :] - i[:, None]) % n]  # general (non-symmetric) circulant
    assert circulant_distance(C) < 1e-15
    assert circulant_distance(C, kind="toeplitz") < 1e-15
    T = np.abs(i[:, None] - i[None, :]).astype(float)  # Toeplitz, not circulant
    assert circulant_distance(T, kind="toeplitz") < 1e-15
    assert circulant_distance(T) > 0.1
    R = rng.normal(size=(n, n))
    assert circulant_distance(R) > 0.5 and circulant_distance(R, kind="toeplitz") > 0.5
    assert circulant_distance(np.zeros((3, 3))) == 0.0


def test_validation_messages_name_the_fix() -> None:
    with pytest.raises(ValueError, match="square"):
        circulant_distance(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="unknown kind"):
        circulant_distance(np.eye(3), kind="hankel")
    with pytest.raises(ValueError, match="symmetric"):
        fourier_alignment(np.triu(np.ones((4, 4))))
    with pytest.raises(ValueError, match="between 1 and n"):
        fourier_alignment(np.eye(4), k=5)
    with pytest.raises(TypeError, match="k must be an int"):
        fourier_alignment(np.eye(4), k=2.0)
    with pytest.raises(ValueError, match="unknown basis"):
        fourier_alignment(np.eye(4), basis="wavelet")


# ----------------------------------------------------------------------------- sinusoids and RoPE
@pytest.mark.parametrize("n,d", [(16, 8), (48, 384), (33, 62)])
def test_sinusoidal_gram_is_exactly_toeplitz(n: int, d: int) -> None:
    P = sinusoidal_encoding(n, d)
    G = P @ P.T
    assert circulant_distance(G, kind="toeplitz") < 1e-13
    # and its defining sequence is the kernel sum_k cos(offset * omega_k)
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    kernel = np.cos(np.arange(n)[:, None] * omega[None, :]).sum(axis=1)
    np.testing.assert_allclose(toeplitz_profile(G), kernel, atol=1e-10)
    # ... but not circulant: the frequencies are not multiples of 2 pi / n
    assert circulant_distance(G) > 1e-3


def test_rope_kernel_equals_sinusoidal_without_heads_and_differs_with_heads() -> None:
    n, d = 40, 64
    S = sinusoidal_encoding(n, d)
    R = rope_encoding(n, d)
    np.testing.assert_allclose(R @ R.T, S @ S.T, atol=1e-10)
    Rh = rope_encoding(n, d, head_dim=16)
    Gh = Rh @ Rh.T
    assert circulant_distance(Gh, kind="toeplitz") < 1e-13  # still a function of the offset
    assert np.abs(toeplitz_profile(Gh) - toeplitz_profile(S @ S.T)).max() > 1.0


# ----------------------------------------------------------------------------- Fourier energy
def test_frequency_energy_sums_to_one_and_locates_pairs() -> None:
    n = 12
    i = np.arange(n)
    V = np.stack(
        [np.cos(2 * np.pi * 2 * i / n), np.sin(2 * np.pi * 5 * i / n + 1.0), np.cos(np.pi * i), np.ones(n)], axis=1
    )
    E = frequency_energy(V)
    assert E.shape == (7, 4)
    np.testing.assert_allclose(E.sum(axis=0), 1.0, atol=1e-12)
    assert E[2, 0] == pytest.approx(1.0) and E[5, 1] == pytest.approx(1.0)
    assert E[6, 2] == pytest.approx(1.0) and E[0, 3] == pytest.approx(1.0)
    # a ramp spreads over many frequencies: no pair holds it
    assert frequency_energy(i - i.mean()).max() < 0.7


def test_frequency_energy_rejects_zero_vectors() -> None:
    with pytest.raises(ValueError, match="non-zero"):
        frequency_energy(np.zeros((5, 1)))


@pytest.mark.parametrize("n", [12, 15, 32])
def test_fourier_alignment_of_exact_circulant_is_perfect_with_degenerate_pairs(n: int) -> None:
    # decreasing positive spectrum in |f|: every f >= 1 is a doubly degenerate eigenvalue
    half = n // 2
    lam = 1.0 / (1.0 + np.arange(half + 1)) ** 2
    lam[0] = 0.0  # double-centred: the constant is in the null space
    k_all = np.arange(n)
    c = np.real(np.fft.ifft(lam[np.minimum(k_all, n - k_all)]))
    C = symmetric_circulant(c[: half + 1], n)
    for basis in ("dft", "sinusoid"):
        fa = fourier_alignment(C, k=6, basis=basis)
        np.testing.assert_allclose(fa.energy, 1.0, atol=1e-9)
        np.testing.assert_allclose(fa.frequency, [1, 1, 2, 2, 3, 3], atol=1e-6)
        np.testing.assert_allclose(fa.fits, fa.eigenvectors, atol=1e-6)
    fa = fourier_alignment(C, k=6)
    assert fa.subspace_energy == pytest.approx(1.0, abs=1e-12)
    # odd k cuts a degenerate pair: the eigenspace is then not unique, the measures still are 1
    fa5 = fourier_alignment(C, k=5)
    assert fa5.mean_energy == pytest.approx(1.0, abs=1e-12)
    assert fa5.subspace_energy == pytest.approx(1.0, abs=1e-12)


def test_pair_energy_is_invariant_to_rotation_inside_a_degenerate_pair() -> None:
    n = 16
    i = np.arange(n)
    cos, sin = np.cos(2 * np.pi * 3 * i / n), np.sin(2 * np.pi * 3 * i / n)
    cos, sin = cos / np.linalg.norm(cos), sin / np.linalg.norm(sin)
    for theta in np.linspace(0, np.pi, 7):
        v = np.cos(theta) * cos + np.sin(theta) * sin  # another valid eigenvector
        assert frequency_energy(v)[3, 0] == pytest.approx(1.0, abs=1e-12)
        # a cos-only basis would see cos(theta)^2 of it: the reason for measuring pairs
        assert (v @ cos) ** 2 == pytest.approx(np.cos(theta) ** 2, abs=1e-12)


def test_fourier_alignment_is_poor_for_a_random_gram_matrix() -> None:
    X = np.random.default_rng(1).normal(size=(32, 32))
    fa = fourier_alignment(X @ X.T, k=4)
    assert fa.mean_energy < 0.6 and fa.subspace_energy < 0.5


def test_sinusoid_basis_fits_a_non_dft_frequency_that_dft_misses() -> None:
    n = 40
    c = np.arange(n) - (n - 1) / 2
    v = np.cos(0.37 * c + 0.4)  # 0.37 rad/position = 2.355 cycles over 40 positions
    B = np.outer(v, v) + 1e-3 * np.eye(n)
    sin = fourier_alignment(B, k=1, basis="sinusoid")
    dft = fourier_alignment(B, k=1, basis="dft")
    assert sin.energy[0] == pytest.approx(1.0, abs=1e-8)
    assert sin.frequency[0] == pytest.approx(0.37 * n / (2 * np.pi), abs=1e-5)
    assert dft.energy[0] < 0.95


# ----------------------------------------------------------------------------- measures and sweep
def test_stationarity_measures_on_a_ring_and_a_line() -> None:
    t = 2 * np.pi * np.arange(16) / 16
    ring = np.stack([np.cos(t), np.sin(t)], axis=1)
    D_ring = np.linalg.norm(ring[:, None] - ring[None], axis=-1)
    s = stationarity_measures(D_ring, k=2)
    assert list(s.index) == list(STATIONARITY_MEASURES)
    assert s["circulant distance (B)"] < 1e-12 and s["DFT alignment"] == pytest.approx(1.0)
    line = np.arange(16.0)[:, None]
    D_line = np.abs(line - line.T)
    s_line = stationarity_measures(D_line, k=1)
    assert s_line["Toeplitz distance (D)"] < 1e-12  # stationary ...
    assert s_line["circulant distance (B)"] > 0.3  # ... but its Gram matrix is far from circulant
    assert s_line["Toeplitz distance (B)"] > 0.1  # double centring breaks the Toeplitz form
    assert s_line["sinusoid alignment"] > 0.99 > 0.7 > s_line["DFT alignment"]  # a ramp: a slow sine


def test_sweep_predicted_decay_on_the_ring() -> None:
    knobs = [0.0, 0.25, 1.0, 4.0]
    sweep = stationarity_sweep(knobs, progress=False)
    assert list(sweep.index) == knobs
    assert sweep.loc[0.0, "circulant distance (B)"] < 1e-12
    assert sweep.loc[0.0, "DFT alignment"] == pytest.approx(1.0, abs=1e-10)
    assert np.all(np.diff(sweep["circulant distance (B)"]) > 0)
    assert np.all(np.diff(sweep["DFT alignment"]) < 0)
    sampled = stationarity_sweep(knobs, marginals="sampled", n_sequences=5000, progress=False)
    assert sampled.loc[0.0, "circulant distance (B)"] > 1e-3  # sampling noise is not circulant


def test_sweep_validation() -> None:
    with pytest.raises(ValueError, match="increasing"):
        stationarity_sweep([1.0, 0.0], progress=False)
    with pytest.raises(ValueError, match=">= 0"):
        stationarity_sweep([-1.0], progress=False)
    with pytest.raises(ValueError, match="marginals"):
        stationarity_sweep([0.0], marginals="fake", progress=False)


def test_equivalent_knob_interpolates_both_directions() -> None:
    sweep = pd.DataFrame({"up": [0.0, 0.2, 0.4], "down": [1.0, 0.8, 0.7]}, index=pd.Index([0.0, 1.0, 3.0], name="knob"))
    assert equivalent_knob(sweep, "up", 0.1) == pytest.approx(0.5)
    assert equivalent_knob(sweep, "down", 0.75) == pytest.approx(2.0)
    assert equivalent_knob(sweep, "down", 0.2) == math.inf
    assert equivalent_knob(sweep, "up", -1.0) == 0.0
    with pytest.raises(KeyError):
        equivalent_knob(sweep, "sideways", 0.1)


def test_plots_return_altair_charts() -> None:
    sweep = stationarity_sweep([0.0, 0.1, 1.0], n=8, vocab_size=16, progress=False)
    corpora = pd.DataFrame([sweep.iloc[2], sweep.iloc[1]], index=["sst2 plug-in", "sst2 corrected"])
    columns = ["circulant distance (B)", "DFT alignment", "sinusoid alignment"]
    spec = plot_stationarity_sweep({"ring": sweep, "line": sweep}, columns=columns, corpora=corpora).to_dict()
    assert len(spec["concat"]) == 3 and spec["resolve"]["scale"]["color"] == "shared"
    line, points, rules, marker, rings = spec["concat"][0]["layer"]
    assert [layer["mark"]["type"] for layer in (line, points, rules, marker, rings)] == ["line", "point", "rule", "rule", "point"]
    knob = next(p for p in spec["params"] if p["name"].startswith("knob_"))
    assert knob["value"] == 0.1 and knob["bind"]["options"] == [0.0, 0.1, 1.0]  # the middle knob, a menu of all
    assert rings["transform"][-1] == {"filter": f"datum.knob == {knob['name']}"}
    assert line["encoding"]["x"]["scale"]["type"] == "symlog" and line["encoding"]["x"]["scale"]["constant"] == 0.1
    assert line["encoding"]["x"]["axis"]["values"] == [0.0, 0.1, 1.0]
    assert "tooltip" in points["encoding"] and "tooltip" in rules["encoding"]
    colours = line["encoding"]["color"]["scale"]
    assert colours["domain"] == ["ring", "line", "sst2 plug-in", "sst2 corrected"]
    assert colours["range"][2:] == ["#D55E00", "#D55E00"]  # the corpus' colour, told apart by dash
    assert line["encoding"]["strokeDash"]["scale"]["range"][2:] == [[2, 2], [7, 3]]
    pick = [p for p in spec["params"] if p.get("bind") == "legend"]
    assert len(pick) == 1 and len(pick[0]["views"]) == 3  # one legend for every panel
    lines = spec["datasets"][line["data"]["name"]]
    assert {r["measure"] for r in lines} == set(columns) and len(lines) == 2 * 3 * 3
    assert next(r["value"] for r in lines if r["series"] == "line" and r["knob"] == 1.0 and r["measure"] == "DFT alignment") == pytest.approx(
        sweep.loc[1.0, "DFT alignment"])
    assert plot_stationarity_sweep({"ring": sweep}, knob=1.0).to_dict()["params"][-1]["value"] == 1.0
    with pytest.raises(ValueError, match="not one of the sweeps' knobs"):
        plot_stationarity_sweep({"ring": sweep}, knob=0.5)
    with pytest.raises(ValueError, match="lacks the measures"):
        plot_stationarity_sweep({"ring": sweep[["DFT alignment"]]})

    B = double_centered_gram(hellinger_matrix(synthetic_marginals(8, 16)))
    fa = fourier_alignment(B, k=2)
    modes = plot_fourier_modes({"ring": fa, "again": fa}, k=2).to_dict()
    fit, dots = modes["concat"][0]["layer"]
    assert (fit["mark"]["type"], dots["mark"]["type"]) == ("line", "point") and "tooltip" in dots["encoding"]
    values = modes["datasets"][modes["concat"][0]["data"]["name"]]
    assert len(values) == 16 and {v["eigenvector"] for v in values} == {"eigenvector 1", "eigenvector 2"}
    assert values[3]["entry"] == pytest.approx(fa.eigenvectors[3, 0]) and values[3]["sinusoid"] == pytest.approx(fa.fits[3, 0])
    # an entry at float64 rounding (a node of the sine: its digits differ between machines) is drawn as 0
    nodes = dataclasses.replace(fa, eigenvectors=fa.eigenvectors.copy())
    nodes.eigenvectors[2, 0] = 6.4e-18
    drawn = plot_fourier_modes({"ring": nodes}, k=2).to_dict()
    (rows,) = drawn["datasets"].values()
    assert rows[2]["entry"] == 0.0 and rows[3]["entry"] == pytest.approx(fa.eigenvectors[3, 0])

    kernels = plot_offset_kernels({"sinusoidal": sinusoidal_encoding(8, 4), "RoPE a": sinusoidal_encoding(8, 4),
                                   "RoPE b": sinusoidal_encoding(8, 8)}).to_dict()
    line, points = kernels["layer"]
    assert line["encoding"]["color"]["scale"]["range"] == ["#E69F00", "#CC79A7", "#CC79A7"]
    assert len({str(d) for d in line["encoding"]["strokeDash"]["scale"]["range"]}) == 3  # every line its own dash
    profile = kernels["datasets"][kernels["data"]["name"]]
    assert profile[0]["kernel"] == 1.0 and len(profile) == 3 * 8 and "tooltip" in points["encoding"]


def test_toeplitz_floor_bounds_every_offset_encoding() -> None:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 5)).cumsum(axis=0)
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    rep = toeplitz_floor_report(D, d=16, n_heads=2)
    assert list(rep.index) == ["Toeplitz floor", "sinusoidal d=16", "RoPE d=16 (head 8)", "ALiBi 2 heads"]
    assert rep["Toeplitz floor"] > 0.0
    assert (rep.drop("Toeplitz floor") >= rep["Toeplitz floor"] - 1e-12).all()
    # the floor is attained by the nearest Toeplitz matrix itself (a valid target, not an encoding)
    T = nearest_toeplitz(D)
    assert np.sum((D - T) ** 2) / np.sum(D**2) == pytest.approx(rep["Toeplitz floor"])
    with pytest.raises(ValueError, match="divisible"):
        toeplitz_floor_report(D, d=10, n_heads=4)


def test_variance_share_of_alignment() -> None:
    B = double_centered_gram(hellinger_matrix(synthetic_marginals(16, 32)))
    fa = fourier_alignment(B, k=16)
    assert fa.trace == pytest.approx(np.trace(B))
    assert fa.variance_share.sum() == pytest.approx(1.0)  # PSD, all n eigenvalues: the full trace


def test_tied_eigenvectors_get_a_machine_independent_basis():
    """A circulant matrix's paired eigenvectors come back in the same basis whatever rotation
    the eigensolver returned (LAPACK builds and CPU kernel paths differ)."""
    from posgeo.experiments.circulant import _canonical_ties

    n = 16
    i = np.arange(n)
    c = np.exp(-np.minimum(i, n - i) / 2.0)
    C = c[(i[None, :] - i[:, None]) % n]
    lam, V = np.linalg.eigh(C)
    lam, V = lam[::-1], V[:, ::-1]
    assert abs(lam[1] - lam[2]) < 1e-12  # frequency 1: a tied pair
    for angle in (0.3, 1.1, 2.5):
        R = np.eye(n)
        R[1:3, 1:3] = [[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]
        rotated = V @ R
        assert np.allclose(_canonical_ties(lam, rotated)[:, :3], _canonical_ties(lam, V)[:, :3], atol=1e-10)
    W = _canonical_ties(lam, V)
    assert np.allclose(W.T @ W, np.eye(n), atol=1e-10)  # still orthonormal eigenvectors of C
    assert np.allclose(C @ W, W * lam, atol=1e-10)
