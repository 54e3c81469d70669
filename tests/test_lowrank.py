"""Tests for posgeo._lowrank: parameter counts, partial eigensolvers, rank-r stress, the training sweep."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo.experiments.papers import PAPER_P1, PAPER_P1_LOWRANK
from posgeo.experiments.lowrank import (
    LowRankSettings,
    effective_rank_table,
    gram_spectra,
    lowrank_claim_table,
    lowrank_parameter_count,
    lowrank_encodings,
    lowrank_settings,
    lowrank_training_runs,
    lowrank_training_sweep,
    mlm_marginal_metrics,
    plot_accuracy_vs_parameters,
    plot_rank_stress_curves,
    positional_parameter_count,
    rank_r_stress_curve,
    synthetic_mlm_task,
)
from posgeo import (
    Transformer,
    TransformerConfig,
    classical_mds,
    count_parameters,
    double_centered_gram,
    hellinger_matrix,
    pairwise_distances,
    stress,
    synthetic_marginals,
    top_eigenpairs,
)


# ----------------------------------------------------------------------------- parameter counts
def test_p1_parameter_numbers_follow_from_the_formula() -> None:
    n, d, r = PAPER_P1_LOWRANK["n_positions"], PAPER_P1_LOWRANK["d_model"], PAPER_P1_LOWRANK["rank"]
    assert lowrank_parameter_count(n, d, r) == 480
    saving = 1 - lowrank_parameter_count(n, d, r) / (n * d)
    assert round(saving, 2) == PAPER_P1["lowrank/synthetic/parameter_saving"]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 24), d=st.integers(2, 24), data=st.data())
def test_lowrank_model_has_the_stated_parameter_count_and_rank(n: int, d: int, data: st.DataObject) -> None:
    n_heads = 2 if d % 2 == 0 else 1
    r = data.draw(st.integers(1, min(n, d)))
    base = TransformerConfig(vocab_size=7, d_model=d, n_heads=n_heads, n_layers=1, d_ff=8, max_len=n)
    model = Transformer(dataclasses.replace(base, position="lowrank", rank=r), seed=0)
    blind = Transformer(dataclasses.replace(base, position="none"), seed=0)
    free = Transformer(base, seed=0)
    # counted two independent ways: the named factors, and the difference to a position-free model
    assert positional_parameter_count(model) == lowrank_parameter_count(n, d, r) == r * (n + d)
    assert count_parameters(model) - count_parameters(blind) == r * (n + d)
    assert positional_parameter_count(free) == n * d == count_parameters(free) - count_parameters(blind)
    assert positional_parameter_count(blind) == 0
    table = model.position_table()
    assert table.shape == (n, d)
    A = model.pos_a.detach().double().numpy()
    Bf = model.pos_b.detach().double().numpy()
    assert A.shape == (n, r) and Bf.shape == (d, r)
    np.testing.assert_allclose(table, A @ Bf.T, rtol=1e-5, atol=1e-8)
    assert np.linalg.matrix_rank(A @ Bf.T) == r  # exact rank of the float64 product
    sv = np.linalg.svd(table, compute_uv=False)  # the float32 table: rank r up to rounding
    assert np.all(sv[r:] < 1e-5 * sv[0])


def test_positional_parameter_count_ignores_frozen_and_fixed_tables() -> None:
    cfg = TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=6, position="sinusoidal")
    assert positional_parameter_count(Transformer(cfg)) == 0
    learned = Transformer(dataclasses.replace(cfg, position="learned"))
    learned.pos.requires_grad_(False)
    assert positional_parameter_count(learned) == 0
    with pytest.raises(TypeError, match="posgeo Transformer"):
        positional_parameter_count(torch.nn.Linear(2, 2))


def test_lowrank_parameter_count_validation() -> None:
    with pytest.raises(ValueError, match="min\\(n, d\\)"):
        lowrank_parameter_count(4, 8, 5)
    with pytest.raises(ValueError, match=">= 1"):
        lowrank_parameter_count(4, 8, 0)
    with pytest.raises(TypeError, match="int"):
        lowrank_parameter_count(4, 8, 2.0)


# ----------------------------------------------------------------------------- eigenpairs
@pytest.mark.parametrize("method", ["full", "subset", "arpack"])
def test_top_eigenpairs_match_a_full_decomposition(method: str) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 60))
    B = X @ X.T / 60 + np.diag(np.linspace(5, 0, 60))
    lam_ref = np.sort(np.linalg.eigvalsh(B))[::-1][:7]
    lam, V = top_eigenpairs(B, 7, method=method)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-9)
    np.testing.assert_allclose(V.T @ V, np.eye(7), atol=1e-9)
    np.testing.assert_allclose(B @ V, V * lam, atol=1e-8)
    # sign convention: the largest-magnitude entry of every column is positive
    assert np.all(V[np.argmax(np.abs(V), axis=0), np.arange(7)] > 0)
    _, V_full = top_eigenpairs(B, 7, method="full")
    np.testing.assert_allclose(V, V_full, atol=1e-7)


def test_top_eigenpairs_auto_uses_a_partial_solver_on_a_large_centred_gram() -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1100, 6)) * np.arange(6, 0, -1)
    B = double_centered_gram(pairwise_distances(X))  # B @ 1 = 0: the constant is in its null space
    lam, V = top_eigenpairs(B, 5)  # auto: n >= 1024 and k <= n / 16 -> ARPACK
    lam_ref, V_ref = top_eigenpairs(B, 5, method="full")
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-10)
    np.testing.assert_allclose(np.abs(V_ref.T @ V), np.eye(5), atol=1e-8)


def test_top_eigenpairs_validation() -> None:
    with pytest.raises(ValueError, match="symmetric"):
        top_eigenpairs(np.triu(np.ones((3, 3))), 1)
    with pytest.raises(ValueError, match="exceeds n"):
        top_eigenpairs(np.eye(3), 4)
    with pytest.raises(ValueError, match="k < n"):
        top_eigenpairs(np.eye(3), 3, method="arpack")
    with pytest.raises(ValueError, match="unknown method"):
        top_eigenpairs(np.eye(3), 1, method="qr")


# ----------------------------------------------------------------------------- rank-r stress
def test_rank_r_curve_matches_classical_mds_and_reaches_zero_at_the_true_rank() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3)) * np.array([3.0, 1.5, 0.5])
    D = pairwise_distances(X)
    curve = rank_r_stress_curve(D, [1, 2, 3, 5], progress=False)
    for r in (1, 2, 3):
        assert curve.loc[r, "classical raw"] == pytest.approx(classical_mds(D, r).stress, rel=1e-9)
    assert curve.loc[3, "classical raw"] < 1e-20 and curve.loc[3, "energy"] == pytest.approx(1.0)
    assert np.all(np.diff(curve["energy"]) >= -1e-12)
    # SMACOF starts from the classical solution and never ends worse
    assert np.all(curve["SMACOF raw"] <= curve["classical raw"] + 1e-12)
    assert np.all(curve["SMACOF optimal"] <= curve["SMACOF raw"] + 1e-12)


def test_rank_r_curve_partial_solver_agrees_with_full() -> None:
    D = hellinger_matrix(synthetic_marginals(32, 64, nonstationarity=0.5))
    full = rank_r_stress_curve(D, [1, 2, 3], smacof=False, method="full", progress=False)
    part = rank_r_stress_curve(D, [1, 2, 3], smacof=False, method="subset", progress=False)
    # chord Hellinger: B is PSD, so trace(B) is the positive mass and both energies agree
    np.testing.assert_allclose(part.to_numpy(), full.to_numpy(), rtol=1e-8)


def test_rank_r_curve_validation() -> None:
    D = 1 - np.eye(4)
    with pytest.raises(ValueError, match="exceeds"):
        rank_r_stress_curve(D, [5], progress=False)
    with pytest.raises(ValueError, match="distinct"):
        rank_r_stress_curve(D, [1, 1], progress=False)


def test_claim_table_reports_our_numbers_beside_p1() -> None:
    D = hellinger_matrix(synthetic_marginals(32, 64, nonstationarity=0.5))
    t = lowrank_claim_table(D, n_positions=32, smacof_max_iter=100)
    assert t.loc["stress reduction (raw)", "P1"] == PAPER_P1_LOWRANK["stress_reduction"]
    assert t.loc["parameter saving", "SMACOF"] == pytest.approx(1 - 480 / 4096)
    s_sin = stress(np.asarray(__import__("posgeo").sinusoidal_encoding(32, 128)), D)
    assert t.loc["stress sinusoidal (raw)", "SMACOF"] == pytest.approx(s_sin)
    # raw stress reduction is dominated by the scale of the sinusoids; scale-optimal is smaller
    assert t.loc["stress reduction (raw)", "SMACOF"] > t.loc["stress reduction (scale-optimal)", "SMACOF"]
    with pytest.raises(ValueError, match="n_positions"):
        lowrank_claim_table(D, n_positions=16)


# ----------------------------------------------------------------------------- training
def test_settings_profiles() -> None:
    small, full = lowrank_settings("small"), lowrank_settings("full")
    assert small.steps < full.steps and full.d_model == PAPER_P1_LOWRANK["d_model"]
    with pytest.raises(ValueError, match="ranks"):
        LowRankSettings(ranks=(64,), d_model=32)
    with pytest.raises(ValueError, match="unknown profile"):
        lowrank_settings("huge")


def test_mlm_marginal_metrics_bayes_model_scores_the_bayes_accuracy() -> None:
    """A model that outputs log mu_i at every position has excess loss 0 and the Bayes accuracy."""
    s = lowrank_settings("small")
    task, mu = synthetic_mlm_task(s)

    class Oracle(Transformer):
        def forward(self, tokens, **kwargs):  # type: ignore[override]
            out = super().forward(tokens, **kwargs)
            logits = torch.full_like(out.logits, -1e9)
            logits[..., : mu.shape[1]] = torch.log(torch.as_tensor(mu, dtype=logits.dtype))[None]
            return dataclasses.replace(out, logits=logits)

    cfg = TransformerConfig(vocab_size=task.vocab_size, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=32)
    m = mlm_marginal_metrics(Oracle(cfg), task, mu, n_batches=2, batch_size=64)
    assert m["excess_loss"] == pytest.approx(0.0, abs=1e-9)
    # expected accuracy of predicting argmax mu_i, averaged over the masked positions drawn
    assert m["accuracy"] == pytest.approx(mu.max(axis=1).mean(), rel=0.1)
    with pytest.raises(ValueError, match="marginals must have shape"):
        mlm_marginal_metrics(Oracle(cfg), task, mu[:5], n_batches=1)


def test_settings_seeds_and_seed_encodings() -> None:
    small, full = lowrank_settings("small"), lowrank_settings("full")
    assert small.seeds == full.seeds == (0, 1, 2, 3, 4)
    assert small.seed_encodings == ("rank 2", "learned") and full.seed_encodings is None
    assert [label for label, _, _ in lowrank_encodings(small)] == ["none", "sinusoidal", "rank 1", "rank 2", "rank 3",
                                                                   "rank 8", "learned"]
    with pytest.raises(ValueError, match="not one of the sweep's encodings"):
        dataclasses.replace(small, ranks=(1, 3))
    with pytest.raises(ValueError, match="distinct"):
        dataclasses.replace(small, seeds=(0, 0))
    with pytest.raises(TypeError, match="tuple of labels"):
        dataclasses.replace(small, seed_encodings="learned")


def _tiny(**kw) -> LowRankSettings:
    base = dict(d_model=16, d_ff=16, steps=3, ranks=(2,), seeds=(0, 1), seed_encodings=("rank 2", "learned"),
                eval_batches=1, eval_batch_size=16)
    return dataclasses.replace(lowrank_settings("small"), **{**base, **kw})


def test_training_runs_per_seed_structure_and_seed_dependence() -> None:
    """One row per (encoding, seed): the seeded encodings over every seed, the others over the first;
    a different seed trains a different table, the same seed the same one."""
    s = _tiny()
    runs = lowrank_training_runs(s, progress=False, cache=False)
    assert runs[["encoding", "seed"]].values.tolist() == [
        ["none", 0], ["sinusoidal", 0], ["rank 2", 0], ["rank 2", 1], ["learned", 0], ["learned", 1]]
    assert set(runs.attrs) == {"bayes_accuracy", "blind_accuracy", "mutual_information"}
    assert np.isnan(runs.set_index("encoding").loc["none", "stress"])
    by = runs.set_index(["encoding", "seed"])
    for label in ("rank 2", "learned"):  # the seed changes the initial and the trained table
        assert by.loc[(label, 0), "stress at init"] != by.loc[(label, 1), "stress at init"]
        assert by.loc[(label, 0), "stress"] != by.loc[(label, 1), "stress"]
    again = lowrank_training_runs(s, progress=False, cache=False)
    pd.testing.assert_frame_equal(again, runs)
    # seed 0 alone reproduces the seed-0 rows (the seed is the run's, not its position in the list)
    alone = lowrank_training_runs(_tiny(seeds=(1,), seed_encodings=None), progress=False, cache=False)
    np.testing.assert_array_equal(alone.set_index("encoding").loc[["rank 2", "learned"], "stress"].to_numpy(),
                                  by.xs(1, level="seed").loc[["rank 2", "learned"], "stress"].to_numpy())
    # the sweep is the mean over each encoding's seeds
    table = lowrank_training_sweep(s, runs=runs)
    assert table["seeds"].to_dict() == {"none": 1, "sinusoidal": 1, "rank 2": 2, "learned": 2}
    assert table.loc["learned", "stress"] == pytest.approx(by.xs("learned")["stress"].mean())
    assert table.attrs == runs.attrs
    summary = __import__("posgeo").seed_summary(runs[runs["seed"].groupby(runs["encoding"]).transform("size") > 1],
                                                by="encoding", metrics=["information"])
    assert list(summary.index) == ["rank 2", "learned"] and (summary[("information", "seeds")] == 2).all()
    with pytest.raises(TypeError, match="lowrank_training_runs"):
        lowrank_training_sweep(s, runs=runs.to_numpy())


@pytest.mark.slow
def test_training_sweep_tiny_runs_and_orders_the_baselines(private_cache) -> None:
    s = dataclasses.replace(lowrank_settings("small"), d_model=16, d_ff=32, steps=150, ranks=(2,), seeds=(0,),
                            eval_batches=2)
    table = lowrank_training_sweep(s, progress=False)
    assert list(table.index) == ["none", "sinusoidal", "rank 2", "learned"]
    assert table.loc["rank 2", "parameters"] == lowrank_parameter_count(32, 16, 2)
    assert table.loc["learned", "parameters"] == 32 * 16
    # no positional signal: the model can only learn the position-blind optimum
    assert table.loc["none", "information"] < 0.05
    assert table.loc["learned", "information"] > 0.5
    assert table.loc["learned", "accuracy"] > table.attrs["blind_accuracy"]
    assert table.loc["learned", "stress"] < table.loc["learned", "stress at init"]
    # cached: a second call gives identical numbers
    again = lowrank_training_sweep(s, progress=False)
    np.testing.assert_array_equal(again["excess_loss"].to_numpy(), table["excess_loss"].to_numpy())
    spec = plot_accuracy_vs_parameters(table).to_dict()
    assert "none" in _series(spec, "encoding") and "low-rank (rank r)" in _series(spec, "encoding")


def _marks(spec: dict) -> list[str]:
    """Mark types of every view in a (nested) Vega-Lite spec."""
    found = []
    if isinstance(spec, dict):
        if "mark" in spec:
            found.append(spec["mark"]["type"] if isinstance(spec["mark"], dict) else spec["mark"])
        for key in ("layer", "concat", "hconcat", "vconcat"):
            for sub in spec.get(key, []):
                found += _marks(sub)
    return found


def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def _series(spec: dict, field: str) -> set[str]:
    return {row[field] for row in _rows(spec) if field in row}


def test_rank_curve_plot_is_an_altair_chart_with_one_panel_per_method_and_corpus_colours() -> None:
    D = hellinger_matrix(synthetic_marginals(16, 32, nonstationarity=0.5))
    curve = rank_r_stress_curve(D, [1, 2, 4], progress=False)
    bands = pd.DataFrame({"SMACOF optimal low": curve["SMACOF optimal"] * 0.9,
                          "SMACOF optimal high": curve["SMACOF optimal"] * 1.1}, index=curve.index)
    chart = plot_rank_stress_curves({"synthetic plug-in": curve, "sst2 corrected": curve},
                                    intervals={"sst2 corrected": bands})
    spec = chart.to_dict()
    assert spec["description"]
    assert len(spec["concat"]) == 3  # classical, SMACOF, energy left out
    assert {"line", "point", "area"} <= set(_marks(spec))
    assert _series(spec, "geometry") == {"synthetic plug-in", "sst2 corrected"}
    smacof = spec["concat"][1]["layer"]
    colour = next(layer["encoding"]["color"] for layer in smacof if layer["mark"]["type"] == "line")
    assert dict(zip(colour["scale"]["domain"], colour["scale"]["range"]))["sst2 corrected"] == "#D55E00"
    line = next(layer for layer in smacof if layer["mark"]["type"] == "line")
    assert line["encoding"]["y"]["scale"]["type"] == "log"
    rows = [r for r in _rows(spec) if r.get("geometry") == "synthetic plug-in" and r["rank"] == 2]
    assert any(r["value"] == pytest.approx(curve.loc[2, "classical optimal"]) for r in rows)
    banded = [r for r in _rows(spec) if r.get("geometry") == "sst2 corrected" and r.get("low") == r.get("low")]
    assert banded  # the interval travels with the data
    with pytest.raises(ValueError, match="no curves"):
        plot_rank_stress_curves({})


def test_accuracy_plot_has_references_and_a_symlog_parameter_axis() -> None:
    table = pd.DataFrame(
        {"position": ["none", "sinusoidal", "lowrank", "lowrank", "learned"], "rank": [0, 0, 1, 2, 0],
         "parameters": [0, 0, 64, 128, 1024], "accuracy": [0.2, 0.5, 0.45, 0.5, 0.53],
         "information": [0.0, 0.9, 0.75, 0.85, 0.93], "stress": [np.nan, 0.3, 0.5, 0.4, 0.1]},
        index=["none", "sinusoidal", "rank 1", "rank 2", "learned"])
    table.attrs.update(bayes_accuracy=0.56, blind_accuracy=0.18)
    spec = plot_accuracy_vs_parameters(table).to_dict()
    assert len(spec["concat"]) == 3
    names = _series(spec, "encoding")
    assert {"none", "sinusoidal", "low-rank (rank r)", "learned", "Bayes optimum (reference)",
            "position-blind optimum (chance)"} <= names
    x = spec["concat"][0]["layer"][0]["encoding"]["x"]
    assert x["scale"]["type"] == "symlog" and x["axis"]["values"][0] == 0
    bayes = [r["value"] for r in _rows(spec) if r.get("encoding") == "Bayes optimum (reference)"]
    assert bayes and all(v == pytest.approx(0.56) for v in bayes)


def test_double_centered_gram_of_hellinger_is_psd_so_trace_is_the_mass() -> None:
    B = double_centered_gram(hellinger_matrix(synthetic_marginals(16, 32, nonstationarity=2.0)))
    lam = np.linalg.eigvalsh(B)
    assert lam.min() > -1e-12 and np.trace(B) == pytest.approx(np.clip(lam, 0, None).sum())


# ----------------------------------------------------------------------------- effective-rank tables
def test_effective_rank_table_and_spectra_on_a_known_configuration() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(12, 2)) * np.array([2.0, 1.0])  # exactly two dimensions
    D = pairwise_distances(X)
    table = effective_rank_table({"plane": D}, energies=(0.9, 0.999999), top=2)
    assert table.loc["plane", "n"] == 12 and table.loc["plane", "exact rank"] == 2
    assert table.loc["plane", "rank 99.9999%"] == 2
    assert table.loc["plane", "energy top 2"] == pytest.approx(1.0)
    assert table.loc["plane", "negative share"] == 0.0
    lam = gram_spectra({"plane": D})["plane"]
    assert lam.shape == (12,) and np.all(np.diff(lam) <= 1e-12)
    np.testing.assert_allclose(lam[:2], np.sort(np.linalg.eigvalsh(double_centered_gram(D)))[::-1][:2])
    # a non-Euclidean dissimilarity has negative eigenvalues and a positive negative share
    bad = np.array([[0, 1, 1, 3], [1, 0, 1, 1], [1, 1, 0, 1], [3, 1, 1, 0]], dtype=float)
    assert effective_rank_table({"bad": bad}).loc["bad", "negative share"] > 0


def test_rank_curve_intervals_come_from_the_bootstrap_of_the_same_geometry() -> None:
    from posgeo import bootstrap_geometry, synthetic_corpus

    boot = bootstrap_geometry(synthetic_corpus(n_sequences=400), 8, estimator="hybrid", n_boot=5, progress=False)
    curve = rank_r_stress_curve(boot.estimate, [1, 2], progress=False, intervals=boot)
    for col in ("classical optimal", "SMACOF optimal"):
        assert (curve[f"{col} low"] <= curve[col] + 1e-12).all() and (curve[col] <= curve[f"{col} high"] + 1e-12).all()
    plain = rank_r_stress_curve(boot.estimate, [1, 2], progress=False)
    np.testing.assert_allclose(curve[plain.columns].to_numpy(), plain.to_numpy())  # the curve itself is unchanged
    spec = plot_rank_stress_curves({"synthetic corrected": curve}).to_dict()
    assert "area" in _marks(spec)
    with pytest.raises(ValueError, match="estimate must be D"):
        rank_r_stress_curve(boot.estimate * 2, [1], progress=False, intervals=boot)
