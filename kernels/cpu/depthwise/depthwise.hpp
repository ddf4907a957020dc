// cpu.depthwise internals: the channel-blocked layout and the per-ISA row kernels.
#pragma once

#include <cstdint>

namespace conv::kernels::depthwise {

/// One output row of one channel block, in the blocked layout (lanes = channels, innermost).
/// `x`: the first padded input row the output row reads, [..][Wp][lanes]; `w`: the block's
/// weights [R][S][lanes]; `bias`: [lanes]; `y`: the output row, [OW][lanes].
struct Row {
  const float* x;
  const float* w;
  const float* bias;
  float* y;
  int64_t OW, R, S, stride_w, dilation_w;
  int64_t dil_h_rows;  ///< floats from one kernel row's input row to the next: dilation_h*Wp*lanes
};

void row_avx2(const Row& r);  // 8 lanes; depthwise_avx2.cpp

/// 8 channel rows `in[l]` (W floats each) into W pixels of 8 lanes at `out`, pixel i at
/// out + i*stride (stride = the block's lanes: 8, or 16 for half of a 16-lane block).
void pack8_avx2(const float* const in[8], float* out, int64_t W, int64_t stride);
/// The inverse: OW pixels at in + i*stride, 8 lanes each, into 8 channel rows out[l].
void unpack8_avx2(const float* in, int64_t stride, float* const out[8], int64_t OW);
/// pack8_avx2 over whole H x W channel planes `in[l]` for narrow images (W < 16, where a row
/// holds at most one 8x8 transpose): the plane is transposed as one flat run of H*W pixels and
/// pixel (ih, iw) is stored at out + ((ih + pad_top) * Wp + iw + pad_left) * stride. Padding is
/// not written.
void pack8_plane_avx2(const float* const in[8], float* out, int64_t H, int64_t W, int64_t Wp,
                      int64_t pad_top, int64_t pad_left, int64_t stride);
void row_avx512(const Row& r);  // 16 lanes; depthwise_avx512.cpp

}  // namespace conv::kernels::depthwise
