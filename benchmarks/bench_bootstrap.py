"""Benchmark: the sequence-level bootstrap of the positional Hellinger geometry on IMDB train.

On IMDB train (25,000 reviews, posgeo's default tokenizer, V = 30,522) at n = 510 positions:

(a) ``posgeo.bootstrap_geometry`` (plug-in estimator) with ``--n-boot`` replicates
    (default 200): the corpus is indexed once and every replicate reweights the per-sequence
    (position, token) entries. Timed end to end (estimate, indexing, replicates, intervals),
    wall and process CPU; a run with one replicate gives the fixed cost, and the rest divided
    by ``n_boot - 1`` the cost of one replicate. The issue's target: under a minute (wall).
    Also reported: how far the replicates sit above the estimate on average (the plug-in's
    bias, which percentile intervals inherit) and the share of intervals containing it.
(b) the naive baseline: for each replicate, resample the sequences (the same draws as (a):
    ``numpy.random.default_rng(seed).integers(0, m, size=m)``, in order), rebuild a
    ``Sequences`` with ``subset``, and call ``positional_marginals`` + ``hellinger_matrix``.
    It runs ``--naive-boot`` replicates (default 3), and its time for ``n_boot`` replicates is
    extrapolated linearly (plus one estimate on the corpus); its replicates are checked to
    equal (a)'s (largest absolute difference reported; (a) stores float32).
(c) the corrected estimators, ``first_order`` and ``matched`` (5 splits), timed on
    ``--corrected-boot`` replicates each (default 10): cost of one replicate and the
    extrapolated time for ``n_boot``.

Ratio = naive time / posgeo time (above 1: posgeo faster). BLAS is limited to ``--threads``
threads (default 1, as ``posgeo.small_blas`` does inside the bootstrap) for both paths.

Usage (the first stores the result, with the machine, load averages, date and command, in
``benchmarks/results/bench_bootstrap.json`` for the book's benchmarks page)::

    python benchmarks/report.py run bootstrap                 # POSGEO_DATA_DIR set; about 2-3 minutes
    .venv/bin/python benchmarks/bench_bootstrap.py [--json out.json]
    .venv/bin/python benchmarks/bench_bootstrap.py --data-dir "$POSGEO_DATA_DIR" --n-boot 20 --corrected-boot 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import posgeo
from posgeo import hellinger_matrix, load_corpus, positional_marginals
from posgeo._corpus import DATA_ENV_VAR
from posgeo import bootstrap_geometry

TARGET_S = 60.0


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and process CPU seconds of one call, and its result."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get(DATA_ENV_VAR), help=f"data directory (default ${DATA_ENV_VAR})")
    parser.add_argument("--split", default="train")
    parser.add_argument("--n-positions", type=int, default=510)
    parser.add_argument("--n-boot", type=int, default=200, help="replicates of the reweighting path (a)")
    parser.add_argument("--naive-boot", type=int, default=3, help="replicates of the naive path (b), extrapolated")
    parser.add_argument("--corrected-boot", type=int, default=10, help="replicates of first_order, matched and hybrid (halvings) (c); 0 skips")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl) for both paths")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error(f"pass --data-dir or set {DATA_ENV_VAR} (a directory with imdb/{{train,test}}.parquet)")
    if args.n_boot < 2 or args.naive_boot < 1:
        parser.error("--n-boot must be >= 2 and --naive-boot >= 1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    n, B = args.n_positions, args.n_boot

    t_load, _, corpus = timed(lambda: load_corpus("imdb", args.split, data_dir=args.data_dir, progress=False))
    seqs, V, m = corpus.sequences, corpus.vocab_size, len(corpus)
    kept = int(np.minimum(seqs.lengths, n).sum())
    reach_last = int((seqs.lengths >= n).sum())
    load_start = os.getloadavg()
    with threadpool_limits(limits=args.threads, user_api="blas"):
        blas = [f"{d['internal_api']} {d.get('version')} ({d['num_threads']} threads)" for d in threadpool_info()]
        print(f"Bootstrap benchmark: IMDB {args.split}, {m:,} reviews, n = {n}, V = {V:,}, {kept:,} kept tokens "
              f"({reach_last:,} reviews reach position {n - 1}); corpus loaded in {t_load:.1f} s (not timed below)")
        print(f"  BLAS: {blas}; load average {load_start}; {os.cpu_count()} CPUs")

        # (a) reweighting: one replicate (fixed cost), then n_boot
        w1, c1, _ = timed(lambda: bootstrap_geometry(corpus, n, n_boot=1, seed=args.seed, progress=False))
        wa, ca, bg = timed(lambda: bootstrap_geometry(corpus, n, n_boot=B, seed=args.seed, progress=False))
        per_rep_wall, per_rep_cpu = (wa - w1) / (B - 1), (ca - c1) / (B - 1)
        verdict = "PASS" if wa < TARGET_S else "FAIL"
        print(f"(a) posgeo reweighting, {B} replicates: {wa:.1f} s wall, {ca:.1f} s CPU "
              f"(fixed {w1:.1f} s wall / {c1:.1f} s CPU; per replicate {per_rep_wall:.3f} s wall / "
              f"{per_rep_cpu:.3f} s CPU) -> target < {TARGET_S:.0f} s: {verdict}")
        iu = np.triu_indices(n, 1)
        widths = (bg.high - bg.low)[iu]
        plug = bg.estimate[iu]
        contains = float(np.mean((bg.low[iu] <= plug) & (plug <= bg.high[iu])))
        shift = float(np.mean(bg.replicates, dtype=np.float64) - plug.mean())
        print(f"    intervals: median width {np.median(widths):.4f}, median distance {np.median(plug):.4f}; "
              f"replicates average {shift:+.4f} above the estimate (the plug-in bias, again), and "
              f"{100 * contains:.1f}% of the intervals contain the estimate; replicates {bg.replicates.nbytes / 2**20:.0f} MiB")

        # (b) naive: resample, rebuild, recount, recompute
        we, ce, _ = timed(lambda: hellinger_matrix(positional_marginals(seqs, n, V)))
        rng = np.random.default_rng(args.seed)
        naive_w, naive_c, diffs = [], [], []
        for b in range(args.naive_boot):
            idx = rng.integers(0, m, size=m)
            w, c, D = timed(lambda: hellinger_matrix(positional_marginals(seqs.subset(idx), n, V)))
            naive_w.append(w)
            naive_c.append(c)
            diffs.append(float(np.max(np.abs(D[iu] - bg.replicates[b].astype(np.float64)))))
        nb_wall = we + B * float(np.mean(naive_w))
        nb_cpu = ce + B * float(np.mean(naive_c))
        print(f"(b) naive resample + recount, {args.naive_boot} replicates: {np.mean(naive_w):.2f} s wall / "
              f"{np.mean(naive_c):.2f} s CPU each; extrapolated to {B}: {nb_wall:.0f} s wall, {nb_cpu:.0f} s CPU "
              f"(+ estimate {we:.1f} s); largest |naive - posgeo| {max(diffs):.1e}")
        ratio_wall, ratio_cpu = nb_wall / wa, nb_cpu / ca
        print(f"    ratio naive / posgeo: {ratio_wall:.1f}x wall, {ratio_cpu:.1f}x CPU")

        # (c) corrected estimators
        corrected = []
        if args.corrected_boot > 0:
            for est in ("first_order", "matched", "hybrid"):  # hybrid: replicates are half-sample halvings
                k = args.corrected_boot
                w1c, c1c, _ = timed(lambda: bootstrap_geometry(corpus, n, estimator=est, n_boot=1, seed=args.seed, progress=False))
                wk, ck, _ = timed(lambda: bootstrap_geometry(corpus, n, estimator=est, n_boot=k, seed=args.seed, progress=False))
                pw, pc = (wk - w1c) / max(1, k - 1), (ck - c1c) / max(1, k - 1)
                row = {"estimator": est, "n_boot_timed": k, "fixed_wall_s": w1c, "fixed_cpu_s": c1c,
                       "per_replicate_wall_s": pw, "per_replicate_cpu_s": pc,
                       "extrapolated_wall_s": w1c + (B - 1) * pw, "extrapolated_cpu_s": c1c + (B - 1) * pc}
                corrected.append(row)
                print(f"(c) {est}: per replicate {pw:.3f} s wall / {pc:.3f} s CPU (fixed {w1c:.1f} s); "
                      f"{B} replicates extrapolated: {row['extrapolated_wall_s']:.0f} s wall, {row['extrapolated_cpu_s']:.0f} s CPU")
    load_end = os.getloadavg()
    print(f"load average at the end: {load_end}")

    results = {
        "corpus": f"imdb/{args.split}", "n_reviews": m, "n_positions": n, "vocab_size": V, "kept_tokens": kept,
        "reach_last_position": reach_last, "n_boot": B, "seed": args.seed, "threads": args.threads, "blas": blas,
        "load_s": t_load, "target_s": TARGET_S, "verdict": verdict,
        "posgeo": {"wall_s": wa, "cpu_s": ca, "fixed_wall_s": w1, "fixed_cpu_s": c1,
                   "per_replicate_wall_s": per_rep_wall, "per_replicate_cpu_s": per_rep_cpu,
                   "replicates_mib": bg.replicates.nbytes / 2**20,
                   "median_width": float(np.median(widths)), "median_distance": float(np.median(plug)),
                   "mean_replicate_minus_estimate": shift, "share_containing_estimate": contains},
        "naive": {"n_boot_timed": args.naive_boot, "per_replicate_wall_s": float(np.mean(naive_w)),
                  "per_replicate_cpu_s": float(np.mean(naive_c)), "estimate_wall_s": we, "estimate_cpu_s": ce,
                  "extrapolated_wall_s": nb_wall, "extrapolated_cpu_s": nb_cpu, "max_abs_difference": max(diffs)},
        "ratio_naive_over_posgeo_wall": ratio_wall, "ratio_naive_over_posgeo_cpu": ratio_cpu,
        "corrected": corrected,
        "cpu_count": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": load_end,
        "versions": {"posgeo": posgeo.__version__, "numpy": np.__version__, "python": platform.python_version()},
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
        print(f"wrote {args.json}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
