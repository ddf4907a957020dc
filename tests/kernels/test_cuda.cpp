// The CUDA backend on a real GPU: the CUDA DeviceOps (memory, copies, pointer checks, errors,
// fingerprint) and every registered cuda.* algorithm and config (cuda.winograd, cuda.fft,
// cuda.implicit_gemm, cuda.direct, cuda.im2col_gemm, cuDNN's) against the float64 reference,
// packed weights bit-identical to the one-shot call where an algorithm packs,
// on the layers/ files (batch 1) and 250 seeded random problems, with device buffers and
// NaN-poisoned outputs (cudaMemset 0xFF). Exits with 77 (ctest: skipped) when no GPU is present.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "device_ops.hpp"
#include "support.hpp"

namespace {

const conv::DeviceOps& ops() {
  return conv::device_ops(conv::Device::cuda(0));
}

std::vector<const conv::Algorithm*> cuda_algorithms() {
  std::vector<const conv::Algorithm*> out;
  for (const conv::Algorithm* a : conv::registry())
    if (a->device() == conv::Device::Kind::cuda) out.push_back(a);
  return out;
}

// The reference case's tensors on the GPU, and one output buffer to poison and read back.
struct DeviceCase {
  convtest::ReferenceCase& ref;
  conv::DeviceBuffer x, w, b, y;
  std::vector<float> host_y;
  void* stream = nullptr;

  explicit DeviceCase(convtest::ReferenceCase& r, void* s = nullptr)
      : ref(r),
        x(ops(), r.problem().x_bytes()),
        w(ops(), r.problem().w_bytes()),
        b(ops(), r.problem().K * 4),
        y(ops(), r.problem().y_bytes()),
        host_y(r.problem().y_elems()),
        stream(s) {
    const auto& p = r.problem();
    ops().upload(x.data(), r.x(), p.x_bytes(), stream);
    ops().upload(w.data(), r.w(), p.w_bytes(), stream);
    ops().upload(b.data(), r.bias(), p.K * 4, stream);
  }

  // With `packed`, the weights go through pack_weights() on the device (as a Plan does) and
  // forward() gets no `w` and the smaller workspace.
  convtest::CheckResult run(const conv::Algorithm& algo, const std::string& config,
                            bool packed = false) {
    const auto& p = ref.problem();
    conv::DeviceBuffer pw;
    if (packed) {
      pw = conv::DeviceBuffer(ops(), algo.packed_weights_bytes(p, config));
      algo.pack_weights(p, config, w.floats(), pw.data(), 1);
    }
    // All-ones bits are a NaN; on the algorithm's stream, so it is ordered before the run.
    REQUIRE(cudaMemsetAsync(y.data(), 0xFF, p.y_bytes(), static_cast<cudaStream_t>(stream)) ==
            cudaSuccess);
    conv::DeviceBuffer ws(ops(), algo.workspace_bytes(p, config));
    conv::ForwardArgs a;
    a.x = x.floats();
    a.w = packed ? nullptr : w.floats();
    a.packed_weights = packed ? pw.data() : nullptr;
    a.bias = b.floats();
    a.y = y.floats();
    a.workspace = ws.data();
    a.workspace_size = algo.workspace_bytes(p, config);
    a.stream = stream;
    algo.forward(p, config, a);
    ops().synchronize(stream);
    ops().download(host_y.data(), y.data(), p.y_bytes(), stream);
    return ref.compare(host_y.data(), algo, config);
  }
};

// cuDNN's Winograd and FFT algorithms: their rounding is cuDNN's, not a property of our call.
bool vendor_transform(const conv::Algorithm& algo) {
  return std::string_view(algo.id()).rfind("cuda.cudnn.", 0) == 0 &&
         algo.numeric_class() == conv::NumericClass::transform_based;
}

// Every applicable cuda.* algorithm and config on one problem; cuda.direct and cuda.im2col_gemm
// must apply to every problem.
void check_all(const conv::ConvProblem& p, uint64_t seed) {
  convtest::ReferenceCase ref(p, seed);
  DeviceCase d(ref);
  for (const conv::Algorithm* algo : cuda_algorithms()) {
    const conv::Applicability ok = algo->applicable(p);
    const std::string id(algo->id());
    if (id == "cuda.direct" || id == "cuda.im2col_gemm") {
      INFO(id << " on " << p.key() << ": " << ok.reason);
      CHECK(ok.ok);
    }
    if (!ok.ok) continue;
    for (const std::string& config : algo->configs(p)) {
      convtest::CheckResult r;
      try {
        r = d.run(*algo, config);
      } catch (const conv::Error& e) {
        // A workspace larger than the GPU is the only acceptable failure.
        INFO(id << " " << config << " on " << p.key() << " threw: " << e.what());
        CHECK(std::string(e.what()).find("out of memory") != std::string::npos);
        continue;
      }
      INFO(convtest::describe(p, *algo, config, r));
      CHECK(r.nonfinite == 0);
      if (vendor_transform(*algo) && r.max_error > r.bound) {
        // cuDNN's own transform precision, not our call: WINOGRAD_NONFUSED on 5x5 filters
        // measured 2-2.6x past the float32 bound on an H200 (cuDNN 9.14; its 3x3 path stays
        // 200x inside). The tuner rejects such a candidate by the same bound; here the output as
        // a whole must still be right, which a wrong layout, padding or descriptor never is.
        WARN("cuDNN past the float32 bound (the tuner rejects it): "
             << convtest::describe(p, *algo, config, r) << "; l2 error " << r.l2_error);
        CHECK(r.l2_error <= 1e-2);
      } else {
        CHECK(r.max_error <= r.bound);
      }
      // A packed Plan computes exactly what the one-shot call does.
      if (algo->packed_weights_bytes(p, config) > 0) {
        const std::vector<float> oneshot = d.host_y;
        const auto rp = d.run(*algo, config, true);
        INFO("packed: " << convtest::describe(p, *algo, config, rp));
        CHECK(rp.nonfinite == 0);
        CHECK(d.host_y == oneshot);
      }
    }
  }
}

void check_layers(const std::string& file) {
  for (const auto& p : convtest::layer_problems(file, 1)) {
    DYNAMIC_SECTION(p.name) {
      check_all(p, 7);
    }
  }
}

}  // namespace

TEST_CASE("cuda: device ops copy, check pointers, report out of memory and fingerprint") {
  const conv::DeviceOps& o = ops();
  std::vector<float> host(1000), back(1000, 0.0f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  conv::DeviceBuffer buf(o, host.size() * 4);
  o.upload(buf.data(), host.data(), host.size() * 4, nullptr);
  o.download(back.data(), buf.data(), host.size() * 4, nullptr);
  CHECK(back == host);

  CHECK_NOTHROW(o.check_pointer(buf.data(), "x"));
  try {
    o.check_pointer(host.data(), "x");
    FAIL("a host pointer passed the device pointer check");
  } catch (const conv::Error& e) {
    CHECK(std::string(e.what()).find("host pointer") != std::string::npos);
  }

  try {
    conv::DeviceBuffer huge(o, size_t{1} << 50);  // 1 PiB
    FAIL("a 1 PiB allocation succeeded");
  } catch (const conv::Error& e) {
    CHECK(std::string(e.what()).find("out of memory") != std::string::npos);
  }
  // The failed allocation left no error behind.
  conv::DeviceBuffer after(o, 1024);
  CHECK_NOTHROW(o.synchronize(nullptr));

  const std::string fp = conv::Device::cuda(0).fingerprint();
  INFO(fp);
  CHECK(fp.rfind("cuda|", 0) == 0);
  CHECK(fp.find("|sm_") != std::string::npos);
  CHECK(fp.find("|cudnn=") != std::string::npos);
  CHECK(fp.find("|driver=") != std::string::npos);
  CHECK(fp.find("|cublas=") != std::string::npos);
  // As on the CPU, no convtune version: stored winners survive an upgrade (Algorithm::version
  // retires the stale ones).
  CHECK(fp.find("convtune") == std::string::npos);

  CHECK(o.time_ms([] {}, nullptr) >= 0);

  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  try {
    conv::device_ops(conv::Device::cuda(count));
    FAIL("a device past the last one was accepted");
  } catch (const conv::Error& e) {
    CHECK(std::string(e.what()).find("device: cuda:") == 0);
  }
}

TEST_CASE("cuda: algorithms reject bad configs, short workspaces, and explain cuDNN's padding") {
  conv::ConvProblem p = conv::parse_descriptor("mb1ic8ih20iw20oc8kh3kw3ph1pw1n\"small\"");
  convtest::ReferenceCase ref(p, 3);
  DeviceCase d(ref);
  const conv::Algorithm* direct = conv::find_algorithm("cuda.direct");
  const conv::Algorithm* gemm = conv::find_algorithm("cuda.im2col_gemm");
  REQUIRE(direct);
  REQUIRE(gemm);
  CHECK_THROWS_WITH(d.run(*direct, "t99x99k99"), Catch::Contains("config:"));
  conv::ForwardArgs a;
  a.x = d.x.floats(), a.w = d.w.floats(), a.y = d.y.floats();
  a.workspace_size = gemm->workspace_bytes(p, "cublas") - 4;
  conv::DeviceBuffer ws(ops(), a.workspace_size);
  a.workspace = ws.data();
  CHECK_THROWS_WITH(gemm->forward(p, "cublas", a), Catch::Contains("workspace:"));

  // Asymmetric padding that changes the output size: cuDNN cannot express it.
  conv::ConvProblem q = p;
  q.pad_bottom = 3;
  q.validate();
  for (const conv::Algorithm* algo : cuda_algorithms()) {
    if (std::string(algo->id()).rfind("cuda.cudnn.", 0) != 0) continue;
    const auto ok = algo->applicable(q);
    INFO(algo->id() << ": " << ok.reason);
    CHECK_FALSE(ok.ok);
    CHECK(ok.reason.find("symmetric") != std::string::npos);
  }
  // Asymmetric padding that the stride makes irrelevant: computed exactly as the symmetric one.
  conv::ConvProblem s = conv::parse_descriptor("mb1ic4ih9iw9oc4kh3kw3sh2sw2ph1pw1n\"s2\"");
  s.pad_bottom = 0;  // OH = (9 + 1 - 3) / 2 + 1 = 4 = (9 + 2 - 3) / 2 + 1
  s.validate();
  REQUIRE(s.OH() == 4);
  check_all(s, 5);
}

TEST_CASE("cuda: algorithms on a non-default stream") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  conv::ConvProblem p =
      conv::parse_descriptor("g2mb2ic16ih15iw13oc24kh3kw3sh1sw2ph1pw1n\"stream\"");
  {
    convtest::ReferenceCase ref(p, 4);
    DeviceCase d(ref, stream);
    for (const conv::Algorithm* algo : cuda_algorithms()) {
      if (!algo->applicable(p).ok) continue;
      for (const std::string& config : algo->configs(p)) {
        auto r = d.run(*algo, config);
        INFO(convtest::describe(p, *algo, config, r));
        CHECK(r.nonfinite == 0);
        CHECK(r.max_error <= r.bound);
      }
    }
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("cuda: algorithms match the reference on seed_alexnet_conv1.txt") {
  check_layers("seed_alexnet_conv1.txt");
}
TEST_CASE("cuda: algorithms match the reference on alexnet.txt") {
  check_layers("alexnet.txt");
}
TEST_CASE("cuda: algorithms match the reference on vgg16.txt") {
  check_layers("vgg16.txt");
}
TEST_CASE("cuda: algorithms match the reference on resnet50.txt") {
  check_layers("resnet50.txt");
}
TEST_CASE("cuda: algorithms match the reference on mobilenet_v2.txt") {
  check_layers("mobilenet_v2.txt");
}
TEST_CASE("cuda: algorithms match the reference on large_kernels.txt") {
  check_layers("large_kernels.txt");
}

TEST_CASE("cuda: algorithms match the reference on 250 seeded random problems") {
  convtest::RandomSpec spec;
  auto problems = convtest::random_problems(250, 20261201, spec);
  REQUIRE(problems.size() == 250);
  for (size_t i = 0; i < problems.size(); ++i) check_all(problems[i], 300 + i);
}

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("no CUDA device: skipped (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount: 0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
