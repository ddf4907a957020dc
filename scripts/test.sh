#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite with ctest; then installs the
# Python package (pip install ./: scikit-build-core + nanobind) and runs its tests (pytest); then
# checks the AVX-512 kernels under the Bochs emulator (scripts/emulate-avx512.sh).
# usage: scripts/test.sh [--quick] [CTEST ARGS...]
#   --quick: only the ctest tests labelled `quick` (unit and kernel tests as the CPU runs them,
#            the examples; about 3 minutes after a build), no Python and no emulator: the
#            edit-compile-test loop. Without it: everything, the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
./scripts/setup.sh
./scripts/build.sh
# Tests use their own temporary perf databases; this keeps a stray one out of ~/.cache.
export CONVTUNE_PERFDB="${CONVTUNE_PERFDB:-$(mktemp -d)/perfdb.sqlite}"
cd build
# One test at a time: every test runs OpenMP kernels on all cores, and two of them time-slicing
# the same cores make each barrier wait for a descheduled thread (measured: 4x slower overall).
if [ "$quick" -eq 1 ]; then
  exec ctest --output-on-failure -L quick "$@"
fi
ctest --output-on-failure "$@"
cd ..

# The Python package, into the python3 on PATH; its build dir build-wheel/ is kept between runs.
source scripts/pip-flags.sh
python3 -m pip install "${pip_flags[@]}" "./[test]"
python3 -m pytest -q python/tests

# The AVX-512 kernels under an emulator with AVX-512, whatever this CPU has (exit 77: the emulator
# could not be installed, which is reported and not a failure).
status=0
./scripts/emulate-avx512.sh || status=$?
if [ "$status" -eq 77 ]; then
  echo "test.sh: the AVX-512 emulation was skipped (see above)"
elif [ "$status" -ne 0 ]; then
  exit "$status"
fi
