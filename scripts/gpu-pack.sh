#!/usr/bin/env bash
# Packs this machine's CUDA-enabled build for a GPU machine that lacks the project's Debian
# packages (BLIS, oneDNN, SQLite, ONNX, ...) and cannot install any, such as the lent H200:
# the binaries scripts/gpu-check.sh runs, every shared library they load except the C/C++
# runtime and the CUDA libraries (the GPU machine's own cuBLAS, cuFFT, cuDNN and CUDA runtime
# are used there), and the layer files. Writes one gzip-compressed tarball that
# `CONVTUNE_GPU_BUNDLE=FILE scripts/gpu-check.sh` unpacks instead of building.
#
# usage: scripts/gpu-pack.sh [BUILD_DIR (default build)] [OUT_FILE (default .gpu/convtune-gpu.tar.gz)]
# env:   CONVTUNE_LAYERS (default layers/)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD="${1:-build}"
OUT_FILE="${2:-.gpu/convtune-gpu.tar.gz}"
LAYERS="${CONVTUNE_LAYERS:-$(pwd)/layers}"

BINS=("$BUILD/autotune" "$BUILD/tests/test_cuda" "$BUILD/tests/test_cuda_index")
for f in "${BINS[@]}" "$BUILD/libconvtune_cuda.so"; do
  [ -x "$f" ] || { echo "gpu-pack: $f missing (build with CUDA first: scripts/build.sh)" >&2; exit 1; }
done

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bundle/tests" "$STAGE/bundle/lib" "$STAGE/bundle/layers"
cp "$BUILD/autotune" "$STAGE/bundle/"
cp "$BUILD/tests/test_cuda" "$BUILD/tests/test_cuda_index" "$STAGE/bundle/tests/"
cp "$LAYERS"/*.txt "$STAGE/bundle/layers/"

# The plugin must sit next to libconvtune (src/device_ops.cpp opens it from there).
cp -L "$BUILD/libconvtune_cuda.so" "$STAGE/bundle/lib/"
# Everything else the binaries and the plugin load, under the names the loader asks for.
SKIP='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcufft|libcudnn|libnvrtc|libnvJitLink)'
ldd "${BINS[@]}" "$BUILD/libconvtune_cuda.so" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
  sort -u | while read -r soname path; do
  if [[ ! "$soname" =~ $SKIP ]]; then cp -L "$path" "$STAGE/bundle/lib/$soname"; fi
done

mkdir -p "$(dirname "$OUT_FILE")"
tar -C "$STAGE" -cf - bundle | gzip -6 >"$OUT_FILE"
echo "gpu-pack: $OUT_FILE ($(du -h "$OUT_FILE" | cut -f1)): $(ls "$STAGE/bundle/lib" | tr '\n' ' ')"
