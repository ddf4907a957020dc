#!/usr/bin/env bash
# Checks the AVX-512 kernels on this machine, AVX-512 or not: every config of the own CPU
# algorithms runs under the Bochs emulator (bochscpu-python from PyPI, installed here into the
# python3 on PATH) and is compared with the float64 reference. Needs the build (scripts/build.sh).
# Arguments go to scripts/emulate_avx512.py (--help): default the fixed small problems; e.g.
# --layers 0.1 for every layer of layers/ shrunk to 0.1 GFLOP.
# Exit status: 0 all matched, 1 a kernel failed, 77 the emulator could not be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
skip() {
  echo "emulate-avx512: $1: AVX-512 not checked" >&2
  exit 77
}
python3 -m pip --version >/dev/null 2>&1 || skip "python3 has no pip"
source scripts/pip-flags.sh
python3 -m pip install "${pip_flags[@]}" "bochscpu-python==0.4.0" >&2 ||
  skip "could not install bochscpu-python from PyPI"
# Its wheel wants glibc 2.38's C23 symbol names; older glibc has the same functions under the
# old ones (tests/emulate/glibc_isoc23.c). Only the emulating Python gets the shim.
if ! python3 -c "import bochscpu" 2>/dev/null; then
  cc -shared -fPIC -O2 -o "$build/emulate-glibc-isoc23.so" tests/emulate/glibc_isoc23.c ||
    skip "could not build the glibc shim"
  export CONVTUNE_EMULATE_PRELOAD="$PWD/$build/emulate-glibc-isoc23.so"
  LD_PRELOAD="$CONVTUNE_EMULATE_PRELOAD" python3 -c "import bochscpu" ||
    skip "the bochscpu module does not load here"
fi
as tests/emulate/syscalls.s -o "$build/emulate-syscalls.o"
objcopy -O binary -j .text "$build/emulate-syscalls.o" "$build/emulate-syscalls.bin"
exec python3 scripts/emulate_avx512.py --tool "$build/tests/avx512_snapshot" \
  --syscalls "$build/emulate-syscalls.bin" "$@"
