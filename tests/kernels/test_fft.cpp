// cpu.fft: the 2D tile transforms against a float64 DFT for every tile size, and every config
// against the float64 reference convolution on seed_alexnet_conv1.txt, large_kernels.txt,
// alexnet.txt and 240 seeded random problems (kernels 1x1..31x31, strides 1..4, dilations
// 1..3, asymmetric padding, groups and depthwise, N 1..4, odd and prime channel counts), with
// packed and unpacked weights and NaN-poisoned outputs (ReferenceCase::check).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/fft/fft.hpp"
#include "support.hpp"

namespace {

namespace fft = conv::kernels::fft;
using cd = std::complex<double>;

const conv::Algorithm& algo() {
  const conv::Algorithm* a = conv::find_algorithm("cpu.fft");
  REQUIRE(a != nullptr);
  return *a;
}

// Without AVX2 cpu.fft must say so instead of running (Catch2 v2 has no SKIP).
bool no_avx2() {
  if (conv::cpu_isa() != conv::CpuIsa::scalar) return false;
  const auto ap = algo().applicable(conv::parse_descriptor("mb1ic1ih8iw8oc1kh3kw3"));
  WARN("this CPU has no AVX2: only the rejection is tested");
  CHECK_FALSE(ap.ok);
  CHECK(ap.reason.find("AVX2") != std::string::npos);
  return true;
}

// The vector widths this CPU runs (8 = AVX2, 16 = AVX-512) and their transform test hooks.
struct Isa {
  int lanes;
  void (*tile)(int t, bool inverse, const float* in, float* out);
};
std::vector<Isa> isas() {
  std::vector<Isa> out = {{8, fft::test_tile_avx2}};
  if (conv::cpu_isa() == conv::CpuIsa::avx512) out.push_back({16, fft::test_tile_avx512});
  return out;
}
std::string suffix() {
  return conv::cpu_isa() == conv::CpuIsa::avx512 ? "_avx512" : "";
}

// Float64 DFT2 of one t x t real tile: X[u][v] for u < t, v <= t/2.
std::vector<cd> dft2(int t, const float* x) {
  std::vector<cd> out(t * (t / 2 + 1));
  for (int u = 0; u < t; ++u)
    for (int v = 0; v <= t / 2; ++v) {
      cd s = 0;
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < t; ++j)
          s += static_cast<double>(x[i * t + j]) *
               std::polar(1.0, -2 * M_PI * ((u * i + v * j) % t) / t);
      out[u * (t / 2 + 1) + v] = s;
    }
  return out;
}

// Rounding of a length-n radix-4 FFT grows like u * log2(n) * ||x|| in the 2-norm, spread over
// the n outputs; errors below are per element relative to ||x||_2 * t (forward) or ||x||_2
// (inverse), hence the 1/t. u = 2^-24, 2D length n = t^2; about 3x above what is measured.
double transform_tolerance(int t) {
  return 2.0 * std::ldexp(1.0, -24) * std::log2(t * t) / t;
}

}  // namespace

TEST_CASE("cpu.fft forward tile transform matches a float64 DFT") {
  if (no_avx2()) return;
  for (const Isa isa : isas())
    for (int t : fft::kTiles) {
      DYNAMIC_SECTION("t" << t << " lanes " << isa.lanes) {
        const int H = t / 2 + 1, lanes = isa.lanes;
        std::vector<float> tiles(lanes * t * t), spec(lanes * t * H * 2);
        conv::fill_uniform(tiles.data(), tiles.size(), 1000 + t);
        isa.tile(t, false, tiles.data(), spec.data());
        double worst = 0;
        for (int l = 0; l < lanes; ++l) {
          const float* x = tiles.data() + l * t * t;
          double norm = 0;  // ||x||_2 bounds every |X[u][v]| / t
          for (int i = 0; i < t * t; ++i) norm += double(x[i]) * x[i];
          norm = std::sqrt(norm) * t;
          const auto ref = dft2(t, x);
          for (int f = 0; f < t * H; ++f) {
            const cd got(spec[(l * t * H + f) * 2], spec[(l * t * H + f) * 2 + 1]);
            worst = std::max(worst, std::abs(got - 2.0 * ref[f]) / (2 * norm));
          }
        }
        INFO("t" << t << ": max |X - 2 DFT2(x)| / (2 t ||x||) = " << worst);
        CHECK(worst <= transform_tolerance(t));
      }
    }
}

TEST_CASE("cpu.fft inverse tile transform matches a float64 inverse DFT and round-trips") {
  if (no_avx2()) return;
  for (const Isa isa : isas())
    for (int t : fft::kTiles) {
      DYNAMIC_SECTION("t" << t << " lanes " << isa.lanes) {
        const int H = t / 2 + 1, lanes = isa.lanes;
        std::vector<float> tiles(lanes * t * t), back(lanes * t * t, NAN);
        std::vector<float> spec(lanes * t * H * 2);
        conv::fill_uniform(tiles.data(), tiles.size(), 2000 + t);

        // Inverse of an exact (float64, rounded once) spectrum of a real tile: t^2 * IDFT2 = t^2 x.
        for (int l = 0; l < lanes; ++l) {
          const auto ref = dft2(t, tiles.data() + l * t * t);
          for (int f = 0; f < t * H; ++f) {
            spec[(l * t * H + f) * 2] = static_cast<float>(ref[f].real());
            spec[(l * t * H + f) * 2 + 1] = static_cast<float>(ref[f].imag());
          }
        }
        isa.tile(t, true, spec.data(), back.data());
        double worst = 0;
        for (int l = 0; l < lanes; ++l) {
          double norm = 0;
          for (int i = 0; i < t * t; ++i)
            norm += double(tiles[l * t * t + i]) * tiles[l * t * t + i];
          norm = std::sqrt(norm);
          for (int i = 0; i < t * t; ++i)
            worst = std::max(
                worst, std::abs(back[l * t * t + i] / double(t * t) - tiles[l * t * t + i]) / norm);
        }
        INFO("t" << t << ": inverse vs float64, max |y/t^2 - x| / ||x|| = " << worst);
        CHECK(worst <= transform_tolerance(t));

        // Round trip through both fp32 transforms: inverse(forward(x)) = 2 t^2 x.
        std::fill(back.begin(), back.end(), NAN);
        isa.tile(t, false, tiles.data(), spec.data());
        isa.tile(t, true, spec.data(), back.data());
        worst = 0;
        for (int l = 0; l < lanes; ++l) {
          double norm = 0;
          for (int i = 0; i < t * t; ++i)
            norm += double(tiles[l * t * t + i]) * tiles[l * t * t + i];
          norm = std::sqrt(norm);
          for (int i = 0; i < t * t; ++i)
            worst = std::max(
                worst, std::abs(back[l * t * t + i] / (2.0 * t * t) - tiles[l * t * t + i]) / norm);
        }
        INFO("t" << t << ": round trip, max |y/(2t^2) - x| / ||x|| = " << worst);
        CHECK(worst <= 2 * transform_tolerance(t));
      }
    }
}

namespace {

// Worst (error / bound) seen per tile size over a test case, reported at the end.
struct BoundReport {
  std::map<std::string, double> worst_ratio, worst_error;
  void add(const std::string& config, const convtest::CheckResult& r) {
    worst_ratio[config] = std::max(worst_ratio[config], r.max_error / r.bound);
    worst_error[config] = std::max(worst_error[config], r.max_error);
  }
  void print(const char* what) const {
    for (const auto& [c, ratio] : worst_ratio)
      std::printf("cpu.fft %s %s: worst error %.3g, worst error/bound %.3f\n", what, c.c_str(),
                  worst_error.at(c), ratio);
  }
};

// Every config of cpu.fft on `p`, unpacked and packed; returns how many runs were checked.
int check_all_configs(const conv::ConvProblem& p, uint64_t seed, BoundReport* report) {
  const conv::Algorithm& a = algo();
  if (!a.applicable(p).ok) return 0;
  convtest::ReferenceCase ref(p, seed);
  int checked = 0;
  for (const std::string& config : a.configs(p)) {
    for (bool packed : {false, true}) {
      const auto r = ref.check(a, config, packed);
      INFO(convtest::describe(p, a, config, r) << (packed ? " [packed weights]" : ""));
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
      if (report) report->add(config, r);
      ++checked;
    }
  }
  return checked;
}

void check_layer_file(const std::string& file) {
  BoundReport report;
  for (const auto& p : convtest::layer_problems(file, 1)) {
    INFO(p.name << " " << p.key());
    CHECK(check_all_configs(p, 11, &report) > 0);
  }
  report.print(file.c_str());
}

}  // namespace

TEST_CASE("cpu.fft matches the reference on seed_alexnet_conv1.txt") {
  if (no_avx2()) return;
  check_layer_file("seed_alexnet_conv1.txt");
}

TEST_CASE("cpu.fft matches the reference on large_kernels.txt") {
  if (no_avx2()) return;
  check_layer_file("large_kernels.txt");
}

TEST_CASE("cpu.fft matches the reference on alexnet.txt") {
  if (no_avx2()) return;
  check_layer_file("alexnet.txt");
}

TEST_CASE("cpu.fft matches the reference on 240 seeded random problems") {
  if (no_avx2()) return;
  convtest::RandomSpec spec;
  spec.max_n = 4;
  spec.max_hw = 24;
  spec.max_channels = 17;
  spec.max_kernel = 31;
  spec.max_stride = 4;
  spec.max_dilation = 3;
  spec.max_pad = 4;
  const auto problems = convtest::random_problems(300, 20261204, spec);
  BoundReport report;
  int applicable = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const int n = check_all_configs(problems[i], 500 + i, &report);
    if (n > 0) ++applicable;
  }
  report.print("random");
  // Dilated kernels wider than 63 after the polyphase split are the only rejections.
  CHECK(applicable >= 240);
}

TEST_CASE("cpu.fft on odd and prime channel counts, batches and depthwise") {
  if (no_avx2()) return;
  const char* descs[] = {
      "mb3ic7ih19iw23oc13kh5kw3sh1sw2ph2pw1",          // prime C and K, strided width
      "mb4ic5ih17iw17oc11kh7kw7sh3sw3ph3pw3",          // stride 3, polyphase 9 phases
      "mb2ic3ih30iw29oc17kh11kw11sh4sw4ph0pw5",        // seed-like stride 4
      "mb2ic13ih25iw25oc13kh3kw3sh1sw1ph2pw2dh2dw2",   // dilation 3
      "g13mb2ic13ih21iw21oc13kh9kw9sh2sw2ph4pw4",      // depthwise, strided
      "g17mb1ic17ih40iw40oc17kh31kw31sh1sw1ph15pw15",  // depthwise 31x31, odd C
      "g3mb2ic9ih15iw16oc15kh3kw5sh1sw1ph1pw2",        // groups with K/g = 5
      "g5mb1ic5ih20iw20oc10kh5kw5sh1sw1ph2pw2",        // channel multiplier 2 (not depthwise)
      "mb1ic1ih70iw70oc9kh31kw31sh2sw2ph3pw3",         // 31x31 stride 2: 16x16 sub-kernels
      "mb2ic37ih12iw12oc19kh1kw3sh1sw1ph0pw1",         // 1x3
      "mb1ic4ih6iw6oc5kh3kw3sh1sw1ph4pw4",             // padding wider than the kernel
      "mb1ic2ih2iw9oc3kh2kw2sh1sw1ph5pw0dh4dw0",       // dead outputs between alive ones
  };
  for (const char* d : descs) {
    INFO(d);
    CHECK(check_all_configs(conv::parse_descriptor(d), 77, nullptr) > 0);
  }
}

TEST_CASE("cpu.fft configs, workspace and errors") {
  if (no_avx2()) return;
  const conv::Algorithm& a = algo();
  SECTION("tile sizes that fit the sub-kernel, default first") {
    auto p = conv::parse_descriptor("mb1ic8ih64iw64oc8kh13kw13ph6pw6");
    auto configs = a.configs(p);
    CHECK(configs.front() == "t32" + suffix());
    std::sort(configs.begin(), configs.end());
    if (suffix().empty())
      CHECK(configs == std::vector<std::string>{"t16", "t32", "t64"});
    else
      CHECK(configs == std::vector<std::string>{"t16", "t16_avx512", "t32", "t32_avx512", "t64",
                                                "t64_avx512"});
    p = conv::parse_descriptor("mb1ic8ih64iw64oc8kh3kw3ph1pw1");
    CHECK(a.configs(p).front() == "t8" + suffix());
    p = conv::parse_descriptor("g8mb1ic8ih64iw64oc8kh31kw31ph15pw15");
    configs = a.configs(p);
    CHECK(configs.front() == "t64" + suffix());
    CHECK(configs.size() == (suffix().empty() ? 2u : 4u));
    // 11x11 at stride 4 is sixteen 3x3 phases: every tile fits.
    p = conv::parse_descriptor("mb1ic3ih227iw227oc96kh11kw11sh4sw4ph0pw0");
    CHECK(a.configs(p).size() == (suffix().empty() ? 4u : 8u));
  }
  SECTION("1x1 after the polyphase split: not applicable, with a reason") {
    for (const char* d : {"mb2ic37ih12iw12oc19kh1kw1", "mb1ic4ih13iw9oc4kh2kw2sh2sw2",
                          "g10mb3ic10ih18iw12oc20kh1kw1sh2sw2ph3pw3"}) {
      const auto ap = a.applicable(conv::parse_descriptor(d));
      INFO(d);
      CHECK_FALSE(ap.ok);
      CHECK(ap.reason.find("1x1") != std::string::npos);
    }
  }
  SECTION("too large after dilation: not applicable, with a reason") {
    auto p = conv::parse_descriptor("mb1ic1ih200iw200oc1kh31kw31dh2dw2");
    const auto ap = a.applicable(p);
    CHECK_FALSE(ap.ok);
    CHECK(ap.reason.find("63x63") != std::string::npos);
  }
  SECTION("workspace_bytes is the formula of fft.cpp's header") {
    const int64_t S = fft::slot_ceiling();
    auto r64 = [](int64_t b) { return static_cast<size_t>((b + 63) / 64 * 64); };
    // GEMM path (C' = 64 > 16), 8 lanes: F = 144, 36 tiles = 5 column vectors of F*64*(64+64)
    // bytes each; 3 fit the 4 MiB block budget, so 2 blocks of 3.
    auto p = conv::parse_descriptor("mb1ic64ih56iw56oc64kh7kw7ph3pw3");
    CHECK(a.workspace_bytes(p, "t16") == 64 + 2 * r64(144 * 64 * 3 * 64) +
                                             r64(std::min<int64_t>(S, 64 * 8) * 144 * 64) +
                                             r64(1 * 8 * 144 * 64 * 64));
    CHECK(a.packed_weights_bytes(p, "t16") == 8u * 144 * 64 * 64 + 64);  // + the tag
    // Per-item products (C' = 1): 100 tiles = 13 vectors, 48 blocks of KR = 2 channels.
    p = conv::parse_descriptor("mb1ic1ih227iw227oc96kh11kw11sh1sw1ph0pw0");
    CHECK(a.workspace_bytes(p, "t32") ==
          64 + r64(544 * 1 * 13 * 64) + r64(std::min<int64_t>(S, 48 * 13) * 2 * 544 * 64) +
              r64(std::min<int64_t>(S, 13) * 544 * 64) + r64(12 * 544 * 1 * 64));
    if (!suffix().empty())  // 16 lanes: 7 vectors, 24 blocks of KR = 4, Kb = 6
      CHECK(a.workspace_bytes(p, "t32_avx512") ==
            64 + r64(544 * 1 * 7 * 128) + r64(std::min<int64_t>(S, 24 * 7) * 4 * 544 * 128) +
                r64(std::min<int64_t>(S, 7) * 544 * 128) + r64(6 * 544 * 1 * 128));
    // Depthwise: 16 channel blocks x 4 tiles, F = 2112, one phase.
    p = conv::parse_descriptor("g128mb1ic128ih56iw56oc128kh31kw31ph15pw15");
    CHECK(a.workspace_bytes(p, "t64") ==
          64 + r64(std::min<int64_t>(S, 64) * 2112 * 64) + r64(16 * 2112 * 64));
  }
  SECTION("bad config and short workspace throw conv::Error naming the field") {
    const auto p = conv::parse_descriptor("mb1ic4ih16iw16oc4kh3kw3ph1pw1");
    CHECK_THROWS_WITH(a.workspace_bytes(p, "t12"), Catch::Contains("config"));
    const auto p7 = conv::parse_descriptor("mb1ic4ih32iw32oc4kh9kw9ph1pw1");
    CHECK_THROWS_WITH(a.workspace_bytes(p7, "t8"), Catch::Contains("config"));
    convtest::ReferenceCase ref(p, 3);
    const size_t need = a.workspace_bytes(p, "t8");
    conv::AlignedBuffer ws(need), y(p.y_bytes());
    conv::ForwardArgs args;
    args.x = ref.x();
    args.w = ref.w();
    args.bias = ref.bias();
    args.y = y.floats();
    args.workspace = ws.data();
    args.workspace_size = need - 1;
    CHECK_THROWS_WITH(a.forward(p, "t8", args), Catch::Contains("workspace"));
    // Exactly workspace_bytes is enough (the NaN poison must be overwritten everywhere).
    args.workspace_size = need;
    conv::poison_nan(y.floats(), p.y_elems());
    a.forward(p, "t8", args);
    const auto r = ref.compare(y.floats(), a, "t8");
    CHECK(r.ok());
  }
  SECTION("packed weights need only the workspace without the weight region") {
    const auto p = conv::parse_descriptor("mb2ic6ih20iw20oc10kh5kw5ph2pw2");
    convtest::ReferenceCase ref(p, 5);
    for (const std::string& config : std::vector<std::string>{"t16", "t16" + suffix()}) {
      INFO(config);
      const size_t wbytes = a.packed_weights_bytes(p, config);
      REQUIRE(wbytes > 0);
      conv::AlignedBuffer packed(wbytes), y(p.y_bytes());
      a.pack_weights(p, config, ref.w(), packed.data(), 2);
      const size_t need = a.workspace_bytes(p, config) - (wbytes - 64 + 63) / 64 * 64;  // no tag
      conv::AlignedBuffer ws(need);
      conv::ForwardArgs args;
      args.x = ref.x();
      args.bias = ref.bias();
      args.y = y.floats();
      args.workspace = ws.data();
      args.workspace_size = need;
      args.packed_weights = packed.data();
      args.threads = 2;
      conv::poison_nan(y.floats(), p.y_elems());
      a.forward(p, config, args);
      CHECK(ref.compare(y.floats(), a, config).ok());
    }
  }
  SECTION("a workspace that is not 64-byte aligned still suffices at workspace_bytes") {
    const auto p = conv::parse_descriptor("g4mb2ic8ih19iw17oc8kh7kw5sh2sw1ph3pw2");
    convtest::ReferenceCase ref(p, 6);
    for (const std::string& config : std::vector<std::string>{"t16", "t16" + suffix()}) {
      INFO(config);
      const size_t need = a.workspace_bytes(p, config);
      conv::AlignedBuffer ws(need + 64), y(p.y_bytes());
      conv::ForwardArgs args;
      args.x = ref.x();
      args.w = ref.w();
      args.bias = ref.bias();
      args.y = y.floats();
      args.workspace = static_cast<char*>(ws.data()) + 4;
      args.workspace_size = need;
      conv::poison_nan(y.floats(), p.y_elems());
      a.forward(p, config, args);
      CHECK(ref.compare(y.floats(), a, config).ok());
    }
  }
}

TEST_CASE("cpu.fft is deterministic across thread counts, including more threads than slots") {
  if (no_avx2()) return;
  const conv::Algorithm& a = algo();
  for (const char* d : {"mb2ic3ih40iw40oc16kh7kw7sh2sw2ph3pw3",
                        "g16mb1ic16ih30iw30oc16kh5kw5ph2pw2", "mb1ic1ih50iw50oc24kh11kw11ph0pw0"}) {
    const auto p = conv::parse_descriptor(d);
    convtest::ReferenceCase ref(p, 9);
    for (const std::string& config : a.configs(p)) {
      std::vector<std::vector<float>> outs;
      for (int threads : {1, 2, 3, 40}) {
        conv::AlignedBuffer ws(a.workspace_bytes(p, config)), y(p.y_bytes());
        conv::ForwardArgs args;
        args.x = ref.x();
        args.w = ref.w();
        args.bias = ref.bias();
        args.y = y.floats();
        args.workspace = ws.data();
        args.workspace_size = ws.size();
        args.threads = threads;
        conv::poison_nan(y.floats(), p.y_elems());
        a.forward(p, config, args);
        outs.emplace_back(y.floats(), y.floats() + p.y_elems());
      }
      INFO(d << " " << config);
      for (size_t i = 1; i < outs.size(); ++i)
        CHECK(std::memcmp(outs[0].data(), outs[i].data(), outs[0].size() * 4) == 0);
    }
  }
}
