#!/usr/bin/env bash
# The benchmark: tunes the given layer files (default: seed, ResNet-50, VGG-16, large kernels)
# with 2 threads into a scratch perf database and prints autotune's tables: every layer's
# winner, its median time and the ratio to cpu.onednn measured in the same run.
# Usage: scripts/bench.sh [layers-file.txt ...]   (extra autotune flags via AUTOTUNE_FLAGS)
set -euo pipefail
cd "$(dirname "$0")/.."
layers="${CONVTUNE_LAYERS:-$(pwd)/layers}"
[ -x build/autotune ] || ./scripts/build.sh autotune
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(seed_alexnet_conv1.txt resnet50.txt vgg16.txt large_kernels.txt)
db="$(mktemp -d)/bench.sqlite"
for f in "${files[@]}"; do
  [ -f "$f" ] || f="$layers/$f"
  echo "== $(basename "$f")"
  # shellcheck disable=SC2086
  ./build/autotune tune --batch "$f" --threads 2 --db "$db" --force ${AUTOTUNE_FLAGS:-}
  echo
done
rm -rf "$(dirname "$db")"
