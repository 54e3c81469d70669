"""Train a chapter's cached runs in reverse order into the result cache, beside nbval.

    python tools/arm64_prefill.py [--list] GROUP [GROUP ...]

Emulated arm64 (``tools/arm64_check.sh``) is about 30 times slower than the host, and nbval runs
a chapter on one core. This script is the second process the check starts with
``PREFILL=GROUP[,GROUP]``: it trains the same runs as the chapter's cells, through the same
recipes, but from the last run backwards, into the same result cache (``$POSGEO_CACHE_DIR``;
the cache's writes are atomic). When the two meet, nbval finds this script's runs in the cache and
loads them and the script stops (below), so both cores train and nothing is trained twice except
possibly the run they meet on. nbval's verdicts do not depend on it: the cache holds the same runs either way.

Groups (the runs of some cells, in the order nbval trains them; this script reverses it):

- ``nope-seeds``: chapter 10's cells 6 and 7: the four tasks' seed-0 runs, then the seeds of
  ``settings.seed_tasks``.
- ``nope-ablation``: chapter 10's cells 24 and 26: the one-layer reversal model, then the init
  ablation's trained grid points, ``(std, seed)`` in order.
- ``nope-sweep``: chapter 10's cell 33: the trained depth/width sweep, ``(layers, width, seed)``.
- ``constructive-small``: chapter 12's cell 6: the profile's constructive runs.
- ``separation-plain``, ``separation-probe``, ``separation-seeds``, ``separation-finetune``:
  chapter 5's cells 6, 9, 12 and 17 (the experiments those cells name, seed 0 without and with
  the position weight decay, the contrasted runs over the profile's seeds, and the fine-tuning
  of the pretrained table).
- ``ntk-scratch``, ``ntk-comparison``, ``ntk-widths``: chapter 8's cells 4 and 8 (the tables
  trained from scratch), 16 and 17 (frozen against full training over seeds) and 21 (the width
  sweep at both learning-rate scalings).

The chapters' names are repeated here (the runs of chapter 5's cells 6 and 12); a group that no
longer matches its cells only wastes the second core: nbval trains whatever the cache lacks.

It stops at the first run it finds in the cache after training one itself: nbval trains its runs
in order, so that run and every earlier one are there (a cache left by an earlier check can hold
runs from the end of the list: those are loaded and passed over until the script has trained a
run; one left in the middle of the list stops it early, which costs only speed: nbval trains
whatever the cache lacks). A run nbval stores while this script loads one can hide the meeting
point; the script then loads the next run and stops there.

``--list`` prints the runs in the order they would be trained and trains nothing (fast, any
machine). Each trained run prints its label and seconds.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable, Iterator

Job = tuple[str, Callable[[], object]]


def _nope_seeds() -> Iterator[Job]:
    from posgeo.experiments import nope as ex
    from posgeo.experiments import tasks

    settings = ex.nope_settings()
    for task in tasks.TASKS:  # cell 6: seed 0 of every task
        yield f"{task} seed 0", lambda task=task: ex.train_nope_model(task, settings, progress=False)
    for task in settings.seed_tasks:  # the seed cells: seed_runs over the profile's seeds
        for seed in settings.seeds:
            if seed == 0 and task in tasks.TASKS:  # cell 6's run, the same cache entry
                continue
            yield f"{task} seed {seed}", lambda task=task, seed=seed: ex.seed_runs(settings, tasks=[task], seeds=[seed], progress=False)


def _nope_ablation() -> Iterator[Job]:
    from posgeo.experiments import nope as ex

    settings = ex.nope_settings()
    yield "one-layer reversal", lambda: ex.train_nope_model("reversal", settings, n_layers=1, progress=False)
    tokens = ex.analysis_tokens(settings.ablation_task, settings.n_analysis, seed=123)
    for mean in settings.ablation_train_means:
        for std in settings.init_stds:
            one = dataclasses.replace(settings, init_means=(mean,), init_stds=(std,))
            for seed in settings.seeds:
                yield (f"ablation mean {mean} std {std} seed {seed}",
                       lambda one=one, seed=seed, mean=mean: ex.init_ablation_runs(one, tokens, seeds=[seed], train_means=[mean], progress=False))


def _nope_sweep() -> Iterator[Job]:
    from posgeo.experiments import nope as ex

    settings = ex.nope_settings()
    tokens = ex.analysis_tokens(settings.sweep_task, settings.n_analysis, seed=123)
    for layers, width in settings.sweep_trained:
        for seed in settings.seeds:
            yield (f"sweep {layers} x {width} seed {seed}",
                   lambda c=(layers, width), seed=seed: ex.sweep_training_runs(settings, tokens, configs=[c], seeds=[seed], progress=False))


def _constructive_small() -> Iterator[Job]:
    from posgeo.experiments import constructive as ex

    settings = ex.constructive_settings()
    corpora = {name: ex.constructive_tasks(name, n, settings) for name, n, _ in settings.corpora}
    tables = {name: ex.fixed_tables(ct.geometry, settings) for name, ct in corpora.items()}
    for job in ex.constructive_jobs(settings, corpora):
        yield str(job), lambda job=job: ex.run_constructive_job(job, settings, corpora, tables=tables[job.corpus])


def _separation() -> tuple[object, object, dict]:
    import posgeo as pg
    from posgeo.experiments import separation as ex

    settings = ex.separation_settings()
    return ex, settings, ex.separation_experiments(settings, text=pg.load_corpus(settings.text_corpus, "train"))


def _separation_jobs(names: list[str] | None, seeds: tuple[int, ...], decay: bool) -> Iterator[Job]:
    ex, settings, experiments = _separation()
    wd = settings.position_weight_decay if decay else None
    for seed in seeds:  # run_separation_seeds: seeds outer, experiments inner
        for name in experiments if names is None else names:
            yield (f"{name} seed {seed}{' weight decay' if decay else ''}",
                   lambda name=name, seed=seed: ex.run_separation_experiments(
                       {name: experiments[name]}, settings, position_weight_decay=wd, seed=seed, progress=False))


def _separation_plain() -> Iterator[Job]:
    yield from _separation_jobs(["synthetic MLM", "first marker", "sst2 MLM", "(b) i.i.d. MLM"], (0,), decay=False)


def _separation_probe() -> Iterator[Job]:
    yield from _separation_jobs(None, (0,), decay=True)


def _separation_seeds() -> Iterator[Job]:
    from posgeo.experiments import separation as ex

    seeds = tuple(s for s in ex.separation_settings().seeds if s != 0)  # seed 0: the probe cell's runs
    yield from _separation_jobs(["synthetic MLM", "(b) i.i.d. MLM", "sst2 MLM", "(b) sst2 shuffled"], seeds, decay=True)


def _separation_finetune() -> Iterator[Job]:
    from posgeo.experiments import separation as ex

    settings = ex.separation_settings()
    yield "fine-tuning the pretrained table", lambda: ex.run_finetuning(settings, progress=False)


def _ntk_scratch() -> Iterator[Job]:
    import posgeo as pg
    from posgeo.experiments import ntk as ex
    from posgeo.experiments import separation

    settings = ex.ntk_settings()
    yield "synthetic tables from scratch", lambda: ex.from_scratch_tables(settings, progress=False)
    for name in ("sst2", "imdb"):
        yield (f"{name} MLM table from scratch",
               lambda name=name: ex.from_scratch_text_tables({name: pg.load_corpus(name, "train")},
                                                             separation.separation_settings(), progress=False))


def _ntk_comparison() -> Iterator[Job]:
    from posgeo.experiments import ntk as ex

    settings = ex.ntk_settings()
    for objective in ("mlm", "cls"):  # ntk_comparison's order
        for seed in settings.seeds:
            for regime in ("frozen", "full"):
                yield (f"{objective} {regime} seed {seed}",
                       lambda o=objective, r=regime, s=seed: ex.train_position_table(settings, objective=o, regime=r, seed=s, progress=False))


def _ntk_widths() -> Iterator[Job]:
    from posgeo.experiments import ntk as ex

    settings = ex.ntk_settings()
    listed: set[tuple[int, float]] = set()
    for scaling in ("inverse", "constant"):
        for width in settings.widths:
            lr = ex.width_learning_rate(settings, width, lr_scaling=scaling)
            if (width, lr) in listed:
                continue  # both scalings' learning rate (at the settings' width): the same cache entries
            listed.add((width, lr))
            for seed in settings.seeds:  # both regimes per job
                one = dataclasses.replace(settings, widths=(width,), seeds=(seed,))
                yield (f"width {width} lr {scaling} seed {seed}",
                       lambda one=one, scaling=scaling: ex.width_sweep(one, lr_scaling=scaling, progress=False))


GROUPS: dict[str, Callable[[], Iterator[Job]]] = {
    "nope-seeds": _nope_seeds,
    "nope-ablation": _nope_ablation,
    "nope-sweep": _nope_sweep,
    "constructive-small": _constructive_small,
    "separation-plain": _separation_plain,
    "separation-probe": _separation_probe,
    "separation-seeds": _separation_seeds,
    "separation-finetune": _separation_finetune,
    "ntk-scratch": _ntk_scratch,
    "ntk-comparison": _ntk_comparison,
    "ntk-widths": _ntk_widths,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("groups", nargs="+", metavar="GROUP", help=f"one of {', '.join(GROUPS)}")
    parser.add_argument("--list", action="store_true", help="print the runs in training order; train nothing")
    parser.add_argument("--check", action="store_true",
                        help="only check the group names (no posgeo needed: tools/arm64_check.sh runs it on the host)")
    args = parser.parse_args(argv)
    unknown = [g for g in args.groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    if args.check:
        return 0
    jobs = [job for group in args.groups for job in GROUPS[group]()]
    start = time.time()
    trained = 0
    for i, (label, run) in enumerate(reversed(jobs), 1):
        if args.list:
            print(f"{i}/{len(jobs)} {label}", flush=True)
            continue
        t = time.time()
        before = _entries()
        run()
        if _entries() - before:
            trained += 1
            print(f"{i}/{len(jobs)} {label}: {time.time() - t:.0f} s", flush=True)
        elif trained:
            print(f"{i}/{len(jobs)} {label}: already in the cache, after {trained} run(s) trained here: met nbval's "
                  f"runs (it trains them in order, so the {len(jobs) - i} before it are there too); stopping", flush=True)
            break
        else:  # a cache left by an earlier check: not the meeting point, go on
            print(f"{i}/{len(jobs)} {label}: already in the cache ({time.time() - t:.0f} s to load)", flush=True)
    if not args.list:
        print(f"{trained} of {len(jobs)} runs trained in {time.time() - start:.0f} s", flush=True)
    return 0


def _entries() -> set[str]:
    """The result cache's entries now (names): a run that adds none was loaded, not trained."""
    from posgeo import cache_dir

    root = cache_dir()
    return {p.name for p in root.iterdir() if p.suffix == ".pkl"} if root.is_dir() else set()


if __name__ == "__main__":
    sys.exit(main())
