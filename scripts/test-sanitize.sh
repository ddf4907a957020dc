#!/usr/bin/env bash
# The tests that feed convtune untrusted input, built with AddressSanitizer (LeakSanitizer on)
# and UndefinedBehaviorSanitizer (g++, -DCONVTUNE_SANITIZE=address,undefined) into build-asan/:
# the unit tests and the integration tests of the CLI, the perf database files and model import
# (ONNX, Caffe), each test case once (not its "(avx2 cap)" copy). The kernel tests, best_forward's
# and the install test are left out to keep CI within its budget (docs/testing.md). A sanitizer
# report fails its test (UBSan does not recover). CI runs it after scripts/test.sh.
# usage: scripts/test-sanitize.sh [CTEST ARGS...]
# env:   CONVTUNE_CMAKE_ARGS: extra cmake configure arguments (CI: -DCONVTUNE_WERROR=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# shellcheck disable=SC2086
cmake -S . -B build-asan -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCONVTUNE_SANITIZE=address,undefined -DCONVTUNE_CUDA=OFF ${CONVTUNE_CMAKE_ARGS:-} >/dev/null
# Only these test programs are built; ctest skips the tests of the others (unlabelled
# "..._NOT_BUILT" entries, which the label filter below leaves out).
tests=(test_problem test_descriptor test_measure test_perfdb test_cli test_perfdb_layers
       test_import_onnx test_import_onnx_shapes test_import_hostile test_import_caffe)
build=()
for t in "${tests[@]}"; do build+=(--target "$t"); done
cmake --build build-asan -j"$(nproc)" "${build[@]}"

# allocator_may_return_null: a failed allocation returns null, as in a normal build, where the
# tests of failing allocations expect it (ASan would abort). LeakSanitizer stays on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
export CONVTUNE_PERFDB="${CONVTUNE_PERFDB:-$(mktemp -d)/perfdb.sqlite}"
cd build-asan
ctest --output-on-failure -L 'unit|integration' \
  -E "\\(avx2 cap\\)|^install_and_consume\$|^example_" "$@"
