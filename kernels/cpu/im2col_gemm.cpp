// cpu.im2col_gemm: Caffe's convolution (Jia et al., "Caffe", 2014; Chellapilla et al. 2006).
// Per image and group, im2col unrolls the input into a (C/g*R*S) x (OH*OW) column matrix in the
// workspace, then one BLIS sgemm multiplies the (K/g) x (C/g*R*S) weights by it; bias is written
// into y first and the GEMM accumulates onto it (beta = 1). A 1x1 / stride 1 / pad 0 / dilation 1
// problem is already a GEMM on the input: no im2col, no workspace.
// Cost: N*K*C/g*R*S*OH*OW FMAs in the GEMM plus N*C*R*S*OH*OW copies for im2col.
// Workspace: C/g*R*S*OH*OW*4 bytes (0 for the 1x1 case).
#include <blis.h>

#include <cstring>

#include "conv/algorithm.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace {

bool is_pointwise(const ConvProblem& p) {
  return p.R == 1 && p.S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
         p.pad_left == 0 && p.pad_bottom == 0 && p.pad_right == 0;
}

// Unrolls one group of one image: row (c, r, s) of `col` holds the input pixel each output
// position reads through kernel tap (r, s) of channel c, or 0 where it reads padding.
void im2col(const ConvProblem& p, const float* x, float* col, int threads) {
  const int64_t OH = p.OH(), OW = p.OW();
  const int64_t rows = p.Cg() * p.R * p.S;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row / (p.R * p.S), r = row / p.S % p.R, s = row % p.S;
    const float* xc = x + c * p.H * p.W;
    float* out = col + row * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
      float* o = out + oh * OW;
      if (ih < 0 || ih >= p.H) {
        std::memset(o, 0, OW * sizeof(float));
        continue;
      }
      const float* xr = xc + ih * p.W;
      const int64_t iw0 = s * p.dilation_w - p.pad_left;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t iw = iw0 + ow * p.stride_w;
        o[ow] = (iw >= 0 && iw < p.W) ? xr[iw] : 0.0f;
      }
    }
  }
}

class Im2colGemm final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.im2col_gemm"; }
  // BLIS does the work: another BLIS is another implementation.
  std::string version() const override {
    return std::string("1+blis.") + bli_info_get_version_str();
  }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }
  Applicability applicable(const ConvProblem&) const override { return Applicability::yes(); }
  std::vector<std::string> configs(const ConvProblem&) const override { return {"blis"}; }

  size_t workspace_bytes(const ConvProblem& p, const std::string&) const override {
    if (is_pointwise(p)) return 0;
    return static_cast<size_t>(p.Cg() * p.R * p.S) * p.OH() * p.OW() * sizeof(float);
  }

  void forward(const ConvProblem& p, const std::string& config,
               const ForwardArgs& a) const override {
    if (config != "blis")
      throw Error("config: cpu.im2col_gemm has only \"blis\", got \"" + config + "\"");
    if (a.workspace_size < workspace_bytes(p, config))
      throw Error("workspace: cpu.im2col_gemm needs " + std::to_string(workspace_bytes(p, config)) +
                  " bytes, got " + std::to_string(a.workspace_size));
    const int64_t OHW = p.OH() * p.OW(), Kg = p.Kg(), Cg = p.Cg(), CRS = Cg * p.R * p.S;
    float* col = static_cast<float*>(a.workspace);
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(a.threads, &rntm);
    for (int64_t n = 0; n < p.N; ++n) {
      for (int64_t g = 0; g < p.groups; ++g) {
        const float* x = a.x + (n * p.C + g * Cg) * p.H * p.W;
        float* y = a.y + (n * p.K + g * Kg) * OHW;
        const float* w = a.w + g * Kg * CRS;
        const float* b = a.bias ? a.bias + g * Kg : nullptr;
        const float* rhs = x;
        if (!is_pointwise(p)) {
          im2col(p, x, col, a.threads);
          rhs = col;
        }
#pragma omp parallel for schedule(static) num_threads(a.threads)
        for (int64_t k = 0; k < Kg; ++k)
          for (int64_t i = 0; i < OHW; ++i) y[k * OHW + i] = b ? b[k] : 0.0f;
        float one = 1.0f;
        // BLIS takes non-const operands but does not write A or B.
        bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, Kg, OHW, CRS, &one,
                     const_cast<float*>(w), CRS, 1, const_cast<float*>(rhs), OHW, 1, &one, y, OHW,
                     1, nullptr, &rntm);
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
