// cpu.winograd internals shared by the Algorithm object (winograd.cpp, any CPU) and the AVX2
// compute (winograd_avx2.cpp): the tiling geometry, buffer sizes and the entry points.
// Layouts are documented in winograd_avx2.cpp's header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "conv/problem.hpp"

namespace conv::kernels::winograd {

/// Output channels per GEMM register block (two 8-float AVX2 vectors); K is padded to kVec only.
inline constexpr int64_t kBlockK = 16;
inline constexpr int64_t kVec = 8;

/// How one problem is cut into Winograd tiles for F(m x m, 3 x 3).
struct Geometry {
  int m = 0;          ///< output tile size (2, 4 or 6)
  int alpha = 0;      ///< input tile size m + 2
  int points = 0;     ///< transform points alpha^2 = number of GEMMs per group
  int64_t OH = 0, OW = 0;
  /// The tiled "core": output rows [row_lo, row_end) and columns [col_lo, col_end) whose 3x3
  /// window touches the image. Outputs outside it see only padding and are exactly the bias.
  int64_t row_lo = 0, row_end = 0, col_lo = 0, col_end = 0;
  int64_t TH = 0, TW = 0;  ///< tiles per image: ceil(core rows / m) x ceil(core columns / m)
  int64_t tiles = 0;       ///< N * TH * TW: the GEMM's column count, per group
  int64_t Cg = 0, Kg = 0;  ///< channels per group
  int64_t Kp = 0;          ///< Kg rounded up to kVec (rows of U and M)
  int64_t chunk = 0;       ///< tiles transformed, multiplied and inverse-transformed per pass
  int64_t chunk_pad = 0;   ///< chunk rounded up to kVec (row length of V)
  int64_t u_floats = 0;    ///< transformed weights, all groups
  int64_t v_floats = 0;    ///< transformed input of one chunk
  int64_t m_floats = 0;    ///< GEMM output of one chunk
};

/// Parses "m2" / "m4" / "m6"; returns 0 for anything else.
int parse_config(const std::string& config);

/// The geometry of `p` for tile size m. `chunk_bytes` bounds the V + M buffers of one pass
/// (0 = the default heuristic); the result never has chunk < 1.
Geometry make_geometry(const ConvProblem& p, int m, int64_t chunk_bytes = 0);

/// Writes U (g.u_floats floats) from KCRS weights `w`. AVX2+FMA only.
void transform_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads);

/// y = Winograd convolution of x with transformed weights `u`, plus bias (may be null).
/// `v` and `mbuf` hold g.v_floats and g.m_floats floats. AVX2+FMA only.
void forward_avx2(const ConvProblem& p, const Geometry& g, const float* x, const float* u,
                  const float* bias, float* y, float* v, float* mbuf, int threads);

}  // namespace conv::kernels::winograd
