// BLIS's kernel set for cpu.im2col_gemm. BLIS picks a sub-configuration by CPU model once, when it
// starts, and on CPUs newer than the BLIS (Debian's 0.9.0 on an AMD Zen 5, family 26) falls back to
// its portable C kernels, several times slower than its x86-64 ones. So convtune starts BLIS
// itself, before its first BLIS call, with BLIS_ARCH_TYPE (which BLIS reads then, and only then)
// naming the sub-configuration of the ISA its own kernels run: cpu_isa(), which honours
// CONVTUNE_MAX_ISA, so a capped run also gets BLIS's narrower kernels. The variable is removed
// again once BLIS has read it, so child processes and other libraries never see it (POSIX does not
// make setenv safe against a getenv in another thread: the change lasts only while BLIS starts, in
// the first cpu.im2col_gemm call or version()). A BLIS_ARCH_TYPE the user set (non-empty) is left
// to BLIS, after a check that it names a sub-configuration this BLIS has and this CPU runs (BLIS
// aborts the process on any other, and its kernels trap on a CPU without their instructions).
#include "cpu/common/blis_arch.hpp"

#include <blis.h>
#include <cpu_features/cpuinfo_x86.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "conv/device.hpp"
#include "conv/error.hpp"

namespace conv::kernels {
namespace {

// Whether this BLIS was built with x86-64 sub-configuration `id` (BLIS_CONFIG_* in its blis.h)
// and this CPU has the instructions its kernels use.
bool runs_here(int64_t id) {
  const cpu_features::X86Features f = cpu_features::GetX86Info().features;
  switch (id) {
#ifdef BLIS_CONFIG_SKX
    case BLIS_ARCH_SKX:
      return f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl;
#endif
#ifdef BLIS_CONFIG_KNL
    case BLIS_ARCH_KNL:
      return f.avx512f && f.avx512pf && f.avx512er;
#endif
#ifdef BLIS_CONFIG_HASWELL
    case BLIS_ARCH_HASWELL:
#endif
#ifdef BLIS_CONFIG_ZEN3
    case BLIS_ARCH_ZEN3:
#endif
#ifdef BLIS_CONFIG_ZEN2
    case BLIS_ARCH_ZEN2:
#endif
#ifdef BLIS_CONFIG_ZEN
    case BLIS_ARCH_ZEN:
#endif
      return f.avx2 && f.fma3;
#ifdef BLIS_CONFIG_SANDYBRIDGE
    case BLIS_ARCH_SANDYBRIDGE:
      return f.avx;
#endif
#ifdef BLIS_CONFIG_PENRYN
    case BLIS_ARCH_PENRYN:
      return f.sse4_1;
#endif
#ifdef BLIS_CONFIG_EXCAVATOR
    case BLIS_ARCH_EXCAVATOR:
#endif
#ifdef BLIS_CONFIG_STEAMROLLER
    case BLIS_ARCH_STEAMROLLER:
#endif
#ifdef BLIS_CONFIG_PILEDRIVER
    case BLIS_ARCH_PILEDRIVER:
#endif
#ifdef BLIS_CONFIG_BULLDOZER
    case BLIS_ARCH_BULLDOZER:
#endif
      return f.avx && f.fma4;
#ifdef BLIS_CONFIG_GENERIC
    case BLIS_ARCH_GENERIC:
      return true;
#endif
    default:
      return false;
  }
}

// The sub-configuration for convtune's ISA, or -1 where this BLIS lacks it. On AMD AVX2 CPUs
// "zen3", whose sgemm kernels are haswell's with AMD's cache blocking (BLIS 0.9 uses the same
// kernels for zen and zen2).
int64_t arch_for(CpuIsa isa) {
  const bool amd = std::strcmp(cpu_features::GetX86Info().vendor, "AuthenticAMD") == 0;
  const int64_t id = isa == CpuIsa::avx512 ? BLIS_ARCH_SKX
                     : isa == CpuIsa::avx2 ? (amd ? BLIS_ARCH_ZEN3 : BLIS_ARCH_HASWELL)
                                           : BLIS_ARCH_GENERIC;
  return runs_here(id) ? id : -1;
}

// Throws conv::Error naming BLIS_ARCH_TYPE unless `value` is the decimal index of a
// sub-configuration this BLIS has and this CPU runs (BLIS would abort, or its kernels trap).
void check_user_arch(const char* value) {
  char* end = nullptr;
  const long id = std::strtol(value, &end, 10);
  if (*end == '\0' && id >= 0 && id < BLIS_NUM_ARCHS && runs_here(id)) return;
  std::string valid;
  for (int64_t i = 0; i < BLIS_NUM_ARCHS; ++i)
    if (runs_here(i))
      valid += (valid.empty() ? "" : ", ") + std::to_string(i) + " (" +
               bli_arch_string(static_cast<arch_t>(i)) + ")";
  throw Error(std::string("BLIS_ARCH_TYPE: \"") + value +
              "\" is not the index of a sub-configuration that this BLIS " +
              bli_info_get_version_str() + " was built with and this CPU can run; those are " +
              valid);
}

void start() {
  const char* user = std::getenv("BLIS_ARCH_TYPE");
  if (user && *user) {
    check_user_arch(user);
    bli_init();
    return;
  }
  // An empty value reads as index 0 ("skx") in BLIS 0.9: replaced (or removed, for BLIS's own
  // pick), then put back.
  const bool empty = user != nullptr;
  const int64_t id = arch_for(cpu_isa());
  if (id >= 0)
    setenv("BLIS_ARCH_TYPE", std::to_string(id).c_str(), 1);
  else if (empty)
    unsetenv("BLIS_ARCH_TYPE");
  bli_init();
  (void)bli_arch_query_id();  // sets BLIS's id once, from the variable as it is now
  if (empty)
    setenv("BLIS_ARCH_TYPE", "", 1);
  else if (id >= 0)
    unsetenv("BLIS_ARCH_TYPE");
}

}  // namespace

void blis_start() {
  // std::call_once retries after an exception, so a bad setting is reported on every call.
  static std::once_flag once;
  std::call_once(once, start);
}

std::string blis_kernels() {
  try {
    blis_start();
  } catch (const Error&) {
    // A setting BLIS cannot start with fails the BLIS calls (forward() throws); the version, which
    // the tuner and best_forward read for every candidate, stays available.
    return std::string(bli_info_get_version_str()) + ".unstarted";
  }
  return std::string(bli_info_get_version_str()) + "." + bli_arch_string(bli_arch_query_id());
}

}  // namespace conv::kernels
