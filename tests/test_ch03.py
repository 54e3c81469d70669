"""Tests of book/_ch03.py: the charts of the chapter on the statistical geometry of positions.

Charts are checked as data (their Vega-Lite spec), never as images."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import _ch03 as ch
import posgeo as pg


@pytest.fixture(scope="module")
def geometries():
    out = []
    for gamma, lengths in ((0.0, None), (2.0, np.r_[np.full(150, 12), np.full(50, 6)])):
        c = pg.load_corpus("synthetic", n_sequences=200, n_positions=12, vocab_size=24, nonstationarity=gamma,
                           lengths=lengths)
        out.append(pg.corpus_geometry(c, 12, cache=False, min_count=160))
    return out


def walk(spec):
    if isinstance(spec, dict):
        yield spec
        for value in spec.values():
            yield from walk(value)
    elif isinstance(spec, list):
        for value in spec:
            yield from walk(value)


def datasets(spec) -> list[pd.DataFrame]:
    return [pd.DataFrame(rows) for rows in spec.get("datasets", {}).values()]


def test_heatmaps_linked_to_their_offset_curves(geometries):
    g = geometries[0]
    spec = ch.plot_distance_heatmaps({"one": g.distances, "two": geometries[1].distances}).to_dict()
    assert len(spec["vconcat"]) == 2  # one row per matrix
    heat, curve = spec["vconcat"][0]["hconcat"]
    assert heat["mark"]["type"] == "rect"
    params = [p for d in walk(spec) for p in d.get("params", []) if isinstance(p, dict)]
    linked = [p for p in params if p["name"].startswith("offset_")]
    assert len({p["name"] for p in linked}) == 2  # one selection per row, not shared between rows
    assert linked[0]["select"]["fields"] == ["offset"] and linked[0]["select"]["on"] == "pointerover"
    rule = [layer for layer in curve["layer"] if layer["mark"]["type"] == "rule"][0]
    assert rule["transform"] == [{"filter": {"param": linked[0]["name"], "empty": False}}]
    profile = [d for d in datasets(spec) if "mean" in d][0]
    assert profile["mean"].to_numpy() == pytest.approx(np.asarray(pg.distance_by_offset(g.distances)["mean"]), abs=1e-3)


def test_offset_profiles_show_plug_in_corrected_and_the_floor(geometries):
    spec = ch.plot_offset_profiles(geometries, max_offset=6).to_dict()
    assert len(spec["concat"]) == 2
    first = datasets(spec)[0]  # one data set per panel, in panel order
    assert set(first["series"]) == {"plug-in (band: min to max)", "corrected (hybrid)", "noise floor"}
    g = geometries[0]
    corrected = first[first["series"] == "corrected (hybrid)"]["mean"].to_numpy()
    assert corrected == pytest.approx(np.asarray(pg.distance_by_offset(g.hybrid, max_offset=6)["mean"]), abs=1e-3)
    # the floor at offset t is the mean over pairs of sqrt((s_i^2 + s_j^2) / 2), computed here by hand
    s = g.split_half
    by_hand = [np.mean([np.sqrt((s[i] ** 2 + s[i + t] ** 2) / 2) for i in range(12 - t)]) for t in range(1, 7)]
    floor = first[first["series"] == "noise floor"].set_index("offset")["mean"]
    assert floor.loc[1:6].to_numpy() == pytest.approx(by_hand, abs=1e-3)
    plugin = first[first["series"].str.startswith("plug-in")]
    assert (plugin["min"] <= plugin["mean"] + 1e-12).all() and (plugin["mean"] <= plugin["max"] + 1e-12).all()


def test_noise_floor_marks_flagged_positions_only(geometries):
    assert not geometries[0].flagged.any() and geometries[1].flagged.any()  # 50 sequences stop at 6 < min_count
    text = json.dumps(ch.plot_noise_floor(geometries).to_dict())
    assert "sequences reaching it" in text and '"type": "log"' in text and "triangle-up" in text
    assert "triangle-up" not in json.dumps(ch.plot_noise_floor(geometries[:1]).to_dict())
