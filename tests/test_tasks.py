"""Tests for posgeo._tasks (P2's four synthetic tasks)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo.experiments.tasks import (
    TASKS,
    TaskSample,
    TaskVocab,
    answer_is_correct,
    encode_task_batch,
    make_task_samples,
    task_length_range,
)

# Independent restatement of the formats (prompt regex, answer regex).
FORMATS = {
    "addition": (r"(0|[1-9]\d*)\+(0|[1-9]\d*)=", r"0|[1-9]\d*"),
    "reversal": (r"rev\(\d+\)=", r"\d+"),
    "indexing": (r"wherex\(\d+,\d\)=", r"\d+"),
    "sorting": (r"sort\(\d+,\d+\)=", r"\d+"),
}
P2_MAX = {"addition": 9, "reversal": 22, "indexing": 20, "sorting": 18}


def _independent_answer(task: str, prompt: str) -> str:
    body = prompt[:-1]
    if task == "addition":
        a, b = body.split("+")
        return str(int(a) + int(b))
    inner = body[body.index("(") + 1 : -1]
    if task == "reversal":
        return inner[::-1]
    if task == "indexing":
        s, x = inner.split(",")
        assert x in s
        return str(s.find(x))
    s, t = inner.split(",")
    assert len(set(s)) == len(s) and sorted(s) == sorted(t)
    return "".join(str(s.find(c)) for c in t)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), task=st.sampled_from(TASKS))
def test_every_sample_well_formed_and_correct(seed: int, task: str) -> None:
    samples = make_task_samples(task, 50, seed=seed)
    prompt_re, answer_re = FORMATS[task]
    lo, _ = task_length_range(task)
    for s in samples:
        assert re.fullmatch(prompt_re, s.prompt), s
        assert re.fullmatch(answer_re, s.answer), s
        assert lo <= len(s.prompt) <= P2_MAX[task]
        assert s.answer == _independent_answer(task, s.prompt)
        assert answer_is_correct(s)
        assert s.task == task


def test_p2_examples() -> None:
    assert answer_is_correct(TaskSample("123+456=", "579"))
    assert answer_is_correct(TaskSample("rev(1234)=", "4321"))
    assert answer_is_correct(TaskSample("wherex(134504392,4)=", "2"))
    assert len("wherex(134504392,4)=") == P2_MAX["indexing"]
    assert answer_is_correct(TaskSample("sort(3142,4213)=", "2310"))


def test_answer_is_correct_rejects_wrong_or_malformed() -> None:
    assert not answer_is_correct(TaskSample("123+456=", "578"))
    assert not answer_is_correct(TaskSample("rev(1234)=", "1234"))
    assert not answer_is_correct(TaskSample("wherex(1345,4)=", "3"))
    assert not answer_is_correct(TaskSample("wherex(1345,7)=", "0"))  # digit absent
    assert not answer_is_correct(TaskSample("sort(3312,1233)=", "2013"))  # repeated digits
    assert not answer_is_correct(TaskSample("sort(312,124)=", "120"))  # not a permutation
    assert not answer_is_correct(TaskSample("123+456", "579"))
    assert not answer_is_correct(TaskSample("012+3=", "15"))  # leading zero
    assert TaskSample("hello", "").task is None


@pytest.mark.parametrize("task", TASKS)
def test_determinism_under_seed(task: str) -> None:
    a = make_task_samples(task, 30, seed=7)
    b = make_task_samples(task, 30, seed=7)
    c = make_task_samples(task, 30, seed=8)
    assert a == b
    assert a != c


@pytest.mark.parametrize("task", TASKS)
def test_lengths_cover_the_range(task: str) -> None:
    lo, hi = task_length_range(task)
    samples = make_task_samples(task, 2000, seed=0)
    lengths = {len(s.prompt) for s in samples}
    feasible = {
        L for L in range(lo, P2_MAX[task] + 1) if task != "sorting" or (L - 8) % 2 == 0
    }
    assert lengths == feasible
    # a narrowed range is respected
    narrow = make_task_samples(task, 200, min_len=lo + 2, max_len=lo + 4, seed=1)
    assert all(lo + 2 <= len(s.prompt) <= lo + 4 for s in narrow)


def test_sorting_is_capped_at_ten_distinct_digits() -> None:
    samples = make_task_samples("sorting", 300, max_len=100, seed=0)
    assert max(len(s.prompt) for s in samples) == 28
    assert all(answer_is_correct(s) for s in samples)


def test_addition_operands_vary() -> None:
    samples = make_task_samples("addition", 500, seed=3)
    digits_a = {len(s.prompt.split("+")[0]) for s in samples}
    assert digits_a == set(range(1, 7))  # 1 .. max_len - 3


def test_errors() -> None:
    with pytest.raises(ValueError, match="addition, reversal, indexing, sorting"):
        make_task_samples("multiplication", 3)
    with pytest.raises(ValueError, match="n_samples"):
        make_task_samples("addition", 0)
    with pytest.raises(ValueError, match="n_samples"):
        make_task_samples("addition", -2)
    with pytest.raises(ValueError, match="min_len=3 is below"):
        make_task_samples("addition", 3, min_len=3)
    with pytest.raises(ValueError, match="max_len=6 is below min_len"):
        make_task_samples("reversal", 3, max_len=6)
    with pytest.raises(ValueError, match="no sorting prompt"):
        make_task_samples("sorting", 3, min_len=11, max_len=11)
    with pytest.raises(ValueError, match="unknown task"):
        task_length_range("nope")


# ----------------------------------------------------------------- vocabulary / batches
def test_vocab_round_trip_and_errors() -> None:
    v = TaskVocab()
    assert len(v) == v.size == 26
    for task in TASKS:
        for s in make_task_samples(task, 20, seed=2):
            ids = v.encode(s.prompt + s.answer, add_eos=True)
            assert ids[-1] == v.eos_id and v.pad_id not in ids
            assert v.decode(ids + [v.pad_id] * 3) == s.prompt + s.answer
    assert v.decode(torch.tensor([3, 4, 1, 5])) == "12"
    with pytest.raises(ValueError, match="not in the task vocabulary"):
        v.encode("rev(1a)=")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.decode([3, 99])


def test_encode_task_batch_layout() -> None:
    v = TaskVocab()
    samples = make_task_samples("reversal", 16, seed=5)
    tokens, mask = encode_task_batch(samples, v)
    assert tokens.dtype == torch.long and mask.dtype == torch.bool
    L = max(len(s.prompt) + len(s.answer) + 1 for s in samples)
    assert tokens.shape == mask.shape == (16, L)
    for b, s in enumerate(samples):
        n = len(s.prompt) + len(s.answer) + 1
        assert v.decode(tokens[b]) == s.prompt + s.answer
        assert tokens[b, n - 1] == v.eos_id
        assert (tokens[b, n:] == v.pad_id).all()
        # mask: exactly the answer characters and <eos>
        assert mask[b].nonzero().flatten().tolist() == list(range(len(s.prompt), n))
        assert v.decode(tokens[b][mask[b]]) == s.answer
    tokens2, _ = encode_task_batch(samples, v, max_len=L + 5)
    assert tokens2.shape == (16, L + 5)
    assert torch.equal(tokens2[:, :L], tokens)


def test_encode_task_batch_errors() -> None:
    v = TaskVocab()
    with pytest.raises(ValueError, match="empty"):
        encode_task_batch([], v)
    with pytest.raises(ValueError, match="max_len >= 13"):
        encode_task_batch([TaskSample("rev(123)=", "321")], v, max_len=5)


def test_generation_is_seeded_not_global() -> None:
    np.random.seed(0)
    a = make_task_samples("indexing", 10, seed=1)
    np.random.seed(123)
    b = make_task_samples("indexing", 10, seed=1)
    assert a == b
