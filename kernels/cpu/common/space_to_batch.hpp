// Dilated convolution as ordinary convolution on the dilation phases of the input
// ("space to batch", the identity behind TensorFlow's atrous convolution with
// space_to_batch_nd, and Yu & Koltun, ICLR 2016): with stride 1 and dilation d, output rows
// i, i + d, i + 2d, ... read only input rows of the phase (i - pad_top) mod d, with the taps
// one phase row apart. When H, W and every pad are multiples of the dilation, phase i of the
// output reads input phase i and all d_h x d_w phases share one shape, so the problem runs as a
// batch of N*d_h*d_w images of H/d_h x W/d_w with dilation 1, for kernels that only handle
// dilation 1 (cpu.winograd).
#pragma once

#include <optional>

#include "conv/problem.hpp"

namespace conv::kernels {

/// The undilated batch problem of a dilated one (see above): N*d_h*d_w images of C x H/d_h x
/// W/d_w, pads divided by the dilation, dilation 1, the rest unchanged; nullopt when `p` is not
/// dilated, not stride 1, or its H, W or pads are not multiples of its dilation.
std::optional<ConvProblem> dilation_batch_problem(const ConvProblem& p);

/// Pixel (d_h*t + i, d_w*u + j) of channel c of image n in `in` (N x C x H x W) goes to pixel
/// (t, u) of channel c of image (n*d_h + i)*d_w + j in `out` (N*d_h*d_w x C x H/d_h x W/d_w);
/// with `inverse`, the other way round. H and W must be multiples of d_h and d_w.
template <class T>
void space_to_batch(const T* in, T* out, int64_t N, int64_t C, int64_t H, int64_t W, int64_t dh,
                    int64_t dw, bool inverse, int threads);

}  // namespace conv::kernels
