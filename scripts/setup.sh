#!/usr/bin/env bash
# Installs convtune's build dependencies from Debian packages (apt-get; root or sudo).
#
# "Installed" means "CMake configures": the check is a configure of the project (tests on, CUDA
# off) into a scratch folder, so a package that a dependency's CMake config needs but Debian only
# recommends (libdnnl-dev -> OpenCL ICD dev files) is caught here, not by a hand-kept list.
# Packages go in with --no-install-recommends, as on a minimal image.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(cmake g++ make libblis-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
          libsqlite3-dev catch2 libcli11-dev nlohmann-json3-dev libcpu-features-dev)

probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
configures() {
  command -v cmake >/dev/null 2>&1 || return 1
  cmake -S . -B "$probe_dir" -DCONVTUNE_CUDA=OFF -DCONVTUNE_BUILD_TESTS=ON \
    >"$probe_dir.log" 2>&1
}

if configures; then
  echo "setup: all dependencies are installed (CMake configures)"
  rm -f "$probe_dir.log"
  exit 0
fi

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "setup: installing ${packages[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
  "${packages[@]}" >/dev/null
rm -rf "$probe_dir" && mkdir -p "$probe_dir"
if ! configures; then
  echo "setup: CMake still does not configure after installing the packages:" >&2
  cat "$probe_dir.log" >&2
  rm -f "$probe_dir.log"
  exit 1
fi
rm -f "$probe_dir.log"
echo "setup: all dependencies are installed (CMake configures)"
