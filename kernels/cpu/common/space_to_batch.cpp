// Dilation phases as a batch (space_to_batch.hpp). Cost: one pass over the tensor.
#include "cpu/common/space_to_batch.hpp"

#include <algorithm>

namespace conv::kernels {

std::optional<ConvProblem> dilation_batch_problem(const ConvProblem& p) {
  const int64_t dh = p.dilation_h, dw = p.dilation_w;
  if ((dh == 1 && dw == 1) || p.stride_h != 1 || p.stride_w != 1) return std::nullopt;
  if (p.H % dh || p.pad_top % dh || p.pad_bottom % dh || p.W % dw || p.pad_left % dw ||
      p.pad_right % dw)
    return std::nullopt;
  ConvProblem q = p;
  q.N = p.N * dh * dw;
  q.H = p.H / dh;
  q.W = p.W / dw;
  q.pad_top = p.pad_top / dh;
  q.pad_bottom = p.pad_bottom / dh;
  q.pad_left = p.pad_left / dw;
  q.pad_right = p.pad_right / dw;
  q.dilation_h = q.dilation_w = 1;
  return q;
}

template <class T>
void space_to_batch(const T* in, T* out, int64_t N, int64_t C, int64_t H, int64_t W, int64_t dh,
                    int64_t dw, bool inverse, int threads) {
  const int64_t Hb = H / dh, Wb = W / dw;
#pragma omp parallel for collapse(2) schedule(static) num_threads(std::max(1, threads))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t i = h % dh, t = h / dh;
        for (int64_t j = 0; j < dw; ++j) {
          // Row h of the image, phase j of its columns <-> row t of batch image (n, i, j).
          const int64_t plain = ((n * C + c) * H + h) * W + j;
          const int64_t batch = ((((n * dh + i) * dw + j) * C + c) * Hb + t) * Wb;
          if (inverse)
            for (int64_t u = 0; u < Wb; ++u) out[plain + u * dw] = in[batch + u];
          else
            for (int64_t u = 0; u < Wb; ++u) out[batch + u] = in[plain + u * dw];
        }
      }
}

template void space_to_batch<float>(const float*, float*, int64_t, int64_t, int64_t, int64_t,
                                    int64_t, int64_t, bool, int);
template void space_to_batch<double>(const double*, double*, int64_t, int64_t, int64_t, int64_t,
                                     int64_t, int64_t, bool, int);

}  // namespace conv::kernels
