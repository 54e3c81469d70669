"""Tests for book/_ch09.py, the helper of the chapter "What the layers do to positions"."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch

import _ch09 as ch
from posgeo import pairwise_distances, projected_stress, stress


def _points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)), pairwise_distances(rng.normal(size=(n, 3)))


def test_random_map_stress_is_seeded_and_scale_free() -> None:
    P, D = _points(10, 8)
    a = ch.random_map_stress(P, D, (4, 4), n_draws=6, seed=3)
    b = ch.random_map_stress(P, D, (4, 4), n_draws=6, seed=3)
    c = ch.random_map_stress(10.0 * P, D, (4, 4), n_draws=6, seed=3)
    assert a.shape == (6,) and np.array_equal(a, b) and np.allclose(a, c, atol=1e-12)
    assert not np.array_equal(a, ch.random_map_stress(P, D, (4, 4), n_draws=6, seed=4))


def test_random_map_stress_is_the_stress_of_the_concatenated_gaussian_images() -> None:
    P, D = _points(9, 1)
    rng = np.random.default_rng(5)
    G1, G2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    assert ch.random_map_stress(P, D, (3, 2), n_draws=1, seed=5, scale="raw")[0] == pytest.approx(
        stress(np.hstack([P @ G1, P @ G2]), D), rel=1e-12)


def test_wide_random_maps_are_near_isometries() -> None:
    """The chapter's yardstick: a Gaussian map from d to 2 * 20 d dimensions hardly changes scale-optimal stress."""
    P, D = _points(12, 2)
    band = ch.random_map_stress(P, D, (100, 100), n_draws=5)
    assert np.abs(band - stress(P, D, scale="optimal")).max() < 0.05
    narrow = ch.random_map_stress(P, D, (1, 1), n_draws=5)
    assert np.abs(narrow - stress(P, D, scale="optimal")).mean() > np.abs(band - stress(P, D, scale="optimal")).mean()


def test_positional_input_error_vanishes_when_sigma_is_constant(tiny_bert: torch.nn.Module) -> None:
    loose = ch.positional_input_error(tiny_bert, 8, [5, 6, 7])
    assert loose["median"] > 1e-2  # random tiny embeddings: sigma varies with the position
    # Exact case: positions on coordinates 0-3, words on 4-7 with zero mean and the same
    # large spread, no token type. Then word and position are uncorrelated, every token has
    # the same sigma, and sigma hardly depends on the position: the linearisation is exact.
    model = copy.deepcopy(tiny_bert)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        w = torch.zeros(40, 8)
        w[:, 4:] = torch.randn(40, 4, generator=g)
        w[:, 4:] -= w[:, 4:].mean(1, keepdim=True)
        w *= 30.0 / w.std(1, unbiased=False, keepdim=True)  # large, but within float32 precision
        model.embeddings.word_embeddings.weight.copy_(w)
        model.embeddings.position_embeddings.weight[:, 4:] = 0.0
        model.embeddings.token_type_embeddings.weight.zero_()
    tight = ch.positional_input_error(model, 8, [5, 6, 7])
    assert tight["max"] < 1e-3 and tight["median cosine"] > 0.999999


def test_scaling_one_map_changes_raw_stress_and_a_common_scale_leaves_optimal_stress() -> None:
    """Exercise 2's claims, on any configuration: doubling both maps leaves scale-optimal stress
    unchanged; doubling one map is a change of shape."""
    P, D = _points(10, 3)
    rng = np.random.default_rng(7)
    Q, K = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    base = projected_stress(P, D, [Q, K], scale="optimal")
    assert projected_stress(P, D, [2 * Q, 2 * K], scale="optimal") == pytest.approx(base, rel=1e-12)
    assert projected_stress(P, D, [2 * Q, K], scale="optimal") != pytest.approx(base, rel=1e-6)
    assert projected_stress(P, D, [2 * Q, K / 2]) != pytest.approx(projected_stress(P, D, [Q, K]), rel=1e-6)


def test_settings() -> None:
    small, full = ch.settings("small"), ch.settings("full")
    assert small.model is None and full.model == "bert-base-uncased"
    assert small.n_positions == full.n_positions == {"sst2": 48, "imdb": 510}
    assert small.hidden_sequences == {"sst2": 256, "imdb": 32}
    with pytest.raises(ValueError):
        ch.settings("medium")


def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_layer_stress_plot_colours_by_corpus_and_dashes_the_corrected_target():
    t = pd.DataFrame({"optimal": [0.1, 0.2, 0.15], "raw": [1.0, 5.0, 3.0]}, index=pd.Index([0, 1, 2], name="layer"))
    spec = ch.plot_layer_stress({"sst2, plug-in": t, "sst2, corrected": t}, title="projected").to_dict()
    line = spec["layer"][0]
    assert line["mark"]["type"] == "line"
    colours = dict(zip(line["encoding"]["color"]["scale"]["domain"], line["encoding"]["color"]["scale"]["range"]))
    assert colours["sst2, plug-in"] == colours["sst2, corrected"] == "#D55E00"
    dashes = dict(zip(line["encoding"]["strokeDash"]["scale"]["domain"], line["encoding"]["strokeDash"]["scale"]["range"]))
    assert dashes["sst2, corrected"] != dashes["sst2, plug-in"]
    assert {r["stress"] for r in _rows(spec)} == {0.1, 0.2, 0.15}
    assert "scale" not in line["encoding"]["y"]
    logged = ch.plot_layer_stress({"imdb, plug-in": t}, log=True).to_dict()
    assert logged["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"


def test_head_stress_plot_is_a_hoverable_heatmap_with_one_colour_bar():
    t = pd.DataFrame([[0.1, 0.2], [0.3, 0.4]], index=pd.Index([1, 2], name="layer"), columns=pd.Index([0, 1], name="head"))
    spec = ch.plot_head_stress({"sst2": t, "imdb": t * 0.5}).to_dict()
    assert len(spec["concat"]) == 2 and spec["resolve"]["scale"]["color"] == "shared"
    panel = spec["concat"][0]
    assert panel["mark"]["type"] == "rect"
    assert panel["encoding"]["color"]["scale"]["domain"] == [0.0, 0.4]
    assert {tip["field"] for tip in panel["encoding"]["tooltip"]} == {"layer", "head", "stress"}
    assert {(r["layer"], r["head"], r["stress"]) for r in _rows(spec)} >= {(2, 1, 0.4), (1, 0, 0.05)}
