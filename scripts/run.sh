#!/usr/bin/env bash
# The main job: install dependencies, build, then tune the seed question's layers
# (layers/seed_alexnet_conv1.txt) on the CPU, store the winners in the perf database
# and print the table. A second run reads the winners from the database instead of measuring,
# except winners measured under load ("noisy"), which it measures again.
# Extra arguments go to `autotune tune` (e.g. --force, --threads 2, --db PATH, --json).
set -euo pipefail
cd "$(dirname "$0")/.."
# Setup and build messages go to stderr, so that stdout is only the table (or the --json).
./scripts/setup.sh >&2
./scripts/build.sh autotune >&2  # the library and the CLI; not the tests
layers="${CONVTUNE_LAYERS:-$(pwd)/layers}"
exec ./build/autotune tune --batch "$layers/seed_alexnet_conv1.txt" "$@"
