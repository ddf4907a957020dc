#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
# Tests use their own temporary perf databases; this keeps a stray one out of ~/.cache.
export CONVTUNE_PERFDB="${CONVTUNE_PERFDB:-$(mktemp -d)/perfdb.sqlite}"
cd build
# One test at a time: every test runs OpenMP kernels on all cores, and two of them time-slicing
# the same cores make each barrier wait for a descheduled thread (measured: 4x slower overall).
ctest --output-on-failure "$@"
