"""Tests of tools/arm64_prefill.py (the second process of the emulated arm64 check): it lists a
chapter's runs in reverse order, rejects unknown groups, and fills exactly the cache entries
that the chapter's recipes then read (checked on tiny settings: the recipes afterwards write no
new training run)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from posgeo.experiments import nope, ntk, tasks

TOOL = Path(__file__).resolve().parents[1] / "tools" / "arm64_prefill.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("arm64_prefill", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _training_runs(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir() if p.name.startswith("train")}


@pytest.fixture
def tiny_nope(monkeypatch):
    s = dataclasses.replace(nope.nope_settings("small"), steps=2, sweep_steps=2, ablation_steps=2, n_train=16, n_test=8,
                            n_analysis=4, seeds=(0, 1), seed_tasks=("sorting",), sweep_trained=((1, 16), (2, 16)),
                            init_means=(0.0, 4.0), init_stds=(0.02, 0.2), batch_size=8)
    monkeypatch.setattr(nope, "nope_settings", lambda profile=None: s)
    return s


@pytest.fixture
def tiny_ntk(monkeypatch):
    s = dataclasses.replace(ntk.ntk_settings("small"), steps=2, seeds=(0, 1), widths=(8, 16), batch_size=8)
    monkeypatch.setattr(ntk, "ntk_settings", lambda profile=None: s)
    return s


def test_groups_list_the_runs_last_first(tool, tiny_nope, capsys):
    assert tool.main(["--list", "nope-ablation", "nope-sweep"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # 1 one-layer model + 2 stds x 2 seeds at the trained mean 0; 2 configurations x 2 seeds
    assert len(lines) == 1 + 4 + 4
    assert lines[0] == "1/9 sweep 2 x 16 seed 1"  # the last run nbval trains comes first
    assert lines[-1] == "9/9 one-layer reversal"
    assert [ln.split(" ", 1)[1] for ln in lines[1:5]] == ["sweep 2 x 16 seed 0", "sweep 1 x 16 seed 1",
                                                          "sweep 1 x 16 seed 0", "ablation mean 0.0 std 0.2 seed 1"]


def test_nope_seeds_skip_the_task_runs_they_share(tool, tiny_nope, capsys):
    tool.main(["--list", "nope-seeds"])
    labels = [ln.split(" ", 1)[1] for ln in capsys.readouterr().out.splitlines()]
    assert labels.count("sorting seed 0") == 1 and labels[0] == "sorting seed 1"
    assert len(labels) == len(tasks.TASKS) + 1  # seed 0 of every task, then sorting's seed 1


def test_unknown_group_is_refused_with_the_choices():
    proc = subprocess.run([sys.executable, str(TOOL), "--list", "nope-bogus"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "unknown group(s) nope-bogus" in proc.stderr and "nope-ablation" in proc.stderr
    # --check (what tools/arm64_check.sh runs on the host, before the root) answers the same
    check = subprocess.run([sys.executable, str(TOOL), "--check", "nope-ablation", "nope-bogus"],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 2 and "nope-bogus" in check.stderr
    ok = subprocess.run([sys.executable, str(TOOL), "--check", "nope-ablation", "ntk-widths"],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout == ""


@pytest.mark.slow
def test_nope_prefill_fills_what_the_recipes_read(tool, tiny_nope, tmp_path, monkeypatch):
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    s = tiny_nope
    assert tool.main(["nope-sweep"]) == 0
    filled = _training_runs(tmp_path)
    assert len(filled) == 4
    tokens = nope.analysis_tokens(s.sweep_task, s.n_analysis, seed=123)
    nope.sweep_training_runs(s, tokens, progress=False)
    assert _training_runs(tmp_path) == filled  # every run the recipe needed was there
    # and the check can fail: the ablation's runs are not there until its group runs
    ab_tokens = nope.analysis_tokens(s.ablation_task, s.n_analysis, seed=123)
    nope.init_ablation_runs(s, ab_tokens, progress=False)
    assert len(_training_runs(tmp_path)) == len(filled) + 4  # 2 stds x 2 seeds at the trained mean
    for name in _training_runs(tmp_path) - filled:
        (tmp_path / name).unlink()
    assert tool.main(["nope-ablation"]) == 0
    after = _training_runs(tmp_path)
    assert len(after) == len(filled) + 4 + 1  # + the one-layer model
    nope.init_ablation_runs(s, ab_tokens, progress=False)
    nope.train_nope_model("reversal", s, n_layers=1, progress=False)
    assert _training_runs(tmp_path) == after


@pytest.mark.slow
def test_ntk_prefill_fills_what_the_recipes_read(tool, tiny_ntk, tmp_path, monkeypatch):
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    s = tiny_ntk
    assert s.d_model not in s.widths  # else both lr scalings share the runs at that width
    assert tool.main(["ntk-comparison", "ntk-widths"]) == 0
    filled = _training_runs(tmp_path)
    # 2 objectives x 2 seeds x 2 regimes; 2 lr scalings x 2 widths x 2 seeds x 2 regimes
    assert len(filled) == 8 + 16
    ntk.ntk_comparison(s, progress=False)
    for scaling in ("inverse", "constant"):
        ntk.width_sweep(s, lr_scaling=scaling, progress=False)
    assert _training_runs(tmp_path) == filled


@pytest.mark.slow
def test_ntk_widths_train_the_run_both_scalings_share_once(tool, tiny_ntk, tmp_path, monkeypatch, capsys):
    # at the settings' own width the two lr scalings give the same learning rate, hence the same
    # cache entries: listed twice, the second would look like nbval's and stop the script early
    s = dataclasses.replace(tiny_ntk, widths=(8, tiny_ntk.d_model))
    monkeypatch.setattr(ntk, "ntk_settings", lambda profile=None: s)
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    assert tool.main(["ntk-widths"]) == 0
    out = capsys.readouterr().out
    assert "already in the cache" not in out and out.splitlines()[-1].startswith("6 of 6 runs trained")
    filled = _training_runs(tmp_path)
    assert len(filled) == 2 * 2 * 2 + 2 * 2  # inverse: 2 widths x 2 seeds x 2 regimes; constant: width 8 only
    for scaling in ("inverse", "constant"):
        ntk.width_sweep(s, lr_scaling=scaling, progress=False)
    assert _training_runs(tmp_path) == filled


@pytest.mark.slow
def test_prefill_stops_where_it_meets_the_runs_nbval_trained(tool, tiny_nope, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    s = tiny_nope
    tokens = nope.analysis_tokens(s.sweep_task, s.n_analysis, seed=123)
    # nbval has trained the first configuration (1 x 16, seeds 0 and 1), in its order
    nope.sweep_training_runs(s, tokens, configs=[(1, 16)], progress=False)
    assert len(_training_runs(tmp_path)) == 2
    assert tool.main(["nope-sweep"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in out[:2]] == ["1/4 sweep 2 x 16 seed 1", "2/4 sweep 2 x 16 seed 0"]
    assert out[2].startswith("3/4 sweep 1 x 16 seed 1: already in the cache, after 2 run(s) trained here")
    assert "stopping" in out[2] and "4/4" not in "".join(out)  # the last run is neither trained nor loaded
    assert out[3].startswith("2 of 4 runs trained")
    assert len(_training_runs(tmp_path)) == 4


@pytest.mark.slow
def test_prefill_passes_over_runs_left_by_an_earlier_check(tool, tiny_nope, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POSGEO_CACHE_DIR", str(tmp_path))
    s = tiny_nope
    tokens = nope.analysis_tokens(s.sweep_task, s.n_analysis, seed=123)
    # an earlier prefill left the list's last run: no run trained here yet, so not the meeting point
    nope.sweep_training_runs(s, tokens, configs=[(2, 16)], seeds=[1], progress=False)
    assert tool.main(["nope-sweep"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1/4 sweep 2 x 16 seed 1: already in the cache (")
    assert [ln.split(":")[0] for ln in out[1:4]] == ["2/4 sweep 2 x 16 seed 0", "3/4 sweep 1 x 16 seed 1",
                                                     "4/4 sweep 1 x 16 seed 0"]
    assert out[4].startswith("3 of 4 runs trained")
    assert len(_training_runs(tmp_path)) == 4
