#!/usr/bin/env bash
# Configures and builds convtune (Release) into build/.
# usage: scripts/build.sh [TARGET...]   no target: everything (library, autotune, tests)
# env:   CONVTUNE_CMAKE_ARGS: extra cmake configure arguments (e.g. -DCONVTUNE_CUDA=OFF)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CONVTUNE_CMAKE_ARGS:-} >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"$(nproc)" "${targets[@]}"
