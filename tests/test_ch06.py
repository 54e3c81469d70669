"""Tests for book/_ch06.py, the helper of the sinusoids chapter: circulant/Toeplitz structure and Fourier alignment."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import _ch06 as ch
import posgeo as pg


def symmetric_circulant(c_half: np.ndarray, n: int) -> np.ndarray:
    """Symmetric circulant matrix from c_0..c_{n//2} (c_k = c_{n-k})."""
    k = np.arange(n)
    c = np.asarray(c_half)[np.minimum(k, n - k)]
    return c[(k[None, :] - k[:, None]) % n]


# ----------------------------------------------------------------------------- nearest structures
def test_nearest_circulant_and_toeplitz_average_the_right_diagonals() -> None:
    B = np.arange(9.0).reshape(3, 3)
    C = ch.nearest(B)
    # wrapped diagonal 1: (0,1)=1, (1,2)=5, (2,0)=6 -> mean 4
    assert C[0, 1] == C[1, 2] == C[2, 0] == pytest.approx(4.0)
    assert np.allclose(np.diag(C), 4.0)
    T = ch.nearest(B, "toeplitz")
    # diagonal +1: (0,1)=1, (1,2)=5 -> 3; diagonal -2: (2,0)=6
    assert T[0, 1] == T[1, 2] == pytest.approx(3.0)
    assert T[2, 0] == 6.0 and T[0, 2] == 2.0


def test_the_chapters_loop_version_agrees_with_the_helper() -> None:
    """The chapter builds the projection with a loop over diagonals; the helper with bincount."""
    B = np.random.default_rng(3).normal(size=(9, 9))
    offset = (np.arange(9)[None, :] - np.arange(9)[:, None]) % 9
    loop = np.array([B[offset == k].mean() for k in range(9)])[offset]
    np.testing.assert_allclose(ch.nearest(B), loop, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.integers(2, 9).map(lambda n: (n, n)), elements=st.floats(-10, 10, allow_nan=False)))
def test_nearest_structures_are_orthogonal_projections(B: np.ndarray) -> None:
    for kind in ("circulant", "toeplitz"):
        P = ch.nearest(B, kind)
        np.testing.assert_allclose(ch.nearest(P, kind), P, atol=1e-12)  # idempotent
        # the residual is orthogonal to the structured matrix: Pythagoras
        assert np.sum((B - P) * P) == pytest.approx(0.0, abs=1e-8 * max(1.0, np.sum(B * B)))
    d_c, d_t = ch.circulant_distance(B), ch.circulant_distance(B, "toeplitz")
    assert 0.0 <= d_t <= d_c + 1e-12 <= 1.0 + 1e-12  # circulant matrices are Toeplitz


def test_circulant_distance_zero_for_circulant_positive_otherwise() -> None:
    rng = np.random.default_rng(0)
    n = 10
    i = np.arange(n)
    C = rng.normal(size=n)[(i[None, :] - i[:, None]) % n]  # general (non-symmetric) circulant
    assert ch.circulant_distance(C) < 1e-15 and ch.circulant_distance(C, "toeplitz") < 1e-15
    T = np.abs(i[:, None] - i[None, :]).astype(float)  # Toeplitz, not circulant
    assert ch.circulant_distance(T, "toeplitz") < 1e-15 and ch.circulant_distance(T) > 0.1
    R = rng.normal(size=(n, n))
    assert ch.circulant_distance(R) > 0.5 and ch.circulant_distance(R, "toeplitz") > 0.5
    assert ch.circulant_distance(np.zeros((3, 3))) == 0.0


def test_ring_at_knob_zero_is_exactly_circulant_and_the_knob_breaks_it() -> None:
    D = pg.hellinger_matrix(pg.synthetic_marginals(32, 64, nonstationarity=0.0))
    assert ch.circulant_distance(D) < 1e-12 and ch.circulant_distance(pg.double_centered_gram(D)) < 1e-12
    assert ch.circulant_distance(pg.hellinger_matrix(pg.synthetic_marginals(32, 64, nonstationarity=1.0))) > 0.05


# ----------------------------------------------------------------------------- sinusoids and RoPE
@pytest.mark.parametrize("n,d", [(16, 8), (48, 384), (33, 62)])
def test_sinusoidal_gram_is_exactly_toeplitz(n: int, d: int) -> None:
    G = pg.sinusoidal_encoding(n, d) @ pg.sinusoidal_encoding(n, d).T
    assert ch.circulant_distance(G, "toeplitz") < 1e-13
    # its defining sequence is the kernel sum_k cos(offset * omega_k)
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    np.testing.assert_allclose(ch.toeplitz_profile(G), np.cos(np.arange(n)[:, None] * omega).sum(axis=1), atol=1e-10)
    assert ch.circulant_distance(G) > 1e-3  # not circulant: the frequencies are not multiples of 2 pi / n


def test_rope_kernel_equals_sinusoidal_without_heads_and_differs_with_heads() -> None:
    S, R, Rh = pg.sinusoidal_encoding(40, 64), pg.rope_encoding(40, 64), pg.rope_encoding(40, 64, head_dim=16)
    np.testing.assert_allclose(R @ R.T, S @ S.T, atol=1e-10)
    assert ch.circulant_distance(Rh @ Rh.T, "toeplitz") < 1e-13  # still a function of the offset
    assert np.abs(ch.toeplitz_profile(Rh @ Rh.T) - ch.toeplitz_profile(S @ S.T)).max() > 1.0


def test_toeplitz_floor_bounds_every_offset_encoding() -> None:
    X = np.random.default_rng(2).normal(size=(20, 5)).cumsum(axis=0)
    D = np.linalg.norm(X[:, None] - X[None], axis=-1)
    rep = ch.toeplitz_floor_report(D, d=16, n_heads=2)
    assert list(rep.index) == ["Toeplitz floor", "sinusoidal d=16", "RoPE d=16 (head 8)", "ALiBi 2 heads"]
    assert rep["Toeplitz floor"] > 0.0 and (rep.drop("Toeplitz floor") >= rep["Toeplitz floor"] - 1e-12).all()
    # the floor is attained by the nearest Toeplitz matrix itself (a valid target, not an encoding)
    T = ch.nearest(D, "toeplitz")
    assert np.sum((D - T) ** 2) / np.sum(D**2) == pytest.approx(rep["Toeplitz floor"])
    line = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0)))  # Toeplitz: floor 0, ALiBi exact
    rep = ch.toeplitz_floor_report(line, d=8, n_heads=2)
    assert rep["Toeplitz floor"] < 1e-24 and rep["ALiBi 2 heads"] < 1e-12


# ----------------------------------------------------------------------------- Fourier energy
def test_frequency_energy_sums_to_one_and_locates_pairs() -> None:
    n = 12
    i = np.arange(n)
    V = np.stack([np.cos(2 * np.pi * 2 * i / n), np.sin(2 * np.pi * 5 * i / n + 1.0), np.cos(np.pi * i), np.ones(n)], axis=1)
    E = ch.frequency_energy(V)
    assert E.shape == (7, 4)
    np.testing.assert_allclose(E.sum(axis=0), 1.0, atol=1e-12)
    assert E[2, 0] == pytest.approx(1.0) and E[5, 1] == pytest.approx(1.0)
    assert E[6, 2] == pytest.approx(1.0) and E[0, 3] == pytest.approx(1.0)
    # a ramp spreads over many frequencies, 6 / pi^2 of it at frequency 1 for large n
    assert ch.frequency_energy(np.arange(510) - 254.5)[1, 0] == pytest.approx(6 / np.pi**2, abs=0.01)


@pytest.mark.parametrize("n", [12, 15, 32])
def test_fourier_alignment_of_exact_circulant_is_perfect_with_degenerate_pairs(n: int) -> None:
    # decreasing positive spectrum in |f|: every f >= 1 is a doubly degenerate eigenvalue
    lam = 1.0 / (1.0 + np.arange(n // 2 + 1)) ** 2
    lam[0] = 0.0  # double-centred: the constant is in the null space
    k_all = np.arange(n)
    c = np.real(np.fft.ifft(lam[np.minimum(k_all, n - k_all)]))
    C = symmetric_circulant(c[: n // 2 + 1], n)
    for basis in ("dft", "sinusoid"):
        fa = ch.fourier_alignment(C, k=6, basis=basis)
        np.testing.assert_allclose(fa.energy, 1.0, atol=1e-9)
        np.testing.assert_allclose(fa.frequency, [1, 1, 2, 2, 3, 3], atol=1e-6)
        np.testing.assert_allclose(fa.fits, fa.eigenvectors, atol=1e-6)
    # odd k cuts a degenerate pair: the eigenspace is then not unique, the energy still is 1
    assert ch.fourier_alignment(C, k=5).mean_energy == pytest.approx(1.0, abs=1e-12)


def test_pair_energy_is_invariant_to_rotation_inside_a_degenerate_pair() -> None:
    n = 16
    i = np.arange(n)
    cos, sin = np.cos(2 * np.pi * 3 * i / n), np.sin(2 * np.pi * 3 * i / n)
    cos, sin = cos / np.linalg.norm(cos), sin / np.linalg.norm(sin)
    for theta in np.linspace(0, np.pi, 7):
        v = np.cos(theta) * cos + np.sin(theta) * sin  # another valid eigenvector
        assert ch.frequency_energy(v)[3, 0] == pytest.approx(1.0, abs=1e-12)
        assert (v @ cos) ** 2 == pytest.approx(np.cos(theta) ** 2, abs=1e-12)  # what a cos-only basis would see


def test_fourier_alignment_is_poor_for_a_random_gram_matrix() -> None:
    X = np.random.default_rng(1).normal(size=(32, 32))
    assert ch.fourier_alignment(X @ X.T, k=4).mean_energy < 0.6


def test_sinusoid_basis_fits_a_non_dft_frequency_that_dft_misses() -> None:
    n = 40
    c = np.arange(n) - (n - 1) / 2
    v = np.cos(0.37 * c + 0.4)  # 0.37 rad/position = 2.355 cycles over 40 positions
    B = np.outer(v, v) + 1e-3 * np.eye(n)
    sin = ch.fourier_alignment(B, k=1, basis="sinusoid")
    assert sin.energy[0] == pytest.approx(1.0, abs=1e-8)
    assert sin.frequency[0] == pytest.approx(0.37 * n / (2 * np.pi), abs=1e-5)
    assert ch.fourier_alignment(B, k=1).energy[0] < 0.95


def test_variance_share_of_alignment() -> None:
    B = pg.double_centered_gram(pg.hellinger_matrix(pg.synthetic_marginals(16, 32)))
    fa = ch.fourier_alignment(B, k=16)
    assert fa.trace == pytest.approx(np.trace(B))
    assert fa.variance_share.sum() == pytest.approx(1.0)  # PSD, all n eigenvalues: the full trace


def test_tied_eigenvectors_get_a_machine_independent_basis() -> None:
    """A circulant matrix's paired eigenvectors come back in the same basis whatever rotation
    the eigensolver returned (LAPACK builds and CPU kernel paths differ)."""
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
        assert np.allclose(ch.canonical_ties(lam, V @ R)[:, :3], ch.canonical_ties(lam, V)[:, :3], atol=1e-10)
    W = ch.canonical_ties(lam, V)
    assert np.allclose(W.T @ W, np.eye(n), atol=1e-10)  # still orthonormal eigenvectors of C
    assert np.allclose(C @ W, W * lam, atol=1e-10)


# ----------------------------------------------------------------------------- measures and sweep
def test_stationarity_measures_on_a_ring_and_a_line() -> None:
    t = 2 * np.pi * np.arange(16) / 16
    ring = np.stack([np.cos(t), np.sin(t)], axis=1)
    s = ch.stationarity_measures(np.linalg.norm(ring[:, None] - ring[None], axis=-1), k=2)
    assert list(s.index) == list(ch.MEASURES)
    assert s["circulant distance (B)"] < 1e-12 and s["DFT alignment"] == pytest.approx(1.0)
    line = np.arange(16.0)[:, None]
    s_line = ch.stationarity_measures(np.abs(line - line.T), k=1)
    assert s_line["Toeplitz distance (D)"] < 1e-12  # stationary ...
    assert s_line["circulant distance (B)"] > 0.3  # ... but its Gram matrix is far from circulant
    assert s_line["Toeplitz distance (B)"] > 0.1  # double centring breaks the Toeplitz form
    assert s_line["sinusoid alignment"] > 0.99 > 0.7 > s_line["DFT alignment"]  # a ramp: a slow sine


def test_sweep_predicted_decay_on_the_ring() -> None:
    knobs = [0.0, 0.25, 1.0, 4.0]
    sweep = ch.stationarity_sweep(knobs)
    assert list(sweep.index) == knobs
    assert sweep.loc[0.0, "circulant distance (B)"] < 1e-12
    assert sweep.loc[0.0, "DFT alignment"] == pytest.approx(1.0, abs=1e-10)
    assert np.all(np.diff(sweep["circulant distance (B)"]) > 0) and np.all(np.diff(sweep["DFT alignment"]) < 0)
    sampled = ch.stationarity_sweep(knobs, marginals="sampled", n_sequences=5000)
    assert sampled.loc[0.0, "circulant distance (B)"] > 1e-3  # sampling noise is not circulant


def test_equivalent_knob_interpolates_both_directions() -> None:
    sweep = pd.DataFrame({"up": [0.0, 0.2, 0.4], "down": [1.0, 0.8, 0.7]}, index=pd.Index([0.0, 1.0, 3.0], name="knob"))
    assert ch.equivalent_knob(sweep, "up", 0.1) == pytest.approx(0.5)
    assert ch.equivalent_knob(sweep, "down", 0.75) == pytest.approx(2.0)
    assert ch.equivalent_knob(sweep, "down", 0.2) == math.inf
    assert ch.equivalent_knob(sweep, "up", -1.0) == 0.0


# ----------------------------------------------------------------------------- charts
def test_plots_return_altair_charts() -> None:
    sweep = ch.stationarity_sweep([0.0, 0.1, 1.0], n=8, vocab_size=16)
    corpora = pd.DataFrame([sweep.iloc[2], sweep.iloc[1]], index=["sst2 plug-in", "sst2 corrected"])
    columns = ["circulant distance (B)", "DFT alignment", "sinusoid alignment"]
    spec = ch.plot_stationarity_sweep({"ring": sweep, "line": sweep}, columns, corpora, 0.1).to_dict()
    assert len(spec["concat"]) == 3 and spec["resolve"]["scale"]["color"] == "shared"
    line, points, rules, marker, rings = spec["concat"][0]["layer"]
    assert [layer["mark"]["type"] for layer in (line, points, rules, marker, rings)] == ["line", "point", "rule", "rule", "point"]
    knob = next(p for p in spec["params"] if p["name"].startswith("knob_"))
    assert knob["value"] == 0.1 and knob["bind"]["options"] == [0.0, 0.1, 1.0]
    assert rings["transform"][-1] == {"filter": f"datum.knob == {knob['name']}"}
    assert line["encoding"]["x"]["scale"]["type"] == "symlog" and line["encoding"]["x"]["scale"]["constant"] == 0.1
    assert line["encoding"]["x"]["axis"]["values"] == [0.0, 0.1, 1.0]
    colours = line["encoding"]["color"]["scale"]
    assert colours["domain"] == ["ring", "line", "sst2 plug-in", "sst2 corrected"]
    assert colours["range"][2:] == ["#D55E00", "#D55E00"]  # the corpus' colour, told apart by dash
    assert line["encoding"]["strokeDash"]["scale"]["range"][2:] == [[2, 2], [7, 3]]
    lines = spec["datasets"][line["data"]["name"]]
    assert {r["measure"] for r in lines} == set(columns) and len(lines) == 2 * 3 * 3

    fa = ch.fourier_alignment(pg.double_centered_gram(pg.hellinger_matrix(pg.synthetic_marginals(8, 16))), k=2)
    modes = ch.plot_fourier_modes({"ring": fa, "again": fa}, k=2).to_dict()
    fit, dots = modes["concat"][0]["layer"]
    assert (fit["mark"]["type"], dots["mark"]["type"]) == ("line", "point") and "tooltip" in dots["encoding"]
    values = modes["datasets"][modes["concat"][0]["data"]["name"]]
    assert len(values) == 16 and values[3]["entry"] == pytest.approx(fa.eigenvectors[3, 0])
    # an entry at float64 rounding (a node of the sine: its digits differ between machines) is drawn as 0
    nodes = dataclasses.replace(fa, eigenvectors=fa.eigenvectors.copy())
    nodes.eigenvectors[2, 0] = 6.4e-18
    (rows,) = ch.plot_fourier_modes({"ring": nodes, "again": nodes}, k=2).to_dict()["datasets"].values()
    assert rows[2]["entry"] == 0.0 and rows[3]["entry"] == pytest.approx(fa.eigenvectors[3, 0])

    kernels = ch.plot_offset_kernels({"sinusoidal": pg.sinusoidal_encoding(8, 4), "RoPE a": pg.sinusoidal_encoding(8, 4),
                                      "RoPE b": pg.sinusoidal_encoding(8, 8)}).to_dict()
    line, points = kernels["layer"]
    assert line["encoding"]["color"]["scale"]["range"] == ["#E69F00", "#CC79A7", "#CC79A7"]
    assert len({str(d) for d in line["encoding"]["strokeDash"]["scale"]["range"]}) == 3  # every line its own dash
    profile = kernels["datasets"][kernels["data"]["name"]]
    assert profile[0]["kernel"] == 1.0 and len(profile) == 3 * 8
