#!/usr/bin/env bash
# The accuracy sweep (not part of ctest: about 10x the suite's share): every CPU algorithm and
# config against the float64 reference under every test data distribution (uniform, all-positive,
# null bias, mixed magnitudes, sparse, constant), with 1 and 2 threads, one-shot and with packed
# weights, on PROBLEMS seeded random problems (default 1500) plus a quarter more 3x3 stride-1
# ones; then the problems that once broke cpu.fft's bound, and the normalized L2 error on the
# ResNet-50 3x3 layers. Prints the worst error / bound per algorithm and config; exits non-zero
# when any check fails.
# usage: scripts/accuracy-sweep.sh [PROBLEMS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tests/test_accuracy ] || ./scripts/build.sh test_accuracy
export CONVTUNE_ACCURACY_PROBLEMS="${1:-1500}"
t=build/tests/test_accuracy
"$t" "accuracy: the problems that broke cpu.fft bound under every distribution"
"$t" "accuracy: seeded random problems under every distribution with 1 and 2 threads"
"$t" "[.report]"
