"""posgeo._sequences: the split-half routine shared by the random estimators."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo._sequences import stratified_blocks, stratified_halves


@given(st.lists(st.integers(1, 30), min_size=1, max_size=200), st.integers(0, 2**31 - 1))
@settings(max_examples=80, deadline=None)
def test_halves_are_balanced_at_every_position(lengths, seed):
    L = np.array(lengths)
    half = stratified_halves(L, seed=seed)
    for i in range(L.max()):
        reach = L > i
        assert abs(int((reach & half).sum()) - int((reach & ~half).sum())) <= 1


@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 9)), min_size=1, max_size=120), st.integers(0, 1000))
@settings(max_examples=60, deadline=None)
def test_groups_stay_whole_and_are_balanced_by_their_longest_sequence(items, seed):
    L = np.array([a for a, _ in items])
    g = np.array([b for _, b in items])
    half = stratified_halves(L, seed=seed, groups=g)
    ids = np.unique(g)
    assert all(len(set(half[g == k])) == 1 for k in ids)  # a group is never split
    longest = np.array([L[g == k].max() for k in ids])
    side = np.array([half[g == k][0] for k in ids])
    for i in range(L.max()):
        reach = longest > i
        assert abs(int((reach & side).sum()) - int((reach & ~side).sum())) <= 1


def test_seed_and_generator():
    L = np.arange(1, 101) % 7 + 1
    a, b = stratified_halves(L, seed=3), stratified_halves(L, seed=3)
    assert (a == b).all() and not (a == stratified_halves(L, seed=4)).all()
    rng = np.random.default_rng(3)
    first, second = stratified_halves(L, seed=rng), stratified_halves(L, seed=rng)
    assert (first == a).all() and not (second == first).all()  # a generator is consumed


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"lengths": [1.5, 2.0], "seed": 0}, TypeError, "1-d integer array"),
        ({"lengths": [[1, 2]], "seed": 0}, TypeError, "1-d integer array"),
        ({"lengths": [1, 2], "seed": 0.5}, TypeError, "seed must be an int"),
        ({"lengths": [1, 2], "seed": True}, TypeError, "seed must be an int"),
        ({"lengths": [1, 2], "seed": 0, "groups": [0]}, ValueError, "one group id per sequence"),
    ],
)
def test_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        stratified_halves(**kwargs)


# ----------------------------------------------------------------------------- blocks
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 40)), min_size=3, max_size=150),
       st.integers(2, 7), st.integers(0, 1000), st.booleans())
@settings(max_examples=60, deadline=None)
def test_blocks_are_balanced_at_every_position_and_keep_groups_whole(items, k, seed, grouped):
    L = np.array([a for a, _ in items])
    g = np.array([b for _, b in items]) if grouped else np.arange(L.size)
    ids = np.unique(g)
    if k > ids.size:
        with pytest.raises(ValueError, match="exceeds"):
            stratified_blocks(L, k, seed=seed, groups=g if grouped else None)
        return
    block = stratified_blocks(L, k, seed=seed, groups=g if grouped else None)
    assert block.dtype == np.int64 and block.min() >= 0 and block.max() < k
    assert all(len(set(block[g == u])) == 1 for u in ids)  # a group is never split
    longest = np.array([L[g == u].max() for u in ids])
    unit_block = np.array([block[g == u][0] for u in ids])
    for i in range(L.max()):
        per_block = np.bincount(unit_block[longest > i], minlength=k)
        assert per_block.max() - per_block.min() <= 1


def test_blocks_seed_and_bad_input():
    L = np.arange(1, 61) % 5 + 1
    a = stratified_blocks(L, 4, seed=2)
    assert (a == stratified_blocks(L, 4, seed=2)).all() and not (a == stratified_blocks(L, 4, seed=3)).all()
    with pytest.raises(ValueError, match="n_blocks"):
        stratified_blocks(L, 1, seed=0)
    with pytest.raises(ValueError, match="exceeds the 3 units"):
        stratified_blocks([2, 2, 2], 4, seed=0)
    with pytest.raises(TypeError, match="1-d integer array"):
        stratified_blocks([1.5, 2.0], 2, seed=0)
    with pytest.raises(ValueError, match="one group id per sequence"):
        stratified_blocks([1, 2], 2, seed=0, groups=[0])
