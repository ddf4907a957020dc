// cpu.im2col_gemm's "oc6ow49_avx512" config: im2col and an own GEMM for 7x7 output planes (any
// problem of OH*OW = 49 output positions) on AVX-512 CPUs. Internal to kernels/cpu; not part of
// the public API.
//
// Method: per image and group, C (K/g x 49) = A (K/g x n, the KCRS weights, rows read in place)
// x B (n x 49, the im2col columns), n = C/g*R*S reduction steps. Positions 0..47 are three zmm
// of 16 lanes, register-blocked over 6 output channels (18 accumulators; each step broadcasts 6
// weights for 18 FMAs, as oneDNN's jit_avx512_common_conv and cpu.direct do); position 48 is 6
// dot products along the reduction, a zmm of 16 steps each, from the same weight rows (a GEMM's
// fringe column as a matrix-vector product). Per output channel and step that is 3 + 1/16 zmm
// FMAs, where direct kernels over zmm vectors of positions spend 4 (64 lanes for 49 positions)
// and BLIS packs the weights on every call and pads the 49 columns to 60 (its skx kernel's
// 12-column register block).
// B's layout: n rows of 48 floats (row i = step i, 64-byte aligned) for positions 0..47, then a
// column of the n values of position 48. The threads split the output channels; the reduction
// runs in chunks of B within a quarter of the L2, each swept by all of a thread's channel blocks.
// Cost: K*C/g*R*S*49*N FMAs (3.06 zmm FMAs per 49), plus the im2col. Workspace:
// round64(192 n) + round64(4 n) + 64 bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "conv/algorithm.hpp"

namespace conv::kernels::oc6ow49 {

constexpr const char* kConfig = "oc6ow49_avx512";
constexpr int64_t kPositions = 49;  ///< output positions per output channel (OH*OW)
constexpr int64_t kRow = 48;        ///< of which in zmm vectors; the last one is the tail

/// Whether `p` has the config: an AVX-512 CPU, 49 output positions and 16 output channels per
/// group or more (fewer, as in depthwise layers, would leave its 6-channel blocks mostly empty).
bool offered(const ConvProblem& p);

/// Workspace bytes for `p`. Throws conv::Error naming "config" unless offered(p), saying which
/// condition fails.
size_t workspace_bytes(const ConvProblem& p);

/// Runs the config. The caller has checked the arguments, the workspace against
/// workspace_bytes(p) among them (which refuses a problem without the config).
void forward(const ConvProblem& p, const ForwardArgs& a);

/// y (K x 49, row k at y + k*49) = bias (K values, or null for 0) + w (K x n, row k at w + k*n)
/// x B (`rows`, `tail`), in reduction chunks of `chunk` steps (a multiple of 16), with `threads`
/// OpenMP threads splitting the output channels. Only call when conv::cpu_isa() reports avx512.
void gemm_avx512(const float* w, const float* rows, const float* tail, const float* bias, float* y,
                 int64_t K, int64_t n, int64_t chunk, int threads);

}  // namespace conv::kernels::oc6ow49
