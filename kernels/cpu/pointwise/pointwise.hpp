// cpu.pointwise internals: the packed-input layout, the register tiles and the input packing,
// shared by pointwise.cpp (Algorithm and driver) and pointwise_avx2.cpp (kernels). Not part of
// the public API.
#pragma once

#include <cstdint>

namespace conv::kernels::pointwise {

/// One tile. The weights are KCRS in place: channel c of output channel k at w + k*w_stride + c.
/// The input block is packed [steps][pb][8]: channels 8s..8s+7 of position j at x + (s*pb + j)*8.
/// The last of `steps` steps holds `tail` channels (1..7; 0: all 8) and its weights are read
/// with a mask, so no weight past the chunk is read; the packed input's unused lanes are zero.
/// Sum (k, j) is written to y[k * y_stride + j] plus bias[k] (bias may be null: zero) when
/// `first`, else added to it.
struct Tile {
  const float* w = nullptr;
  int64_t w_stride = 0;
  const float* x = nullptr;
  int64_t steps = 0;
  int tail = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  const float* bias = nullptr;
  bool first = true;
};

using TileFn = void (*)(const Tile&);

/// The AVX2/FMA tile for kb x pb (1 <= kb <= 3, 1 <= pb <= 4); null otherwise. Only call on a
/// CPU with AVX2 and FMA.
TileFn avx2_tile(int kb, int pb);

/// Packs channels c..c+7 (c + lanes <= C, lanes 1..8, missing channels zero) of output
/// positions q..q+count-1 (count <= 8; in[i]: the input plane offset of position q+i, strides
/// applied) of one NCHW image `x` (planes of `plane` floats) into the chunk at `dst` (width cw, a
/// multiple of 8; chunk start c0). The chunk holds blocks of pb positions (the last of the P may
/// be shorter), each [cw/8][n positions][8]: channels c..c+7 of the j-th position of the block
/// starting at position b go to b * cw + (c - c0) * n + j * 8. AVX 8x8 transposes, loads of
/// consecutive positions where the input offsets are consecutive, else a gather. Needs AVX2.
void pack8_avx2(const float* x, int64_t plane, int64_t c, int lanes, const int32_t* in, int64_t q,
                int count, int pb, int64_t P, float* dst, int64_t c0, int64_t cw);

}  // namespace conv::kernels::pointwise
