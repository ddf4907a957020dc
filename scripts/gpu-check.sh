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
# usage: scripts/gpu-check.sh [extra cmake arguments]
# env:   CUDA_ARCH (default 90), CONVTUNE_LAYERS (default ../shared/layers)
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH="${CUDA_ARCH:-90}"
LAYERS="${CONVTUNE_LAYERS:-$(cd .. && pwd)/shared/layers}"
BUILD=build-gpu
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
for f in seed_alexnet_conv1.txt resnet50.txt vgg16.txt large_kernels.txt; do
  [ -r "$LAYERS/$f" ] || { echo "gpu-check: $LAYERS/$f not found (set CONVTUNE_LAYERS)" >&2; false; }
done

step "configure $BUILD (Release, CONVTUNE_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=$ARCH)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCONVTUNE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" "$@" >/dev/null

step "build with $JOBS jobs"
cmake --build "$BUILD" -j"$JOBS" --target autotune convtune_cuda test_cuda test_cuda_index

step "libconvtune links no CUDA library; the plugin is next to it"
LIB="$(ls "$BUILD"/libconvtune.so.* | head -n1)"
if readelf -d "$LIB" | grep -E 'NEEDED.*lib(cudart|cublas|cudnn|cufft)'; then
  echo "gpu-check: $LIB links a CUDA library (it must load the plugin at run time)" >&2
  false
fi
[ -r "$BUILD/libconvtune_cuda.so" ] || { echo "gpu-check: $BUILD/libconvtune_cuda.so missing" >&2; false; }

step "CPU-side tests of the CUDA kernels' per-thread programs (test_cuda_index)"
"$BUILD/tests/test_cuda_index"

step "CUDA tests on the GPU (test_cuda)"
rc=0
"$BUILD/tests/test_cuda" || rc=$?
if [ "$rc" -eq 77 ]; then
  echo "gpu-check: test_cuda found no usable CUDA device" >&2
  false
elif [ "$rc" -ne 0 ]; then
  echo "gpu-check: test_cuda failed with exit status $rc" >&2
  false
fi

DB="$BUILD/gpu-check-perfdb.sqlite"
rm -f "$DB" "$DB-wal" "$DB-shm"

# Issue 14's targets: winograd on the ResNet-50 and VGG-16 3x3 layers, fft on the seed and large
# kernels, implicit GEMM on the ResNet-50 1x1 layers.
step "tune the seed, ResNet-50, VGG-16 and large-kernel layers on cuda:0"
"$BUILD/autotune" tune --device cuda:0 --db "$DB" --json --budget 20 \
  --batch "$LAYERS/seed_alexnet_conv1.txt" --batch "$LAYERS/resnet50.txt" \
  --batch "$LAYERS/vgg16.txt" --batch "$LAYERS/large_kernels.txt" >"$BUILD/gpu-tune.json"

step "tune the seed layers on the CPU"
"$BUILD/autotune" tune --device cpu --db "$DB" --json \
  --batch "$LAYERS/seed_alexnet_conv1.txt" >"$BUILD/cpu-tune.json"

step "tables (from $BUILD/gpu-tune.json and $BUILD/cpu-tune.json)"
python3 scripts/gpu_table.py "$BUILD/gpu-tune.json" "$BUILD/cpu-tune.json"

echo
echo "gpu-check: done in $((SECONDS - START)) s"
