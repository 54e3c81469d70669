#!/bin/sh
# nbval of chapters on arm64, emulated on an x86-64 host (qemu-user), from a clean clone.
#
#   sudo sh tools/arm64_check.sh [CHAPTER.ipynb[:CELLS] ...]
#
# CHAPTER.ipynb:CELLS checks some of a chapter's code cells (numbered from 0 as nbval numbers
# them, e.g. book/04_mds_and_stress.ipynb:0-4,14,16,22,23): a copy of the chapter made in the
# clone, book/<chapter>_cells_<CELLS>.ipynb, holding those code cells and their stored outputs.
# Name the cells a checked cell needs (the set-up cells, those whose variables it reads); nbval
# then compares each of them as in the whole chapter. Emulation is slow (below), so this is how
# the long chapters are checked in parts.
# Default: chapters 1 and 6 (linear algebra at float64 precision) and chapter 4's training
# cells (book/02_permutation_equivariance.ipynb:0-2,8-11: the training cells need only the
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
# (A second process that trained a chapter's runs into the same cache, tools/arm64_prefill.py,
# was removed when the chapters' recipes moved from posgeo.experiments into the chapters.)
#
# Status (2026-12-06): every cell of every chapter (1-12) has passed with this script, the
# long chapters in parts (CHAPTER.ipynb:CELLS) over several sessions; chapters 3, 8 and 9 first
# failed on rounding (zeros and ties) and were mended. tools/ARM64.md has the record: each
# chapter's commands, cells, times and differences from the stored x86-64 outputs.
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
[ "$#" -gt 0 ] || set -- book/01_introduction.ipynb book/02_permutation_equivariance.ipynb book/06_sinusoids_circulant.ipynb

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
chroot "$ROOT" /work/run_nbval.sh "$@"
