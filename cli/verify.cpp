// autotune verify: runs each stored winner as a caller does (best_forward, and a Plan with packed
// weights, through the stored choice) and compares the observed time with the stored one. A
// winner observed more than 1.25x slower is marked (its measurement flagged noisy), so the next
// `autotune tune` measures it again.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "buffer.hpp"
#include "cache_flush.hpp"
#include "conv/conv.hpp"
#include "device_ops.hpp"
#include "measure.hpp"
#include "options.hpp"
#include "quoted.hpp"

namespace conv::cli {

namespace {

/// Above this ratio of observed to stored time a winner is marked for re-measuring.
constexpr double kSlower = 1.25;

struct Check {
  std::string layer, path, winner;
  double stored = -1, observed = -1;
  bool noisy = false;  ///< no clean round: the observed time is only an upper bound
  bool marked = false;
};

/// The call timed as the tuner times a candidate (measure::run_rounds: interleaved rounds of
/// batches, the fastest clean round as the estimate, disturbance from the scheduler's
/// statistics), with the data evicted before each call under Timing::cold.
measure::Stats observe(const std::function<void()>& call, const std::function<void()>& evict) {
  call();  // warm-up: the in-process cache, lazily allocated workspaces
  measure::Item item;
  item.label = "verify";
  item.run = call;
  item.before_run = evict;
  return measure::run_rounds({item},
                             *measure::system_env(conv::device_ops(conv::Device::cpu()), nullptr),
                             measure::Policy{})
      .front();
}

}  // namespace

int run_verify(const Common& c, const TuneArgs& t, const MiopenArgs& miopen) {
  const std::vector<conv::ConvProblem> problems = collect_problems(t, miopen);
  const conv::Device device = parse_device(c.device);
  if (device.kind != conv::Device::Kind::cpu)
    throw UsageError("verify: --device " + c.device + ": only cpu so far");
  const std::string fingerprint = device.fingerprint(c.threads, c.timing_mode());
  conv::PerfDb db = conv::PerfDb::open(c.db_path());
  conv::ForwardOptions o;
  o.device = device;
  o.threads = c.threads;
  o.timing = c.timing_mode();
  o.perfdb_path = db.path();
  o.find_mode = conv::FindMode::db_only;  // only what is stored is verified
  std::vector<Check> checks;
  for (const auto& p : problems) {
    const std::string layer = p.name.empty() ? p.key() : p.name;
    conv::AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), b(static_cast<size_t>(p.K) * 4),
        y(p.y_bytes());
    conv::fill_uniform(x.floats(), p.x_elems(), 1);
    conv::fill_uniform(w.floats(), p.w_elems(), 2);
    conv::fill_uniform(b.floats(), p.K, 3);
    const auto evict = [&, cold = o.timing == conv::Timing::cold] {
      if (!cold) return;
      for (const auto* buf : {&x, &w, &b, &y}) conv::flush_from_caches(buf->data(), buf->size());
    };
    for (const conv::ExecPath path : {conv::ExecPath::oneshot, conv::ExecPath::packed}) {
      const auto stored = db.lookup(fingerprint, p.key(), path);
      if (!stored) continue;
      Check k{layer, conv::to_string(path), stored->algo_id + " " + stored->config,
              stored->min_ms > 0 ? stored->min_ms : stored->median_ms};
      try {
        measure::Stats st;
        if (path == conv::ExecPath::oneshot) {
          st = observe(
              [&] { conv::best_forward(p, x.floats(), w.floats(), b.floats(), y.floats(), o); },
              evict);
        } else {
          conv::Plan plan = conv::Plan::create(p, o);
          plan.pack_weights(w.floats());
          st = observe([&] { plan.execute(x.floats(), nullptr, b.floats(), y.floats()); }, evict);
        }
        k.observed = st.min_ms;
        k.noisy = st.noisy();
      } catch (const conv::Error& e) {
        std::cerr << "autotune: verify: " << layer << " (" << k.path << "): " << e.what() << "\n";
        continue;
      }
      // Under load nothing is concluded: the time is only an upper bound.
      if (!k.noisy && k.observed > kSlower * k.stored && !db.read_only()) {
        // The winner's measurement, flagged noisy: `tune` measures noisy rows again.
        for (auto cand : db.candidates(fingerprint, p.key()))
          if (cand.algo_id == stored->algo_id && cand.config == stored->config) {
            cand.quality.noisy = true;
            cand.message = "autotune verify: observed " + std::to_string(k.observed) +
                           " ms, stored " + std::to_string(k.stored) + " ms";
            db.store(fingerprint, p.key(), {cand}, nullptr, nullptr);
            k.marked = true;
          }
      }
      checks.push_back(k);
    }
  }
  if (c.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& k : checks)
      j.push_back({{"layer", k.layer},
                   {"path", k.path},
                   {"winner", k.winner},
                   {"stored_ms", k.stored},
                   {"observed_ms", k.observed},
                   {"ratio", k.observed / k.stored},
                   {"noisy", k.noisy},
                   {"marked", k.marked}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%-28s %-8s %-34s %10s %12s %7s  %s\n", "layer", "path", "winner", "stored ms",
              "observed ms", "ratio", "verdict");
  int marked = 0;
  for (const auto& k : checks) {
    std::printf("%-28.28s %-8s %-34.34s %10.3f %12.3f %6.2fx  %s\n", conv::escaped(k.layer).c_str(),
                k.path.c_str(), k.winner.c_str(), k.stored, k.observed, k.observed / k.stored,
                k.marked  ? "slower: marked, the next tune measures it again"
                : k.noisy ? "noisy: measured only under load, nothing concluded"
                          : "ok");
    marked += k.marked;
  }
  std::printf(
      "%zu stored winner(s) verified (%s timing, called as a caller does and timed as "
      "the tuner times candidates), %d marked\n",
      checks.size(), conv::to_string(o.timing), marked);
  return 0;
}

}  // namespace conv::cli
