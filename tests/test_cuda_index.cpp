// The CUDA kernels' index arithmetic and block program (kernels/cuda/index.hpp,
// kernels/cuda/direct_block.hpp), run on the CPU in every build, GPU or not: spans and stage
// plans against brute force, and the cuda.direct block program and the cuda.im2col_gemm
// im2col + GEMM arguments executed thread by thread against the float64 reference, with
// NaN-poisoned shared memory and outputs and sentinel guards around every buffer; and, in a
// CUDA build without a GPU, that every cuda.* algorithm says "no CUDA device" without throwing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cuda/direct_block.hpp"
#include "cuda/index.hpp"
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

TEST_CASE("cuda: the CUDA algorithms are registered and answer without a GPU, never throwing") {
  std::vector<const conv::Algorithm*> cuda;
  for (const conv::Algorithm* a : conv::registry())
    if (a->device() == conv::Device::Kind::cuda) cuda.push_back(a);
#ifdef CONVTUNE_HAVE_CUDA
  std::vector<std::string> ids;
  for (const conv::Algorithm* a : cuda) ids.emplace_back(a->id());
  CHECK(ids ==
        std::vector<std::string>{"cuda.direct", "cuda.im2col_gemm", "cuda.cudnn.implicit_gemm",
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
    CHECK_NOTHROW(a->workspace_bytes(p, configs.front()));
    CHECK(a->error_bound(p, configs.front()) > 0);
  }
#else
  CHECK(cuda.empty());  // a CPU-only build registers none
#endif
}
