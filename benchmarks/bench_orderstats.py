"""Benchmark the order-statistics scores: fast (merge sort) vs naive (literal definition).

* Monotonicity violation rate (P1, Conjecture 5) at n = 512, 2048, 4096.
* Adjacency probability score (P2) at n = 256, 1024.

Both implementations run in the same process on the same input; times are process CPU
seconds (``time.process_time``), which other jobs on a shared machine do not inflate. The
naive monotonicity count is independent per anchor, so its time is linear in the number of
anchors: for ``n > 512`` it is timed on a random subset of anchors and extrapolated (the
table says so). The fast method is also run on that subset, and the counts of the two are
checked to be identical. Matrices use distances rounded to 0.1, so ties occur too.

Usage::

    .venv/bin/python benchmarks/bench_orderstats.py [--json out.json] [--naive-anchors 256]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any, Callable

import numpy as np

os.environ.setdefault("TQDM_DISABLE", "1")

from posgeo import cosine_similarity_matrix  # noqa: E402
from posgeo._metrics import adjacency_row_scores
from posgeo import monotonicity_violations  # noqa: E402


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds of process CPU time (robust to other jobs on a shared machine) and result."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def bench_monotonicity(n: int, naive_anchors: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    P = rng.normal(size=(n, 64))
    # integer-rounded copy of the distances to exercise ties as well
    from scipy.spatial.distance import pdist, squareform

    E = np.round(squareform(pdist(P)), 1)
    fast_s, fast = _time(lambda: monotonicity_violations(distances=E, progress=False))
    subset = n if naive_anchors >= n else naive_anchors
    anchors = np.sort(rng.choice(n, size=subset, replace=False))
    naive_sub_s, naive = _time(
        lambda: monotonicity_violations(
            distances=E, anchors=anchors, method="naive", progress=False
        )
    )
    fast_sub = monotonicity_violations(distances=E, anchors=anchors, progress=False)
    same = (fast_sub.violations, fast_sub.comparable, fast_sub.ties) == (
        naive.violations,
        naive.comparable,
        naive.ties,
    )
    naive_s = naive_sub_s * n / subset
    return {
        "score": "monotonicity",
        "n": n,
        "fast_s": fast_s,
        "naive_s": naive_s,
        "naive_estimated": subset < n,
        "naive_anchors": subset,
        "speedup": naive_s / fast_s,
        "counts_identical": bool(same),
        "rate": fast.rate,
    }


def bench_adjacency(n: int, seed: int) -> dict[str, Any]:
    X = np.random.default_rng(seed).normal(size=(n, 64)).cumsum(axis=0)
    C = cosine_similarity_matrix(X)
    fast_s, fast = _time(lambda: adjacency_row_scores(C, progress=False))
    naive_s, naive = _time(lambda: adjacency_row_scores(C, method="naive", progress=False))
    return {
        "score": "adjacency",
        "n": n,
        "fast_s": fast_s,
        "naive_s": naive_s,
        "naive_estimated": False,
        "naive_anchors": n,
        "speedup": naive_s / fast_s,
        "counts_identical": bool(np.array_equal(fast, naive, equal_nan=True)),
        "rate": float(np.nanmean(fast)),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument(
        "--naive-anchors",
        type=int,
        default=256,
        help="for n > 512, time the naive monotonicity count on this many anchors and "
        "extrapolate linearly (n <= 512 is timed in full)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mono-n", type=int, nargs="+", default=[512, 2048, 4096])
    parser.add_argument("--adj-n", type=int, nargs="+", default=[256, 1024])
    args = parser.parse_args(argv)

    rows = [
        bench_monotonicity(n, args.naive_anchors if n > 512 else n, args.seed)
        for n in args.mono_n
    ]
    rows += [bench_adjacency(n, args.seed) for n in args.adj_n]

    print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs")
    head = (
        f"{'score':<13}{'n':>6}{'fast [cpu s]':>14}{'naive [cpu s]':>15}{'speedup':>10}  "
        f"{'same counts':<12}{'value':>7}  note"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        note = (
            f"naive timed on {r['naive_anchors']} of {r['n']} anchors, "
            f"scaled x{r['n'] / r['naive_anchors']:.0f}"
            if r["naive_estimated"]
            else "naive timed in full"
        )
        print(
            f"{r['score']:<13}{r['n']:>6}{r['fast_s']:>14.3f}{r['naive_s']:>15.3f}"
            f"{r['speedup']:>9.1f}x  {str(r['counts_identical']):<12}{r['rate']:>7.3f}  {note}"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
        print(f"wrote {args.json}")
    return rows


if __name__ == "__main__":
    main()
