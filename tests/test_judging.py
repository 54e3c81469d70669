"""benchmarks/judging.py: how a benchmark target is judged from paired rounds (bench_counts.py's verdicts and
exit status, and the book's benchmarks page)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def judging():
    spec = importlib.util.spec_from_file_location("benchmarks_judging", ROOT / "benchmarks" / "judging.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_median_interval_is_the_order_statistics_with_binomial_coverage(judging) -> None:
    # 5 rounds: only the range reaches 90% (coverage 1 - 2/32); 10 rounds: the 2nd and 9th values
    assert judging.median_interval([5, 1, 4, 2, 3]) == (1, 5, 1 - 2 / 32)
    lo, hi, cov = judging.median_interval(list(range(1, 11)))
    assert (lo, hi) == (2, 9) and cov == pytest.approx(1 - 2 * 11 / 1024)
    # 15 rounds (run 5 of bench_counts.py): the 4th and 12th values, 96.5%
    lo, hi, cov = judging.median_interval(list(range(1, 16)))
    assert (lo, hi) == (4, 12) and cov == pytest.approx(1 - 2 * stats.binom.cdf(3, 15, 0.5))
    assert judging.median_interval([1.0, 2.0])[:2] == (1.0, 2.0)  # too few rounds for 90%: the range
    assert judging.median_interval([3.0]) == (3.0, 3.0, 0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.1, 10.0, allow_nan=False), min_size=1, max_size=60), st.sampled_from([0.8, 0.9, 0.95]))
def test_median_interval_holds_the_median_and_its_stated_coverage(judging, values, level) -> None:
    lo, hi, cov = judging.median_interval(values, level)
    x = sorted(values)
    R = len(x)
    median = (x[(R - 1) // 2] + x[R // 2]) / 2
    assert lo <= median <= hi
    # the coverage is the exact binomial one of the order statistics chosen, and the largest j reaching the level
    cover = lambda j: 1 - 2 * stats.binom.cdf(j - 1, R, 0.5)  # noqa: E731
    widest = max((j for j in range(1, (R + 1) // 2 + 1) if cover(j) >= level), default=1)
    assert cov == pytest.approx(cover(widest), abs=1e-12)
    assert (lo, hi) == (x[widest - 1], x[R - widest])


def test_judge_rounds_met_gap_or_not_resolved(judging) -> None:
    straddle = judging.judge_rounds([1.45, 1.79, 2.08, 1.86, 1.58], 1.79, 1.7)
    assert isinstance(straddle, str) and "1.45 to 2.08" in straddle and "94%" in straddle
    assert judging.judge_rounds([1.75, 1.8, 1.9, 2.0, 1.95], 1.9, 1.7) is True
    assert judging.judge_rounds([1.4, 1.5, 1.6, 1.45, 1.55], 1.5, 1.7) is False
    assert judging.judge_rounds(None, 1.75, 1.7) is True  # one measurement: the value itself
    assert judging.judge_rounds([1.65], 1.65, 1.7) is False
    # the median alone would say met: one round in five below the target leaves it open
    assert isinstance(judging.judge_rounds([1.6, 1.8, 1.9, 2.0, 1.95], 1.9, 1.7), str)
    assert "1.600x to 2.000x" in judging.judge_rounds([1.6, 1.8, 1.9, 2.0, 1.95], 1.9, 1.7, lambda v: f"{v:.3f}x")


def test_busy_machine_judges_by_the_bare_tokenizer_in_the_same_rounds(judging) -> None:
    assert judging.busy_machine(1.95, 2) is None
    assert judging.busy_machine(2.03, 2) is None  # up to 1.02 k: timing noise
    assert "only 1.64 times as fast" in judging.busy_machine(1.64, 2)
    assert "2.13 times as fast" in judging.busy_machine(2.13, 2) and "more than 2 cores" in judging.busy_machine(2.13, 2)
    assert judging.busy_machine(3.7, 4) is None and "only 3.50" in judging.busy_machine(3.5, 4)
    with pytest.raises(ValueError, match="k must be"):
        judging.busy_machine(1.9, 0)


def test_verdicts_and_exit_status(judging) -> None:
    assert judging.verdict(True) == "met" and judging.verdict(False) == "gap"
    assert judging.verdict("the machine was busy") == "not resolved: the machine was busy"
    assert judging.exit_status({"a": "met", "b": "met"}) == 0
    assert judging.exit_status({"a": "met", "b": "not resolved: noise"}) == 3
    assert judging.exit_status({"a": "gap", "b": "not resolved: noise"}) == 1
    assert judging.exit_status({}) == 0


def test_median_interval_rejects_no_rounds(judging) -> None:
    with pytest.raises(ValueError, match="at least one round"):
        judging.median_interval([])


def test_bench_counts_and_the_page_use_the_one_rule() -> None:
    """Neither script keeps its own copy of the rule (the old bench_counts.py judged the median alone)."""
    for script in ("bench_counts.py", "report.py"):
        text = (ROOT / "benchmarks" / script).read_text(encoding="utf-8")
        assert "import judging" in text, f"benchmarks/{script} does not judge with judging.py"
        assert "def _median_interval" not in text and "_pass\"] = bool(res[" not in text


def test_the_modules_example_runs(judging) -> None:
    import doctest

    failed, tried = doctest.testmod(judging, verbose=False)
    assert tried >= 2 and failed == 0


def test_judge_end_to_end_applies_the_busy_rule_only_against_one_process(judging) -> None:
    e = {"workers": 2, "speedup_target": 1.7, "worker_efficiency_target": 0.85, "machine_parallel_speedup_now": 1.6,
         "speedup_workers_over_one_process": 1.9, "speedup_workers_over_one_process_rounds": [1.8, 1.9, 2.0, 1.85, 1.95],
         "per_worker_efficiency_vs_bare": 0.95, "per_worker_efficiency_vs_bare_rounds": [0.9, 0.95, 0.97, 0.93, 0.96],
         "efficiency_vs_bare_2_processes": 0.8, "efficiency_vs_bare_2_processes_rounds": [0.7, 0.8, 0.82, 0.75, 0.78]}
    busy = judging.judge_end_to_end(e)
    assert "only 1.60 times as fast" in busy["speedup"] and "only 1.60" in busy["worker_efficiency"]
    assert busy["worker_efficiency_vs_bare_2_processes"] is False  # judged even on a busy machine: a gap
    quiet = judging.judge_end_to_end(e | {"machine_parallel_speedup_now": 1.95})
    assert quiet["speedup"] is True and quiet["worker_efficiency"] is True
    old = {key: v for key, v in e.items() if not key.startswith("efficiency_vs_bare_2")}  # an older result
    assert set(judging.judge_end_to_end(old)) == {"speedup", "worker_efficiency"}
