#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (CI has none): builds convtune with CUDA (Release,
# CUDA architecture 90, all cores, into build-gpu/), runs the CUDA tests, tunes the seed,
# ResNet-50, VGG-16 and large-kernel layers on cuda:0 (at most 20 s each) and the seed layers on
# the CPU, and prints last: per layer our best
# own CUDA kernel against the best cuDNN algorithm, and the seed stride table, CPU and GPU side by
# side, and last per layer each own CUDA algorithm (cuda.winograd, cuda.fft, cuda.implicit_gemm,
# cuda.direct, cuda.im2col_gemm) at its best config against cuDNN's best algorithm. Also checks
# that libconvtune links no CUDA library (the CUDA backend is the plugin libconvtune_cuda.so).
# Meant to finish within 6 minutes on a 16-core H200 machine.
#
# On a GPU machine without the project's Debian packages (the lent H200 has none and cannot
# install any), pack this machine's build with scripts/gpu-pack.sh and pass the tarball as
# CONVTUNE_GPU_BUNDLE: it is unpacked into build-gpu/ instead of configuring and building, and
# the GPU machine's own CUDA runtime, cuBLAS, cuFFT and cuDNN are found and used.
#
# usage: scripts/gpu-check.sh [extra cmake arguments]
# env:   CUDA_ARCH (default 90), CONVTUNE_LAYERS (default layers/, or the bundle's),
#        CONVTUNE_GPU_BUNDLE (a scripts/gpu-pack.sh tarball), GPU_CHECK_OUT (where the logs and
#        JSON go; default build-gpu), GPU_CHECK_BUDGET (tuning seconds per layer; default 20),
#        GPU_CHECK_TEST_TIMEOUT (seconds for test_cuda; default 600)
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH="${CUDA_ARCH:-90}"
BUILD=build-gpu
BUNDLE="${CONVTUNE_GPU_BUNDLE:-}"
LAYERS="${CONVTUNE_LAYERS:-$(pwd)/layers}"
[ -n "$BUNDLE" ] && [ -z "${CONVTUNE_LAYERS:-}" ] && LAYERS="$PWD/$BUILD/layers"
export CONVTUNE_LAYERS="$LAYERS"
OUTDIR="${GPU_CHECK_OUT:-$BUILD}"
BUDGET="${GPU_CHECK_BUDGET:-20}"
JOBS="$(nproc)"
STEP="start"
START=$SECONDS

trap 'rc=$?; echo "gpu-check: FAILED (exit status $rc) in step: $STEP" >&2; exit $rc' ERR
step() {
  STEP="$1"
  echo
  echo "=== [$((SECONDS - START)) s] $STEP"
}

step "look for the GPU"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
  echo "nvidia-smi not found; the CUDA tests below will tell whether a GPU is usable"
fi
if [ -n "$BUNDLE" ]; then
  step "unpack $BUNDLE into $BUILD (no build)"
  rm -rf "$BUILD"
  mkdir -p "$BUILD"
  gzip -dc "$BUNDLE" | tar -C "$BUILD" --strip-components=1 -xf -
  # The CUDA libraries of this machine: the toolkit's or the Python wheels' (cuDNN often only
  # there).
  cudalibs=""
  for so in libcudart.so.13 libcublas.so.13 libcufft.so.12 libcudnn.so.9; do
    f="$(find /usr/local /usr/lib /opt -name "$so" -print -quit 2>/dev/null || true)"
    [ -n "$f" ] || { echo "gpu-check: $so not found on this machine" >&2; false; }
    cudalibs="$cudalibs:$(dirname "$f")"
  done
  export LD_LIBRARY_PATH="$PWD/$BUILD/lib$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  if ldd "$BUILD/autotune" "$BUILD/lib/libconvtune_cuda.so" "$BUILD/tests/test_cuda" |
    grep 'not found'; then
    echo "gpu-check: libraries missing (above)" >&2
    false
  fi
  # The tests otherwise open the plugin at the path of the build they came from.
  export CONVTUNE_CUDA_PLUGIN="$PWD/$BUILD/lib/libconvtune_cuda.so"
  LIB="$BUILD/lib/libconvtune.so.0"
  PLUGIN="$BUILD/lib/libconvtune_cuda.so"
else
  step "configure $BUILD (Release, CONVTUNE_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=$ARCH)"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCONVTUNE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "$@" >/dev/null

  step "build with $JOBS jobs"
  cmake --build "$BUILD" -j"$JOBS" --target autotune convtune_cuda test_cuda test_cuda_index
  LIB="$(ls "$BUILD"/libconvtune.so.* | head -n1)"
  PLUGIN="$BUILD/libconvtune_cuda.so"
fi
for f in seed_alexnet_conv1.txt resnet50.txt vgg16.txt large_kernels.txt; do
  [ -r "$LAYERS/$f" ] || { echo "gpu-check: $LAYERS/$f not found (set CONVTUNE_LAYERS)" >&2; false; }
done
mkdir -p "$OUTDIR"

step "libconvtune links no CUDA library; the plugin is next to it"
if readelf -d "$LIB" | grep -E 'NEEDED.*lib(cudart|cublas|cudnn|cufft)'; then
  echo "gpu-check: $LIB links a CUDA library (it must load the plugin at run time)" >&2
  false
fi
[ -r "$PLUGIN" ] || { echo "gpu-check: $PLUGIN missing" >&2; false; }

step "CPU-side tests of the CUDA kernels' per-thread programs (test_cuda_index)"
"$BUILD/tests/test_cuda_index"

# A failing test does not stop the check: the tuning below still measures (and rejects wrong
# candidates itself), and the exit status reports the failure at the end.
FAILED=""
step "CUDA tests on the GPU (test_cuda, log in $OUTDIR/test_cuda.log)"
rc=0
timeout "${GPU_CHECK_TEST_TIMEOUT:-600}" "$BUILD/tests/test_cuda" >"$OUTDIR/test_cuda.log" 2>&1 || rc=$?
grep -E -A3 '^[^ ].*FAILED:' "$OUTDIR/test_cuda.log" | head -n 60 || true
tail -n 4 "$OUTDIR/test_cuda.log"
if [ "$rc" -eq 77 ]; then
  echo "gpu-check: test_cuda found no usable CUDA device" >&2
  false
elif [ "$rc" -ne 0 ]; then
  echo "gpu-check: test_cuda failed with exit status $rc" >&2
  FAILED="test_cuda (exit status $rc)"
fi

DB="$OUTDIR/gpu-check-perfdb.sqlite"
rm -f "$DB" "$DB-wal" "$DB-shm"

# Issue 14's targets: winograd on the ResNet-50 and VGG-16 3x3 layers, fft on the seed and large
# kernels, implicit GEMM on the ResNet-50 1x1 layers. One run per file, so a file that runs out of
# time loses only its own results.
gpu_json=()
for f in seed_alexnet_conv1 resnet50 large_kernels vgg16; do
  step "tune $f.txt on cuda:0 (at most $BUDGET s a layer)"
  rc=0
  "$BUILD/autotune" tune --device cuda:0 --db "$DB" --json --budget "$BUDGET" \
    --batch "$LAYERS/$f.txt" >"$OUTDIR/gpu-$f.json" 2>"$OUTDIR/gpu-$f.log" || rc=$?
  tail -n 2 "$OUTDIR/gpu-$f.log"
  # Exit status 1 with JSON written: some layer had no correct candidate; its table row says so.
  [ -s "$OUTDIR/gpu-$f.json" ] && gpu_json+=("$OUTDIR/gpu-$f.json")
  [ "$rc" -eq 0 ] || FAILED="$FAILED tune:$f(exit status $rc)"
done
python3 -c 'import json, sys
out = []
for p in sys.argv[2:]:
    d = json.load(open(p))
    out += d if isinstance(d, list) else [d]
json.dump(out, open(sys.argv[1], "w"))' "$OUTDIR/gpu-tune.json" "${gpu_json[@]}"

step "tune the seed layers on the CPU"
"$BUILD/autotune" tune --device cpu --db "$DB" --json --budget "$BUDGET" \
  --batch "$LAYERS/seed_alexnet_conv1.txt" >"$OUTDIR/cpu-tune.json" 2>"$OUTDIR/cpu-tune.log"

step "tables (from $OUTDIR/gpu-tune.json and $OUTDIR/cpu-tune.json)"
python3 scripts/gpu_table.py "$OUTDIR/gpu-tune.json" "$OUTDIR/cpu-tune.json" |
  tee "$OUTDIR/gpu-tables.txt"

echo
if [ -n "$FAILED" ]; then
  echo "gpu-check: FAILED: $FAILED (done in $((SECONDS - START)) s)"
  exit 1
fi
echo "gpu-check: done in $((SECONDS - START)) s"
