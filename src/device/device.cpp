#include "conv/device.hpp"

#include <omp.h>
#include <pthread.h>

#include <cpu_features/cpuinfo_x86.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

#include "conv/error.hpp"
#include "device_ops.hpp"
#include "fork_guard.hpp"
#include "quoted.hpp"

namespace conv {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() < 9) {
    int index = 0;
    for (size_t i = 5; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) index = -1;
      if (index >= 0) index = index * 10 + (text[i] - '0');
    }
    if (index >= 0) return cuda(index);
  }
  throw Error("device: expected \"cpu\" or \"cuda:N\", got \"" + text + "\"");
}

std::string Device::name() const {
  return kind == Kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    const cpu_features::X86Features f = cpu_features::GetX86Info().features;
    CpuIsa detected = CpuIsa::scalar;
    if (f.avx2 && f.fma3) detected = CpuIsa::avx2;
    if (f.avx512f && f.avx512bw && f.avx512vl && f.fma3) detected = CpuIsa::avx512;
    // Like oneDNN's ONEDNN_MAX_CPU_ISA: run (and test) the narrower kernels on a wider CPU.
    const char* cap = std::getenv("CONVTUNE_MAX_ISA");
    if (!cap || !*cap) return detected;
    for (CpuIsa i : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512})
      if (std::string(cap) == to_string(i)) return std::min(i, detected);
    throw Error(std::string("CONVTUNE_MAX_ISA: expected scalar, avx2 or avx512, got \"") + cap +
                "\"");
  }();
  return isa;
}

const char* to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512:
      return "avx512";
    case CpuIsa::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

namespace {

// See fork_guard.hpp. Process state, not a cache: each is set once.
std::atomic<bool> omp_threads_started{false};
std::atomic<bool> forked_after_omp{false};

void mark_forked_child() {
  if (omp_threads_started.load()) forked_after_omp.store(true);
}

[[maybe_unused]] const int fork_handler_registered =
    pthread_atfork(nullptr, nullptr, mark_forked_child);

}  // namespace

int resolve_threads(int64_t threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw Error("threads: must be in [0, " + std::to_string(kMaxThreads) +
                "] (0 = the OpenMP default), got " + std::to_string(threads));
  if (forked_after_omp.load(std::memory_order_relaxed)) return 1;
  // OMP_NUM_THREADS may ask for more than the runtime can start (100000 crashed in GOMP_parallel).
  return threads > 0 ? static_cast<int>(threads) : std::min(omp_get_max_threads(), kMaxThreads);
}

void note_parallel_region(int threads) {
  if (threads > 1 && !omp_threads_started.load(std::memory_order_relaxed))
    omp_threads_started.store(true);
}

const char* version() {
  return CONVTUNE_VERSION;
}

const char* to_string(Timing t) {
  return t == Timing::hot ? "hot" : t == Timing::warm ? "warm" : "cold";
}

Timing parse_timing(const std::string& text) {
  if (text == "cold") return Timing::cold;
  if (text == "hot") return Timing::hot;
  if (text == "warm") return Timing::warm;
  throw Error("timing: expected cold, hot or warm, got " + quoted(text));
}

std::string Device::fingerprint(int threads, Timing timing) const {
  return device_ops(*this).fingerprint(threads) + "|timing=" + to_string(timing);
}

}  // namespace conv
