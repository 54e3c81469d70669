"""Charts for the book and the audit: Altair (Vega-Lite 5) charts with one theme and one palette.

Every chart of posgeo is an :class:`altair.Chart` (or a layered / concatenated chart) built
from the helpers here, so the whole book looks the same:

- **one palette** (:func:`series_colour`, :func:`colour_scale`): colour-blind safe (Okabe-Ito,
  then Paul Tol's muted colours), and one colour per corpus and per encoding wherever it
  appears ("sst2" is always vermillion, "sinusoidal" always orange); a corrected estimate is
  its corpus's colour, dashed;
- **one theme** (:func:`finish_chart`): fonts, axes, legends below the plot, a description
  that screen readers and the notebook's text output read as the chart's alt text;
- **building blocks** the recipes of :mod:`posgeo.experiments` use: :func:`series_chart`
  (lines with interval bands, legend toggling, x zoom, tooltips), :func:`heatmap_chart`
  (binned so a 510 x 510 matrix stays light, colour bar, tooltips), :func:`panel_grid`
  (multi-panel figures as a grid sized for the book's column; the book's page script
  re-flows it to one column on a phone).

How a chart is displayed: :func:`notebook_setup` (each chapter's first cell) enables the
``posgeo`` Altair renderer (:func:`chart_bundle`), which shows a chart as its Vega-Lite spec
(JupyterLab draws it, interactively) with a static SVG (or PNG, for charts with thousands of
marks) fallback drawn by ``vl-convert``, and a text line with the alt text; on Google Colab,
which has no Vega-Lite renderer of its own, an HTML output that loads vega-embed (the versions
the book pins in package-lock.json) from the jsDelivr CDN instead of the static image. The spec's numbers
are rounded to 4 significant digits and Altair's counter-based names (``view_3``,
``param_7``) renumbered from 1, so a stored notebook output is the same on every machine.
The book's HTML draws the spec with vega-embed served from the book itself
(``tools/posgeo_book_assets.py``; the MyST-NB renderer is :mod:`posgeo._mystnb`).

Importing this module changes nothing: the renderer is enabled by :func:`notebook_setup` or
:func:`enable_charts` only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import warnings
from typing import Any, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

__all__ = [
    'COLUMN_WIDTH',
    'PANEL_WIDTH',
    'PANEL_HEIGHT',
    'series_colour',
    'colour_scale',
    'finish_chart',
    'panel_grid',
    'series_chart',
    'heatmap_chart',
    'chart_spec',
    'notebook_setup',
    'display_table',
    'plot_spectra',
]

#: Width in px of a one-panel chart's plotting area: the book's text column is 784 px wide
#: at 1400 px, and the axes, padding and legend need the rest.
COLUMN_WIDTH = 620
#: Width in px of one panel of a two-column :func:`panel_grid`.
PANEL_WIDTH = 290
#: Height in px of one panel of a :func:`panel_grid`.
PANEL_HEIGHT = 220

# ----------------------------------------------------------------------------- palette
# Okabe & Ito (2008), then Paul Tol's "muted" scheme: both readable with the common forms of
# colour-vision deficiency. Named so that the table below reads as what it means.
_C = {
    "blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "orange": "#E69F00",
    "sky": "#56B4E9", "purple": "#CC79A7", "black": "#000000", "yellow": "#F0E442",
    "wine": "#882255", "teal": "#44AA99", "olive": "#999933", "indigo": "#332288",
    "rose": "#CC6677", "sand": "#DDCC77", "grey": "#888888", "light grey": "#BBBBBB",
}
# First match wins (lower-cased substring): encodings, then corpora, then estimators and
# reference lines. A name such as "sst2 corrected" takes its corpus's colour (and a dash).
_NAMED: tuple[tuple[str, str], ...] = (
    ("sinus", "orange"), ("rope", "purple"), ("alibi", "sky"), ("random", "grey"),
    ("simplex", "black"), ("equidistant", "black"), ("minilm", "wine"), ("bert", "wine"),
    ("smacof", "indigo"), ("pmds", "teal"), ("p_mds", "teal"), ("mds", "teal"),
    ("low-rank", "olive"), ("lowrank", "olive"), ("learned", "blue"), ("free", "blue"),
    ("nope", "light grey"), ("none", "light grey"),
    ("synthetic", "blue"), ("sst", "vermillion"), ("imdb", "green"),
    ("plug-in", "blue"), ("plugin", "blue"), ("hybrid", "vermillion"), ("corrected", "vermillion"),
    ("matched", "purple"), ("first-order", "sky"), ("floor", "black"), ("chance", "grey"),
    ("truth", "black"), ("reference", "black"), ("null", "grey"),
)
_FALLBACK = ("blue", "vermillion", "green", "orange", "purple", "sky", "wine", "teal", "olive",
             "indigo", "rose", "sand", "black", "yellow")
_DASHES = (("corrected", [6, 3]), ("hybrid", [6, 3]), ("floor", [2, 2]), ("chance", [2, 2]),
           ("reference", [2, 2]), ("null", [2, 2]), ("bound", [2, 2]))


def series_colour(name: str) -> str | None:
    """The book's colour for a corpus, an encoding or an estimator, or None if it has none.

    Parameters
    ----------
    name : str
        A series name, e.g. ``"sst2"``, ``"sinusoidal"``, ``"imdb corrected"``.

    Returns
    -------
    str or None
        A hex colour; None for a name the palette does not know.

    Examples
    --------
    >>> series_colour("sst2"), series_colour("SST-2 corrected"), series_colour("Sinusoidal")
    ('#D55E00', '#D55E00', '#E69F00')
    >>> series_colour("something else") is None
    True
    """
    low = str(name).lower()
    for key, colour in _NAMED:
        if key in low:
            return _C[colour]
    return None


def _dash(name: str) -> list[int]:
    low = str(name).lower()
    for key, dash in _DASHES:
        if key in low:
            return dash
    return [1, 0]


def colour_scale(names: Sequence[str]) -> alt.Scale:
    """An Altair colour scale giving each of ``names`` the book's colour.

    Known names get :func:`series_colour`; the others get the palette's colours that no known
    name of this chart uses, in order. Two names with the same book colour (e.g. ``"sst2"``
    and ``"sst2 corrected"``) share it: tell them apart by dash (:func:`series_chart` does).

    Parameters
    ----------
    names : sequence of str
        The series of one chart, in legend order (duplicates are dropped).

    Returns
    -------
    altair.Scale

    Examples
    --------
    >>> colour_scale(["imdb", "mystery"]).to_dict()
    {'domain': ['imdb', 'mystery'], 'range': ['#009E73', '#0072B2']}
    """
    domain = list(dict.fromkeys(str(n) for n in names))
    known = {n: series_colour(n) for n in domain}
    used = {c for c in known.values() if c is not None}
    spare = [_C[c] for c in _FALLBACK if _C[c] not in used]
    colours = []
    for n in domain:
        if known[n] is None:
            known[n] = spare.pop(0) if spare else _C["grey"]
        colours.append(known[n])
    return alt.Scale(domain=domain, range=colours)


def _slug(*parts: Any) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:6]


# ----------------------------------------------------------------------------- theme
def finish_chart(chart: Any, *, description: str, title: str | None = None, canvas: bool = False) -> Any:
    """Apply the book's theme to a chart and give it its alt text.

    Call it once, on the outermost chart (a layer or concatenation can be configured only
    at the top).

    Parameters
    ----------
    chart : altair chart
    description : str, keyword-only
        What the chart shows, in a sentence or two: the alt text (screen readers, the
        notebook's text output, the SVG's ``aria-label``).
    title : str, optional, keyword-only
        A title above the chart.
    canvas : bool, keyword-only, default False
        Draw with the canvas renderer (for charts with thousands of marks; SVG otherwise).

    Returns
    -------
    altair chart
        The same chart, configured.

    Examples
    --------
    >>> c = finish_chart(alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x:Q"),
    ...                  description="Two points.")
    >>> c.to_dict()["description"]
    'Two points.'
    """
    if not isinstance(description, str) or not description.strip():
        raise ValueError("finish_chart: description must be a non-empty sentence saying what the chart shows (the alt text)")
    props: dict[str, Any] = {"description": description.strip()}
    if title:
        props["title"] = alt.TitleParams(title, anchor="start")
    if canvas:
        props["usermeta"] = {"embedOptions": {"renderer": "canvas"}}
    return (
        chart.properties(**props)
        .configure(font="Helvetica Neue, Helvetica, Arial, sans-serif", padding=6)
        .configure_axis(labelFontSize=11, titleFontSize=12, titleFontWeight="normal", gridColor="#e8e8e8",
                        domainColor="#888888", tickColor="#888888", labelLimit=180)
        .configure_legend(orient="bottom", direction="horizontal", columns=3, labelFontSize=11,
                          titleFontSize=11, symbolStrokeWidth=2.5, labelLimit=240, gradientLength=220)
        .configure_title(fontSize=13, fontWeight="bold", anchor="start", subtitleFontSize=11)
        .configure_header(labelFontSize=12, titleFontSize=12)
        .configure_view(stroke="#dddddd")
        .configure_range(category=[_C[c] for c in _FALLBACK])
    )


def panel_grid(charts: Sequence[Any], *, columns: int = 2) -> Any:
    """Several panels as one chart, ``columns`` per row (the page re-flows it on a phone).

    Parameters
    ----------
    charts : sequence of altair charts
        Unconfigured panels (call :func:`finish_chart` on the result).
    columns : int, keyword-only, default 2
        Panels per row at the book's column width (two panels of :data:`PANEL_WIDTH`).

    Returns
    -------
    altair.ConcatChart
    """
    charts = list(charts)
    if not charts:
        raise ValueError("panel_grid: no panels given; pass at least one chart")
    if len(charts) == 1:
        return charts[0]
    return alt.concat(*charts, columns=max(1, min(int(columns), len(charts))))


def series_chart(
    frame: pd.DataFrame,
    *,
    x: str,
    y: str,
    series: str | None = None,
    lower: str | None = None,
    upper: str | None = None,
    x_title: str | None = None,
    y_title: str | None = None,
    series_title: str | None = None,
    title: str | None = None,
    x_type: str = "quantitative",
    x_scale: Mapping[str, Any] | None = None,
    y_scale: Mapping[str, Any] | None = None,
    points: bool = False,
    width: int = COLUMN_WIDTH,
    height: int = 260,
    tooltip: Sequence[str] = (),
    zoom: bool = True,
    series_order: Sequence[str] | None = None,
) -> alt.LayerChart:
    """Lines (one per series) with optional interval bands: the book's line chart.

    Hover a point for its values; click a legend entry to show that series alone (shift-click
    for several); drag or scroll on the plot to pan and zoom along x (double-click resets).
    Series are coloured by :func:`colour_scale` and dashed where they are corrected estimates
    or reference lines.

    Parameters
    ----------
    frame : pandas.DataFrame
        Long format: one row per (series, x).
    x, y : str, keyword-only
        Column names.
    series : str, optional, keyword-only
        Column naming the series (None: one line).
    lower, upper : str, optional, keyword-only
        Columns bounding an interval drawn as a band around each line.
    x_title, y_title, series_title, title : str, optional, keyword-only
        Axis, legend and panel titles (defaults: the column names).
    x_type : str, keyword-only, default "quantitative"
        Vega-Lite type of x ("quantitative", "ordinal", "nominal").
    x_scale, y_scale : mapping, optional, keyword-only
        Vega-Lite scale properties, e.g. ``{"type": "log"}``.
    points : bool, keyword-only, default False
        Draw a point at every value (they always exist, invisibly, for the tooltips).
    width, height : int, keyword-only
        Size of the plotting area in px.
    tooltip : sequence of str, keyword-only
        Extra columns to show on hover.
    zoom : bool, keyword-only, default True
        Pan and zoom along x.
    series_order : sequence of str, optional, keyword-only
        The colour scale's domain (default: the series in order of appearance); give panels
        that share one legend the same list.

    Returns
    -------
    altair.LayerChart

    Examples
    --------
    >>> f = pd.DataFrame({"k": [1, 2, 1, 2], "v": [0.5, 0.2, 0.6, 0.4], "who": ["a", "a", "b", "b"]})
    >>> spec = series_chart(f, x="k", y="v", series="who").to_dict()
    >>> [layer["mark"]["type"] for layer in spec["layer"]]
    ['line', 'point']
    """
    for column in [x, y, series, lower, upper, *tooltip]:
        if column is not None and column not in frame.columns:
            raise ValueError(f"series_chart: no column {column!r} in the frame; it has {list(frame.columns)}")
    if (lower is None) != (upper is None):
        raise ValueError("series_chart: give both lower= and upper= (the band's two edges), or neither")
    data = frame.copy()
    if series is None:
        series = "series"
        data[series] = y_title or y
    data[series] = data[series].astype(str)
    names = list(dict.fromkeys(data[series]))
    if series_order is not None:
        extra = sorted(set(names) - {str(n) for n in series_order})
        if extra:
            raise ValueError(f"series_chart: series {extra} are not in series_order; add them")
        names = [str(n) for n in dict.fromkeys(series_order)]
    key = _slug(title, x, y, series, tuple(names), len(data))
    xtype = {"quantitative": "Q", "ordinal": "O", "nominal": "N"}[x_type]
    x_enc = alt.X(f"{x}:{xtype}", title=x_title or x, scale=alt.Scale(**(x_scale or {})) if x_scale else alt.Undefined,
                  axis=alt.Axis(labelAngle=0) if xtype != "Q" else alt.Undefined)
    y_enc = alt.Y(f"{y}:Q", title=y_title or y, scale=alt.Scale(**(y_scale or {})) if y_scale else alt.Undefined)
    colour = alt.Color(f"{series}:N", scale=colour_scale(names), title=series_title or (None if series == "series" else series),
                       legend=alt.Legend(symbolType="stroke"))
    dash = alt.StrokeDash(f"{series}:N", scale=alt.Scale(domain=names, range=[_dash(n) for n in names]))  # merged into the colour legend
    pick = alt.selection_point(fields=[series], bind="legend", name=f"pick_{key}")
    shown = alt.condition(pick, alt.value(1.0), alt.value(0.12))
    base = alt.Chart(data).properties(width=width, height=height)
    if title:
        base = base.properties(title=title)
    line = base.mark_line(strokeWidth=2).encode(x=x_enc, y=y_enc, color=colour, strokeDash=dash, opacity=shown).add_params(pick)
    if zoom and x_type == "quantitative":
        line = line.add_params(alt.selection_interval(bind="scales", encodings=["x"], name=f"zoom_{key}"))
    layers = [line]  # first: the legend takes its symbols from it
    if lower is not None:
        layers.append(base.mark_area(opacity=0.18).encode(
            x=x_enc, y=alt.Y(f"{lower}:Q", title=y_title or y), y2=alt.Y2(f"{upper}:Q"),
            color=alt.Color(f"{series}:N", scale=colour_scale(names)),
            opacity=alt.condition(pick, alt.value(0.18), alt.value(0.03))))
    tips = [alt.Tooltip(f"{series}:N", title=series_title or "series"), alt.Tooltip(f"{x}:{xtype}", title=x_title or x),
            alt.Tooltip(f"{y}:Q", title=y_title or y, format=".4~g")]
    if lower is not None:
        tips += [alt.Tooltip(f"{lower}:Q", title="lower", format=".4~g"), alt.Tooltip(f"{upper}:Q", title="upper", format=".4~g")]
    tips += [alt.Tooltip(c) for c in tooltip]
    layers.append(base.mark_point(filled=True, size=36 if points else 60).encode(
        x=x_enc, y=y_enc, color=alt.Color(f"{series}:N", scale=colour_scale(names)),
        opacity=alt.condition(pick, alt.value(0.9 if points else 0.01), alt.value(0.01)), tooltip=tips))
    return alt.layer(*layers)


def _block_mean(M: np.ndarray, side: int) -> tuple[np.ndarray, int]:
    n = M.shape[0]
    block = max(1, math.ceil(n / side))
    if block == 1:
        return M, 1
    m = math.ceil(n / block)
    padded = np.full((m * block, m * block), np.nan)
    padded[:n, :n] = M
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = np.nanmean(padded.reshape(m, block, m, block), axis=(1, 3))
    return out, block


def heatmap_chart(
    matrix: Any,
    *,
    title: str | None = None,
    value_title: str = "Hellinger distance",
    domain: tuple[float, float] | None = (0.0, 1.0),
    scheme: str = "viridis",
    max_side: int = 128,
    x_title: str = "position j",
    y_title: str = "position i",
    width: int = PANEL_WIDTH,
    digits: int = 3,
) -> alt.Chart:
    """A square matrix as a heatmap with a colour bar; hover a cell for its positions and value.

    A matrix larger than ``max_side`` is shown as the means of square blocks (a 510 x 510
    matrix as 128 x 128 blocks of 4 x 4 positions), and the tooltip names the block's
    positions. The values travel as one compact array, unpacked in the browser.

    Parameters
    ----------
    matrix : array_like, shape (n, n)
    title, value_title, x_title, y_title : str, keyword-only
    domain : (float, float) or None, keyword-only
        The colour scale's range (None: the data's).
    scheme : str, keyword-only
        A Vega colour scheme (perceptually uniform: "viridis", "magma", "blueorange" for signed).
    max_side : int, keyword-only, default 128
    width : int, keyword-only
        Width (= height) of the plotting area in px.
    digits : int, keyword-only, default 3
        Decimals kept in the data (and shown in the tooltip).

    Returns
    -------
    altair.Chart

    Examples
    --------
    >>> spec = heatmap_chart(np.eye(3), title="I").to_dict()
    >>> spec["mark"]["type"], spec["encoding"]["color"]["field"]
    ('rect', 'value')
    """
    from .validation import check_real_array

    M = check_real_array(matrix, "matrix")
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise ValueError(f"heatmap_chart: matrix must be square and non-empty, got shape {M.shape}")
    n = M.shape[0]
    B, block = _block_mean(M, int(max_side))
    m = B.shape[0]
    flat = [None if not np.isfinite(v) else round(float(v), digits) for v in B.ravel()]
    data = alt.Data(values=[{"v": flat}])
    last = n - 1
    label = (f"datum.r0 + (datum.r0 + {block - 1} > datum.r0 ? '–' + min(datum.r0 + {block - 1}, {last}) : '')"
             if block > 1 else "'' + datum.r0")
    label_j = label.replace("r0", "c0")
    chart = (
        alt.Chart(data)
        .transform_flatten(["v"], as_=["value"])
        .transform_window(idx="row_number()")
        .transform_calculate(r0=f"floor((datum.idx - 1) / {m}) * {block}", c0=f"((datum.idx - 1) % {m}) * {block}")
        # each cell overlaps its neighbours by 0.6 px, so no hairline seams show between cells
        .transform_calculate(r1=f"min(datum.r0 + {block} + {0.6 * n / width:.4g}, {n})",
                             c1=f"min(datum.c0 + {block} + {0.6 * n / width:.4g}, {n})",
                             rows=label, cols=label_j)
        .mark_rect(strokeWidth=0)
        .encode(
            x=alt.X("c0:Q", title=x_title, scale=alt.Scale(domain=[0, n], nice=False), axis=alt.Axis(grid=False)),
            x2="c1:Q",
            y=alt.Y("r0:Q", title=y_title, scale=alt.Scale(domain=[0, n], nice=False, reverse=True), axis=alt.Axis(grid=False)),
            y2="r1:Q",
            color=alt.Color("value:Q", title=value_title,
                            scale=alt.Scale(scheme=scheme, **({"domain": list(domain)} if domain else {})),
                            legend=alt.Legend(type="gradient", orient="bottom", direction="horizontal", gradientLength=min(width, 260))),
            tooltip=[alt.Tooltip("rows:N", title=y_title), alt.Tooltip("cols:N", title=x_title),
                     alt.Tooltip("value:Q", title=value_title + (" (block mean)" if block > 1 else ""), format=f".{digits}f")],
        )
        .properties(width=width, height=width)
    )
    if block > 1:
        chart = chart.properties(title=alt.TitleParams(title or "", subtitle=f"means of {block} x {block} blocks"))
    elif title:
        chart = chart.properties(title=title)
    return chart


# ----------------------------------------------------------------------------- display
_NAME = re.compile(r"\b(view|param)_(\d+)\b")


def _round(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0 or value == int(value):
            return value
        if abs(value) >= 1000:
            return round(value, 1)
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def _dataset_name(rows: Any) -> str:
    """Altair's name for inline data (``data-`` and a hash of the rows), of the rounded rows."""
    return "data-" + hashlib.sha256(json.dumps(rows, sort_keys=True).encode("utf-8")).hexdigest()[:32]


def _canonical(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Round the numbers to 4 significant digits, renumber Altair's counter names and rename
    the data sets by their rounded rows.

    Altair names a data set by a hash of its unrounded values, so a difference far below the
    shown precision (a last-digit change of a float between machines or library versions)
    renamed it and changed the stored output; the name now follows what is stored."""
    rounded = _round(dict(spec))
    text = json.dumps(rounded, sort_keys=False)
    datasets = rounded.get("datasets")
    if isinstance(datasets, dict):
        for old in datasets:
            new = _dataset_name(datasets[old])
            if new != old:
                text = re.sub(r'(?<=")' + re.escape(old) + r'(?=")', new, text)
    order: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return order.setdefault(match.group(0), f"{match.group(1)}_{len([k for k in order if k.startswith(match.group(1))]) + 1}")

    return json.loads(_NAME.sub(rename, text))


def _n_rows(spec: Any) -> int:
    """Data values a spec carries (inline data anywhere in it; a packed array counts its items)."""
    total = 0
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key in ("values",) and isinstance(value, list) or key == "datasets" and isinstance(value, dict):
                rows = value if isinstance(value, list) else [r for v in value.values() for r in v]
                for row in rows:
                    packed = [len(v) for v in row.values() if isinstance(v, list)] if isinstance(row, dict) else []
                    total += max(packed, default=1)
            else:
                total += _n_rows(value)
    elif isinstance(spec, list):
        total += sum(_n_rows(v) for v in spec)
    return total


_SVG_MAX_ROWS = 4000  # data rows above which the static fallback is a PNG without trying SVG
_SVG_MAX_CHARS = 150_000  # an SVG larger than this (one element per mark) is replaced by a PNG


def _static_image(spec: Mapping[str, Any]) -> dict[str, Any]:
    try:
        import vl_convert as vlc
    except ImportError:  # pragma: no cover - vl-convert is a dependency; a trimmed install shows no fallback
        return {}
    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    try:
        if _n_rows(spec) <= _SVG_MAX_ROWS:
            svg = vlc.vegalite_to_svg(dict(spec), vl_version=version)
            if len(svg) <= _SVG_MAX_CHARS:
                return {"image/svg+xml": svg}
        png = vlc.vegalite_to_png(dict(spec), vl_version=version, scale=1)
        return {"image/png": base64.b64encode(png).decode("ascii")}
    except Exception as error:  # pragma: no cover - a fallback image is a convenience
        warnings.warn(f"posgeo: no static image for a chart ({error}); the interactive chart is unaffected", stacklevel=2)
        return {}


# The versions of the book's package-lock.json (tests/test_plotting.py checks that they agree):
# Colab's charts load these from the CDN, so that they draw as the book's pages do.
_VEGA_VERSIONS = {"vega": "5.33.1", "vega-lite": "5.23.0", "vega-embed": "6.29.0"}
_COLAB_CDN = "https://cdn.jsdelivr.net/npm"


def _in_colab() -> bool:
    """Whether this kernel runs on Google Colab (its ``google.colab`` module is loaded there)."""
    import sys

    return "google.colab" in sys.modules


def _colab_html(spec: Mapping[str, Any]) -> str:
    """The chart as HTML that loads vega, vega-lite and vega-embed from the CDN (Altair's own
    template, the one its HTML renderer uses on Colab), at the book's pinned versions."""
    from altair.utils.html import spec_to_html

    options = {"renderer": "svg", "actions": {"export": True, "source": False, "compiled": False, "editor": False},
               **spec.get("usermeta", {}).get("embedOptions", {})}  # as on the book's pages
    return spec_to_html(dict(spec), mode="vega-lite", vega_version=_VEGA_VERSIONS["vega"],
                        vegalite_version=_VEGA_VERSIONS["vega-lite"], vegaembed_version=_VEGA_VERSIONS["vega-embed"],
                        base_url=_COLAB_CDN, output_div="posgeo-chart", embed_options=options, template="universal")


def chart_spec(chart: Any) -> dict[str, Any]:
    """A chart's Vega-Lite spec as posgeo stores it: the same on every machine.

    Numbers are rounded to 4 significant digits (1 decimal from 1,000 up; integers kept),
    Altair's counter-based names (``view_7``, ``param_3``, which depend on how many
    charts the process made before) are renumbered from 1 in order of appearance, and each
    inline data set is named by a hash of its rounded rows (Altair hashes the unrounded
    ones, so a change below the shown precision would rename it).

    Parameters
    ----------
    chart : altair chart or mapping
        A chart, or its spec (``chart.to_dict()``).

    Returns
    -------
    dict

    Examples
    --------
    >>> spec = chart_spec(alt.Chart(pd.DataFrame({"x": [0.123456]})).mark_point().encode(x="x:Q"))
    >>> spec["datasets"].popitem()[1]
    [{'x': 0.1235}]
    """
    return _canonical(chart if isinstance(chart, Mapping) else chart.to_dict())


def chart_bundle(spec: Mapping[str, Any], **_metadata: Any) -> dict[str, Any]:
    """The ``posgeo`` Altair renderer: a chart's notebook output.

    Returns the Vega-Lite spec (numbers rounded to 4 significant digits, Altair's counter
    names renumbered, so the stored output is machine-independent), a static SVG (a PNG for
    charts with more than 4,000 data rows or an SVG over 150 kB: one element per mark) for
    viewers that cannot run Vega, and the alt text as plain text. On Google Colab, which draws
    no Vega-Lite output, an HTML output that draws the chart with vega-embed from the jsDelivr
    CDN (the vega, vega-lite and vega-embed versions of the book's package-lock.json) replaces
    the static image.

    Parameters
    ----------
    spec : mapping
        A Vega-Lite spec (``chart.to_dict()``).

    Returns
    -------
    dict
        A MIME bundle.

    Examples
    --------
    >>> spec = finish_chart(alt.Chart(pd.DataFrame({"x": [0.123456]})).mark_point().encode(x="x:Q"),
    ...                     description="One point.").to_dict()
    >>> bundle = chart_bundle(spec)
    >>> bundle["text/plain"], bundle["application/vnd.vegalite.v5+json"]["datasets"].popitem()[1]
    ('Chart: One point.', [{'x': 0.1235}])
    """
    canonical = chart_spec(spec)
    bundle: dict[str, Any] = {"application/vnd.vegalite.v5+json": canonical}
    if _in_colab():  # interactive through HTML; no static image that Colab could prefer to it
        bundle["text/html"] = _colab_html(canonical)
    else:
        bundle.update(_static_image(canonical))
    bundle["text/plain"] = "Chart: " + str(canonical.get("description") or "(no description)")
    return bundle


def enable_charts() -> None:
    """Register and enable the ``posgeo`` Altair renderer (:func:`chart_bundle`).

    :func:`notebook_setup` calls it; call it yourself to get the book's chart output elsewhere.
    """
    alt.renderers.register("posgeo", chart_bundle)
    alt.renderers.enable("posgeo")


_QUIET_ENV = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
}


def notebook_setup(*, quiet: bool = True, precision: int = 4) -> pd.DataFrame:
    """Prepare a chapter: quiet progress output, compact tables, the book's charts.

    Called explicitly in each chapter's first cell (importing posgeo changes nothing). Sets
    the environment variables that silence progress bars (so notebook outputs are
    reproducible), pandas' display precision, and enables the ``posgeo`` chart renderer
    (:func:`enable_charts`).

    Parameters
    ----------
    quiet : bool, keyword-only
        Silence tqdm / Hugging Face progress bars (``setdefault``: an explicit user setting wins).
    precision : int, keyword-only
        Digits pandas shows for floats.

    Returns
    -------
    pandas.DataFrame
        The versions of the main libraries, for the record.
    """
    if quiet:
        for key, value in _QUIET_ENV.items():
            os.environ.setdefault(key, value)
    pd.set_option("display.precision", precision)
    pd.set_option("display.max_columns", 20)
    pd.set_option("display.width", 120)
    enable_charts()
    import torch

    from . import __version__

    return pd.DataFrame(
        {"package": ["posgeo", "numpy", "pandas", "altair", "torch"],
         "version": [__version__, np.__version__, pd.__version__, alt.__version__, torch.__version__.split("+")[0]]}
    ).set_index("package")


def display_table(frame: pd.DataFrame, *, digits: int = 4, missing: str = "n/a", mixed: bool = False) -> pd.DataFrame:
    """A table as a reader should see it: counts as integers, no ``NaN`` cells.

    Float columns whose values are all whole numbers become integers (``67349``, not
    ``67349.0000``); other floats are rounded to ``digits`` decimals; missing values (``NaN``,
    ``None``) read ``missing``. Say in the text why a cell is missing. With ``mixed=True``
    (a column of different quantities, such as a summary's "value"), each cell is formatted
    on its own: whole numbers as integers, the others to ``digits`` decimals.

    Parameters
    ----------
    frame : pandas.DataFrame
    digits : int, keyword-only, default 4
    missing : str, keyword-only, default "n/a"
    mixed : bool, keyword-only, default False
        Format every float cell on its own (the column becomes text).

    Returns
    -------
    pandas.DataFrame
        A copy; columns with a missing value become text columns.

    Examples
    --------
    >>> display_table(pd.DataFrame({"n": [67349.0, 12.0], "x": [0.123456, float("nan")]}))
           n       x
    0  67349  0.1235
    1     12     n/a
    >>> display_table(pd.DataFrame({"value": [67349.0, 0.571]}), mixed=True)
        value
    0   67349
    1  0.5710
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"display_table: expected a pandas DataFrame, got {type(frame).__name__}")
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            if values.isna().any():
                out[column] = values.astype(object).where(values.notna(), missing)
            continue
        finite = values.dropna()
        whole = bool(len(finite)) and bool(np.all(np.isfinite(finite))) and bool(np.all(finite == np.round(finite)))
        if mixed and pd.api.types.is_float_dtype(values) and not whole:
            out[column] = values.map(lambda v: missing if pd.isna(v) else (
                str(int(v)) if np.isfinite(v) and v == round(v) else f"{v:.{digits}f}")).astype(object)
        elif values.isna().any():
            shown = values.map(lambda v: missing if pd.isna(v) else (int(v) if whole else f"{v:.{digits}f}"))
            out[column] = shown.astype(object)
        elif whole:
            out[column] = values.astype(np.int64)
        elif pd.api.types.is_float_dtype(values):
            out[column] = values.round(digits)
    return out


# ----------------------------------------------------------------------------- the library's charts
def plot_spectra(spectra: Mapping[str, np.ndarray], *, top: int = 40) -> Any:
    """Eigen-spectra of double-centred Gram matrices: normalised eigenvalues and cumulative energy.

    Parameters
    ----------
    spectra : mapping of str to (n,) arrays
        Eigenvalues, descending (negatives allowed).
    top : int, keyword-only
        How many leading eigenvalues the left panel draws.

    Returns
    -------
    altair chart
        Left: ``|eigenvalue| / sum |eigenvalues|`` for the first ``top`` (log scale; eigenvalues
        within ``n * eps * max |eigenvalue|`` of 0, float64 rounding, are 0 and not drawn);
        right: the share of the positive eigenvalues' sum in the top r (log r), with the 99% line.
    """
    left, right = [], []
    for name, lam in spectra.items():
        lam = np.asarray(lam, dtype=float)
        # eigenvalues within numpy's rank tolerance of 0 are rounding (their digits differ
        # between BLAS builds): 0, and left out of the log panel, which cannot draw 0
        lam = np.where(np.abs(lam) <= lam.size * np.finfo(float).eps * np.abs(lam).max(initial=0.0), 0.0, lam)
        k = np.arange(1, min(top, lam.size) + 1)
        share = np.abs(lam[: k.size]) / np.abs(lam).sum()
        left.append(pd.DataFrame({"index": k, "share": share, "series": name})[share > 0])
        pos = np.clip(lam, 0, None)
        right.append(pd.DataFrame({"rank": np.arange(1, lam.size + 1), "energy": np.cumsum(pos) / pos.sum(), "series": name}))
    order = [*spectra, "99% reference"]  # both panels: one colour scale, one legend
    a = series_chart(pd.concat(left), x="index", y="share", series="series", points=True, x_title="eigenvalue index",
                     y_title="|eigenvalue| / sum |eigenvalues|", y_scale={"type": "log"}, series_title="spectrum",
                     width=PANEL_WIDTH, height=PANEL_HEIGHT, title="leading eigenvalues", series_order=order)
    energy = pd.concat(right)
    ranks = energy["rank"].max()
    energy = pd.concat([energy, pd.DataFrame({"rank": [1, ranks], "energy": [0.99, 0.99], "series": "99% reference"})])
    b = series_chart(energy, x="rank", y="energy", series="series", x_title="rank r", y_title="energy in the top r",
                     x_scale={"type": "log"}, series_title="spectrum", width=PANEL_WIDTH, height=PANEL_HEIGHT,
                     title="cumulative energy", series_order=order)
    return finish_chart(
        alt.hconcat(a, b).resolve_scale(color="shared"),
        description=("Eigen-spectra: the leading eigenvalues' shares (log scale, left) and the cumulative share "
                     f"of the positive eigenvalues in the top r (right) for {', '.join(spectra)}; the dotted line is 99%. "
                     "Eigenvalues that are 0 to float64 rounding are not drawn on the log scale."),
    )
