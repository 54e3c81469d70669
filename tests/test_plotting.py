"""Tests for posgeo._plotting: the book's Altair charts, the renderer and the notebook set-up.

Charts are checked as data (their Vega-Lite spec: marks, encodings, the values they carry),
never as images.
"""

from __future__ import annotations

import json
import os

import altair as alt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

import posgeo
from posgeo import (
    chart_spec,
    colour_scale,
    finish_chart,
    heatmap_chart,
    notebook_setup,
    panel_grid,
    plot_spectra,
    series_chart,
    series_colour,
)
from posgeo._plotting import chart_bundle, enable_charts

VEGALITE = "application/vnd.vegalite.v5+json"


def walk(spec):
    """Every dict inside a spec (depth first)."""
    if isinstance(spec, dict):
        yield spec
        for value in spec.values():
            yield from walk(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from walk(value)


def marks(spec) -> list[str]:
    return [d["mark"]["type"] if isinstance(d["mark"], dict) else d["mark"] for d in walk(spec) if "mark" in d]


def datasets(spec) -> list[pd.DataFrame]:
    return [pd.DataFrame(rows) for rows in spec.get("datasets", {}).values()]


# ----------------------------------------------------------------------------- palette
def test_series_colour_is_one_colour_per_corpus_and_encoding():
    assert series_colour("sst2") == series_colour("SST-2 corrected") == series_colour("sst2 plug-in")
    assert series_colour("sinusoidal") == series_colour("Sinusoidal (fixed)")
    named = ["synthetic", "sst2", "imdb"]
    assert len({series_colour(n) for n in named}) == 3
    encodings = ["sinusoidal", "RoPE", "ALiBi", "random", "simplex", "MiniLM", "SMACOF k=3", "PMDS k=3", "learned"]
    assert len({series_colour(n) for n in encodings}) == len(encodings)
    assert series_colour("nothing we know") is None


def test_colour_scale_gives_unknown_names_unused_colours():
    scale = colour_scale(["imdb", "x", "y", "x"]).to_dict()
    assert scale["domain"] == ["imdb", "x", "y"]
    assert scale["range"][0] == series_colour("imdb")
    assert len(set(scale["range"])) == 3


# ----------------------------------------------------------------------------- building blocks
def test_finish_chart_needs_a_description():
    chart = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q")
    with pytest.raises(ValueError, match="description"):
        finish_chart(chart, description="  ")
    spec = finish_chart(chart, description="One point.", title="T", canvas=True).to_dict()
    assert spec["description"] == "One point."
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"
    assert spec["config"]["legend"]["orient"] == "bottom"


def test_series_chart_lines_band_legend_toggle_and_tooltips():
    frame = pd.DataFrame({"k": [1, 2, 1, 2], "v": [0.5, 0.2, 0.6, 0.4], "lo": [0.4, 0.1, 0.5, 0.3],
                          "hi": [0.6, 0.3, 0.7, 0.5], "who": ["sst2 plug-in", "sst2 plug-in", "sst2 corrected", "sst2 corrected"]})
    spec = finish_chart(series_chart(frame, x="k", y="v", series="who", lower="lo", upper="hi"), description="d").to_dict()
    assert marks(spec) == ["line", "area", "point"]
    params = [p for d in walk(spec) for p in d.get("params", []) if isinstance(p, dict) and "name" in p]
    assert any(p.get("bind") == "legend" for p in params)
    assert any(p.get("bind") == "scales" for p in params)
    line = spec["layer"][0]["encoding"]
    assert line["color"]["scale"]["range"] == [series_colour("sst2")] * 2  # one corpus, one colour ...
    assert line["strokeDash"]["scale"]["range"] == [[1, 0], [6, 3]]  # ... corrected dashed
    tooltip = [t["field"] for t in spec["layer"][2]["encoding"]["tooltip"]]
    assert tooltip == ["who", "k", "v", "lo", "hi"]
    (data,) = datasets(spec)
    assert data["v"].tolist() == [0.5, 0.2, 0.6, 0.4]


def test_series_chart_rejects_bad_columns():
    frame = pd.DataFrame({"k": [1], "v": [0.5]})
    with pytest.raises(ValueError, match="no column 'w'"):
        series_chart(frame, x="k", y="w")
    with pytest.raises(ValueError, match="both lower= and upper="):
        series_chart(frame, x="k", y="v", lower="v")


def test_heatmap_chart_bins_large_matrices_and_keeps_small_ones():
    small = heatmap_chart(np.arange(9.0).reshape(3, 3) / 10).to_dict()
    assert small["data"]["values"][0]["v"] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    assert small["encoding"]["color"]["scale"]["domain"] == [0.0, 1.0]
    rng = np.random.default_rng(0)
    M = rng.random((300, 300))
    big = heatmap_chart(M, max_side=100).to_dict()
    values = np.array(big["data"]["values"][0]["v"], dtype=float)
    assert values.size == 100 * 100  # 3 x 3 blocks
    assert values[0] == pytest.approx(M[:3, :3].mean(), abs=1e-3)
    assert "3 x 3 blocks" in json.dumps(big["title"])
    with pytest.raises(ValueError, match="square"):
        heatmap_chart(np.zeros((2, 3)))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), side=st.integers(1, 12))
def test_heatmap_blocks_cover_the_matrix(n, side):
    M = np.arange(n * n, dtype=float).reshape(n, n)
    values = heatmap_chart(M, max_side=side, digits=6).to_dict()["data"]["values"][0]["v"]
    m = int(round(len(values) ** 0.5))
    assert m * m == len(values) and m <= side and m == -(-n // -(-n // side))  # ceil(n / ceil(n / side)) blocks a side
    finite = np.array([v for v in values if v is not None])
    assert finite.min() >= M.min() and finite.max() <= M.max()  # block means stay in range


def test_panel_grid():
    a = alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q")
    assert panel_grid([a]) is a
    assert panel_grid([a, a, a], columns=2).to_dict()["columns"] == 2
    with pytest.raises(ValueError, match="no panels"):
        panel_grid([])


# ----------------------------------------------------------------------------- the renderer
def test_chart_bundle_is_machine_independent():
    frame = pd.DataFrame({"x": [0.123456789, 12345.678, 3.0]})
    chart = finish_chart(alt.Chart(frame).mark_point().encode(x="x:Q").add_params(alt.selection_point()), description="Points.")
    first, second = chart_bundle(chart.to_dict()), chart_bundle(chart.to_dict())
    spec = first[VEGALITE]
    assert spec == second[VEGALITE]  # the param's counter name is renumbered
    assert [p["name"] for p in spec["params"]] == ["param_1"]
    (rows,) = spec["datasets"].values()
    assert [r["x"] for r in rows] == [0.1235, 12345.7, 3.0]  # 4 significant digits, integers kept
    assert first["text/plain"] == "Chart: Points."
    assert first["image/svg+xml"].lstrip().startswith("<svg")


def test_chart_data_is_named_by_its_rounded_rows():
    """A change below the shown precision leaves the stored spec unchanged (Altair's own name
    hashes the unrounded values), a shown change renames the data set, and re-canonicalising a
    stored spec is the identity."""
    def spec(values):
        base = alt.Chart(pd.DataFrame({"x": values, "y": [1.0, 2.0]}))
        layered = alt.layer(base.mark_point().encode(x="x:Q", y="y:Q"), base.mark_line().encode(x="x:Q", y="y:Q"))
        return chart_bundle(finish_chart(layered, description="Two points.").to_dict())[VEGALITE]

    a, b, c = spec([0.1234567, 2.5]), spec([0.1234568, 2.5]), spec([0.1244, 2.5])
    assert alt.Chart(pd.DataFrame({"x": [0.1234567]})).mark_point().to_dict()["datasets"] != \
        alt.Chart(pd.DataFrame({"x": [0.1234568]})).mark_point().to_dict()["datasets"]  # what Altair alone does
    assert a == b
    assert a != c and set(a["datasets"]) != set(c["datasets"])
    (name,) = a["datasets"]
    assert json.dumps(a).count(name) >= 2  # the data set and the reference to it, renamed together
    assert chart_spec(a) == a


def test_chart_bundle_falls_back_to_png_for_many_marks():
    bundle = chart_bundle(finish_chart(heatmap_chart(np.zeros((80, 80))), description="Zeros.").to_dict())
    assert "image/png" in bundle and "image/svg+xml" not in bundle
    # under the row limit, but an SVG of one element per mark beyond its size limit: a PNG too
    frame = pd.DataFrame({"x": np.arange(3000.0), "y": np.sin(np.arange(3000.0))})
    many = chart_bundle(finish_chart(alt.Chart(frame).mark_point().encode(x="x:Q", y="y:Q"), description="Points.").to_dict())
    assert "image/png" in many and "image/svg+xml" not in many
    import base64

    assert base64.b64decode(many["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_bundle_on_colab_is_html_at_the_books_versions(monkeypatch):
    """Colab draws no Vega-Lite output: there the bundle carries HTML that loads the book's own
    vega, vega-lite and vega-embed versions (package-lock.json) and embeds the same spec, and no
    static image that Colab could show instead; elsewhere nothing changes."""
    import sys
    import types
    from pathlib import Path

    from posgeo import _plotting

    chart = finish_chart(alt.Chart(pd.DataFrame({"x": [0.123456]})).mark_point().encode(x="x:Q"), description="A point.")
    outside = chart_bundle(chart.to_dict())
    assert "text/html" not in outside and "image/svg+xml" in outside
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    colab = chart_bundle(chart.to_dict())
    assert set(colab) == {VEGALITE, "text/html", "text/plain"}
    assert colab[VEGALITE] == outside[VEGALITE]
    html = colab["text/html"]
    assert json.dumps(colab[VEGALITE]["datasets"]) in html  # the stored (rounded) spec, not Altair's
    lock = json.loads((Path(__file__).resolve().parents[1] / "package-lock.json").read_text())["packages"]
    for name in ("vega", "vega-lite", "vega-embed"):
        version = lock[f"node_modules/{name}"]["version"]
        assert _plotting._VEGA_VERSIONS[name] == version, f"{name}: package-lock.json has {version}"
        assert f"https://cdn.jsdelivr.net/npm/{name}@{version}?noext" in html
    canvas = finish_chart(heatmap_chart(np.zeros((80, 80))), description="Zeros.", canvas=True)
    assert '"renderer": "canvas"' in chart_bundle(canvas.to_dict())["text/html"]  # the chart's embed options


def test_enable_charts_registers_the_renderer():
    before = alt.renderers.active
    try:
        enable_charts()
        assert alt.renderers.active == "posgeo"
        chart = finish_chart(alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x:Q"), description="A point.")
        bundle = chart._repr_mimebundle_()
        bundle = bundle[0] if isinstance(bundle, tuple) else bundle
        assert set(bundle) >= {VEGALITE, "text/plain"}
    finally:
        alt.renderers.enable(before)


def test_spectra():
    lam = {"a": np.array([4.0, 2.0, 1.0, -0.5]), "b": np.array([3.0, 1.0, 0.0, 0.0])}
    spec = plot_spectra(lam, top=3).to_dict()
    data = pd.concat(datasets(spec))
    share = data.dropna(subset=["share"]) if "share" in data else data
    assert share[share["series"] == "a"]["share"].tolist() == pytest.approx([4 / 7.5, 2 / 7.5, 1 / 7.5])
    assert "99% reference" in set(data["series"])
    # eigenvalues at float64 rounding (a Gram matrix past its rank) are not drawn on the log panel
    noisy = plot_spectra({"c": np.array([2.0, 1.0, 3e-17, -2e-17])}, top=4).to_dict()
    noisy_share = pd.concat(datasets(noisy)).dropna(subset=["share"])
    assert noisy_share["index"].tolist() == [1, 2]
    left, right = (panel["layer"][0]["encoding"]["color"]["scale"] for panel in spec["hconcat"])
    assert left == right and left["range"][-1] == series_colour("reference")  # one scale: the 99% line is black in both


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
    assert list(table.index) == ["posgeo", "numpy", "pandas", "altair", "torch"]
    assert table.loc["posgeo", "version"] == posgeo.__version__
    assert table.loc["numpy", "version"] == np.__version__
    assert table.loc["pandas", "version"] == pd.__version__
    assert table.loc["altair", "version"] == alt.__version__
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


# ----------------------------------------------------------------------------- display_table
def test_display_table_integers_and_missing_cells():
    frame = pd.DataFrame({"count": [67349.0, 414.0], "peak layer": [1.0, 3.0], "x": [0.123456, np.nan],
                          "k": [3.0, np.nan], "name": ["a", None], "flag": [True, False]})
    shown = posgeo.display_table(frame, digits=3)
    assert shown["count"].dtype == np.int64 and shown["count"].tolist() == [67349, 414]
    assert shown["peak layer"].tolist() == [1, 3]
    assert shown["x"].tolist() == ["0.123", "n/a"]
    assert shown["k"].tolist() == [3, "n/a"]
    assert shown["name"].tolist() == ["a", "n/a"]
    assert shown["flag"].tolist() == [True, False]
    assert "NaN" not in shown.to_string() and ".0000" not in shown.to_string()
    assert frame["x"].isna().sum() == 1  # the input is left alone
    with pytest.raises(TypeError, match="DataFrame"):
        posgeo.display_table([1, 2])
    summary = pd.DataFrame({"value": [67349.0, 279.0, 0.571, np.nan], "P1": [np.nan, np.nan, 0.22, np.nan]})
    shown = posgeo.display_table(summary, mixed=True)
    assert shown["value"].tolist() == ["67349", "279", "0.5710", "n/a"]
    assert shown["P1"].tolist() == ["n/a", "n/a", "0.2200", "n/a"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e6, 1e6), st.none()), min_size=1, max_size=8))
def test_display_table_never_shows_nan(values):
    shown = posgeo.display_table(pd.DataFrame({"v": [np.nan if v is None else v for v in values]}))
    assert "NaN" not in shown.to_string() and "nan" not in shown.to_string()
