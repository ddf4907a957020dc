// The tuner: measure every applicable (algorithm, config) on one problem, check each output
// against a trusted result, and pick the fastest correct one (cuDNN's "find", MIOpen's find db).
#include "conv/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "buffer.hpp"
#include "device_ops.hpp"
#include "reference/reference.hpp"

namespace conv {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool matches_pattern(std::string_view id, const std::string& pattern) {
  if (pattern.empty()) return true;
  std::stringstream ss(pattern);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty() && id.find(part) != std::string_view::npos) return true;
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string mib(size_t bytes) {
  if (bytes < 1048576) return std::to_string(bytes) + " bytes";
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << bytes / 1048576.0 << " MiB";
  return s.str();
}

// The trusted output y_ref and the magnitudes sum|x*w| + |bias| every candidate is judged by.
struct Trusted {
  std::vector<double> y, abs;
  std::string source;
};

Trusted trusted_result(const ConvProblem& p, const float* x, const float* w, const float* b,
                       const TuneOptions& o, int threads) {
  Trusted t;
  t.y.resize(p.y_elems());
  t.abs.resize(p.y_elems());
  if (p.flops() <= o.reference_max_flops) {
    ref::forward(p, x, w, b, t.y.data(), t.abs.data(), threads);
    t.source = "float64 reference";
    return t;
  }
  // Too big for the reference: cpu.im2col_gemm gives y, and the same GEMM on |x|, |w|, |b| gives
  // the magnitudes (all terms non-negative, so its own rounding is relative and tiny).
  const Algorithm* gemm = find_algorithm("cpu.im2col_gemm");
  const std::string cfg = gemm->configs(p).front();
  AlignedBuffer ws(gemm->workspace_bytes(p, cfg)), y(p.y_bytes());
  AlignedBuffer ax(p.x_bytes()), aw(p.w_bytes()), ab(p.K * 4);
  for (int64_t i = 0; i < p.x_elems(); ++i) ax.floats()[i] = std::fabs(x[i]);
  for (int64_t i = 0; i < p.w_elems(); ++i) aw.floats()[i] = std::fabs(w[i]);
  for (int64_t i = 0; i < p.K; ++i) ab.floats()[i] = std::fabs(b[i]);
  ForwardArgs a;
  a.workspace = ws.data();
  a.workspace_size = ws.size();
  a.threads = threads;
  a.y = y.floats();
  a.x = x, a.w = w, a.bias = b;
  gemm->forward(p, cfg, a);
  for (int64_t i = 0; i < p.y_elems(); ++i) t.y[i] = y.floats()[i];
  a.x = ax.floats(), a.w = aw.floats(), a.bias = ab.floats();
  gemm->forward(p, cfg, a);
  for (int64_t i = 0; i < p.y_elems(); ++i) t.abs[i] = y.floats()[i];
  t.source = "cpu.im2col_gemm";
  return t;
}

// Inputs on the tuning device, generated once per problem.
struct DeviceTensors {
  DeviceBuffer x, w, b, y;
};

// Runs `run` warmup_runs times, then until min_runs and min_time_ms are both reached (or the
// deadline passes, after at least one timed run); returns the per-run times.
std::vector<double> time_runs(const DeviceOps& ops, const std::function<void()>& run,
                              const TuneOptions& o, Clock::time_point deadline, void* stream) {
  for (int i = 0; i < o.warmup_runs; ++i) run();
  ops.synchronize(stream);
  std::vector<double> times;
  double total = 0;
  while (times.empty() || ((static_cast<int>(times.size()) < o.min_runs || total < o.min_time_ms) &&
                           Clock::now() < deadline && times.size() < 100000)) {
    times.push_back(ops.time_ms(run, stream));
    total += times.back();
  }
  return times;
}

// The stored measurement of (algo, config) when its status is final.
const PerfCandidate* final_measurement(const std::vector<PerfCandidate>& measured,
                                       const std::string& algo, const std::string& config) {
  for (const auto& m : measured)
    if (m.algo_id == algo && m.config == config && (m.status == "ok" || m.status == "rejected"))
      return &m;
  return nullptr;
}

// A stored measurement as a candidate of this run; `now` has this run's workspace and bound.
CandidateResult from_record(const PerfCandidate& m, CandidateResult now) {
  CandidateResult c = std::move(now);
  c.status = m.status;
  c.message = m.message;
  c.median_ms = m.median_ms, c.min_ms = m.min_ms, c.max_ms = m.max_ms;
  c.packed_median_ms = m.packed_median_ms;
  c.max_error = m.max_error;
  c.from_perfdb = true;
  return c;
}

}  // namespace

double CandidateResult::gflops(const ConvProblem& p) const {
  return median_ms > 0 ? p.flops() / (median_ms * 1e6) : 0;
}

const CandidateResult* TuneResult::find(const std::string& algo_id) const {
  const CandidateResult* best = nullptr;
  for (const auto& c : candidates)
    if (c.algo_id == algo_id && c.status == "ok" && (!best || c.median_ms < best->median_ms))
      best = &c;
  return best;
}

std::vector<PerfCandidate> TuneResult::to_records() const {
  std::vector<PerfCandidate> out;
  for (const auto& c : candidates) {
    PerfCandidate r;
    r.algo_id = c.algo_id;
    r.config = c.config;
    r.status = c.status;
    r.median_ms = c.median_ms;
    r.min_ms = c.min_ms;
    r.max_ms = c.max_ms;
    r.packed_median_ms = c.packed_median_ms;
    r.max_error = c.max_error;
    r.workspace_bytes = static_cast<double>(c.workspace_bytes);
    r.message = c.message;
    out.push_back(r);
  }
  return out;
}

TuneResult tune(const ConvProblem& p, const TuneOptions& o, const TuneProgress& progress) {
  p.validate();
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double, std::milli>(o.budget_ms));
  const DeviceOps& ops = device_ops(o.device);
  const int threads = resolve_threads(o.threads);
  const Device::Kind kind = o.device.kind;

  TuneResult r;
  r.problem = p;
  r.fingerprint = ops.fingerprint(threads);

  // Fresh random data on the host first: a problem too big for memory fails here, before any
  // algorithm is asked about it.
  AlignedBuffer hx(p.x_bytes()), hw(p.w_bytes()), hb(p.K * 4), hy(p.y_bytes()), poison(p.y_bytes());
  fill_uniform(hx.floats(), p.x_elems(), o.seed);
  fill_uniform(hw.floats(), p.w_elems(), o.seed + 1);
  fill_uniform(hb.floats(), p.K, o.seed + 2);
  poison_nan(poison.floats(), p.y_elems());
  // Candidates: every applicable algorithm x config of the registry view for this device.
  struct Pending {
    const Algorithm* algo;
    std::string config;
  };
  std::vector<Pending> pending;
  const auto view = registry();
  auto on_device = [&](const std::vector<const Algorithm*>& v) {
    return std::count_if(v.begin(), v.end(), [&](auto* a) { return a->device() == kind; });
  };
  bool filtered = on_device(view) != on_device(all_algorithms());  // CONVTUNE_DISABLE
  for (const Algorithm* a : view) {
    if (a->device() != kind) continue;
    if (!matches_pattern(a->id(), o.algo_pattern)) {
      filtered = true;
      r.not_applicable.push_back({std::string(a->id()), "excluded by --algo " + o.algo_pattern});
      continue;
    }
    Applicability ok = a->applicable(p);
    if (!ok.ok) {
      r.not_applicable.push_back({std::string(a->id()), ok.reason});
      continue;
    }
    for (auto& c : a->configs(p)) pending.push_back({a, c});
  }

  Trusted trusted;
  if (o.check && !pending.empty())
    trusted = trusted_result(p, hx.floats(), hw.floats(), hb.floats(), o, threads);
  r.reference = o.check ? trusted.source : "none (check disabled)";

  DeviceTensors d;
  if (!pending.empty()) {
    d.x = DeviceBuffer(ops, p.x_bytes());
    d.w = DeviceBuffer(ops, p.w_bytes());
    d.b = DeviceBuffer(ops, p.K * 4);
    d.y = DeviceBuffer(ops, p.y_bytes());
    ops.upload(d.x.data(), hx.data(), p.x_bytes(), nullptr);
    ops.upload(d.w.data(), hw.data(), p.w_bytes(), nullptr);
    ops.upload(d.b.data(), hb.data(), p.K * 4, nullptr);
    ops.synchronize(nullptr);
  }

  for (size_t i = 0; i < pending.size(); ++i) {
    const Algorithm& algo = *pending[i].algo;
    CandidateResult c;
    c.algo_id = std::string(algo.id());
    c.config = pending[i].config;
    try {
      c.workspace_bytes = algo.workspace_bytes(p, c.config);
      c.error_bound = algo.error_bound(p, c.config);
      const PerfCandidate* stored = final_measurement(o.measured, c.algo_id, c.config);
      if (c.workspace_bytes > o.workspace_limit) {
        c.status = "skipped";
        c.message =
            "workspace " + mib(c.workspace_bytes) + " exceeds the limit " + mib(o.workspace_limit);
      } else if (stored) {
        c = from_record(*stored, c);
      } else if (Clock::now() >= deadline) {
        c.status = "skipped";
        c.message = "time budget of " + std::to_string(static_cast<long>(o.budget_ms)) +
                    " ms for this problem used up";
      } else {
        DeviceBuffer ws(ops, c.workspace_bytes);
        ForwardArgs a;
        a.x = d.x.floats(), a.w = d.w.floats(), a.bias = d.b.floats(), a.y = d.y.floats();
        a.workspace = ws.data(), a.workspace_size = c.workspace_bytes;
        a.threads = threads;
        auto run = [&] { algo.forward(p, c.config, a); };

        // One checked run on a NaN-poisoned output, so unwritten outputs are caught too. The
        // gate is the algorithm's contract: the error normalized by its own error scale.
        std::vector<double> scale;
        if (o.check)
          scale =
              error_scale(algo, p, c.config, hx.floats(), hw.floats(), trusted.abs.data(), threads);
        auto check_output = [&]() -> double {
          ops.upload(d.y.data(), poison.data(), p.y_bytes(), nullptr);
          run();
          ops.download(hy.data(), d.y.data(), p.y_bytes(), nullptr);
          ops.synchronize(nullptr);
          auto rel = ref::compare(p.y_elems(), hy.floats(), trusted.y.data(), trusted.abs.data());
          c.max_rel_error = std::max(c.max_rel_error, rel.max_error);
          return ref::compare(p.y_elems(), hy.floats(), trusted.y.data(), scale.data()).max_error;
        };
        if (o.check) c.max_error = check_output();
        if (o.check && !(c.max_error <= c.error_bound)) {
          c.status = "rejected";
          std::ostringstream s;
          s << "max error " << c.max_error << " exceeds its bound " << c.error_bound << " (vs "
            << trusted.source << ")";
          c.message = s.str();
        } else {
          auto times = time_runs(ops, run, o, deadline, nullptr);
          c.runs = static_cast<int>(times.size());
          c.median_ms = median(times);
          c.min_ms = *std::min_element(times.begin(), times.end());
          c.max_ms = *std::max_element(times.begin(), times.end());
          // The Plan path: weights packed once, then only the packed forward is timed.
          const size_t packed_bytes = algo.packed_weights_bytes(p, c.config);
          if (packed_bytes > 0) {
            DeviceBuffer pw(ops, packed_bytes);
            algo.pack_weights(p, c.config, d.w.floats(), pw.data(), threads);
            a.packed_weights = pw.data();
            a.w = nullptr;
            const double packed_error = o.check ? check_output() : 0;
            c.max_error = std::max(c.max_error, packed_error);
            if (o.check && !(packed_error <= c.error_bound)) {
              c.status = "rejected";
              std::ostringstream s;
              s << "with packed weights: max error " << packed_error << " exceeds its bound "
                << c.error_bound;
              c.message = s.str();
            } else {
              c.packed_median_ms = median(time_runs(ops, run, o, deadline, nullptr));
            }
          }
        }
      }
    } catch (const std::exception& e) {
      c.status = "failed";
      c.message = e.what();
    }
    r.candidates.push_back(c);
    if (progress) progress(i, pending.size(), r.candidates.back());
  }

  r.complete = !filtered && std::all_of(r.candidates.begin(), r.candidates.end(), [](auto& c) {
    return c.status == "ok" || c.status == "rejected";
  });
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    if (c.status != "ok") continue;
    if (r.winner < 0 || c.median_ms < r.candidates[r.winner].median_ms)
      r.winner = static_cast<int>(i);
    auto plan_ms = [](const CandidateResult& x) {
      return x.packed_median_ms >= 0 ? x.packed_median_ms : x.median_ms;
    };
    if (r.packed_winner < 0 || plan_ms(c) < plan_ms(r.candidates[r.packed_winner]))
      r.packed_winner = static_cast<int>(i);
  }
  r.elapsed_ms = ms_since(t0);
  return r;
}

void store_result(PerfDb& db, const TuneResult& r) {
  auto winner = [&](int i, bool packed) -> std::optional<PerfWinner> {
    if (i < 0) return std::nullopt;
    const auto& c = r.candidates[i];
    PerfWinner w;
    w.algo_id = c.algo_id;
    w.config = c.config;
    w.median_ms = packed && c.packed_median_ms >= 0 ? c.packed_median_ms : c.median_ms;
    w.version = version();
    return w;
  };
  std::optional<PerfWinner> one, packed;
  if (r.complete) one = winner(r.winner, false), packed = winner(r.packed_winner, true);
  auto fresh = r.to_records();  // minus what came from the database, already stored
  for (size_t i = r.candidates.size(); i-- > 0;)
    if (r.candidates[i].from_perfdb) fresh.erase(fresh.begin() + static_cast<ptrdiff_t>(i));
  db.store(r.fingerprint, r.problem.key(), fresh, one ? &*one : nullptr,
           packed ? &*packed : nullptr);
}

}  // namespace conv
