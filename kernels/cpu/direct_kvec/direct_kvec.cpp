// cpu.direct_kvec: direct convolution with the output channels in the vector lanes, as oneDNN's
// jit_avx2_conv / jit_avx512_common_conv on an NCHW source (Georganas et al., "Anatomy of
// high-performance deep learning convolutions on SIMD architectures", SC 2018). A block of kb
// vectors of 8 (AVX2) or 16 (AVX-512) output channels x nw output positions stays in registers
// over the reduction (on AVX2 over one chunk of input channels); each (input channel, tap) step
// loads kb weight vectors and broadcasts nw input values (direct_kvec_block.hpp). Unlike cpu.direct
// (positions in the lanes), no lane is wasted on short or strided rows: it is the kernel for small
// images, strides and 1x1 layers with many channels.
//
// The input is read through cpu.direct's view (direct_view.hpp: zero padded and split into
// stride phases, or in place), so a block's positions are consecutive floats. Blocks are runs
// of one output row split evenly (rows), of the flattened plane (1x1), or of whole view rows
// including the Wq - OW unused columns per row (wide, when that needs fewer blocks, e.g. 7x7).
// "_nchw8c" configs copy the view in nChw8c order instead (oneDNN's blocked layout: a view plane
// per 8 channels, each position's 8 channels consecutive): a block's positions x 8 channels of one
// tap are then a few contiguous cache lines where the planar view spreads them over 8 planes and
// stride phases, for a copy about as costly. Such a kernel sums blocks of 8 channels per tap, over
// the planar view's packed weights (a block's 8 channels R*S steps apart).
// Weights are packed [g][K/g/(kb*lanes)][C/g][R*S][kb*lanes] (oneDNN's OIhw16o blocking, the last
// block zero-filled): by a Plan once, or per call into the workspace (for one image, unless
// output-channel blocks run innermost, each thread packs the blocks of its own tasks into its
// own slice as it reaches them, or, where an AVX2 task covers a whole block, each reduction
// chunk of it into an L1 buffer just before the chunk runs). The kernel leaves each
// block's sums in a small tile, which the driver stores to NCHW (the reorder fused into the
// last pass, as oneDNN does). A thread's task is a run of position blocks of one output-channel
// block; tasks run output-channel blocks innermost when the input is the operand that overflows
// L2, and AVX2 tasks sum over input channels in chunks whose weights stay in L1 (the cache
// blocking of Georganas et al.; "_whole" configs sum all at once; "_nchw8c" ones in chunks of up
// to a quarter of the L2), the run's partial sums waiting in per-thread tiles.
//
// Cost: N*K*C/g*R*S*OH*OW FMAs with K/g rounded up to whole kb*lanes blocks (and view columns
// OW..Wq-1 in wide mode); plus the view copy (as cpu.direct) and, one-shot, one pass over the
// weights. Workspace: cpu.direct's view + round64(4*packed weights) (one-shot) +
// round64(4*g*K/g rounded up) bytes of bias + round64(8*chunk channels*R*S) bytes of step
// offsets (at most 4096 steps, else none).
#include <omp.h>

#include <algorithm>
#include <array>
#include <vector>

#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/direct/direct_view.hpp"
#include "cpu/direct_kvec/direct_kvec.hpp"
#include "kernels.hpp"

namespace conv::kernels {
namespace direct {

namespace {

// One block of positions: view offset of position 0, and where position 0 is stored in the
// output plane (rows and flat modes).
struct PosBlock {
  int64_t x = 0, y0 = 0;
  int n = 0;
};

// How the output plane is cut into blocks.
struct Blocking {
  enum class Mode { flat, rows, wide } mode = Mode::rows;
  int64_t count = 0;  // blocks per output channel block
  int64_t nw = 0;     // positions per block at most (a row's blocks are balanced)
  int64_t per_row = 0, span = 0;
};

Blocking make_blocking(const Geometry& g, int max_nw) {
  Blocking b;
  if (g.flat) {
    b.mode = Blocking::Mode::flat;
    const int64_t n = ceil_div(g.OHW, max_nw);
    b.nw = ceil_div(g.OHW, n);
    b.count = ceil_div(g.OHW, b.nw);
    return b;
  }
  const int64_t n = ceil_div(g.OW, max_nw);
  b.nw = ceil_div(g.OW, n);
  b.per_row = ceil_div(g.OW, b.nw);
  b.count = g.OH * b.per_row;
  // Wide: runs over the view rows; a block costs about the same whether full or not.
  if (g.copy) {
    b.span = (g.OH - 1) * g.row_step + g.OW;
    const int64_t wide = ceil_div(b.span, max_nw);
    if (wide < b.count) {
      b.mode = Blocking::Mode::wide;
      b.nw = max_nw;
      b.count = wide;
    }
  }
  return b;
}

void block_pos(const Geometry& g, const Blocking& b, int64_t i, PosBlock* out) {
  switch (b.mode) {
    case Blocking::Mode::flat: {
      out->x = i * b.nw;
      out->n = static_cast<int>(std::min(b.nw, g.OHW - out->x));
      out->y0 = out->x;
      return;
    }
    case Blocking::Mode::rows: {
      // Balanced: 27 columns in blocks of at most 6 are 6,6,5,5,5 rather than 6,6,6,6,3, whose
      // short block has too few accumulator chains to hide the FMA latency.
      const int64_t oh = i / b.per_row, j = i % b.per_row;
      const int64_t ow = j * g.OW / b.per_row;
      out->x = oh * g.row_step + ow;
      out->n = static_cast<int>((j + 1) * g.OW / b.per_row - ow);
      out->y0 = oh * g.OW + ow;
      return;
    }
    case Blocking::Mode::wide: {
      out->x = i * b.nw;
      out->n = static_cast<int>(std::min(b.nw, b.span - out->x));
      return;
    }
  }
}

// Per-thread partial sums of a run of blocks: at most kTileFloats floats (kb*lanes*max_nw is
// at most 448 per block), kMaxRun blocks; a planar AVX2 chunk's weights at most kChunkFloats
// floats (the L1 buffer of pack_chunks).
constexpr int64_t kTileFloats = 4096, kMaxRun = 32, kChunkFloats = 3072;
// Positions per block (KvecConfig::max_nw) by kb: zmm 16 lanes, ymm 8.
constexpr int kZmmMaxNw[] = {28, 14, 9, 6}, kYmmMaxNw[] = {14, 6, 4, 3};
constexpr bool every_tile_fits() {
  for (int kb = 1; kb <= 4; ++kb)
    if (kb * 16 * kZmmMaxNw[kb - 1] > kTileFloats) return false;
  for (int kb = 1; kb <= 4; ++kb)
    if (kb * 8 * kYmmMaxNw[kb - 1] > kTileFloats) return false;
  return true;
}
static_assert(every_tile_fits(), "a run's partial sums hold at least one block of any config");

struct Layout {
  Geometry g;
  Blocking b;
  int64_t chunk = 0;    // input channels per reduction chunk
  int64_t n_steps = 0;  // entries of the step table (KvecCommon::step_x), 0 for none
  int64_t kbl = 0, nkb = 0;
  int64_t block_floats = 0;  // packed weights of one output-channel block: C/g*R*S*kbl
  size_t packed_floats = 0, bias_floats = 0;
};

// Whether an nChw8c view can hold `p`: a kernel larger than 1x1, whole blocks of 8 channels.
bool nchw8c_runs(const ConvProblem& p) {
  return p.R * p.S > 1 && p.Cg() % 8 == 0;
}

Layout make_layout(const ConvProblem& p, const KvecConfig& c) {
  if (c.nchw8c && !nchw8c_runs(p))
    throw Error("config: cpu.direct_kvec " + c.name() +
                " needs a kernel larger than 1x1 and C/groups a multiple of 8, got " +
                std::to_string(p.R) + "x" + std::to_string(p.S) + " and C/groups " +
                std::to_string(p.Cg()));
  Layout l;
  l.g = make_geometry(p, c.lanes(), 0, c.aligned, c.nchw8c ? 8 : 1);
  l.b = make_blocking(l.g, c.max_nw());
  l.kbl = c.kb * c.lanes();
  l.nkb = ceil_div(p.Kg(), l.kbl);
  l.block_floats = p.Cg() * p.R * p.S * l.kbl;
  l.packed_floats = static_cast<size_t>(p.groups * l.nkb * l.block_floats);
  l.bias_floats = static_cast<size_t>(p.groups * l.nkb * l.kbl);
  // Planar AVX2 blocks sum over input channels in chunks whose weights (12 KiB) stay in L1 (see
  // kvec_forward).
  const int64_t T = p.R * p.S;
  l.chunk = c.zmm || c.whole ? p.Cg() : std::clamp<int64_t>(kChunkFloats / (T * l.kbl), 1, p.Cg());
  // nChw8c views sum whole blocks of 8 channels, in nested loops, in chunks of as near equal
  // numbers of such blocks as whole blocks allow (256 channels: 88, 88, 80), whose weights fill at
  // most a quarter of the L2: a kernel call of one block of 8 channels is too short for its partial
  // sums' reload and store.
  if (c.nchw8c && !c.zmm) {
    const int64_t most = std::max<int64_t>(1, l2_cache_bytes() / 4 / (4 * T * l.kbl) / 8);
    const int64_t blocks = p.Cg() / 8, n = ceil_div(blocks, most);
    l.chunk = 8 * ceil_div(blocks, n);
  }
  l.n_steps = c.nchw8c ? 0 : step_table_entries(l.g, l.chunk);
  return l;
}

size_t workspace_bytes_for(const Layout& l, bool with_weights) {
  return workspace_for(l.g) + (with_weights ? round64(l.packed_floats * sizeof(float)) : 0) +
         round64(l.bias_floats * sizeof(float)) + round64(l.n_steps * sizeof(int64_t));
}

bool cpu_runs(const KvecConfig& c) {
  const CpuIsa have = cpu_isa();
  return c.zmm ? have == CpuIsa::avx512 : have != CpuIsa::scalar;
}

// Packs (channel, tap) columns [col0, col0 + n) of output-channel block gkb = (grp, kb) of
// planar KCRS weights into dst (n*kbl floats): what pack_block packs at offset col0*kbl.
void pack_columns(const ConvProblem& p, const Layout& l, const float* w, int64_t gkb, int64_t col0,
                  int64_t n, float* dst) {
  const int64_t grp = gkb / l.nkb, k0 = gkb % l.nkb * l.kbl, CT = p.Cg() * p.R * p.S;
  const int rows = static_cast<int>(std::min(l.kbl, p.Kg() - k0));
  kvec_pack_avx2(w + (grp * p.Kg() + k0) * CT + col0, CT, rows, n, static_cast<int>(l.kbl), dst,
                 l.kbl);
}

// Packs output-channel block gkb = (grp, kb) of KCRS weights into dst (C/g*R*S*kbl floats), every
// view's order: nChw8c kernels read a block of 8 channels' weights R*S steps apart rather than
// packed in the order they use them ([C/g/8][R*S][8][kbl]), because that order takes a pack call
// per channel of R*S columns, much slower than one pass over whole rows, and one-shot packing is a
// large share of the cost where weights dominate.
void pack_block(const ConvProblem& p, const Layout& l, const float* w, int64_t gkb, float* dst) {
  pack_columns(p, l, w, gkb, 0, p.Cg() * p.R * p.S, dst);
}

}  // namespace

int KvecConfig::max_nw() const {
  return zmm ? kZmmMaxNw[kb - 1] : kYmmMaxNw[kb - 1];
}

std::string KvecConfig::name() const {
  return "oc" + std::to_string(kb * lanes()) + (zmm ? "_avx512" : "") +
         (aligned ? "_aligned" : "") + (whole ? "_whole" : "") + (nchw8c ? "_nchw8c" : "");
}

KvecConfig parse_kvec_config(const std::string& text) {
  for (int blocked = 0; blocked < 2; ++blocked)
    for (int whole = 0; whole < 2 - blocked; ++whole)
      for (int aligned = 0; aligned < 2 - blocked; ++aligned)
        for (int z = 0; z < 2 - whole; ++z)
          for (int kb = 1; kb <= 4; ++kb) {
            const KvecConfig c{kb, z == 1, aligned == 1, whole == 1, blocked == 1};
            if (c.name() == text) return c;
          }
  throw Error(
      "config: cpu.direct_kvec has no config \"" + text +
      "\" (known: oc8, oc16, oc24, oc32, oc16_avx512, oc32_avx512, oc48_avx512, oc64_avx512, "
      "each also with \"_aligned\" or \"_nchw8c\", and the AVX2 ones with \"_whole\", which "
      "comes before \"_aligned\")");
}

namespace {

void kvec_forward(const ConvProblem& p, const std::string& config, const ForwardArgs& a) {
  const KvecConfig cfg = parse_kvec_config(config);
  if (!cpu_runs(cfg))
    throw Error("config: cpu.direct_kvec " + config + " needs " +
                (cfg.zmm ? "AVX-512" : "AVX2 and FMA") + ", which this CPU (or the ISA cap) lacks");
  const Layout l = make_layout(p, cfg);
  const bool packed = a.packed_weights != nullptr;

  const Geometry& g = l.g;
  const Blocking& bl = l.b;
  KvecFn fns[33] = {};
  const KvecWalk walk =
      g.flat ? KvecWalk::one_tap : (cfg.nchw8c ? KvecWalk::nchw8c : KvecWalk::taps);
  for (int nw = 1; nw <= bl.nw; ++nw) {
    fns[nw] = cfg.zmm ? avx512_kvec(cfg.kb, nw, walk) : avx2_kvec(cfg.kb, nw, walk);
    if (!fns[nw]) throw Error("config: cpu.direct_kvec " + config + " has no kernel");
  }

  const uintptr_t base = reinterpret_cast<uintptr_t>(a.workspace);
  int64_t* tap = reinterpret_cast<int64_t*>((base + 63) / 64 * 64);
  float* view_buf = reinterpret_cast<float*>(reinterpret_cast<char*>(tap) + g.tap_bytes);
  float* wbuf = view_buf + round64(g.copy_floats * sizeof(float)) / sizeof(float);
  float* bias_buf = wbuf + (packed ? 0 : round64(l.packed_floats * sizeof(float)) / sizeof(float));
  int64_t* step_x =
      reinterpret_cast<int64_t*>(bias_buf + round64(l.bias_floats * sizeof(float)) / sizeof(float));
  fill_taps(p, g, tap);
  fill_steps(g, tap, l.n_steps, step_x);

  const int64_t Cg = p.Cg(), Kg = p.Kg(), T = p.R * p.S, kbl = l.kbl, L = cfg.lanes();
  // Channels per view plane and floats per position (8 in nChw8c views, else 1).
  const int64_t cpl = g.cblock;
  const float* wpk = packed ? static_cast<const float*>(a.packed_weights) : wbuf;
  const int threads = a.threads;
  // One-shot, one image: each thread packs the weight blocks of its own tasks, each just before its
  // first use, into its own slice of the packed-weights buffer (one block, which stays in its L2),
  // instead of all threads packing every block first (a pass of the weights through memory and a
  // barrier).
  const int64_t block_floats = l.block_floats;
  // Task order: output-channel blocks inner when a group's input view overflows half an L2 and is
  // more than twice the group's packed weights, which fit in half an L2: each thread then reads its
  // share of the input once, from L3 or memory, instead of once per output-channel block, while the
  // weights stay in its L2. Where the input fits in L2, or the weights are the bigger operand, this
  // order is slower.
  const int64_t group_weight_bytes = 4 * l.nkb * block_floats, input_bytes = 4 * Cg / cpl * g.plane;
  const int64_t half_l2 = l2_cache_bytes() / 2;
  const bool channels_inner = group_weight_bytes <= half_l2 && input_bytes > half_l2 &&
                              input_bytes > 2 * group_weight_bytes;
  const bool pack_own = !channels_inner && !packed && p.N == 1 &&
                        static_cast<size_t>(threads * block_floats) <= l.packed_floats;
  KvecCommon common;
  common.channels = Cg;
  common.taps = T;
  common.tap = tap;
  common.step_x = l.n_steps ? step_x : nullptr;
  common.x_channel_stride = g.plane;
  // The next channel's input is prefetched only from views larger than a third of the L2; a smaller
  // one stays in L2, where the prefetch per step is only an extra load.
  const bool big_view = 3 * 4 * p.C / cpl * g.plane > l2_cache_bytes();
  // nChw8c: the next block of 8 channels.
  common.prefetch_ahead = !big_view ? 0 : cpl > 1 ? g.plane : prefetch_ahead(p, g);

  // A task is a run of adjacent position blocks whose sums share one tile, stored to NCHW at once:
  // 8x8 transposes of whole vectors, not of each block's 4-6 positions, whose partial stores
  // dominate a few-channel layer's time. Planar AVX2 blocks sum over input channels in chunks whose
  // weights (12 KiB) stay in L1 over the run, the partial sums waiting in the tile (nChw8c ones:
  // see make_layout); with all channels at once each block streams its whole weight block from L2.
  // AVX-512 blocks measured no better chunked, so they keep one chunk.
  const int64_t tile_floats = kbl * bl.nw;
  const int64_t chunk = l.chunk;
  const int64_t run = std::clamp<int64_t>(
      std::min(kTileFloats / tile_floats, p.groups * l.nkb * bl.count / (4 * threads)), 1, kMaxRun);
  // Balanced runs (136 blocks in runs of at most 32: 27 or 28 each, not 28, 28, 28, 28, 24), so
  // that the threads' equal shares of the tasks are equal shares of the blocks too.
  const int64_t runs = ceil_div(bl.count, run);
  const int64_t per_group = l.nkb * runs, tasks = p.groups * per_group;
  // One-shot AVX2 chunks, a task per output-channel block: each chunk's weights are packed just
  // before its blocks run, into a buffer that stays in L1, instead of the whole block into the
  // thread's slice first, which on a 512 KiB L2 (Zen 3) leaves the block, the next block's
  // prefetched KCRS rows and the input competing for L2. Where a block spans several tasks the
  // chunks would be packed once per task: such layers keep whole blocks.
  const bool pack_chunks =
      pack_own && runs == 1 && chunk < Cg && cpl == 1 && chunk * T * kbl <= kChunkFloats;
  // The threads' task ranges are bands of output positions when runs are outer or K/g is one
  // block.
  const bool by_rows = p.groups == 1 && (channels_inner || l.nkb == 1);
  for (int64_t n = 0; n < p.N; ++n) {
    const float* xn = a.x + n * p.C * p.H * p.W;
    float* yn = a.y + n * p.K * g.OHW;
    const float* view = g.copy ? view_buf : xn;
#pragma omp parallel num_threads(threads)
    {
      if (n == 0) {
        if (!packed && !pack_own) {
#pragma omp for schedule(static) nowait
          for (int64_t gkb = 0; gkb < p.groups * l.nkb; ++gkb)
            pack_block(p, l, a.w, gkb, wbuf + gkb * block_floats);
        }
        if (a.bias) {
#pragma omp for schedule(static) nowait
          for (int64_t gkb = 0; gkb < p.groups * l.nkb; ++gkb)
            for (int64_t k = 0; k < kbl; ++k) {
              const int64_t kk = gkb % l.nkb * kbl + k;
              bias_buf[gkb * kbl + k] = kk < Kg ? a.bias[gkb / l.nkb * Kg + kk] : 0.0f;
            }
        }
      }
      if (g.copy)
        copy_view(p, g, xn, view_buf, by_rows);  // ends with a barrier
      else if (n == 0) {
#pragma omp barrier
      }
      const int nth = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t begin = tasks * tid / nth, end = tasks * (tid + 1) / nth;
      alignas(64) float tiles[kTileFloats];
      alignas(64) float wchunk[kChunkFloats];
      PosBlock pos[kMaxRun];
      KvecBlock blk;
      float* own = wbuf + tid * block_floats;
      int64_t own_gkb = -1;
      // Lines of the next block's KCRS weights prefetched so far (pack_own).
      int64_t pf_done = 0;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t grp = task / per_group, rest = task % per_group;
        const int64_t kb = channels_inner ? rest % l.nkb : rest / runs;
        const int64_t r = channels_inner ? rest / l.nkb : rest % runs;
        const int64_t pb0 = r * bl.count / runs, nb = (r + 1) * bl.count / runs - pb0;
        int64_t off[kMaxRun], P = 0;  // each block's first position in the run's tile
        for (int64_t i = 0; i < nb; ++i) {
          block_pos(g, bl, pb0 + i, &pos[i]);
          off[i] = P;
          P += pos[i].n;
        }
        blk.slab = P * L;
        const int64_t gkb = grp * l.nkb + kb;
        const float* wk = wpk + gkb * block_floats;
        blk.pf = nullptr;
        blk.pf_lines = 0;
        int64_t pf_total = 0;
        if (pack_own && !pack_chunks) {
          if (gkb != own_gkb) pack_block(p, l, a.w, gkb, own), pf_done = 0;
          own_gkb = gkb;
          wk = own;
          // The next block this thread packs (tasks of one block are `runs` apart): its KCRS
          // rows are contiguous; the kernel calls of this block prefetch them into L2.
          const int64_t next = (task / runs + 1) * runs;
          if (next < end) {
            const int64_t ngkb = next / runs, nk0 = ngkb % l.nkb * kbl;
            // Earlier tasks of this block prefetched the first pf_done lines already.
            blk.pf = a.w + (ngkb / l.nkb * Kg + nk0) * Cg * T + 16 * pf_done;
            pf_total = (std::min(kbl, Kg - nk0) * Cg * T + 15) / 16;
          }
        }
        const float* xg = view + grp * Cg / cpl * g.plane;
        KvecCommon cc = common;
        for (int64_t c0 = 0; c0 < Cg; c0 += chunk) {
          cc.channels = std::min(chunk, Cg - c0) / cpl;
          const int64_t per_call =
              (cc.step_x || cpl > 1) && !g.flat ? cc.channels * T : cc.channels;
          blk.w = wk + c0 * T * kbl;
          if (pack_chunks) {
            pack_columns(p, l, a.w, gkb, c0 * T, std::min(chunk, Cg - c0) * T, wchunk);
            blk.w = wchunk;
          }
          blk.bias = c0 == 0 && a.bias ? bias_buf + gkb * kbl : nullptr;
          blk.partial = c0 > 0;
          for (int64_t i = 0; i < nb; ++i) {
            blk.x = xg + c0 / cpl * g.plane + pos[i].x * cpl;
            blk.tile = tiles + off[i] * L;
            // A kernel call prefetches a line per (channel, tap) step of its step table or per
            // (channel block, tap) step of an nChw8c view, else per channel.
            if (blk.pf) blk.pf_lines = std::min(per_call, pf_total - pf_done);
            fns[pos[i].n](cc, blk);
            blk.pf += 16 * blk.pf_lines;
            pf_done += blk.pf_lines;
          }
        }
        const int64_t k0 = kb * kbl, kvalid = std::min(kbl, Kg - k0);
        float* yk = yn + (grp * Kg + k0) * g.OHW;
        if (bl.mode != Blocking::Mode::wide) {  // the run's positions are contiguous in y
          kvec_store_avx2(tiles, P, static_cast<int>(L), P * L, static_cast<int>(kvalid),
                          yk + pos[0].y0, g.OHW);
          continue;
        }
        // Wide: the run's positions are contiguous view offsets; each view row's first OW
        // columns are one output row's positions.
        const int64_t v0 = pos[0].x, v1 = v0 + P, rs = g.row_step;
        for (int64_t oh = v0 / rs; oh * rs < v1; ++oh) {
          const int64_t c0 = std::max(v0, oh * rs), c1 = std::min(v1, oh * rs + g.OW);
          if (c1 > c0)
            kvec_store_avx2(tiles + (c0 - v0) * L, c1 - c0, static_cast<int>(L), P * L,
                            static_cast<int>(kvalid), yk + oh * g.OW + (c0 - oh * rs), g.OHW);
        }
      }
    }
  }
}

// At most a quarter of the computed output channels wasted on the last block.
bool little_waste(const ConvProblem& p, const KvecConfig& c) {
  const int64_t kbl = c.kb * c.lanes();
  const int64_t computed = (p.Kg() + kbl - 1) / kbl * kbl;
  return 4 * (computed - p.Kg()) <= computed;
}

// nChw8c views are offered for strided problems only: stride-1 layers measured slower with them, as
// their planar view's positions are already consecutive.
bool nchw8c_applies(const ConvProblem& p) {
  return nchw8c_runs(p) && (p.stride_h > 1 || p.stride_w > 1);
}

class DirectKvec final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.direct_kvec"; }
  // Raised whenever the kernels change, so that winners stored against older code are measured
  // again (the history of versions: docs/measurements.md).
  std::string version() const override { return "12"; }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }

  // The register blocks of this CPU's widest vectors, the default first; every other config
  // varies one of them, and only where the block itself wastes little.
  static std::array<KvecConfig, 4> base_configs() {
    const bool z = cpu_isa() == CpuIsa::avx512;
    return z ? std::array<KvecConfig, 4>{{{2, true}, {4, true}, {3, true}, {1, true}}}
             : std::array<KvecConfig, 4>{{{2, false}, {3, false}, {4, false}, {1, false}}};
  }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar)
      return Applicability::no(
          "isa: cpu.direct_kvec needs AVX2 and FMA (the CPU or CONVTUNE_MAX_ISA has neither)");
    // forward() asks this on every call: the base blocks decide it without naming every config.
    const auto base = base_configs();
    if (std::none_of(base.begin(), base.end(),
                     [&](const KvecConfig& c) { return little_waste(p, c); }))
      return Applicability::no(
          "K: every register block would leave more than a quarter of its computed output channels "
          "unused (K/g = " +
          std::to_string(p.Kg()) + ")");
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    if (cpu_isa() == CpuIsa::scalar) return {};
    const bool z = cpu_isa() == CpuIsa::avx512;
    const std::array<KvecConfig, 4> all = base_configs();
    std::vector<std::string> out;
    for (const KvecConfig& c : all)
      if (little_waste(p, c)) out.push_back(c.name());
    // AVX2 blocks of a kernel larger than 1x1 whose reduction spans several chunks also come
    // summing all channels at once: which is faster varies by layer.
    if (!z && p.R * p.S > 1)
      for (const KvecConfig& c : all) {
        KvecConfig w = c;
        w.whole = true;
        if (little_waste(p, c) && make_layout(p, c).chunk < p.Cg()) out.push_back(w.name());
      }
    if (nchw8c_applies(p))
      for (const KvecConfig& c : all) {
        KvecConfig b = c;
        b.nchw8c = true;
        if (little_waste(p, c)) out.push_back(b.name());
      }
    // As cpu.direct: in place or aligned copies of 1x1 planes is the tuner's choice.
    append_aligned_configs(p, z ? 16 : 8, &out);
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return workspace_bytes_for(make_layout(p, parse_kvec_config(config)), true);
  }

  size_t do_packed_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return workspace_bytes_for(make_layout(p, parse_kvec_config(config)), false);
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    kvec_forward(p, config, a);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    return make_layout(p, parse_kvec_config(config)).packed_floats * sizeof(float);
  }

  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int threads) const override {
    const KvecConfig c = parse_kvec_config(config);
    if (cpu_isa() == CpuIsa::scalar)
      throw Error("config: cpu.direct_kvec " + config + " needs AVX2 and FMA");
    const Layout l = make_layout(p, c);
    float* out = static_cast<float*>(packed);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t gkb = 0; gkb < p.groups * l.nkb; ++gkb)
      pack_block(p, l, w, gkb, out + gkb * l.block_floats);
  }
};

}  // namespace
}  // namespace direct

const Algorithm& cpu_direct_kvec() {
  static const direct::DirectKvec algo;
  return algo;
}

}  // namespace conv::kernels
