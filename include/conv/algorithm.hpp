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

/// Bytes of the tag at the start of a CPU algorithm's packed weights (Algorithm::pack_weights),
/// before the algorithm's own layout.
constexpr size_t kPackedWeightsTagBytes = 64;

/// One registered strategy on one device (docs/architecture.md, "The Algorithm interface").
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

  // The public queries below are non-virtual: each checks its arguments (ConvProblem::validate()
  // first, so that no algorithm divides by a zero stride or group count) and then calls the
  // algorithm's private do_*() override.

  /// Whether this algorithm handles `p`, with the reason when not (a "field: ..." message).
  /// Throws conv::Error for an invalid problem (ConvProblem::validate's message).
  Applicability applicable(const ConvProblem& p) const;

  /// The tuning space for an applicable problem: at least one config string, default first.
  /// Throws conv::Error for an invalid problem.
  std::vector<std::string> configs(const ConvProblem& p) const;

  /// Scratch bytes forward() needs for (p, config); exact, may be 0. Throws conv::Error for an
  /// invalid problem, one applicable() refuses (with its reason), or an unknown config.
  size_t workspace_bytes(const ConvProblem& p, const std::string& config) const;

  /// Runs the convolution: y = conv(x, w) + bias for the tensors in `args` (NCHW x and y, KCRS w).
  /// Checks first what every algorithm needs, so that no caller can reach a kernel with input it
  /// was not written for: throws conv::Error for an invalid problem (ConvProblem::validate's
  /// message), a problem applicable() refuses (its reason, which names the field), a null x or y
  /// ("x: ...", "y: ..."), a null w where `packed_weights` is null or the config packs nothing
  /// ("w: ..."), packed weights that pack_weights() did not make for this algorithm, config and
  /// problem ("packed_weights: ..."; CPU algorithms, whose packed buffers start with a 64-byte
  /// tag; a CUDA algorithm's device buffer carries none, since reading one back would synchronise
  /// every call: one packed for another config or problem is undefined behaviour there, which a
  /// Plan never does), or threads outside [0, kMaxThreads] ("threads: ..."; 0 = the OpenMP
  /// default). The algorithm then throws for an unknown config ("config: ..."), a workspace
  /// smaller than workspace_bytes() ("workspace: ..."), or a failed library call.
  void forward(const ConvProblem& p, const std::string& config, const ForwardArgs& args) const;

  /// The accuracy contract (docs/architecture.md, "Tolerance per algorithm"): for fp32 data, every
  /// output o satisfies |y_o - y_ref_o| <= error_bound(p, config) * s_o, where the error scale s_o
  /// = |bias_k| + sum |x*w| over o's receptive field + the term add_error_scale() adds (nothing for
  /// exact-order algorithms). The normalized error is max_o |y_o - y_ref_o| / s_o; the tuner
  /// rejects a candidate whose normalized error exceeds the bound, and reports besides it the
  /// per-output relative error max_o |y_o - y_ref_o| / (|bias_k| + sum |x*w|). Throws
  /// conv::Error for an invalid problem or an unknown config.
  double error_bound(const ConvProblem& p, const std::string& config) const;

  /// Adds to scale[o] (N*K*OH*OW values, NCHW) the magnitude beyond o's own receptive field that
  /// this algorithm's rounding scales with, for the fp32 host tensors x (NCHW) and w (KCRS).
  /// Transform-based algorithms mix a whole tile into every output of it, so their error follows
  /// the tile's magnitude, not the output's own terms (see cpu.fft and cpu.winograd). Default:
  /// adds nothing. Throws conv::Error for an invalid problem, an unknown config, null x, w or
  /// scale, or threads outside [0, kMaxThreads].
  void add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                       const float* w, double* scale, int threads) const;

  /// Bytes of pre-transformed weights for a Plan (for CPU algorithms including a 64-byte tag
  /// naming algorithm, config and problem), or 0 when this config does not pack. Throws
  /// conv::Error for an invalid problem, one applicable() refuses (with its reason), or an
  /// unknown config.
  size_t packed_weights_bytes(const ConvProblem& p, const std::string& config) const;

  /// Transforms KCRS weights `w` into `packed` (packed_weights_bytes() bytes, host memory for
  /// CPU algorithms, device memory for CUDA ones), once per Plan. Throws conv::Error as forward()
  /// for the problem and threads, for a null w or packed ("w: ...", "packed: ..."), an unknown
  /// config, and a config that packs nothing ("config: ...").
  void pack_weights(const ConvProblem& p, const std::string& config, const float* w, void* packed,
                    int threads) const;

 private:
  // What each algorithm implements, called by the public functions above once their checks
  // passed: a valid problem, for do_forward(), do_pack_weights(), do_workspace_bytes() and
  // do_packed_weights_bytes() one applicable() accepts, non-null tensors, threads resolved to
  // [1, kMaxThreads], packed weights without their tag.
  virtual Applicability do_applicable(const ConvProblem& p) const = 0;
  virtual std::vector<std::string> do_configs(const ConvProblem& p) const = 0;
  virtual size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const = 0;
  virtual void do_forward(const ConvProblem& p, const std::string& config,
                          const ForwardArgs& args) const = 0;
  virtual double do_error_bound(const ConvProblem& p, const std::string& config) const;
  virtual void do_add_error_scale(const ConvProblem& /*p*/, const std::string& /*config*/,
                                  const float* /*x*/, const float* /*w*/, double* /*scale*/,
                                  int /*threads*/) const {}
  virtual size_t do_packed_weights_bytes(const ConvProblem& /*p*/,
                                         const std::string& /*config*/) const {
    return 0;
  }
  virtual void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                               void* packed, int threads) const;
  // The workspace forward() needs with packed weights: less than do_workspace_bytes() where
  // the one-shot workspace holds transformed weights that the packed ones replace.
  virtual size_t do_packed_workspace_bytes(const ConvProblem& p, const std::string& config) const {
    return do_workspace_bytes(p, config);
  }
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
