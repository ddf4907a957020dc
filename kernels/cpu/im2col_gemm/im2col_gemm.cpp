// cpu.im2col_gemm: Caffe's convolution (Jia et al., "Caffe", 2014; Chellapilla et al. 2006).
// Per image and group, im2col unrolls the input into a (C/g*R*S) x (OH*OW) column matrix in the
// workspace, then a BLIS sgemm multiplies the (K/g) x (C/g*R*S) weights by it; bias is written
// into y first and the GEMM accumulates onto it (beta = 1). A 1x1 / stride 1 / pad 0 / dilation 1
// problem is already a GEMM on the input: no im2col, no workspace.
// Configs: "blis" lets BLIS thread one GEMM per image and group; "cols" and "rows" give each
// thread its own block of output positions (columns; its im2col, bias fill and GEMM run back to
// back on data in its own caches) or of output channels (rows of the weights), each a
// single-threaded BLIS sgemm. "oc6ow49_avx512" (AVX-512 CPUs, 49 output positions) runs its own
// im2col and GEMM instead (oc6ow49.hpp), faster there than BLIS's best config.
// Cost: N*K*C/g*R*S*OH*OW FMAs in the GEMM plus N*C*R*S*OH*OW copies for im2col.
// Workspace: C/g*R*S*OH*OW*4 bytes (0 for the 1x1 case); "oc6ow49_avx512": see oc6ow49.hpp.
#include <blis.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "conv/algorithm.hpp"
#include "cpu/common/blis_arch.hpp"
#include "cpu/im2col_gemm/oc6ow49.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

bool is_pointwise(const ConvProblem& p) {
  return p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
}

// Unrolls columns [j0, j1) (output positions) of one group of one image: row (c, r, s) of
// `col` holds the input pixel each output position reads through kernel tap (r, s) of channel
// c, or 0 where it reads padding.
void im2col_row(const ConvProblem& p, const float* x, float* col, int64_t row, int64_t j0,
                int64_t j1) {
  const int64_t OW = p.OW();
  const int64_t c = row / (p.R * p.S), r = row / p.S % p.R, s = row % p.S;
  const float* xc = x + c * p.H * p.W;
  float* out = col + row * p.OH() * OW;
  const int64_t iw0 = s * p.dilation_w - p.pad_left;
  for (int64_t j = j0; j < j1;) {
    const int64_t oh = j / OW, ow0 = j % OW, ow1 = std::min(OW, ow0 + j1 - j);
    const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
    float* o = out + oh * OW;
    if (ih < 0 || ih >= p.H) {
      std::memset(o + ow0, 0, (ow1 - ow0) * sizeof(float));
    } else {
      const float* xr = xc + ih * p.W;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t iw = iw0 + ow * p.stride_w;
        o[ow] = (iw >= 0 && iw < p.W) ? xr[iw] : 0.0f;
      }
    }
    j += ow1 - ow0;
  }
}

class Im2colGemm final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.im2col_gemm"; }
  // BLIS does the work: another BLIS, or another of its kernel sets, is another implementation.
  // Raised whenever the kernels change, so that winners stored against older code are measured
  // again (the history of versions: docs/measurements.md).
  std::string version() const override { return "2+blis." + blis_kernels(); }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability do_applicable(const ConvProblem&) const override { return Applicability::yes(); }
  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> configs = {"blis", "cols", "rows"};
    if (oc6ow49::offered(p)) configs.push_back(oc6ow49::kConfig);
    return configs;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    if (config == oc6ow49::kConfig) return oc6ow49::workspace_bytes(p);
    if (is_pointwise(p)) return 0;
    return static_cast<size_t>(p.Cg() * p.R * p.S) * p.OH() * p.OW() * sizeof(float);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const bool own = config == oc6ow49::kConfig;
    if (config != "blis" && config != "cols" && config != "rows" && !own)
      throw Error(std::string("config: cpu.im2col_gemm has \"blis\", \"cols\", \"rows\" and, on "
                              "AVX-512 CPUs for 49 output positions, \"") +
                  oc6ow49::kConfig + "\", got \"" + config + "\"");
    if (own) {
      oc6ow49::forward(p, a);
      return;
    }
    blis_start();
    if (config == "blis")
      blis_threaded(p, a);
    else
      split(p, a, config == "cols");
  }

 private:
  // C (Kg x OHW, row stride OHW) = bias + A (Kg x CRS) * B (CRS x OHW, row stride OHW), rows
  // [k0, k1) and columns [j0, j1) only, with `rntm`'s threads.
  static void gemm(const ConvProblem& p, const float* w, const float* b, const float* rhs, float* y,
                   int64_t k0, int64_t k1, int64_t j0, int64_t j1, rntm_t* rntm) {
    const int64_t OHW = p.OH() * p.OW(), CRS = p.Cg() * p.R * p.S;
    if (k1 <= k0 || j1 <= j0) return;
    for (int64_t k = k0; k < k1; ++k) std::fill(y + k * OHW + j0, y + k * OHW + j1, b ? b[k] : 0.f);
    float one = 1.0f;
    // BLIS takes non-const operands but does not write A or B.
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, k1 - k0, j1 - j0, CRS, &one,
                 const_cast<float*>(w + k0 * CRS), CRS, 1, const_cast<float*>(rhs + j0), OHW, 1,
                 &one, y + k0 * OHW + j0, OHW, 1, nullptr, rntm);
  }

  static void blis_threaded(const ConvProblem& p, const ForwardArgs& a) {
    const int64_t OHW = p.OH() * p.OW(), Kg = p.Kg(), Cg = p.Cg(), CRS = Cg * p.R * p.S;
    float* col = static_cast<float*>(a.workspace);
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(a.threads, &rntm);
    for (int64_t n = 0; n < p.N; ++n) {
      for (int64_t g = 0; g < p.groups; ++g) {
        const float* x = a.x + (n * p.C + g * Cg) * p.H * p.W;
        const float* rhs = x;
        if (!is_pointwise(p)) {
#pragma omp parallel for schedule(static) num_threads(a.threads)
          for (int64_t row = 0; row < CRS; ++row) im2col_row(p, x, col, row, 0, OHW);
          rhs = col;
        }
        gemm(p, a.w + g * Kg * CRS, a.bias ? a.bias + g * Kg : nullptr, rhs,
             a.y + (n * p.K + g * Kg) * OHW, 0, Kg, 0, OHW, &rntm);
      }
    }
  }

  // Each thread one block of columns (by_cols) or rows of every image and group's GEMM; the
  // im2col of a column block is its thread's own, so a rows split shares it behind a barrier.
  static void split(const ConvProblem& p, const ForwardArgs& a, bool by_cols) {
    const int64_t OHW = p.OH() * p.OW(), Kg = p.Kg(), Cg = p.Cg(), CRS = Cg * p.R * p.S;
    float* col = static_cast<float*>(a.workspace);
#pragma omp parallel num_threads(a.threads)
    {
      const int t = omp_get_thread_num(), T = omp_get_num_threads();
      rntm_t rntm = BLIS_RNTM_INITIALIZER;
      bli_rntm_set_num_threads(1, &rntm);
      // Blocks of whole 16-float vectors so no two threads write one cache line of y.
      auto block = [&](int64_t n, int64_t unit) {
        const int64_t units = (n + unit - 1) / unit;
        return std::pair<int64_t, int64_t>{std::min(n, units * t / T * unit),
                                           std::min(n, units * (t + 1) / T * unit)};
      };
      const auto [j0, j1] = by_cols ? block(OHW, 16) : std::pair<int64_t, int64_t>{0, OHW};
      const auto [k0, k1] = by_cols ? std::pair<int64_t, int64_t>{0, Kg} : block(Kg, 1);
      for (int64_t n = 0; n < p.N; ++n) {
        for (int64_t g = 0; g < p.groups; ++g) {
          const float* x = a.x + (n * p.C + g * Cg) * p.H * p.W;
          const float* rhs = x;
          if (!is_pointwise(p)) {
            if (by_cols) {
              for (int64_t row = 0; row < CRS; ++row) im2col_row(p, x, col, row, j0, j1);
            } else {
#pragma omp barrier
#pragma omp for schedule(static)
              for (int64_t row = 0; row < CRS; ++row) im2col_row(p, x, col, row, 0, OHW);
            }
            rhs = col;
          }
          gemm(p, a.w + g * Kg * CRS, a.bias ? a.bias + g * Kg : nullptr, rhs,
               a.y + (n * p.K + g * Kg) * OHW, k0, k1, j0, j1, &rntm);
        }
      }
    }
  }
};

}  // namespace

const Algorithm& cpu_im2col_gemm() {
  static const Im2colGemm algo;
  return algo;
}

}  // namespace conv::kernels
