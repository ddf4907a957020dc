// The CUDA kernels' index arithmetic and per-thread programs (kernels/cuda/index.hpp,
// direct_block.hpp, implicit_gemm_block.hpp, winograd_tile.hpp, fft_index.hpp), run on the CPU
// in every build, GPU or not: spans and stage plans against brute force; the cuda.direct and
// cuda.implicit_gemm block programs, the cuda.im2col_gemm im2col + GEMM arguments, the
// cuda.winograd tile transforms + batched GEMM and the cuda.fft packing, polyphase split, product
// and crop/bias epilogue (a naive DFT standing in for cuFFT, a plain loop for cuBLAS) executed
// thread by thread on whole problems against the float64 reference, with NaN-poisoned shared
// memory, scratch and outputs and sentinel guards around every buffer; and, in a CUDA build
// without a GPU, that every cuda.* algorithm says "no CUDA device" without throwing; and the ELF
// soname check that comes before the plugin is loaded.
#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/fft/fft.hpp"
#include "cuda/direct_block.hpp"
#include "cuda/fft_index.hpp"
#include "cuda/implicit_gemm_block.hpp"
#include "cuda/index.hpp"
#include "cuda/winograd_tile.hpp"
#include "elf_soname.hpp"
#include "support.hpp"

using conv::gpu::Dim;
using conv::gpu::Span;

namespace {

constexpr float kSentinel = 12345.5f;
constexpr size_t kGuard = 64;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// A buffer with `kGuard` sentinels on both sides, so stray reads pick up a value that shows and
// stray writes are detected.
struct Guarded {
  std::vector<float> v;
  explicit Guarded(size_t n, float fill) : v(n + 2 * kGuard, kSentinel) {
    std::fill(v.begin() + kGuard, v.end() - kGuard, fill);
  }
  float* data() { return v.data() + kGuard; }
  bool guards_intact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (v[i] != kSentinel || v[v.size() - 1 - i] != kSentinel) return false;
    return true;
  }
};

Dim random_dim(std::mt19937_64& rng) {
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Dim d;
  d.kernel = uni(1, 12);
  d.stride = uni(1, 6);
  d.dilation = uni(1, 4);
  d.pad = uni(0, 6);
  const int64_t ext = (d.kernel - 1) * d.dilation + 1;
  d.in = std::max<int64_t>(1, ext - 2 * d.pad) + uni(0, 40);
  d.out = (d.in + 2 * d.pad - ext) / d.stride + 1;
  return d;
}

// Whether a stage of th x tw taps fits, recomputed the slow way.
bool fits_brute(const Dim& h, const Dim& w, int tile_h, int tile_w, int kpt, int64_t th, int64_t tw,
                int64_t budget) {
  const double ch = th == 1 ? tile_h : (tile_h - 1.0) * h.stride + (th - 1.0) * h.dilation + 1;
  const double cw = tw == 1 ? tile_w : (tile_w - 1.0) * w.stride + (tw - 1.0) * w.dilation + 1;
  return ch * cw + static_cast<double>(kpt) * th * tw <= static_cast<double>(budget);
}

// Column-major C = A * B + beta * C per batch, exactly as cublasSgemmStridedBatched defines it.
void sgemm_strided_batched(const conv::gpu::GemmArgs& g, const float* A, const float* B, float beta,
                           float* C) {
  for (int b = 0; b < g.batch; ++b) {
    const float* a = A + b * g.stride_a;
    const float* bb = B + b * g.stride_b;
    float* c = C + b * g.stride_c;
    for (int j = 0; j < g.n; ++j) {
      for (int i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int l = 0; l < g.k; ++l)
          sum += static_cast<double>(a[i + l * g.lda]) * bb[l + j * g.ldb];
        float& out = c[i + j * g.ldc];
        out = static_cast<float>(sum + (beta != 0 ? beta * out : 0.0));
      }
    }
  }
}

// cuda.direct's block program, every block and every thread in turn, phase by phase as the kernel
// runs it between its __syncthreads().
template <int TH, int TW, int KPT>
void run_direct_blocks(const conv::ConvProblem& prob, const float* x, const float* w,
                       const float* bias, float* y) {
  using B = conv::gpu::DirectBlock<TH, TW, KPT>;
  const conv::gpu::DirectParams p = B::make_params(conv::gpu::shape_of(prob));
  REQUIRE(p.plan.floats <= B::kBudget);
  REQUIRE(p.plan.channels >= 1);
  Guarded smem(p.plan.floats, kNaN);
  std::vector<std::array<float, KPT>> acc(B::kThreads);
  const int64_t tiles = p.tiles_h * p.tiles_w, gks = p.s.groups * p.kblocks;
  for (int64_t n = 0; n < p.s.N; ++n) {
    for (int64_t gk = 0; gk < gks; ++gk) {
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const auto b = B::position(p, tile, gk, n);
        for (auto& a : acc) {
          float tmp[KPT];
          B::init(p, b, bias, tmp);
          std::copy(tmp, tmp + KPT, a.begin());
        }
        for (int64_t c0 = 0; c0 < p.s.Cg; c0 += p.plan.channels) {
          for (int64_t r0 = 0; r0 < p.s.R; r0 += p.plan.taps_h) {
            for (int64_t s0 = 0; s0 < p.s.S; s0 += p.plan.taps_w) {
              const auto st = B::stage(p, b, c0, r0, s0);
              std::fill(smem.data(), smem.data() + p.plan.floats, kNaN);
              for (int tid = 0; tid < B::kThreads; ++tid) B::load(p, b, st, x, w, smem.data(), tid);
              REQUIRE(smem.guards_intact());
              for (int ty = 0; ty < TH; ++ty) {
                for (int tx = 0; tx < TW; ++tx) {
                  float tmp[KPT];
                  auto& a = acc[ty * TW + tx];
                  std::copy(a.begin(), a.end(), tmp);
                  B::accumulate(st, smem.data(), ty, tx, tmp);
                  std::copy(tmp, tmp + KPT, a.begin());
                }
              }
            }
          }
        }
        for (int ty = 0; ty < TH; ++ty) {
          for (int tx = 0; tx < TW; ++tx) {
            float tmp[KPT];
            std::copy(acc[ty * TW + tx].begin(), acc[ty * TW + tx].end(), tmp);
            B::store(p, b, ty, tx, tmp, y);
          }
        }
      }
    }
  }
}

// Runs one emulated kernel on `c`'s data (inputs and output inside guards, output NaN-poisoned)
// and compares with the reference.
template <class Run>
void check_emulated(convtest::ReferenceCase& c, const char* what, Run run) {
  const conv::ConvProblem& p = c.problem();
  Guarded x(p.x_elems(), 0), w(p.w_elems(), 0), b(p.K, 0), y(p.y_elems(), kNaN);
  std::memcpy(x.data(), c.x(), p.x_bytes());
  std::memcpy(w.data(), c.w(), p.w_bytes());
  std::memcpy(b.data(), c.bias(), p.K * 4);
  run(x.data(), w.data(), b.data(), y.data());
  const auto r = c.compare(y.data(), conv::exact_order_error_bound(p));
  INFO(what << " on " << p.key() << " (" << p.name << "): max error " << r.max_error << " (bound "
            << r.bound << "), " << r.nonfinite << " non-finite; worst " << r.where);
  CHECK(x.guards_intact());
  CHECK(w.guards_intact());
  CHECK(b.guards_intact());
  CHECK(y.guards_intact());
  CHECK(r.nonfinite == 0);
  CHECK(r.max_error <= r.bound);
}

void check_all_emulations(const conv::ConvProblem& p, uint64_t seed) {
  convtest::ReferenceCase c(p, seed);
  check_emulated(c, "cuda.direct t16x16k4",
                 [&](const float* x, const float* w, const float* b, float* y) {
                   run_direct_blocks<16, 16, 4>(p, x, w, b, y);
                 });
  check_emulated(c, "cuda.direct t16x16k8",
                 [&](const float* x, const float* w, const float* b, float* y) {
                   run_direct_blocks<16, 16, 8>(p, x, w, b, y);
                 });
  check_emulated(c, "cuda.direct t8x8k16",
                 [&](const float* x, const float* w, const float* b, float* y) {
                   run_direct_blocks<8, 8, 16>(p, x, w, b, y);
                 });
  check_emulated(c, "cuda.direct t16x16k1",
                 [&](const float* x, const float* w, const float* b, float* y) {
                   run_direct_blocks<16, 16, 1>(p, x, w, b, y);
                 });
  // cuda.im2col_gemm: im2col of each image into the column matrix, bias fill, batched GEMM.
  check_emulated(c, "cuda.im2col_gemm",
                 [&](const float* x, const float* w, const float* b, float* y) {
                   const auto s = conv::gpu::shape_of(p);
                   const auto g = conv::gpu::im2col_gemm_args(s);
                   const int64_t ohw = s.OH * s.OW, total = s.C * s.R * s.S * ohw;
                   Guarded col(total, kNaN);
                   for (int64_t n = 0; n < s.N; ++n) {
                     const float* xn = x + n * s.C * s.H * s.W;
                     float* yn = y + n * s.K * ohw;
                     for (int64_t i = 0; i < total; ++i) {
                       const int64_t src = conv::gpu::im2col_source<int64_t>(s, i);
                       col.data()[i] = src >= 0 ? xn[src] : 0.0f;
                     }
                     for (int64_t i = 0; i < s.K * ohw; ++i) yn[i] = b[i / ohw];
                     sgemm_strided_batched(g, col.data(), w, 1.0f, yn);
                   }
                   CHECK(col.guards_intact());
                 });
}

}  // namespace

TEST_CASE("cuda index: a span stages every input its outputs read through its taps") {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 400; ++trial) {
    const Dim d = random_dim(rng);
    for (int tile : {1, 3, 8, 16}) {
      for (int64_t taps = 1; taps <= d.kernel; ++taps) {
        for (int64_t o0 = 0; o0 < d.out; o0 += tile) {
          for (int64_t t0 = 0; t0 < d.kernel; t0 += taps) {
            const int here = static_cast<int>(std::min<int64_t>(taps, d.kernel - t0));
            const Span s = conv::gpu::make_span(d, o0, t0, tile, here);
            // A shorter last chunk never needs more slots than the plan's full chunk.
            REQUIRE(s.count <= conv::gpu::span_count(d, tile, taps));
            for (int i = 0; i < tile; ++i) {
              for (int j = 0; j < here; ++j) {
                const int64_t slot = static_cast<int64_t>(i) * s.out_step + j * s.tap_step;
                INFO("in " << d.in << " kernel " << d.kernel << " stride " << d.stride
                           << " dilation " << d.dilation << " pad " << d.pad << " tile " << tile
                           << " taps " << here << " o0 " << o0 << " t0 " << t0);
                REQUIRE(slot >= 0);
                REQUIRE(slot < s.count);
                REQUIRE(s.base + slot * s.in_step ==
                        (o0 + i) * d.stride - d.pad + (t0 + j) * d.dilation);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda index: stage plans fit the budget and are as large as fits") {
  std::mt19937_64 rng(78);
  auto check_plan = [](const Dim& h, const Dim& w, int th_tile, int tw_tile, int kpt, int64_t Cg,
                       int64_t budget, int max_ch) {
    const auto p = conv::gpu::plan_stage(h, w, th_tile, tw_tile, kpt, Cg, budget, max_ch);
    INFO("R " << h.kernel << " S " << w.kernel << " strides " << h.stride << "," << w.stride
              << " dilations " << h.dilation << "," << w.dilation << " tile " << th_tile << "x"
              << tw_tile << " kpt " << kpt << " budget " << budget);
    REQUIRE(p.taps_h >= 1);
    REQUIRE(p.taps_h <= h.kernel);
    REQUIRE(p.taps_w >= 1);
    REQUIRE(p.taps_w <= w.kernel);
    REQUIRE(p.channels >= 1);
    REQUIRE(p.channels <= std::min<int64_t>(Cg, max_ch));
    REQUIRE(p.floats <= budget);
    REQUIRE(fits_brute(h, w, th_tile, tw_tile, kpt, p.taps_h, p.taps_w, budget));
    // Maximal: all columns and one more row would not fit, or columns are already chunked.
    if (p.taps_w == w.kernel && p.taps_h < h.kernel)
      REQUIRE_FALSE(fits_brute(h, w, th_tile, tw_tile, kpt, p.taps_h + 1, p.taps_w, budget));
    if (p.taps_w < w.kernel) {
      REQUIRE(p.taps_h == 1);
      REQUIRE_FALSE(fits_brute(h, w, th_tile, tw_tile, kpt, 1, p.taps_w + 1, budget));
    }
    // Every stage the kernel can form (shorter last chunks, fewer channels) fits p.floats.
    for (int64_t rt = 1; rt <= p.taps_h; ++rt) {
      for (int64_t st = 1; st <= p.taps_w; ++st) {
        const int64_t per =
            conv::gpu::span_count(h, th_tile, rt) * conv::gpu::span_count(w, tw_tile, st) +
            kpt * rt * st;
        REQUIRE(p.channels * per <= p.floats);
      }
    }
  };
  for (int trial = 0; trial < 300; ++trial) {
    const Dim h = random_dim(rng), w = random_dim(rng);
    check_plan(h, w, 16, 16, 4, 1 + trial % 20, 8192, 8);
    check_plan(h, w, 8, 8, 16, 1 + trial % 7, 8192, 8);
    check_plan(h, w, 16, 16, 1, 3, 700, 8);  // small budget: forces chunking
  }
  // Extremes: a huge stride, a huge dilated kernel, a 1 x 400 kernel.
  const Dim huge_stride{100000, 10, 3, 10000, 0, 1};
  const Dim huge_kernel{20000, 10, 200, 1, 0, 50};
  const Dim wide{400, 1, 400, 1, 0, 1};
  const Dim one{1, 1, 1, 1, 0, 1};
  check_plan(huge_stride, huge_stride, 16, 16, 4, 64, 8192, 8);
  check_plan(huge_kernel, huge_kernel, 16, 16, 8, 64, 8192, 8);
  check_plan(one, wide, 16, 16, 4, 1, 8192, 8);
  check_plan(wide, one, 16, 16, 4, 1, 8192, 8);
}

TEST_CASE("cuda index: tiles cover every output exactly once") {
  for (int64_t OH : {1, 7, 16, 17, 55}) {
    for (int64_t OW : {1, 9, 32, 33}) {
      for (auto [th, tw] : {std::pair{16, 16}, std::pair{8, 8}, std::pair{4, 16}}) {
        const int64_t tiles_h = conv::gpu::ceil_div(OH, th), tiles_w = conv::gpu::ceil_div(OW, tw);
        std::vector<int> hits(OH * OW, 0);
        for (int64_t t = 0; t < tiles_h * tiles_w; ++t) {
          int64_t oh0 = -1, ow0 = -1;
          conv::gpu::tile_origin(t, tiles_w, th, tw, &oh0, &ow0);
          for (int i = 0; i < th; ++i)
            for (int j = 0; j < tw; ++j)
              if (oh0 + i < OH && ow0 + j < OW) ++hits[(oh0 + i) * OW + ow0 + j];
        }
        for (int h : hits) REQUIRE(h == 1);
      }
    }
  }
}

TEST_CASE("cuda index: im2col_source matches the direct definition") {
  convtest::RandomSpec spec;
  spec.max_hw = 12;
  spec.max_channels = 6;
  auto problems = convtest::random_problems(60, 4242, spec);
  for (const auto& p : problems) {
    const auto s = conv::gpu::shape_of(p);
    int64_t idx = 0;
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t r = 0; r < p.R; ++r)
        for (int64_t t = 0; t < p.S; ++t)
          for (int64_t oh = 0; oh < p.OH(); ++oh)
            for (int64_t ow = 0; ow < p.OW(); ++ow, ++idx) {
              const int64_t ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
              const int64_t iw = ow * p.stride_w - p.pad_left + t * p.dilation_w;
              const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
              INFO(p.key() << " element " << idx);
              const int64_t want = inside ? (c * p.H + ih) * p.W + iw : -1;
              REQUIRE(conv::gpu::im2col_source<int64_t>(s, idx) == want);
              REQUIRE(conv::gpu::im2col_fits_int32(s));
              REQUIRE(conv::gpu::im2col_source<int32_t>(s, static_cast<int32_t>(idx)) == want);
            }
  }
}

TEST_CASE(
    "cuda index: the cuda.direct block program and im2col+GEMM run on the CPU match the "
    "reference") {
  SECTION("seeded random problems") {
    convtest::RandomSpec spec;
    spec.max_n = 2;
    spec.max_hw = 24;
    spec.max_channels = 18;
    auto problems = convtest::random_problems(120, 20261130, spec);
    for (size_t i = 0; i < problems.size(); ++i) check_all_emulations(problems[i], 500 + i);
  }
  SECTION("shapes that force chunked stages and the gather mode") {
    for (const char* d : {
             "mb1ic2ih40iw37oc5kh11kw11sh4sw4ph0pw0dh2dw2n\"dilated 11x11 s4\"",
             "mb1ic1ih1iw400oc3kh1kw400ph0pw0n\"1x400 kernel\"",
             "mb1ic1ih400iw1oc3kh400kw1ph0pw0n\"400x1 kernel\"",
             "mb1ic3ih200iw200oc2kh3kw3sh50sw60ph1pw1n\"huge stride\"",
             "g4mb2ic4ih17iw19oc4kh5kw3sh2sw1ph3pw1dh1dw2n\"depthwise, dilated\"",
             "mb1ic20ih9iw9oc17kh3kw3ph1pw1n\"channel chunks, K not a multiple of 16\"",
         }) {
      const conv::ConvProblem p = conv::parse_descriptor(d);
      check_all_emulations(p, 9);
    }
    // Asymmetric padding (not expressible by every descriptor writer): more at the bottom/right.
    conv::ConvProblem p = conv::parse_descriptor("mb1ic3ih13iw11oc6kh3kw5n\"asymmetric\"");
    p.pad_top = 0, p.pad_bottom = 3, p.pad_left = 4, p.pad_right = 1;
    p.validate();
    check_all_emulations(p, 10);
  }
}

#ifdef CONVTUNE_CUDA_PLUGIN_PATH
// Before the registry is first read: the plugin is loaded by path, also on a machine without the
// NVIDIA driver, so that its rows are tested everywhere.
static const bool plugin_forced = [] {
  return setenv("CONVTUNE_CUDA_PLUGIN", CONVTUNE_CUDA_PLUGIN_PATH, /*overwrite=*/0) == 0;
}();
#endif

TEST_CASE("cuda: the CUDA algorithms are registered and answer without a GPU") {
  std::vector<const conv::Algorithm*> cuda;
  for (const conv::Algorithm* a : conv::registry())
    if (a->device() == conv::Device::Kind::cuda) cuda.push_back(a);
#ifdef CONVTUNE_HAVE_CUDA
  std::vector<std::string> ids;
  for (const conv::Algorithm* a : cuda) ids.emplace_back(a->id());
  CHECK(ids ==
        std::vector<std::string>{"cuda.winograd", "cuda.fft", "cuda.implicit_gemm", "cuda.direct",
                                 "cuda.im2col_gemm", "cuda.cudnn.implicit_gemm",
                                 "cuda.cudnn.implicit_precomp_gemm", "cuda.cudnn.gemm",
                                 "cuda.cudnn.direct", "cuda.cudnn.fft", "cuda.cudnn.fft_tiling",
                                 "cuda.cudnn.winograd", "cuda.cudnn.winograd_nonfused"});
  bool gpu = true;
  try {
    conv::Device::cuda(0).fingerprint();
  } catch (const conv::Error& e) {
    gpu = false;
    CHECK_THAT(e.what(), Catch::StartsWith("device: cuda:0: no CUDA device is present ("));
  }
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic8ih14iw14oc16kh3kw3ph1pw1n\"small\"");
  for (const conv::Algorithm* a : cuda) {
    conv::Applicability ok;
    REQUIRE_NOTHROW(ok = a->applicable(p));
    if (!gpu) {
      CHECK_FALSE(ok.ok);
      CHECK(ok.reason == "no CUDA device");
    }
    const auto configs = a->configs(p);
    REQUIRE_FALSE(configs.empty());
    // Sizes are for problems an algorithm runs: without a GPU, none.
    if (gpu)
      CHECK_NOTHROW(a->workspace_bytes(p, configs.front()));
    else
      CHECK_THROWS_WITH(a->workspace_bytes(p, configs.front()), "no CUDA device");
    CHECK(a->error_bound(p, configs.front()) > 0);
  }
#else
  CHECK(cuda.empty());  // a CPU-only build registers none
#endif
}

// ---- cuda.implicit_gemm, cuda.winograd and cuda.fft, thread by thread on the CPU ----

namespace {

// cuda.implicit_gemm's block program, every block and thread in turn. Within a k-step every
// thread's stores into the next buffer run before any thread computes from the current one (the
// most adversarial order the GPU allows between two __syncthreads), so a buffer mix-up shows.
template <int BM, int BN, int BK, int TM, int TN>
void run_igemm_blocks(const conv::ConvProblem& prob, const float* x, const float* w,
                      const float* bias, float* y) {
  using B = conv::gpu::IgemmBlock<BM, BN, BK, TM, TN>;
  const conv::gpu::IgemmParams p = B::make_params(conv::gpu::shape_of(prob));
  Guarded smem(B::kSmemFloats, kNaN);
  std::vector<typename B::Regs> regs(B::kThreads);
  std::vector<std::array<float, TM * TN>> acc(B::kThreads);
  auto with_acc = [&](int tid, auto fn) {
    float a[TM][TN];
    std::memcpy(a, acc[tid].data(), sizeof(a));
    fn(a);
    std::memcpy(acc[tid].data(), a, sizeof(a));
  };
  for (int64_t g = 0; g < p.s.groups; ++g) {
    for (int64_t bm = 0; bm < p.mblocks; ++bm) {
      for (int64_t bn = 0; bn < p.nblocks; ++bn) {
        const auto b = B::position(p, bn, bm, g);
        for (int tid = 0; tid < B::kThreads; ++tid) with_acc(tid, [](auto& a) { B::zero(a); });
        for (int tid = 0; tid < B::kThreads; ++tid) B::load_global(p, b, 0, x, w, tid, regs[tid]);
        for (int tid = 0; tid < B::kThreads; ++tid) B::store_shared(regs[tid], smem.data(), 0, tid);
        for (int64_t kt = 0; kt < p.ksteps; ++kt) {
          const bool more = kt + 1 < p.ksteps;
          const int cur = static_cast<int>(kt & 1), next = 1 - cur;
          if (more) {
            for (int tid = 0; tid < B::kThreads; ++tid)
              B::load_global(p, b, (kt + 1) * BK, x, w, tid, regs[tid]);
            for (int tid = 0; tid < B::kThreads; ++tid)
              B::store_shared(regs[tid], smem.data(), next, tid);
          }
          for (int tid = 0; tid < B::kThreads; ++tid)
            with_acc(tid, [&](auto& a) { B::compute(smem.data(), cur, tid, a); });
        }
        REQUIRE(smem.guards_intact());
        for (int tid = 0; tid < B::kThreads; ++tid)
          with_acc(tid, [&](auto& a) { B::store(p, b, tid, a, bias, y); });
      }
    }
  }
}

// cuda.winograd: weight transform, border, input transform, batched GEMM (the plain-loop
// stand-in for cublasSgemmStridedBatched with the same arguments), output transform.
template <int M>
void run_winograd(const conv::ConvProblem& prob, const float* x, const float* w, const float* bias,
                  float* y) {
  const conv::gpu::WinoParams p = conv::gpu::make_wino_params(prob, M);
  const auto& s = p.s;
  Guarded v(p.points * p.T * s.C, kNaN), u(p.points * s.K * s.Cg, kNaN),
      mb(p.points * p.T * s.K, kNaN);
  for (int64_t k = 0; k < s.K; ++k)
    for (int64_t c = 0; c < s.Cg; ++c) conv::gpu::wino_weight<M>(s, w, k, c, u.data());
  for (int64_t o = 0; o < s.N * s.K * s.OH * s.OW; ++o) conv::gpu::wino_border(p, bias, o, y);
  if (p.T > 0) {
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t t = 0; t < p.T; ++t) conv::gpu::wino_input_tile<M>(p, x, c, t, v.data());
    sgemm_strided_batched(conv::gpu::wino_gemm_args(p), v.data(), u.data(), 0.0f, mb.data());
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t t = 0; t < p.T; ++t) conv::gpu::wino_output_tile<M>(p, mb.data(), bias, k, t, y);
  }
  CHECK(v.guards_intact());
  CHECK(u.guards_intact());
  CHECK(mb.guards_intact());
}

using cplx = std::complex<double>;

// What cuFFT's R2C computes for `batch` contiguous T x T real tiles, written frequency-major
// (element f = u * Tc + v of batch b at f * batch + b), in float64 then rounded.
void naive_r2c(int64_t T, int64_t batch, const float* in, conv::gpu::Cf* out) {
  const int64_t Tc = T / 2 + 1;
  const double pi = std::acos(-1.0);
  std::vector<cplx> tw(T), rows(T * Tc);
  for (int64_t i = 0; i < T; ++i) tw[i] = std::polar(1.0, -2 * pi * i / T);
  for (int64_t b = 0; b < batch; ++b) {
    const float* x = in + b * T * T;
    for (int64_t a = 0; a < T; ++a)
      for (int64_t v = 0; v < Tc; ++v) {
        cplx sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += static_cast<double>(x[a * T + j]) * tw[v * j % T];
        rows[a * Tc + v] = sum;
      }
    for (int64_t u = 0; u < T; ++u)
      for (int64_t v = 0; v < Tc; ++v) {
        cplx sum = 0;
        for (int64_t a = 0; a < T; ++a) sum += rows[a * Tc + v] * tw[u * a % T];
        out[(u * Tc + v) * batch + b] = {static_cast<float>(sum.real()),
                                         static_cast<float>(sum.imag())};
      }
  }
}

// What cuFFT's C2R computes (unnormalised inverse of a Hermitian spectrum) from frequency-major
// spectra into `batch` contiguous T x T real tiles.
void naive_c2r(int64_t T, int64_t batch, const conv::gpu::Cf* in, float* out) {
  const int64_t Tc = T / 2 + 1;
  const double pi = std::acos(-1.0);
  std::vector<cplx> tw(T), cols(T * Tc);
  for (int64_t i = 0; i < T; ++i) tw[i] = std::polar(1.0, 2 * pi * i / T);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t a = 0; a < T; ++a)
      for (int64_t v = 0; v < Tc; ++v) {
        cplx sum = 0;
        for (int64_t u = 0; u < T; ++u) {
          const auto& e = in[(u * Tc + v) * batch + b];
          sum += cplx(e.x, e.y) * tw[u * a % T];
        }
        cols[a * Tc + v] = sum;
      }
    for (int64_t a = 0; a < T; ++a)
      for (int64_t j = 0; j < T; ++j) {
        // Columns v >= Tc are the conjugates of T - v (Hermitian symmetry).
        double sum = 0;
        for (int64_t v = 0; v < T; ++v) {
          const cplx c = v < Tc ? cols[a * Tc + v] : std::conj(cols[a * Tc + T - v]);
          sum += (c * tw[v * j % T]).real();
        }
        out[b * T * T + a * T + j] = static_cast<float>(sum);
      }
  }
}

// Column-major complex C = A * B per batch, as cublasCgemmStridedBatched with alpha 1, beta 0.
void cgemm_strided_batched(const conv::gpu::GemmArgs& g, const conv::gpu::Cf* A,
                           const conv::gpu::Cf* B, conv::gpu::Cf* C) {
  for (int b = 0; b < g.batch; ++b)
    for (int j = 0; j < g.n; ++j)
      for (int i = 0; i < g.m; ++i) {
        cplx sum = 0;
        for (int l = 0; l < g.k; ++l) {
          const auto& a = A[b * g.stride_a + i + l * g.lda];
          const auto& bb = B[b * g.stride_b + l + j * g.ldb];
          sum += cplx(a.x, a.y) * cplx(bb.x, bb.y);
        }
        C[b * g.stride_c + i + j * g.ldc] = {static_cast<float>(sum.real()),
                                             static_cast<float>(sum.imag())};
      }
}

// cuda.fft with a T x T transform: packing, R2C, per-frequency GEMM (or the depthwise product),
// C2R, crop + scale + bias, in cuda.fft's layouts.
void run_fft(const conv::ConvProblem& prob, int64_t T, const float* x, const float* w,
             const float* bias, float* y) {
  using conv::gpu::Cf;
  const conv::gpu::FftParams p = conv::gpu::make_fft_params(prob, T);
  const int64_t TT = T * T, G = p.s.groups, bx = G * p.Cp * p.J, bw = p.s.K * p.Cp,
                by = p.s.K * p.J;
  Guarded xr(bx * TT, kNaN), wr(bw * TT, kNaN), yr(by * TT, kNaN);
  std::vector<Cf> xf(p.F * bx), wf(p.F * bw), yf(p.F * by, Cf{kNaN, kNaN});
  for (int64_t i = 0; i < bx * TT; ++i) xr.data()[i] = conv::gpu::fft_input_value(p, x, i);
  for (int64_t i = 0; i < bw * TT; ++i) wr.data()[i] = conv::gpu::fft_weight_value(p, w, i);
  naive_r2c(T, bx, xr.data(), xf.data());
  naive_r2c(T, bw, wr.data(), wf.data());
  if (p.s.Cg == 1 && p.s.Kg == 1) {
    for (int64_t i = 0; i < p.F * G * p.J; ++i)
      conv::gpu::fft_depthwise_product(p, xf.data(), wf.data(), yf.data(), i);
  } else {
    cgemm_strided_batched(conv::gpu::fft_gemm_args(p), xf.data(), wf.data(), yf.data());
  }
  naive_c2r(T, by, yf.data(), yr.data());
  for (int64_t o = 0; o < p.s.N * p.s.K * p.s.OH * p.s.OW; ++o)
    y[o] = conv::gpu::fft_output_value(p, yr.data(), bias, o);
  CHECK(xr.guards_intact());
  CHECK(wr.guards_intact());
  CHECK(yr.guards_intact());
}

// Runs one emulation on `c`'s data and compares under `algo`'s contract for `config` (the CPU
// algorithm whose error model the CUDA one shares), or the exact-order bound when algo is null.
template <class Run>
void check_emulated_with(convtest::ReferenceCase& c, const std::string& what,
                         const conv::Algorithm* algo, const std::string& config, Run run) {
  const conv::ConvProblem& p = c.problem();
  Guarded x(p.x_elems(), 0), w(p.w_elems(), 0), b(p.K, 0), y(p.y_elems(), kNaN);
  std::memcpy(x.data(), c.x(), p.x_bytes());
  std::memcpy(w.data(), c.w(), p.w_bytes());
  if (c.bias()) std::memcpy(b.data(), c.bias(), p.K * 4);
  const float* bias = c.bias() ? b.data() : nullptr;
  run(x.data(), w.data(), bias, y.data());
  const auto r = algo ? c.compare(y.data(), *algo, config)
                      : c.compare(y.data(), conv::exact_order_error_bound(p));
  INFO(what << " on " << p.key() << " (" << p.name << "): max error " << r.max_error << " (bound "
            << r.bound << "), " << r.nonfinite << " non-finite; worst " << r.where);
  CHECK(x.guards_intact());
  CHECK(w.guards_intact());
  CHECK(b.guards_intact());
  CHECK(y.guards_intact());
  CHECK(r.nonfinite == 0);
  CHECK(r.max_error <= r.bound);
}

// cpu.fft's contract with the geometry of a T x T transform (cuda.fft's error model).
struct FftModel final : conv::Algorithm {
  int64_t T;
  explicit FftModel(int64_t t) : T(t) {}
  std::string_view id() const override { return "fft model"; }
  std::string version() const override { return "0"; }
  conv::Device::Kind device() const override { return conv::Device::Kind::cpu; }
  conv::NumericClass numeric_class() const override { return conv::NumericClass::transform_based; }
  conv::Applicability do_applicable(const conv::ConvProblem&) const override { return {}; }
  std::vector<std::string> do_configs(const conv::ConvProblem&) const override { return {"t"}; }
  size_t do_workspace_bytes(const conv::ConvProblem&, const std::string&) const override {
    return 0;
  }
  void do_forward(const conv::ConvProblem&, const std::string&,
                  const conv::ForwardArgs&) const override {}
  double do_error_bound(const conv::ConvProblem& p, const std::string&) const override {
    return conv::kernels::fft::error_bound(p, conv::gpu::fft_cpu_geometry(p, T));
  }
  void do_add_error_scale(const conv::ConvProblem& p, const std::string&, const float* x,
                          const float* w, double* scale, int threads) const override {
    conv::kernels::fft::add_error_scale(p, conv::gpu::fft_cpu_geometry(p, T), x, w, scale, threads);
  }
};

void check_fft_emulation(const conv::ConvProblem& p, uint64_t seed, convtest::Data data) {
  convtest::ReferenceCase c(p, seed, data);
  std::vector<int64_t> sizes = {conv::gpu::fft_full_size(p)};
  const int64_t Rp = (p.R - 1) * p.dilation_h / p.stride_h + 1;
  const int64_t Sp = (p.S - 1) * p.dilation_w / p.stride_w + 1;
  if (Rp <= 15 && Sp <= 15 && sizes[0] > 16) sizes.push_back(16);
  for (int64_t T : sizes) {
    const FftModel model(T);
    check_emulated_with(c, "cuda.fft T=" + std::to_string(T), &model, "t",
                        [&](const float* x, const float* w, const float* b, float* y) {
                          run_fft(p, T, x, w, b, y);
                        });
  }
}

void check_igemm_emulations(const conv::ConvProblem& p, uint64_t seed) {
  convtest::ReferenceCase c(p, seed);
  check_emulated_with(c, "cuda.implicit_gemm m64n64k8", nullptr, "",
                      [&](const float* x, const float* w, const float* b, float* y) {
                        run_igemm_blocks<64, 64, 8, 4, 4>(p, x, w, b, y);
                      });
  check_emulated_with(c, "cuda.implicit_gemm m32n64k16", nullptr, "",
                      [&](const float* x, const float* w, const float* b, float* y) {
                        run_igemm_blocks<32, 64, 16, 2, 4>(p, x, w, b, y);
                      });
}

}  // namespace

TEST_CASE("cuda index: the cuda.implicit_gemm block program run on the CPU matches the reference") {
  SECTION("seeded random problems (padding, stride, dilation, groups)") {
    convtest::RandomSpec spec;
    spec.max_n = 2;
    spec.max_hw = 16;
    spec.max_channels = 12;
    auto problems = convtest::random_problems(80, 20261201, spec);
    for (size_t i = 0; i < problems.size(); ++i) check_igemm_emulations(problems[i], 700 + i);
  }
  SECTION("every tile shape on a few problems") {
    for (const char* d : {"g2mb2ic18ih9iw7oc70kh3kw2sh2sw1ph1pw2dh1dw2n\"groups, K > 64\"",
                          "mb1ic37ih5iw5oc130kh1kw1n\"1x1, K > 128, C not a multiple of BK\""}) {
      const conv::ConvProblem p = conv::parse_descriptor(d);
      convtest::ReferenceCase c(p, 11);
      check_emulated_with(c, "cuda.implicit_gemm m128n128k8", nullptr, "",
                          [&](const float* x, const float* w, const float* b, float* y) {
                            run_igemm_blocks<128, 128, 8, 8, 8>(p, x, w, b, y);
                          });
      check_emulated_with(c, "cuda.implicit_gemm m128n64k8", nullptr, "",
                          [&](const float* x, const float* w, const float* b, float* y) {
                            run_igemm_blocks<128, 64, 8, 8, 4>(p, x, w, b, y);
                          });
    }
  }
}

TEST_CASE("cuda index: the cuda.winograd tile transforms run on the CPU match the reference") {
  const conv::Algorithm* model = conv::find_algorithm("cpu.winograd");
  REQUIRE(model);
  convtest::RandomSpec spec;
  spec.only_3x3_s1 = true;
  spec.max_n = 2;
  spec.max_hw = 20;
  spec.max_channels = 16;
  auto problems = convtest::random_problems(200, 20261202, spec);
  // Padding larger than the kernel (a core smaller than the output) and a 1x1 image.
  for (const char* d : {"mb1ic3ih5iw4oc5kh3kw3ph4pw3n\"pad > kernel\"",
                        "g3mb2ic6ih1iw1oc9kh3kw3ph2pw2n\"1x1 image, groups\""})
    problems.push_back(conv::parse_descriptor(d));
  const convtest::Data datas[] = {convtest::Data::uniform, convtest::Data::mixed,
                                  convtest::Data::positive};
  for (size_t i = 0; i < problems.size(); ++i) {
    const conv::ConvProblem& p = problems[i];
    convtest::ReferenceCase c(p, 900 + i, datas[i % 3]);
    check_emulated_with(c, "cuda.winograd m2", model, "m2",
                        [&](const float* x, const float* w, const float* b, float* y) {
                          run_winograd<2>(p, x, w, b, y);
                        });
    check_emulated_with(c, "cuda.winograd m4", model, "m4",
                        [&](const float* x, const float* w, const float* b, float* y) {
                          run_winograd<4>(p, x, w, b, y);
                        });
  }
}

TEST_CASE("cuda index: the cuda.fft packing, polyphase split and epilogue match the reference") {
  SECTION("a tap of every phase lands at its sub-kernel position, and only there") {
    for (int64_t s = 1; s <= 5; ++s)
      for (int64_t d = 1; d <= 4; ++d)
        for (int64_t R = 1; R <= 9; ++R) {
          const int64_t ph = s / std::gcd(s, d), Rp = (R - 1) * d / s + 1;
          std::vector<int> hits(R, 0);
          for (int64_t pa = 0; pa < std::min(R, ph); ++pa)
            for (int64_t q = 0; q < Rp; ++q) {
              const int64_t r = conv::gpu::fft_tap(q, pa, ph, R, s, d);
              if (r < 0) continue;
              INFO("s " << s << " d " << d << " R " << R << " phase " << pa << " q " << q);
              REQUIRE(r % ph == pa);
              REQUIRE(r * d / s == q);
              // The tap reads the phase image's offset: (r * d) % s is the phase's offset.
              REQUIRE((r * d) % s == (pa * d) % s);
              ++hits[r];
            }
          for (int h : hits) REQUIRE(h == 1);
        }
  }
  SECTION("nice transform sizes") {
    CHECK(conv::gpu::fft_nice_size(1) == 2);
    CHECK(conv::gpu::fft_nice_size(11) == 12);
    CHECK(conv::gpu::fft_nice_size(13) == 14);
    CHECK(conv::gpu::fft_nice_size(227) == 240);
  }
  SECTION("seeded random problems, whole-image and 16x16 tiles") {
    convtest::RandomSpec spec;
    spec.max_n = 2;
    spec.max_hw = 18;
    spec.max_channels = 8;
    spec.max_kernel = 7;
    auto problems = convtest::random_problems(60, 20261203, spec);
    const convtest::Data datas[] = {convtest::Data::uniform, convtest::Data::sparse,
                                    convtest::Data::no_bias};
    for (size_t i = 0; i < problems.size(); ++i)
      check_fft_emulation(problems[i], 1100 + i, datas[i % 3]);
  }
  SECTION("strided, dilated, depthwise and odd transform sizes") {
    for (const char* d : {
             "mb1ic3ih23iw23oc4kh5kw5sh2sw2ph2pw2n\"stride 2 (4 phases)\"",
             "mb1ic2ih20iw17oc3kh3kw3sh3sw2ph1pw0dh2dw1n\"stride 3, dilated\"",
             "g6mb2ic6ih13iw11oc6kh3kw3sh2sw2ph1pw1n\"depthwise, stride 2\"",
             "mb1ic2ih9iw9oc2kh3kw3ph1pw1n\"T = 12 (not a power of two)\"",
             "mb2ic3ih30iw30oc5kh4kw4sh4sw4n\"stride = kernel\"",
         }) {
      const conv::ConvProblem p = conv::parse_descriptor(d);
      check_fft_emulation(p, 12, convtest::Data::uniform);
    }
  }
}

namespace {

// The path of the loaded libconvtune.so, whose soname the test knows.
std::string convtune_library() {
  Dl_info info{};
  REQUIRE(dladdr(reinterpret_cast<void*>(&conv::version), &info) != 0);
  REQUIRE(info.dli_fname != nullptr);
  return info.dli_fname;
}

template <class T>
void poke(std::string& bytes, uint64_t offset, T value) {
  REQUIRE(offset + sizeof value <= bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof value);
}

}  // namespace

TEST_CASE("elf_soname reads a library's soname, and malformed files give a reason, not a crash") {
  // CONVTUNE_CUDA_PLUGIN names any file; its soname is read before dlopen() runs its initialisers.
  const std::string lib = convtune_library();
  std::string why;
  CHECK(conv::elf_soname(lib, why).rfind("libconvtune.so.", 0) == 0);
  std::ifstream in(lib, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(good.size() > sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh{};
  std::memcpy(&eh, good.data(), sizeof eh);
  const auto section = [&](int i) { return eh.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr); };
  int dynamic = -1;
  for (int i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh{};
    std::memcpy(&sh, good.data() + section(i), sizeof sh);
    if (sh.sh_type == SHT_DYNAMIC && dynamic < 0) dynamic = i;
  }
  REQUIRE(dynamic >= 0);
  Elf64_Shdr dyn{};
  std::memcpy(&dyn, good.data() + section(dynamic), sizeof dyn);
  const uint64_t huge = ~uint64_t{0} - 7;
  const std::vector<std::pair<std::string, std::function<void(std::string&)>>> broken = {
      {"truncated to 16 bytes", [](std::string& b) { b.resize(16); }},
      {"truncated before the section headers", [&](std::string& b) { b.resize(eh.e_shoff); }},
      {"e_shoff past the end",
       [&](std::string& b) { poke(b, offsetof(Elf64_Ehdr, e_shoff), huge); }},
      {"e_shnum 65535",
       [&](std::string& b) { poke(b, offsetof(Elf64_Ehdr, e_shnum), uint16_t{65535}); }},
      {"dynamic sh_offset past the end",
       [&](std::string& b) { poke(b, section(dynamic) + offsetof(Elf64_Shdr, sh_offset), huge); }},
      {"dynamic sh_size huge",
       [&](std::string& b) { poke(b, section(dynamic) + offsetof(Elf64_Shdr, sh_size), huge); }},
      {"dynamic sh_link out of range",
       [&](std::string& b) {
         poke(b, section(dynamic) + offsetof(Elf64_Shdr, sh_link), uint32_t{60000});
       }},
      {"string table sh_offset past the end",
       [&](std::string& b) {
         poke(b, section(dyn.sh_link) + offsetof(Elf64_Shdr, sh_offset), huge);
       }},
      {"string table sh_size huge",
       [&](std::string& b) {
         poke(b, section(dyn.sh_link) + offsetof(Elf64_Shdr, sh_size), huge);
       }},
      {"not ELF", [](std::string& b) { b[1] = 'X'; }},
  };
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("convtune-elf-" + std::to_string(::getpid()) + ".so"))
                               .string();
  for (const auto& [what, edit] : broken) {
    std::string bytes = good;
    edit(bytes);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
    why.clear();
    INFO(what);
    CHECK(conv::elf_soname(path, why).empty());
    CHECK_FALSE(why.empty());
  }
  std::filesystem::remove(path);
  CHECK(conv::elf_soname(path, why).empty());
  CHECK(why == "cannot be read");
}

TEST_CASE("without the NVIDIA driver the CUDA plugin is not loaded, and CUDA errors say why") {
  std::set<std::string> ids;
  for (const conv::Algorithm* a : conv::registry()) ids.emplace(a->id());
  CHECK(ids.size() == conv::registry().size());  // one row per id, plugin rows included
  // (Catch2 v2 has no SKIP: on a machine with the driver the check above is all there is.)
  if (std::getenv("CONVTUNE_CUDA_PLUGIN") || dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) return;
  // Only CPU rows: the plugin (when this build has one) would only have said "no device".
  for (const conv::Algorithm* a : conv::registry()) CHECK(a->device() == conv::Device::Kind::cpu);
  try {
    conv::Device::cuda(0).fingerprint();
    FAIL("cuda:0 without a driver must throw");
  } catch (const conv::Error& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("device: cuda:0: no CUDA backend ("));
    CHECK_THAT(e.what(), Catch::Contains("no NVIDIA driver") || Catch::Contains("not found"));
  }
}
