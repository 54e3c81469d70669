"""Tests of posgeo.experiments.calibration (and the library's hybrid estimator): the known-truth generator, the hybrid estimator and the
calibration of the plug-in, first-order, matched and hybrid estimators."""

from __future__ import annotations

import numpy as np
import pytest

from posgeo import hybrid_hellinger_matrix
from posgeo.experiments.calibration import (
    CALIBRATION_ESTIMATORS,
    CALIBRATION_REGIMES,
    CALIBRATION_SIZES,
    CalibrationResult,
    calibrate_estimators,
    calibration_positions,
    calibration_truth,
    sample_calibration_corpus,
)
from posgeo._geometry import hellinger_matrix
from posgeo._marginals import positional_marginals, position_counts
from posgeo._sequences import Corpus, Sequences


# --------------------------------------------------------------------------- the truth


@pytest.mark.parametrize("regime", CALIBRATION_REGIMES)
def test_truth_rows_are_distributions(regime: str) -> None:
    mu = calibration_truth(regime, n_positions=12, vocab_size=30522)
    assert mu.shape == (12, 30522)
    assert np.all(mu >= 0) and np.all(np.isfinite(mu))
    np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)
    # every row keeps the Zipf shape: the first rank is the most frequent on average
    assert np.argmax(mu.mean(axis=0)) == 0


def test_truth_regimes_closed_forms() -> None:
    st = calibration_truth("stationary", n_positions=5, vocab_size=1000)
    assert np.all(st == st[0])
    assert np.all(hellinger_matrix(st) == 0.0)  # true distances exactly 0
    rare = calibration_truth("rare", n_positions=5, vocab_size=30522)
    head = rare[:, :1000]
    np.testing.assert_array_equal(head, np.broadcast_to(head[0], head.shape))  # the head is fixed
    np.testing.assert_allclose(rare[:, 1000:].sum(axis=1), rare[0, 1000:].sum(), rtol=1e-12)  # tail mass kept
    smooth = calibration_truth("smooth", n_positions=5, vocab_size=30522)
    assert not np.allclose(smooth[:, :1000], smooth[0, :1000])  # the head drifts too
    for mu in (rare, smooth):
        D = hellinger_matrix(mu)
        assert D[0, 1:].min() > 0  # different positions, different distributions


def test_truth_is_deterministic_and_seeded() -> None:
    a = calibration_truth("smooth", n_positions=6, vocab_size=500, seed=3)
    b = calibration_truth("smooth", n_positions=6, vocab_size=500, seed=3)
    c = calibration_truth("smooth", n_positions=6, vocab_size=500, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_truth_positions_subset_and_strength() -> None:
    full = calibration_truth("rare", n_positions=40, vocab_size=400)
    sub = calibration_truth("rare", n_positions=40, vocab_size=400, positions=[0, 7, 39])
    np.testing.assert_allclose(sub, full[[0, 7, 39]], rtol=1e-12)
    flat = calibration_truth("smooth", n_positions=4, vocab_size=400, strength=0.0)
    assert np.all(hellinger_matrix(flat) == 0.0)
    strong = calibration_truth("smooth", n_positions=4, vocab_size=400, strength=3.0)
    weak = calibration_truth("smooth", n_positions=4, vocab_size=400, strength=0.5)
    assert hellinger_matrix(strong).max() > hellinger_matrix(weak).max()


# --------------------------------------------------------------------------- sizes and sampling


def test_reach_curves_are_the_stored_tables() -> None:
    sst2 = CALIBRATION_SIZES["sst2"].reach()
    assert sst2.shape == (48,) and sst2[0] == 67349 and sst2[-1] == 279
    imdb = CALIBRATION_SIZES["imdb"]
    r = imdb.reach()
    assert r.shape == (510,) and r[0] == 25000 and r[-1] == 3334
    np.testing.assert_array_equal(r[list(imdb.knots)], imdb.counts)  # exact at the knots
    for curve in CALIBRATION_SIZES.values():
        full = curve.reach()
        assert np.all(np.diff(full) <= 0) and full.min() >= 2
    assert set(CALIBRATION_SIZES["imdb-late"].reach().tolist()) == {3334}
    assert calibration_positions("sst2").tolist() == list(range(48))
    assert calibration_positions("imdb", 3).tolist() == [0, 254, 509]
    assert calibration_positions("sst2", 100).size == 48


def test_sample_respects_reach_exactly_and_is_seeded() -> None:
    truth = calibration_truth("smooth", n_positions=7, vocab_size=300)
    reach = np.array([50, 50, 41, 30, 30, 2, 1])
    s = sample_calibration_corpus(truth, reach=reach, seed=5)
    assert isinstance(s, Sequences) and s.vocab_size == 300
    assert len(s) == 50
    np.testing.assert_array_equal(position_counts(s, 7), reach)
    np.testing.assert_array_equal(position_counts(s, 9), np.r_[reach, 0, 0])  # nobody goes further
    again = sample_calibration_corpus(truth, reach=reach, seed=5)
    np.testing.assert_array_equal(s.tokens, again.tokens)
    np.testing.assert_array_equal(s.offsets, again.offsets)
    other = sample_calibration_corpus(truth, reach=reach, seed=6)
    assert not np.array_equal(s.tokens, other.tokens)


def test_sample_draws_from_the_truth() -> None:
    truth = calibration_truth("rare", n_positions=3, vocab_size=40)
    s = sample_calibration_corpus(truth, reach=[20000, 20000, 20000], seed=0)
    mu = positional_marginals(s, 3, 40)
    assert np.abs(mu - truth).max() < 0.02
    assert hellinger_matrix(np.vstack([mu[0], truth[0]]))[0, 1] < 0.02


# --------------------------------------------------------------------------- the hybrid estimator


def test_hybrid_matrix_properties_and_inputs() -> None:
    truth = calibration_truth("smooth", n_positions=5, vocab_size=2000)
    s = sample_calibration_corpus(truth, reach=[4000, 3000, 2000, 1000, 500], seed=1)
    D = hybrid_hellinger_matrix(s, 5, 2000)
    assert D.shape == (5, 5)
    assert np.all(D >= 0) and np.all(np.diag(D) == 0) and np.allclose(D, D.T)
    corpus = Corpus("c", "train", s, None, 2000, "calibration corpus")
    np.testing.assert_array_equal(hybrid_hellinger_matrix(corpus, 5, 2000), D)
    H = hybrid_hellinger_matrix(s, 5, 2000, split="halves", n_splits=2, seed=3)
    assert H.shape == (5, 5) and np.all(np.diag(H) == 0) and np.allclose(H, H.T)
    np.testing.assert_array_equal(H, hybrid_hellinger_matrix(s, 5, 2000, split="halves", n_splits=2, seed=3))
    plug = hellinger_matrix(positional_marginals(s, 5, 2000))
    Dt = hellinger_matrix(truth)
    for E in (D, H):
        assert np.abs(E - Dt).mean() < 0.5 * np.abs(plug - Dt).mean()


def test_hybrid_is_near_zero_under_stationarity() -> None:
    # identical distributions, very unequal sample sizes: the plug-in sees large distances
    truth = calibration_truth("stationary", n_positions=6, vocab_size=30522)
    s = sample_calibration_corpus(truth, reach=[20000, 10000, 5000, 2000, 1000, 500], seed=2)
    D = hybrid_hellinger_matrix(s, 6, 30522)
    plug = hellinger_matrix(positional_marginals(s, 6, 30522))
    iu = np.triu_indices(6, 1)
    assert plug[iu].mean() > 0.4
    assert D[iu].mean() < 0.1


def test_hybrid_bad_inputs() -> None:
    s = Sequences.from_list([[0, 1], [1, 2], [2]], vocab_size=3)
    with pytest.raises(TypeError, match="Sequences or Corpus"):
        hybrid_hellinger_matrix([[0, 1], [1]], 2, 3)
    with pytest.raises(ValueError, match="fewer than 2 sequences"):
        hybrid_hellinger_matrix(s, 3, 3)  # position 2 is reached by none
    ok = Sequences.from_list([[0, 1], [1, 2]], vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size"):
        hybrid_hellinger_matrix(ok, 2, 2)  # id 2 is outside [0, 2)
    with pytest.raises(ValueError, match="split"):
        hybrid_hellinger_matrix(ok, 2, 3, split="thirds")
    with pytest.raises(ValueError, match="resolved_count"):
        hybrid_hellinger_matrix(ok, 2, 3, resolved_count=0.0)
    with pytest.raises(ValueError, match="reference_floor"):
        hybrid_hellinger_matrix(ok, 2, 3, reference_floor=-1.0)
    with pytest.raises(ValueError, match="n_positions"):
        hybrid_hellinger_matrix(ok, 1, 3)


# --------------------------------------------------------------------------- calibration


def test_stationary_plug_in_bias_is_its_mean() -> None:
    res = calibrate_estimators("stationary", "sst2", n_replicates=2, max_positions=6, estimators=("plug-in",))
    assert isinstance(res, CalibrationResult)
    assert np.all(res.true_distances == 0.0)
    row = res.summary.iloc[0]
    assert row["estimator"] == "plug-in"
    assert row["true_mean_distance"] == 0.0 and row["true_noise_share"] == 1.0
    assert row["bias"] > 0.3  # pure noise, and large
    assert row["bias"] == pytest.approx(row["mean_distance"], abs=1e-15)
    per_rep = res.replicates
    np.testing.assert_allclose(per_rep["bias"], per_rep["mean_distance"], atol=1e-15)
    assert row["rmse"] >= row["bias"]
    assert row["noise_share"] == 0.0  # the plug-in is its own reference
    assert np.isnan(row["spearman"]) and np.isnan(row["ranking_tau"]) and np.isnan(row["rel_bias_mean"])
    assert res.stress["truth"].isna().all()


def test_result_structure_and_determinism() -> None:
    kw = dict(n_replicates=2, max_positions=5, estimators=("matched", "hybrid"), seed=1)
    res = calibrate_estimators("smooth", "imdb", **kw)
    assert res.summary["estimator"].tolist() == ["plug-in", "matched", "hybrid"]
    assert {"regime", "size", "bias", "rmse", "rel_bias_mean", "noise_share", "true_noise_share", "spearman",
            "ranking_tau", "n_replicates"} <= set(res.summary.columns)
    assert len(res.replicates) == 6 and set(res.replicates["replicate"]) == {0, 1}
    assert res.positions.tolist() == [0, 127, 254, 382, 509]
    np.testing.assert_array_equal(res.reach, CALIBRATION_SIZES["imdb"].reach(res.positions))
    assert res.stress.shape == (5, 4)
    assert res.stress.loc["PMDS k=3 (truth)", "truth"] < 1e-6  # the truth's MDS reproduces it (5 points)
    again = calibrate_estimators("smooth", "imdb", **kw)
    cols = ["bias", "rmse", "noise_share", "spearman"]
    np.testing.assert_array_equal(res.summary[cols].to_numpy(), again.summary[cols].to_numpy())


def test_calibration_bad_inputs() -> None:
    with pytest.raises(ValueError, match="did you mean 'smooth'"):
        calibrate_estimators("smoth", "sst2")
    with pytest.raises(ValueError, match="unknown size 'sst-2'"):
        calibrate_estimators("smooth", "sst-2")
    with pytest.raises(ValueError, match="did you mean 'matched'"):
        calibrate_estimators("smooth", "sst2", estimators=("matchd",))
    with pytest.raises(ValueError, match="empty"):
        calibrate_estimators("smooth", "sst2", estimators=())
    with pytest.raises(ValueError, match="n_replicates"):
        calibrate_estimators("smooth", "sst2", n_replicates=0)
    with pytest.raises(ValueError, match="unknown regime"):
        calibration_truth("wiggly", n_positions=4)
    with pytest.raises(ValueError, match="n_positions"):
        calibration_truth("smooth", n_positions=1)
    with pytest.raises(ValueError, match="positions"):
        calibration_truth("smooth", n_positions=4, positions=[4])
    with pytest.raises(ValueError, match="strength"):
        calibration_truth("smooth", n_positions=4, strength=-1.0)
    truth = calibration_truth("smooth", n_positions=3, vocab_size=20)
    with pytest.raises(ValueError, match="non-increasing"):
        sample_calibration_corpus(truth, reach=[3, 4, 2], seed=0)
    with pytest.raises(ValueError, match="one count per position"):
        sample_calibration_corpus(truth, reach=[3, 2], seed=0)
    with pytest.raises(ValueError, match="sum to 1"):
        sample_calibration_corpus(truth * 2, reach=[3, 2, 2], seed=0)
    with pytest.raises(TypeError, match="ints"):
        sample_calibration_corpus(truth, reach=[3.0, 2.0, 2.0], seed=0)
    assert set(CALIBRATION_ESTIMATORS) >= {"plug-in", "first-order", "matched", "hybrid"}


# --------------------------------------------------------------------------- findings
# Reduced calibrations (a subset of positions, each with its real sample size); the margins
# below hold for seeds 0, 1 and 2 (measured values in the comments are for seeds 0-2).


@pytest.mark.parametrize("size", ["sst2", "imdb"])
@pytest.mark.parametrize("regime", CALIBRATION_REGIMES)
def test_hybrid_beats_the_plug_in_everywhere(regime: str, size: str) -> None:
    res = calibrate_estimators(regime, size, n_replicates=1, max_positions=8, estimators=("hybrid",))
    s = res.summary.set_index("estimator")
    # measured ratio hybrid / plug-in RMSE: 0.04 to 0.33
    assert s.loc["hybrid", "rmse"] < 0.5 * s.loc["plug-in", "rmse"]
    assert abs(s.loc["hybrid", "bias"]) < 0.25 * s.loc["plug-in", "bias"]


def test_matched_over_corrects_in_the_rare_regime_at_equal_small_sizes() -> None:
    # The independent check's failure, reproduced: IMDB's last-position size (3,334) at every
    # position, the geometry in the tail. Measured: matched relative bias -0.26 to -0.39,
    # noise share 0.95-0.96 against a true 0.89; hybrid -0.19 to -0.27, RMSE 0.70-0.75 x matched.
    res = calibrate_estimators("rare", "imdb-late", n_replicates=2, max_positions=16, estimators=("matched", "hybrid"))
    s = res.summary.set_index("estimator")
    m, h = s.loc["matched"], s.loc["hybrid"]
    assert m["rel_bias_mean"] < -0.15
    assert m["noise_share"] > m["true_noise_share"] + 0.03
    assert h["rel_bias_mean"] > m["rel_bias_mean"]
    assert h["rmse"] < 0.9 * m["rmse"]


def test_matched_failure_is_not_reproduced_on_the_imdb_reach_curve() -> None:
    # With IMDB's real, decreasing sample sizes the matched estimator's upward bias for
    # unequal sizes offsets its over-correction of the tail: relative bias +0.02 to +0.05.
    res = calibrate_estimators("rare", "imdb", n_replicates=2, max_positions=16, estimators=("matched", "hybrid"))
    s = res.summary.set_index("estimator")
    assert abs(s.loc["matched", "rel_bias_mean"]) < 0.15
    assert abs(s.loc["hybrid", "rel_bias_mean"]) < 0.15
    assert s.loc["matched", "ranking_tau"] == pytest.approx(1.0) and s.loc["hybrid", "ranking_tau"] == pytest.approx(1.0)


def test_matched_turns_unequal_sizes_into_distance_under_stationarity() -> None:
    # identical distributions at every position; SST-2's sizes fall from 67,349 to 279.
    # Measured mean distance: matched 0.16, hybrid 0.06 (plug-in 0.54).
    res = calibrate_estimators("stationary", "sst2", n_replicates=2, max_positions=12, estimators=("matched", "hybrid"))
    s = res.summary.set_index("estimator")
    assert s.loc["matched", "bias"] > 0.1
    assert s.loc["hybrid", "bias"] < 0.5 * s.loc["matched", "bias"]
    assert s.loc["hybrid", "noise_share"] > s.loc["matched", "noise_share"]


@pytest.mark.slow
def test_hybrid_beats_matched_at_full_sst2_size() -> None:
    # all 48 positions: measured RMSE hybrid / matched 0.038/0.062 (smooth), 0.053/0.068
    # (rare), 0.075/0.176 (stationary) with 3 replicates
    for regime in CALIBRATION_REGIMES:
        res = calibrate_estimators(regime, "sst2", n_replicates=2, estimators=("matched", "hybrid"))
        s = res.summary.set_index("estimator")
        assert s.loc["hybrid", "rmse"] < 0.9 * s.loc["matched", "rmse"], regime
        if regime != "stationary":
            assert s.loc["hybrid", "spearman"] > 0.8 and s.loc["hybrid", "ranking_tau"] >= 0.8
            assert s.loc["plug-in", "ranking_tau"] < 0  # the plug-in ranks the encodings backwards


# ----------------------------------------------------------------------------- interval coverage
def test_interval_coverage_reports_shares():
    from posgeo.experiments.calibration import interval_coverage

    res = interval_coverage("smooth", "sst2", n_corpora=1, n_boot=4, max_positions=5, vocab_size=2000)
    row = res.summary.iloc[0]
    assert 0.0 <= row["pairs"] <= 1.0 and 0.0 <= row["stress"] <= 1.0 and row["median_width"] > 0
    # widening can only hold the truth more often, with wider intervals
    assert row["pairs"] <= row["pairs_widened"] <= 1.0 and row["pairs_min"] <= row["pairs_widened_min"]
    assert row["median_width_widened"] >= row["median_width"]
    # the paired differences of the five test encodings: ten pairs per corpus
    assert row["n_pairs"] == 10 and 0.0 <= row["differences"] <= row["differences_widened"] <= 1.0
    assert 0 <= row["wrong_claims"] <= row["claims"] <= row["n_pairs"]
    assert 0 <= row["wrong_claims_widened"] <= row["claims_widened"] <= row["claims"]  # widening only drops claims
    assert row["claims"] > 0  # the test encodings differ clearly in the smooth regime
    stationary = interval_coverage("stationary", "sst2", n_corpora=1, n_boot=4, max_positions=5, vocab_size=2000)
    assert np.isnan(stationary.summary["stress"].iloc[0])  # stress is undefined against a zero truth
    with pytest.raises(ValueError):
        interval_coverage("bumpy", "sst2")
    with pytest.raises((TypeError, ValueError)):
        interval_coverage("smooth", "sst2", n_boot=1)


def test_nested_corpus_phrases_share_their_sentence_s_tokens_and_the_truth_is_the_mixture():
    from posgeo import hellinger_matrix
    from posgeo.experiments.calibration import calibration_truth, nested_corpus

    c = nested_corpus("smooth", n_sentences=60, phrases_per_sentence=3, n_positions=5, vocab_size=50, seed=2)
    seqs, groups, starts = c.sequences, c.groups, c.offsets_in_sentence
    assert len(seqs) == 60 * 4 == groups.size == starts.size  # every sentence (length >= 4) has >= 3 constituents
    tok, off = np.asarray(seqs.tokens), np.asarray(seqs.offsets)
    first = {g: i for i, g in reversed(list(enumerate(groups)))}  # the sentence comes first in its group
    for i in range(len(seqs)):
        s = first[groups[i]]
        assert starts[s] == 0
        sentence, piece = tok[off[s]:off[s + 1]], tok[off[i]:off[i + 1]]
        np.testing.assert_array_equal(piece, sentence[starts[i]:starts[i] + piece.size])
    # the truth by hand: position i mixes the sentence distributions at start + i
    mu = calibration_truth("smooth", n_positions=80, vocab_size=50, seed=2)
    lens = np.diff(off)
    for i in range(5):
        expected = np.mean([mu[a + i] for a, L in zip(starts, lens) if L > i], axis=0)
        np.testing.assert_allclose(c.truth[i], expected, rtol=1e-12)
    np.testing.assert_allclose(c.true_distances, hellinger_matrix(c.truth), atol=1e-9)
    flat = nested_corpus("stationary", n_sentences=30, phrases_per_sentence=2, n_positions=4, vocab_size=30)
    assert not flat.true_distances.any()  # identical mixtures: exactly 0
    with pytest.raises(ValueError, match="fewer than 2"):
        nested_corpus("smooth", n_sentences=3, n_positions=79, vocab_size=30)


def test_nested_calibration_grouped_matched_beats_the_ungrouped_where_phrases_repeat_tokens():
    from posgeo.experiments.calibration import nested_calibration

    t = nested_calibration("smooth", n_boot=4, n_sentences=1500, phrases_per_sentence=7, n_positions=12,
                           vocab_size=2000, seed=1)
    assert list(t.index) == ["plug-in", "hybrid", "matched, halves of sequences", "matched, halves of sentences",
                             "jackknife, blocks of sequences", "jackknife, blocks of sentences"]
    assert np.isnan(t.loc["plug-in", "pairs"]) and t["true_mean_distance"].nunique() == 1
    # copies straddling the halves hide noise from the ungrouped split: it corrects less
    assert t.loc["matched, halves of sentences", "mean_distance"] < t.loc["matched, halves of sequences", "mean_distance"]
    # and the jackknife over whole sentences corrects more than the one over sequences
    assert t.loc["jackknife, blocks of sentences", "mean_distance"] < t.loc["jackknife, blocks of sequences", "mean_distance"]
    assert t.loc["plug-in", "rel_bias_mean"] > t.loc["hybrid", "rel_bias_mean"] > 0
    assert ((t["pairs"].dropna() >= 0) & (t["pairs"].dropna() <= 1)).all()
    with pytest.raises(ValueError):
        nested_calibration("bumpy")
