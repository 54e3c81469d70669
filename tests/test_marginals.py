"""Tests for posgeo._marginals: positional marginals, counts, noise floor and debiasing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import (
    NoiseFloor,
    PositionalCounts,
    Sequences,
    corpus_geometry,
    hellinger_matrix,
    hellinger_noise_floor,
    hybrid_hellinger_matrix,
    matched_hellinger_matrix,
    positional_marginals,
    synthetic_corpus,
)
from posgeo._marginals import first_order_hellinger_matrix, position_counts


def naive_marginals(seqs: list[list[int]], n: int, V: int) -> np.ndarray:
    """Per-token pure-Python reference."""
    counts = [[0] * V for _ in range(n)]
    reach = [0] * n
    for s in seqs:
        for i, t in enumerate(s[:n]):
            counts[i][t] += 1
            reach[i] += 1
    return np.array([[c / reach[i] for c in row] for i, row in enumerate(counts)])


def chord(mu: np.ndarray) -> np.ndarray:
    s = np.sqrt(mu)
    return np.sqrt(0.5 * ((s[:, None, :] - s[None, :, :]) ** 2).sum(axis=-1))


@st.composite
def ragged(draw):
    V = draw(st.integers(1, 12))
    seqs = draw(st.lists(st.lists(st.integers(0, V - 1), max_size=15), min_size=1, max_size=25))
    longest = max(len(s) for s in seqs)
    if longest == 0:
        seqs[0] = [0]
        longest = 1
    n = draw(st.integers(1, longest))
    return seqs, n, V


# ----------------------------------------------------------------------------- analytic
def test_analytic_example():
    mu = positional_marginals([[0, 1], [0, 2, 2], [1]], n_positions=2, vocab_size=3)
    np.testing.assert_allclose(mu, [[2 / 3, 1 / 3, 0], [0, 1 / 2, 1 / 2]])
    assert mu.dtype == np.float64


def test_long_sequences_are_cut_and_short_ones_do_not_count_beyond_their_end():
    mu = positional_marginals([[3, 3, 3, 3, 3, 3], [1, 0]], n_positions=3, vocab_size=4)
    np.testing.assert_allclose(mu, [[0, 0.5, 0, 0.5], [0.5, 0, 0, 0.5], [0, 0, 0, 1]])


@settings(max_examples=80, deadline=None)
@given(ragged())
def test_fast_path_equals_generic_path_equals_naive(data):
    seqs, n, V = data
    ref = naive_marginals(seqs, n, V)
    fast = positional_marginals(Sequences.from_list(seqs, V), n, V)
    generic = positional_marginals(seqs, n, V)
    arrays = positional_marginals([np.array(s, dtype=np.int64) for s in seqs], n, V)
    np.testing.assert_allclose(fast, ref, atol=1e-12)
    np.testing.assert_allclose(generic, ref, atol=1e-12)
    np.testing.assert_allclose(arrays, ref, atol=1e-12)
    np.testing.assert_allclose(fast.sum(axis=1), 1.0, atol=1e-12)
    expected_counts = [sum(len(s) > i for s in seqs) for i in range(n)]
    assert position_counts(seqs, n).tolist() == expected_counts
    assert position_counts(Sequences.from_list(seqs, V), n).tolist() == expected_counts


def test_accepts_tensors_uint_arrays_corpus_and_2d_array():
    seqs = [[0, 1, 2], [2, 1], [1, 1, 1, 0]]
    ref = naive_marginals(seqs, 2, 3)
    np.testing.assert_allclose(positional_marginals([torch.tensor(s) for s in seqs], 2, 3), ref)
    np.testing.assert_allclose(positional_marginals([np.array(s, dtype=np.uint8) for s in seqs], 2, 3), ref)
    np.testing.assert_allclose(positional_marginals(iter(seqs), 2, 3), ref)  # a generator
    block = np.array([[0, 1], [2, 2]])
    np.testing.assert_allclose(positional_marginals(block, 2, 3), [[0.5, 0, 0.5], [0, 0.5, 0.5]])
    c = synthetic_corpus(n_sequences=50, n_positions=8, vocab_size=16)
    np.testing.assert_array_equal(positional_marginals(c, 8, 16), positional_marginals(c.sequences, 8, 16))


def test_converges_to_true_marginals_on_synthetic_corpus():
    c = synthetic_corpus(n_sequences=20000)
    mu = positional_marginals(c, 32, 64)
    assert np.abs(mu - c.true_marginals).max() < 0.02


# ----------------------------------------------------------------------------- errors
def test_empty_corpus():
    with pytest.raises(ValueError, match="empty"):
        positional_marginals([], 2, 3)
    with pytest.raises(ValueError, match="empty"):
        position_counts([], 2)


@pytest.mark.parametrize(
    "seqs",
    [[[0.0, 1.0]], [np.array([0.5, 1.5])], [["a", "b"]], ["ab"], [torch.tensor([0.0, 1.0])], [[True, False]]],
)
def test_non_integer_tokens(seqs):
    with pytest.raises(TypeError, match="integer|string"):
        positional_marginals(seqs, 1, 3)


def test_non_iterable_corpus():
    with pytest.raises(TypeError, match="iterable"):
        positional_marginals(3, 1, 3)
    with pytest.raises(TypeError, match="1-d"):
        positional_marginals([[[0, 1]]], 1, 3)


def test_out_of_range_ids_name_id_and_vocab():
    with pytest.raises(ValueError, match=r"token id 7 .*vocab_size=5"):
        positional_marginals([[0, 7, 1]], 3, 5)
    with pytest.raises(ValueError, match=r"token id -2 .*vocab_size=5"):
        positional_marginals([[0, -2]], 2, 5)
    with pytest.raises(ValueError, match=r"token id 7 .*vocab_size=5"):
        hellinger_noise_floor([[0, 7, 1]], 3, 5)
    with pytest.raises(ValueError, match=r"token id 7 .*vocab_size=5"):  # fast path too
        positional_marginals(Sequences.from_list([[0, 7, 1]], vocab_size=10), 3, 5)


def test_unreached_position_suggests_largest_n():
    with pytest.raises(ValueError, match=r"position 3 is reached by no sequence.*n_positions <= 3"):
        positional_marginals([[0, 1, 2], [1]], 5, 3)
    with pytest.raises(ValueError, match=r"n_positions <= 0"):
        positional_marginals([[], []], 1, 3)


@pytest.mark.parametrize(
    "n,V,exc,match",
    [(0, 3, ValueError, "n_positions"), (2, -1, ValueError, "vocab_size"), (2.0, 3, TypeError, "n_positions"),
     (2, "3", TypeError, "vocab_size"), (True, 3, TypeError, "n_positions")],
)
def test_sizes_must_be_positive_ints(n, V, exc, match):
    with pytest.raises(exc, match=match):
        positional_marginals([[0, 1, 2]], n, V)


def test_position_counts_values():
    assert position_counts([[0, 1], [0, 2, 2], [1]], 4).tolist() == [3, 2, 1, 0]
    with pytest.raises(ValueError, match="n_positions"):
        position_counts([[0]], 0)


# ----------------------------------------------------------------------------- noise floor
def test_noise_floor_shapes_counts_and_flags():
    seqs = [[0] * 30] * 25 + [[1] * 5] * 5
    nf = hellinger_noise_floor(seqs, 30, 2, min_count=26)
    assert isinstance(nf, NoiseFloor)
    assert nf.split_half.shape == nf.counts.shape == nf.flagged.shape == nf.bias_sq.shape == (30,)
    assert nf.counts.tolist() == position_counts(seqs, 30).tolist()
    assert nf.counts.tolist() == [30] * 5 + [25] * 25
    assert nf.flagged.tolist() == [False] * 5 + [True] * 25
    nf2 = hellinger_noise_floor(seqs, 30, 2, min_count=20)
    assert not nf2.flagged.any()
    np.testing.assert_allclose(nf.split_half[5:], 0.0)  # a constant token has no noise


def test_noise_floor_halves_are_exactly_balanced_per_position():
    # Position 1 is reached by 2 of 4 sequences: a per-position split puts one in each half
    # (never an empty half, which would give NaN); their tokens agree, so the distance is 0.
    seqs = [[0, 0], [1, 0], [2], [2]]
    nf = hellinger_noise_floor(seqs, 2, 3, n_splits=20, seed=1)
    assert nf.split_half[1] == pytest.approx(0.0)
    assert np.isfinite(nf.split_half).all()
    # Two sequences with different tokens everywhere: one per half -> distance exactly 1.
    nf = hellinger_noise_floor([[0, 5], [1, 6]], 2, 7, n_splits=10, seed=3)
    np.testing.assert_allclose(nf.split_half, [1.0, 1.0])  # always one sequence per half
    np.testing.assert_allclose(nf.bias_sq, [0.25, 0.25])


def test_noise_floor_nan_where_fewer_than_two_sequences():
    nf = hellinger_noise_floor([[0, 1, 1], [1]], 3, 2)
    assert np.isfinite(nf.split_half[0]) and np.isnan(nf.split_half[1:]).all()
    assert (nf.bias_sq[1:] == 0).all() and nf.flagged.all()


def test_noise_floor_is_seeded():
    c = synthetic_corpus(n_sequences=300)
    a = hellinger_noise_floor(c, 32, 64, seed=1)
    b = hellinger_noise_floor(c, 32, 64, seed=1)
    d = hellinger_noise_floor(c, 32, 64, seed=2)
    np.testing.assert_array_equal(a.split_half, b.split_half)
    assert not np.array_equal(a.split_half, d.split_half)


def test_noise_floor_shrinks_like_one_over_sqrt_n():
    small = hellinger_noise_floor(synthetic_corpus(n_sequences=500), 32, 64, n_splits=10)
    big = hellinger_noise_floor(synthetic_corpus(n_sequences=8000), 32, 64, n_splits=10)
    ratio = np.mean(small.split_half) / np.mean(big.split_half)
    assert 3.0 < ratio < 5.5  # sqrt(16) = 4


@pytest.mark.parametrize("geometry", ["ring", "line"])
def test_bias_estimate_matches_actual_squared_error(geometry):
    # On the synthetic corpus the truth is known: b_i should estimate H^2(mu_hat_i, mu_i).
    c = synthetic_corpus(n_sequences=2000, vocab_size=128, geometry=geometry)
    nf = hellinger_noise_floor(c, 32, 128, n_splits=10)
    mu_hat = positional_marginals(c, 32, 128)
    actual = 0.5 * ((np.sqrt(mu_hat) - np.sqrt(c.true_marginals)) ** 2).sum(axis=1)
    assert 0.7 < nf.bias_sq.mean() / actual.mean() < 1.4


def test_noise_floor_validates():
    with pytest.raises(ValueError, match="n_splits"):
        hellinger_noise_floor([[0, 1]], 2, 2, n_splits=0)
    with pytest.raises(ValueError, match="min_count"):
        hellinger_noise_floor([[0, 1]], 2, 2, min_count=-1)
    with pytest.raises(ValueError, match="empty"):
        hellinger_noise_floor([], 2, 2)


# ----------------------------------------------------------------------------- debiasing
def test_debiased_matrix_basic_properties():
    c = synthetic_corpus(n_sequences=300)
    D = first_order_hellinger_matrix(c, 32, 64)
    P = hellinger_matrix(positional_marginals(c, 32, 64))
    assert D.shape == (32, 32)
    np.testing.assert_allclose(D, D.T)
    assert (np.diag(D) == 0).all() and (D >= 0).all()
    assert (D <= P + 1e-12).all()
    assert (D < P - 1e-6)[~np.eye(32, dtype=bool)].mean() > 0.9  # it does correct


def test_debiased_equals_plugin_without_sampling_noise():
    seqs = [[0, 1, 2]] * 10  # every position constant: zero bias
    D = first_order_hellinger_matrix(seqs, 3, 3)
    np.testing.assert_allclose(D, chord(positional_marginals(seqs, 3, 3)), atol=1e-12)
    np.testing.assert_allclose(D[0, 1], 1.0)


@pytest.mark.parametrize("geometry", ["ring", "line"])
@pytest.mark.parametrize("nonstationarity", [0.0, 0.5, 4.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_debiased_is_closer_to_truth_with_few_sequences(geometry, nonstationarity, seed):
    # Few sequences, large vocabulary: the plug-in distances are badly inflated.
    c = synthetic_corpus(
        n_sequences=200, vocab_size=500, geometry=geometry, nonstationarity=nonstationarity, seed=seed
    )
    truth = chord(c.true_marginals)
    plug_in = chord(positional_marginals(c, 32, 500))
    corrected = first_order_hellinger_matrix(c, 32, 500, seed=seed)
    err_plug, err_corr = np.linalg.norm(plug_in - truth), np.linalg.norm(corrected - truth)
    assert err_corr < 0.75 * err_plug, (err_corr, err_plug)


def test_debiased_accepts_generic_sequences():
    c = synthetic_corpus(n_sequences=100, n_positions=8, vocab_size=16)
    as_lists = [s.tolist() for s in c.sequences]
    np.testing.assert_allclose(
        first_order_hellinger_matrix(as_lists, 8, 16), first_order_hellinger_matrix(c, 8, 16), atol=1e-12
    )


# ----------------------------------------------------------------------------- hybrid from counts
def _counts_of(seqs, n):
    from posgeo._marginals import position_counts

    N = position_counts(seqs, n)
    return np.rint(positional_marginals(seqs, n, seqs.vocab_size) * N[:, None]), N


def test_hybrid_from_counts_is_the_hybrid_estimator_bit_for_bit():
    from scipy import sparse

    from posgeo import hybrid_hellinger_matrix, synthetic_corpus
    from posgeo._estimators import hybrid_hellinger_from_counts

    seqs = synthetic_corpus(n_sequences=500).sequences
    C, N = _counts_of(seqs, 10)
    D = hybrid_hellinger_matrix(seqs, 10, seqs.vocab_size)
    assert np.array_equal(hybrid_hellinger_from_counts(C, N), D)
    assert np.array_equal(hybrid_hellinger_from_counts(sparse.csr_matrix(C), N), D)
    sq = hybrid_hellinger_from_counts(C, N, squared=True)
    assert np.allclose(np.sqrt(np.clip(sq, 0, None)), D, atol=1e-15)


def test_hybrid_squared_scale_averages_zero_under_stationarity():
    """Identical positions: the squared estimate is centred on 0 (negative values allowed)."""
    from posgeo._estimators import hybrid_hellinger_from_counts

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(200))
    C = rng.multinomial(2000, p, size=12).astype(float)
    sq = hybrid_hellinger_from_counts(C, np.full(12, 2000.0), squared=True)[np.triu_indices(12, 1)]
    assert (sq < 0).any() and abs(sq.mean()) < 3 * sq.std() / np.sqrt(sq.size) + 1e-4


def test_hybrid_from_counts_rejects_inconsistent_tables():
    from posgeo._estimators import hybrid_hellinger_from_counts

    C = np.array([[3.0, 1.0], [2.0, 2.0]])
    with pytest.raises(ValueError, match="sum to reach"):
        hybrid_hellinger_from_counts(C, [4, 5])
    with pytest.raises(ValueError, match="non-negative"):
        hybrid_hellinger_from_counts(-C, [4, 4])
    with pytest.raises(ValueError, match="fewer than 2"):
        hybrid_hellinger_from_counts([[1.0, 0.0], [2.0, 2.0]], [1, 4])
    with pytest.raises(ValueError, match="shape"):
        hybrid_hellinger_from_counts(C, [4, 4, 4])
    with pytest.raises(TypeError):
        hybrid_hellinger_from_counts(C.astype(complex), [4, 4])
    with pytest.raises(TypeError, match="squared"):
        hybrid_hellinger_from_counts(C, [4, 4], squared="yes")


# ----------------------------------------------------------------------------- noise floor by groups
def test_noise_floor_with_groups_sees_duplicated_sequences():
    """Every sequence twice: split as independent sequences, copies land in both halves and the
    halves look alike; split by groups (the two copies together), the floor is the one of the
    distinct sequences."""
    from posgeo import Sequences, hellinger_noise_floor, sample_synthetic_sequences, synthetic_marginals

    mu = synthetic_marginals(6, 32, nonstationarity=0.5, seed=0)
    base = sample_synthetic_sequences(mu, 300, seed=1)
    rows = [base.tokens[base.offsets[k]:base.offsets[k + 1]] for k in range(300)]
    doubled = Sequences.from_list(rows + rows, vocab_size=32)
    groups = np.tile(np.arange(300), 2)
    plain = hellinger_noise_floor(doubled, 6, 32, n_splits=10)
    grouped = hellinger_noise_floor(doubled, 6, 32, n_splits=10, groups=groups)
    distinct = hellinger_noise_floor(base, 6, 32, n_splits=10)
    assert (grouped.split_half > 1.2 * plain.split_half).all()
    np.testing.assert_allclose(grouped.split_half, distinct.split_half, rtol=0.25)
    with pytest.raises(ValueError, match="one group id per sequence"):
        hellinger_noise_floor(doubled, 6, 32, groups=groups[:10])


# ----------------------------------------------------------------------------- jackknife for nested corpora
def _stationary_corpus(m: int, length: int, V: int, seed: int) -> tuple[list[list[int]], np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.5))
    seqs = rng.choice(V, size=(m, length), p=p)
    return seqs.tolist(), p


@pytest.mark.parametrize("resolved_count", [1e-9, 1e12])  # every token resolved; every token in the tail
def test_jackknife_by_groups_sees_a_duplicated_corpus_as_the_original(resolved_count):
    """Every sequence twice, the two copies one group: with options under which the statistic
    depends on the counts only through the frequencies (no floor, all tokens on one side of the
    boundary), each leave-a-block-out corpus is the original's doubled, so the estimate is the
    original's exactly; treated as independent sequences, the copies halve the correction."""
    from posgeo import hybrid_hellinger_matrix

    rng = np.random.default_rng(1)
    seqs = [list(rng.integers(0, 30, size=rng.integers(4, 9))) for _ in range(120)]
    twice = [s for s in seqs for _ in range(2)]
    pairs = np.repeat(np.arange(len(seqs)), 2)
    opts = {"split": "jackknife", "resolved_count": resolved_count, "reference_floor": 0.0, "n_blocks": 8, "seed": 4}
    D = hybrid_hellinger_matrix(Sequences.from_list(seqs, 30), 4, 30, **opts)
    D2 = hybrid_hellinger_matrix(Sequences.from_list(twice, 30), 4, 30, groups=pairs, **opts)
    np.testing.assert_allclose(D2, D, atol=1e-12)
    ungrouped = hybrid_hellinger_matrix(Sequences.from_list(twice, 30), 4, 30, **opts)
    assert ungrouped[np.triu_indices(4, 1)].mean() > D[np.triu_indices(4, 1)].mean() + 0.02


def test_jackknife_removes_the_bias_of_nested_copies_under_stationarity():
    """Identical positions, every sequence with two truncated copies of itself: the hybrid
    estimator counts a token and its copies as three draws and reports distance; the
    jackknife over sentences is many times closer to 0."""
    from posgeo import hybrid_hellinger_matrix

    seqs, _ = _stationary_corpus(1500, 8, 400, seed=0)
    nested = [s[:k] for s in seqs for k in (8, 6, 4)]
    sentence = np.repeat(np.arange(len(seqs)), 3)
    corpus = Sequences.from_list(nested, 400)
    iu = np.triu_indices(8, 1)
    plain = hybrid_hellinger_matrix(corpus, 8, 400)[iu].mean()
    jk = hybrid_hellinger_matrix(corpus, 8, 400, split="jackknife", groups=sentence)[iu].mean()
    assert plain > 0.05 and jk < plain / 3


def test_jackknife_refuses_count_tables_that_cannot_fit_before_allocating():
    from posgeo import hybrid_hellinger_matrix

    seqs = Sequences.from_list([[1, 2, 3]] * 40, vocab_size=4)
    with pytest.raises(ValueError, match="more than this machine"):
        hybrid_hellinger_matrix(seqs, 3, 2**31 - 1, split="jackknife")


def test_jackknife_is_deterministic_for_a_seed_and_symmetric():
    from posgeo import hybrid_hellinger_matrix

    seqs = synthetic_corpus(n_sequences=400).sequences
    a = hybrid_hellinger_matrix(seqs, 8, seqs.vocab_size, split="jackknife", seed=3)
    assert np.array_equal(a, hybrid_hellinger_matrix(seqs, 8, seqs.vocab_size, split="jackknife", seed=3))
    assert np.array_equal(a, a.T) and (a >= 0).all() and (np.diag(a) == 0).all()
    b = hybrid_hellinger_matrix(seqs, 8, seqs.vocab_size, split="jackknife", seed=4)
    assert not np.array_equal(a, b) and np.abs(a - b).max() < 0.1


def test_jackknife_bad_input_is_named():
    from posgeo import hybrid_hellinger_matrix

    seqs = Sequences.from_list([[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 0]], 3)
    with pytest.raises(ValueError, match="only with split='jackknife'"):
        hybrid_hellinger_matrix(seqs, 2, 3, groups=[0, 0, 1, 1])
    with pytest.raises(ValueError, match="n_blocks"):
        hybrid_hellinger_matrix(seqs, 2, 3, split="jackknife", n_blocks=1)
    with pytest.raises(ValueError, match="exceeds the 2 units"):
        hybrid_hellinger_matrix(seqs, 2, 3, split="jackknife", groups=[0, 0, 1, 1], n_blocks=3)
    with pytest.raises(ValueError, match="one group id per sequence"):
        hybrid_hellinger_matrix(seqs, 2, 3, split="jackknife", groups=[0, 1], n_blocks=2)
    with pytest.raises(ValueError, match="reached only by sequences of jackknife block"):
        # position 2 is reached by one group only
        hybrid_hellinger_matrix(seqs, 3, 3, split="jackknife", groups=[0, 0, 0, 1], n_blocks=2)
    with pytest.raises(ValueError, match="unknown split"):
        hybrid_hellinger_matrix(seqs, 2, 3, split="jack")


# ------------------------------------------------------------------ stored counts as input
def test_estimators_accept_stored_counts():
    """Each estimator given a PositionalCounts computes from the counts: the same numbers as
    from the sequences where the estimator has no random split (bit for bit), the counts'
    own stored split where it has one; cut to n_positions."""
    corpus = synthetic_corpus(n_sequences=600, seed=3)
    V = corpus.vocab_size
    c = PositionalCounts.from_sequences(corpus, 32)
    for n in (32, 20):
        assert np.array_equal(positional_marginals(c, n, V), positional_marginals(corpus, n, V))
        assert np.array_equal(hybrid_hellinger_matrix(c, n, V), hybrid_hellinger_matrix(corpus, n, V))
    cut = c.truncate(20)
    assert np.array_equal(first_order_hellinger_matrix(c, 20, V), cut.first_order_hellinger_matrix())
    assert np.array_equal(matched_hellinger_matrix(c, 20, V), cut.matched_hellinger_matrix(), equal_nan=True)
    nf, ref = hellinger_noise_floor(c, 20, V, min_count=300), cut.noise_floor(min_count=300)
    assert np.array_equal(nf.split_half, ref.split_half) and np.array_equal(nf.flagged, ref.flagged)
    g, r = corpus_geometry(c, 16), corpus_geometry(corpus, 16, cache=False)
    assert np.array_equal(g.distances, r.distances) and np.array_equal(g.hybrid, r.hybrid)
    # and the stored split is not the sequences' random ones: another draw of the same estimate
    assert not np.array_equal(first_order_hellinger_matrix(c, 20, V), first_order_hellinger_matrix(corpus, 20, V))


@pytest.mark.parametrize("call, match", [
    (lambda c, V: positional_marginals(c, 40, V), r"n_positions=40 but the counts stop at 32 positions"),
    (lambda c, V: positional_marginals(c, 32, V + 1), r"vocab_size=\d+ but the counts have V = \d+"),
    (lambda c, V: hybrid_hellinger_matrix(c, 32, V, split="half"), r"split='half' halves the sequences"),
    (lambda c, V: matched_hellinger_matrix(c, 32, V, groups=np.arange(300)), r"groups= .* counts keep no sequences"),
    (lambda c, V: corpus_geometry(c, 16, metric="fisher-rao"), r"chord-Hellinger only; pass metric='chord'"),
])
def test_stored_counts_bad_input(call, match):
    corpus = synthetic_corpus(n_sequences=300, seed=1)
    with pytest.raises(ValueError, match=match):
        call(PositionalCounts.from_sequences(corpus, 32), corpus.vocab_size)
