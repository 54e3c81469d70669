"""The charts of the chapter on the statistical geometry of positions."""

from __future__ import annotations

import hashlib

import altair as alt
import numpy as np
import pandas as pd

import posgeo as pg

BLUE, BLACK, GREY = pg.series_colour("plug-in"), pg.series_colour("floor"), pg.series_colour("chance")


def _profile(D, name, max_offset):
    """Mean, min and max of a distance matrix at each offset |i - j|, as a frame."""
    prof = pd.DataFrame(pg.distance_by_offset(D, max_offset=max_offset))
    return prof.assign(series=name)[["offset", "mean", "min", "max", "series"]]


def plot_distance_heatmaps(matrices, *, label="Hellinger distance"):
    """Heatmaps of distance matrices, each beside its linked distance-by-offset curve."""
    rows = []
    for name, M in matrices.items():
        M = np.asarray(M, dtype=float)
        key = hashlib.sha1(repr(("offset", name, M.shape)).encode()).hexdigest()[:6]
        at = alt.selection_point(on="pointerover", fields=["offset"], name=f"offset_{key}", clear="pointerout")
        heat = (pg.heatmap_chart(M, title=f"{name} (n = {M.shape[0]})", value_title=label, domain=(0.0, 1.0))
                .transform_calculate(offset="abs(datum.r0 - datum.c0)")
                .encode(opacity=alt.condition(at, alt.value(1.0), alt.value(0.35)))
                .add_params(at))
        prof = _profile(M, name, None).drop(columns="series")
        base = alt.Chart(prof).encode(x=alt.X("offset:Q", title="offset |i - j|"))
        band = base.mark_area(opacity=0.2, color=BLUE).encode(y=alt.Y("min:Q", title=f"mean {label}"), y2="max:Q")
        line = base.mark_line(color=BLUE, strokeWidth=2).encode(y="mean:Q")
        dots = base.mark_point(filled=True, size=50, color=BLUE).encode(
            y="mean:Q", opacity=alt.condition(at, alt.value(1.0), alt.value(0.01), empty=False),
            tooltip=[alt.Tooltip("offset:Q", title="offset |i - j|"), alt.Tooltip("mean:Q", format=".3f"),
                     alt.Tooltip("min:Q", format=".3f"), alt.Tooltip("max:Q", format=".3f")]).add_params(at)
        rule = base.mark_rule(color=BLACK, strokeDash=[3, 3]).transform_filter(
            alt.FilterTransform(filter={"param": at.name, "empty": False}).filter)
        curve = alt.layer(band, line, rule, dots).properties(width=pg.PANEL_WIDTH, height=pg.PANEL_WIDTH,
                                                             title=f"{name}: distance by offset")
        rows.append(alt.hconcat(heat, curve, spacing=24))
    names = ", ".join(matrices)
    return pg.finish_chart(
        alt.vconcat(*rows, spacing=18),
        description=(f"For {names}: the heatmap of the {label} between positions i and j, beside the mean "
                     "distance at each offset |i - j| (band: minimum to maximum over the pairs). Hovering a "
                     "cell marks its offset on the curve; hovering the curve lights up the cells at that offset."),
        canvas=any(np.asarray(M).shape[0] > 64 for M in matrices.values()),
    )


def plot_offset_profiles(geometries, *, max_offset=64):
    """Mean plug-in and corrected distance by offset, with the noise floor, one panel per corpus."""
    panels = []
    for g in geometries:
        s2 = g.split_half**2
        floor = np.sqrt(0.5 * (s2[:, None] + s2[None, :]))
        np.fill_diagonal(floor, 0.0)
        frame = pd.concat([_profile(g.distances, "plug-in (band: min to max)", max_offset),
                           _profile(g.hybrid, "corrected (hybrid)", max_offset).assign(min=np.nan, max=np.nan),
                           _profile(floor, "noise floor", max_offset).assign(min=np.nan, max=np.nan)],
                          ignore_index=True)
        panels.append(pg.series_chart(frame, x="offset", y="mean", series="series", lower="min", upper="max",
                                      x_title="offset |i - j|", y_title=f"mean {g.metric} distance",
                                      series_title="curve", title=f"{g.name} (n = {g.n_positions})",
                                      width=pg.PANEL_WIDTH, height=pg.PANEL_HEIGHT))
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2),
        description=("Mean distance between positions against their offset |i - j|, one panel per corpus: "
                     "plug-in (with its min-max band over pairs), corrected, and the noise floor "
                     "that two samples of one distribution would show."),
    )


def plot_noise_floor(geometries):
    """Per position: the split-half distance above the number of sequences reaching it."""
    panels = []
    for g in geometries:
        flagged = np.asarray(g.flagged, dtype=bool)
        frame = pd.DataFrame({"position": np.arange(g.n_positions), "split-half distance": np.asarray(g.split_half, float),
                              "sequences": np.asarray(g.counts, dtype=int),
                              "status": np.where(flagged, "too few sequences", "enough sequences")})
        top = pg.series_chart(frame.assign(curve="split-half distance"), x="position", y="split-half distance",
                              series="curve", y_title="chord Hellinger", title=f"{g.name}", width=pg.PANEL_WIDTH,
                              height=150, y_scale={"domain": [0, 1]}, tooltip=["sequences"])
        marks = alt.Chart(frame[flagged]).mark_point(shape="triangle-up", filled=True, size=40, color=BLACK).encode(
            x="position:Q", y="split-half distance:Q",
            shape=alt.Shape("status:N", scale=alt.Scale(domain=["too few sequences"], range=["triangle-up"]), title=None),
            tooltip=["position", alt.Tooltip("split-half distance:Q", format=".3f"), "sequences"])
        reach = alt.Chart(frame).mark_line(color=GREY, strokeWidth=1.5).encode(
            x=alt.X("position:Q", title="position"),
            y=alt.Y("sequences:Q", title="sequences reaching it", scale=alt.Scale(type="log"),
                    axis=alt.Axis(tickCount=3, format="~s")),
            tooltip=["position", "sequences"]).properties(width=pg.PANEL_WIDTH, height=90)
        panels.append(alt.vconcat(alt.layer(top, marks) if flagged.any() else top, reach, spacing=4))
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2),
        description=("Per corpus: the split-half distance of each position (the noise floor; triangles mark "
                     "positions reached by too few sequences) above the number of sequences reaching it, on a log scale."),
    )
