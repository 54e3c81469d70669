"""How a benchmark target is judged from paired rounds on a shared machine.

One rule, used by ``bench_counts.py`` for its verdicts and exit status and by ``report.py`` for the
book's benchmarks page, so that the two never disagree:

- a target measured once is met when the value reaches it;
- a target measured over paired rounds is **met** only when a distribution-free interval for the
  median of the rounds (:func:`median_interval`) lies at or above it, a **gap** when the interval
  lies below it, and otherwise **not resolved** (the host's noise between rounds decides it);
- a parallel speed-up against one process is not judged at all when the machine did not give the
  k processes k cores in the same rounds (:func:`busy_machine`).

Example::

    >>> median_interval([1.9, 1.7, 2.0, 1.8, 1.75])
    (1.7, 2.0, 0.9375)
    >>> verdict(judge_rounds([1.9, 1.7, 2.0, 1.8, 1.75], 1.8, 1.6))
    'met'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

# The bare tokenizer's k-process speed-up in the rounds must lie in [BUSY_LOW k, BUSY_HIGH k] for the
# rounds to judge the targets against one process (see busy_machine).
BUSY_LOW, BUSY_HIGH = 0.9, 1.02


def busy_machine(machine_speedup: float, k: int) -> str | None:
    """Why a run's parallel speed-ups against one process say nothing about posgeo, or None.

    ``machine_speedup`` is the bare tokenizer's speed-up in ``k`` processes at once over one, timed in
    the same rounds as the workers: what the machine gave to k processes while the rounds ran. Below
    ``BUSY_LOW * k`` the host (or contention between its cores) held back any k-worker run; above
    ``BUSY_HIGH * k``, which k cores cannot do, the single-process runs were slowed by other jobs and
    every ratio against them is inflated. The pure-Python capacity checks that bench_counts.py runs
    before and after the rounds are context, not this judge: they run outside the rounds, and a
    shared host's speed moves within seconds.
    """
    if k < 1:
        raise ValueError(f"k must be a number of processes >= 1, got {k}")
    m = float(machine_speedup)
    if m < BUSY_LOW * k:
        return (f"in the same rounds the bare tokenizer ran only {m:.2f} times as fast in {k} processes as in one, "
                f"so the machine gave about {m:.2f} of its {k} cores (other jobs on the host, or contention between "
                "its cores); rerun on a quiet machine")
    if m > BUSY_HIGH * k:
        return (f"the bare tokenizer ran {m:.2f} times as fast in {k} processes as "
                f"in one, more than {k} cores can: the single-process runs were slowed by other jobs; rerun on a "
                "quiet machine")
    return None


def median_interval(values: Sequence[float], level: float = 0.9) -> tuple[float, float, float]:
    """A distribution-free interval for the median of paired rounds.

    The order statistics ``(x_(j), x_(R+1-j))`` with the largest ``j`` whose coverage
    ``1 - 2 P(Bin(R, 1/2) < j)`` is at least ``level`` (``j = 1``, the range, when no ``j`` reaches it).
    Returns ``(low, high, coverage)``.
    """
    x = sorted(float(v) for v in values)
    R = len(x)
    if R == 0:
        raise ValueError("median_interval needs at least one round")

    def coverage(j: int) -> float:
        return 1 - 2 * sum(math.comb(R, i) for i in range(j)) / 2**R

    j = 1
    while j + 1 <= (R + 1) // 2 and coverage(j + 1) >= level:
        j += 1
    return x[j - 1], x[R - j], coverage(j)


def judge_rounds(rounds: Sequence[float] | None, value: float, target: float,
                 fmt: Callable[[float], str] = lambda v: f"{v:.2f}") -> bool | str:
    """True (met), False (gap), or the sentence saying why the rounds cannot decide.

    ``rounds`` holds one paired ratio per round (None or a single round: ``value`` is judged by itself);
    ``value`` is their median as the run reports it; higher is better.
    """
    if not rounds or len(rounds) < 2:
        return value >= target
    lo, hi, cov = median_interval(rounds)
    if lo >= target:
        return True
    if hi < target:
        return False
    return (f"the median's {cov:.0%} interval over the {len(rounds)} rounds, {fmt(lo)} to {fmt(hi)}, contains "
            f"the target (the host's noise between rounds); more rounds or a quieter machine would decide it")


def judge_end_to_end(e: dict, fmt_ratio: Callable[[float], str] = lambda v: f"{v:.2f}",
                     fmt_share: Callable[[float], str] = lambda v: f"{v:.2f}") -> dict[str, bool | str]:
    """bench_counts.py's end-to-end targets, judged: the speed-up of ``e["workers"]`` workers over one process
    and each worker's share of one bare tokenizer (not judged on a busy machine, :func:`busy_machine`), and,
    where the run has its rounds, each worker's share of one of k bare tokenizers run at once (the same
    contention, so judged on any machine). Keys: ``speedup``, ``worker_efficiency``,
    ``worker_efficiency_vs_bare_{k}_processes``; values as :func:`judge_rounds` returns them."""
    k = e["workers"]
    busy = busy_machine(e["machine_parallel_speedup_now"], k)

    def judged(key: str, target: float, fmt: Callable[[float], str]) -> bool | str:
        return judge_rounds(e.get(key + "_rounds"), e[key], target, fmt)

    out = {"speedup": busy or judged("speedup_workers_over_one_process", e["speedup_target"], fmt_ratio),
           "worker_efficiency": busy or judged("per_worker_efficiency_vs_bare", e["worker_efficiency_target"], fmt_share)}
    key = f"efficiency_vs_bare_{k}_processes"
    if key + "_rounds" in e:
        out[f"worker_efficiency_vs_bare_{k}_processes"] = judged(key, e["worker_efficiency_target"], fmt_share)
    return out


def verdict(judged: bool | str) -> str:
    """``'met'``, ``'gap'`` or ``'not resolved: <why>'`` for a result of :func:`judge_rounds` or
    :func:`busy_machine`'s sentence."""
    if isinstance(judged, str):
        return f"not resolved: {judged}"
    return "met" if judged else "gap"


def exit_status(verdicts: dict[str, str]) -> int:
    """A benchmark script's exit status from its :func:`verdict` strings: 0 when every target is met, 1 when
    one is missed (a gap), 3 when none is missed but some are not resolved on this machine."""
    if any(v == "gap" for v in verdicts.values()):
        return 1
    return 0 if all(v == "met" for v in verdicts.values()) else 3
