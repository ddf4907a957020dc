// cpu.onednn (kernels/cpu/onednn/onednn.cpp): oneDNN's blocked-layout convolution behind the NCHW
// interface. Accuracy is judged against the float64 reference with the algorithm's own bound
// (exact-order: 16 u sqrt(C/g*R*S) + 8 u relative to sum |x*w| + |bias|); packed weights must give
// bit-identical output to the one-shot path, because both feed the same primitive the same
// (reordered, never rounded) weights.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/conv.hpp"
#include "conv/problem.hpp"
#include "kernels.hpp"
#include "support.hpp"

namespace {

const conv::Algorithm& onednn() {
  return conv::kernels::cpu_onednn();
}

// Runs cpu.onednn once on `ref`'s data. `packed` goes through a conv::Plan as a user's program
// does: it reorders the weights when oneDNN's chosen implementation reads a blocked layout and
// keeps the KCRS pointer when it reads plain weights (which one depends on the CPU's ISA, the
// thread count and oneDNN's version, so no test may assume either).
std::vector<float> run(convtest::ReferenceCase& ref, bool packed, bool with_bias, int threads,
                       const std::string& config = "auto") {
  const conv::ConvProblem& p = ref.problem();
  std::vector<float> y(p.y_elems());
  conv::poison_nan(y.data(), p.y_elems());
  const float* bias = with_bias ? ref.bias() : nullptr;
  if (packed) {
    conv::ForwardOptions o;
    o.threads = threads;
    conv::Plan plan = conv::Plan::create(p, "cpu.onednn", config, o);
    plan.pack_weights(ref.w());
    REQUIRE(plan.has_packed_weights());
    plan.execute(ref.x(), nullptr, bias, y.data());
    return y;
  }
  conv::AlignedBuffer ws(onednn().workspace_bytes(p, config));
  conv::ForwardArgs a;
  a.x = ref.x();
  a.w = ref.w();
  a.bias = bias;
  a.y = y.data();
  a.workspace = ws.data();
  a.workspace_size = ws.size();
  a.threads = threads;
  onednn().forward(p, config, a);
  return y;
}

// Problems covering what the blocked JIT kernels special-case: channel counts off the 8/16 block,
// groups, depthwise, dilation, asymmetric and oversized padding, stride, batch > 1.
std::vector<conv::ConvProblem> edge_problems() {
  std::vector<conv::ConvProblem> out;
  for (const char* d : {
           "mb1ic32ih14oc32kh3ph1n\"blocked 3x3\"",
           "mb2ic3ih17iw13oc5kh3kw2sh2sw1ph1pw0n\"odd channels, stride, batch 2\"",
           "g4mb1ic32ih12oc48kh3ph1n\"groups 4\"",
           "g32mb2ic32ih15oc32kh3sh2ph1n\"depthwise\"",
           "g24mb1ic24ih9oc48kh5ph2n\"depthwise multiplier 2\"",
           "mb1ic16ih20oc24kh3dh1ph2n\"dilation 2\"",
           "mb1ic8ih23iw19oc16kh3kw5dh2dw1ph1pw3n\"dilation 3x2\"",
           "mb1ic16ih10iw11oc16kh3kw3oh11ow10ph1pw0n\"asymmetric padding\"",
           "mb1ic4ih5oc7kh3ph4n\"padding larger than the kernel\"",
           "mb1ic64ih7oc128kh1n\"1x1\"",
           "mb1ic5ih1iw9oc3kh1kw3n\"one row\"",
       })
    out.push_back(conv::parse_descriptor(d));
  return out;
}

}  // namespace

TEST_CASE("cpu.onednn matches the reference on edge problems, one-shot and packed") {
  for (const auto& p : edge_problems()) {
    DYNAMIC_SECTION(p.name) {
      REQUIRE(onednn().applicable(p).ok);
      convtest::ReferenceCase ref(p, 11);
      for (const std::string& config : onednn().configs(p)) {
        for (bool packed : {false, true}) {
          if (packed && onednn().packed_weights_bytes(p, config) == 0) continue;
          auto r = ref.check(onednn(), config, packed);
          INFO(convtest::describe(p, onednn(), config, r) << (packed ? " [packed]" : ""));
          CHECK(r.nonfinite == 0);
          CHECK(r.max_error <= r.bound);
        }
      }
    }
  }
}

TEST_CASE("cpu.onednn packed weights give the one-shot output bit for bit") {
  // Thread counts 1 and the default: at some thread counts oneDNN picks another weights layout
  // than the packed one (resnet50 res3_3x3 at 1 vs 16 threads), which forward() reorders to.
  for (const char* d :
       {"mb1ic128ih28oc128kh3ph1n\"resnet50 res3_3x3\"", "g4mb1ic32ih12oc48kh3ph1n\"groups 4\"",
        "g32mb1ic32ih15oc32kh3ph1n\"depthwise\""}) {
    const auto p = conv::parse_descriptor(d);
    convtest::ReferenceCase ref(p, 3);
    for (int threads : {1, omp_get_max_threads()}) {
      INFO(p.name << ", threads " << threads);
      const auto one_shot = run(ref, false, true, threads);
      const auto packed = run(ref, true, true, threads);
      CHECK(std::memcmp(one_shot.data(), packed.data(), one_shot.size() * sizeof(float)) == 0);
      auto r = ref.compare(packed.data(), onednn().error_bound(p, "auto"));
      INFO(convtest::describe(p, onednn(), "auto", r));
      CHECK(r.ok());
    }
  }
}

TEST_CASE("cpu.onednn without bias equals the biased output minus the bias") {
  for (const char* d : {"mb2ic16ih9oc24kh3ph1n\"dense\"", "g8mb1ic8ih9oc8kh3ph1n\"depthwise\""}) {
    const auto p = conv::parse_descriptor(d);
    convtest::ReferenceCase ref(p, 5);
    for (bool packed : {false, true}) {
      auto y = run(ref, packed, /*with_bias=*/false, omp_get_max_threads());
      // Adding the bias afterwards costs one fp32 rounding of |y| <= sum|x*w| + |bias|, which
      // the exact-order bound (>= 8 u) covers.
      const int64_t plane = p.OH() * p.OW();
      for (int64_t i = 0; i < p.y_elems(); ++i) y[i] += ref.bias()[i / plane % p.K];
      auto r = ref.compare(y.data(), onednn().error_bound(p, "auto"));
      INFO(convtest::describe(p, onednn(), "auto", r) << (packed ? " [packed]" : ""));
      CHECK(r.ok());
    }
  }
}

TEST_CASE("cpu.onednn rejects a short workspace, an unknown config and null tensors") {
  const auto p = conv::parse_descriptor("mb1ic32ih14oc32kh3ph1");
  convtest::ReferenceCase ref(p, 2);
  const size_t need = onednn().workspace_bytes(p, "auto");
  REQUIRE(need > 0);  // blocked src and dst buffers at least
  std::vector<float> y(p.y_elems());
  conv::AlignedBuffer ws(need);
  conv::ForwardArgs a;
  a.x = ref.x();
  a.w = ref.w();
  a.bias = ref.bias();
  a.y = y.data();
  a.workspace = ws.data();
  a.workspace_size = need - 1;
  a.threads = 1;
  CHECK_THROWS_WITH(onednn().forward(p, "auto", a), Catch::Contains("workspace"));
  a.workspace_size = need;
  CHECK_NOTHROW(onednn().forward(p, "auto", a));
  CHECK_THROWS_WITH(onednn().forward(p, "winograd", a), Catch::StartsWith("config"));
  CHECK_THROWS_WITH(onednn().workspace_bytes(p, "gemm"), Catch::StartsWith("config"));
  a.x = nullptr;
  CHECK_THROWS_WITH(onednn().forward(p, "auto", a), Catch::StartsWith("x:"));
}

TEST_CASE("cpu.onednn refuses problems oneDNN 2.6 cannot be asked about and names the field") {
  // With AVX-512, creating these crashed (SIGFPE: an output of 2^37 elements, 0 modulo 2^32) or
  // took gigabytes (memory in proportion to the output width and to the kernel taps: 4.2 GB for
  // 8388607x129 taps); they are refused before oneDNN sees them, with every ISA. Sizes count
  // channels padded to 16 (the blocked layouts'): one channel of 2^28 pixels is 2^32 there.
  // Each is a valid problem that other algorithms may run, and the OW and tap limits' neighbours
  // just inside are still asked.
  const std::pair<const char*, const char*> refused[] = {
      {"mb1ic16ih1iw2097151oc131072oh1ow1048576kh1kw1sw2", "y: "},
      {"mb1ic1ih16384iw16384oc1kh1kw1", "x: "},
      {"mb1ic1ih1iw32769oc1kh1kw1", "OW: "},
      {"mb1ic1ih2048iw1024oc1kh2048kw1024", "R, S: "},
  };
  for (const auto& [descriptor, field] : refused) {
    const conv::Applicability a = onednn().applicable(conv::parse_descriptor(descriptor));
    INFO(descriptor << ": " << a.reason);
    CHECK_FALSE(a.ok);
    CHECK(a.reason.rfind(field, 0) == 0);
  }
  CHECK(onednn().applicable(conv::parse_descriptor("mb1ic1ih1iw32768oc1kh1kw1")).ok);
  CHECK(onednn().applicable(conv::parse_descriptor("mb1ic1ih1024iw1024oc1kh1024kw1024")).ok);
}

TEST_CASE("cpu.onednn leaves the caller's OpenMP thread count as it was") {
  const auto p = conv::parse_descriptor("mb1ic16ih10oc16kh3ph1");
  convtest::ReferenceCase ref(p, 4);
  const int before = omp_get_max_threads();
  // 3 exceeds a 2-core machine's processor count: forward() then runs with the processor count,
  // which the workspace was sized for.
  for (int threads : {1, 3}) {
    auto y = run(ref, false, true, threads);
    CHECK(omp_get_max_threads() == before);
    CHECK(ref.compare(y.data(), onednn().error_bound(p, "auto")).ok());
  }
}

TEST_CASE("cpu.onednn runs the same problem from two threads at once") {
  const auto p = conv::parse_descriptor("mb1ic32ih16oc32kh3ph1");
  convtest::ReferenceCase ref(p, 9);
  std::vector<float> y1, y2;
  // Each std::thread runs 1 OpenMP thread so the two calls overlap rather than queue.
  std::thread t1([&] {
    for (int i = 0; i < 20; ++i) y1 = run(ref, false, true, 1);
  });
  std::thread t2([&] {
    for (int i = 0; i < 20; ++i) y2 = run(ref, true, true, 1);
  });
  t1.join();
  t2.join();
  CHECK(ref.compare(y1.data(), onednn().error_bound(p, "auto")).ok());
  CHECK(ref.compare(y2.data(), onednn().error_bound(p, "auto")).ok());
}

TEST_CASE("a oneDNN ISA cap below convtune's ISA level is part of the CPU fingerprint") {
  // Timings of oneDNN capped to SSE4.1 (10x slower) had been stored under the uncapped device.
  std::vector<std::pair<const char*, std::optional<std::string>>> saved;
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    saved.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    ::unsetenv(name);
  }
  const std::string plain = conv::Device::cpu().fingerprint(1);
  const auto with = [&](const std::string& cap) {
    std::string f = plain;
    f.insert(f.rfind("|threads=1"), "|onednn=" + cap);
    return f;
  };
  const conv::CpuIsa ours = conv::cpu_isa();
  const std::pair<const char*, std::string> cases[] = {
      {"SSE41", ours >= conv::CpuIsa::avx2 ? with("sse41") : plain},
      {"avx2", ours == conv::CpuIsa::avx512 ? with("avx2") : plain},
      {"AVX2_VNNI", ours == conv::CpuIsa::avx512 ? with("avx2_vnni") : plain},
      {"AVX512_CORE", plain},
      {"ALL", plain},
      {"", plain}};
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    for (const auto& [cap, expected] : cases) {
      ::setenv(name, cap, 1);
      INFO(name << "=" << cap);
      CHECK(conv::Device::cpu().fingerprint(1) == expected);
      ::unsetenv(name);
    }
  }
  for (const auto& [name, v] : saved)
    if (v) ::setenv(name, v->c_str(), 1);
}
