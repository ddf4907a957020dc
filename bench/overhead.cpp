// Measures what best_forward adds over conv::forward of the same algorithm and config on a
// problem whose winner is already known in this process (the in-process cache hit path).
// Usage: bench_overhead [DESCRIPTOR] [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "buffer.hpp"
#include "conv/conv.hpp"

int main(int argc, char** argv) {
  const std::string desc = argc > 1 ? argv[1] : "mb1ic4ih4oc4kh1n\"tiny\"";
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20000;
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

  using Clock = std::chrono::steady_clock;
  auto per_call_us = [&](auto&& call) {
    std::vector<double> rounds;
    for (int r = 0; r < 7; ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) call();
      rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                       iters);
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
  };
  conv::ForwardArgs args;
  args.x = x.floats(), args.w = w.floats(), args.bias = b.floats(), args.y = y.floats();
  args.workspace = ws.data(), args.workspace_size = ws.size(), args.threads = 1;
  const double raw = per_call_us([&] { algo->forward(p, choice.config, args); });
  const double direct = per_call_us([&] {
    conv::forward(choice.algo_id, choice.config, p, x.floats(), w.floats(), b.floats(), y.floats(),
                  ws.data(), ws.size(), 1);
  });
  const double best = per_call_us(
      [&] { conv::best_forward(p, x.floats(), w.floats(), b.floats(), y.floats(), o); });
  std::printf("problem %s, winner %s %s\n", p.key().c_str(), choice.algo_id.c_str(),
              choice.config.c_str());
  std::printf("Algorithm::forward (kernel + checks)  %8.3f us/call (median of 7 rounds of %d)\n",
              raw, iters);
  std::printf("conv::forward (validates its arguments) %8.3f us/call\n", direct);
  std::printf("conv::best_forward                   %8.3f us/call\n", best);
  std::printf("best_forward overhead over forward()  %8.3f us/call\n", best - raw);
  std::filesystem::remove(o.perfdb_path);
  return 0;
}
