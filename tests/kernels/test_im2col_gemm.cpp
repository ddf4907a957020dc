// cpu.im2col_gemm's own checks beyond the registry-wide ones of test_kernels.cpp: the BLIS
// sub-configuration it starts, and the 49-position GEMM of config oc6ow49_avx512.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "support.hpp"

TEST_CASE("cpu.im2col_gemm's BLIS runs the kernels of convtune's ISA, not its portable ones") {
  // BLIS 0.9 falls back to its "generic" C kernels on CPUs newer than it (3.8x slower on a Zen 5);
  // convtune starts BLIS with the sub-configuration of cpu_isa() (kernels/cpu/common/blis_arch.cpp)
  // and takes the variable that names it away again.
  const char* user = std::getenv("BLIS_ARCH_TYPE");
  if (user && *user) {
    WARN("BLIS_ARCH_TYPE is set: BLIS runs what it names, nothing to check");
    return;
  }
  const std::string v = conv::find_algorithm("cpu.im2col_gemm")->version();
  const std::string arch = v.substr(v.rfind('.') + 1);
  INFO("cpu.im2col_gemm version " << v << ", convtune ISA " << conv::to_string(conv::cpu_isa()));
  REQUIRE(v.rfind("2+blis.", 0) == 0);
  switch (conv::cpu_isa()) {
    case conv::CpuIsa::avx512:
      CHECK(arch == "skx");
      break;
    case conv::CpuIsa::avx2:
      CHECK((arch == "zen3" || arch == "haswell"));
      break;
    default:
      CHECK(arch == "generic");
  }
  // Taken away again (an empty value, which BLIS reads as "skx", put back).
  const char* after = std::getenv("BLIS_ARCH_TYPE");
  CHECK((after ? std::string(after) : "unset") == (user ? std::string(user) : "unset"));
}

TEST_CASE("cpu.im2col_gemm oc6ow49_avx512: 49 output positions, every tail, 1 to 4 threads") {
  // Positions 0..47 in zmm vectors and position 48 as dot products along the reduction
  // (kernels/cpu/im2col_gemm/oc6ow49.hpp): 7x7, 1x49 and 49x1 planes; strides, padding, dilation;
  // reductions of fewer than 16 steps, of whole and partial 16-step groups and of several chunks
  // (at least two on an L2 of up to 16 MiB); output-channel blocks of 1-6 rows (K tails); groups
  // and batch 2; with and without bias; more threads than blocks; a workspace 16 bytes off a cache
  // line.
  const conv::Algorithm& algo = *conv::find_algorithm("cpu.im2col_gemm");
  const std::string config = "oc6ow49_avx512";
  const std::vector<std::string> descriptors = {
      "mb1ic512ih14iw14oc512kh3kw3sh2sw2ph1pw1",  // resnet50 res5_3x3_s2
      "mb1ic5ih7iw7oc16kh1kw1",                   // 5 steps, one partial group; 4 threads, 3 blocks
      "mb1ic3ih9iw9oc17kh3kw3",                   // 27 steps: a group and 11
      "mb2ic40ih7iw7oc23kh3kw3ph1pw1",            // batch 2, K tail of 5
      "g2mb1ic64ih13iw13oc40kh3kw3sh2sw2ph1pw1",  // groups, K/g 20: tail of 2
      "mb1ic8ih1iw55oc18kh1kw7",                  // 1x49
      "mb1ic8ih53iw1oc19kh5kw1",                  // 49x1, tail of 1
      "mb1ic6ih11iw11oc16kh3kw3dh1dw1",           // dilation 2
      "mb1ic2300ih9iw9oc21kh3kw3",                // 20700 steps: several chunks
      "mb1ic300ih13iw13oc16kh3kw3sh2sw2ph1pw1",   // 2700 steps, stride 2, padding
  };
  int checked = 0;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const conv::ConvProblem p = conv::parse_descriptor(descriptors[i]);
    REQUIRE(p.OH() * p.OW() == 49);
    const std::vector<std::string> configs = algo.configs(p);
    const bool offered = std::find(configs.begin(), configs.end(), config) != configs.end();
    INFO(descriptors[i]);
    CHECK(offered == (conv::cpu_isa() == conv::CpuIsa::avx512));
    if (!offered) {
      CHECK_THROWS_WITH(algo.workspace_bytes(p, config), Catch::Contains("config: "));
      continue;
    }
    convtest::ReferenceCase ref(p, 4900 + i,
                                i % 2 ? convtest::Data::no_bias : convtest::Data::uniform);
    for (int threads : {1, 2, 4}) {
      const convtest::CheckResult r = ref.check(algo, config, false, threads);
      INFO(convtest::describe(p, algo, config, r) << ", " << threads << " threads");
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
      ++checked;
    }
    // The workspace where malloc puts it (16 bytes off a line): B's rows start at the next line.
    conv::AlignedBuffer ws(algo.workspace_bytes(p, config) + 16), y(p.y_bytes());
    conv::poison_nan(y.floats(), p.y_elems());
    conv::ForwardArgs a = ref.args(y.floats(), ws, 2);
    a.workspace = static_cast<char*>(ws.data()) + 16;
    a.workspace_size = ws.size() - 16;
    algo.forward(p, config, a);
    const convtest::CheckResult r = ref.compare(y.floats(), algo, config);
    INFO(convtest::describe(p, algo, config, r) << ", workspace 16 bytes off a line");
    CHECK(r.nonfinite == 0);
    CHECK(r.max_error <= r.bound);
  }
  CHECK((conv::cpu_isa() != conv::CpuIsa::avx512 || checked == 30));
  // Offered for 16 output channels per group or more only (not depthwise), and only for 49
  // positions: another plane is refused naming the config.
  const conv::ConvProblem narrow = conv::parse_descriptor("g32mb1ic32ih7iw7oc32kh3kw3ph1pw1");
  const std::vector<std::string> narrow_configs = algo.configs(narrow);
  CHECK(std::find(narrow_configs.begin(), narrow_configs.end(), config) == narrow_configs.end());
  if (conv::cpu_isa() == conv::CpuIsa::avx512)
    CHECK_THROWS_WITH(algo.workspace_bytes(narrow, config),
                      Catch::Contains("16 output channels per group"));
  const conv::ConvProblem other = conv::parse_descriptor("mb1ic8ih8iw8oc16kh1kw1");
  CHECK_THROWS_WITH(algo.workspace_bytes(other, config), Catch::Contains("config: "));
}
