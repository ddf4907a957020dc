// Every registered CPU algorithm, every config, against the float64 reference: the layers of
// layers/*.txt (batch 1) and 300 seeded random problems, and the checks every algorithm's
// public functions make. New algorithms in kernels/registry.cpp are picked up here without
// touching this file; a family's own checks are in test_<family>.cpp beside it.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "support.hpp"

namespace {

// Checks every applicable algorithm x config on one problem; packed weights too where supported.
void check_all(const conv::ConvProblem& p, uint64_t seed) {
  convtest::ReferenceCase ref(p, seed);
  const int checked = convtest::for_each_cpu_candidate(
      p, [&](const conv::Algorithm& algo, const std::string& config, bool packed) {
        auto r = ref.check(algo, config, packed);
        INFO(convtest::describe(p, algo, config, r) << (packed ? " [packed weights]" : ""));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      });
  INFO(p.key());
  CHECK(checked > 0);  // cpu.im2col_gemm and cpu.direct apply to every problem
}

void check_layers(const std::string& file) {
  for (const auto& p : convtest::layer_problems(file, 1)) {
    DYNAMIC_SECTION(p.name) {
      check_all(p, 7);
    }
  }
}

}  // namespace

TEST_CASE("kernels match the reference on seed_alexnet_conv1.txt") {
  check_layers("seed_alexnet_conv1.txt");
}
TEST_CASE("kernels match the reference on alexnet.txt") {
  check_layers("alexnet.txt");
}
TEST_CASE("kernels match the reference on vgg16.txt") {
  check_layers("vgg16.txt");
}
TEST_CASE("kernels match the reference on resnet50.txt") {
  check_layers("resnet50.txt");
}
TEST_CASE("kernels match the reference on mobilenet_v2.txt") {
  check_layers("mobilenet_v2.txt");
}
TEST_CASE("kernels match the reference on large_kernels.txt") {
  check_layers("large_kernels.txt");
}

TEST_CASE("kernels match the reference on 300 seeded random problems") {
  convtest::RandomSpec spec;
  auto problems = convtest::random_problems(300, 20261129, spec);
  REQUIRE(problems.size() == 300);
  for (size_t i = 0; i < problems.size(); ++i) check_all(problems[i], 100 + i);
}

TEST_CASE("every algorithm's forward() refuses a problem its applicable() refuses") {
  // Plan and the tuner ask applicable() first; a caller of Algorithm::forward need not, and the
  // kernels index x, w and y as if it had (cpu.depthwise once wrote past y on a 3x3 problem,
  // cpu.pointwise read past a padded input's end, cpu.winograd ran stride 2 as stride 1). Each
  // algorithm gets, with every config it offers on any of these problems, each problem it
  // refuses: forward() must throw applicable()'s reason, which starts with the field it names,
  // before it touches y.
  const std::vector<std::string> descriptors = {
      "mb1ic9ih13iw7oc5kh1kw1ph1n\"1x1_padded\"",
      "g3mb1ic9ih13iw7oc6kh1kw1n\"1x1_grouped\"",
      "mb2ic5ih7iw7oc3kh1kw1sh2sw2n\"1x1_strided\"",
      "mb1ic9ih13iw7oc5kh3kw3n\"3x3\"",
      "g8mb1ic8ih9iw9oc8kh3kw3ph1n\"depthwise\"",
      "mb1ic3ih23iw23oc4kh11kw11sh4sw4n\"11x11_s4\"",
      "mb1ic4ih12iw12oc4kh3kw3dh1dw1ph2pw2n\"dilated\"",
      "mb1ic6ih8iw8oc4kh5kw5ph2pw2n\"5x5\"",
      "mb1ic2ih66iw66oc2kh65kw65n\"65x65\"",
      "mb1ic8ih10iw10oc16kh3kw3sh2sw2n\"3x3_s2_k16\"",
      "mb1ic4ih13iw13oc4kh3kw3dh1dw1ph1pw1n\"dilated_odd\"",
  };
  std::vector<conv::ConvProblem> problems;
  for (const auto& d : descriptors) problems.push_back(conv::parse_descriptor(d));
  // "field: ..." or "field, field: ..." (e.g. "ConvProblem.R: ", "R, S: ", "padding: ").
  const std::regex field("^[A-Za-z_.]+(, [A-Za-z_.]+)*: .*");
  std::set<std::string> refusals;  // "algorithm problem" pairs refused
  for (const conv::Algorithm* algo : conv::all_algorithms()) {
    std::set<std::string> configs;
    for (const auto& p : problems)
      if (algo->applicable(p).ok)
        for (const auto& c : algo->configs(p)) configs.insert(c);
    INFO(algo->id());
    // Every CPU row applies to one of the problems at least (CUDA rows where a GPU is present).
    if (algo->device() == conv::Device::Kind::cpu && conv::cpu_isa() != conv::CpuIsa::scalar)
      CHECK(!configs.empty());
    for (size_t i = 0; i < problems.size(); ++i) {
      const conv::ConvProblem& p = problems[i];
      const conv::Applicability ap = algo->applicable(p);
      if (ap.ok) continue;
      if (algo->device() == conv::Device::Kind::cpu) CHECK(std::regex_match(ap.reason, field));
      convtest::ReferenceCase ref(p, 1800 + i);
      for (const std::string& config : configs) {
        INFO(config << " on " << p.name << " (" << ap.reason << ")");
        conv::AlignedBuffer y(p.y_bytes()), ws(1 << 20);
        conv::poison_nan(y.floats(), p.y_elems());
        CHECK_THROWS_WITH(algo->forward(p, config, ref.args(y.floats(), ws, 2)), ap.reason);
        CHECK(std::isnan(y.floats()[0]));
        // Size formulas hold only for problems an algorithm runs (cpu.winograd's workspace for
        // a strided problem had wrapped to nearly 2^64 bytes).
        CHECK_THROWS_WITH(algo->workspace_bytes(p, config), ap.reason);
        CHECK_THROWS_WITH(algo->packed_weights_bytes(p, config), ap.reason);
        refusals.insert(std::string(algo->id()) + " " + p.name);
      }
    }
  }
  // The three that once went out of bounds or wrong refuse.
  if (conv::cpu_isa() != conv::CpuIsa::scalar) {
    CHECK(refusals.count("cpu.depthwise 3x3") == 1);
    CHECK(refusals.count("cpu.pointwise 1x1_padded") == 1);
    CHECK(refusals.count("cpu.pointwise 1x1_grouped") == 1);
    CHECK(refusals.count("cpu.winograd 3x3_s2_k16") == 1);
  }
}

TEST_CASE("workspace and packed sizes of extreme valid problems fit in 64 bits") {
  // ConvProblem::validate bounds each tensor to 2^48 bytes and the work to 2^60 multiply-adds so
  // that these fit: cpu.im2col_gemm's workspace for mb1ic4ih1oc1kh32768ph32767 (4 * 2^30 * 2^30
  // * 4 bytes) had wrapped to 0 and forward() ran without one. Sizes near 2^31, huge pads,
  // strides and dilations, log-uniform, seeded; every config any problem offered is asked on
  // every later problem the algorithm accepts (a caller may name any config).
  std::mt19937_64 rng(20261207);
  auto size = [&](int max_log2) {
    const int64_t v = int64_t{1} << (rng() % (max_log2 + 1));
    return std::max<int64_t>(1, v + static_cast<int64_t>(rng() % 3) - 1);
  };
  auto pad = [&] { return rng() % 2 ? size(31) : static_cast<int64_t>(rng() % 3); };
  std::map<std::string, std::set<std::string>> configs;
  int valid = 0, sized = 0;
  for (int i = 0; i < 20000; ++i) {
    conv::ConvProblem p;
    p.N = size(rng() % 2 ? 31 : 3);
    p.C = size(31);
    p.K = size(31);
    p.H = size(31);
    p.W = size(31);
    p.R = size(rng() % 2 ? 31 : 3);
    p.S = size(rng() % 2 ? 31 : 3);
    p.stride_h = size(rng() % 2 ? 31 : 2);
    p.stride_w = size(rng() % 2 ? 31 : 2);
    p.dilation_h = rng() % 4 ? 1 : size(31);
    p.dilation_w = rng() % 4 ? 1 : size(31);
    p.pad_top = pad();
    p.pad_bottom = pad();
    p.pad_left = pad();
    p.pad_right = pad();
    p.groups = rng() % 3 ? 1 : size(31);
    if (rng() % 4 == 0) p.C = p.K = p.groups;  // depthwise
    p.C = (p.C + p.groups - 1) / p.groups * p.groups;
    p.K = (p.K + p.groups - 1) / p.groups * p.groups;
    try {
      p.validate();
    } catch (const conv::Error&) {
      continue;
    }
    ++valid;
    for (const conv::Algorithm* algo : conv::all_algorithms()) {
      if (algo->device() != conv::Device::Kind::cpu || !algo->applicable(p).ok) continue;
      std::set<std::string>& cs = configs[std::string(algo->id())];
      for (const std::string& c : algo->configs(p)) cs.insert(c);
      for (const std::string& c : cs) {
        size_t ws = 0, packed = 0;
        try {
          ws = algo->workspace_bytes(p, c);
          packed = algo->packed_weights_bytes(p, c);
        } catch (const conv::Error&) {
          continue;  // a config this problem cannot take (e.g. an FFT tile smaller than R)
        }
        ++sized;
        INFO(algo->id() << " " << c << " on " << p.key() << ": workspace " << ws << ", packed "
                        << packed);
        // A size that wrapped past 2^63 reads as a huge size_t; UBSan (clang,
        // -fsanitize=signed-integer-overflow,unsigned-integer-overflow) over this scan found
        // the wraps that land low.
        CHECK(ws < size_t{1} << 63);
        CHECK(packed < size_t{1} << 63);
      }
    }
  }
  INFO(valid << " valid problems, " << sized << " sizes");
  CHECK(valid > 1000);
  CHECK(sized > 10000);
  // The problem that wrapped is refused, naming a factor of the work.
  CHECK_THROWS_WITH(conv::parse_descriptor("mb1ic4ih1oc1kh32768ph32767").validate(),
                    Catch::Matchers::Contains("direct-convolution work"));
  // Valid (x and w of 2^48 bytes, a 1x1 output), but cpu.fft's t64 buffers would be 1.9e19
  // bytes, which had wrapped to 5.8e17: larger tiles than the problem allows are refused.
  const conv::ConvProblem fft_case =
      conv::parse_descriptor("mb1ic65536ih32768iw32768oc1kh32768kw32768sh32767sw32768");
  const conv::Algorithm& fft = *conv::find_algorithm("cpu.fft");
  if (fft.applicable(fft_case).ok) {
    for (const char* t : {"t32", "t64"})
      CHECK_THROWS_WITH(fft.workspace_bytes(fft_case, t),
                        Catch::Matchers::StartsWith(std::string("config: ") + t));
    CHECK(fft.workspace_bytes(fft_case, "t16") > size_t{1} << 60);  // 1.3e18 bytes, unwrapped
  }
}

TEST_CASE("every algorithm's public functions name a bad argument") {
  // Null tensors, thread counts out of range, invalid problems and packed weights made for
  // something else are refused by the Algorithm base class itself, for every row: 100000 threads
  // once crashed inside libgomp, a negative count aborted, groups = 0 or stride 0 divided by
  // zero in workspace_bytes() and configs(), and cpu.winograd packed as m4 and run as m6 read
  // past the buffer. Threads 0 means the OpenMP default and runs; packing a config that packs
  // nothing is refused (cpu.onednn "plain" once wrote the whole weights into a 0-byte buffer).
  const std::vector<std::string> descriptors = {
      "mb1ic9ih13iw7oc5kh3kw3ph1pw1n\"3x3\"",
      "mb2ic20ih7iw7oc6kh1kw1n\"1x1\"",
      "g8mb1ic8ih9iw9oc8kh3kw3ph1n\"depthwise\"",
  };
  const auto other = conv::parse_descriptor("mb1ic9ih13iw9oc5kh3kw3ph1pw1n\"3x3_wider\"");
  int runs = 0, refusals = 0, tags = 0;
  for (const conv::Algorithm* algo : conv::all_algorithms()) {
    for (const auto& d : descriptors) {
      const conv::ConvProblem p = conv::parse_descriptor(d);
      if (!algo->applicable(p).ok) continue;
      const std::vector<std::string> configs = algo->configs(p);
      for (const std::string& config : configs) {
        INFO(algo->id() << " " << config << " on " << p.name);
        convtest::ReferenceCase ref(p, 77);
        conv::AlignedBuffer y(p.y_bytes());
        conv::AlignedBuffer ws(std::max<size_t>(64, algo->workspace_bytes(p, config)));
        const size_t packed_bytes = algo->packed_weights_bytes(p, config);
        conv::AlignedBuffer packed(std::max<size_t>(64, packed_bytes));
        const auto args = [&] { return ref.args(y.floats(), ws); };
        const auto refused = [&](const conv::ForwardArgs& a, const conv::ConvProblem& q,
                                 const std::string& prefix) {
          conv::poison_nan(y.floats(), p.y_elems());
          CHECK_THROWS_WITH(algo->forward(q, config, a), Catch::StartsWith(prefix));
          CHECK(std::isnan(y.floats()[0]));
          ++refusals;
        };
        const bool packs = packed_bytes > 0;
        const std::string pack_refusal = packs ? "" : "config: ";  // what packing throws first
        for (const int t : {-1, conv::kMaxThreads + 1, 100000}) {
          conv::ForwardArgs a = args();
          a.threads = t;
          refused(a, p, "threads: ");
          CHECK_THROWS_WITH(algo->pack_weights(p, config, ref.w(), packed.data(), t),
                            Catch::StartsWith("threads: "));
        }
        conv::ForwardArgs a = args();
        a.x = nullptr;
        refused(a, p, "x: ");
        a = args();
        a.y = nullptr;
        CHECK_THROWS_WITH(algo->forward(p, config, a), Catch::StartsWith("y: "));
        a = args();
        a.w = nullptr;
        refused(a, p, "w: ");
        CHECK_THROWS_WITH(algo->pack_weights(p, config, nullptr, packed.data(), 1),
                          Catch::StartsWith("w: "));
        CHECK_THROWS_WITH(algo->pack_weights(p, config, ref.w(), nullptr, 1),
                          Catch::StartsWith("packed: "));
        if (!packs) {
          CHECK_THROWS_WITH(algo->pack_weights(p, config, ref.w(), packed.data(), 1),
                            Catch::StartsWith("config: "));
          a.packed_weights = packed.data();  // this config reads w
          refused(a, p, "w: ");
        }
        // Invalid problems, to every function that takes one.
        for (const auto& [field, set] :
             std::vector<std::pair<std::string, std::function<void(conv::ConvProblem&)>>>{
                 {"C", [](conv::ConvProblem& q) { q.C = 0; }},
                 {"groups", [](conv::ConvProblem& q) { q.groups = 0; }},
                 {"stride_h", [](conv::ConvProblem& q) { q.stride_h = 0; }},
                 {"N", [](conv::ConvProblem& q) { q.N = -1; }}}) {
          conv::ConvProblem bad = p;
          set(bad);
          const std::string prefix = "ConvProblem." + field + ": ";
          refused(args(), bad, prefix);
          CHECK_THROWS_WITH(algo->applicable(bad), Catch::StartsWith(prefix));
          CHECK_THROWS_WITH(algo->configs(bad), Catch::StartsWith(prefix));
          CHECK_THROWS_WITH(algo->workspace_bytes(bad, config), Catch::StartsWith(prefix));
          CHECK_THROWS_WITH(algo->packed_weights_bytes(bad, config), Catch::StartsWith(prefix));
          CHECK_THROWS_WITH(algo->error_bound(bad, config), Catch::StartsWith(prefix));
          CHECK_THROWS_WITH(algo->pack_weights(bad, config, ref.w(), packed.data(), 1),
                            Catch::StartsWith(prefix));
        }
        if (algo->device() != conv::Device::Kind::cpu) continue;  // host pointers from here
        std::vector<double> scale(static_cast<size_t>(p.y_elems()));
        CHECK_THROWS_WITH(algo->add_error_scale(p, config, nullptr, ref.w(), scale.data(), 1),
                          Catch::StartsWith("x: "));
        CHECK_THROWS_WITH(algo->add_error_scale(p, config, ref.x(), ref.w(), scale.data(), -1),
                          Catch::StartsWith("threads: "));
        const auto run = [&](const conv::ForwardArgs& b) {
          conv::poison_nan(y.floats(), p.y_elems());
          algo->forward(p, config, b);
          const auto r = ref.compare(y.floats(), *algo, config);
          INFO("max error " << r.max_error << " (bound " << r.bound << ")");
          CHECK(r.ok());
        };
        a = args();
        a.threads = 0;
        run(a);
        ++runs;
        if (!packs) continue;
        // Packed weights: a buffer not made by pack_weights, one made for another config and
        // one made for another problem are refused; the right one runs without w.
        a.w = nullptr;
        std::memset(packed.data(), 0, packed.size());
        a.packed_weights = packed.data();
        refused(a, p, "packed_weights: ");
        for (const std::string& c : configs) {
          if (c == config || algo->packed_weights_bytes(p, c) == 0) continue;
          conv::AlignedBuffer wrong(algo->packed_weights_bytes(p, c));
          algo->pack_weights(p, c, ref.w(), wrong.data(), 2);
          a.packed_weights = wrong.data();
          refused(a, p, "packed_weights: ");
          ++tags;
        }
        const auto other_configs =
            algo->applicable(other).ok ? algo->configs(other) : std::vector<std::string>{};
        if (std::count(other_configs.begin(), other_configs.end(), config) &&
            algo->packed_weights_bytes(other, config) > 0) {
          convtest::ReferenceCase ref_other(other, 78);
          conv::AlignedBuffer wrong(algo->packed_weights_bytes(other, config));
          algo->pack_weights(other, config, ref_other.w(), wrong.data(), 2);
          a.packed_weights = wrong.data();
          refused(a, p, "packed_weights: ");
          ++tags;
        }
        algo->pack_weights(p, config, ref.w(), packed.data(), 2);
        a.packed_weights = packed.data();
        run(a);
      }
    }
  }
  // Every CPU row ran one of the problems at least (cpu.direct and cpu.im2col_gemm all three).
  CHECK(runs >= (conv::cpu_isa() == conv::CpuIsa::scalar ? 6 : 12));
  CHECK(refusals >= 9 * runs);  // three thread counts, x, w, four invalid problems
  if (conv::cpu_isa() != conv::CpuIsa::scalar) CHECK(tags > 10);  // winograd m2/m4/m6, fft tN, ...
  // A problem equal to the packed one (operator==, the same key) takes its packed weights, also
  // where its bottom and right padding differ without adding output.
  if (conv::cpu_isa() != conv::CpuIsa::scalar) {
    const auto p = conv::parse_descriptor("mb1ic16ih12iw12oc16kh3kw3sh2sw2ph1pw1");
    auto q = p;
    q.pad_bottom = q.pad_right = 0;
    REQUIRE(p == q);
    for (const char* id : {"cpu.direct", "cpu.direct_kvec", "cpu.onednn"}) {
      const conv::Algorithm& algo = *conv::find_algorithm(id);
      const std::string config = algo.configs(q).front();
      INFO(id << " " << config);
      convtest::ReferenceCase ref(q, 79);
      conv::AlignedBuffer packed(algo.packed_weights_bytes(p, config)), y(q.y_bytes()),
          ws(std::max<size_t>(64, algo.workspace_bytes(q, config)));
      algo.pack_weights(p, config, ref.w(), packed.data(), 2);
      conv::ForwardArgs a = ref.args(y.floats(), ws);
      a.w = nullptr;
      a.packed_weights = packed.data();
      conv::poison_nan(y.floats(), q.y_elems());
      algo.forward(q, config, a);
      CHECK(ref.compare(y.floats(), algo, config).ok());
    }
  }
  // Threads 0 is the OpenMP default, capped where OMP_NUM_THREADS asks for more than can start.
  const int before = omp_get_max_threads();
  omp_set_num_threads(100000);
  CHECK(conv::resolve_threads(0) == conv::kMaxThreads);
  omp_set_num_threads(before);
  CHECK(conv::resolve_threads(0) == before);
}

TEST_CASE(
    "cpu.pointwise: channel, chunk, output-channel and position tails, strides, 1-3 threads") {
  // C = 1, 7 and 13 (one chunk, a masked last step), 605 (a last chunk of 93 channels after one
  // or two full ones: its masked step adds to earlier sums), 520 at 16x16 (two chunks of 512 and
  // 8, two position ranges in k3p4_c512), K not a multiple of kb = 3, positions not a multiple
  // of pb = 4 and fewer than one 8x8 transpose, strides 2 and 3x2 (gathered packing), 2x1
  // (rows of consecutive positions next to gathers), batch 2 (the packed input reused), 56x56
  // (several position ranges per chunk), no bias.
  if (conv::cpu_isa() == conv::CpuIsa::scalar) return;  // needs AVX2
  const std::vector<std::string> descriptors = {
      "mb1ic1ih3iw3oc4kh1kw1n\"C1\"",
      "mb1ic7ih5iw5oc7kh1kw1n\"C7\"",
      "mb2ic13ih9iw7oc11kh1kw1n\"batch2\"",
      "mb1ic605ih7iw7oc20kh1kw1n\"chunk_tails\"",
      "mb1ic520ih16iw16oc7kh1kw1n\"two_ranges\"",
      "mb1ic64ih56iw56oc5kh1kw1n\"ranges\"",
      "mb1ic40ih15iw13oc9kh1kw1sh2sw2n\"stride2\"",
      "mb1ic24ih11iw17oc8kh1kw1sh3sw2n\"stride3x2\"",
      "mb1ic16ih9iw20oc4kh1kw1sh2sw1n\"stride2x1\"",
      "mb1ic520ih2iw3oc13kh1kw1n\"six_positions\"",
  };
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.pointwise");
  int checked = 0;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    REQUIRE(algo.applicable(p).ok);
    for (const convtest::Data d : {convtest::Data::uniform, convtest::Data::no_bias}) {
      convtest::ReferenceCase ref(p, 1700 + i, d);
      for (const std::string& config : algo.configs(p))
        for (int t : {1, 2, 3}) {
          const auto r = ref.check(algo, config, false, t);
          INFO(p.name << " " << config << " " << convtest::to_string(d) << " threads " << t
                      << ": max error " << r.max_error << " bound " << r.bound << "; " << r.where);
          CHECK(r.nonfinite == 0);
          CHECK(r.max_error <= r.bound);
          ++checked;
        }
    }
  }
  CHECK(checked == (3 * 2 + 7) * 2 * 3);  // C > 256: both configs, else chunks of 256 only
}
