// Thread scaling of each layer's fastest own kernel (issue 12: >= 1.8x from 1 to 2 threads on
// the VGG layers), with cpu.onednn's fastest config beside it as the yardstick of what the
// machine allows (both share the memory bandwidth of the two cores).
//
// Per distinct problem of the batch files: conv::tune with 2 threads (checked against the
// reference) picks the fastest own candidate (any algorithm but cpu.onednn) and cpu.onednn's
// fastest config, ranked as the tuner ranks them (fastest clean one-shot round); then each of the
// two runs `calls` times with 1 thread and with 2 threads alternating call by call, so a load burst
// on the shared machine hits both thread counts alike. Scaling = median 1-thread ms / median
// 2-thread ms (the fastest calls' ratio beside it).
//
// Usage: bench_scaling [--calls N] [--algo PATTERN] BATCH_FILE...
//   --calls N        timed calls per thread count and kernel (default 24)
//   --algo PATTERN   tune only algorithms whose id contains one of these comma-separated
//                    substrings (cpu.onednn is always added as the yardstick)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/conv.hpp"
#include "conv/error.hpp"
#include "conv/tuner.hpp"

namespace {

struct Scaling {
  double ms1 = 0, ms2 = 0, min1 = 0, min2 = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Alternates 1- and 2-thread calls of one candidate.
Scaling measure(const conv::ConvProblem& p, const conv::CandidateResult& c, int calls,
                const conv::AlignedBuffer& x, const conv::AlignedBuffer& w,
                const conv::AlignedBuffer& b, conv::AlignedBuffer& y) {
  const conv::Algorithm* algo = conv::find_algorithm(c.algo_id);
  conv::AlignedBuffer ws(std::max<size_t>(64, algo->workspace_bytes(p, c.config)));
  auto run = [&](int threads) {
    const auto t0 = std::chrono::steady_clock::now();
    conv::forward(c.algo_id, c.config, p, x.floats(), w.floats(), b.floats(), y.floats(), ws.data(),
                  ws.size(), threads);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  run(1);  // warm-up: thread pools, caches, page faults
  run(2);
  // Blocks of kBlock timed calls at each thread count in turn, each block after an untimed
  // call, so that the timed calls find the machine as a program running at that count does.
  // Switching counts costs the next few calls (vgg16 conv4_2 Winograd m4 under the AVX2 cap,
  // 2 threads: 11.3 ms straight after a 1-thread call, 9.1 ms after one 2-thread call, 8.7 ms
  // after three, 8.4 ms back to back): the second core has idled for a whole 1-thread call,
  // and its OpenMP thread slept (with OMP_WAIT_POLICY=active, 9.6 ms straight after).
  constexpr int kBlock = 4;
  std::vector<double> t1, t2;
  for (int i = 0; i < calls; i += kBlock)
    for (int threads : {1, 2}) {
      run(threads);
      for (int j = i; j < std::min(calls, i + kBlock); ++j)
        (threads == 1 ? t1 : t2).push_back(run(threads));
    }
  return {median(t1), median(t2), *std::min_element(t1.begin(), t1.end()),
          *std::min_element(t2.begin(), t2.end())};
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_scaling [--calls N (1-100000)] [--algo PATTERN] BATCH_FILE...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 24;
  std::string pattern;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--calls" && i + 1 < argc) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 100000) return usage();
      calls = static_cast<int>(v);
    } else if (a == "--algo" && i + 1 < argc) {
      pattern = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage();
  try {
    std::set<std::string> seen;
    double log_own = 0, log_vendor = 0;
    int n_own = 0, n_vendor = 0;
    for (const std::string& f : files)
      for (const conv::ConvProblem& p : conv::read_batch_file(f)) {
        if (!seen.insert(p.key()).second) continue;
        conv::TuneOptions o;
        o.threads = 2;
        o.algo_pattern = pattern.empty() ? "" : pattern + ",cpu.onednn";
        const conv::TuneResult r = conv::tune(p, o);
        if (seen.size() == 1) {
          std::printf("device %s\n", r.fingerprint.c_str());
          std::printf("%-24s %-34s %8s %8s %6s %6s  %-18s %6s\n", "layer",
                      "own fastest (2 threads)", "1t ms", "2t ms", "scale", "(min)", "cpu.onednn",
                      "scale");
        }
        const conv::CandidateResult* own = nullptr;
        for (const conv::CandidateResult& c : r.candidates)
          if (c.status == conv::CandidateStatus::ok && c.algo_id != "cpu.onednn" &&
              (!own || c.min_ms < own->min_ms))
            own = &c;
        const conv::CandidateResult* vendor = r.find("cpu.onednn");
        if (!own) {
          std::printf("%-24s (no correct own candidate)\n", p.name.c_str());
          continue;
        }
        conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), b(p.K * sizeof(float)), y(p.y_bytes());
        conv::fill_uniform(x.floats(), p.x_elems(), 1);
        conv::fill_uniform(w.floats(), p.w_elems(), 2);
        conv::fill_uniform(b.floats(), p.K, 3);
        const Scaling s = measure(p, *own, calls, x, w, b, y);
        const std::string name = own->algo_id + " " + own->config;
        std::printf("%-24s %-34s %8.3f %8.3f %6.2f %6.2f", p.name.c_str(), name.c_str(), s.ms1,
                    s.ms2, s.ms1 / s.ms2, s.min1 / s.min2);
        log_own += std::log(s.ms1 / s.ms2), ++n_own;
        if (vendor) {
          const Scaling v = measure(p, *vendor, calls, x, w, b, y);
          std::printf("  %-18s %6.2f", vendor->config.c_str(), v.ms1 / v.ms2);
          log_vendor += std::log(v.ms1 / v.ms2), ++n_vendor;
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    if (n_own)
      std::printf("geometric mean scaling 1 -> 2 threads: own %.2fx over %d layers",
                  std::exp(log_own / n_own), n_own);
    if (n_vendor) std::printf(", cpu.onednn %.2fx", std::exp(log_vendor / n_vendor));
    std::printf("\n");
  } catch (const conv::Error& e) {
    std::fprintf(stderr, "bench_scaling: %s\n", e.what());
    return 2;
  }
  return 0;
}
