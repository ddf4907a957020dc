// conv::Device: where a convolution runs, and the fingerprint that keys the perf database.
#pragma once

#include <cstdint>
#include <string>

namespace conv {

/// How a time was measured, and so which callers it describes (part of the fingerprint):
/// - cold (default): the candidate's tensors, weights and workspace are evicted from the caches
///   before every timed run (x86 CLFLUSH, untimed), as a layer in a network meets them after the
///   other layers ran;
/// - hot: run back to back on the same buffers, as a layer called in a tight loop;
/// - warm: the cores' private caches (L1, L2) are swept before every timed run (untimed), so the
///   data waits in the last-level cache, as in a network that fits there.
/// A winner measured one way is never served for another.
enum class Timing { cold, hot, warm };
/// "cold", "hot" or "warm".
const char* to_string(Timing t);
/// Parses "cold", "hot" or "warm". Throws conv::Error naming "timing" for anything else.
Timing parse_timing(const std::string& text);

/// A compute device: the host CPU, or CUDA GPU number `index`.
struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu() { return Device{}; }
  static Device cuda(int i) { return Device{Kind::cuda, i}; }
  /// Parses "cpu" or "cuda:N" (also "cuda" = "cuda:0"). Throws conv::Error naming "device".
  static Device parse(const std::string& text);

  /// "cpu" or "cuda:N".
  std::string name() const;

  /// Text identifying this device and how it was timed for the perf database. CPU:
  /// "cpu|<brand>|<ISA level avx512/avx2/scalar>|threads=N|timing=<cold|hot|warm>", with
  /// "|onednn=<cap>" before "|threads" where ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) keeps oneDNN
  /// below that ISA level, and "|omp_wait=passive" there with OMP_WAIT_POLICY=passive; GPU: name,
  /// compute capability, SMs, memory, driver, runtime, cuDNN and cuBLAS versions, then
  /// "|timing=...". No convtune version: what changes with an upgrade is tracked per algorithm
  /// (Algorithm::version). Entries stored under another fingerprint are never used. `threads` = 0
  /// means the OpenMP default.
  std::string fingerprint(int threads = 0, Timing timing = Timing::cold) const;

  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
};

/// The instruction set the CPU kernels may use on this machine: detected with cpu_features, capped
/// by the environment variable CONVTUNE_MAX_ISA (scalar, avx2, avx512) when set. Throws
/// conv::Error naming CONVTUNE_MAX_ISA for another value.
enum class CpuIsa { scalar, avx2, avx512 };
CpuIsa cpu_isa();
const char* to_string(CpuIsa isa);

/// Most CPU threads a call may ask for: far past any CPU this runs on, and below the counts at
/// which the OpenMP runtime fails to start its threads (100000 crashed inside GOMP_parallel).
constexpr int kMaxThreads = 1024;

/// Resolves a thread count: 0 means omp_get_max_threads() (OMP_NUM_THREADS), at most
/// kMaxThreads; 1 in a process forked after a call of this one ran on more than one thread (GNU
/// OpenMP hangs starting threads there). Throws conv::Error ("threads") when it is negative or
/// above kMaxThreads.
int resolve_threads(int64_t threads);

/// convtune's version string ("MAJOR.MINOR.PATCH").
const char* version();

}  // namespace conv
