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
          libsqlite3-dev catch2 libcli11-dev nlohmann-json3-dev libcpu-features-dev
          libonnx-dev libprotobuf-dev protobuf-compiler)

probe_dir="$(mktemp -d)"
probe_log="$(mktemp)"
trap 'rm -rf "$probe_dir" "$probe_log"' EXIT
configures() {
  command -v cmake >/dev/null 2>&1 || return 1
  # A fresh folder each time: a failed configure caches its NOTFOUND results.
  rm -rf "$probe_dir" && mkdir -p "$probe_dir"
  cmake -S . -B "$probe_dir" -DCONVTUNE_CUDA=OFF -DCONVTUNE_BUILD_TESTS=ON >"$probe_log" 2>&1
}

if ! configures; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing ${packages[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${packages[@]}" >/dev/null
  if ! configures; then
    echo "setup: CMake still does not configure after installing the packages:" >&2
    cat "$probe_log" >&2
    exit 1
  fi
fi
echo "setup: all dependencies are installed (CMake configures)"

# The Python package (pip install ./, scripts/test.sh) needs pip and the Python headers.
python_ready() {
  python3 -m pip --version >/dev/null 2>&1 &&
    python3 -c 'import os, sysconfig, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      >/dev/null 2>&1
}
if ! python_ready; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "setup: installing python3-pip python3-dev"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    python3 python3-pip python3-dev >/dev/null
  python_ready || { echo "setup: python3 -m pip or Python.h still missing" >&2; exit 1; }
fi
echo "setup: python3 has pip and its headers"
