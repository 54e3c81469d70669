#!/usr/bin/env bash
# P1's training controls at full scale on one GPU (issue 49): the low-rank trade-off on IMDB masked tokens
# at 256 positions (P1_GPU_LOWRANK in the Makefile), then chapter 10's controls with the full profile's
# model (P1_GPU_CONTROLS: width 128, 4 layers, IMDB 64 and SST-2 32 positions, 5 seeds).
#
#   make p1-gpu-prepare                                   (here, with the data: writes .gpu/p1_*.pkl.gz)
#   OUT=/folder/for/results tools/gpu_p1_controls.sh [BUDGET_SECONDS]   (GPU machine, repository root; default 660)
#   (carry .gpu and .whl; DEVICE, default cuda, and JOBS, default 8: where the runs train and how many at once)
#
# It writes OUT/ch07_lowrank_imdb_256.csv and OUT/ch10_controls_full.csv (each with its .json record of the
# settings, command, versions and device). Runs go seed by seed; no low-rank run starts after 40% of the
# budget and no control after 75%, so a call ends within the budget plus one run. A second call resumes
# from the files already in book/data. Copy OUT's files into book/data and commit them.
# The GPU machine's image lacks altair: carry the wheels in .whl/ (see tools/gpu_p2_full.sh).
set -euo pipefail
budget=${1:-660}
out=$(realpath -m "${OUT:?set OUT to the folder that receives the data files}")
device=${DEVICE:-cuda}
jobs=${JOBS:-8}
prepared=$(realpath -m "${PREPARED:-.gpu}")
for f in "$prepared/p1_lowrank_256.pkl.gz" "$prepared/p1_controls_full.pkl.gz"; do
  [ -f "$f" ] || { echo "missing $f: run make p1-gpu-prepare where the data are, and carry .gpu" >&2; exit 2; }
done
if ! python3 -c "import altair" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/companion/src:$PWD/book${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TQDM_DISABLE=1 \
  POSGEO_CACHE_DIR=${POSGEO_CACHE_DIR:-/tmp/posgeo-cache}
mkdir -p "$out"
cp book/data/ch07_lowrank_imdb_256* book/data/ch10_controls_full* "$out"/ 2>/dev/null || true  # earlier calls' runs
cd book
python3 _ch10_controls.py run "$out/ch07_lowrank_imdb_256.csv" --prepared "$prepared/p1_lowrank_256.pkl.gz" \
  --device "$device" --jobs "$jobs" --budget "$(python3 -c "print($budget * 0.40)")" 2>&1 | tee -a "$out/p1_gpu_log.txt"
left=$(python3 -c "print(max(0.0, $budget * 0.75 - $SECONDS))")
python3 _ch10_controls.py run "$out/ch10_controls_full.csv" --prepared "$prepared/p1_controls_full.pkl.gz" \
  --device "$device" --jobs "$jobs" --budget "$left" 2>&1 | tee -a "$out/p1_gpu_log.txt"
