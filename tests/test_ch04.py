"""Tests of what the MDS chapter (book/04_mds_and_stress) relies on: its helper book/_ch04.py
(the refitted intervals of the fitted tables, the stress chart), the textbook classical MDS and
stress it builds in front of the reader, and the encodings it scores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.linalg import toeplitz
from scipy.spatial.distance import pdist

import posgeo as pg

import _ch04 as ch


@pytest.fixture(autouse=True)
def _every_test_has_a_private_cache(private_cache):
    """Every test gets its own empty posgeo cache (tests/conftest.py)."""


# ----------------------------------------------------------------------------- the chapter's own code
def classical_mds(D, k):
    """The chapter's classical MDS, as the reader sees it."""
    n = len(D)
    J = np.eye(n) - 1 / n
    B = -0.5 * J @ D**2 @ J
    lam, V = np.linalg.eigh(B)
    lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
    return V * np.sqrt(np.maximum(lam, 0.0))


def stress(P, D, optimal=False):
    """The chapter's stress, raw or at the best scale."""
    i, j = np.triu_indices(len(D), 1)
    e, d = pdist(P), D[i, j]
    alpha = e @ d / (e @ e) if optimal else 1.0
    return np.sum((alpha * e - d) ** 2) / np.sum(d**2)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_chapters_classical_mds_and_stress_are_the_librarys(seed, k):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((12, 5)) * rng.uniform(0.5, 2.0, 5)  # distinct eigenvalues
    D = pg.pairwise_distances(X) + 0.05 * toeplitz(np.r_[0.0, rng.uniform(size=11)])  # not exactly Euclidean
    mine, lib = classical_mds(D, k), pg.classical_mds(D, k)
    np.testing.assert_allclose(pg.pairwise_distances(mine), pg.pairwise_distances(lib.coords), atol=1e-10)
    assert stress(mine, D) == pytest.approx(lib.stress, abs=1e-12)
    for optimal, scale in ((False, "raw"), (True, "optimal")):
        assert stress(mine, D, optimal) == pytest.approx(pg.stress(mine, D, scale=scale), abs=1e-12)


def test_full_rank_classical_mds_reproduces_a_euclidean_matrix():
    X = np.random.default_rng(0).standard_normal((10, 4))
    D = pg.pairwise_distances(X)
    assert stress(classical_mds(D, 4), D) < 1e-20


def test_the_three_point_counterexample():
    """Three points at mutual distance 1 on a line: classical MDS is not stress-optimal, SMACOF reaches 1/9."""
    triangle = 1.0 - np.eye(3)
    np.testing.assert_allclose(pg.classical_mds(triangle).eigenvalues, [0.5, 0.5, 0.0], atol=1e-12)
    assert pg.stress_optimal_mds(triangle, 1).stress == pytest.approx(1 / 9, abs=1e-9)
    assert stress(classical_mds(triangle, 1), triangle) > 1 / 9 + 0.01


@pytest.mark.parametrize("c", [0.1, 0.5, 2.0, 7.0])
def test_raw_stress_is_a_quadratic_in_the_scale_and_the_optimal_one_ignores_it(c):
    """Exercise 2: stress(cP) = c^2 A - 2 c B + 1; the scale-optimal stress is the same for every c."""
    rng = np.random.default_rng(1)
    P, D = rng.standard_normal((9, 3)), pg.pairwise_distances(rng.standard_normal((9, 2)))
    e, d = pdist(P), D[np.triu_indices(9, 1)]
    A, B = (e @ e) / (d @ d), (e @ d) / (d @ d)
    assert stress(c * P, D) == pytest.approx(c * c * A - 2 * c * B + 1)
    assert stress(c * P, D, optimal=True) == pytest.approx(stress(P, D, optimal=True))
    assert stress(B / A * P, D) == pytest.approx(1 - B * B / A)  # the best scale, where raw = optimal
    assert stress(B / A * P, D) == pytest.approx(stress(P, D, optimal=True))


# ----------------------------------------------------------------------------- the encodings it scores
def test_alibi_rows_are_positions_times_the_slopes():
    """The chapter reads the 12 slopes from row 1 of the ALiBi encoding."""
    P = pg.alibi_encoding(10, 12)
    # Press et al.'s slopes for 12 heads: those of 8 heads, 2^-1 ... 2^-8, then every other one of 16 heads
    np.testing.assert_allclose(P[1], np.r_[2.0 ** -np.arange(1, 9), 2.0 ** -(np.arange(1, 8, 2) / 2)], rtol=1e-15)
    np.testing.assert_allclose(P[0], 0.0)
    np.testing.assert_allclose(P[4], 4 * P[1])
    assert pg.stress(P, toeplitz(np.arange(10.0)), scale="optimal") < 1e-12  # a line, whatever the slopes


def test_rope_head_size_changes_the_geometry():
    a, b = pg.rope_encoding(12, 16, head_dim=8), pg.rope_encoding(12, 16, head_dim=4)
    assert a.shape == b.shape == (12, 16)
    assert not np.allclose(pg.pairwise_distances(a), pg.pairwise_distances(b))
    np.testing.assert_allclose(pg.pairwise_distances(pg.rope_encoding(12, 16, head_dim=16)),
                               pg.pairwise_distances(pg.sinusoidal_encoding(12, 16)), atol=1e-12)


def test_random_and_sinusoidal_encodings_share_their_scale():
    R = pg.random_encoding(400, 384, seed=0)
    np.testing.assert_array_equal(R, pg.random_encoding(400, 384, seed=0))
    assert not np.array_equal(R, pg.random_encoding(400, 384, seed=1))
    S = pg.sinusoidal_encoding(48, 384)
    np.testing.assert_allclose(np.linalg.norm(S, axis=1), np.sqrt(192))
    assert np.mean(np.sum(R**2, axis=1)) == pytest.approx(192, rel=0.02)  # the sinusoids' mean squared norm


def model_encodings(n, table):
    """The chapter's encodings, as the reader sees them (``table``: MiniLM's learned rows)."""
    return {
        "sinusoidal d=384": pg.sinusoidal_encoding(n, 384),
        "sinusoidal d=768": pg.sinusoidal_encoding(n, 768),
        "RoPE d=384 (head 32)": pg.rope_encoding(n, 384, head_dim=32),
        "RoPE d=768 (head 64)": pg.rope_encoding(n, 768, head_dim=64),
        "ALiBi 12 heads": pg.alibi_encoding(n, 12),
        "random d=384": pg.random_encoding(n, 384, seed=0),
        "MiniLM learned": table[1 : n + 1],
    }


def stress_comparison(geometries, encodings, target, mds_dims=(1, 2, 3)):
    """The chapter's table: raw and scale-optimal stress of every encoding on every corpus."""
    return pd.concat({name: pg.stress_table(getattr(g, target), encodings[name], mds_dims=mds_dims)[["raw", "optimal"]]
                      for name, g in geometries.items()}, axis=1)


def test_model_encodings():
    enc = model_encodings(6, np.ones((8, 5)))
    assert {k: v.shape for k, v in enc.items()} == {
        "sinusoidal d=384": (6, 384),
        "sinusoidal d=768": (6, 768),
        "RoPE d=384 (head 32)": (6, 384),
        "RoPE d=768 (head 64)": (6, 768),
        "ALiBi 12 heads": (6, 12),
        "random d=384": (6, 384),
        "MiniLM learned": (6, 5),
    }
    np.testing.assert_array_equal(enc["random d=384"], model_encodings(6, np.ones((8, 5)))["random d=384"])


@pytest.fixture(scope="module")
def two_geometries():
    out = {}
    for name, gamma in (("ring", 0.0), ("mixed", 2.0)):
        c = pg.load_corpus("synthetic", n_sequences=300, n_positions=12, vocab_size=24, nonstationarity=gamma)
        out[name] = pg.corpus_geometry(c, 12, cache=False, min_count=10)
    return out


def test_stress_comparison_layout_and_values(two_geometries):
    line = np.arange(12.0)[:, None]
    enc = {"ring": {"lin": line}, "mixed": {"lin": line, "sq": line**2}}
    t = stress_comparison(two_geometries, enc, "distances", mds_dims=(2,))
    assert list(t.columns) == [("ring", "raw"), ("ring", "optimal"), ("mixed", "raw"), ("mixed", "optimal")]
    assert {"PMDS full", "PMDS k=2", "SMACOF k=2", "lin", "sq"} <= set(t.index)
    # an encoding missing for one corpus is NaN there, present for the other
    assert np.isnan(t.loc["sq", ("ring", "raw")]) and not np.isnan(t.loc["sq", ("mixed", "raw")])
    opt, raw = t.xs("optimal", axis=1, level=1), t.xs("raw", axis=1, level=1)
    assert ((opt <= raw + 1e-12) | opt.isna()).all().all()
    for k in ("ring", "mixed"):
        assert t.loc["SMACOF k=2", (k, "raw")] <= t.loc["PMDS k=2", (k, "raw")] + 1e-12
        assert t.loc["lin", (k, "raw")] == pytest.approx(pg.stress(line, two_geometries[k].distances))


def test_stress_comparison_target(two_geometries):
    line = np.arange(12.0)[:, None]
    enc = {name: {"lin": line} for name in two_geometries}
    plug = stress_comparison(two_geometries, enc, "distances", mds_dims=())
    corrected = stress_comparison(two_geometries, enc, "hybrid", mds_dims=())
    g = two_geometries["ring"]
    assert corrected.loc["lin", ("ring", "optimal")] == pytest.approx(pg.stress(line, g.hybrid, scale="optimal"))
    assert corrected.loc["lin", ("ring", "raw")] != plug.loc["lin", ("ring", "raw")]


# ----------------------------------------------------------------------------- fitted_stress_intervals
def half_sample_geometry(D, noise=0.0, n_boot=6, seed=0):
    """A half-sample BootstrapGeometry whose halvings are D plus symmetric noise of the given size."""
    rng = np.random.default_rng(seed)
    tri = D[np.triu_indices(len(D), 1)]

    def halves():
        return np.clip(tri + noise * rng.standard_normal((n_boot, tri.size)), 0.0, None).astype(np.float32)

    return pg.BootstrapGeometry(estimate=D, low=D, high=D, n_boot=n_boot, level=0.95, estimator="hybrid",
                             replicates=halves(), n_groups=100, n_empty=0, method="half-sample", complements=halves())


def test_an_exact_configuration_fits_at_its_rank_and_noiseless_halvings_give_zero_width():
    D = pg.pairwise_distances(np.random.default_rng(2).standard_normal((9, 3)))  # 9 points in 3 dimensions
    t = ch.fitted_stress_intervals(half_sample_geometry(D))
    assert list(t.index) == ["PMDS k=1", "PMDS k=2", "PMDS k=3", "PMDS full",
                             "SMACOF k=1", "SMACOF k=2", "SMACOF k=3",
                             "SMACOF k=1 - PMDS k=1", "SMACOF k=2 - PMDS k=2", "SMACOF k=3 - PMDS k=3"]
    np.testing.assert_allclose(t.loc[["PMDS k=3", "PMDS full", "SMACOF k=3"], "stress"], 0.0, atol=1e-9)
    assert t.loc["PMDS k=1", "stress"] > t.loc["PMDS k=2", "stress"] > 1e-4  # below its rank it cannot fit
    # halvings equal to the estimate (up to float32): intervals of zero width
    np.testing.assert_allclose(t["high"] - t["low"], 0.0, atol=1e-5)
    assert (t["replicates"] == 6).all()


def test_the_estimate_is_the_fit_to_the_estimate_and_smacof_never_loses():
    rng = np.random.default_rng(3)
    D = pg.pairwise_distances(rng.standard_normal((14, 6)))
    t = ch.fitted_stress_intervals(half_sample_geometry(D, noise=0.05))
    full = pg.classical_mds(D)
    for k in (1, 2, 3):
        pmds = pg.stress(full.coords[:, :k], D, scale="optimal")
        smacof = pg.stress(pg.stress_optimal_mds(D, k, init=full.coords[:, :k]).coords, D, scale="optimal")
        assert t.loc[f"PMDS k={k}", "stress"] == pytest.approx(pmds)
        assert t.loc[f"SMACOF k={k}", "stress"] == pytest.approx(smacof)
        assert t.loc[f"SMACOF k={k} - PMDS k={k}", "stress"] == pytest.approx(smacof - pmds)
        assert t.loc[f"SMACOF k={k} - PMDS k={k}", "stress"] <= 1e-12
    assert t.loc["PMDS full", "stress"] < 1e-12  # D is Euclidean
    fits = t.drop(index=[name for name in t.index if " - " in name])
    assert (fits["low"] >= 0).all() and (fits["low"] <= fits["stress"] + 1e-12).all()
    assert (fits["stress"] <= fits["high"] + 1e-12).all()
    assert (t["high"] - t["low"]).max() > 0  # the noise widens them


def test_smacof_on_fewer_halvings():
    D = pg.pairwise_distances(np.random.default_rng(4).standard_normal((10, 3)))
    boot = half_sample_geometry(D, noise=0.05, n_boot=6)
    t = ch.fitted_stress_intervals(boot, ranks=(1, 2), smacof_replicates=3)
    assert t["replicates"].to_dict() == {"PMDS k=1": 6, "PMDS k=2": 6, "PMDS full": 6, "SMACOF k=1": 3, "SMACOF k=2": 3,
                                         "SMACOF k=1 - PMDS k=1": 3, "SMACOF k=2 - PMDS k=2": 3}
    head = replace(boot, n_boot=3, replicates=boot.replicates[:3], complements=boot.complements[:3])
    fewer = ch.fitted_stress_intervals(head, ranks=(1, 2))  # the same SMACOF rows: the first 3 halvings
    smacof_rows = [name for name in t.index if name.startswith("SMACOF")]
    np.testing.assert_allclose(t.loc[smacof_rows, ["stress", "low", "high"]], fewer.loc[smacof_rows, ["stress", "low", "high"]])
    every = ch.fitted_stress_intervals(boot, ranks=(1, 2))  # and the same PMDS rows as with every halving
    np.testing.assert_allclose(t.loc["PMDS k=1":"PMDS full", ["low", "high"]], every.loc["PMDS k=1":"PMDS full", ["low", "high"]])


def test_a_halving_with_an_empty_position_is_left_out():
    D = toeplitz(np.arange(6.0)) / 6
    boot = half_sample_geometry(D, noise=0.02)
    boot.replicates[2, 0] = np.nan  # a position that no sequence of this half reached
    t = ch.fitted_stress_intervals(boot, ranks=(1,))
    assert np.isfinite(t[["stress", "low", "high"]].to_numpy()).all()
    fits = t.drop(index="SMACOF k=1 - PMDS k=1")
    assert ((fits["low"] <= fits["stress"] + 1e-12) & (fits["stress"] <= fits["high"] + 1e-12)).all()


# ----------------------------------------------------------------------------- plot_stress
def test_plot_stress_draws_dots_on_a_log_axis():
    table = pd.DataFrame({"sst2": [0.05, 0.2], "imdb": [0.01, 0.3]}, index=["sinusoidal", "ALiBi"])
    spec = ch.plot_stress(table).to_dict()
    # a bar on a log axis starts at log(0) and is drawn with no height
    assert spec["mark"]["type"] == "point" and spec["mark"]["filled"]
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 4 and {r["corpus"] for r in rows} == {"sst2", "imdb"}
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    assert spec["encoding"]["x"]["sort"] == ["sinusoidal", "ALiBi"]
