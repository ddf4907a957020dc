// conv::verify: each stored winner run as a caller runs it, timed as the tuner times candidates,
// against its stored time (issue 60: the tuned time is the time callers get).
#include <functional>
#include <optional>
#include <vector>

#include "buffer.hpp"
#include "cache_flush.hpp"
#include "conv/conv.hpp"
#include "device_ops.hpp"
#include "measure.hpp"

namespace conv {

namespace {

/// Above this ratio of observed to stored time a winner is marked for re-measuring.
constexpr double kSlower = 1.25;

measure::Stats observe(const std::function<void()>& call, const std::function<void()>& evict) {
  call();  // warm-up: the in-process cache, lazily allocated workspaces
  measure::Item item;
  item.label = "verify";
  item.run = call;
  item.before_run = evict;
  return measure::run_rounds({item}, *measure::system_env(device_ops(Device::cpu()), nullptr),
                             measure::Policy{})
      .front();
}

/// Flags the winner's candidate row noisy (with the reason), which tune() measures again.
bool mark(PerfDb& db, const std::string& fingerprint, const Verification& v) {
  for (auto c : db.candidates(fingerprint, v.problem.key()))
    if (c.algo_id == v.algo_id && c.config == v.config) {
      c.quality.noisy = true;
      c.message = "verify: observed " + std::to_string(v.observed_ms) + " ms, stored " +
                  std::to_string(v.stored_ms) + " ms";
      db.store(fingerprint, v.problem.key(), {c}, nullptr, nullptr);
      return true;
    }
  return false;
}

}  // namespace

std::vector<Verification> verify(const std::vector<ConvProblem>& problems,
                                 const ForwardOptions& options) {
  if (options.device.kind != Device::Kind::cpu)
    throw Error("verify: device " + options.device.name() + ": only cpu so far");
  ForwardOptions o = options;
  o.find_mode = FindMode::db_only;  // only what is stored is verified
  if (o.perfdb_path.empty()) o.perfdb_path = PerfDb::default_path();
  PerfDb db = PerfDb::file_exists(o.perfdb_path) ? [&] {
    try {
      return PerfDb::open(o.perfdb_path);
    } catch (const Error&) {  // not writable: verified, nothing marked
      return PerfDb::open(o.perfdb_path, true);
    }
  }()
                                                 : PerfDb::open(o.perfdb_path, true);
  const int threads = resolve_threads(o.threads);
  const std::string fingerprint = o.device.fingerprint(threads, o.timing);
  std::optional<PrivateCacheSweep> sweep;
  if (o.timing == Timing::warm) sweep.emplace(threads);
  std::vector<Verification> out;
  for (const ConvProblem& p : problems) {
    p.validate();
    AlignedBuffer x(p.x_bytes()), w(p.w_bytes()), b(static_cast<size_t>(p.K) * 4), y(p.y_bytes());
    fill_uniform(x.floats(), p.x_elems(), 1);
    fill_uniform(w.floats(), p.w_elems(), 2);
    fill_uniform(b.floats(), p.K, 3);
    const auto evict = [&] {
      if (sweep) return (*sweep)();
      if (o.timing != Timing::cold) return;
      for (const auto* buf : {&x, &w, &b, &y}) flush_from_caches(buf->data(), buf->size());
    };
    for (const ExecPath path : {ExecPath::oneshot, ExecPath::packed}) {
      const auto stored = db.lookup(fingerprint, p.key(), path);
      if (!stored) continue;
      Verification v;
      v.problem = p;
      v.path = path;
      v.algo_id = stored->algo_id, v.config = stored->config;
      v.stored_ms = stored->min_ms > 0 ? stored->min_ms : stored->median_ms;
      try {
        measure::Stats st;
        if (path == ExecPath::oneshot) {
          st = observe([&] { best_forward(p, x.floats(), w.floats(), b.floats(), y.floats(), o); },
                       evict);
        } else {
          Plan plan = Plan::create(p, o);
          plan.pack_weights(w.floats());
          st = observe([&] { plan.execute(x.floats(), nullptr, b.floats(), y.floats()); }, evict);
        }
        v.observed_ms = st.min_ms;
        v.noisy = st.noisy();
      } catch (const Error& e) {  // e.g. a stored winner this build does not have
        v.error = e.what();
      }
      // Under load nothing is concluded: the time is only an upper bound.
      if (v.error.empty() && !v.noisy && v.observed_ms > kSlower * v.stored_ms && !db.read_only())
        v.marked = mark(db, fingerprint, v);
      out.push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace conv
