"""Run the benchmark scripts and render their results into the book (book/benchmarks.md).

Three commands::

    python benchmarks/report.py run [NAME ...]   # run bench_NAME.py --json, store the result
        [--script-args '--sizes 128']            # (with one NAME) extra arguments for the script
    python benchmarks/report.py render           # write book/benchmarks.md from the results
    python benchmarks/report.py --check          # exit 1 if book/benchmarks.md is stale

``run`` executes each script ``benchmarks/bench_NAME.py`` (all four by default: marginals,
mds, orderstats, rank) in a subprocess with ``--json`` and stores its JSON, wrapped with the
machine description, the date, the duration, the exit status and the exact command line,
as ``benchmarks/results/bench_NAME.json`` (one file per script; they are committed).
``render`` turns the stored results into the markdown page; it only reads the JSON files,
so the page is reproducible and ``--check`` (run by ``tests/test_book.py``) can tell when
the page no longer matches them. ``make benchmarks`` runs both.

``bench_marginals.py`` reads IMDB from ``POSGEO_DATA_DIR`` (a local copy of the corpora);
``run`` fails with a clear message when it is unset.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
PAGE = ROOT / "book" / "benchmarks.md"
BENCHMARKS = ("marginals", "mds", "orderstats", "rank")
# Environment variables that change what a benchmark measures: recorded with each run.
RECORDED_ENV = (
    "POSGEO_DATA_DIR",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TQDM_DISABLE",
    "PYTHONHASHSEED",
)
SHARED_NOTE = (
    "a machine that other jobs may share: compare the load averages with the number of CPUs "
    "(pass --note to say what else was running)"
)


# ---------------------------------------------------------------------------------- run
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("posgeo", "numpy", "scipy", "scikit-learn", "torch", "tokenizers", "threadpoolctl"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine_description(note: str) -> dict[str, Any]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": affinity,
        "memory_gib": _memory_gib(),
        "versions": _versions(),
        "note": note,
    }


def _display_path(path: str | Path) -> str:
    """A path relative to the repository root when it lies inside it."""
    p = Path(os.path.abspath(path))  # no resolve(): .venv/bin/python is a symlink out of the tree
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def run_one(name: str, *, python: str, extra: list[str], nice: int, note: str, results_dir: Path = RESULTS) -> dict[str, Any]:
    script = HERE / f"bench_{name}.py"
    if not script.is_file():
        raise SystemExit(f"{script} does not exist; benchmarks are {', '.join(BENCHMARKS)}")
    if name == "marginals" and not os.environ.get("POSGEO_DATA_DIR"):
        raise SystemExit(
            "bench_marginals.py reads IMDB from a local copy of the corpora: set POSGEO_DATA_DIR, "
            "e.g. `make benchmarks POSGEO_DATA_DIR=../shared/data`"
        )
    with tempfile.TemporaryDirectory(prefix="posgeo-bench-") as tmp:
        out = Path(tmp) / f"bench_{name}.json"
        argv = [python, _display_path(script), "--json", str(out), *extra]
        if nice:
            argv = ["nice", "-n", str(nice), *argv]
        env_shown = {k: os.environ[k] for k in RECORDED_ENV if k in os.environ}
        command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env_shown.items()), shlex.join(argv)])
        print(f"[report] running: {command}", flush=True)
        started = _dt.datetime.now(_dt.timezone.utc)
        load_start = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, check=False)
        duration = time.perf_counter() - t0
        load_end = os.getloadavg()
        if not out.is_file():
            raise SystemExit(f"{script.name} exited with status {proc.returncode} and wrote no JSON; see its output above")
        results = json.loads(out.read_text(encoding="utf-8"))
    machine = machine_description(note)
    machine["loadavg_start"] = [round(x, 2) for x in load_start]
    machine["loadavg_end"] = [round(x, 2) for x in load_end]
    record = {
        "benchmark": name,
        "script": _display_path(script),
        "command": command,
        "environment": env_shown,
        "date": started.replace(microsecond=0).isoformat(),
        "duration_s": round(duration, 1),
        "exit_status": proc.returncode,
        "machine": machine,
        "results": results,
    }
    results_dir.mkdir(parents=True, exist_ok=True)
    dest = results_dir / f"bench_{name}.json"
    dest.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    print(f"[report] {script.name}: exit {proc.returncode}, {duration:.0f} s -> {_display_path(dest)}", flush=True)
    return record


# ------------------------------------------------------------------------------- render
def load_results(results_dir: Path = RESULTS) -> dict[str, dict[str, Any]]:
    records = {}
    for name in BENCHMARKS:
        path = results_dir / f"bench_{name}.json"
        if not path.is_file():
            raise SystemExit(
                f"{_display_path(path)} is missing: run `make benchmarks` (or "
                f"`python benchmarks/report.py run {name}`) to produce it"
            )
        records[name] = json.loads(path.read_text(encoding="utf-8"))
    return records


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _ratio(x: float | None) -> str:
    """A speed ratio: 2 significant digits below 10, whole numbers above."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if x >= 100:
        return f"{x:,.0f}×"
    if x >= 10:
        return f"{x:.0f}×"
    return f"{x:.2g}×" if x >= 1 else f"{x:.2f}×"


def _sci(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.1e}"


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _provenance(rec: dict[str, Any]) -> str:
    m = rec["machine"]
    v = m["versions"]
    versions = ", ".join(f"{k} {v[k]}" for k in ("posgeo", "numpy", "scipy", "scikit-learn", "torch", "python") if k in v)
    status = "" if rec["exit_status"] == 0 else f" The script exited with status {rec['exit_status']}: its own check failed (see the reading above)."
    return (
        f"*Run {rec['date'].replace('T', ' ').replace('+00:00', ' UTC')}, {rec['duration_s']:.0f} s, "
        f"on {m['cpu']} ({m['cpus_available']} of {m['cpu_count']} CPUs available, "
        f"{m['memory_gib']} GiB; {m['platform']}); {versions}. "
        f"Load average {m['loadavg_start'][0]:.2f} at the start, {m['loadavg_end'][0]:.2f} at the end; "
        f"{m['note']}.{status} Command:*\n\n```bash\n{rec['command']}\n```"
    )


def _section_marginals(rec: dict[str, Any]) -> str:
    r = rec["results"]
    rows = [
        ["(a) `positional_marginals` (vectorised counting)", _num(r["a_counting_s"]), f"{r['a_counting_tokens_per_s']:,.0f}", "1×"],
        ["(b) pure-Python per-token loop (extrapolated)", _num(r["b_extrapolated_s"]), f"{r['b_tokens_per_s']:,.0f}",
         _ratio(r["b_extrapolated_s"] / r["a_counting_s"])],
        ["(c) end to end: read + tokenise + count", _num(r["c_end_to_end_s"]), f"{r['c_end_to_end_tokens_per_s']:,.0f}",
         _ratio(r["c_end_to_end_s"] / r["a_counting_s"])],
    ]
    speed = r["speedup_a_over_b"]
    verdict = "meets" if r["verdict"] == "PASS" else "does NOT meet"
    reading = (
        f"Counting the positional marginals of {r['corpus']} ({r['n_reviews']:,} reviews, "
        f"{r['counted_tokens']:,} word pieces at positions < {r['n_positions']}, V = {r['vocab_size']:,}) "
        f"with `posgeo.positional_marginals` is **{_ratio(speed)} faster** than the per-token Python loop "
        f"that fills the same table, which {verdict} the required {r['required_speedup']:g}×; on the loop "
        f"alone (without its fixed costs) the ratio is {_ratio(r['loop_only_rate_ratio'])}. The loop was "
        f"timed on {r['b_python_loop_reviews']:,} reviews ({r['b_python_loop_tokens']:,} tokens) and "
        f"extrapolated linearly, and its table was checked to equal posgeo's. Counting is not what a "
        f"reader waits for: end to end, **{100 * r['c_fraction_tokenising']:.0f}% of the time is "
        f"tokenising** (read {r['c_read_s']:.1f} s, tokenise {r['c_tokenise_s']:.1f} s, count "
        f"{r['c_count_s']:.2f} s)."
    )
    return "\n\n".join([
        "## Counting positional marginals (`bench_marginals.py`)",
        "Baseline: a naive pure-Python loop over every token. Ratio = baseline time / posgeo time "
        "(larger is better for posgeo).",
        _table(["stage", "seconds", "tokens / s", "time vs. (a)"], rows),
        reading,
        _provenance(rec),
    ])


def _speed_phrase(ratio: float, other: str) -> str:
    """``ratio`` = other's time / posgeo's time, as words: faster, slower, or about the same."""
    if ratio >= 1.1:
        return f"posgeo is {_ratio(ratio)} faster than {other}"
    if ratio <= 1 / 1.1:
        return f"**posgeo is SLOWER than {other}: {_ratio(1 / ratio)} its time**"
    return f"posgeo and {other} take about the same time (within 10%)"


def _mds_pick(res: dict[str, Any], n: int, metric: str, prefix: str) -> dict[str, Any] | None:
    return next((r for r in res["mds"] if r["n"] == n and r["metric"] == metric and r["method"].startswith(prefix)), None)


def _section_mds(rec: dict[str, Any]) -> str:
    res = rec["results"]
    s = res["settings"]
    parts = [
        "## Classical and stress-optimal MDS (`bench_mds.py`)",
        f"Baseline: scikit-learn {s['versions']['sklearn']} (`ClassicalMDS`, and `MDS` = SMACOF) on the "
        f"same distance matrix D (Hellinger distances of plug-in marginals of a synthetic corpus, "
        f"V = {s['vocab']}, {s['samples_per_position']} draws per position), embedding dimension "
        f"k = {s['k']}, BLAS limited to {s['threads']} thread(s). Every embedding is scored with "
        f"`posgeo.stress` (normalised raw stress). **Ratio = scikit-learn time / posgeo time** of the same "
        f"kind (classical or SMACOF): above 1× posgeo is faster, **below 1× posgeo is slower**; it is "
        f"given for wall-clock time (what the script prints) and for process CPU time, which the other "
        f"jobs of a shared machine inflate much less: the reading below uses CPU time. "
        f"The two SMACOF implementations stop by different rules (posgeo: `{s['stopping']['posgeo']}`; "
        f"scikit-learn: `{s['stopping']['sklearn']}`), so the iteration counts can differ; the row "
        f"`posgeo SMACOF (max_iter=m, tol=0)` runs exactly scikit-learn's number of iterations m from "
        f"the same classical start.",
    ]
    rows = []
    for r in res["mds"]:
        ref = _mds_pick(res, r["n"], r["metric"], "posgeo classical" if r["kind"] == "classical" else "posgeo SMACOF")
        cpu_ratio = r["cpu_s"] / ref["cpu_s"] if r["method"].startswith("sklearn") and ref and ref["cpu_s"] > 0 else None
        rows.append([
            str(r["n"]), r["metric"], r["method"], _num(r["wall_s"]), _num(r["cpu_s"]), _num(r["stress"], 6),
            "–" if r["n_iter"] is None else str(r["n_iter"]),
            _ratio(r["ratio_sklearn_over_posgeo"]), _ratio(cpu_ratio),
        ])
    parts.append(_table(["n", "metric", "method", "wall s", "CPU s", "stress", "iterations",
                         "ratio (wall)", "ratio (CPU)"], rows, "rllrrrrrr"))

    # The reading is computed from the numbers, so that it stays true when the results change.
    items = []
    for n in sorted({r["n"] for r in res["mds"]}):
        for metric in ("chord", "fisher-rao"):
            pc, sc = _mds_pick(res, n, metric, "posgeo classical"), _mds_pick(res, n, metric, "sklearn classical")
            ps, ss = _mds_pick(res, n, metric, "posgeo SMACOF"), _mds_pick(res, n, metric, "sklearn SMACOF (classical start)")
            pm = _mds_pick(res, n, metric, "posgeo SMACOF (max_iter")
            if not (pc and sc and ps and ss):
                continue
            text = (
                f"- n = {n}, {metric}: classical MDS, {_speed_phrase(sc['cpu_s'] / pc['cpu_s'], 'scikit-learn')}, "
                f"same stress ({pc['stress']:.6f}); SMACOF to convergence, "
                f"{_speed_phrase(ss['cpu_s'] / ps['cpu_s'], 'scikit-learn')} (posgeo {ps['n_iter']} iterations "
                f"to stress {ps['stress']:.6f}, scikit-learn {ss['n_iter']} to {ss['stress']:.6f})"
            )
            if pm and pm["cpu_s"] > 0:
                text += (f"; for the same {pm['n_iter']} iterations, "
                         f"{_speed_phrase(ss['cpu_s'] / pm['cpu_s'], 'scikit-learn')}")
            items.append(text + ".")
    if items:
        parts.append("**Reading** (CPU time):\n\n" + "\n".join(items))
    smacof = [(_mds_pick(res, n, m, "sklearn SMACOF (classical start)"), _mds_pick(res, n, m, "posgeo SMACOF"))
              for n in sorted({r["n"] for r in res["mds"]}) for m in ("chord", "fisher-rao")]
    smacof = [ss["cpu_s"] / ps["cpu_s"] for ss, ps in smacof if ss and ps and ps["cpu_s"] > 0]
    if smacof and max(smacof) < 1:
        verdict = (f"posgeo's SMACOF is SLOWER than scikit-learn's in every case measured "
                   f"(scikit-learn needs {_ratio(min(smacof))} to {_ratio(max(smacof))} of posgeo's CPU time); ")
    elif smacof and min(smacof) < 1:
        verdict = "posgeo's SMACOF is slower than scikit-learn's in some of the cases measured; "
    else:
        verdict = ""
    nmin = min(r["n"] for r in res["mds"])
    small_cpu = max(r["cpu_s"] for r in res["mds"] if r["n"] == nmin)
    randoms = [(r, _mds_pick(res, r["n"], r["metric"], "sklearn SMACOF (classical start)"))
               for r in res["mds"] if r["method"].startswith("sklearn SMACOF (random")]
    randoms = [(r, c) for r, c in randoms if c]
    tail = ""
    if randoms and all(r["stress"] >= c["stress"] and (r["n_iter"] or 0) > (c["n_iter"] or 0) for r, c in randoms):
        tail = (" scikit-learn's default random start needs more iterations and ends at a higher stress "
                "than the classical start in every case.")
    parts.append(
        verdict + "posgeo's MDS is written to be read and checked, not to be fast: `classical_mds` "
        "keeps every eigenvalue of B (the negative eigenvalue mass is one of its results), and "
        "`stress_optimal_mds` runs SMACOF in plain numpy. From the same classical start both reach "
        f"the same stress. At n = {nmin} every method takes {small_cpu:.2f} CPU seconds or less." + tail
    )

    eig_rows = []
    full = {r["n"]: r for r in res["eigen"] if r["method"].startswith("numpy.linalg.eigh")}
    for r in res["eigen"]:
        ref = full.get(r["n"])
        cpu_ratio = ref["cpu_s"] / r["cpu_s"] if ref and r["cpu_s"] > 0 else None
        eig_rows.append([
            str(r["n"]), r["method"], _num(r["wall_s"]), _num(r["cpu_s"]), _ratio(r["speedup_vs_full_eigh"]),
            _ratio(cpu_ratio), _sci(r["max_rel_err_topk"]), _num(r["stress"], 6),
        ])
    parts += [
        "### Eigensolvers for classical MDS",
        f"Baseline: the full `numpy.linalg.eigh` of the double-centred Gram matrix B. **Ratio = full eigh "
        f"time / method time** (above 1× faster than the full decomposition), wall and CPU. Relative "
        f"error of the top k = {s['k']} eigenvalues against the full decomposition, and the stress of the "
        f"resulting embedding.",
        _table(["n", "method", "wall s", "CPU s", "ratio (wall)", "ratio (CPU)",
                "top-k rel. error", "stress"], eig_rows, "llrrrrrr"),
    ]
    items = []
    for n, ref in sorted(full.items()):
        sub = [r for r in res["eigen"] if r["n"] == n]
        partial = [r for r in sub if r["method"].startswith(("scipy.linalg.eigh subset", "scipy.sparse"))]
        if partial:
            best = max(partial, key=lambda r: ref["cpu_s"] / r["cpu_s"] if r["cpu_s"] > 0 else 0)
            text = (f"- n = {n}: the fastest partial solver, {best['method']}, takes {_ratio(ref['cpu_s'] / best['cpu_s'])} "
                    f"less CPU time than the full eigh, with a top-k eigenvalue error of {_sci(best['max_rel_err_topk'])}")
            pg = next((r for r in sub if r["method"].startswith("posgeo.classical_mds")), None)
            sk = next((r for r in sub if r["method"].startswith("sklearn ClassicalMDS")), None)
            if pg and sk and pg["cpu_s"] > 0:
                text += f"; end to end, {_speed_phrase(sk['cpu_s'] / pg['cpu_s'], 'scikit-learn ClassicalMDS')}"
            items.append(text + ".")
    if items:
        parts.append("**Reading** (CPU time):\n\n" + "\n".join(items))
    parts.append(_provenance(rec))
    return "\n\n".join(p for p in parts if p)


def _section_orderstats(rec: dict[str, Any]) -> str:
    rows = []
    for r in rec["results"]:
        note = (f"naive timed on {r['naive_anchors']} of {r['n']} anchors, extrapolated"
                if r["naive_estimated"] else "naive timed in full")
        rows.append([
            r["score"], str(r["n"]), _num(r["fast_s"]), _num(r["naive_s"]), _ratio(r["speedup"]),
            "yes" if r["counts_identical"] else "**NO**", f"{r['rate']:.3f}", note,
        ])
    speeds = [r["speedup"] for r in rec["results"]]
    identical = all(r["counts_identical"] for r in rec["results"])
    reading = (
        f"The merge-sort implementations are {_ratio(min(speeds))} to {_ratio(max(speeds))} faster than the "
        f"literal definitions, and the speed-up grows with n (the naive count is cubic in n, the fast one "
        f"O(n² log n)). "
        + ("Both give identical counts on every input (ties included)." if identical
           else "**On some inputs the two implementations disagree: see the table.**")
    )
    return "\n\n".join([
        "## Order-statistics scores (`bench_orderstats.py`)",
        "Scores: the monotonicity violation rate (P1, Conjecture 5) and the adjacency probability "
        "score (P2). Baseline: the naive loops that implement the literal definition "
        "(`method=\"naive\"`). Times are process CPU seconds, which other jobs on a shared machine do "
        "not inflate. **Ratio = naive time / fast time.**",
        _table(["score", "n", "fast CPU s", "naive CPU s", "naive / fast", "same counts", "value", "note"], rows,
               "lrrrrlrl"),
        reading,
        _provenance(rec),
    ])


def _section_rank(rec: dict[str, Any]) -> str:
    res = rec["results"]
    rows = []
    for r in res["rows"]:
        rows.append([
            r["matrix"], str(r["n"]), r["method"], _num(r["wall_s"]), _num(r["cpu_s"]), _ratio(r["speedup_vs_full"]),
            _ratio(r["cpu_speedup_vs_full"]), _sci(r["max_rel_eigenvalue_error"]), f"{r['min_principal_cosine']:.6f}",
            _sci(r["max_stress_difference"]),
        ])
    k = res["rows"][0]["k"] if res["rows"] else "?"
    items = []
    for kind in dict.fromkeys(r["matrix"] for r in res["rows"]):
        sub = [r for r in res["rows"] if r["matrix"] == kind]
        nmax, nmin = max(r["n"] for r in sub), min(r["n"] for r in sub)
        at = {r["method"]: r for r in sub if r["n"] == nmax}
        small = {r["method"]: r for r in sub if r["n"] == nmin}
        text = (f"- {kind} matrix, n = {nmax}: `subset` takes {_ratio(at['subset']['cpu_speedup_vs_full'])} and "
                f"`arpack` {_ratio(at['arpack']['cpu_speedup_vs_full'])} less CPU time than `full`")
        slower = [m for m in ("subset", "arpack") if small[m]["cpu_speedup_vs_full"] < 1 / 1.1]
        if slower:
            text += "; at n = {}, {}".format(nmin, " and ".join(
                f"`{m}` is SLOWER ({_ratio(1 / small[m]['cpu_speedup_vs_full'])} the time of `full`)" for m in slower))
        items.append(text + ".")
    worst_cos = min(r["min_principal_cosine"] for r in res["rows"])
    worst_err = max(r["max_rel_eigenvalue_error"] for r in res["rows"])
    worst_stress = max(r["max_stress_difference"] for r in res["rows"])
    closing = (
        f"Over every matrix and size the partial solvers agree with the full decomposition: relative "
        f"eigenvalue error at most {_sci(worst_err)}, smallest principal cosine {worst_cos:.6f}, stress "
        f"difference at most {_sci(worst_stress)}."
    )
    gains = {}
    for r in res["rows"]:
        if r["method"] == "arpack" and r["n"] == max(x["n"] for x in res["rows"] if x["matrix"] == r["matrix"]):
            gains[r["matrix"]] = r["cpu_speedup_vs_full"]
    if gains.get("structured") and gains.get("noisy"):
        more, less = ("structured", "noisy") if gains["structured"] > gains["noisy"] else ("noisy", "structured")
        closing += (f" Lanczos (`arpack`) gains more on the {more} matrix ({_ratio(gains[more])}) than on the "
                    f"{less} one ({_ratio(gains[less])}): it converges fastest when the wanted eigenvalues "
                    "stand out from the rest of the spectrum.")
    return "\n\n".join([
        "## Effective rank: partial versus full eigendecomposition (`bench_rank.py`)",
        f"`posgeo.top_eigenpairs(B, k={k}, method=...)` on the double-centred Gram matrix of a structured "
        "(a few dominant directions) and a noisy (flat spectrum) distance matrix. Baseline: `full` "
        "(`numpy.linalg.eigh`). **Ratio = full time / method time**, wall-clock and CPU (best of "
        f"{_repeat_text(rec)}, BLAS limited to {res['meta']['threads']} thread(s)). Agreement with `full`: "
        "largest relative eigenvalue error, smallest principal cosine between the eigenspaces, and largest "
        f"stress difference of the rank-r encodings (r in {tuple(res['meta']['ranks_checked'])}).",
        _table(["matrix", "n", "method", "wall s", "CPU s", "ratio (wall)", "ratio (CPU)",
                "eig. error", "min cosine", "stress diff."], rows, "lrlrrrrrrr"),
        "**Reading** (CPU time):\n\n" + "\n".join(items),
        closing,
        _provenance(rec),
    ])


def _repeat_text(rec: dict[str, Any]) -> str:
    m = re.search(r"--repeat\s+(\d+)", rec["command"])
    return f"{m.group(1)} runs" if m else "2 runs (the script's default)"


def _summary(records: dict[str, dict[str, Any]]) -> str:
    """One row per comparison, at the largest size measured."""
    rows = []
    m = records["marginals"]["results"]
    rows.append(["counting positional marginals (IMDB train)", "pure-Python loop", "wall",
                 _ratio(m["speedup_a_over_b"]), f"{m['verdict']} (≥ {m['required_speedup']:g}× required)"])
    for score in ("monotonicity", "adjacency"):
        sub = [r for r in records["orderstats"]["results"] if r["score"] == score]
        if sub:
            r = max(sub, key=lambda r: r["n"])
            rows.append([f"{score} score, n = {r['n']}", "naive literal loops", "CPU", _ratio(r["speedup"]),
                         "same counts" if r["counts_identical"] else "**counts differ**"])
    res = records["mds"]["results"]
    nmax = max(r["n"] for r in res["mds"])
    for metric in ("chord", "fisher-rao"):
        for kind, pg_prefix, sk_prefix in (("classical MDS", "posgeo classical", "sklearn classical"),
                                           ("SMACOF", "posgeo SMACOF", "sklearn SMACOF (classical start)")):
            pg, sk = _mds_pick(res, nmax, metric, pg_prefix), _mds_pick(res, nmax, metric, sk_prefix)
            if pg and sk and pg["cpu_s"] > 0:
                ratio = sk["cpu_s"] / pg["cpu_s"]
                rows.append([f"{kind}, n = {nmax}, {metric}", "scikit-learn", "CPU", _ratio(ratio),
                             "posgeo faster" if ratio >= 1.1 else "**posgeo slower**" if ratio <= 1 / 1.1 else "about the same"])
    rk = records["rank"]["results"]["rows"]
    for kind in dict.fromkeys(r["matrix"] for r in rk):
        sub = [r for r in rk if r["matrix"] == kind and r["method"] == "arpack"]
        r = max(sub, key=lambda r: r["n"])
        rows.append([f"top-{r['k']} eigenpairs (`arpack`), {kind}, n = {r['n']}", "full `numpy.linalg.eigh`", "CPU",
                     _ratio(r["cpu_speedup_vs_full"]), f"eigenvalue error {_sci(r['max_rel_eigenvalue_error'])}"])
    return "\n\n".join([
        "## At a glance",
        "Ratio = baseline time / posgeo time: above 1× posgeo is faster, below 1× it is slower.",
        _table(["what", "baseline", "time", "ratio", "note"], rows, "lllrl"),
    ])


def render(records: dict[str, dict[str, Any]]) -> str:
    head = [
        "# Benchmarks",
        "<!-- Generated by benchmarks/report.py from benchmarks/results/*.json: do not edit by hand. "
        "Regenerate with `make benchmarks` (runs the scripts) or `python benchmarks/report.py render`. -->",
        "How fast is `posgeo` against the obvious alternatives? Four scripts in `benchmarks/` time it "
        "against a baseline on the same input and check that both compute the same thing: naive "
        "loops (counting marginals, order-statistics scores), scikit-learn (classical and "
        "stress-optimal MDS) and the full eigendecomposition (effective rank). Every table below is "
        "rendered from the JSON that the scripts wrote (`benchmarks/results/`), with the machine, the "
        "date and the exact command of each run.",
        ":::{note}\nThese numbers come from a 2-core machine that other jobs may share (the load "
        "averages and a note on what else was running are given with each run), so wall-clock times "
        "are noisy and ratios of a few tens of percent should not be over-read. Process CPU time is much less "
        "affected: the readings use it wherever a script records it (all but the marginals "
        "benchmark, which times wall-clock only). Rerun them on your own machine with `make benchmarks "
        "POSGEO_DATA_DIR=/path/to/data`.\n:::",
    ]
    sections = [
        _summary(records),
        _section_marginals(records["marginals"]),
        _section_mds(records["mds"]),
        _section_orderstats(records["orderstats"]),
        _section_rank(records["rank"]),
    ]
    return "\n\n".join(head + sections) + "\n"


# --------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page does not match the stored results")
    parser.add_argument("--results", type=Path, default=RESULTS, help="directory of the result JSON files")
    parser.add_argument("--page", type=Path, default=PAGE, help="the markdown page to write or check")
    sub = parser.add_subparsers(dest="command")
    p_run = sub.add_parser("run", help="run benchmark scripts and store their results")
    p_run.add_argument("names", nargs="*", help=f"benchmarks to run (default all: {' '.join(BENCHMARKS)})")
    p_run.add_argument("--python", default=sys.executable, help="interpreter for the scripts")
    p_run.add_argument("--nice", type=int, default=10, help="niceness of the benchmark processes (0: no nice)")
    p_run.add_argument("--note", default=SHARED_NOTE, help="a note on the machine, shown on the page")
    p_run.add_argument("--render", action="store_true", help="render the page afterwards")
    p_run.add_argument("--script-args", default="", metavar="ARGS",
                       help="extra arguments for the script, one string, e.g. --script-args='--sizes 128' (one name only)")
    sub.add_parser("render", help="write the page from the stored results")
    args = parser.parse_args(argv)

    if args.command == "run":
        python = _display_path(args.python) if Path(args.python).is_absolute() else args.python
        names = args.names or list(BENCHMARKS)
        unknown = [n for n in names if n not in BENCHMARKS]
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}")
        extra = shlex.split(args.script_args)
        if extra and len(names) != 1:
            parser.error(f"extra script arguments {extra} need exactly one benchmark name")
        failed = []
        for name in names:
            rec = run_one(name, python=python, extra=extra, nice=args.nice, note=args.note, results_dir=args.results)
            if rec["exit_status"] != 0:
                failed.append(name)
        if args.render:
            args.page.write_text(render(load_results(args.results)), encoding="utf-8")
            print(f"[report] wrote {_display_path(args.page)}")
        if failed:
            print(f"[report] scripts that exited non-zero (results kept): {', '.join(failed)}", file=sys.stderr)
        return 0
    text = render(load_results(args.results))
    if args.check:
        current = args.page.read_text(encoding="utf-8") if args.page.is_file() else ""
        if current != text:
            print(
                f"{_display_path(args.page)} is stale: it does not match {_display_path(args.results)}/*.json; "
                "run `python benchmarks/report.py render` (or `make benchmarks` to rerun the scripts)",
                file=sys.stderr,
            )
            return 1
        print(f"{_display_path(args.page)} is up to date")
        return 0
    if args.command in (None, "render"):
        args.page.write_text(text, encoding="utf-8")
        print(f"[report] wrote {_display_path(args.page)}")
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
