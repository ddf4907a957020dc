#include "device_ops.hpp"

#include <cpu_features/cpuinfo_x86.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>

#include "conv/error.hpp"
#include "elf_soname.hpp"

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

// oneDNN's own ISA cap, lower-cased, where it keeps oneDNN below the ISA our kernels use (e.g.
// ONEDNN_MAX_CPU_ISA=SSE41 on an AVX2 CPU, many times slower); else "". Its timings then differ
// from an uncapped run's on the same CPU, so they must not be stored under the same device.
const char* onednn_max_isa_env() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name); v && *v) return v;
  return nullptr;
}

// OMP_WAIT_POLICY=passive (any case), as the OpenMP runtime reads it.
static bool omp_wait_passive() {
  const char* v = std::getenv("OMP_WAIT_POLICY");
  if (!v) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "passive";
}

static std::string onednn_isa_below_ours() {
  const char* cap = onednn_max_isa_env();
  if (!cap) return "";
  std::string v(cap);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // oneDNN's names: sse41, avx, avx2[_vnni[_2]], avx512_core[...], avx10_*, amx_*, all, default.
  const bool below_avx2 = v == "sse41" || v == "avx";
  const bool avx2_class = v.rfind("avx2", 0) == 0;
  const CpuIsa ours = cpu_isa();
  if ((below_avx2 && ours >= CpuIsa::avx2) || (avx2_class && ours == CpuIsa::avx512)) return v;
  return "";
}

std::string CpuOps::fingerprint(int threads) const {
  std::string brand = cpu_features::GetX86Info().brand_string;
  while (!brand.empty() && brand.back() == ' ') brand.pop_back();
  std::ostringstream s;
  // No convtune version: measurements stay valid across upgrades while the algorithms'
  // versions (Algorithm::version) do.
  s << "cpu|" << brand << "|" << to_string(cpu_isa());
  if (const std::string onednn = onednn_isa_below_ours(); !onednn.empty())
    s << "|onednn=" << onednn;
  // Threads that sleep at once after each parallel region pay a wake-up per call, which the
  // default (spin a while, then sleep) does not in back-to-back runs: another set of times.
  if (omp_wait_passive()) s << "|omp_wait=passive";
  s << "|threads=" << resolve_threads(threads);
  return s.str();
}

namespace {

// The plugin's file name and soname (kernels/cuda/cuda.cmake).
constexpr const char* kPluginSoname = "libconvtune_cuda.so";

struct PluginState {
  const CudaPlugin* plugin = nullptr;
  std::string status;
};

// The directory of the file that holds this function (libconvtune.so), with a trailing '/'.
std::string own_directory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_directory), &info) || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

PluginState load_plugin() {
  PluginState st;
  std::string path;
  if (const char* env = std::getenv("CONVTUNE_CUDA_PLUGIN")) {
    path = env;
    if (path.empty() || path == "none") {
      st.status = "CONVTUNE_CUDA_PLUGIN=" + path + " disables the CUDA plugin";
      return st;
    }
  } else {
    path = own_directory() + kPluginSoname;
  }
  struct stat sb {};
  if (stat(path.c_str(), &sb) != 0) {
    st.status = path +
                " not found: this convtune was built or installed without its CUDA "
                "backend (configure with nvcc present, CONVTUNE_CUDA=AUTO or ON)";
    return st;
  }
  if (!std::getenv("CONVTUNE_CUDA_PLUGIN")) {
    // Without the NVIDIA driver the plugin could only say "no device", after mapping the CUDA
    // runtime, cuBLAS, cuFFT and cuDNN first, which costs every process noticeable start-up time.
    // The driver library is what cudart would load; it stays loaded.
    dlerror();
    if (!dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
      const char* e = dlerror();
      st.status = "no NVIDIA driver (" + std::string(e ? e : "libcuda.so.1 not found") + "), so " +
                  path + " is not loaded; CONVTUNE_CUDA_PLUGIN=" + path + " loads it anyway";
      return st;
    }
  }
  std::string why;
  const std::string soname = S_ISREG(sb.st_mode) ? elf_soname(path, why) : "";
  if (!S_ISREG(sb.st_mode)) why = "is not a regular file";
  if (soname.empty()) {
    st.status = "cannot load " + path + " as convtune's CUDA plugin: it " + why;
    return st;
  }
  if (soname != kPluginSoname) {
    st.status = path + " is not convtune's CUDA plugin (its soname is " + soname + ", not " +
                kPluginSoname + "), so it is not loaded";
    return st;
  }
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    st.status = "cannot load " + path + ": " + (e ? e : "dlopen failed");
    return st;
  }
  auto entry = reinterpret_cast<CudaPluginEntry>(dlsym(h, CONVTUNE_CUDA_PLUGIN_ENTRY));
  if (!entry) {
    st.status = path + " has no entry point " CONVTUNE_CUDA_PLUGIN_ENTRY;
    return st;  // never dlclose: a half-initialised CUDA runtime must not be unloaded
  }
  const CudaPlugin* plugin = entry();
  if (!plugin || !plugin->version || std::string(plugin->version) != version()) {
    st.status = path + " is from convtune " +
                (plugin && plugin->version ? plugin->version : "(unknown)") + ", not " + version();
    return st;
  }
  st.plugin = plugin;
  st.status = "loaded " + path;
  return st;
}

const PluginState& plugin_state() {
  static const PluginState state = load_plugin();
  return state;
}

}  // namespace

const CudaPlugin* cuda_plugin() {
  return plugin_state().plugin;
}
const std::string& cuda_plugin_status() {
  return plugin_state().status;
}

const DeviceOps& device_ops(const Device& d) {
  if (d.kind == Device::Kind::cpu) {
    static const CpuOps cpu;
    return cpu;
  }
  if (d.kind != Device::Kind::cuda)
    throw Error("device.kind: expected cpu or cuda, got " +
                std::to_string(static_cast<int>(d.kind)));
  if (const CudaPlugin* plugin = cuda_plugin()) return plugin->device_ops(d.index);
  throw Error("device: " + d.name() + ": no CUDA backend (" + cuda_plugin_status() + ")");
}

}  // namespace conv
