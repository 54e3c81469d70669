"""Tests of book/_ch03_calibration.py (the calibration appendix) and of the library's hybrid estimator: the
known-truth generator, the sampler, the calibration of the estimators, the interval coverage and the nested corpora."""

from __future__ import annotations

import numpy as np
import pytest

import _ch03_calibration as cal
import posgeo as pg


# --------------------------------------------------------------------------- the truth


@pytest.mark.parametrize("regime", cal.REGIMES)
def test_truth_rows_are_distributions(regime: str) -> None:
    mu = cal.calibration_truth(regime, n_positions=12, vocab_size=30522)
    assert mu.shape == (12, 30522)
    assert np.all(mu >= 0) and np.all(np.isfinite(mu))
    np.testing.assert_allclose(mu.sum(axis=1), 1.0, atol=1e-12)
    assert np.argmax(mu.mean(axis=0)) == 0  # every row keeps the Zipf shape: rank 1 is the most frequent


def test_truth_regimes_closed_forms() -> None:
    st = cal.calibration_truth("stationary", n_positions=5, vocab_size=1000)
    assert np.all(st == st[0])
    assert np.all(pg.hellinger_matrix(st) == 0.0)  # true distances exactly 0
    rare = cal.calibration_truth("rare", n_positions=5, vocab_size=30522)
    head = rare[:, :1000]
    np.testing.assert_array_equal(head, np.broadcast_to(head[0], head.shape))  # the head is fixed
    np.testing.assert_allclose(rare[:, 1000:].sum(axis=1), rare[0, 1000:].sum(), rtol=1e-12)  # tail mass kept
    smooth = cal.calibration_truth("smooth", n_positions=5, vocab_size=30522)
    assert not np.allclose(smooth[:, :1000], smooth[0, :1000])  # the head drifts too
    for mu in (rare, smooth):
        assert pg.hellinger_matrix(mu)[0, 1:].min() > 0  # different positions, different distributions


def test_truth_is_seeded_restricts_to_positions_and_grows_with_strength() -> None:
    a = cal.calibration_truth("smooth", n_positions=6, vocab_size=500, seed=3)
    np.testing.assert_array_equal(a, cal.calibration_truth("smooth", n_positions=6, vocab_size=500, seed=3))
    assert not np.allclose(a, cal.calibration_truth("smooth", n_positions=6, vocab_size=500, seed=4))
    full = cal.calibration_truth("rare", n_positions=40, vocab_size=400)
    sub = cal.calibration_truth("rare", n_positions=40, vocab_size=400, positions=[0, 7, 39])
    np.testing.assert_allclose(sub, full[[0, 7, 39]], rtol=1e-12)
    assert np.all(pg.hellinger_matrix(cal.calibration_truth("smooth", n_positions=4, vocab_size=400, strength=0.0)) == 0)
    strong = cal.calibration_truth("smooth", n_positions=4, vocab_size=400, strength=3.0)
    weak = cal.calibration_truth("smooth", n_positions=4, vocab_size=400, strength=0.5)
    assert pg.hellinger_matrix(strong).max() > pg.hellinger_matrix(weak).max()


# --------------------------------------------------------------------------- sizes and sampling


def test_reach_curves_are_the_stored_tables() -> None:
    sst2 = cal.reach("sst2")
    assert sst2.shape == (48,) and sst2[0] == 67349 and sst2[-1] == 279
    np.testing.assert_array_equal(sst2, cal.SST2_REACH)  # stored exactly
    imdb = cal.reach("imdb")
    assert imdb.shape == (510,) and imdb[0] == 25000 and imdb[-1] == 3334
    np.testing.assert_array_equal(imdb[list(cal.SIZES["imdb"][1])], cal.IMDB_REACH)  # exact at the knots
    for size in cal.SIZES:
        assert np.all(np.diff(cal.reach(size)) <= 0) and cal.reach(size).min() >= 2
    assert set(cal.reach("imdb-late").tolist()) == {3334}
    assert cal.positions("sst2").tolist() == list(range(48))
    assert cal.positions("imdb", 3).tolist() == [0, 254, 509]
    assert cal.positions("sst2", 100).size == 48


def test_sample_respects_reach_exactly_and_is_seeded() -> None:
    truth = cal.calibration_truth("smooth", n_positions=7, vocab_size=300)
    reach = np.array([50, 50, 41, 30, 30, 2, 1])
    s = cal.sample_corpus(truth, reach=reach, seed=5)
    assert len(s) == 50 and s.vocab_size == 300
    lengths = np.diff(np.asarray(s.offsets))
    np.testing.assert_array_equal([(lengths > i).sum() for i in range(9)], np.r_[reach, 0, 0])  # nobody goes further
    again = cal.sample_corpus(truth, reach=reach, seed=5)
    np.testing.assert_array_equal(s.tokens, again.tokens)
    assert not np.array_equal(s.tokens, cal.sample_corpus(truth, reach=reach, seed=6).tokens)


def test_sample_draws_from_the_truth() -> None:
    truth = cal.calibration_truth("rare", n_positions=3, vocab_size=40)
    mu = pg.positional_marginals(cal.sample_corpus(truth, reach=[20000, 20000, 20000], seed=0), 3, 40)
    assert np.abs(mu - truth).max() < 0.02
    assert pg.hellinger_matrix(np.vstack([mu[0], truth[0]]))[0, 1] < 0.02


# --------------------------------------------------------------------------- the hybrid estimator (library)


def test_hybrid_matrix_properties_and_inputs() -> None:
    truth = cal.calibration_truth("smooth", n_positions=5, vocab_size=2000)
    s = cal.sample_corpus(truth, reach=[4000, 3000, 2000, 1000, 500], seed=1)
    D = pg.hybrid_hellinger_matrix(s, 5, 2000)
    assert D.shape == (5, 5)
    assert np.all(D >= 0) and np.all(np.diag(D) == 0) and np.allclose(D, D.T)
    corpus = pg.Corpus("c", "train", s, None, 2000, "calibration corpus")
    np.testing.assert_array_equal(pg.hybrid_hellinger_matrix(corpus, 5, 2000), D)
    H = pg.hybrid_hellinger_matrix(s, 5, 2000, split="halves", n_splits=2, seed=3)
    assert H.shape == (5, 5) and np.all(np.diag(H) == 0) and np.allclose(H, H.T)
    np.testing.assert_array_equal(H, pg.hybrid_hellinger_matrix(s, 5, 2000, split="halves", n_splits=2, seed=3))
    plug = pg.hellinger_matrix(pg.positional_marginals(s, 5, 2000))
    Dt = pg.hellinger_matrix(truth)
    for E in (D, H):
        assert np.abs(E - Dt).mean() < 0.5 * np.abs(plug - Dt).mean()


def test_hybrid_is_near_zero_under_stationarity() -> None:
    # identical distributions, very unequal sample sizes: the plug-in sees large distances
    truth = cal.calibration_truth("stationary", n_positions=6, vocab_size=30522)
    s = cal.sample_corpus(truth, reach=[20000, 10000, 5000, 2000, 1000, 500], seed=2)
    D = pg.hybrid_hellinger_matrix(s, 6, 30522)
    plug = pg.hellinger_matrix(pg.positional_marginals(s, 6, 30522))
    iu = np.triu_indices(6, 1)
    assert plug[iu].mean() > 0.4
    assert D[iu].mean() < 0.1


def test_hybrid_bad_inputs() -> None:
    s = pg.Sequences.from_list([[0, 1], [1, 2], [2]], vocab_size=3)
    with pytest.raises(TypeError, match="Sequences or Corpus"):
        pg.hybrid_hellinger_matrix([[0, 1], [1]], 2, 3)
    with pytest.raises(ValueError, match="fewer than 2 sequences"):
        pg.hybrid_hellinger_matrix(s, 3, 3)  # position 2 is reached by none
    ok = pg.Sequences.from_list([[0, 1], [1, 2]], vocab_size=3)
    with pytest.raises(ValueError, match="vocab_size"):
        pg.hybrid_hellinger_matrix(ok, 2, 2)  # id 2 is outside [0, 2)
    with pytest.raises(ValueError, match="split"):
        pg.hybrid_hellinger_matrix(ok, 2, 3, split="thirds")
    with pytest.raises(ValueError, match="resolved_count"):
        pg.hybrid_hellinger_matrix(ok, 2, 3, resolved_count=0.0)
    with pytest.raises(ValueError, match="reference_floor"):
        pg.hybrid_hellinger_matrix(ok, 2, 3, reference_floor=-1.0)
    with pytest.raises(ValueError, match="n_positions"):
        pg.hybrid_hellinger_matrix(ok, 1, 3)


# --------------------------------------------------------------------------- calibration


def test_stationary_plug_in_bias_is_its_mean() -> None:
    row = cal.calibrate("stationary", "sst2", n_replicates=2, max_positions=6, estimators=("plug-in",)).loc["plug-in"]
    assert row["true_mean_distance"] == 0.0 and row["true_noise_share"] == 1.0
    assert row["bias"] > 0.3  # pure noise, and large
    assert row["bias"] == pytest.approx(row["mean_distance"], abs=1e-15)
    assert row["rmse"] >= row["bias"]
    assert row["noise_share"] == 0.0  # the plug-in is its own reference
    assert np.isnan(row["spearman"]) and np.isnan(row["ranking_tau"]) and np.isnan(row["rel_bias_mean"])


def test_calibration_structure_and_determinism() -> None:
    kw = dict(n_replicates=2, max_positions=5, estimators=("matched", "hybrid"), seed=1)
    s = cal.calibrate("smooth", "imdb", **kw)
    assert list(s.index) == ["plug-in", "matched", "hybrid"]
    assert {"bias", "rmse", "rel_bias_mean", "noise_share", "true_noise_share", "spearman", "ranking_tau"} <= set(s)
    np.testing.assert_array_equal(s.to_numpy(), cal.calibrate("smooth", "imdb", **kw).to_numpy())
    kt = cal.known_truth("smooth", "imdb", 5, seed=1)
    assert kt.positions.tolist() == [0, 127, 254, 382, 509]
    np.testing.assert_array_equal(kt.reach, cal.reach("imdb")[kt.positions])
    assert kt.stress[list(kt.encodings).index("PMDS k=3 (truth)")] < 1e-6  # the truth's MDS reproduces it (5 points)


# Reduced calibrations (a subset of positions, each with its real sample size); the margins
# below hold for seeds 0, 1 and 2.


@pytest.mark.parametrize("size", ["sst2", "imdb"])
@pytest.mark.parametrize("regime", cal.REGIMES)
def test_hybrid_beats_the_plug_in_everywhere(regime: str, size: str) -> None:
    s = cal.calibrate(regime, size, n_replicates=1, max_positions=8, estimators=("hybrid",))
    # measured ratio hybrid / plug-in RMSE: 0.04 to 0.33
    assert s.loc["hybrid", "rmse"] < 0.5 * s.loc["plug-in", "rmse"]
    assert abs(s.loc["hybrid", "bias"]) < 0.25 * s.loc["plug-in", "bias"]


def test_matched_over_corrects_in_the_rare_regime_at_equal_small_sizes() -> None:
    # IMDB's last-position size (3,334) at every position, the geometry in the tail. Measured:
    # matched relative bias -0.26 to -0.39, noise share 0.95-0.96 against a true 0.89.
    s = cal.calibrate("rare", "imdb-late", n_replicates=2, max_positions=16, estimators=("matched", "hybrid"))
    m, h = s.loc["matched"], s.loc["hybrid"]
    assert m["rel_bias_mean"] < -0.15
    assert m["noise_share"] > m["true_noise_share"] + 0.03
    assert h["rel_bias_mean"] > m["rel_bias_mean"]
    assert h["rmse"] < 0.9 * m["rmse"]


def test_matched_turns_unequal_sizes_into_distance_under_stationarity() -> None:
    # identical distributions at every position; SST-2's sizes fall from 67,349 to 279.
    s = cal.calibrate("stationary", "sst2", n_replicates=2, max_positions=12, estimators=("matched", "hybrid"))
    assert s.loc["matched", "bias"] > 0.1
    assert s.loc["hybrid", "bias"] < 0.5 * s.loc["matched", "bias"]
    assert s.loc["hybrid", "noise_share"] > s.loc["matched", "noise_share"]


# ----------------------------------------------------------------------------- interval coverage


def test_interval_coverage_reports_shares():
    row = cal.interval_coverage("smooth", "sst2", n_corpora=1, n_boot=4, max_positions=5, vocab_size=2000)
    assert 0.0 <= row["pairs"] <= 1.0 and 0.0 <= row["stress"] <= 1.0 and row["median_width"] > 0
    # widening can only hold the truth more often, with wider intervals
    assert row["pairs"] <= row["pairs_widened"] <= 1.0 and row["pairs_min"] <= row["pairs_widened_min"]
    assert row["median_width_widened"] >= row["median_width"]
    # the paired differences of the five test encodings: ten pairs per corpus
    assert row["n_pairs"] == 10 and 0.0 <= row["differences"] <= row["differences_widened"] <= 1.0
    assert 0 <= row["wrong_claims"] <= row["claims"] <= row["n_pairs"]
    assert 0 <= row["wrong_claims_widened"] <= row["claims_widened"] <= row["claims"]  # widening only drops claims
    assert row["claims"] > 0  # the test encodings differ clearly in the smooth regime
    stationary = cal.interval_coverage("stationary", "sst2", n_corpora=1, n_boot=4, max_positions=5, vocab_size=2000)
    assert np.isnan(stationary["stress"]) and stationary["n_pairs"] == 0  # stress is undefined against a zero truth


def test_a_biased_estimate_s_intervals_miss_the_truth():
    # fault injection: shift every half-sample replicate by a bias the sampling spread does not see
    truth = cal.calibration_truth("smooth", n_positions=6, vocab_size=500)
    seqs = cal.sample_corpus(truth, reach=[3000] * 6, seed=0)
    bg = pg.bootstrap_geometry(seqs, 6, vocab_size=500, estimator="hybrid", n_boot=6, seed=0, progress=False)
    iu = np.triu_indices(6, 1)
    D = pg.hellinger_matrix(truth)
    assert cal._inside(bg, D, iu).mean() > 0.5
    assert cal._inside(bg, D + 0.2, iu).mean() == 0  # the same intervals, a truth 0.2 away: never held


# ----------------------------------------------------------------------------- nested phrases


def test_nested_corpus_phrases_share_their_sentence_s_tokens_and_the_truth_is_the_mixture():
    c = cal.nested_corpus("smooth", n_sentences=60, phrases_per_sentence=3, n_positions=5, vocab_size=50, seed=2)
    seqs, groups, starts = c.sequences, c.groups, c.starts
    assert len(seqs) == 60 * 4 == groups.size == starts.size  # every sentence (length >= 4) has >= 3 constituents
    tok, off = np.asarray(seqs.tokens), np.asarray(seqs.offsets)
    first = {g: i for i, g in reversed(list(enumerate(groups)))}  # the sentence comes first in its group
    for i in range(len(seqs)):
        s = first[groups[i]]
        assert starts[s] == 0
        sentence, piece = tok[off[s]:off[s + 1]], tok[off[i]:off[i + 1]]
        np.testing.assert_array_equal(piece, sentence[starts[i]:starts[i] + piece.size])
    # the truth by hand: position i mixes the sentence distributions at start + i
    mu = cal.calibration_truth("smooth", n_positions=80, vocab_size=50, seed=2)
    lens = np.diff(off)
    for i in range(5):
        expected = np.mean([mu[a + i] for a, L in zip(starts, lens) if L > i], axis=0)
        np.testing.assert_allclose(c.truth[i], expected, rtol=1e-12)
    np.testing.assert_allclose(c.true_distances, pg.hellinger_matrix(c.truth), atol=1e-9)
    flat = cal.nested_corpus("stationary", n_sentences=30, phrases_per_sentence=2, n_positions=4, vocab_size=30)
    assert not flat.true_distances.any()  # identical mixtures: exactly 0


def test_nested_calibration_grouped_estimators_correct_more_where_phrases_repeat_tokens():
    t = cal.nested_calibration("smooth", n_corpora=1, n_boot=4, n_sentences=1500, phrases_per_sentence=7,
                               n_positions=12, vocab_size=2000, seed=1)
    assert list(t.index) == ["plug-in", "hybrid", "matched, halves of sequences", "matched, halves of sentences",
                             "jackknife, blocks of sequences", "jackknife, blocks of sentences"]
    assert np.isnan(t.loc["plug-in", "pairs"]) and t["true_mean_distance"].nunique() == 1
    # copies straddling the halves hide noise from the ungrouped split: it corrects less
    assert t.loc["matched, halves of sentences", "mean_distance"] < t.loc["matched, halves of sequences", "mean_distance"]
    # and the jackknife over whole sentences corrects more than the one over sequences
    assert t.loc["jackknife, blocks of sentences", "mean_distance"] < t.loc["jackknife, blocks of sequences", "mean_distance"]
    assert t.loc["plug-in", "rel_bias_mean"] > t.loc["hybrid", "rel_bias_mean"] > 0
    assert ((t["pairs"].dropna() >= 0) & (t["pairs"].dropna() <= 1)).all()


@pytest.mark.slow
def test_hybrid_beats_matched_at_full_sst2_size() -> None:
    # all 48 positions: measured RMSE hybrid / matched 0.033/0.061 (smooth), 0.053/0.067 (rare), 0.076/0.177
    # (stationary) with 2 replicates
    for regime in cal.REGIMES:
        s = cal.calibrate(regime, "sst2", n_replicates=2, estimators=("matched", "hybrid"))
        assert s.loc["hybrid", "rmse"] < 0.9 * s.loc["matched", "rmse"], regime
        if regime != "stationary":
            assert s.loc["hybrid", "spearman"] > 0.8 and s.loc["hybrid", "ranking_tau"] >= 0.8
            assert s.loc["plug-in", "ranking_tau"] < 0  # the plug-in ranks the encodings backwards
