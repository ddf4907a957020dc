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

/// Where position q's channels go in the packed input of one chunk of width cw (a multiple of
/// 8): channels c..c+7 (c - chunk start = 8s) at block * cw + s * 8 * n + j * 8, for the position
/// block starting at position `block` with n positions, q its j-th. A table, filled once per
/// call, because the packing would otherwise divide by the block size for every position.
struct PackedPos {
  int32_t in = 0;     ///< input plane offset of the position (stride applied)
  int32_t block = 0;  ///< first position of its block
  int32_t j = 0;      ///< index within the block
  int32_t n = 0;      ///< positions in the block
};

/// Packs channels c..c+7 (c + lanes <= C, lanes 1..8, missing channels zero) of positions
/// q..q+count-1 (count <= 8) of one NCHW image `x` (plane of `plane` floats) into the chunk at
/// `dst` (width cw, chunk start c0): AVX 8x8 transposes, loads of consecutive positions where
/// the input offsets are consecutive, else a gather. Needs AVX2.
void pack8_avx2(const float* x, int64_t plane, int64_t c, int lanes, const PackedPos* pos,
                int count, float* dst, int64_t c0, int64_t cw);

}  // namespace conv::kernels::pointwise
