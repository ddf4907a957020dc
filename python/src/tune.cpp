// convtune.tune and convtune.explain: conv::tune results as plain dicts and lists.
#include <nanobind/stl/string.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/perfdb.hpp"
#include "conv/tuner.hpp"
#include "options.hpp"
#include "peak.hpp"
#include "results.hpp"

namespace convtune_py {

namespace {

nb::dict candidate(const conv::TuneResult& r, size_t i, double peak) {
  const conv::CandidateResult& c = r.candidates[i];
  nb::dict d;
  d["algo"] = c.algo_id;
  d["config"] = c.config;
  d["status"] = conv::to_string(c.status);
  d["message"] = c.message;
  d["min_ms"] = number(c.min_ms);
  d["median_ms"] = number(c.median_ms);
  d["max_ms"] = number(c.max_ms);
  d["packed_min_ms"] = number(c.packed_min_ms);
  d["packed_median_ms"] = number(c.packed_median_ms);
  d["gflops"] = c.gflops(r.problem) > 0 ? nb::object(nb::float_(c.gflops(r.problem))) : nb::none();
  if (peak > 0)
    d["percent_peak"] = c.gflops(r.problem) > 0
                            ? nb::object(nb::float_(100 * c.gflops(r.problem) / peak))
                            : nb::none();
  d["workspace_bytes"] = c.workspace_bytes;
  d["error"] = number(c.max_error);
  d["rel_error"] = number(c.max_rel_error);
  d["error_bound"] = c.error_bound;
  d["runs"] = c.runs;
  d["quality"] = quality(c.quality);
  d["from_perfdb"] = c.from_perfdb;
  d["winner"] = static_cast<int>(i) == r.winner;
  d["packed_winner"] = static_cast<int>(i) == r.packed_winner;
  return d;
}

// Raised by a progress callback (or Ctrl-C) while the GIL was released: the Python error is set
// again (PyErr_Restore) and this unwinds tune() to where the GIL is held.
struct PythonRaised {};

// tune()'s progress: with the GIL, Ctrl-C first (KeyboardInterrupt), then the user's callback
// with one dict per event. Whatever either raises abandons the tune.
class Progress {
 public:
  explicit Progress(nb::handle callback) : callback_(callback) {
    if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
      throw conv::Error("progress: expected a callable or None, got " + type_text(callback) + " " +
                        repr_text(callback));
  }

  void operator()(const conv::TuneEvent& e) const {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw PythonRaised{};
    if (callback_.is_none()) return;
    try {
      nb::dict d;
      d["phase"] = e.phase == conv::TuneEvent::Phase::check ? "check" : "time";
      d["done"] = e.done;
      d["total"] = e.total;
      d["algo"] = e.candidate ? nb::object(nb::str(e.candidate->algo_id.c_str())) : nb::none();
      d["config"] = e.candidate ? nb::object(nb::str(e.candidate->config.c_str())) : nb::none();
      d["status"] =
          e.candidate ? nb::object(nb::str(conv::to_string(e.candidate->status))) : nb::none();
      d["racing"] = e.racing;
      d["confirmed"] = e.confirmed;
      d["elapsed_s"] = e.elapsed_ms / 1000;
      d["left_s"] = e.left_ms / 1000;
      callback_(d);
    } catch (nb::python_error& err) {
      err.restore();
      throw PythonRaised{};
    }
  }

 private:
  nb::handle callback_;
};

nb::dict result(const conv::TuneResult& r, double peak) {
  nb::dict d;
  d["name"] = r.problem.name;
  d["problem"] = conv::to_descriptor(r.problem);
  d["key"] = r.problem.key();
  d["gflop"] = r.problem.flops() / 1e9;
  d["fingerprint"] = r.fingerprint;
  d["reference"] = r.reference;
  d["complete"] = r.complete;
  d["noisy"] = r.noisy;
  d["packed_noisy"] = r.packed_noisy;
  d["elapsed_ms"] = r.elapsed_ms;
  nb::list candidates;
  for (size_t i = 0; i < r.candidates.size(); ++i) candidates.append(candidate(r, i, peak));
  d["candidates"] = candidates;
  d["winner"] = r.winner >= 0 ? nb::object(candidates[r.winner]) : nb::none();
  d["packed_winner"] = r.packed_winner >= 0 ? nb::object(candidates[r.packed_winner]) : nb::none();
  nb::list na;
  for (const auto& n : r.not_applicable) {
    nb::dict e;
    e["algo"] = n.algo_id;
    // The library names the CLI's option; here it is the algo= keyword.
    const std::string cli = "excluded by --algo ";
    e["reason"] =
        n.reason.rfind(cli, 0) == 0 ? "excluded by algo=" + n.reason.substr(cli.size()) : n.reason;
    na.append(e);
  }
  d["not_applicable"] = na;
  return d;
}

// The keywords tune and explain share, converted by their own checks (convtune.Error naming the
// keyword, where nanobind's typed parameters would raise TypeError).
struct Knobs {
  int threads;
  std::string algo;
  double budget_s, batch_ms;
  int64_t min_rounds, max_rounds;
  std::optional<double> workspace_limit;
  bool check;
  conv::Timing timing;
};

Knobs knobs(nb::handle threads, nb::handle algo, nb::handle budget_s, nb::handle min_rounds,
            nb::handle max_rounds, nb::handle batch_ms, nb::handle workspace_limit,
            nb::handle check, nb::handle timing) {
  return {thread_arg(threads),
          str_arg(algo, "algo"),
          number_arg(budget_s, "budget_s"),
          number_arg(batch_ms, "batch_ms"),
          int_arg(min_rounds, "min_rounds", "[1, 100000]"),
          int_arg(max_rounds, "max_rounds", "[min_rounds, 100000]"),
          optional_number_arg(workspace_limit, "workspace_limit"),
          bool_arg(check, "check"),
          conv::parse_timing(str_arg(timing, "timing"))};
}

conv::TuneOptions options(const Knobs& k) {
  // The CLI's --rounds and --max-rounds range.
  if (k.min_rounds < 1 || k.min_rounds > 100000)
    throw conv::Error("min_rounds: must be in [1, 100000], got " + std::to_string(k.min_rounds));
  if (k.max_rounds < k.min_rounds || k.max_rounds > 100000)
    throw conv::Error("max_rounds: must be in [min_rounds, 100000], got " +
                      std::to_string(k.max_rounds));
  // Finite, as the CLI's --budget and --batch-ms (an infinite batch would never end a round).
  if (!(k.budget_s > 0) || !std::isfinite(k.budget_s))
    throw conv::Error("budget_s: must be a finite number > 0");
  if (!(k.batch_ms >= 0) || !std::isfinite(k.batch_ms))
    throw conv::Error("batch_ms: must be a finite number >= 0");
  if (k.workspace_limit && !(*k.workspace_limit >= 0))
    throw conv::Error("workspace_limit: must be >= 0 bytes");
  conv::TuneOptions o;
  o.threads = k.threads;
  conv::resolve_threads(k.threads);
  o.algo_pattern = k.algo;
  o.budget_ms = k.budget_s * 1000;
  o.batch_ms = k.batch_ms;
  o.min_rounds = static_cast<int>(k.min_rounds);
  o.max_rounds = static_cast<int>(k.max_rounds);
  // Limits past size_t (infinity included) limit nothing; converting them would be undefined.
  if (k.workspace_limit)
    o.workspace_limit = *k.workspace_limit >= 0x1p64 ? std::numeric_limits<size_t>::max()
                                                     : static_cast<size_t>(*k.workspace_limit);
  o.check = k.check;
  o.timing = k.timing;
  return o;
}

const char* kTuneDoc = R"(Measures every algorithm and config on one problem and stores the result.

tune(problem, *, threads=0, algo="", budget_s=120, min_rounds=3, max_rounds=20, batch_ms=1.0,
     workspace_limit=None, check=True, timing="cold", perfdb=None, store=True, force=False,
     progress=None) -> dict

problem: a convtune.Problem or a benchdnn descriptor string. Each candidate runs once on random
data checked against a float64 reference, then is timed in interleaved rounds (a round repeats
the run for batch_ms milliseconds; min_rounds..max_rounds rounds; budget_s seconds for the whole
problem). algo: only algorithm ids containing one of these comma-separated substrings.
workspace_limit: bytes. timing: "cold" (default; each run's tensors, weights and workspace are
evicted from the caches first, as a layer in a network meets them), "warm" (the cores' L1 and L2
swept first, the data in the last-level cache) or "hot" (back to back); part
of the fingerprint, so each has its own winners. With store (default), the perf database at `perfdb` (default
$CONVTUNE_PERFDB, else ~/.cache/convtune/perfdb.sqlite) provides the candidates it already holds
(measured again only with force) and receives the measurements, and the winners when the
measurement is complete, as `autotune tune` does. The GIL is released while measuring.
progress: None or a callable, called (with the GIL) after each candidate's check and after each
timing round with a dict: phase ("check" or "time"), done and total (candidates checked of all;
rounds done of max_rounds, the most there can be), algo, config and status of the candidate just
checked (None while timing), racing and confirmed (timing: candidates still in the race, and
those with two agreeing clean rounds), elapsed_s, and left_s (an estimate of the seconds left for
both phases, within budget_s). An exception it raises, and Ctrl-C (KeyboardInterrupt), abandons
the tune: it propagates and nothing is stored.

Returns a dict: name, problem (descriptor text; convtune.Problem(d["problem"]) rebuilds it), key, gflop, fingerprint, reference,
complete (every candidate has a final status, so the winner is stored), noisy, elapsed_ms,
stored (bool), perfdb (path or None),
candidates: list of dicts (registry order) with algo, config, status ("ok", "rejected": error
above bound, "failed": raised, "skipped": budget or workspace), message, min_ms (the fastest
clean round, what the choice uses), median_ms, max_ms, packed_min_ms and packed_median_ms
(with pre-packed weights, a Plan's time; None when not packable), gflops (GFLOP/s at min_ms, the estimate),
workspace_bytes, error (max |y - y_ref| / error scale, compared with error_bound), rel_error
(max |y - y_ref| / (|bias| + sum|x*w|)), runs, quality (rounds, clean_rounds, spread, noisy),
from_perfdb, winner (bool), packed_winner (bool); times in ms, None when not measured;
winner / packed_winner: the winning candidate's dict or None; not_applicable: list of
{algo, reason}. Raises convtune.Error for a bad problem, option or perf database; an option of
the wrong type too ("budget_s: expected a number, got str '1'", "check: expected a bool, got
str 'yes'", "progress: expected a callable or None, got int 3"; numbers are int or float,
bools True or False).)";

nb::dict tune(nb::handle problem, nb::handle threads, nb::handle algo, nb::handle budget_s,
              nb::handle min_rounds, nb::handle max_rounds, nb::handle batch_ms,
              nb::handle workspace_limit, nb::handle check, nb::handle timing,
              nb::handle perfdb_obj, nb::handle store_obj, nb::handle force_obj,
              nb::handle progress_obj) {
  const conv::ConvProblem p = to_problem(problem);
  const Progress progress(progress_obj);
  const std::optional<std::string> perfdb = optional_path_arg(perfdb_obj, "perfdb");
  const Knobs k = knobs(threads, algo, budget_s, min_rounds, max_rounds, batch_ms, workspace_limit,
                        check, timing);
  const bool store = bool_arg(store_obj, "store"), force = bool_arg(force_obj, "force");
  p.validate();
  conv::TuneOptions o = options(k);
  std::optional<conv::PerfDb> db;
  conv::TuneResult r;
  {
    nb::gil_scoped_release unlocked;
    if (store) {
      db.emplace(conv::PerfDb::open(perfdb ? *perfdb : conv::PerfDb::default_path()));
      if (!force) o.measured = db->candidates(o.device.fingerprint(o.threads, o.timing), p.key());
    }
    try {
      r = conv::tune(p, o, progress);
    } catch (const PythonRaised&) {
      nb::gil_scoped_acquire gil;
      throw nb::python_error();
    }
    if (db) conv::store_result(*db, r);
  }
  nb::dict d = result(r, 0);
  d["stored"] = db && r.complete && r.winner >= 0;
  d["perfdb"] = db ? path_object(db->path()) : nb::none();
  return d;
}

const char* kExplainDoc = R"(Measures every algorithm on one problem now and explains the choice.

explain(problem, *, threads=0, algo="", budget_s=120, min_rounds=3, max_rounds=20,
        batch_ms=1.0, workspace_limit=None, check=True, timing="cold", perfdb=None) -> dict

Like tune(..., store=False) (nothing is read from or written to a perf database while
measuring), plus: peak_gflops (this CPU's measured FMA peak, GFLOP/s; 0 when unknown), each
candidate's percent_peak, and stored_winner: what best_forward would run today from the perf
database at `perfdb` (default path) or a system one, as {algo, config, min_ms, perfdb}, or None.
Raises convtune.Error, for an option of the wrong type too, as tune() does.)";

nb::dict explain(nb::handle problem, nb::handle threads, nb::handle algo, nb::handle budget_s,
                 nb::handle min_rounds, nb::handle max_rounds, nb::handle batch_ms,
                 nb::handle workspace_limit, nb::handle check, nb::handle timing,
                 nb::handle perfdb_obj) {
  const conv::ConvProblem p = to_problem(problem);
  const std::optional<std::string> perfdb = optional_path_arg(perfdb_obj, "perfdb");
  const Knobs k = knobs(threads, algo, budget_s, min_rounds, max_rounds, batch_ms, workspace_limit,
                        check, timing);
  p.validate();
  const conv::TuneOptions o = options(k);
  conv::TuneResult r;
  double peak = 0;
  std::optional<conv::PerfWinner> stored;
  std::string stored_in;
  {
    nb::gil_scoped_release unlocked;
    peak = conv::measure_fma_peak_gflops(k.threads);
    try {
      r = conv::tune(p, o, Progress(nb::none()));
    } catch (const PythonRaised&) {
      nb::gil_scoped_acquire gil;
      throw nb::python_error();
    }
    std::vector<std::string> paths;
    try {
      paths.push_back(perfdb ? *perfdb : conv::PerfDb::default_path());
    } catch (const conv::Error&) {  // no $HOME: only the system databases
    }
    for (const auto& s : conv::system_perfdb_paths()) paths.push_back(s);
    for (const auto& path : paths) {
      if (!conv::PerfDb::file_exists(path)) continue;
      try {
        stored = conv::PerfDb::open(path, true).lookup(r.fingerprint, p.key());
      } catch (const conv::Error&) {  // unreadable: best_forward skips it too
      }
      if (stored) {
        stored_in = path;
        break;
      }
    }
  }
  nb::dict d = result(r, peak);
  d["peak_gflops"] = peak;
  if (stored) {
    nb::dict s;
    s["algo"] = stored->algo_id;
    s["config"] = stored->config;
    s["min_ms"] = number(stored->min_ms);
    s["perfdb"] = path_object(stored_in);
    d["stored_winner"] = s;
  } else {
    d["stored_winner"] = nb::none();
  }
  return d;
}

}  // namespace

void bind_tune(nb::module_& m) {
  // .none(): None reaches the checks, which name the argument (nanobind would raise a TypeError
  // listing the signature).
  m.def("tune", &tune, nb::arg("problem").none(), nb::kw_only(), nb::arg("threads").none() = 0,
        nb::arg("algo").none() = "", nb::arg("budget_s").none() = 120.0,
        nb::arg("min_rounds").none() = 3, nb::arg("max_rounds").none() = 20,
        nb::arg("batch_ms").none() = 1.0, nb::arg("workspace_limit").none() = nb::none(),
        nb::arg("check").none() = true, nb::arg("timing").none() = "cold",
        nb::arg("perfdb").none() = nb::none(), nb::arg("store").none() = true,
        nb::arg("force").none() = false, nb::arg("progress").none() = nb::none(), kTuneDoc);
  m.def("explain", &explain, nb::arg("problem").none(), nb::kw_only(),
        nb::arg("threads").none() = 0, nb::arg("algo").none() = "",
        nb::arg("budget_s").none() = 120.0, nb::arg("min_rounds").none() = 3,
        nb::arg("max_rounds").none() = 20, nb::arg("batch_ms").none() = 1.0,
        nb::arg("workspace_limit").none() = nb::none(), nb::arg("check").none() = true,
        nb::arg("timing").none() = "cold", nb::arg("perfdb").none() = nb::none(), kExplainDoc);
}

}  // namespace convtune_py
