#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite with ctest; then installs the
# Python package (pip install ./: scikit-build-core + nanobind) and runs its tests (pytest).
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
cd ..

# The Python package, into the python3 on PATH; its build dir build-wheel/ is kept between runs.
# Debian's own Python is "externally managed" (PEP 668) and pip warns about root: both are meant.
pip_flags=(--quiet)
pip_help="$(python3 -m pip install --help)"
for flag in --break-system-packages --root-user-action=ignore; do
  if grep -q -- "${flag%%=*}" <<<"$pip_help"; then pip_flags+=("$flag"); fi
done
python3 -m pip install "${pip_flags[@]}" "./[test]"
python3 -m pytest -q python/tests
