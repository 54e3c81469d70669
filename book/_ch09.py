"""Helper of the chapter "What the layers do to positions" (09_layers): sizes, yardsticks, charts."""

from __future__ import annotations

from types import SimpleNamespace

import altair as alt
import numpy as np
import pandas as pd
import torch

import posgeo as pg


def settings(profile=None):
    """Sizes of a profile (``POSGEO_PROFILE``): MiniLM (small) or bert-base-uncased, P1's model (full)."""
    full = pg.current_profile(profile) == "full"
    return SimpleNamespace(
        model="bert-base-uncased" if full else None,  # None: the bundled all-MiniLM-L6-v2
        n_positions={"sst2": 48, "imdb": 510},
        hidden_sequences={"sst2": 279, "imdb": 1024} if full else {"sst2": 256, "imdb": 32},
        batch_size=16,
    )


def positional_input_error(model, n, token_ids, offset=1):
    """Median, 90% and max relative error of Pi against the embedding output per token (both centred over positions)."""
    emb, _ = pg.encoder_parts(model)
    ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64))
    Pi = pg.positional_input(model, n, offset=offset)
    Pi = Pi - Pi.mean(axis=0)
    positions = torch.arange(offset, offset + n)[None, :].expand(len(ids), n)
    with torch.no_grad():
        out = emb(input_ids=ids[:, None].expand(len(ids), n).contiguous(),
                  position_ids=positions.contiguous()).double().numpy()  # (tokens, n, d)
    X = out - out.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(X, axis=(1, 2))
    err = np.linalg.norm(X - Pi, axis=(1, 2)) / norm
    cos = (X * Pi).sum(axis=(1, 2)) / norm / np.linalg.norm(Pi)
    return pd.Series({"median": float(np.median(err)), "90%": float(np.quantile(err, 0.9)),
                      "max": float(err.max()), "median cosine": float(np.median(cos))})


def random_map_stress(P, D, widths, n_draws=20, seed=0, scale="optimal"):
    """Projected stress of P through random Gaussian maps (d, k) for k in widths, concatenated; one per draw."""
    rng = np.random.default_rng(seed)
    return np.array([
        pg.projected_stress(P, D, [rng.standard_normal((P.shape[1], w)) for w in widths], scale=scale)
        for _ in range(n_draws)
    ])


def plot_layer_stress(tables, column="optimal", title="", log=False):
    """Stress against the layer, one line per table (label "corpus, target"; corrected targets dashed)."""
    frame = pd.concat(
        [pd.DataFrame({"layer": np.asarray(t.index, dtype=int), "stress": t[column].to_numpy(dtype=float), "target": label})
         for label, t in tables.items()],
        ignore_index=True,
    )
    measure = {"optimal": "scale-optimal stress", "raw": "raw stress"}.get(column, f"{column} stress")
    layers = sorted(int(x) for x in frame["layer"].unique())
    chart = pg.series_chart(frame, x="layer", y="stress", series="target", points=True, zoom=False,
                            x_title="layer (0 = input)", y_title=measure, series_title="corpus, target",
                            title=title or None, x_scale={"domain": [layers[0], layers[-1]], "nice": False},
                            y_scale={"type": "log"} if log else None)
    for layer in chart.layer:
        layer.encoding.x.axis = alt.Axis(values=layers, format="d")
        if log:
            layer.encoding.y.axis = alt.Axis(format="~g")
    return pg.finish_chart(
        chart,
        description=(f"{measure.capitalize()}{' (log scale)' if log else ''} against the layer, layer 0 being the input"
                     + (f" ({title})" if title else "") + f", for {', '.join(tables)}; "
                     "corrected targets are dashed in their corpus colour."),
    )


def plot_head_stress(tables, value_title="scale-optimal stress"):
    """Heatmaps of per-head stress (layers x heads), one panel per table, one colour bar; hover a cell."""
    vmax = max(float(np.nanmax(t.to_numpy(dtype=float))) for t in tables.values())
    colour = alt.Scale(scheme="magma", domain=[0.0, vmax])
    panels = []
    for label, t in tables.items():
        long = t.stack().rename("stress").reset_index().astype({"layer": int, "head": int, "stress": float})
        panels.append(
            alt.Chart(long, title=str(label)).mark_rect(stroke="white", strokeWidth=0.5).encode(
                x=alt.X("head:O", title="head", sort=[int(h) for h in t.columns], axis=alt.Axis(labelAngle=0)),
                y=alt.Y("layer:O", title="layer", sort=[int(x) for x in t.index]),
                color=alt.Color("stress:Q", title=value_title, scale=colour,
                                legend=alt.Legend(orient="bottom", direction="horizontal", gradientLength=260)),
                tooltip=[alt.Tooltip("layer:O"), alt.Tooltip("head:O"), alt.Tooltip("stress:Q", title=value_title, format=".4f")],
            ).properties(width=pg.PANEL_WIDTH, height=max(120, 24 * len(t.index)))
        )
    return pg.finish_chart(
        pg.panel_grid(panels, columns=2).resolve_scale(color="shared"),
        description=(f"Heatmaps of the per-head {value_title} (rows: layers, columns: heads), one panel each for "
                     f"{', '.join(tables)}, on one colour scale; hover a cell for its value."),
    )
