// cpu.winograd internals shared by the Algorithm object (winograd.cpp, any CPU) and the AVX2
// compute (winograd_avx2.cpp): the tiling geometry, buffer sizes and the entry points.
// Layouts are documented in winograd_avx2.cpp's header.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "conv/problem.hpp"

namespace conv::kernels::winograd {

/// Output channels per GEMM register block (two 8-float AVX2 vectors); K is padded to kVec only.
inline constexpr int64_t kBlockK = 16;
inline constexpr int64_t kVec = 8;
/// The bytes of a per-core L2 a pass's working set may fill: three quarters of a 2 MiB L2, the
/// size the pass sizes and schedules are fitted to.
inline constexpr int64_t kL2WorkingBytes = int64_t{1536} << 10;

/// How one problem is cut into Winograd tiles for F(m x m, r x r).
struct Geometry {
  int m = 0;       ///< output tile size (2, 4 or 6 for r = 3; 2 or 4 for r = 5)
  int r = 3;       ///< kernel size (3 or 5)
  int alpha = 0;   ///< input tile size m + r - 1
  int points = 0;  ///< transform points alpha^2 = number of GEMMs per group
  int64_t OH = 0, OW = 0;
  /// The tiled "core": output rows [row_lo, row_end) and columns [col_lo, col_end) whose r x r
  /// window touches the image. Outputs outside it see only padding and are exactly the bias.
  int64_t row_lo = 0, row_end = 0, col_lo = 0, col_end = 0;
  int64_t TH = 0, TW = 0;  ///< tiles per image: ceil(core rows / m) x ceil(core columns / m)
  int64_t tiles = 0;       ///< N * TH * TW: the GEMM's column count, per group
  int64_t Cg = 0, Kg = 0;  ///< channels per group
  int64_t Kp = 0;          ///< Kg rounded up to kVec (rows of U and M)
  int64_t chunk = 0;       ///< tiles transformed, multiplied and inverse-transformed per pass
  int64_t chunk_pad = 0;   ///< chunk rounded up to kVec (row length of V)
  /// Strides in floats, each rounded up to an odd number of 64-byte lines so that the alpha^2
  /// vectors a transform reads or writes for one tile fall into different cache sets (a
  /// power-of-two stride would put them all into one set):
  int64_t u_pstride = 0;  ///< U, point to point: K/g rounded up to 8, times C/g
  int64_t v_pstride = 0;  ///< V, point to point: C/g rows of chunk_pad tiles
  int64_t m_kstride = 0;  ///< M, point to point within one tile: Kp
  /// Groups whose passes run side by side, phase by phase (V and M of each in turn): all of
  /// them where every group's tiles make one pass and their V and M together stay within the
  /// pass's byte budget, else 1. Fewer, larger parallel phases for small grouped layers.
  int64_t pass_groups = 1;
  int64_t u_floats = 0;  ///< transformed weights, all groups: groups * points * u_pstride
  int64_t v_group = 0;   ///< one group's transformed input of one pass: points * v_pstride
  int64_t m_group = 0;   ///< one group's GEMM output of one pass: chunk * points * m_kstride
  int64_t v_floats = 0;  ///< transformed input of one pass: pass_groups * v_group
  int64_t m_floats = 0;  ///< GEMM output of one pass: pass_groups * m_group
};

/// Rounds a float count up to an odd number of 64-byte lines (see Geometry's strides).
inline int64_t odd_lines(int64_t floats) {
  return ((floats + 15) / 16 | 1) * 16;
}

/// How forward_avx2 spreads one group's tiles over the threads.
struct Schedule {
  /// true: every thread runs whole passes of `sub` tiles (transform, GEMM, inverse transform) on
  /// its own slice of V and M, which then stay in its L2, reading U once per pass; false: all
  /// threads share each pass of g.chunk tiles phase by phase (GEMMs split by point), which reads
  /// U fewest times.
  bool per_thread = false;
  int64_t sub = 0;  ///< tiles of the largest per-thread pass
  /// Per-thread passes: `passes` of them; the first `longer` have `sub` tiles, the others
  /// sub - kPassStep, and the last ends at the last tile (see pass_tiles).
  int64_t passes = 0, longer = 0;
  int64_t sub_pad = 0;        ///< V row length of a per-thread pass (sub rounded up to 8)
  int64_t sub_v_pstride = 0;  ///< V point stride of a per-thread pass
  /// GEMMs with the AVX-512 microkernel (32 channels x 12 tiles) instead of AVX2's 16 x 6.
  bool avx512 = false;
};

/// Per-thread passes of several threads differ by this many tiles: whole 4-tile GEMM blocks,
/// which keep eight independent accumulator chains (a 1-tile block runs at a quarter of the
/// FMA rate).
inline constexpr int64_t kPassStep = 4;

/// First tile and tile count of per-thread pass `pass` (< s.passes).
inline void pass_tiles(const Geometry& g, const Schedule& s, int64_t pass, int64_t& first,
                       int64_t& nt) {
  first = pass * s.sub - std::max<int64_t>(0, pass - s.longer) * kPassStep;
  nt = std::min(pass < s.longer ? s.sub : s.sub - kPassStep, g.tiles - first);
}

/// The schedule for `threads` threads: per-thread passes when their extra reads of U cost less
/// than the shared passes' traffic of V and M through the last-level cache; AVX-512 GEMMs when
/// `avx512` (the CPU has it).
Schedule make_schedule(const Geometry& g, int threads, bool avx512);

/// Output channels per GEMM job: one AVX2 block of 16, or two blocks for the AVX-512 kernel.
inline int64_t job_channels(const Schedule& s) {
  return s.avx512 ? 2 * kBlockK : kBlockK;
}

/// Floats of a fused one-shot job's U slice: job_channels x C/g per point, each point's run
/// rounded up to odd lines.
inline int64_t job_u_floats(const Geometry& g, const Schedule& s) {
  return g.points * odd_lines(job_channels(s) * g.Cg);
}

/// GEMM jobs per job of a one-shot shared pass with the weight transform fused in (>= 1): jobs
/// of 64 output channels where V is larger than one job's U slice and the two overflow an L2,
/// while each thread still gets two jobs and the U region holds the threads' larger slices.
int64_t fused_jobs_merged(const Geometry& g, const Schedule& s, int threads);

/// Input channels per step of a fused one-shot job (1 .. C/g): a job transforms its channels'
/// weights for this many input channels into its U slice, then runs its GEMMs over them (adding
/// to M after the first step). C/g (one step) unless the job's U slice and V overflow an L2 and
/// the jobs are not merged (`merge` from fused_jobs_merged); then steps of about half an L2.
int64_t fused_channels(const Geometry& g, const Schedule& s, int64_t merge);

/// M[t][kb0 .. kb0 + kw) = U[kb0 ..][c] V[c][t] for nt tiles, kw in {8, 16, 24, 32}: `u` is U's
/// block at kb0 (the next 16-channel block follows at u + 16 * C), V rows `ldv` apart, M rows
/// `ldo` apart; `accumulate`: += (M holds the sum over earlier channels). AVX-512 (F) only;
/// winograd_avx512.cpp.
void gemm_avx512(int64_t C, const float* u, int64_t kw, const float* v, int64_t ldv, float* out,
                 int64_t ldo, int64_t nt, bool accumulate = false);

/// U of the 16 output channels from kb0 (zero for those >= K/g) for input channel c: point pt's 16
/// floats at dst + pt * pstride, as the AVX2 weight transform writes them, 16 filters per zmm.
/// AVX-512 (F) only; winograd_avx512.cpp.
void weight_block_avx512(const Geometry& g, const float* wg, int64_t kb0, int64_t c, float* dst,
                         int64_t pstride);

/// Calls f(std::integral_constant<int, m>, std::integral_constant<int, r>) for the geometry's
/// F(m, r): the instantiations F(2,3), F(4,3), F(6,3), F(2,5), F(4,5) (m = 6 otherwise for r = 3,
/// m = 4 for r = 5).
template <class F>
decltype(auto) dispatch_mr(int m, int r, F&& f) {
  using std::integral_constant;
  if (r == 5) {
    if (m == 2) return f(integral_constant<int, 2>{}, integral_constant<int, 5>{});
    return f(integral_constant<int, 4>{}, integral_constant<int, 5>{});
  }
  if (m == 2) return f(integral_constant<int, 2>{}, integral_constant<int, 3>{});
  if (m == 4) return f(integral_constant<int, 4>{}, integral_constant<int, 3>{});
  return f(integral_constant<int, 6>{}, integral_constant<int, 3>{});
}

/// Parses "m2" / "m4" / "m6"; returns 0 for anything else.
int parse_config(const std::string& config);

/// The geometry of `p` (an r x r kernel, r = p.R) for tile size m. `chunk_bytes` bounds the
/// V + M buffers of one pass (0 = the default heuristic); the result never has chunk < 1.
Geometry make_geometry(const ConvProblem& p, int m, int64_t chunk_bytes = 0);

/// The accuracy contract of cpu.winograd (winograd_error.cpp): error_bound() and the
/// componentwise transform term that add_error_scale() adds to scale[o] (N*K*OH*OW values) for
/// host tensors x (NCHW) and w (KCRS).
double error_bound(const ConvProblem& p, const Geometry& g);
void add_error_scale(const ConvProblem& p, const Geometry& g, const float* x, const float* w,
                     double* scale, int threads);

/// Writes U (g.u_floats floats) from KCRS weights `w`. AVX2+FMA; with `avx512` (the caller has
/// checked cpu_isa()) 16 filters at a time in zmm registers.
void transform_weights_avx2(const ConvProblem& p, const Geometry& g, const float* w, float* u,
                            int threads, bool avx512);

/// y = Winograd convolution of x with transformed weights `u`, plus bias (may be null).
/// `v` and `mbuf` hold g.v_floats and g.m_floats floats; `s` from make_schedule(g, threads).
/// One-shot: with KCRS weights `w` (else null), U is first written to `u_fill` (== u, g.u_floats
/// floats), fused into the first pass's GEMMs where passes are shared. AVX2+FMA only.
void forward_avx2(const ConvProblem& p, const Geometry& g, const Schedule& s, const float* x,
                  const float* w, float* u_fill, const float* u, const float* bias, float* y,
                  float* v, float* mbuf, int threads);

}  // namespace conv::kernels::winograd
