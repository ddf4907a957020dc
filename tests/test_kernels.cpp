// Every registered CPU algorithm, every config, against the float64 reference: the layers of
// ../shared/layers/*.txt (batch 1) and 300 seeded random problems. New algorithms in
// kernels/registry.cpp are picked up here without touching this file.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <string>

#include "conv/algorithm.hpp"
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
