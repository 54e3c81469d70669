"""Tests of the corpus geometry, noise correction, offsets, encodings and stress tables as the
chapters combine them (posgeo's _marginals, _geometry and _encodings, and the recipes of
posgeo.experiments.statistics), and of P1's reported numbers (posgeo.experiments.papers)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo.experiments.papers import PAPER_P1
from posgeo import (
    Corpus,
    CorpusGeometry,
    Sequences,
    corpus_geometry,
    distance_by_offset,
    hellinger_matrix,
    hellinger_noise_floor,
    load_corpus,
    matched_hellinger_matrix,
    noise_share,
    pairwise_distances,
    positional_marginals,
    sample_synthetic_sequences,
    stress,
    stress_table,
)
from posgeo.experiments.statistics import corpus_bootstrap, corpus_summary, geometry_summary

@pytest.fixture(autouse=True)
def _every_test_has_a_private_cache(private_cache):
    """Every test gets its own empty posgeo cache (tests/conftest.py)."""


def make_geometry(distances, debiased=None, *, name="toy", split_half=None, flagged=None, metric="chord"):
    """A CorpusGeometry assembled by hand (marginals/counts are placeholders)."""
    D = np.asarray(distances, dtype=float)
    n = D.shape[0]
    return CorpusGeometry(
        name=name,
        marginals=np.full((n, 2), 0.5),
        distances=D,
        matched=D.copy() if debiased is None else np.asarray(debiased, dtype=float),
        hybrid=D.copy() if debiased is None else np.asarray(debiased, dtype=float),
        first_order=D.copy(),
        counts=np.full(n, 100),
        split_half=np.linspace(0.1, 0.3, n) if split_half is None else np.asarray(split_half, dtype=float),
        bias_sq=np.zeros(n),
        flagged=np.zeros(n, bool) if flagged is None else np.asarray(flagged, bool),
        metric=metric,
    )


def toeplitz(values):
    """Symmetric Toeplitz distance matrix D[i, j] = values[|i - j|] (values[0] = 0)."""
    v = np.asarray(values, dtype=float)
    idx = np.abs(np.subtract.outer(np.arange(v.size), np.arange(v.size)))
    return v[idx]


def random_points_D(seed, n=12, k=3):
    P = np.random.default_rng(seed).normal(size=(n, k))
    return P, pairwise_distances(P)


# ----------------------------------------------------------------------------- PAPER_P1
PAPERS = Path(__file__).resolve().parents[2] / "shared" / "papers"


@pytest.mark.skipif(not (PAPERS / "004_7d00191cf5fcf6fc.txt").is_file(), reason="the paper summaries (../shared/papers) are not here")
def test_paper_p1_numbers_are_those_the_paper_reports():
    """Each of P1's numbers, as the book quotes it, is found written in the paper's summary (the
    words around it say what it is)."""
    text = (PAPERS / "004_7d00191cf5fcf6fc.txt").read_text(encoding="utf-8")
    written = {  # key: how the summary writes the number, and a word beside it
        "stress/sst2/alibi": ("(0.563)", "ALiBi"),
        "stress/sst2/sinusoidal": ("sinusoidal (272)", "SST-2"),
        "stress/sst2/rope": ("RoPE (279)", "SST-2"),
        "stress/synthetic/pmds": ("0.009 en sintético", "MDS"),
        "stress/real/pmds": ("$\\approx 0$ en reales", "MDS"),
        "monotonicity/pmds": ("(22% y 25.4%)", "MDS"),
        "monotonicity/pretrained": ("(22% y 25.4%)", "pre-entrenado"),
        "monotonicity/random": ("el azar (50%)", "Monotonía"),
        "lowrank/synthetic/stress_reduction": ("en un 99.8%", "rango"),
        "lowrank/synthetic/parameter_saving": ("con un 88% menos", "parámetros"),
    }
    assert set(written) == set(PAPER_P1)
    for key, (phrase, word) in written.items():
        line = next((ln for ln in text.splitlines() if phrase in ln), None)
        assert line is not None and word in line, (key, phrase)
        numbers = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", phrase)] or [0.0]
        value = PAPER_P1[key] * (100 if "%" in phrase else 1)
        assert any(abs(value - x) < 1e-9 for x in numbers), (key, value, numbers)


# ----------------------------------------------------------------------------- matched Hellinger
def test_matched_hellinger_small_when_every_position_has_the_same_distribution():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(64))
    seqs = sample_synthetic_sequences(np.tile(p, (16, 1)), 400, seed=1)
    M = matched_hellinger_matrix(seqs, 16, 64)
    plug_in = hellinger_matrix(positional_marginals(seqs, 16, 64))
    iu = np.triu_indices(16, k=1)
    # The truth is 0 everywhere. The plug-in distances are pure noise (about 0.2 here); the
    # matched correction removes most of it.
    assert plug_in[iu].min() > 0.1
    assert M[iu].mean() < 0.25 * plug_in[iu].mean()
    assert np.percentile(M[iu], 90) < np.percentile(plug_in[iu], 10)


@pytest.mark.parametrize("nonstationarity", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("n_sequences", [200, 400])
def test_matched_hellinger_closer_to_truth_than_plug_in(nonstationarity, n_sequences):
    c = load_corpus("synthetic", n_sequences=n_sequences, nonstationarity=nonstationarity, seed=3)
    truth = hellinger_matrix(c.true_marginals)
    plug_in = hellinger_matrix(positional_marginals(c, 32, 64))
    M = matched_hellinger_matrix(c, 32, 64)
    err_m, err_p = np.linalg.norm(M - truth), np.linalg.norm(plug_in - truth)
    # Measured margin is about 1.5-2x at these sizes; demand a clear 20%.
    assert err_m < 0.8 * err_p


def test_matched_hellinger_groups_keep_copies_in_one_half():
    # Every sequence twice, each pair one group: every split puts both copies in the same
    # half, so each half's frequencies (hence the result) are exactly those of the corpus
    # without copies under the same draws. Split by sequence instead, copies straddle the
    # halves and the same-position noise is under-estimated: the distances come out larger.
    # Stationary truth (every distance 0), so what remains is the estimator's noise.
    p = np.random.default_rng(0).dirichlet(np.ones(64))
    seqs = sample_synthetic_sequences(np.tile(p, (16, 1)), 300, seed=4)
    lists = [seqs.tokens[seqs.offsets[i]:seqs.offsets[i + 1]].tolist() for i in range(len(seqs))]
    twice = Sequences.from_list([s for s in lists for _ in range(2)], vocab_size=64)
    pairs = np.repeat(np.arange(len(lists)) * 7 + 3, 2)  # any integer ids
    alone = matched_hellinger_matrix(seqs, 16, 64, seed=2)
    np.testing.assert_array_equal(matched_hellinger_matrix(twice, 16, 64, seed=2, groups=pairs), alone)
    ungrouped = matched_hellinger_matrix(twice, 16, 64, seed=2)
    iu = np.triu_indices(16, 1)
    assert ungrouped[iu].mean() > 1.5 * alone[iu].mean()
    # one group per sequence draws the same splits as no groups
    np.testing.assert_array_equal(matched_hellinger_matrix(seqs, 16, 64, seed=2, groups=np.arange(len(lists))), alone)
    with pytest.raises(ValueError, match="group"):
        matched_hellinger_matrix(seqs, 16, 64, groups=np.zeros(5, dtype=int))
    with pytest.raises(ValueError, match="more than this machine"):  # refused before allocating anything
        matched_hellinger_matrix(seqs, 16, 2**40)


def test_corpus_bootstrap_widened_by_the_cached_matched_estimate():
    plain = corpus_bootstrap("synthetic", 8, n_boot=4, progress=False)
    wide = corpus_bootstrap("synthetic", 8, n_boot=4, widened=True, progress=False)
    corpus = load_corpus("synthetic", "train")
    reference = matched_hellinger_matrix(corpus, 8, corpus.vocab_size, seed=0)
    np.testing.assert_array_equal(wide.reference, reference)
    gap = np.abs(plain.estimate - reference)
    np.testing.assert_allclose(wide.high, plain.high + gap)
    assert plain.reference is None  # the cached geometry is not widened in place
    np.testing.assert_array_equal(corpus_bootstrap("synthetic", 8, n_boot=4, widened=True, progress=False).reference, reference)
    with pytest.raises(TypeError, match="widened"):
        corpus_bootstrap("synthetic", 8, n_boot=4, widened="yes", progress=False)


def test_corpus_bootstrap_widens_a_grouped_corpus_by_the_jackknife_over_its_groups(monkeypatch):
    from posgeo import hybrid_hellinger_matrix, overlap_groups
    from posgeo.experiments import statistics

    monkeypatch.setattr(statistics, "GROUPED_CORPORA", ("synthetic",))
    wide = corpus_bootstrap("synthetic", 8, n_boot=4, widened=True, progress=False)
    corpus = load_corpus("synthetic", "train")
    jackknife = hybrid_hellinger_matrix(corpus, 8, corpus.vocab_size, split="jackknife",
                                        groups=overlap_groups(corpus), seed=0)
    np.testing.assert_array_equal(wide.reference, jackknife)
    assert not np.array_equal(wide.reference, matched_hellinger_matrix(corpus, 8, corpus.vocab_size, seed=0))


def test_matched_hellinger_converges_to_truth_with_more_data():
    errs = []
    for m in (200, 3200):
        c = load_corpus("synthetic", n_sequences=m, seed=5)
        errs.append(np.linalg.norm(matched_hellinger_matrix(c, 32, 64) - hellinger_matrix(c.true_marginals)))
    assert errs[1] < 0.6 * errs[0]


def test_matched_hellinger_in_the_heavy_tailed_regime():
    # 2,000 nearly flat tokens, 300 sequences: most tokens are seen once or never, the regime
    # the matched correction is built for (a first-order 1/N correction fails there).
    # Measured: ||M - T|| = 3.4, plug-in 23.7, first-order 14.6.
    c = load_corpus("synthetic", n_sequences=300, vocab_size=2000, concentration=0.5, seed=1)
    truth = hellinger_matrix(c.true_marginals)
    plug_in = hellinger_matrix(positional_marginals(c, 32, 2000))
    M = matched_hellinger_matrix(c, 32, 2000)
    g = corpus_geometry(c, 32, cache=False)
    err_m = np.linalg.norm(M - truth)
    assert err_m < 0.3 * np.linalg.norm(plug_in - truth)
    assert err_m < 0.5 * np.linalg.norm(g.first_order - truth)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_splits=st.integers(1, 4), m=st.integers(20, 120))
def test_matched_hellinger_is_a_distance_matrix(seed, n_splits, m):
    c = load_corpus("synthetic", n_sequences=m, n_positions=8, vocab_size=16, seed=seed)
    M = matched_hellinger_matrix(c, 8, 16, n_splits=n_splits, seed=seed)
    assert M.shape == (8, 8)
    assert np.array_equal(M, M.T)
    assert np.all(np.diag(M) == 0.0)
    assert np.all(M >= 0.0) and np.all(M <= 1.0 + 1e-12)


def test_matched_hellinger_reversing_positions_reverses_the_matrix():
    # The split is by sequence and seeded, so reversing every (full-length) sequence must
    # give exactly the mirrored matrix.
    c = load_corpus("synthetic", n_sequences=300, n_positions=12, vocab_size=24, nonstationarity=1.0)
    tok = c.sequences.tokens.reshape(300, 12)
    rev = Sequences(tokens=np.ascontiguousarray(tok[:, ::-1]).reshape(-1), offsets=c.sequences.offsets, vocab_size=24)
    M = matched_hellinger_matrix(c, 12, 24, seed=7)
    R = matched_hellinger_matrix(rev, 12, 24, seed=7)
    np.testing.assert_allclose(R, M[::-1, ::-1], atol=1e-12)


def test_matched_hellinger_invariant_to_token_relabelling():
    c = load_corpus("synthetic", n_sequences=300, n_positions=12, vocab_size=24, nonstationarity=1.0)
    perm = np.random.default_rng(0).permutation(24)
    relab = Sequences(tokens=perm[c.sequences.tokens], offsets=c.sequences.offsets, vocab_size=24)
    np.testing.assert_allclose(matched_hellinger_matrix(relab, 12, 24), matched_hellinger_matrix(c, 12, 24), atol=1e-10)


def test_matched_hellinger_seed_changes_result_and_is_deterministic():
    c = load_corpus("synthetic", n_sequences=200)
    a = matched_hellinger_matrix(c, 32, 64, seed=1)
    assert np.array_equal(a, matched_hellinger_matrix(c, 32, 64, seed=1))
    assert not np.array_equal(a, matched_hellinger_matrix(c, 32, 64, seed=2))


def test_matched_hellinger_errors():
    c = load_corpus("synthetic", n_sequences=50)
    with pytest.raises(TypeError, match="Sequences or Corpus"):
        matched_hellinger_matrix([[0, 1], [1, 0]], 2, 2)
    with pytest.raises(ValueError, match="n_splits"):
        matched_hellinger_matrix(c, 32, 64, n_splits=0)
    short = Sequences.from_list([[0, 1, 2], [1, 2], [2, 0]], vocab_size=3)
    with pytest.raises(ValueError, match="position 2 .*smaller n_positions"):
        matched_hellinger_matrix(short, 3, 3)


# ----------------------------------------------------------------------------- corpus_geometry
def test_corpus_geometry_fields_match_their_definitions():
    c = load_corpus("synthetic", n_sequences=500)
    g = corpus_geometry(c, 32, cache=False, min_count=400)
    mu = positional_marginals(c, 32, 64)
    nf = hellinger_noise_floor(c, 32, 64, min_count=400)
    assert g.name == "synthetic" and g.metric == "chord" and g.n_positions == 32
    np.testing.assert_allclose(g.marginals, mu)
    np.testing.assert_allclose(g.distances, hellinger_matrix(mu), atol=1e-12)
    np.testing.assert_allclose(g.matched, matched_hellinger_matrix(c, 32, 64), atol=1e-12)
    np.testing.assert_array_equal(g.counts, np.full(32, 500))
    np.testing.assert_allclose(g.split_half, nf.split_half)
    np.testing.assert_allclose(g.bias_sq, nf.bias_sq)
    assert not g.flagged.any()
    expected_fo = np.sqrt(np.clip(g.distances**2 - g.bias_sq[:, None] - g.bias_sq[None, :], 0, None))
    np.fill_diagonal(expected_fo, 0.0)
    np.testing.assert_allclose(g.first_order, expected_fo, atol=1e-12)
    # the first-order correction only removes distance
    assert np.all(g.first_order <= g.distances + 1e-12)


def test_corpus_geometry_flags_positions_with_few_sequences():
    lengths = np.r_[np.full(150, 32), np.full(30, 8)]
    c = load_corpus("synthetic", n_sequences=180, lengths=lengths)
    g = corpus_geometry(c, 32, min_count=100, cache=False)
    np.testing.assert_array_equal(g.counts, np.r_[np.full(8, 180), np.full(24, 150)])
    assert not g.flagged.any()
    g2 = corpus_geometry(c, 32, min_count=160, cache=False)
    np.testing.assert_array_equal(g2.flagged, np.arange(32) >= 8)


def test_corpus_geometry_fisher_rao_is_the_arc_of_the_chord():
    c = load_corpus("synthetic", n_sequences=300)
    ch = corpus_geometry(c, 32, cache=False)
    fr = corpus_geometry(c, 32, metric="fisher-rao", cache=False)
    assert fr.metric == "fisher-rao"
    np.testing.assert_allclose(fr.distances, hellinger_matrix(ch.marginals, metric="fisher-rao"), atol=1e-6)
    arc = 2 * np.arccos(np.clip(1 - ch.matched**2, -1, 1))
    np.testing.assert_allclose(fr.matched, arc, atol=1e-12)
    off = ~np.eye(32, dtype=bool)
    # chord = sqrt(2) sin(FR/4) < FR / (2 sqrt 2)
    assert np.all(ch.distances[off] < fr.distances[off] / (2 * np.sqrt(2)))
    # the noise floor is always reported as a chord distance
    np.testing.assert_allclose(fr.split_half, ch.split_half)


def test_corpus_geometry_errors():
    c = load_corpus("synthetic", n_sequences=50)
    with pytest.raises(ValueError, match="metric"):
        corpus_geometry(c, 32, metric="euclid", cache=False)
    with pytest.raises(TypeError, match="load_corpus"):
        corpus_geometry([[0, 1], [1, 0]], 2, cache=False)


def test_corpus_geometry_uses_the_cache(tmp_path):
    cache = tmp_path / "cache"
    c = load_corpus("synthetic", n_sequences=200)
    g1 = corpus_geometry(c, 32)
    files = sorted(cache.glob("corpus_geometry-*.pkl"))
    assert len(files) == 1
    g2 = corpus_geometry(c, 32)
    assert sorted(cache.glob("corpus_geometry-*.pkl")) == files
    np.testing.assert_array_equal(g1.distances, g2.distances)
    corpus_geometry(c, 32, metric="fisher-rao")
    corpus_geometry(c, 16)
    assert len(list(cache.glob("corpus_geometry-*.pkl"))) == 3
    corpus_geometry(c, 8, cache=False)
    assert len(list(cache.glob("corpus_geometry-*.pkl"))) == 3


def test_corpus_geometry_cache_tells_apart_corpora_with_the_same_tokens_in_another_order():
    # Same size, same vocabulary, same multiset of tokens, different positions: the plug-in
    # geometry differs, so the cached result must too.
    a = Sequences.from_list([[0, 1, 2]] * 150 + [[2, 1, 0]] * 150, vocab_size=3)
    b = Sequences.from_list([[0, 1, 2]] * 300, vocab_size=3)
    ga = corpus_geometry(a, 3, min_count=10)
    gb = corpus_geometry(b, 3, min_count=10)
    np.testing.assert_allclose(ga.distances, corpus_geometry(a, 3, min_count=10, cache=False).distances)
    np.testing.assert_allclose(gb.distances, corpus_geometry(b, 3, min_count=10, cache=False).distances)


def test_corpus_geometry_cache_tells_apart_corpora_with_other_lengths():
    # Same tokens, same number of sequences, split into sequences differently: the
    # positions (hence the marginals) differ, so the cached result must too.
    tokens = np.random.default_rng(0).integers(0, 8, size=1200).astype(np.int32)
    a = Sequences(tokens=tokens, offsets=np.arange(0, 1201, 4), vocab_size=8)
    b = Sequences(tokens=tokens, offsets=np.r_[0, np.cumsum(np.tile([3, 5], 150))], vocab_size=8)
    assert len(a) == len(b) == 300
    ga, gb = corpus_geometry(a, 3, min_count=10), corpus_geometry(b, 3, min_count=10)
    np.testing.assert_allclose(ga.distances, corpus_geometry(a, 3, min_count=10, cache=False).distances)
    np.testing.assert_allclose(gb.distances, corpus_geometry(b, 3, min_count=10, cache=False).distances)


# ----------------------------------------------------------------------------- noise_share
def test_noise_share_analytic():
    D = toeplitz([0, 1, 2, 3, 4])
    assert noise_share(make_geometry(D, D)) == 0.0
    assert noise_share(make_geometry(D, np.zeros_like(D))) == 1.0
    assert noise_share(make_geometry(D, 0.5 * D)) == pytest.approx(0.75)
    # the correction can never "add" signal: clipped at 0
    assert noise_share(make_geometry(D, 2 * D)) == 0.0
    assert np.isnan(noise_share(make_geometry(np.zeros((3, 3)))))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(30, 400), gamma=st.floats(0, 3))
def test_noise_share_in_unit_interval(seed, m, gamma):
    small = corpus_geometry(load_corpus("synthetic", n_sequences=m, nonstationarity=gamma, seed=seed, n_positions=16, vocab_size=32), 16, cache=False)
    s = noise_share(small)
    assert 0.0 <= s <= 1.0


def test_noise_share_shrinks_with_more_sequences():
    shares = [noise_share(corpus_geometry(load_corpus("synthetic", n_sequences=m), 32, cache=False)) for m in (100, 1000)]
    assert 0 < shares[1] < shares[0] < 1


# ----------------------------------------------------------------------------- distance_by_offset
@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=15))
def test_distance_by_offset_is_constant_per_offset_on_a_toeplitz_matrix(values):
    D = toeplitz([0.0, *values])
    n = D.shape[0]
    prof = distance_by_offset(D)
    assert list(prof.columns) == ["offset", "mean", "min", "max", "pairs"]
    assert prof["offset"].tolist() == list(range(1, n))
    assert prof["pairs"].tolist() == [n - k for k in range(1, n)]
    np.testing.assert_allclose(prof["min"], values, rtol=0, atol=0)
    np.testing.assert_allclose(prof["max"], values, rtol=0, atol=0)
    np.testing.assert_allclose(prof["mean"], values, rtol=1e-12, atol=1e-12)


def test_distance_by_offset_on_a_general_matrix():
    rng = np.random.default_rng(0)
    A = rng.random((6, 6))
    D = A + A.T
    np.fill_diagonal(D, 0)
    prof = distance_by_offset(D, max_offset=3)
    assert len(prof) == 3
    for k, row in prof.set_index("offset").iterrows():
        diag = np.array([D[i, i + k] for i in range(6 - k)])
        assert row["mean"] == pytest.approx(diag.mean())
        assert row["min"] == diag.min() and row["max"] == diag.max()
        assert row["pairs"] == 6 - k
    assert len(distance_by_offset(D, max_offset=100)) == 5


def test_distance_by_offset_rejects_a_non_distance_matrix():
    with pytest.raises(ValueError, match="square"):
        distance_by_offset(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="symmetric"):
        distance_by_offset([[0, 1], [2, 0]])


def test_distance_by_offset_keeps_its_columns_when_no_offset_is_requested():
    D = toeplitz([0, 1, 2])
    try:
        prof = distance_by_offset(D, max_offset=0)
    except ValueError as exc:  # rejecting the request is fine too, with a helpful message
        assert "max_offset" in str(exc)
    else:
        assert prof.empty
        assert list(prof.columns) == ["offset", "mean", "min", "max", "pairs"]


# ----------------------------------------------------------------------------- stress_table
def test_stress_table_exact_embedding_has_zero_stress():
    P, D = random_points_D(0)
    t = stress_table(D, {"exact": P, "doubled": 2 * P})
    assert list(t.columns) == ["dim", "raw", "optimal", "alpha"]
    assert t.index.name == "encoding"
    assert t.loc["exact", "raw"] == pytest.approx(0.0, abs=1e-20)
    assert t.loc["exact", "alpha"] == pytest.approx(1.0)
    # doubling every distance: raw stress sum (2d - d)^2 / sum d^2 = 1, shape still perfect
    assert t.loc["doubled", "raw"] == pytest.approx(1.0)
    assert t.loc["doubled", "optimal"] == pytest.approx(0.0, abs=1e-12)
    assert t.loc["doubled", "alpha"] == pytest.approx(0.5)
    assert t["dim"].tolist() == [3, 3]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), log_scale=st.floats(-3, 3), k=st.integers(1, 4))
def test_stress_table_optimal_never_exceeds_raw_and_alpha_attains_it(seed, log_scale, k):
    rng = np.random.default_rng(seed)
    _, D = random_points_D(seed + 1, n=10, k=3)
    P = rng.normal(size=(10, k)) * 10.0**log_scale
    t = stress_table(D, {"enc": P})
    row = t.loc["enc"]
    assert row["dim"] == k
    assert row["raw"] == pytest.approx(stress(P, D))
    assert 0.0 <= row["optimal"] <= row["raw"] + 1e-12
    assert row["optimal"] <= 1.0
    assert stress(row["alpha"] * P, D) == pytest.approx(row["optimal"], rel=1e-9, abs=1e-12)
    # optimal stress ignores the encoding's scale
    assert stress_table(D, {"enc": 7.0 * P}).loc["enc", "optimal"] == pytest.approx(row["optimal"], rel=1e-9, abs=1e-12)


def test_stress_table_mds_rows():
    _, D = random_points_D(1, n=15, k=4)
    t = stress_table(D, {}, mds_dims=(1, 2))
    assert list(t.index) == ["PMDS full", "PMDS k=1", "SMACOF k=1", "PMDS k=2", "SMACOF k=2"]
    assert t.loc["PMDS full", "dim"] == 4
    assert t.loc["PMDS full", "raw"] == pytest.approx(0.0, abs=1e-20)
    assert t.loc["PMDS k=2", "dim"] == 2
    for k in (1, 2):
        assert t.loc[f"SMACOF k={k}", "raw"] <= t.loc[f"PMDS k={k}", "raw"] + 1e-12
    assert t.loc["PMDS k=2", "raw"] < t.loc["PMDS k=1", "raw"]


def test_stress_table_smacof_iteration_cap_matters():
    # Fisher-Rao distances of spread-out distributions are far from Euclidean: SMACOF needs
    # iterations, so capping it at 0 leaves the classical start.
    rng = np.random.default_rng(2)
    D = hellinger_matrix(rng.dirichlet(np.full(30, 0.3), size=20), metric="fisher-rao")
    t0 = stress_table(D, {}, mds_dims=(2,), smacof_max_iter=0)
    t = stress_table(D, {}, mds_dims=(2,), smacof_max_iter=300)
    assert t0.loc["SMACOF k=2", "raw"] == pytest.approx(t0.loc["PMDS k=2", "raw"])
    assert t.loc["SMACOF k=2", "raw"] < 0.99 * t0.loc["SMACOF k=2", "raw"]


def test_stress_table_with_nothing_to_score_is_an_empty_table():
    D = toeplitz([0, 1, 2])
    t = stress_table(D, {})
    assert t.empty
    assert list(t.columns) == ["dim", "raw", "optimal", "alpha"]


def test_stress_table_errors():
    with pytest.raises(ValueError, match="symmetric"):
        stress_table([[0, 1], [2, 0]], {"a": np.zeros((2, 1))})
    with pytest.raises(ValueError):
        stress_table(toeplitz([0, 1, 2]), {"wrong rows": np.zeros((4, 2))})


# ----------------------------------------------------------------------------- summaries
@pytest.fixture(scope="module")
def two_geometries():
    out = {}
    for name, gamma in (("ring", 0.0), ("mixed", 2.0)):
        c = load_corpus("synthetic", n_sequences=300, n_positions=12, vocab_size=24, nonstationarity=gamma)
        out[name] = corpus_geometry(c, 12, cache=False, min_count=10)
    return out


def test_corpus_summary_counts():
    seqs = Sequences.from_list([[0, 1, 2, 3], [3, 3], [1, 0, 0], [2]], vocab_size=10)
    c = Corpus(name="toy", split="train", sequences=seqs, labels=None, vocab_size=10, description="toy")
    s = corpus_summary({"toy": c}, {"toy": 3})
    assert s.loc["toy"].to_dict() == {
        "sequences": 4,
        "tokens": 10,
        "vocab_size": 10,
        "distinct_tokens": 4,
        "median_length": 2.5,
        "max_length": 4,
        "n_positions": 3,
        "reach_last": 2,
    }


def test_corpus_summary_several_corpora():
    corpora = {"a": load_corpus("synthetic", n_sequences=40), "b": load_corpus("synthetic", n_sequences=60, n_positions=8, vocab_size=16)}
    s = corpus_summary(corpora, {"a": 32, "b": 8})
    assert list(s.index) == ["a", "b"]
    assert s["sequences"].tolist() == [40, 60]
    assert s["tokens"].tolist() == [40 * 32, 60 * 8]
    assert s["reach_last"].tolist() == [40, 60]
    assert s["vocab_size"].tolist() == [64, 16]


def test_geometry_summary_values():
    D = toeplitz([0, 1, 2, 3])
    g = make_geometry(D, 0.5 * D, split_half=[0.1, 0.2, 0.3, 0.4], flagged=[False, False, True, True])
    row = geometry_summary({"toy": g}).loc["toy"]
    assert row["adjacent"] == pytest.approx(1.0)
    assert row["mean"] == pytest.approx((1 * 3 + 2 * 2 + 3 * 1) / 6)
    assert row["adjacent_corrected"] == pytest.approx(0.5)
    assert row["mean_corrected"] == pytest.approx(0.5 * 10 / 6)
    assert row["adjacent_first_order"] == pytest.approx(1.0)
    assert row["noise_floor_first"] == pytest.approx(0.1)
    assert row["noise_floor_last"] == pytest.approx(0.4)
    assert row["flagged"] == 2
    assert row["noise_share"] == pytest.approx(0.75)


def test_geometry_summary_on_real_geometries(two_geometries):
    s = geometry_summary(two_geometries)
    assert list(s.index) == ["ring", "mixed"]
    assert ((s["noise_share"] >= 0) & (s["noise_share"] <= 1)).all()
    assert (s["mean_corrected"] <= s["mean"] + 1e-12).all()

