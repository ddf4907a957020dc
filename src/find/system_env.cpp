// The real measurement environment: the device's timer, the steady clock, and load signals
// from Linux's scheduler statistics (see measure.hpp).
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "conv/error.hpp"
#include "device_ops.hpp"
#include "measure.hpp"

namespace conv::measure {

namespace {

// Reads a small /proc file into `buf` (NUL-terminated); false when it cannot be read.
bool read_small(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

// Sum over this process's threads of the time spent runnable on a run queue, ms; -1 when the
// kernel does not provide schedstat.
double run_delay_ms() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return -1;
  double total_ns = 0;
  bool any = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[128];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    unsigned long long on_cpu = 0, waited = 0;
    // A thread may exit between readdir and open: skip it.
    if (!read_small(path, buf, sizeof buf) || std::sscanf(buf, "%llu %llu", &on_cpu, &waited) != 2)
      continue;
    total_ns += static_cast<double>(waited);
    any = true;
  }
  ::closedir(dir);
  return any ? total_ns / 1e6 : -1;
}

// The "steal" column of /proc/stat's aggregate cpu line, ms; -1 when absent.
double steal_ms() {
  char buf[512];
  if (!read_small("/proc/stat", buf, sizeof buf)) return -1;
  unsigned long long v[8] = {};
  if (std::sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                  &v[4], &v[5], &v[6], &v[7]) != 8)
    return -1;
  static const double ms_per_tick = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(v[7]) * ms_per_tick;
}

// Runnable threads per online CPU right now: the fourth field of /proc/loadavg is
// "runnable/total"; -1 when unreadable.
double crowding() {
  char buf[128];
  if (!read_small("/proc/loadavg", buf, sizeof buf)) return -1;
  double l1, l5, l15;
  long runnable = 0;
  if (std::sscanf(buf, "%lf %lf %lf %ld/", &l1, &l5, &l15, &runnable) != 4) return -1;
  static const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 ? static_cast<double>(runnable) / static_cast<double>(cpus) : -1;
}

bool ignore_load() {
  const char* v = std::getenv("CONVTUNE_IGNORE_LOAD");
  if (!v || !*v || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  throw Error(std::string("CONVTUNE_IGNORE_LOAD: expected 0 or 1, got \"") + v + "\"");
}

class SystemEnv final : public MeasureEnv {
 public:
  SystemEnv(const DeviceOps& ops, void* stream)
      : ops_(ops), stream_(stream), ignore_(ignore_load()) {}
  double time_ms(const std::function<void()>& run, std::string_view) override {
    return ops_.time_ms(run, stream_);
  }
  LoadSignals load() override {
    LoadSignals s;
    if (ignore_) return s;
    s.run_delay_ms = run_delay_ms();
    s.steal_ms = steal_ms();
    rusage u{};
    if (getrusage(RUSAGE_SELF, &u) == 0) s.involuntary_switches = u.ru_nivcsw;
    s.crowding = crowding();
    return s;
  }
  void pause(double ms) override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }
  double now_ms() override {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  const DeviceOps& ops_;
  void* stream_;
  bool ignore_;
};

}  // namespace

std::shared_ptr<MeasureEnv> system_env(const DeviceOps& ops, void* stream) {
  return std::make_shared<SystemEnv>(ops, stream);
}

}  // namespace conv::measure
