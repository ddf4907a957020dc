#!/usr/bin/env bash
# Fails when clang-format (the repository's .clang-format) would change any tracked C++ or CUDA
# file, listing them (`scripts/check-format.sh --fix` rewrites them instead), or when a commit
# subject since the house rule (commit 05a15d8) is longer than 72 characters. CI runs it first.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    clang-format >/dev/null
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h' '*.c')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check-format: clang-format would change ${#bad[@]} file(s) (scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted as .clang-format says"

# Commit subjects: at most 72 characters, details in the body (older history is exempt; a
# shallow clone without that commit checks nothing).
rule=05a15d80662fbe57c787e2c8e9ab038253b5407d
if git cat-file -e "$rule^{commit}" 2>/dev/null; then
  long=$(git log --format='%s' "$rule..HEAD" | awk 'length($0) > 72')
  if [ -n "$long" ]; then
    echo "check-format: commit subjects longer than 72 characters (put the detail in the body):" >&2
    echo "$long" >&2
    exit 1
  fi
  echo "check-format: commit subjects since ${rule:0:7} are at most 72 characters"
fi
