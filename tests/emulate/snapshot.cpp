// Runs one kernel call under a CPU emulator with AVX-512 (scripts/emulate_avx512.py, Bochs via
// the bochscpu module), so that the zmm kernels are checked on machines without AVX-512.
//
//   avx512_snapshot snap DESC ALGO CONFIG DIR [packed]
//     prepares x, w, bias (ReferenceCase's seeded data), a NaN-poisoned y and the call
//     context; then writes DIR/index.bin (entry point, context, the readable mappings; for code
//     mapped from a file its path and offset) and DIR/dump.bin (the other mappings' bytes). Nothing
//     before the dump asks for the CPU's ISA, so cpu_isa() first runs inside the emulator and sees
//     its CPUID. CONFIG "__list__" makes the emulated call report the algorithm's configs (or why
//     it does not apply) instead of running.
//   avx512_snapshot layers CAP
//     prints every layer of the shared layer files (convtest::all_layer_problems, batch 1) with
//     its image shrunk by 4 pixels at a time to at most CAP GFLOP, as "descriptor<TAB>name",
//     each problem once.
//   avx512_snapshot check DESC DIR
//     compares DIR/y.bin with the float64 reference, using the error scale (DIR/scale.bin) and
//     bound (DIR/bound.bin) the emulated algorithm reported: exit 0 when within the bound.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "conv/problem.hpp"
#include "support.hpp"

namespace {

enum Status : int32_t {
  kNotRun = 0,
  kOk = 1,
  kThrew = 3,
  kConfigs = 5,
  kNoPack = 6,
  kNotApplicable = 7
};

// Read by the emulator script at the offsets index.bin gives.
struct Context {
  const conv::Algorithm* algo;
  const conv::ConvProblem* problem;
  const std::string* config;
  conv::ForwardArgs args;
  double* scale;  // |bias| + sum|x*w| on entry; the algorithm's add_error_scale() adds to it
  int32_t packed;
  int32_t status;
  int32_t isa;
  double bound;
  char message[4096];
};

Context g_context;
// The emulated call's stack: the native one is not part of the call.
alignas(4096) unsigned char g_stack[8 << 20];
char g_maps[1 << 20];

void report(Context* c, Status s, const std::string& text) {
  c->status = s;
  std::snprintf(c->message, sizeof c->message, "%s", text.c_str());
}

}  // namespace

// The emulated call returns here; hlt at CPL 3 faults, which ends the emulation.
extern "C" __attribute__((noinline, used)) void avx512_snapshot_done() {
  __asm__ volatile("hlt");
}

extern "C" __attribute__((noinline, used)) void avx512_snapshot_entry(Context* c) {
  try {
    c->isa = static_cast<int32_t>(conv::cpu_isa());
    if (*c->config == "__list__") {
      const conv::Applicability ok = c->algo->applicable(*c->problem);
      if (!ok.ok) return report(c, kNotApplicable, ok.reason);
      std::string list;
      for (const auto& k : c->algo->configs(*c->problem)) list += k + ",";
      return report(c, kConfigs, list);
    }
    // Allocated in the emulated call (the emulator backs anonymous mmap with zero pages): their
    // sizes depend on the ISA, which the native run must not ask for.
    conv::AlignedBuffer workspace(c->algo->workspace_bytes(*c->problem, *c->config));
    conv::poison_nan(workspace.floats(), static_cast<int64_t>(workspace.size() / sizeof(float)));
    c->args.workspace = workspace.data();
    c->args.workspace_size = workspace.size();
    const float* w = c->args.w;
    conv::AlignedBuffer packed;
    if (c->packed) {
      const size_t bytes = c->algo->packed_weights_bytes(*c->problem, *c->config);
      if (bytes == 0) return report(c, kNoPack, "");
      packed.reserve(bytes);
      c->algo->pack_weights(*c->problem, *c->config, w, packed.data(), 1);
      c->args.packed_weights = packed.data();
      c->args.w = nullptr;
    }
    c->algo->forward(*c->problem, *c->config, c->args);
    c->bound = c->algo->error_bound(*c->problem, *c->config);
    c->algo->add_error_scale(*c->problem, *c->config, c->args.x, w, c->scale, 1);
    c->status = kOk;
  } catch (const std::exception& e) {
    report(c, kThrew, e.what());
  }
}

namespace {

void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::write(fd, p, n);
    if (k <= 0) _exit(4);
    p += k;
    n -= static_cast<size_t>(k);
  }
}

int open_out(const std::string& dir, const char* name) {
  const int fd = ::open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) _exit(4);
  return fd;
}

template <typename T>
bool read_file(const std::string& path, T* data, size_t count) {
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
  return static_cast<size_t>(f.gcount()) == count * sizeof(T);
}

int check(const conv::ConvProblem& p, const convtest::ReferenceCase& rc, const std::string& dir) {
  const size_t n = static_cast<size_t>(p.y_elems());
  std::vector<float> y(n);
  std::vector<double> scale(n);
  double bound = 0;
  if (!read_file(dir + "/y.bin", y.data(), n) || !read_file(dir + "/scale.bin", scale.data(), n) ||
      !read_file(dir + "/bound.bin", &bound, 1)) {
    std::fprintf(stderr, "avx512_snapshot: %s: missing or short y.bin, scale.bin or bound.bin\n",
                 dir.c_str());
    return 2;
  }
  const convtest::CheckResult r = rc.compare(y.data(), bound, scale.data());
  const std::string worst = r.ok() ? "" : "; worst: " + r.where;
  std::printf("max_error %.3g bound %.3g nonfinite %lld%s\n", r.max_error, bound,
              static_cast<long long>(r.nonfinite), worst.c_str());
  return r.ok() ? 0 : 1;
}

int shrunk_layers(double cap_gflop) {
  std::set<std::string> seen;
  for (conv::ConvProblem p : convtest::all_layer_problems(1)) {
    for (conv::ConvProblem q = p; p.flops() > cap_gflop * 1e9; p = q) {
      q.H -= 4;
      q.W -= 4;
      if (q.H < 1 || q.W < 1 || q.OH() < 3 || q.OW() < 3) break;
    }
    const std::string name = p.name;
    p.name.clear();
    if (seen.insert(p.key()).second)
      std::printf("%s\t%s\n", conv::to_descriptor(p).c_str(), name.c_str());
  }
  return 0;
}

int snapshot(const conv::ConvProblem& p, const convtest::ReferenceCase& rc, int argc, char** argv) {
  const conv::Algorithm* algo = conv::find_algorithm(argv[3]);
  if (!algo) {
    std::fprintf(stderr, "avx512_snapshot: unknown algorithm %s\n", argv[3]);
    return 2;
  }
  static const std::string config = argv[4];
  const std::string dir = argv[5];
  static const conv::ConvProblem problem = p;
  static conv::AlignedBuffer y(p.y_bytes());
  conv::poison_nan(y.floats(), p.y_elems());
  static std::vector<double> scale(rc.abs_sum(), rc.abs_sum() + p.y_elems());
  Context& c = g_context;
  c.algo = algo;
  c.problem = &problem;
  c.config = &config;
  conv::AlignedBuffer none;
  c.args = rc.args(y.floats(), none, 1);
  c.scale = scale.data();
  c.packed = argc > 6 && std::string(argv[6]) == "packed";
  uint64_t fs_base = 0;  // the thread pointer: TLS (errno, libgomp's state, the stack guard)
  __asm__ volatile("mov %%fs:0, %0" : "=r"(fs_base));
  const uint64_t rsp = reinterpret_cast<uint64_t>(g_stack + sizeof g_stack - 64) - 8;
  const uint64_t done = reinterpret_cast<uint64_t>(&avx512_snapshot_done);
  std::memcpy(reinterpret_cast<void*>(rsp), &done, sizeof done);
  const int index = open_out(dir, "index.bin"), dump = open_out(dir, "dump.bin");

  // From here on nothing allocates, so the heap is dumped in one state.
  const int maps = ::open("/proc/self/maps", O_RDONLY);
  size_t len = 0;
  for (ssize_t k; (k = ::read(maps, g_maps + len, sizeof g_maps - 1 - len)) > 0;)
    len += static_cast<size_t>(k);
  ::close(maps);
  g_maps[len] = 0;
  const uint64_t head[] = {0x534e4150,
                           reinterpret_cast<uint64_t>(&avx512_snapshot_entry),
                           done,
                           reinterpret_cast<uint64_t>(&c),
                           rsp,
                           fs_base,
                           reinterpret_cast<uint64_t>(y.data()),
                           static_cast<uint64_t>(p.y_bytes()),
                           reinterpret_cast<uint64_t>(scale.data()),
                           offsetof(Context, status),
                           offsetof(Context, message),
                           offsetof(Context, bound),
                           offsetof(Context, isa)};
  write_all(index, head, sizeof head);
  for (char* line = g_maps; *line;) {
    char* end = std::strchr(line, '\n');
    if (end) *end = 0;
    unsigned long lo = 0, hi = 0, offset = 0;
    char perms[8] = {0};
    int path_at = 0;
    // [vvar] and [vsyscall] are the kernel's; reading them here faults or means nothing there.
    if (std::sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &offset, &path_at) >= 4 &&
        perms[0] == 'r' && !std::strstr(line, "[vvar") && !std::strstr(line, "[vsyscall]")) {
      // Code mapped from a file is the file's bytes (most of the address space: the emulator
      // reads those pages from the file); everything else, relocated read-only data included,
      // is dumped.
      const char* file = path_at > 0 ? line + path_at : "";
      const bool from_file = std::strcmp(perms, "r-xp") == 0 && file[0] == '/';
      const uint64_t record[5] = {lo, hi, from_file ? 1u : 0u, offset,
                                  from_file ? std::strlen(file) : 0};
      write_all(index, record, sizeof record);
      if (from_file)
        write_all(index, file, record[4]);
      else
        write_all(dump, reinterpret_cast<const void*>(lo), hi - lo);
    }
    if (!end) break;
    line = end + 1;
  }
  ::close(index);
  ::close(dump);
  // Which library an emulated fault is in (the runner names it); written after the dump.
  const int in = ::open("/proc/self/maps", O_RDONLY), out = open_out(dir, "maps.txt");
  for (ssize_t k; (k = ::read(in, g_maps, sizeof g_maps)) > 0;)
    write_all(out, g_maps, static_cast<size_t>(k));
  ::close(in);
  ::close(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (!((mode == "snap" && (argc == 6 || argc == 7)) || (mode == "check" && argc == 4) ||
        (mode == "layers" && argc == 3))) {
    std::fprintf(stderr,
                 "usage: avx512_snapshot snap DESC ALGO CONFIG DIR [packed]\n"
                 "       avx512_snapshot check DESC DIR\n"
                 "       avx512_snapshot layers CAP_GFLOP\n");
    return 2;
  }
  try {
    if (mode == "layers") {
      char* end = nullptr;
      const double cap = std::strtod(argv[2], &end);
      if (*end != '\0' || !(cap > 0))
        throw conv::Error(std::string("CAP: expected GFLOP > 0, got ") + argv[2]);
      return shrunk_layers(cap);
    }
    const conv::ConvProblem p = conv::parse_descriptor(argv[2]);
    const convtest::ReferenceCase rc(p, 7);
    return mode == "check" ? check(p, rc, argv[3]) : snapshot(p, rc, argc, argv);
  } catch (const conv::Error& e) {
    std::fprintf(stderr, "avx512_snapshot: %s\n", e.what());
    return 2;
  }
}
