// cpu.direct beyond what test_kernels covers: the portable (scalar) kernels that run on CPUs
// without AVX2, every instantiated register block (not only the ones configs() offers), the
// packed-weights path, reductions split into several cache chunks, and input validation.
// Tolerance: exact_order_error_bound (16u*sqrt(C/g*R*S) + 8u relative to sum|x*w| per output).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "cpu/direct/direct.hpp"
#include "cpu/direct/direct_view.hpp"
#include "cpu/direct_kvec/direct_kvec.hpp"
#include "kernels/family_checks.hpp"
#include "support.hpp"

namespace {

using conv::kernels::direct::Config;
using convtest::check_configs;
using convtest::check_descriptors;
using convtest::label;

// Every instantiated block that can run `p` (band blocks only run depthwise stride_h 1 ones),
// its "_aligned" variant where that reads the input differently and its "_panels" variant on
// 1x1 problems.
std::vector<std::string> all_config_names(const conv::ConvProblem& p) {
  int n = 0;
  const Config* c = conv::kernels::direct::all_configs(&n);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    if (!conv::kernels::direct::config_applies(p, c[i])) continue;
    names.push_back(c[i].name());
    if (!c[i].band && conv::kernels::direct::aligned_copy_optional(p, c[i].lanes()))
      names.push_back(c[i].name() + "_aligned");
    Config panels = c[i];
    panels.panels = true;
    if (!c[i].band && conv::kernels::direct::config_applies(p, panels))
      names.push_back(panels.name());
  }
  return names;
}

// Runs the portable kernels (optionally on packed weights) and compares with the reference.
convtest::CheckResult check_scalar(convtest::ReferenceCase& ref, const std::string& config,
                                   bool packed) {
  const conv::ConvProblem& p = ref.problem();
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  conv::AlignedBuffer y(p.y_bytes()), ws(algo.workspace_bytes(p, config)), pw;
  conv::poison_nan(y.floats(), p.y_elems());
  conv::ForwardArgs a = ref.args(y.floats(), ws, 2);
  if (packed) {
    pw.reserve(algo.packed_weights_bytes(p, config));
    algo.pack_weights(p, config, ref.w(), pw.data(), 2);
    // forward_scalar is the algorithm's own forward: it takes the layout after the tag.
    a.packed_weights = static_cast<const char*>(pw.data()) + conv::kPackedWeightsTagBytes;
    a.w = nullptr;
  }
  conv::kernels::direct::forward_scalar(p, config, a);
  return ref.compare(y.floats(), conv::exact_order_error_bound(p));
}

// Runs cpu.direct with the input copied to `x` and the output (poisoned first) at `y`, which
// may lie anywhere within their buffers, and compares with the reference.
convtest::CheckResult check_at(convtest::ReferenceCase& ref, const std::string& config, float* x,
                               float* y, conv::AlignedBuffer& ws, int threads) {
  const conv::ConvProblem& p = ref.problem();
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  std::copy(ref.x(), ref.x() + p.x_elems(), x);
  conv::poison_nan(y, p.y_elems());
  // As ReferenceCase::check: a read of workspace the kernel did not write shows as NaN.
  conv::poison_nan(static_cast<float*>(ws.data()), static_cast<int64_t>(ws.size() / sizeof(float)));
  conv::ForwardArgs a;
  a.x = x;
  a.w = ref.w();
  a.bias = ref.bias();
  a.y = y;
  a.workspace = ws.data();
  a.workspace_size = ws.size();
  a.threads = threads;
  algo.forward(p, config, a);
  return ref.compare(y, algo, config);
}

}  // namespace

TEST_CASE("cpu.direct portable kernels match the reference on 100 seeded random problems") {
  const auto problems = convtest::random_problems(100, 777, convtest::RandomSpec{});
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto names = all_config_names(problems[i]);
    convtest::ReferenceCase ref(problems[i], 500 + i);
    // Two configs per problem, rotating through every instantiated block (8 and 16 lanes).
    for (size_t j = 0; j < 2; ++j) {
      const std::string& config = names[(2 * i + j) % names.size()];
      const bool packed = (i + j) % 2 == 1;
      const auto r = check_scalar(ref, config, packed);
      INFO(label(problems[i], config, packed, r));
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
    }
  }
}

TEST_CASE("cpu.direct: every instantiated block, packed and unpacked, on random problems") {
  // Configs the CPU cannot run fall back to the portable kernels, so this passes everywhere.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  const auto problems = convtest::random_problems(60, 4242, convtest::RandomSpec{});
  for (size_t i = 0; i < problems.size(); ++i) {
    convtest::ReferenceCase ref(problems[i], 900 + i);
    for (const std::string& config : all_config_names(problems[i]))
      for (bool packed : {false, true}) {
        const auto r = ref.check(algo, config, packed);
        INFO(label(problems[i], config, packed, r));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
  }
}

TEST_CASE("cpu.direct: chunked reductions, band blocks, partial vectors and K tails") {
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  const std::vector<std::string> descriptors = {
      // Thousands of input channels force several reduction chunks (later chunks accumulate
      // onto y, also through masked lanes); K not a multiple of any block; odd planes; batch 2.
      "mb2ic3000ih9iw11oc13kh3kw3ph1pw1n\"chunks:3x3\"",
      "mb1ic9000ih5iw7oc19kh1kw1n\"chunks:1x1_flat\"",
      "mb1ic5000ih6iw6oc10kh1kw1sh2sw2ph1pw0n\"chunks:1x1_strided_padded\"",
      "g2mb1ic4000ih7iw9oc6kh2kw3ph1pw2n\"chunks:grouped\"",
      // Depthwise problems the band blocks run: output rows not a multiple of the band, batch 2,
      // large and 1-column kernels, strided and dilated columns, no padding.
      "g5mb2ic5ih17iw13oc5kh9kw9ph4pw4n\"band:9x9\"",
      "g3mb1ic3ih40iw37oc3kh31kw31ph15pw15n\"band:31x31\"",
      "g4mb1ic4ih11iw23oc4kh5kw3sw2ph2pw1n\"band:strided_w\"",
      "g2mb1ic2ih12iw12oc2kh7kw7ph3pw6dw1n\"band:dilated_w\"",
      "g6mb1ic6ih9iw5oc6kh3kw2ph0pw0n\"band:unpadded\"",
      "g3mb1ic3ih6iw30oc3kh6kw1ph1pw0n\"band:6x1\"",
  };
  for (const auto& d : descriptors) {
    const conv::ConvProblem p = conv::parse_descriptor(d);
    convtest::ReferenceCase ref(p, 3);
    for (const std::string& config : all_config_names(p))
      for (bool packed : {false, true}) {
        auto r = ref.check(algo, config, packed);
        INFO(label(p, config, packed, r));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
        r = check_scalar(ref, config, packed);
        INFO("portable kernels: " << label(p, config, packed, r));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
  }
}

TEST_CASE("cpu.direct: the one-pass row split of stride-2 and stride-4 views is the strided copy") {
  if (conv::cpu_isa() == conv::CpuIsa::scalar) return;
  std::vector<float> src(96);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 1.0f + static_cast<float>(i);
  int checked = 0;
  for (int step : {2, 4})
    for (int64_t W = 1; W <= 90; ++W)
      for (int64_t first = -5; first <= 3; ++first)
        for (int64_t n = 1; n <= 28; ++n) {
          // Poison, and one guard float after each phase.
          std::vector<float> d(step * (n + 1), -7.0f);
          conv::kernels::direct::phase_rows_avx2(src.data(), W, first, step, d.data(), n + 1, n);
          for (int64_t q = 0; q < step; ++q) {
            for (int64_t t = 0; t < n; ++t) {
              const int64_t i = step * t + q + first;
              const float want = i >= 0 && i < W ? src[i] : 0.0f;
              INFO("step " << step << " W " << W << " first " << first << " n " << n << " phase "
                           << q << " t " << t);
              REQUIRE(d[q * (n + 1) + t] == want);
            }
            REQUIRE(d[q * (n + 1) + n] == -7.0f);  // nothing past phase q's n floats
          }
          ++checked;
        }
  CHECK(checked == 2 * 90 * 9 * 28);
}

TEST_CASE("cpu.direct: outputs past the L2, stored non-temporally line by line, on every block") {
  // Outputs of which each thread's share overflows half its L2 are streamed, whole 64-byte lines
  // only: with 8-lane vectors the pairs that fill one line, the rest (the third ymm of a 3-vector
  // block, shifted row-end vectors, wide-mode segments, a 1x1 input's head vector) through the
  // cache. Each problem also runs on x and y 16 and 32 bytes past a line.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  const std::vector<std::string> descriptors = {
      "mb1ic3ih224iw224oc32kh3kw3ph1pw1n\"stream:rows_aligned\"",  // rows of 14 lines
      "mb1ic4ih56iw56oc520kh3kw3ph1pw1n\"stream:rows_odd\"",       // rows of 3.5 lines
      // Unpadded, read in place: rows of 60 start 0, 12, 8 and 4 floats into a line and end in
      // a shifted vector.
      "mb1ic3ih62iw62oc320kh3kw3n\"stream:rows_shifted\"",
      "mb1ic8ih112iw112oc136kh1kw1n\"stream:flat\"",
      "mb1ic3ih28iw28oc2072kh3kw3sh1ph1pw1n\"stream:small_plane\""};
  for (const auto& d : descriptors) {
    const conv::ConvProblem p = conv::parse_descriptor(d);
    // Streamed with 1 and 2 threads (direct.cpp: 2 * output bytes > threads * L2).
    REQUIRE(p.y_bytes() > conv::kernels::l2_cache_bytes());
    convtest::ReferenceCase ref(p, 17);
    for (const std::string& config : all_config_names(p)) {
      // Blocks this CPU runs (the others fall back to the portable kernels, which never stream).
      if (conv::kernels::direct::parse_config(config).isa !=
              conv::kernels::direct::BlockIsa::avx2 &&
          conv::cpu_isa() != conv::CpuIsa::avx512)
        continue;
      for (int threads : {1, 2}) {
        const auto r = ref.check(algo, config, threads == 2, threads);
        INFO(label(p, config, threads == 2, r) << ", threads " << threads);
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
      for (int64_t off : {4, 8}) {
        conv::AlignedBuffer xb(p.x_bytes() + 64), yb(p.y_bytes() + 64),
            ws(algo.workspace_bytes(p, config));
        const auto r = check_at(ref, config, xb.floats() + off, yb.floats() + off, ws, 2);
        INFO(label(p, config, false, r) << ", x and y " << 4 * off << " bytes past a line");
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
    }
  }
}

TEST_CASE("cpu.direct: strides beyond the padded input keep a small view (no overflow)") {
  // The phase-split view once held stride_h x stride_w planes: a stride of 2^30 asked for 2^62
  // floats, whose byte count wrapped around 64 bits and let the kernel write past its workspace.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  const std::vector<std::string> descriptors = {"mb1ic4ih8oc6kh3sh1073741824",
                                                "mb1ic4ih8oc6kh3sh2147483648",
                                                "mb1ic4ih8oc6kh3sh9",
                                                "mb1ic4ih8iw9oc6kh3kw2sh268435456sw3ph1pw1",
                                                "mb2ic3ih5iw6oc2kh2kw3sh5sw65536pw2",
                                                "g2mb1ic4ih7oc4kh3sh16ph1dh1"};
  for (const auto& d : descriptors) {
    const conv::ConvProblem p = conv::parse_descriptor(d);
    REQUIRE(algo.applicable(p).ok);
    convtest::ReferenceCase ref(p, 11);
    for (const std::string& config : all_config_names(p)) {
      // The view holds at most min(stride, padded size) phases per dimension.
      CHECK(algo.workspace_bytes(p, config) < (size_t{1} << 20));
      for (bool packed : {false, true}) {
        const auto r = ref.check(algo, config, packed);
        INFO(label(p, config, packed, r));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
    }
  }
  // A view whose size would leave int64 (padding near 2^31 on every side) is no valid problem:
  // ConvProblem::validate bounds the zero-padded input to 2^48 bytes.
  CHECK_THROWS_WITH(conv::parse_descriptor("mb1ic1024ih1oc1kh1sh1024ph1073741823"),
                    Catch::Contains("zero-padded x byte size"));
}

TEST_CASE("cpu.direct offers valid configs and rejects bad configs and short workspaces") {
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  const conv::ConvProblem p = conv::parse_descriptor("mb1ic8ih10iw10oc8kh3kw3ph1pw1");
  const auto configs = algo.configs(p);
  REQUIRE(!configs.empty());
  for (const auto& c : configs) CHECK_NOTHROW(conv::kernels::direct::parse_config(c));
  const auto dw = algo.configs(conv::parse_descriptor("g16mb1ic16ih10iw10oc16kh3kw3ph1pw1"));
  REQUIRE(!dw.empty());
  CHECK(conv::kernels::direct::parse_config(dw.front()).oc == 1);
  // Band blocks lead for large depthwise kernels and are refused elsewhere.
  const auto big = algo.configs(conv::parse_descriptor("g16mb1ic16ih20iw20oc16kh11kw11ph5pw5"));
  REQUIRE(!big.empty());
  CHECK(conv::kernels::direct::parse_config(big.front()).band);

  CHECK_THROWS_WITH(algo.workspace_bytes(p, "oc5ow24"), Catch::Contains("config"));
  // 1x1 planes that are not whole cache lines: in place and aligned copies are both offered.
  const auto odd = algo.configs(conv::parse_descriptor("mb1ic64ih14iw14oc64kh1kw1"));
  const auto even = algo.configs(conv::parse_descriptor("mb1ic64ih16iw16oc64kh1kw1"));
  for (const auto& c : odd) {
    const auto parsed = conv::kernels::direct::parse_config(c);
    CHECK(parsed.name() == c);
    if (!parsed.aligned) CHECK(std::find(odd.begin(), odd.end(), c + "_aligned") != odd.end());
  }
  CHECK(odd.size() == 2 * even.size());
  for (const auto& c : even) CHECK(c.find("_aligned") == std::string::npos);
  // Packed input panels: offered for ymm blocks on unpadded 1x1 layers of 128 channels or more.
  const bool z = conv::cpu_isa() == conv::CpuIsa::avx512;
  const auto wide = algo.configs(conv::parse_descriptor("mb1ic128ih16iw16oc64kh1kw1"));
  for (const auto& c : wide) {
    const auto parsed = conv::kernels::direct::parse_config(c);
    CHECK(parsed.name() == c);
    if (!parsed.panels)
      CHECK((std::find(wide.begin(), wide.end(), c + "_panels") != wide.end()) == !z);
  }
  CHECK(wide.size() == (z ? 1 : 2) * even.size());
  for (const auto& c : odd) CHECK(c.find("_panels") == std::string::npos);
  CHECK(conv::kernels::direct::parse_config("oc8ow48_avx512_panels").panels);
  for (const char* bad :
       {"_aligned", "oc8ow48_aligned_avx512", "oh4ow24_aligned", "oc4ow24_aligned_aligned",
        "oc4ow24aligned", "oc4ow24_avx512x", "_panels", "oh4ow24_panels", "oc4ow24_panels_aligned",
        "oc4ow24_aligned_panels", "oc4ow24_panels_panels", "oc4ow24panels"})
    CHECK_THROWS_WITH(conv::kernels::direct::parse_config(bad), Catch::Contains("config"));
  CHECK_THROWS_WITH(algo.packed_weights_bytes(p, "bogus"), Catch::Contains("config"));

  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), y(p.y_bytes());
  const size_t need = algo.workspace_bytes(p, configs.front());
  CHECK(need > 0);
  conv::AlignedBuffer ws(need);
  conv::ForwardArgs a;
  a.x = x.floats();
  a.w = w.floats();
  a.y = y.floats();
  a.workspace = ws.data();
  a.workspace_size = need - 1;
  CHECK_THROWS_WITH(algo.forward(p, configs.front(), a), Catch::Contains("workspace"));
  a.workspace_size = need;
  CHECK_THROWS_WITH(algo.forward(p, "oc4ow25", a), Catch::Contains("config"));
  CHECK_THROWS_WITH(algo.forward(p, "oh4ow24", a), Catch::Contains("config"));
  CHECK_THROWS_WITH(algo.forward(p, "oc4ow24_panels", a), Catch::Contains("1x1"));
  CHECK_NOTHROW(algo.forward(p, configs.front(), a));
}

TEST_CASE("cpu.direct and cpu.direct_kvec: the view copy's thread split, 1 to 5 threads") {
  // With position-split tasks each thread copies the view rows it reads (copy_view's by_rows,
  // or cpu.direct's copy as its tasks go): row bands of every stride phase, of flat strided 1x1
  // planes and of aligned 1x1 plane copies, with shares that do not divide the rows evenly (or are
  // empty) and batch 2.
  const std::vector<std::string> descriptors = {
      "mb2ic5ih13iw29oc16kh1kw7ph0pw3n\"rows:1x7\"",
      "mb1ic6ih17iw15oc9kh3kw3sh2sw2ph1pw1n\"rows:s2\"",
      "mb1ic3ih23iw23oc8kh5kw5sh4sw4ph2pw2n\"rows:s4\"",
      "mb2ic7ih11iw9oc12kh1kw1sh2sw2ph1pw0n\"rows:1x1_strided\"",
      "mb1ic9ih7iw7oc16kh1kw1n\"rows:1x1_aligned\"",
      "mb1ic4ih3iw40oc8kh3kw3ph1pw1n\"rows:3_rows\"",
      // Rows copied as the tasks reach them (cpu.direct's RowPipeline): 3 and 4 rows below a
      // thread's last output row, and reduction chunks (400 channels) after the first copy.
      "mb2ic3ih40iw37oc10kh7kw7sh2sw2ph3pw3n\"rows:pipeline_7x7_s2\"",
      "mb1ic2ih30iw40oc6kh3kw3dh1dw1ph2pw2n\"rows:pipeline_dilated\"",
      "mb1ic400ih12iw20oc8kh3kw3ph1pw1n\"rows:pipeline_chunks\"",
  };
  const char* ids[] = {"cpu.direct", "cpu.direct_kvec"};
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    convtest::ReferenceCase ref(p, 1300 + i);
    for (const char* id : ids) {
      const conv::Algorithm& algo = *conv::find_algorithm(id);
      check_configs(ref, algo, algo.configs(p), {1, 2, 3, 5});
    }
  }
}

TEST_CASE("cpu.direct: 1x1 input panels, 1 to 5 threads, every block") {
  // Each thread packs the input of its vector blocks into its own panel, per reduction chunk
  // and group; threads may share a block (each packs it). Partial last vectors (lanes past the
  // plane zero-filled in the panel), several chunks, groups, batch 2, strided and padded 1x1
  // (panels packed from the view copy), fewer positions than a vector. Every block the CPU
  // runs, offered or not, packed and unpacked weights.
  const std::vector<std::string> descriptors = {
      "mb1ic300ih14iw14oc21kh1kw1n\"panels:14x14_chunks\"",
      "mb2ic130ih7iw9oc13kh1kw1n\"panels:batch2\"",
      "g2mb1ic260ih10iw10oc24kh1kw1n\"panels:grouped\"",
      "g3mb1ic390ih4iw4oc9kh1kw1n\"panels:groups_one_block\"",
      "mb1ic140ih9iw11oc16kh1kw1sh2sw2ph1pw1n\"panels:strided_padded\"",
      "mb1ic7ih3iw3oc5kh1kw1n\"panels:one_zmm\"",
      "mb1ic130ih2iw3oc9kh1kw1n\"panels:one_ymm\"",
  };
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  int checked = 0;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    convtest::ReferenceCase ref(p, 1500 + i);
    for (const std::string& config : all_config_names(p)) {
      if (config.find("_panels") == std::string::npos) continue;
      for (int threads : {1, 2, 3, 5}) {
        const bool packed = threads % 2 == 0;
        const auto r = ref.check(algo, config, packed, threads);
        INFO(label(p, config, packed, r) + ", threads " + std::to_string(threads));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
        ++checked;
      }
    }
  }
  CHECK(checked >= 7 * 8 * 4);
}

TEST_CASE("cpu.direct: 1x1 inputs read in place at any float offset within a vector") {
  // The in-place 1x1 path starts its vectors at the input's first vector-aligned position after
  // a head vector; x and y at every float offset, planes of exactly one or two vectors (the head
  // and a shifted tail overlap), batch 2 and several threads. K = 24 and 48 are whole blocks of
  // every config, so runs of vector blocks share a kernel call (Block::pos_runs) up to the
  // shifted last vector (667 positions) or the plane's end (256), from either thread's start.
  const std::vector<std::string> descriptors = {
      "mb1ic37ih16iw16oc13kh1kw1n\"offset:16x16\"",
      "mb2ic5ih8iw12oc7kh1kw1n\"offset:batch2\"",
      "mb1ic6ih2iw4oc9kh1kw1n\"offset:one_ymm\"",
      "mb1ic3ih4iw4oc5kh1kw1n\"offset:one_zmm\"",
      "mb1ic5ih23iw29oc24kh1kw1n\"offset:pos_runs_tail\"",
      "mb2ic9ih16iw16oc48kh1kw1n\"offset:pos_runs_batch2\"",
  };
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.direct");
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    convtest::ReferenceCase ref(p, 1400 + i);
    conv::AlignedBuffer xb(p.x_bytes() + 64), yb(p.y_bytes() + 64);
    for (const std::string& config : algo.configs(p)) {
      conv::AlignedBuffer ws(algo.workspace_bytes(p, config));
      for (int xo = 0; xo < 16; ++xo)
        for (int yo : {0, 3, xo}) {
          const auto r = check_at(ref, config, xb.floats() + xo, yb.floats() + yo, ws, 1 + xo % 3);
          INFO(label(p, config, false, r) + ", x offset " + std::to_string(xo) + ", y offset " +
               std::to_string(yo));
          CHECK(r.nonfinite == 0);
          CHECK(r.max_error <= r.bound);
        }
    }
  }
}
