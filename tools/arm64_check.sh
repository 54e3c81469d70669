#!/bin/sh
# nbval of chapters on arm64, emulated on an x86-64 host (qemu-user), from a clean clone.
#
#   sudo sh tools/arm64_check.sh [CHAPTER.ipynb[:CELLS] ...]
#
# CHAPTER.ipynb:CELLS checks some of a chapter's code cells (numbered from 0 as nbval numbers
# them, e.g. book/03_mds_and_stress.ipynb:0-4,14,16,22,23): a copy of the chapter made in the
# clone, book/<chapter>_cells_<CELLS>.ipynb, holding those code cells and their stored outputs.
# Name the cells a checked cell needs (the set-up cells, those whose variables it reads); nbval
# then compares each of them as in the whole chapter. Emulation is slow (below), so this is how
# the long chapters are checked in parts.
# Default: chapters 1 and 6 (linear algebra at float64 precision) and chapter 4's training
# cells (book/04_permutation_equivariance.ipynb:0-2,8-11: the training cells need only the
# settings).
#
# What it does, in a Debian arm64 root file system under ROOT (default /opt/posgeo-arm64):
#   1. apt-get installs qemu-user-static, binfmt-support and debootstrap; mounts binfmt_misc
#      if needed, so that arm64 binaries run through qemu;
#   2. debootstraps Debian bookworm for arm64 with python3 (once);
#   3. creates /venv there and pip-installs the arm64 wheel of torch==2.13.0 from PyPI and the
#      companion with its test and book extras (tools/constraints.txt), once;
#   4. clones this repository's HEAD into the root and runs, per chapter, nbval with the
#      tolerances (`pytest -p nbtolerance --nbval`), in the Makefile's environment, from an
#      empty result cache, against the stored outputs (computed on x86-64).
# Needs root (chroot, mounts), the apt and PyPI registries, and time: emulation runs the
# chapters about 30 times slower than the host (chapter 6: 41 s natively, 1,312 s emulated),
# so cells get 7,200 s each instead of nbval's 2,000 (NBVAL_CELL_TIMEOUT=SECONDS changes it).
# POSGEO_CACHE_DIR=/tmp/NAME (a path inside the root) keeps the result cache between runs: a run
# stopped at the cell limit leaves its finished training runs there for the next, and a second
# emulated process can train a chapter's runs in another order into the same cache, so that both
# cores train (the cache's writes are atomic). Every run it holds was trained on emulated arm64.
#
# PREFILL=GROUP[,GROUP] (with POSGEO_CACHE_DIR) starts that second process: tools/arm64_prefill.py
# trains the runs of the named cells (its groups, e.g. nope-ablation: chapter 10's cells 24 and 26;
# separation-* for chapter 5, ntk-* for chapter 8, constructive-small for chapter 12)
# from the last backwards into the cache, logging each run's seconds to ROOT/work/prefill.log,
# and is stopped when nbval ends.
#
# Status (2026-12-03): chapters 1 (4 cells) and 6 (18 cells) passed and chapter 4's cells 0-4,
# run by hand under qemu's default CPU model; chapter 4's training cells (with this script, run
# whole) failed there, and the failure was qemu's, not arm64's: see QEMU_CPU below. With
# QEMU_CPU=neoverse-n1, four of chapter 4's sixteen training runs, trained directly, ended within
# the chapter's tolerance of the stored x86-64 values (the README has the numbers); and this
# script's nbval of chapter 4's training cells (ROOT=/opt/arm64 sh tools/arm64_check.sh
# book/04_permutation_equivariance.ipynb:0-2,8-11) passed with it: 7 cells in 6,779 s, every tagged number within
# half its tolerance. Chapter 12 (ROOT=/opt/arm64 ... book/12_constructive.ipynb) passed: 13 cells
# in 5,462 s. Chapter 9 failed in 3 cells, on a tie order of np.argsort and on a strictly compared
# float32 view; both mended, it then passed (21 cells, 4,872 s). Chapter 11 passed (261 s), chapters
# 1 and 6 passed again on the Neoverse N1 model; chapter 3 failed in 2 cells that showed float64
# rounding of 0 strictly, both mended. 2026-12-04: the mended chapter 3's cells
# (:0-4,14,16,22,23) passed (891 s), chapter 4's cells 0-7 passed (2,258 s; so every cell of
# chapters 3 and 4 has passed), and chapter 2 passed in five parts (:0-9, :0,1,10,11,
# :0-3,12-17,23-25, :0,1,18-20, :0,1,21,22). Later on 2026-12-04: chapter 7's cells 0-11 passed (3,783 s) and
# chapter 12's full-profile cells (:0,1,13-15,17-22, 87 s). Late on 2026-12-04, chapter 7's training cells
# (:0,1,12-19) passed (1,206 s, POSGEO_CACHE_DIR kept from two attempts stopped at the cell limit,
# and a second process training in reverse order), so every cell of chapter 7 has passed.
# 2026-12-05 (a new root: ROOT does not outlive the machine): chapter 12's cell 16 with the cells it
# needs (:0-3,6,13,16) passed (3,206 s, its 160 runs trained by nbval and a second process), so
# every cell of chapter 12 has passed. Chapter 10's cells :0-23,35-39 (8 runs, 720-1,700 s each) ran
# until the session's end: cells 0-23 passed, nbval was stopped in cell 35. Later on 2026-12-05,
# with that cache kept (this time the machine, ROOT and the cache outlived the session) and
# PREFILL=nope-ablation, :0-2,6,11,14,22,24-30,35-39 passed (19 cells, 7,116 s), and with
# PREFILL=nope-sweep, :0-2,11,31-34 passed (8 cells, 6,110 s), so every cell of chapter 10 has passed.
# Chapter 5: every cell passed: cells 0-16 and 22 on 2026-12-05 (:0-11 in 1,035 s with 8 of the
# probe's 9 runs left in the cache by a stopped attempt; :0,1,4,5,9,10,12-14 in 112 s once
# PREFILL=separation-seeds and nbval had trained the 16 runs of cells 12-14 over two sessions), and
# cells 17-21 with :0,1,4,15-21 on 2026-12-06: the fine-tuning (about 105 s per step emulated)
# saves its state every 20 steps and resumes, so it ran over two sessions on a machine whose ROOT
# and cache outlived the first (7,249 s to step 60, then 3,075 s for the rest and the cells); every
# snapshot within 6.2e-7 of x86-64's. Chapter 8: a first run of :0-15 failed in cells 2-3 (the
# circle's ties, exact equalities that rounding decided: 73 on x86-64, 68 on arm64); with ties
# judged up to rounding (posgeo's tie_rtol) :0-15 passed (3,267 s) and :0,1,4,14,16-20 (829 s, the
# 20 runs of ntk-comparison trained by nbval and a second process), and chapter 11 again (205 s); chapter
# 8's cells 21-24 (the width sweep: 35 runs of both regimes, 169-1,217 s each emulated) passed on
# 2026-12-06 with :0,1,21-24 (5,523 s; nbval and a second process, tools/arm64_prefill.py ntk-widths,
# into the cache kept from the session before, which had trained 4 runs), so every cell of every
# chapter has passed on emulated arm64.
# The README has a table of every chapter.
#
# The oneDNN inside torch reads the CPU's MIDR_EL1 from /sys at import and crashes without it,
# so the root gets a small fake /sys/devices/system/cpu (an Arm Neoverse N1's MIDR) instead of
# the host's /sys, and qemu emulates that CPU (QEMU_CPU=neoverse-n1): torch then runs its
# DEFAULT (NEON) kernels, the path of arm64 CPUs without SVE (Apple M-series, Graviton 2,
# Ampere Altra). Under qemu's default model ("max", with SVE) Debian bookworm's qemu 7.2 gives
# torch's float32 matrix products wrong results (measured: a (768 x 32) @ (32 x 96) product off
# by 1.8 where its largest entry is 2.9, float64 and numpy exact), so every torch result there is
# meaningless; with neoverse-n1, cortex-a72 or max,sve=off the same product is right to 6e-7.
# Check a new qemu or CPU model with the matrix-product check this script runs first.
set -eu
ROOT=${ROOT:-/opt/posgeo-arm64}
export QEMU_CPU=${QEMU_CPU:-neoverse-n1}  # read by qemu-user (binfmt): the CPU the fake MIDR names
REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
DATA=${POSGEO_DATA_DIR:-$REPO/../shared/data}
PREFILL=${PREFILL:-}
if [ -n "$PREFILL" ] && [ -z "${POSGEO_CACHE_DIR:-}" ]; then
  echo "PREFILL=$PREFILL needs POSGEO_CACHE_DIR=/tmp/NAME, the result cache it shares with nbval" >&2
  exit 2
fi
# a misspelt group fails here, not minutes later inside the root while nbval trains alone
[ -z "$PREFILL" ] || python3 "$REPO/tools/arm64_prefill.py" --check $(echo "$PREFILL" | tr , ' ') || exit 2
[ "$#" -gt 0 ] || set -- book/01_introduction.ipynb book/04_permutation_equivariance.ipynb:0-2,8-11 book/06_sinusoids_circulant.ipynb

command -v qemu-aarch64-static >/dev/null || apt-get install -y qemu-user-static binfmt-support debootstrap
[ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  debootstrap --arch=arm64 --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates,libgomp1 \
    bookworm "$ROOT" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mountpoint -q "$ROOT/dev" || mount --rbind /dev "$ROOT/dev"
cpu="$ROOT/sys/devices/system/cpu"
mkdir -p "$cpu"
for f in online possible present; do echo 0-1 > "$cpu/$f"; done
for c in 0 1; do
  mkdir -p "$cpu/cpu$c/regs/identification"
  echo 0x00000000410fd0c0 > "$cpu/cpu$c/regs/identification/midr_el1"
done
mkdir -p "$ROOT/work/shared/data"
# bind afresh each run: a bind from an earlier run points at the old directory if the data were replaced since
if mountpoint -q "$ROOT/work/shared/data"; then umount "$ROOT/work/shared/data"; fi
mount --bind "$DATA" "$ROOT/work/shared/data"
rm -rf "$ROOT/work/main"
git clone -q "$REPO" "$ROOT/work/main"
# CHAPTER.ipynb:CELLS -> a copy of the chapter with those code cells (outputs kept)
notebooks=$(python3 - "$ROOT/work/main" "$@" <<'EOF'
import json, os, sys
root, specs = sys.argv[1], sys.argv[2:]
for spec in specs:
    path, _, cells = spec.partition(":")
    if not cells:
        print(path)
        continue
    keep = []
    for part in cells.split(","):
        lo, _, hi = part.partition("-")
        keep.extend(range(int(lo), int(hi or lo) + 1))
    nb = json.load(open(os.path.join(root, path)))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if max(keep) >= len(code) or keep != sorted(set(keep)):
        sys.exit(f"{spec}: cells must be increasing and below {len(code)}, the chapter's code cells")
    nb["cells"] = [code[k] for k in keep]
    out = path[: -len(".ipynb")] + "_cells_" + cells.replace(",", "_") + ".ipynb"
    json.dump(nb, open(os.path.join(root, out), "w"), indent=1)
    print(out)
EOF
)
set -- $notebooks
chroot "$ROOT" /bin/sh -eu -c '
  export PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DEFAULT_TIMEOUT=180
  cd /work/main
  if [ ! -x /venv/bin/python ]; then python3 -m venv /venv; fi
  /venv/bin/pip install -q -c tools/constraints.txt torch
  /venv/bin/pip install -q -c tools/constraints.txt -e "companion[test,book]"
'
cat > "$ROOT/work/env.sh" <<'EOF'
export TQDM_DISABLE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_DATASETS_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error \
  TOKENIZERS_PARALLELISM=false PYTHONHASHSEED=0 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
  PYDEVD_DISABLE_FILE_VALIDATION=1 POSGEO_DATA_DIR=/work/shared/data PATH=/venv/bin:$PATH
EOF
cat > "$ROOT/work/run_nbval.sh" <<'EOF'
#!/bin/sh
cd /work/main
. /work/env.sh
/venv/bin/python -c "import platform, numpy, torch; print(platform.machine(), 'torch', torch.__version__, torch.backends.cpu.get_cpu_capability(), 'numpy', numpy.__version__)"
# the emulation computes torch's float32 products right (see QEMU_CPU above), or nothing is checked
/venv/bin/python -c "
import sys, torch
torch.manual_seed(0)
x, w = torch.randn(768, 32), torch.randn(96, 32) * 0.1
err = float((x @ w.T - (x.double() @ w.double().T)).abs().max())
print(f'float32 matrix product, largest error {err:.2g}')
sys.exit(0 if err < 1e-4 else 'the emulated CPU computes wrong float32 products: set QEMU_CPU to a CPU model without SVE')
" || exit 2
rc=0
for nb in "$@"; do
  start=$(date +%s)
  POSGEO_CACHE_DIR=${POSGEO_CACHE_DIR:-$(mktemp -d)} /venv/bin/python -m pytest -p nbtolerance --nbval --nbval-current-env -q -p no:xdist --nbval-cell-timeout=${NBVAL_CELL_TIMEOUT:-7200} "$nb" || rc=1
  echo "== $nb: $(( $(date +%s) - start )) s"
done
exit $rc
EOF
chmod +x "$ROOT/work/run_nbval.sh"
if [ -n "$PREFILL" ]; then
  groups=$(echo "$PREFILL" | tr , ' ')
  chroot "$ROOT" /bin/sh -c ". /work/env.sh && cd /work/main && exec /venv/bin/python tools/arm64_prefill.py $groups" \
    > "$ROOT/work/prefill.log" 2>&1 &
  prefill=$!
  trap 'kill "$prefill" 2>/dev/null || true' EXIT
  echo "prefill ($PREFILL): process $prefill, log $ROOT/work/prefill.log"
fi
chroot "$ROOT" /work/run_nbval.sh "$@"
