"""Tests for posgeo._plotting: figures built without pyplot, and the notebook set-up."""

from __future__ import annotations

import io
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import posgeo  # noqa: E402
from posgeo import (
    classical_mds,
    corpus_geometry,
    distance_by_offset,
    load_corpus,
    notebook_setup,
    plot_distance_heatmaps,
    plot_noise_floor,
    plot_offset_profiles,
    plot_spectra,
    plot_stress_bars,
)


@pytest.fixture(scope="module")
def geometries():
    out = []
    for gamma, lengths in ((0.0, None), (2.0, np.r_[np.full(150, 12), np.full(50, 6)])):
        c = load_corpus("synthetic", n_sequences=200, n_positions=12, vocab_size=24, nonstationarity=gamma, lengths=lengths)
        out.append(corpus_geometry(c, 12, cache=False, min_count=160))
    return out


@pytest.fixture(autouse=True)
def no_pyplot_figures():
    """Every plot function must leave pyplot's global figure list as it found it."""
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before


def renders(fig: Figure) -> bool:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------- heatmaps
@pytest.mark.parametrize("k", [1, 3])
def test_distance_heatmaps(k):
    rng = np.random.default_rng(k)
    mats = {}
    for i in range(k):
        A = rng.random((6, 6))
        M = (A + A.T) / 2
        np.fill_diagonal(M, 0)
        mats[f"m{i}"] = M
    fig = plot_distance_heatmaps(mats, label="my label")
    assert isinstance(fig, Figure)
    assert len(fig.axes) == k + 1  # one panel each, plus the shared colour bar
    for ax, (title, M) in zip(fig.axes, mats.items()):
        assert ax.get_title() == title
        np.testing.assert_array_equal(ax.images[0].get_array(), M)
        assert ax.images[0].get_clim() == (0.0, 1.0)
    assert fig.axes[-1].get_ylabel() == "my label"
    assert renders(fig)


def test_distance_heatmaps_free_colour_scale():
    M = np.array([[0.0, 3.0], [3.0, 0.0]])
    fig = plot_distance_heatmaps({"a": M}, vmax=None)
    assert fig.axes[0].images[0].get_clim() == (0.0, 3.0)


# ----------------------------------------------------------------------------- offset profiles
def test_offset_profiles(geometries):
    fig = plot_offset_profiles(geometries, max_offset=5)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    for ax, g in zip(fig.axes, geometries):
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels == ["plug-in", "noise-corrected", "noise floor"]
        plug, corr, _ = ax.get_lines()
        np.testing.assert_allclose(plug.get_ydata(), distance_by_offset(g.distances, max_offset=5)["mean"])
        np.testing.assert_allclose(corr.get_ydata(), distance_by_offset(g.matched, max_offset=5)["mean"])
        np.testing.assert_array_equal(plug.get_xdata(), np.arange(1, 6))
        assert ax.get_title() == f"{g.name} (n=12)"
    assert fig.axes[0].get_ylabel() == "chord distance"
    assert renders(fig)


def test_offset_profiles_noise_floor_curve(geometries):
    g = geometries[0]
    fig = plot_offset_profiles([g], max_offset=None, debiased=False)
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.get_lines()] == ["plug-in", "noise floor"]
    floor = ax.get_lines()[1].get_ydata()
    s = g.split_half
    # offset 1: mean over i of sqrt((s_i^2 + s_{i+1}^2) / 2)
    assert floor[0] == pytest.approx(np.mean(np.sqrt(0.5 * (s[:-1] ** 2 + s[1:] ** 2))))
    assert len(floor) == 11


# ----------------------------------------------------------------------------- noise floor
def test_noise_floor(geometries):
    fig = plot_noise_floor(geometries)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 4  # each panel has a twin axis for the counts
    main = [ax for ax in fig.axes if ax.get_title()]
    assert len(main) == 2
    for ax, g in zip(main, geometries):
        np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), g.split_half)
    # the second corpus has positions reached by too few sequences: they are marked
    assert len(main[0].collections) == 0
    assert len(main[1].collections) == 1
    np.testing.assert_allclose(main[1].collections[0].get_offsets()[:, 0], np.flatnonzero(geometries[1].flagged))
    assert renders(fig)


# ----------------------------------------------------------------------------- spectra
def test_spectra():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(20, 3))
    D = np.linalg.norm(P[:, None] - P[None], axis=-1)
    lam = classical_mds(D).eigenvalues
    fig = plot_spectra({"euclid": lam, "flat": np.r_[np.ones(5), np.zeros(15)]}, top=10)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    ax1, ax2 = fig.axes
    assert len(ax1.get_lines()) == 2
    assert len(ax2.get_lines()) == 3  # two curves and the 99% guide
    assert ax2.get_lines()[2].get_ydata()[0] == pytest.approx(0.99)
    assert len(ax1.get_lines()[0].get_xdata()) == 10
    # cumulative energy reaches 1 and is non-decreasing; 3 points in R^3 carry all energy in 3 eigenvalues
    energy = ax2.get_lines()[0].get_ydata()
    assert energy[-1] == pytest.approx(1.0)
    assert np.all(np.diff(energy) >= -1e-12)
    assert energy[2] == pytest.approx(1.0)
    np.testing.assert_allclose(ax2.get_lines()[1].get_ydata()[:5], [0.2, 0.4, 0.6, 0.8, 1.0])
    assert renders(fig)


# ----------------------------------------------------------------------------- stress bars
@pytest.mark.parametrize("log", [False, True])
def test_stress_bars(log):
    table = pd.DataFrame({"sst2": [0.1, 0.5, 0.9], "imdb": [0.2, 0.4, 0.8]}, index=["a", "b", "c"])
    fig = plot_stress_bars(table, column="optimal", log=log)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 1
    (ax,) = fig.axes
    heights = [p.get_height() for p in ax.patches]
    assert heights == [0.1, 0.5, 0.9, 0.2, 0.4, 0.8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_yscale() == ("log" if log else "linear")
    assert ax.get_ylabel() == "optimal stress"
    assert renders(fig)


def test_stress_bars_from_a_stress_comparison(geometries):
    enc = {g.name: {"line": np.arange(12.0)[:, None]} for g in geometries[:1]}
    from posgeo.experiments.stress import stress_comparison

    comp = stress_comparison({geometries[0].name: geometries[0]}, enc, mds_dims=(1,))
    fig = plot_stress_bars(comp.xs("raw", axis=1, level=1), column="raw", log=True)
    assert len(fig.axes[0].patches) == len(comp)


# ----------------------------------------------------------------------------- notebook_setup
QUIET = ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TOKENIZERS_PARALLELISM")
PD_OPTIONS = ("display.precision", "display.max_columns", "display.width")


@pytest.fixture
def clean_state(monkeypatch):
    """Unset the quiet variables (restored afterwards) and restore pandas' options."""
    for key in QUIET:
        monkeypatch.setenv(key, "placeholder")  # records the original value for teardown
        monkeypatch.delenv(key)
    saved = {opt: pd.get_option(opt) for opt in PD_OPTIONS}
    yield monkeypatch
    for opt, value in saved.items():
        pd.set_option(opt, value)


def test_notebook_setup_versions_table(clean_state):
    table = notebook_setup()
    assert isinstance(table, pd.DataFrame)
    assert table.index.name == "package"
    assert list(table.index) == ["posgeo", "numpy", "pandas", "matplotlib", "torch"]
    assert table.loc["posgeo", "version"] == posgeo.__version__
    assert table.loc["numpy", "version"] == np.__version__
    assert table.loc["pandas", "version"] == pd.__version__
    assert table.loc["matplotlib", "version"] == matplotlib.__version__
    assert "+" not in table.loc["torch", "version"]


def test_notebook_setup_sets_quiet_variables_only_when_unset(clean_state):
    clean_state.setenv("TQDM_DISABLE", "0")
    notebook_setup()
    assert os.environ["TQDM_DISABLE"] == "0"  # an explicit user setting wins
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    assert os.environ["TRANSFORMERS_VERBOSITY"] == "error"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"


def test_notebook_setup_sets_tqdm_disable_when_unset(clean_state):
    notebook_setup()
    assert os.environ["TQDM_DISABLE"] == "1"


def test_notebook_setup_not_quiet_leaves_the_environment_alone(clean_state):
    notebook_setup(quiet=False)
    assert not any(key in os.environ for key in QUIET)


def test_notebook_setup_pandas_precision(clean_state):
    notebook_setup(precision=2)
    assert pd.get_option("display.precision") == 2
    notebook_setup()
    assert pd.get_option("display.precision") == 4
