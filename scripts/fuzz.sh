#!/usr/bin/env bash
# Fuzzes the importers of untrusted files (issue 59) with libFuzzer: builds the targets of fuzz/
# with clang, ASan and UBSan into build-fuzz/ (-DCONVTUNE_FUZZ=ON) and runs each for SECONDS
# from its seeds (fuzz/corpus/TARGET/) with its dictionary (fuzz/TARGET.dict), each input
# limited to 5 s and the process to 2 GB. Exits 1 when a target finds something: the inputs are
# left in build-fuzz/findings/TARGET-DATE-TIME/ (crash-*, timeout-*, oom-*, leak-*), the run's
# log beside it, and each is replayed for its one-line reason; reproduce one with
# `build-fuzz/fuzz/fuzz_TARGET FILE`. What the runs add to the corpus stays in
# build-fuzz/corpus/TARGET/ for the next run (fuzz/corpus/ holds only the reviewed seeds).
# usage: scripts/fuzz.sh [TARGET] [SECONDS]   TARGET: onnx, caffe, db_import or all (default);
#                                             SECONDS per target, default 600
# env:   FUZZ_ARGS: more libFuzzer flags (a flag given again wins), e.g. "-fork=2" for 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-all}"
seconds="${2:-600}"
case "$target" in
  all) targets=(onnx caffe db_import) ;;
  onnx | caffe | db_import) targets=("$target") ;;
  *)
    echo "usage: scripts/fuzz.sh [onnx|caffe|db_import|all] [SECONDS]" >&2
    exit 2
    ;;
esac
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: SECONDS: expected a positive integer, got \"$seconds\"" >&2
  exit 2
fi

# clang with libFuzzer's runtime and OpenMP (Debian: clang, libclang-rt-dev, libomp-dev); the
# rest of the dependencies as for every build.
./scripts/setup.sh >/dev/null
if ! command -v clang++ >/dev/null 2>&1 || ! compgen -G "/usr/lib/llvm-*/lib/libomp.so" >/dev/null ||
  ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "fuzz.sh: installing clang libclang-rt-dev libomp-dev"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang libclang-rt-dev libomp-dev >/dev/null
fi

cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCONVTUNE_FUZZ=ON -DCONVTUNE_BUILD_TESTS=OFF -DCONVTUNE_CUDA=OFF >/dev/null
build=()
for t in "${targets[@]}"; do build+=(--target "fuzz_$t"); done
cmake --build build-fuzz -j"$(nproc)" "${build[@]}"

found=()
stamp=$(date +%Y%m%d-%H%M%S)
for t in "${targets[@]}"; do
  corpus="build-fuzz/corpus/$t"
  findings="build-fuzz/findings/$t-$stamp"
  mkdir -p "$corpus" "$findings"
  echo "fuzz.sh: fuzz_$t for ${seconds} s (log: $findings.log)"
  # Fork mode goes on past a crash (the ONNX seeds include files that crash ONNX 1.12's shape
  # inference), so one run reports every kind it meets; each finding is a file in $findings.
  status=0
  # shellcheck disable=SC2086
  "build-fuzz/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=5 -dict="fuzz/$t.dict" \
    -artifact_prefix="$findings/" ${FUZZ_ARGS:-} "$corpus" "fuzz/corpus/$t" >"$findings.log" 2>&1 ||
    status=$?
  grep -E '^#[0-9]+: cov:' "$findings.log" | tail -n1 || true
  mapfile -t files < <(find "$findings" -type f | sort)
  if [ "$status" -ne 0 ]; then
    found+=("$t")
    echo "fuzz.sh: fuzz_$t exited $status: $(grep -m1 -E '^SUMMARY: |ERROR: ' "$findings.log" ||
      tail -n1 "$findings.log")" >&2
  elif [ "${#files[@]}" -eq 0 ]; then
    rmdir "$findings"
    continue
  else
    found+=("$t")
  fi
  echo "fuzz.sh: fuzz_$t FOUND ${#files[@]} input(s) in $findings/; the first 20 replayed:" >&2
  # Each input once more, alone, for the sanitizer's or libFuzzer's one-line reason.
  for f in "${files[@]:0:20}"; do
    out=$("build-fuzz/fuzz/fuzz_$t" -timeout=5 -rss_limit_mb=2048 "$f" 2>&1 || true)
    why=$(grep -m1 '^SUMMARY: ' <<<"$out" || grep -m1 -E 'ERROR: ' <<<"$out" || true)
    echo "  $(basename "$f"): ${why:-(not reproduced alone)}" >&2
  done
done
if [ "${#found[@]}" -gt 0 ]; then
  echo "fuzz.sh: findings in ${found[*]} (build-fuzz/findings/)" >&2
  exit 1
fi
echo "fuzz.sh: nothing found in ${targets[*]} (${seconds} s each)"
