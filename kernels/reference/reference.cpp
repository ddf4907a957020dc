// Reference convolution: textbook definition of the forward convolution, in float64.
// Cost: N*K*C/g*R*S*OH*OW multiply-adds (plus the same for the magnitudes).
#include "reference/reference.hpp"

#include <cmath>
#include <vector>

#include "fork_guard.hpp"

namespace conv::ref {

void forward(const ConvProblem& p, const float* x, const float* w, const float* bias, double* y_ref,
             double* abs_sum, int threads) {
  const int64_t OH = p.OH(), OW = p.OW(), Cg = p.Cg(), Kg = p.Kg();
  note_parallel_region(threads);
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(threads)
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t k = 0; k < p.K; ++k) {
      const int64_t g = k / Kg;
      double* yo = y_ref + ((n * p.K + k) * OH) * OW;
      double* ao = abs_sum + ((n * p.K + k) * OH) * OW;
      const double b = bias ? bias[k] : 0.0;
      for (int64_t i = 0; i < OH * OW; ++i) {
        yo[i] = b;
        ao[i] = std::fabs(b);
      }
      for (int64_t c = 0; c < Cg; ++c) {
        const float* xc = x + ((n * p.C + g * Cg + c) * p.H) * p.W;
        const float* wc = w + ((k * Cg + c) * p.R) * p.S;
        for (int64_t r = 0; r < p.R; ++r) {
          for (int64_t s = 0; s < p.S; ++s) {
            const double wv = wc[r * p.S + s];
            const double wa = std::fabs(wv);
            for (int64_t oh = 0; oh < OH; ++oh) {
              const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
              if (ih < 0 || ih >= p.H) continue;
              const float* xr = xc + ih * p.W;
              double* yr = yo + oh * OW;
              double* ar = ao + oh * OW;
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
                if (iw < 0 || iw >= p.W) continue;
                const double xv = xr[iw];
                yr[ow] += xv * wv;
                ar[ow] += std::fabs(xv) * wa;
              }
            }
          }
        }
      }
    }
  }
}

Comparison compare(int64_t n, const float* y, const double* y_ref, const double* abs_sum) {
  Comparison c;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(y[i])) {
      ++c.nonfinite;
      if (c.worst_index < 0 || std::isfinite(c.max_error)) {
        c.max_error = INFINITY;
        c.worst_index = i;
      }
      continue;
    }
    const double diff = std::fabs(static_cast<double>(y[i]) - y_ref[i]);
    if (diff == 0) continue;
    const double e = abs_sum[i] > 0 ? diff / abs_sum[i] : INFINITY;
    if (e > c.max_error || c.worst_index < 0) {
      c.max_error = e;
      c.worst_index = i;
    }
  }
  return c;
}

}  // namespace conv::ref
