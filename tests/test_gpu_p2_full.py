"""Tests of tools/gpu_p2_full.sh (chapter 11 at P2's scale on a GPU): its wiring, run on the CPU with no time to train."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu_p2_full.sh"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_gpu_script_records_its_call_and_starts_nothing_without_time(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "DEVICE": "cpu", "JOBS": "1", "POSGEO_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # python3: this interpreter
    done = subprocess.run(["bash", str(SCRIPT), "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    call = json.loads((out / "ch11_full_calls.jsonl").read_text().splitlines()[-1])
    assert call["command"] == "tools/gpu_p2_full.sh 0" and call["budget"] == 0 and call["device"] == "cpu"
    data = ROOT / "book" / "data"
    for csv in out.rglob("*.csv"):  # a zero budget trains and analyses nothing: only what earlier calls shipped is there
        assert csv.read_bytes() == (data / csv.relative_to(out)).read_bytes()
    assert (out / "ch11_full_sweep").is_dir()
