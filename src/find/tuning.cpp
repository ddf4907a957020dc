// tune(): the steps of one tune (collect the candidates, prepare the inputs and the trusted
// result, check each candidate once, time those that passed in interleaved rounds, choose the
// winners), as cuDNN's "find" and MIOpen's find db measure.
#include "conv/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "buffer.hpp"
#include "cache_flush.hpp"
#include "device_ops.hpp"
#include "measure.hpp"
#include "quoted.hpp"
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

// Byte counts as text; a double, since estimates can exceed size_t (an output of 10^9 x 10^9).
std::string mib(double bytes) {
  if (bytes < 1048576) return std::to_string(static_cast<size_t>(bytes)) + " bytes";
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << bytes / 1048576.0 << " MiB";
  return s.str();
}

// This machine's memory in bytes, 0 when unknown.
double host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0;
}

// Refuses a problem whose host tensors alone would not fit in this machine's memory: allocation
// succeeds lazily on Linux, so such a problem would page for minutes and past any --budget before
// it failed or was killed.
void check_host_memory(const ConvProblem& p, const TuneOptions& o) {
  // x, w, y, the NaN poison y, and the trusted y and magnitudes in float64: a lower bound.
  double need =
      static_cast<double>(p.x_bytes()) + p.w_bytes() + 2.0 * p.y_bytes() + 16.0 * p.y_elems();
  // Checked by cpu.im2col_gemm (trusted_result): its im2col workspace, |x|, |w| and its y too.
  if (o.check && p.flops() > o.reference_max_flops) {
    const Algorithm* gemm = find_algorithm("cpu.im2col_gemm");
    need += static_cast<double>(gemm->workspace_bytes(p, gemm->configs(p).front())) + p.x_bytes() +
            p.w_bytes() + p.y_bytes();
  }
  const double have = host_memory_bytes();
  if (have > 0 && need > 0.75 * have)
    throw Error(
        "problem: tuning it needs at least " + mib(need) +
        " of host memory for its tensors and the reference result they are checked against, "
        "more than 3/4 of this machine's " +
        mib(have));
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
  // the magnitudes (all terms non-negative, so its own rounding is relative and tiny). Two GEMMs
  // that even at 256 GFLOP/s per thread (beyond any core's fp32 FMA peak today) outlast the
  // budget are refused here, rather than run past it with every candidate skipped after them.
  const double lower_bound_ms = 2 * p.flops() / (256e9 * std::max(1, threads)) * 1e3;
  if (lower_bound_ms > o.budget_ms) {
    std::ostringstream m;
    m.precision(3);
    m << "budget: checking this problem needs two float32 GEMMs of " << p.flops() / 1e9
      << " GFLOP (cpu.im2col_gemm: the float64 reference checks problems up to "
      << o.reference_max_flops / 1e9 << " GFLOP), at least " << lower_bound_ms / 1e3 << " s on "
      << std::max(1, threads) << " thread(s), more than the budget of " << o.budget_ms / 1e3
      << " s: raise the budget";
    throw Error(m.str());
  }
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

// The stored measurement of (algo, config) when it is final: made by the algorithm's current
// version, and "rejected", or "ok" with a time and measured clean at least once (a noisy one is
// measured again).
const PerfCandidate* final_measurement(const std::vector<PerfCandidate>& measured,
                                       const Algorithm& algo, const std::string& config) {
  for (const auto& m : measured)
    if (m.algo_id == algo.id() && m.config == config && m.algo_version == algo.version() &&
        (m.status == CandidateStatus::rejected ||
         (m.status == CandidateStatus::ok && !m.quality.noisy && m.median_ms >= 0)))
      return &m;
  return nullptr;
}

// A stored measurement as a candidate of this run; `now` has this run's workspace and bound.
CandidateResult from_record(const PerfCandidate& m, CandidateResult now) {
  CandidateResult c = std::move(now);
  c.status = m.status;
  c.message = m.message;
  c.median_ms = m.median_ms, c.max_ms = m.max_ms;
  c.min_ms = m.min_ms >= 0 ? m.min_ms : m.median_ms;
  c.packed_median_ms = m.packed_median_ms;
  c.packed_min_ms = m.packed_min_ms >= 0 ? m.packed_min_ms : m.packed_median_ms;
  c.max_error = m.max_error;
  c.quality = m.quality;
  c.from_perfdb = true;
  return c;
}

// Packed weights of the candidates being timed are kept between rounds up to this much memory;
// beyond it a candidate packs again (untimed) before each of its rounds.
constexpr size_t kKeepPackedBytes = size_t{1} << 30;

// One candidate on one path, as the timing rounds see it.
struct Timed {
  const Algorithm* algo = nullptr;
  size_t candidate = 0;
  bool packed = false;
  size_t packed_bytes = 0;      // of the packed weights, when packed
  DeviceBuffer packed_weights;  // kept packed weights, or empty when packing into the scratch
  std::string failure;          // what it threw while being timed
  double check_ms = 0;          // how long its checked run took (0: not checked)
  double evict_ms = -1;         // how long evicting its data takes (-1: not known yet)
};

// Throws conv::Error naming the first option out of its range (see tune()'s documentation).
void check_options(const TuneOptions& o) {
  // A typo would otherwise tune a silently smaller (or empty) set.
  if (std::string part = unknown_algo_pattern_part(o.algo_pattern); !part.empty())
    throw Error("algo (TuneOptions::algo_pattern): " + conv::quoted(part) +
                " is part of no registered algorithm id");
  if (!o.algo_pattern.empty() && o.algo_pattern.find_first_not_of(',') == std::string::npos)
    throw Error("algo (TuneOptions::algo_pattern): " + conv::quoted(o.algo_pattern) +
                " names no algorithm (comma-separated parts of ids)");
  const auto text = [](double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  };
  // 0: measure nothing, choose among TuneOptions::measured.
  if (!(o.budget_ms >= 0))  // NaN too
    throw Error("budget_ms (TuneOptions::budget_ms): must be >= 0, got " + text(o.budget_ms));
  if (!(o.batch_ms >= 0) || !std::isfinite(o.batch_ms))  // an infinite round would never end
    throw Error("batch_ms (TuneOptions::batch_ms): must be a finite number >= 0, got " +
                text(o.batch_ms));
  // NaN or a negative limit would send every problem, however small, to cpu.im2col_gemm as the
  // reference, which then checked itself.
  if (!(o.reference_max_flops >= 0))
    throw Error("reference_max_flops (TuneOptions::reference_max_flops): must be >= 0, got " +
                text(o.reference_max_flops));
  if (o.min_rounds < 1)
    throw Error("min_rounds (TuneOptions::min_rounds): must be >= 1, got " +
                std::to_string(o.min_rounds));
  if (o.max_rounds < o.min_rounds)
    throw Error("max_rounds (TuneOptions::max_rounds): must be >= min_rounds (" +
                std::to_string(o.min_rounds) + "), got " + std::to_string(o.max_rounds));
}

// One tune of one problem, as the steps tune() takes: collect the candidates, prepare the
// inputs and the trusted result, check each candidate once (one-shot, then packed), time those
// that passed in interleaved rounds, choose the winners.
struct Tuning {
  struct Pending {
    const Algorithm* algo;
    std::string config;
  };

  const ConvProblem& p;
  const TuneOptions& o;
  const Clock::time_point t0 = Clock::now();
  // Longer budgets (infinity included) mean no limit: a century fits the clock's nanoseconds.
  const double budget_ms = std::min(o.budget_ms, 100 * 365.25 * 86400e3);
  const Clock::time_point deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double, std::milli>(budget_ms));
  const DeviceOps& ops = device_ops(o.device);
  // Made before anything is measured, so that a bad CONVTUNE_IGNORE_LOAD stops the tune up
  // front rather than failing every candidate after its check.
  const std::shared_ptr<MeasureEnv> env = o.env ? o.env : measure::system_env(ops, nullptr);
  const int threads = resolve_threads(o.threads);
  const Device::Kind kind = o.device.kind;
  const double host = host_memory_bytes();

  TuneResult r;
  std::vector<Pending> pending;
  bool filtered = false;  // some algorithm of this device was left out (--algo, CONVTUNE_DISABLE)
  AlignedBuffer hx, hw, hb, hy, poison;  // host inputs, the output read back, NaN poison
  Trusted trusted;
  DeviceTensors d;
  DeviceBuffer ws, scratch_packed;  // shared by all candidates: one runs at a time
  size_t kept_packed = 0;
  std::deque<Timed> timed;  // what passed its check, the packed run right after its one-shot
  std::optional<PrivateCacheSweep> sweep;  // Timing::warm on the CPU

  Tuning(const ConvProblem& problem, const TuneOptions& options) : p(problem), o(options) {
    r.problem = p;
    r.fingerprint = o.device.fingerprint(threads, o.timing);
    // Fresh random data on the host first: a problem too big for memory fails here, before any
    // algorithm is asked about it.
    check_host_memory(p, o);
    hx = AlignedBuffer(p.x_bytes()), hw = AlignedBuffer(p.w_bytes());
    hb = AlignedBuffer(p.K * 4), hy = AlignedBuffer(p.y_bytes());
    poison = AlignedBuffer(p.y_bytes());
    fill_uniform(hx.floats(), p.x_elems(), o.seed);
    fill_uniform(hw.floats(), p.w_elems(), o.seed + 1);
    fill_uniform(hb.floats(), p.K, o.seed + 2);
    poison_nan(poison.floats(), p.y_elems());
    if (o.timing == Timing::warm && kind == Device::Kind::cpu) sweep.emplace(threads);
  }

  // Every applicable algorithm x config of the registry view for this device.
  void collect_candidates() {
    const auto view = registry();
    auto on_device = [&](const std::vector<const Algorithm*>& v) {
      return std::count_if(v.begin(), v.end(), [&](auto* a) { return a->device() == kind; });
    };
    filtered = on_device(view) != on_device(all_algorithms());  // CONVTUNE_DISABLE
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
    for (const Algorithm* a : all_algorithms())
      if (a->device() == kind && std::find(view.begin(), view.end(), a) == view.end())
        r.not_applicable.push_back({std::string(a->id()), "disabled by CONVTUNE_DISABLE"});
  }

  // The trusted result and the inputs on the device (only when something is to be measured).
  void prepare_inputs() {
    if (o.check && !pending.empty())
      trusted = trusted_result(p, hx.floats(), hw.floats(), hb.floats(), o, threads);
    r.reference = o.check ? trusted.source : "none (check disabled)";
    if (pending.empty()) return;
    d.x = DeviceBuffer(ops, p.x_bytes());
    d.w = DeviceBuffer(ops, p.w_bytes());
    d.b = DeviceBuffer(ops, p.K * 4);
    d.y = DeviceBuffer(ops, p.y_bytes());
    ops.upload(d.x.data(), hx.data(), p.x_bytes(), nullptr);
    ops.upload(d.w.data(), hw.data(), p.w_bytes(), nullptr);
    ops.upload(d.b.data(), hb.data(), p.K * 4, nullptr);
    ops.synchronize(nullptr);
  }

  ForwardArgs args_for(const Timed& t) const {
    ForwardArgs a;
    a.x = d.x.floats(), a.w = d.w.floats(), a.bias = d.b.floats(), a.y = d.y.floats();
    a.workspace = ws.data(), a.workspace_size = r.candidates[t.candidate].workspace_bytes;
    a.threads = threads;
    if (t.packed) {
      a.packed_weights = t.packed_weights.data() ? t.packed_weights.data() : scratch_packed.data();
      a.w = nullptr;
    }
    return a;
  }

  // Why candidate c is not measured now ("" when it is): over a memory limit, or out of time.
  // A final stored measurement is taken instead (from_record) by the caller.
  std::string why_skipped(const CandidateResult& c) const {
    if (c.workspace_bytes > o.workspace_limit)
      return "workspace " + mib(c.workspace_bytes) + " exceeds the limit " + mib(o.workspace_limit);
    // Linux allocates lazily: a workspace beyond the machine's memory (huge padding makes
    // cpu.direct's padded view 96 GiB for an 8x8 image) would page or be killed, not fail.
    if (kind == Device::Kind::cpu && host > 0 && c.workspace_bytes > 0.75 * host)
      return "workspace " + mib(c.workspace_bytes) + " exceeds 3/4 of this machine's " + mib(host) +
             " of memory";
    return "";
  }

  // Candidate i: its workspace and bound, then one checked run on a NaN-poisoned output (so
  // unwritten outputs are caught too), one-shot and then with packed weights. The gate is the
  // algorithm's contract: the error normalized by its own error scale. What passes is queued
  // for timing; what throws is "failed".
  void check_candidate(size_t i) {
    const Algorithm& algo = *pending[i].algo;
    r.candidates.emplace_back();
    CandidateResult& c = r.candidates.back();
    c.algo_id = std::string(algo.id());
    c.config = pending[i].config;
    try {
      c.workspace_bytes = algo.workspace_bytes(p, c.config);
      c.error_bound = algo.error_bound(p, c.config);
      const PerfCandidate* stored = final_measurement(o.measured, algo, c.config);
      if (std::string why = why_skipped(c); !why.empty()) {
        c.status = CandidateStatus::skipped;
        c.message = why;
      } else if (stored) {
        c = from_record(*stored, c);
      } else if (Clock::now() >= deadline) {
        c.status = CandidateStatus::skipped;
        c.message = "time budget of " + std::to_string(static_cast<long long>(budget_ms)) +
                    " ms for this problem used up";
      } else {
        check_and_queue(algo, i, c);
      }
    } catch (const std::exception& e) {
      c.status = CandidateStatus::failed;
      c.message = e.what();
    }
  }

  void check_and_queue(const Algorithm& algo, size_t i, CandidateResult& c) {
    ws.reserve(ops, c.workspace_bytes);
    Timed oneshot;
    oneshot.algo = &algo;
    oneshot.candidate = i;
    std::vector<double> scale;
    if (o.check)
      scale = error_scale(algo, p, c.config, hx.floats(), hw.floats(), trusted.abs.data(), threads);
    auto check_output = [&](Timed& t) -> double {
      ops.upload(d.y.data(), poison.data(), p.y_bytes(), nullptr);
      const auto start = Clock::now();
      algo.forward(p, c.config, args_for(t));
      ops.download(hy.data(), d.y.data(), p.y_bytes(), nullptr);
      ops.synchronize(nullptr);
      t.check_ms = ms_since(start);
      auto rel = ref::compare(p.y_elems(), hy.floats(), trusted.y.data(), trusted.abs.data());
      c.max_rel_error = std::max(c.max_rel_error, rel.max_error);
      return ref::compare(p.y_elems(), hy.floats(), trusted.y.data(), scale.data()).max_error;
    };
    if (o.check) c.max_error = check_output(oneshot);
    const size_t packed_bytes = algo.packed_weights_bytes(p, c.config);
    if (o.check && !(c.max_error <= c.error_bound)) {
      c.status = CandidateStatus::rejected;
      std::ostringstream s;
      s << "max error " << c.max_error << " exceeds its bound " << c.error_bound << " (vs "
        << trusted.source << ")";
      c.message = s.str();
      return;
    }
    if (packed_bytes == 0) {
      timed.push_back(std::move(oneshot));
      return;
    }
    // The Plan path: weights packed once, then only the packed forward is timed.
    Timed packed;
    packed.algo = &algo;
    packed.candidate = i;
    packed.packed = true;
    packed.packed_bytes = packed_bytes;
    if (kept_packed + packed_bytes <= kKeepPackedBytes) {
      packed.packed_weights = DeviceBuffer(ops, packed_bytes);
      kept_packed += packed_bytes;
    } else {
      scratch_packed.reserve(ops, packed_bytes);
    }
    algo.pack_weights(
        p, c.config, d.w.floats(),
        packed.packed_weights.data() ? packed.packed_weights.data() : scratch_packed.data(),
        threads);
    const double packed_error = o.check ? check_output(packed) : 0;
    c.max_error = std::max(c.max_error, packed_error);
    if (o.check && !(packed_error <= c.error_bound)) {
      c.status = CandidateStatus::rejected;
      std::ostringstream s;
      s << "with packed weights: max error " << packed_error << " exceeds its bound "
        << c.error_bound;
      c.message = s.str();
      return;
    }
    timed.push_back(std::move(oneshot));
    timed.push_back(std::move(packed));
  }

  // Timing::cold: what one run reads and writes leaves every cache level first, as when the
  // layers before it in a network have run; Timing::warm: only the cores' L1 and L2 are swept
  // (GPU: neither yet, its runs stay hot).
  void evict(const Timed& t) const {
    if (sweep) return (*sweep)();
    const ForwardArgs a = args_for(t);
    flush_from_caches(a.x, p.x_bytes());
    flush_from_caches(a.w, a.w ? p.w_bytes() : 0);
    flush_from_caches(a.bias, p.K * 4);
    flush_from_caches(a.y, p.y_bytes());
    flush_from_caches(a.workspace, a.workspace_size);
    if (t.packed) flush_from_caches(a.packed_weights, t.packed_bytes);
  }

  // The interleaved timing rounds of everything that passed its check (measure::run_rounds).
  // Fills the times and their quality; keeps each candidate's lower bound for choose_winners().
  std::vector<double> lower, plan_lower;
  double budget_left_ms() const {
    return std::max(0.0,
                    std::chrono::duration<double, std::milli>(deadline - Clock::now()).count());
  }

  // The timing phase as planned so far: min_rounds rounds of one batch (or one run) per item,
  // with the untimed eviction before each run (timed once per item, here).
  double planned_timing_ms() {
    const bool evicts = o.timing != Timing::hot && kind == Device::Kind::cpu;
    double round = 0;
    for (Timed& t : timed) {
      if (evicts && t.evict_ms < 0) {
        const auto start = Clock::now();
        evict(t);
        t.evict_ms = ms_since(start);
      }
      const double runs = t.check_ms > 0 ? std::max(1.0, std::floor(o.batch_ms / t.check_ms)) : 1;
      round += std::max(o.batch_ms, t.check_ms) + runs * std::max(0.0, t.evict_ms);
    }
    return o.min_rounds * round;
  }

  void time_candidates(const measure::RoundCallback& on_round) {
    std::vector<measure::Item> items;
    for (size_t k = 0; k < timed.size(); ++k) {
      Timed& t = timed[k];
      const CandidateResult& c = r.candidates[t.candidate];
      measure::Item item;
      item.label = c.algo_id + " " + c.config + (t.packed ? " packed" : "");
      item.run = [this, t = &t] {
        if (!t->failure.empty()) return;
        try {
          t->algo->forward(p, r.candidates[t->candidate].config, args_for(*t));
        } catch (const std::exception& e) {
          t->failure = e.what();
        }
      };
      if (o.timing != Timing::hot && kind == Device::Kind::cpu)
        item.before_run = [this, t = &t] { evict(*t); };
      if (t.packed && !t.packed_weights.data())
        item.prepare = [this, t = &t] {
          t->algo->pack_weights(p, r.candidates[t->candidate].config, d.w.floats(),
                                scratch_packed.data(), threads);
        };
      // A one-shot time races on the Plan path too when the candidate has no packed form.
      const bool has_packed = k + 1 < timed.size() && timed[k + 1].packed;
      item.races = t.packed ? measure::kPlan : has_packed ? measure::kOneShot : measure::kBoth;
      items.push_back(std::move(item));
    }
    measure::Policy policy;
    policy.min_rounds = o.min_rounds;
    policy.max_rounds = o.max_rounds;
    policy.batch_ms = o.batch_ms;
    policy.budget_ms = budget_left_ms();
    const auto stats = measure::run_rounds(items, *env, policy, on_round);
    // Lower bounds of the true times (measure::Stats::lower_ms), one-shot and on the Plan path.
    lower.assign(r.candidates.size(), 0), plan_lower.assign(r.candidates.size(), 0);
    for (size_t k = 0; k < timed.size(); ++k) {
      CandidateResult& c = r.candidates[timed[k].candidate];
      const measure::Stats& st = stats[k];
      if (!timed[k].packed) lower[timed[k].candidate] = st.lower_ms;
      plan_lower[timed[k].candidate] = st.lower_ms;
      if (!timed[k].failure.empty()) {
        c.status = CandidateStatus::failed;
        c.message = "while timing: " + timed[k].failure;
        continue;
      }
      MeasureQuality& q = timed[k].packed ? c.packed_quality : c.quality;
      if (timed[k].packed) {
        c.packed_median_ms = st.median_ms;
        c.packed_min_ms = st.min_ms;
      } else {
        c.median_ms = st.median_ms, c.min_ms = st.min_ms, c.max_ms = st.max_ms;
        c.runs = st.runs;
      }
      q.rounds = static_cast<int>(st.samples.size());
      q.clean_rounds = st.clean_rounds;
      q.spread = st.spread;
      if (timed[k].packed) q.noisy = st.noisy();
      c.quality.noisy = c.quality.noisy || st.noisy();
    }
  }

  // The fastest ok candidate per path, whether the result is complete, and whether a noisy
  // candidate makes the decision unsure.
  void choose_winners() {
    r.complete = !filtered && std::all_of(r.candidates.begin(), r.candidates.end(), [](auto& c) {
      return c.status == CandidateStatus::ok || c.status == CandidateStatus::rejected;
    });
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      const auto& c = r.candidates[i];
      if (c.status != CandidateStatus::ok) continue;
      if (r.winner < 0 || c.min_ms < r.candidates[r.winner].min_ms) r.winner = static_cast<int>(i);
      if (r.packed_winner < 0 || c.plan_ms() < r.candidates[r.packed_winner].plan_ms())
        r.packed_winner = static_cast<int>(i);
    }
    // A noisy candidate's time is only an upper bound: unless its lower bound rules it out, it
    // could be faster than the winner, which makes the decision noisy; a noisy winner's own
    // time is uncertain too.
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      const auto& c = r.candidates[i];
      if (c.status != CandidateStatus::ok || !c.quality.noisy) continue;
      if (r.winner >= 0 && lower[i] <= r.candidates[r.winner].min_ms) r.noisy = true;
      if (r.packed_winner >= 0 && plan_lower[i] <= r.candidates[r.packed_winner].plan_ms())
        r.packed_noisy = true;
    }
  }
};

}  // namespace

TuneResult tune(const ConvProblem& p, const TuneOptions& o, const TuneProgress& progress) {
  p.validate();
  check_options(o);
  Tuning t(p, o);
  t.collect_candidates();
  t.prepare_inputs();
  const size_t n = t.pending.size();
  double checks_ms = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto start = Clock::now();
    t.check_candidate(i);
    checks_ms += ms_since(start);
    if (!progress) continue;
    TuneEvent e;
    e.done = i + 1, e.total = n;
    e.candidate = &t.r.candidates[i];
    e.elapsed_ms = ms_since(t.t0);
    // The candidates still unchecked are assumed to pass and run like the checked ones.
    const double share = static_cast<double>(n) / (i + 1);
    e.left_ms = std::min(checks_ms / (i + 1) * (n - i - 1) + t.planned_timing_ms() * share,
                         t.budget_left_ms());
    progress(e);
  }
  measure::RoundCallback on_round;
  if (progress)
    on_round = [&](const measure::RoundReport& round) {
      TuneEvent e;
      e.phase = TuneEvent::Phase::time;
      e.done = static_cast<size_t>(round.round);
      e.total = static_cast<size_t>(std::max(1, o.max_rounds));
      e.racing = round.remaining, e.confirmed = round.confirmed;
      e.elapsed_ms = ms_since(t.t0), e.left_ms = round.left_ms;
      progress(e);
    };
  t.time_candidates(on_round);
  t.choose_winners();
  t.r.elapsed_ms = ms_since(t.t0);
  return std::move(t.r);
}

}  // namespace conv
