"""Benchmark effective rank and rank-r PMDS: partial versus full eigendecomposition.

For n = 256 ... 4096 positions, a distance matrix with a few dominant directions plus
noise (like a real corpus: a slow drift, a ring, and per-position noise) is double-centred
and its top-k eigenpairs are computed, in the same process on the same matrix, by

* ``full``: :func:`numpy.linalg.eigh` of the whole matrix (what ``classical_mds`` does);
* ``subset``: :func:`scipy.linalg.eigh` with ``subset_by_index`` (LAPACK ``syevr``);
* ``arpack``: :func:`scipy.sparse.linalg.eigsh` (Lanczos).

through :func:`posgeo.top_eigenpairs`. For each method the table reports the time, the
ratio to ``full``, and the agreement with ``full``: the largest relative eigenvalue error,
the smallest principal cosine between the eigenspaces, and the largest difference in the
stress of the rank-r classical-MDS encodings built from them. The effective rank
(share of trace in the top r) is computed from the partial eigenvalues and ``trace(B)``.

Times are wall-clock seconds (best of ``--repeat``) with the BLAS limited to ``--threads``
threads (threadpoolctl): on a shared machine multi-threaded BLAS can stall badly, so the
default is 1 thread. Process CPU time is reported too.

Usage::

    .venv/bin/python benchmarks/bench_rank.py [--sizes 256 512 1024 2048 4096] [--k 16]
        [--threads 1] [--repeat 2] [--matrices structured noisy] [--json out.json]
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

from threadpoolctl import threadpool_limits  # noqa: E402

from posgeo import (
    double_centered_gram,
    pairwise_distances,
    stress,
    top_eigenpairs  # noqa: E402,
)


def test_matrix(n: int, kind: str = "structured", seed: int = 0) -> np.ndarray:
    """Distances of n points.

    ``structured``: a drift, a ring of period n/4 and small per-point noise in 29 more
    dimensions (a few dominant eigenvalues, then a cluster). ``noisy``: the same signal
    under strong noise in 256 dimensions, a flat spectrum like the plug-in geometry of a
    real corpus (harder for Lanczos: the wanted eigenvalues are barely separated).
    """
    rng = np.random.default_rng(seed)
    t = np.arange(n) / n
    signal = np.stack([2.0 * t, 0.5 * np.cos(8 * np.pi * t), 0.5 * np.sin(8 * np.pi * t)], axis=1)
    if kind == "structured":
        noise = 0.05 * rng.normal(size=(n, 29))
    elif kind == "noisy":
        noise = 0.3 * rng.normal(size=(n, 256))
    else:
        raise ValueError(f"unknown matrix kind {kind!r}; use 'structured' or 'noisy'")
    return pairwise_distances(np.concatenate([signal, noise], axis=1))


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    best_wall, best_cpu, out = np.inf, np.inf, None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - w0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best_wall, best_cpu, out


def bench_size(n: int, k: int, ranks: tuple[int, ...], repeat: int, kind: str) -> list[dict[str, Any]]:
    D = test_matrix(n, kind)
    B = double_centered_gram(D)
    trace = float(np.trace(B))
    results: dict[str, tuple[float, float, tuple[np.ndarray, np.ndarray]]] = {}
    for method in ("full", "subset", "arpack"):
        results[method] = _time(lambda m=method: top_eigenpairs(B, k, method=m), repeat)
    lam_ref, V_ref = results["full"][2]
    full_wall = results["full"][0]
    stress_ref = {r: stress(V_ref[:, :r] * np.sqrt(np.clip(lam_ref[:r], 0, None)), D) for r in ranks}
    rows = []
    for method, (wall, cpu, (lam, V)) in results.items():
        cosines = np.linalg.svd(V_ref.T @ V, compute_uv=False)
        stress_diff = max(
            abs(stress(V[:, :r] * np.sqrt(np.clip(lam[:r], 0, None)), D) - stress_ref[r]) for r in ranks
        )
        energy = np.cumsum(np.clip(lam, 0, None)) / trace
        rows.append(
            {
                "matrix": kind,
                "n": n,
                "k": k,
                "method": method,
                "wall_s": wall,
                "cpu_s": cpu,
                "speedup_vs_full": full_wall / wall,
                "cpu_speedup_vs_full": results["full"][1] / cpu if cpu > 0 else float("nan"),
                "max_rel_eigenvalue_error": float(np.max(np.abs(lam - lam_ref) / np.abs(lam_ref).max())),
                "min_principal_cosine": float(cosines.min()),
                "max_stress_difference": float(stress_diff),
                "energy_top3": float(energy[2]),
                "rank_90": int(np.searchsorted(energy, 0.9) + 1) if energy[-1] >= 0.9 else None,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--k", type=int, default=16, help="eigenpairs computed (the largest rank of interest)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--matrices", nargs="+", default=["structured", "noisy"], choices=["structured", "noisy"])
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args()
    ranks = tuple(r for r in (1, 2, 3, 8, 16) if r <= args.k)
    rows: list[dict[str, Any]] = []
    warm = double_centered_gram(test_matrix(64))
    for method in ("full", "subset", "arpack"):  # imports and first-call overheads out of the timings
        top_eigenpairs(warm, 4, method=method)
    with threadpool_limits(limits=args.threads):
        for kind in args.matrices:
            for n in args.sizes:
                rows.extend(bench_size(n, args.k, ranks, args.repeat, kind))
                for row in rows[-3:]:
                    print(
                        f"{kind:10s} n={row['n']:5d} {row['method']:7s} wall {row['wall_s']:8.3f}s cpu {row['cpu_s']:8.3f}s "
                        f"speedup {row['speedup_vs_full']:6.2f} (cpu {row['cpu_speedup_vs_full']:6.2f})  eig err {row['max_rel_eigenvalue_error']:.1e}  "
                        f"min cos {row['min_principal_cosine']:.12f}  stress diff {row['max_stress_difference']:.1e}",
                        flush=True,
                    )
    meta = {"machine": platform.platform(), "processor": platform.processor(), "threads": args.threads,
            "numpy": np.__version__, "ranks_checked": ranks}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
