#!/usr/bin/env bash
# P2's scale for chapter 11, on one GPU: the decoder without positional encoding at 10.7M parameters
# (FULL_LEARNED in book/_ch11.py: four tasks and the counting control x 5 seeds) and the trained sweep
# over 6/12/24 layers x 192/384/768 width (FULL_SWEEP), each run trained, then analysed as the chapter's
# learned runs are (probes, interventions, kernel fit).
#
#   OUT=/folder/for/results tools/gpu_p2_full.sh [BUDGET_SECONDS]      (from the repository root; default 660)
#   (DEVICE, default cuda, and JOBS, default 8: where the runs train and how many at once)
#
# It writes OUT/ch11_full.csv (+ _curves, _analysis), OUT/ch11_full_sweep/layers<L>_width<W>.csv (+ ...)
# and appends the call (command, torch, device, date) to OUT/ch11_full_calls.jsonl. No run starts after
# 70% of the budget and no analysis after the budget less 120 s; a second call resumes from the files
# already in book/data (a run cut short starts again: its checkpoint stays on the machine). Copy OUT's
# files into book/data and commit them.
#
# The GPU machine's image lacks altair (the chapter's helper imports it). Carry these wheels in .whl/,
# downloaded here once:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     altair==5.5.0 jsonschema==4.26.0 referencing==0.37.0 jsonschema-specifications rpds-py
set -euo pipefail
budget=${1:-660}
out=$(realpath -m "${OUT:?set OUT to the folder that receives the data files}")
device=${DEVICE:-cuda}
if ! python3 -c "import altair" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/companion/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TQDM_DISABLE=1 POSGEO_CACHE_DIR=${POSGEO_CACHE_DIR:-/tmp/posgeo-cache}
mkdir -p "$out"
cp -r book/data/ch11_full* "$out"/ 2>/dev/null || true  # what earlier calls finished
python3 - "$budget" "$out" <<'EOF' >>"$out/ch11_full_calls.jsonl"
import json, sys, time, torch
print(json.dumps({"command": f"tools/gpu_p2_full.sh {sys.argv[1]}", "budget": float(sys.argv[1]), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "torch": torch.__version__, "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}))
EOF
cd book
python3 _ch11.py full "$out" --device "$device" --jobs "${JOBS:-8}" --budget "$budget" 2>&1 | tee -a "$out/ch11_full_log.txt"
