"""Tests for book/_ch07.py, the helper of the low-rank chapter: parameter counts, effective ranks, rank-r stress,
P1's claim table, the masked-token metrics and the training sweep."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import _ch07 as ch
import posgeo as pg
from posgeo.experiments.papers import PAPER_P1, PAPER_P1_LOWRANK


# ----------------------------------------------------------------------------- parameter counts
def test_p1_parameter_numbers_follow_from_the_formula() -> None:
    n, d, r = PAPER_P1_LOWRANK["n_positions"], PAPER_P1_LOWRANK["d_model"], PAPER_P1_LOWRANK["rank"]
    assert ch.parameter_count(n, d, r) == 480
    assert round(1 - ch.parameter_count(n, d, r) / (n * d), 2) == PAPER_P1["lowrank/synthetic/parameter_saving"]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 24), d=st.integers(2, 24), data=st.data())
def test_lowrank_model_has_the_stated_parameter_count_and_rank(n: int, d: int, data: st.DataObject) -> None:
    r = data.draw(st.integers(1, min(n, d)))
    base = pg.TransformerConfig(vocab_size=7, d_model=d, n_heads=2 if d % 2 == 0 else 1, n_layers=1, d_ff=8, max_len=n)
    model = pg.Transformer(dataclasses.replace(base, position="lowrank", rank=r), seed=0)
    blind = pg.Transformer(dataclasses.replace(base, position="none"), seed=0)
    free = pg.Transformer(base, seed=0)
    # counted two independent ways: the named factors, and the difference to a position-free model
    assert ch.positional_parameters(model) == ch.parameter_count(n, d, r) == r * (n + d)
    assert pg.count_parameters(model) - pg.count_parameters(blind) == r * (n + d)
    assert ch.positional_parameters(free) == n * d == pg.count_parameters(free) - pg.count_parameters(blind)
    assert ch.positional_parameters(blind) == 0
    A, W = model.pos_a.detach().double().numpy(), model.pos_b.detach().double().numpy()
    assert A.shape == (n, r) and W.shape == (d, r)
    np.testing.assert_allclose(model.position_table(), A @ W.T, rtol=1e-5, atol=1e-8)
    assert np.linalg.matrix_rank(A @ W.T) == r


def test_positional_parameters_ignore_fixed_and_frozen_tables() -> None:
    cfg = pg.TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=6, position="sinusoidal")
    assert ch.positional_parameters(pg.Transformer(cfg)) == 0
    learned = pg.Transformer(dataclasses.replace(cfg, position="learned"))
    learned.pos.requires_grad_(False)
    assert ch.positional_parameters(learned) == 0
    from posgeo._train import POSITION_PARAMETERS

    assert set(ch.POSITION_PARAMETERS) == set(POSITION_PARAMETERS)  # the copy agrees with the library's


# ----------------------------------------------------------------------------- the library's eigensolver
@pytest.mark.parametrize("method", ["full", "subset", "arpack"])
def test_top_eigenpairs_match_a_full_decomposition(method: str) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 60))
    B = X @ X.T / 60 + np.diag(np.linspace(5, 0, 60))
    lam, V = pg.top_eigenpairs(B, 7, method=method)
    np.testing.assert_allclose(lam, np.sort(np.linalg.eigvalsh(B))[::-1][:7], rtol=1e-9)
    np.testing.assert_allclose(V.T @ V, np.eye(7), atol=1e-9)
    np.testing.assert_allclose(B @ V, V * lam, atol=1e-8)
    assert np.all(V[np.argmax(np.abs(V), axis=0), np.arange(7)] > 0)  # largest entry of every column positive
    np.testing.assert_allclose(V, pg.top_eigenpairs(B, 7, method="full")[1], atol=1e-7)


def test_top_eigenpairs_auto_uses_a_partial_solver_on_a_large_centred_gram() -> None:
    X = np.random.default_rng(4).normal(size=(1100, 6)) * np.arange(6, 0, -1)
    B = pg.double_centered_gram(pg.pairwise_distances(X))
    lam, V = pg.top_eigenpairs(B, 5)  # auto: n >= 1024 and k <= n / 16 -> ARPACK
    lam_ref, V_ref = pg.top_eigenpairs(B, 5, method="full")
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-10)
    np.testing.assert_allclose(np.abs(V_ref.T @ V), np.eye(5), atol=1e-8)


# ----------------------------------------------------------------------------- effective rank
def test_rank_table_and_spectra_on_a_known_configuration() -> None:
    X = np.random.default_rng(5).normal(size=(12, 2)) * np.array([2.0, 1.0])  # exactly two dimensions
    D = pg.pairwise_distances(X)
    table = ch.rank_table({"plane": D}, energies=(0.9, 0.999999), top=2)
    assert table.loc["plane", "n"] == 12 and table.loc["plane", "exact rank"] == 2
    assert table.loc["plane", "rank 99.9999%"] == 2
    assert table.loc["plane", "energy top 2"] == pytest.approx(1.0)
    assert table.loc["plane", "negative share"] == 0.0
    lam = ch.spectra({"plane": D})["plane"]
    assert lam.shape == (12,) and np.all(np.diff(lam) <= 1e-12)
    # a non-Euclidean dissimilarity has negative eigenvalues
    bad = np.array([[0, 1, 1, 3], [1, 0, 1, 1], [1, 1, 0, 1], [3, 1, 1, 0]], dtype=float)
    assert ch.rank_table({"bad": bad}).loc["bad", "negative share"] > 0


def test_chord_hellinger_gram_is_psd_with_exact_rank_n_minus_1() -> None:
    """The chapter's first finding on a fixture: generic marginals over V > n tokens span n - 1 dimensions."""
    D = pg.hellinger_matrix(pg.synthetic_marginals(16, 32, nonstationarity=2.0))
    lam = np.linalg.eigvalsh(pg.double_centered_gram(D))
    assert lam.min() > -1e-12
    assert ch.rank_table({"x": D}).loc["x", "exact rank"] == 15


def test_the_chapter_by_hand_equals_the_library() -> None:
    D = pg.hellinger_matrix(pg.synthetic_marginals(32, 64, nonstationarity=0.5))
    n = D.shape[0]
    J = np.eye(n) - np.ones((n, n)) / n
    B = -0.5 * J @ D**2 @ J
    lam = np.linalg.eigvalsh(B)[::-1]
    mass = np.cumsum(np.clip(lam, 0, None)) / np.clip(lam, 0, None).sum()
    assert np.abs(B - pg.double_centered_gram(D)).max() < 1e-15
    assert int(np.argmax(mass >= 0.9)) + 1 == pg.effective_rank(lam, energy=0.9).rank_at_energy == 5


# ----------------------------------------------------------------------------- rank-r stress
def test_stress_curve_matches_classical_mds_and_reaches_zero_at_the_true_rank() -> None:
    X = np.random.default_rng(0).normal(size=(20, 3)) * np.array([3.0, 1.5, 0.5])
    D = pg.pairwise_distances(X)
    curve = ch.stress_curve(D, [1, 2, 3, 5])
    for r in (1, 2, 3):
        assert curve.loc[r, "classical raw"] == pytest.approx(pg.classical_mds(D, r).stress, rel=1e-9)
    assert curve.loc[3, "classical raw"] < 1e-20 and curve.loc[3, "energy"] == pytest.approx(1.0)
    assert np.all(np.diff(curve["energy"]) >= -1e-12)
    assert np.all(curve["SMACOF raw"] <= curve["classical raw"] + 1e-12)  # SMACOF starts there and never ends worse
    assert np.all(curve["SMACOF optimal"] <= curve["SMACOF raw"] + 1e-12)


def test_stress_curve_intervals_come_from_the_bootstrap_of_the_same_geometry() -> None:
    boot = pg.bootstrap_geometry(pg.synthetic_corpus(n_sequences=400), 8, estimator="hybrid", n_boot=5, progress=False)
    curve = ch.stress_curve(boot.estimate, [1, 2], boot=boot)
    for col in ("classical optimal", "SMACOF optimal"):
        assert (curve[f"{col} low"] <= curve[col] + 1e-12).all() and (curve[col] <= curve[f"{col} high"] + 1e-12).all()
    plain = ch.stress_curve(boot.estimate, [1, 2])
    np.testing.assert_allclose(curve[plain.columns].to_numpy(), plain.to_numpy())  # the curve itself is unchanged


def test_claim_table_reports_our_numbers_beside_p1() -> None:
    D = pg.hellinger_matrix(pg.synthetic_marginals(32, 64, nonstationarity=0.5))
    t = ch.claim_table(D)
    assert t.loc["stress reduction (raw)", "P1"] == PAPER_P1_LOWRANK["stress_reduction"]
    assert t.loc["parameter saving", "SMACOF"] == pytest.approx(1 - 480 / 4096)
    assert t.loc["stress sinusoidal (raw)", "SMACOF"] == pytest.approx(pg.stress(pg.sinusoidal_encoding(32, 128), D))
    # the raw reduction is dominated by the sinusoids' scale; the scale-optimal one is smaller
    assert t.loc["stress reduction (raw)", "SMACOF"] > 0.998 > t.loc["stress reduction (scale-optimal)", "SMACOF"]


# ----------------------------------------------------------------------------- training
def test_marginal_metrics_of_the_bayes_model() -> None:
    """A model that outputs log mu_i at every position has excess loss 0 and the Bayes accuracy."""
    task, mu = ch.mlm_task(ch.settings("small"))

    class Oracle(pg.Transformer):
        def forward(self, tokens, **kwargs):  # type: ignore[override]
            out = super().forward(tokens, **kwargs)
            logits = torch.full_like(out.logits, -1e9)
            logits[..., : mu.shape[1]] = torch.log(torch.as_tensor(mu, dtype=logits.dtype))[None]
            return dataclasses.replace(out, logits=logits)

    cfg = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=32)
    m = ch.marginal_metrics(Oracle(cfg), task, mu, n_batches=2, batch_size=64)
    assert m["excess_loss"] == pytest.approx(0.0, abs=1e-9)
    assert m["accuracy"] == pytest.approx(ch.references(mu)["bayes_accuracy"], rel=0.1)


def test_references_of_a_position_free_corpus() -> None:
    """Marginals equal at every position: no mutual information, and the blind optimum is the Bayes optimum."""
    mu = np.tile(np.array([0.5, 0.3, 0.2]), (4, 1))
    refs = ch.references(mu)
    assert refs["mutual_information"] == pytest.approx(0.0, abs=1e-15)
    assert refs["bayes_accuracy"] == refs["blind_accuracy"] == pytest.approx(0.5)


def test_settings_profiles_and_encodings() -> None:
    small, full = ch.settings("small"), ch.settings("full")
    assert small.steps < full.steps and full.d_model == PAPER_P1_LOWRANK["d_model"]
    assert small.seeds == full.seeds == (0, 1, 2, 3, 4) and full.seed_encodings is None
    assert [label for label, _, _ in ch.encodings(small)] == ["none", "sinusoidal", "rank 1", "rank 2", "rank 3",
                                                              "rank 8", "learned"]
    assert set(small.seed_encodings) <= {label for label, _, _ in ch.encodings(small)}


def _train_sweep(s: ch.Settings) -> pd.DataFrame:
    """The chapter's loop, on settings s."""
    task, mu = ch.mlm_task(s)
    rows = []
    for label, position, rank in ch.encodings(s):
        for seed in (s.seeds if s.seed_encodings is None or label in s.seed_encodings else s.seeds[:1]):
            config = pg.TransformerConfig(vocab_size=task.vocab_size, d_model=s.d_model, n_heads=s.n_heads,
                                          n_layers=s.n_layers, d_ff=s.d_ff, max_len=s.n_positions, position=position, rank=rank)
            training = pg.TrainConfig(steps=s.steps, batch_size=s.batch_size, lr=s.lr, seed=seed, log_every=max(1, s.steps // 10),
                                      snapshot_every=s.steps if position != "none" else 0)
            result = pg.train(config, training, task, progress=False, cache=False)
            rows.append({"encoding": label, "position": position, "rank": rank or 0, "seed": seed,
                         **ch.score(result, task, mu, s)})
    return pd.DataFrame(rows), mu


def test_sweep_is_the_mean_over_each_encodings_seeds() -> None:
    s = dataclasses.replace(ch.settings("small"), d_model=16, d_ff=16, steps=3, ranks=(2,), seeds=(0, 1),
                            eval_batches=1, eval_batch_size=16)
    runs, mu = _train_sweep(s)
    assert runs[["encoding", "seed"]].values.tolist() == [
        ["none", 0], ["sinusoidal", 0], ["rank 2", 0], ["rank 2", 1], ["learned", 0], ["learned", 1]]
    assert np.isnan(runs.set_index("encoding").loc["none", "stress"])
    by = runs.set_index(["encoding", "seed"])
    for label in ("rank 2", "learned"):  # the seed changes the initial and the trained table
        assert by.loc[(label, 0), "stress at init"] != by.loc[(label, 1), "stress at init"]
    table = ch.sweep(runs, mu)
    assert table["seeds"].to_dict() == {"none": 1, "sinusoidal": 1, "rank 2": 2, "learned": 2}
    assert table["parameters"].to_dict() == {"none": 0, "sinusoidal": 0, "rank 2": 2 * (32 + 16), "learned": 32 * 16}
    assert table.loc["learned", "stress"] == pytest.approx(by.xs("learned")["stress"].mean())
    info = 1 - by.xs("rank 2")["excess_loss"] / ch.references(mu)["mutual_information"]
    assert table.loc["rank 2", "information"] == pytest.approx(info.mean())
    assert set(table.attrs) == {"bayes_accuracy", "blind_accuracy", "mutual_information"}


@pytest.mark.slow
def test_a_short_sweep_orders_the_baselines(private_cache) -> None:
    s = dataclasses.replace(ch.settings("small"), d_model=16, d_ff=32, steps=150, ranks=(2,), seeds=(0,), eval_batches=2)
    runs, mu = _train_sweep(s)
    table = ch.sweep(runs, mu)
    assert table.loc["none", "information"] < 0.05  # no positional signal: the position-blind optimum at best
    assert table.loc["learned", "information"] > 0.5
    assert table.loc["learned", "accuracy"] > table.attrs["blind_accuracy"]
    assert table.loc["learned", "stress"] < table.loc["learned", "stress at init"]


# ----------------------------------------------------------------------------- charts
def _rows(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_rank_curve_plot_has_a_panel_per_method_and_the_intervals() -> None:
    boot = pg.bootstrap_geometry(pg.synthetic_corpus(n_sequences=400), 8, estimator="hybrid", n_boot=5, progress=False)
    D = pg.hellinger_matrix(pg.synthetic_marginals(8, 32, nonstationarity=0.5))
    curves = {"synthetic plug-in": ch.stress_curve(D, [1, 2, 4]), "sst2 corrected": ch.stress_curve(boot.estimate, [1, 2, 4], boot=boot)}
    spec = ch.plot_rank_stress_curves(curves).to_dict()
    assert spec["description"] and len(spec["concat"]) == 3  # classical, SMACOF, energy left out
    assert {r["geometry"] for r in _rows(spec) if "geometry" in r} == set(curves)
    rows = [r for r in _rows(spec) if r.get("geometry") == "synthetic plug-in" and r["rank"] == 2]
    assert any(r["value"] == pytest.approx(curves["synthetic plug-in"].loc[2, "classical optimal"]) for r in rows)
    assert any(r.get("geometry") == "sst2 corrected" and r.get("low") is not None for r in _rows(spec))
    colour = next(layer["encoding"]["color"] for layer in spec["concat"][1]["layer"] if layer["mark"]["type"] == "line")
    assert dict(zip(colour["scale"]["domain"], colour["scale"]["range"]))["sst2 corrected"] == "#D55E00"


def test_accuracy_plot_has_references_and_a_symlog_parameter_axis() -> None:
    table = pd.DataFrame(
        {"position": ["none", "sinusoidal", "lowrank", "lowrank", "learned"], "rank": [0, 0, 1, 2, 0],
         "parameters": [0, 0, 64, 128, 1024], "accuracy": [0.2, 0.5, 0.45, 0.5, 0.53],
         "information": [0.0, 0.9, 0.75, 0.85, 0.93], "stress": [np.nan, 0.3, 0.5, 0.4, 0.1]},
        index=["none", "sinusoidal", "rank 1", "rank 2", "learned"])
    table.attrs.update(bayes_accuracy=0.56, blind_accuracy=0.18)
    spec = ch.plot_accuracy_vs_parameters(table).to_dict()
    assert len(spec["concat"]) == 3
    assert {"none", "sinusoidal", "low-rank (rank r)", "learned", "Bayes optimum (reference)",
            "position-blind optimum (chance)"} <= {r["encoding"] for r in _rows(spec) if "encoding" in r}
    x = spec["concat"][0]["layer"][0]["encoding"]["x"]
    assert x["scale"]["type"] == "symlog" and x["axis"]["values"][0] == 0
    assert json.dumps(spec)  # serialisable


def test_cross_fit_scores_every_table_against_every_geometry_and_pairs_the_margin() -> None:
    line = pg.pairwise_distances(np.arange(8.0)[:, None])
    angles = 2 * np.pi * np.arange(8) / 8
    ring_points = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    ring = pg.pairwise_distances(ring_points)
    rng = np.random.default_rng(0)
    tables = {}
    for seed in range(3):  # tables near their own geometry, a little noise per seed
        tables[("line", seed)] = np.arange(8.0)[:, None] * [1.0, 0.0] + 0.01 * rng.standard_normal((8, 2))
        tables[("ring", seed)] = ring_points + 0.01 * rng.standard_normal((8, 2))
    fits = ch.cross_fit(tables, {"line": line, "ring": ring})
    assert len(fits) == 6 * 2
    mean = fits.groupby(["trained on", "scored against"])["stress"].mean().unstack()
    assert mean.loc["line", "line"] < 0.01 < mean.loc["ring", "line"]
    assert mean.loc["ring", "ring"] < 0.01 < mean.loc["line", "ring"]
    margin = ch.own_corpus_margin(fits)
    assert set(margin.index) == {("line", "ring"), ("ring", "line")}
    assert (margin["low"] > 0).all() and margin["separated"].all()


def test_cross_corpora_have_distinct_geometries_and_names() -> None:
    s = ch.settings("small")
    tasks = {c: ch.cross_task(s, c) for c in ch.CROSS_CORPORA}
    assert len({t.name for t, _ in tasks.values()}) == 3
    D = {c: pg.hellinger_matrix(mu) for c, (_, mu) in tasks.items()}
    assert D["ring"][0, -1] < 0.5 * D["line"][0, -1]  # the ring closes, the line does not
    with pytest.raises(ValueError, match="unknown corpus 'spiral'"):
        ch.cross_task(s, "spiral")


def test_cross_runs_on_a_tiny_setting_and_the_shipped_file(private_cache) -> None:
    s = dataclasses.replace(ch.settings("small"), steps=3)
    runs = ch.cross_runs(s, seeds=(0, 1))
    assert set(runs["trained on"]) == {"ring", "line", "mixture", "initial"}
    assert len(runs) == 4 * 2 * 3 and runs["stress"].between(0, 1).all()
    if not ch.CROSS_FILE.exists():
        pytest.skip("make p1-controls has not written ch07_cross.csv")
    shipped = pd.read_csv(ch.CROSS_FILE)
    assert list(shipped.columns) == list(runs.columns)
    full = ch.settings("small")
    assert len(shipped) == 4 * len(full.seeds) * 3 and set(shipped["seed"]) == set(full.seeds)


# ----------------------------------------------------------------------------- low rank on real text
def _text_sweep(losses: dict) -> pd.DataFrame:
    return pd.DataFrame([{"encoding": e, "seed": k, "loss": v + 0.01 * k} for e, v in losses.items() for k in range(3)])


def test_text_table_parameters_count_the_trainable_table() -> None:
    assert ch.text_table_parameters("none", 129, 64) == (0, 0)
    assert ch.text_table_parameters("learned", 129, 64) == (64, 129 * 64)
    assert ch.text_table_parameters("lowrank k=4", 129, 64) == (4, 4 * (129 + 64))
    cfg = pg.TransformerConfig(vocab_size=10, d_model=64, n_heads=4, max_len=129, position="lowrank", rank=4)
    assert ch.positional_parameters(pg.Transformer(cfg, seed=0)) == ch.text_table_parameters("lowrank k=4", 129, 64)[1]


def test_lowrank_text_table_pairs_each_table_with_the_free_one_and_no_positions() -> None:
    table = ch.lowrank_text_table(_text_sweep({"none": 4.0, "learned": 3.0, "lowrank k=1": 3.5, "lowrank k=4": 3.0}),
                                  n_rows=129, d=64)
    assert list(table.index) == ["none", "rank 1", "rank 4", "learned (free)"]  # by parameters
    assert table.loc["rank 1", "share mean"] == pytest.approx(0.5) and table.loc["rank 1", "gap mean"] == pytest.approx(0.5)
    assert table.loc["rank 4", "share mean"] == pytest.approx(1.0) and table.loc["rank 4", "gap mean"] == pytest.approx(0.0)
    assert table.loc["rank 1", "share low"] == pytest.approx(0.5)  # the same offset per seed: a zero-width interval
    assert np.isnan(table.loc["none", "share mean"]) and table.loc["learned (free)", "parameters"] == 129 * 64
    spec = ch.plot_lowrank_text(table).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "log"
    with pytest.raises(ValueError, match="'none' and 'learned'"):
        ch.lowrank_text_table(_text_sweep({"learned": 3.0, "lowrank k=1": 3.5}), n_rows=129, d=64)


def test_lowrank_text_shape_is_read_from_the_recorded_settings(tmp_path) -> None:
    record = tmp_path / "sweep.json"
    record.write_text(json.dumps({"settings": {"corpora": [["imdb", 256]], "d_model": 32}}))
    assert ch.lowrank_text_shape(tmp_path / "sweep.csv") == (257, 32)
    if ch.LOWRANK_TEXT_FILE.with_suffix(".json").exists():
        assert ch.lowrank_text_shape() == (129, 64)
