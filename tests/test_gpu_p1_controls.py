"""Tests of tools/gpu_p1_controls.sh (P1's controls at full scale on a GPU): its wiring, on the CPU with tiny settings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import _ch10_controls as cc

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu_p1_controls.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _env(tmp_path, prepared):
    return {**os.environ, "OUT": str(tmp_path / "out"), "DEVICE": "cpu", "JOBS": "1", "PREPARED": str(prepared),
            "POSGEO_CACHE_DIR": str(tmp_path / "cache"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_without_the_prepared_corpora_it_says_how_to_make_them(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "10"], cwd=ROOT, env=_env(tmp_path, tmp_path / "none"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "make p1-gpu-prepare" in done.stderr


def test_it_trains_both_prepared_settings_into_the_data_files(tmp_path):
    prepared = tmp_path / "gpu"
    prepared.mkdir()
    tiny = dict(corpora=(("synthetic", 8),), cls_encodings=(), seeds=(0,), steps=3, eval_rows=16, merge_rows=4)
    lowrank = cc.ControlSettings(**tiny, encodings=("none", "learned", "lowrank k=2"))
    controls = cc.ControlSettings(**tiny, encodings=("PMDS full", "PMDS permuted"))
    cc.prepare(prepared / "p1_lowrank_256.pkl.gz", lowrank)
    cc.prepare(prepared / "p1_controls_full.pkl.gz", controls)
    done = subprocess.run(["bash", str(SCRIPT), "600"], cwd=ROOT, env=_env(tmp_path, prepared),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for name, s in (("ch07_lowrank_imdb_256", lowrank), ("ch10_controls_full", controls)):
        frame = pd.read_csv(tmp_path / "out" / f"{name}.csv")
        assert sorted(frame["encoding"]) == sorted(s.encodings)
        record = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        assert record["digest"] == s.digest() and record["device"] == "cpu" and "--prepared" in record["command"]
