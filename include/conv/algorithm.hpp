// conv::Algorithm: the interface every convolution strategy implements, and the registry view.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "conv/device.hpp"
#include "conv/problem.hpp"

namespace conv {

/// Whether an algorithm can run a problem; `reason` says why not (oneDNN-style init checks).
struct Applicability {
  bool ok = true;
  std::string reason;
  static Applicability yes() { return {}; }
  static Applicability no(std::string why) { return {false, std::move(why)}; }
};

/// How an algorithm's rounding error behaves.
enum class NumericClass {
  exact_order,     ///< sums the same products as direct convolution (direct, im2col+GEMM, oneDNN)
  transform_based  ///< works in a transformed domain (Winograd, FFT): looser, tile-dependent bound
};

/// Everything one forward call reads and writes. Pointers are host pointers for CPU algorithms
/// and device pointers for CUDA ones.
struct ForwardArgs {
  const float* x = nullptr;              ///< N x C x H x W
  const float* w = nullptr;              ///< K x C/g x R x S; ignored when packed_weights is set
  const float* bias = nullptr;           ///< K, or null for no bias
  float* y = nullptr;                    ///< N x K x OH x OW, every element written
  void* workspace = nullptr;             ///< scratch of at least workspace_bytes(problem, config)
  size_t workspace_size = 0;             ///< bytes available at `workspace`
  const void* packed_weights = nullptr;  ///< from pack_weights() for the same problem+config
  int threads = 1;  ///< CPU threads, 0 = the OpenMP default, at most kMaxThreads (device.hpp)
  void* stream = nullptr;  ///< cudaStream_t for CUDA algorithms; null = default stream
};

/// One registered strategy on one device (DESIGN.md, "The Algorithm interface").
/// Implementations are stateless apart from caches (e.g. oneDNN primitives) and thread-safe.
class Algorithm {
 public:
  virtual ~Algorithm() = default;

  /// Stable id, e.g. "cpu.direct"; never renamed once it has appeared in a perf database.
  virtual std::string_view id() const = 0;
  /// Implementation version, e.g. "3" or, for a vendor wrapper, "1+onednn.2.6.3": changed
  /// whenever the kernels change (code or library). The perf database keeps it with every
  /// measurement; a stored winner stands only while the versions of all the candidates it was
  /// chosen from are current, and `autotune tune` re-measures the candidates whose version changed.
  virtual std::string version() const = 0;
  virtual Device::Kind device() const = 0;
  virtual NumericClass numeric_class() const = 0;

  /// Whether this algorithm handles `p` (already validated), with the reason when not.
  virtual Applicability applicable(const ConvProblem& p) const = 0;

  /// The tuning space for an applicable problem: at least one config string, default first.
  virtual std::vector<std::string> configs(const ConvProblem& p) const = 0;

  /// Scratch bytes forward() needs for (p, config); exact, may be 0.
  virtual size_t workspace_bytes(const ConvProblem& p, const std::string& config) const = 0;

  /// Runs the convolution: y = conv(x, w) + bias for the tensors in `args` (NCHW x and y, KCRS w).
  /// Checks first what every algorithm needs, so that no caller can reach a kernel with input it
  /// was not written for: throws conv::Error for an invalid problem (ConvProblem::validate's
  /// message), a problem applicable() refuses (its reason, which names the field), a null x or y
  /// ("x: ...", "y: ..."), a null w without packed weights this algorithm made ("w: ..."), or
  /// threads outside [0, kMaxThreads] ("threads: ..."; 0 = the OpenMP default). The algorithm
  /// then throws for an unknown config ("config: ..."), a workspace smaller than
  /// workspace_bytes() ("workspace: ..."), or a failed library call.
  void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& args) const;

  /// The accuracy contract (DESIGN.md, "Tolerance per algorithm"): for fp32 data, every output o
  /// satisfies |y_o - y_ref_o| <= error_bound(p, config) * s_o, where the error scale s_o =
  /// |bias_k| + sum |x*w| over o's receptive field + the term add_error_scale() adds (nothing for
  /// exact-order algorithms). The normalized error is max_o |y_o - y_ref_o| / s_o; the tuner
  /// rejects a candidate whose normalized error exceeds the bound, and reports besides it the
  /// per-output relative error max_o |y_o - y_ref_o| / (|bias_k| + sum |x*w|).
  virtual double error_bound(const ConvProblem& p, const std::string& config) const;

  /// Adds to scale[o] (N*K*OH*OW values, NCHW) the magnitude beyond o's own receptive field that
  /// this algorithm's rounding scales with, for the fp32 host tensors x (NCHW) and w (KCRS).
  /// Transform-based algorithms mix a whole tile into every output of it, so their error follows
  /// the tile's magnitude, not the output's own terms (see cpu.fft and cpu.winograd). Default:
  /// adds nothing. Throws conv::Error for an unknown config.
  virtual void add_error_scale(const ConvProblem& /*p*/, const std::string& /*config*/,
                               const float* /*x*/, const float* /*w*/, double* /*scale*/,
                               int /*threads*/) const {}

  /// Bytes of pre-transformed weights for a Plan, or 0 when the algorithm does not pack.
  virtual size_t packed_weights_bytes(const ConvProblem& /*p*/,
                                      const std::string& /*config*/) const {
    return 0;
  }
  /// Transforms KCRS weights `w` into `packed` (packed_weights_bytes() bytes), once per Plan.
  /// Throws conv::Error as forward() for the problem, a null w or packed ("w: ...", "packed: ..."),
  /// and threads; for an unknown config; and when the algorithm does not pack weights.
  void pack_weights(const ConvProblem& p, const std::string& config, const float* w, void* packed,
                    int threads) const;

 private:
  /// forward() and pack_weights() once their checks passed (threads resolved to >= 1).
  virtual void do_forward(const ConvProblem& p, const std::string& config,
                          const ForwardArgs& args) const = 0;
  virtual void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                               void* packed, int threads) const;
};

/// Error bound for exact-order algorithms summing `n` = C/g*R*S products in fp32:
/// 16 * u * sqrt(n) + 8 * u with u = 2^-24 (statistical rounding growth with a safety factor).
double exact_order_error_bound(const ConvProblem& p);

/// The error scale s_o of the accuracy contract (Algorithm::error_bound) for every output:
/// `abs_sum` (|bias| + sum |x*w| per output, as ref::forward computes it) plus
/// algo.add_error_scale(p, config, x, w). Host tensors; N*K*OH*OW values.
std::vector<double> error_scale(const Algorithm& algo, const ConvProblem& p,
                                const std::string& config, const float* x, const float* w,
                                const double* abs_sum, int threads);

/// All registered algorithms in kernels/registry.cpp's order, minus those named in the
/// comma-separated environment variable CONVTUNE_DISABLE (e.g. "cpu.fft,cuda.winograd"). An id
/// there that names no algorithm is reported on stderr once per process, with the known ids.
std::vector<const Algorithm*> registry();

/// Every registered algorithm, those named in CONVTUNE_DISABLE included.
const std::vector<const Algorithm*>& all_algorithms();

/// The registered algorithm with this id (disabled ones included: null only when unknown).
const Algorithm* find_algorithm(std::string_view id);

}  // namespace conv
