// Measures what best_forward adds over conv::forward of the same algorithm and config on a
// problem whose winner is already known in this process (the in-process cache hit path).
// Usage: bench_overhead [DESCRIPTOR] [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/conv.hpp"

namespace {

int run(int argc, char** argv) {
  const std::string desc = argc > 1 ? argv[1] : "mb1ic4ih4oc4kh1n\"tiny\"";
  char* end = nullptr;
  const long iters = argc > 2 ? std::strtol(argv[2], &end, 10) : 20000;
  if (argc > 2 && (*end != '\0' || iters < 1 || iters > 100000000)) {
    std::fprintf(stderr,
                 "bench_overhead: iterations: expected an integer in [1, 1e8], got \"%s\"\n",
                 argv[2]);
    return 1;
  }
  const conv::ConvProblem p = conv::parse_descriptor(desc);
  conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), b(p.K * 4), y(p.y_bytes());
  conv::fill_uniform(x.floats(), p.x_elems(), 1);
  conv::fill_uniform(w.floats(), p.w_elems(), 2);
  conv::fill_uniform(b.floats(), p.K, 3);

  conv::ForwardOptions o;
  o.threads = 1;
  o.perfdb_path =
      (std::filesystem::temp_directory_path() / "convtune-bench-overhead.sqlite").string();
  const auto choice = conv::best_forward(p, x.floats(), w.floats(), b.floats(), y.floats(), o);
  const conv::Algorithm* algo = conv::find_algorithm(choice.algo_id);
  conv::AlignedBuffer ws(algo->workspace_bytes(p, choice.config));

  conv::ForwardArgs args;
  args.x = x.floats(), args.w = w.floats(), args.bias = b.floats(), args.y = y.floats();
  args.workspace = ws.data(), args.workspace_size = ws.size(), args.threads = 1;
  // The three calls take turns round by round, and the overhead is the median of each round's
  // difference: medians taken apart had come out negative when the load changed between them.
  const std::vector<std::function<void()>> calls = {
      [&] { algo->forward(p, choice.config, args); },
      [&] {
        conv::forward(choice.algo_id, choice.config, p, x.floats(), w.floats(), b.floats(),
                      y.floats(), ws.data(), ws.size(), 1);
      },
      [&] { conv::best_forward(p, x.floats(), w.floats(), b.floats(), y.floats(), o); }};
  constexpr int kRounds = 15;
  std::vector<std::vector<double>> us(calls.size());
  std::vector<double> overhead;
  for (int r = 0; r < kRounds; ++r) {
    for (size_t c = 0; c < calls.size(); ++c) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < iters; ++i) calls[c]();
      us[c].push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          static_cast<double>(iters));
    }
    overhead.push_back(us[2].back() - us[0].back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("problem %s, winner %s %s\n", p.key().c_str(), choice.algo_id.c_str(),
              choice.config.c_str());
  std::printf("Algorithm::forward (kernel + checks)  %8.3f us/call (median of %d rounds of %ld)\n",
              median(us[0]), kRounds, iters);
  std::printf("conv::forward (validates its arguments) %8.3f us/call\n", median(us[1]));
  std::printf("conv::best_forward                   %8.3f us/call\n", median(us[2]));
  const double extra = median(overhead);
  std::printf("best_forward overhead over forward()  %8.3f us/call%s\n", extra,
              extra < 0 ? " (below the noise of this machine)" : "");
  std::filesystem::remove(o.perfdb_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const conv::Error& e) {
    std::fprintf(stderr, "bench_overhead: %s\n", e.what());
    return 2;
  }
}
