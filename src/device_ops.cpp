#include "device_ops.hpp"

#include <cpu_features/cpuinfo_x86.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "conv/error.hpp"

namespace conv {

namespace {

class CpuOps final : public DeviceOps {
 public:
  void* alloc(size_t bytes) const override {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded < bytes)
      throw Error("cpu: allocation size " + std::to_string(bytes) + " overflows");
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw Error("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void free(void* p) const noexcept override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes, void*) const override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes, void*) const override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void synchronize(void*) const override {}
  double time_ms(const std::function<void()>& run, void*) const override {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
  void check_pointer(const void*, const char*) const override {}
  std::string fingerprint(int threads) const override;
};

}  // namespace

std::string CpuOps::fingerprint(int threads) const {
  std::string brand = cpu_features::GetX86Info().brand_string;
  while (!brand.empty() && brand.back() == ' ') brand.pop_back();
  std::ostringstream s;
  // No convtune version: measurements stay valid across upgrades while the algorithms'
  // versions (Algorithm::version) do.
  s << "cpu|" << brand << "|" << to_string(cpu_isa()) << "|threads=" << resolve_threads(threads);
  return s.str();
}

const DeviceOps& device_ops(const Device& d) {
  if (d.kind == Device::Kind::cpu) {
    static const CpuOps cpu;
    return cpu;
  }
#ifdef CONVTUNE_HAVE_CUDA
  return cuda_device_ops(d.index);
#else
  throw Error("device: " + d.name() + ": this build of convtune has no CUDA backend");
#endif
}

}  // namespace conv
