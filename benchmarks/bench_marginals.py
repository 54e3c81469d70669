"""Benchmark: counting positional marginals on IMDB train (25,000 reviews, n_positions=512).

Reports tokens/second for

(a) counting alone with :func:`posgeo.positional_marginals` on the tokenised corpus;
(b) a per-token pure-Python loop baseline on the same data, producing the same table: the
    loop runs on a subset of the reviews (``--baseline-reviews``) and its time is extrapolated
    linearly to all counted tokens (it starts from the same ``Sequences``, so turning each
    sequence's first 512 ids into a Python list is part of it); its per-corpus fixed costs (allocating the count list,
    normalising it into the float64 table with numpy) are timed once at full size and added.
    The ratio (a)/(b) must be >= 20 (PASS/FAIL); the loop-only rate is reported too.
    (a) and (b) are best-of ``--repeats`` runs;
(c) end to end: reading the parquet file, tokenising (bert-base-uncased WordPiece, no cache)
    and counting, with the fraction of end-to-end time spent tokenising.

Rates count the tokens that land in the (512, V) table (the first 512 of each review).

Usage::

    POSGEO_DATA_DIR=/work/shared/data python benchmarks/bench_marginals.py [--json out.json]
    python benchmarks/bench_marginals.py --data-dir /work/shared/data --baseline-reviews 2000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import posgeo
from posgeo import (
    Sequences,
    load_texts,
    positional_marginals,
    tokenize,
)
from posgeo._corpus import DATA_ENV_VAR

REQUIRED_SPEEDUP = 20.0


def python_loop_counts(seqs: Sequences, n: int, V: int, counts: list[int], reach: list[int]) -> None:
    """Per-token pure-Python counting into preallocated flat lists: the baseline's inner loop.

    It starts from the same ``Sequences`` as (a), so each sequence's first ``n`` ids are
    turned into a Python list (``.tolist()``, a C-speed conversion) before the loop.
    """
    for s in seqs:
        for i, t in enumerate(s[:n].tolist()):
            counts[i * V + t] += 1
            reach[i] += 1


def python_baseline_fixed_costs(n: int, V: int, repeats: int) -> tuple[float, float]:
    """Per-corpus costs of the baseline that do not grow with the tokens: allocating the
    count list, and turning it into the normalised (n, V) float64 table (done with numpy)."""
    t_alloc = best_of(lambda: [0] * (n * V), repeats)
    counts, reach = [0] * (n * V), np.arange(1, n + 1)
    t_norm = best_of(lambda: np.asarray(counts, dtype=np.float64).reshape(n, V) / reach[:, None], repeats)
    return t_alloc, t_norm


def counted_tokens(seqs: Sequences, n: int) -> int:
    return int(np.minimum(seqs.lengths, n).sum())


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get(DATA_ENV_VAR), help=f"data directory (default ${DATA_ENV_VAR})")
    parser.add_argument("--split", default="train")
    parser.add_argument("--n-positions", type=int, default=512)
    parser.add_argument("--baseline-reviews", type=int, default=2000, help="reviews the Python loop runs on")
    parser.add_argument("--repeats", type=int, default=5, help="best-of repeats for (a) and (b)")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this path")
    args = parser.parse_args(argv)
    if not args.data_dir:
        parser.error(f"pass --data-dir or set {DATA_ENV_VAR} (a directory with imdb/{{train,test}}.parquet)")
    os.environ.setdefault("TQDM_DISABLE", "1")
    n = args.n_positions

    # (c) end to end, timed stage by stage: read, tokenise, count.
    t0 = time.perf_counter()
    df = load_texts("imdb", args.split, data_dir=args.data_dir)
    t_read = time.perf_counter() - t0
    tok = posgeo.default_tokenizer()  # loading the tokenizer is not part of the per-corpus cost
    t0 = time.perf_counter()
    seqs = tokenize(df["text"], tokenizer=tok, progress=False)
    t_tok = time.perf_counter() - t0
    V = seqs.vocab_size
    t0 = time.perf_counter()
    mu = positional_marginals(seqs, n, V)
    t_count_first = time.perf_counter() - t0
    t_e2e = t_read + t_tok + t_count_first
    n_counted = counted_tokens(seqs, n)

    # (a) counting alone (best of repeats).
    t_count = best_of(lambda: positional_marginals(seqs, n, V), args.repeats)

    # (b) pure-Python per-token loop on a subset; extrapolate its per-token time to the whole
    # corpus and add the baseline's fixed costs (allocation, normalisation) once.
    k = min(args.baseline_reviews, len(seqs))
    sub = seqs.subset(np.arange(k))
    n_loop = counted_tokens(sub, n)
    loop_times = []
    for _ in range(args.repeats):
        counts, reach = [0] * (n * V), [0] * n
        t0 = time.perf_counter()
        python_loop_counts(sub, n, V, counts, reach)
        loop_times.append(time.perf_counter() - t0)
    t_loop = min(loop_times)
    table = np.asarray(counts, dtype=np.float64).reshape(n, V)
    reach_arr = np.asarray(reach)
    check = positional_marginals(sub, n, V)
    ok = np.array_equal(check[reach_arr > 0], table[reach_arr > 0] / reach_arr[reach_arr > 0, None])
    if not ok:  # pragma: no cover
        print("baseline and vectorised marginals disagree", file=sys.stderr)
        return 2
    del counts, table
    t_alloc, t_norm = python_baseline_fixed_costs(n, V, args.repeats)
    t_baseline = t_loop * n_counted / n_loop + t_alloc + t_norm

    rate_a = n_counted / t_count
    rate_b = n_counted / t_baseline
    rate_loop = n_loop / t_loop
    rate_c = n_counted / t_e2e
    speedup = t_baseline / t_count
    verdict = "PASS" if speedup >= REQUIRED_SPEEDUP else "FAIL"
    results = {
        "corpus": f"imdb/{args.split}",
        "n_reviews": len(seqs),
        "n_positions": n,
        "vocab_size": V,
        "total_tokens": int(seqs.tokens.size),
        "counted_tokens": n_counted,
        "a_counting_s": t_count,
        "a_counting_tokens_per_s": rate_a,
        "b_python_loop_reviews": k,
        "b_python_loop_tokens": n_loop,
        "b_python_loop_s": t_loop,
        "b_python_loop_only_tokens_per_s": rate_loop,
        "b_fixed_alloc_s": t_alloc,
        "b_fixed_normalise_s": t_norm,
        "b_extrapolated_s": t_baseline,
        "b_tokens_per_s": rate_b,
        "loop_only_rate_ratio": rate_a / rate_loop,
        "speedup_a_over_b": speedup,
        "required_speedup": REQUIRED_SPEEDUP,
        "verdict": verdict,
        "c_read_s": t_read,
        "c_tokenise_s": t_tok,
        "c_count_s": t_count_first,
        "c_end_to_end_s": t_e2e,
        "c_end_to_end_tokens_per_s": rate_c,
        "c_fraction_tokenising": t_tok / t_e2e,
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "posgeo": posgeo.__version__,
    }
    del mu

    rows = [
        ("(a) counting, positional_marginals", t_count, rate_a, "measured on all reviews"),
        ("(b) pure-Python per-token loop", t_baseline, rate_b,
         f"loop timed on {k} reviews ({t_loop:.2f} s, {rate_loop:,.0f} tok/s), extrapolated, "
         f"+ alloc {t_alloc:.2f} s + normalise {t_norm:.2f} s"),
        ("(c) end to end (read+tokenise+count)", t_e2e, rate_c, f"tokenising {100 * t_tok / t_e2e:.1f}% of it"),
    ]
    print(f"IMDB {args.split}: {len(seqs)} reviews, {seqs.tokens.size:,} word pieces, "
          f"{n_counted:,} at positions < {n}, V = {V}; best of {args.repeats} for (a), (b)")
    print(f"{'stage':<38} {'seconds':>8} {'tokens/s':>13}  note")
    for name, secs, rate, note in rows:
        print(f"{name:<38} {secs:>8.3f} {rate:>13,.0f}  {note}")
    print(f"speed-up (a)/(b) = {speedup:,.0f}x (required >= {REQUIRED_SPEEDUP:g}x): {verdict}")
    print(f"end to end: read {t_read:.2f} s, tokenise {t_tok:.2f} s, count {t_count_first:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
