#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "quoted.hpp"

namespace conv::cli {

namespace {

std::string fmt(double v, int precision) {
  if (v < 0) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string label(const ConvProblem& p) {
  return p.name.empty() ? p.key() : p.name;
}

/// The one estimate every table, JSON field and ratio shows: the fastest clean round (min_ms),
/// which the choice is made on; rows stored before min_ms existed fall back to their median.
double estimate(double min_ms, double median_ms) {
  return min_ms > 0 ? min_ms : median_ms;
}

nlohmann::json candidate_json(const PerfCandidate& c, const ConvProblem& p) {
  nlohmann::json j = {{"algo", c.algo_id},
                      {"config", c.config},
                      {"status", to_string(c.status)},
                      {"median_ms", c.median_ms},
                      {"min_ms", c.min_ms},
                      {"max_ms", c.max_ms},
                      {"packed_median_ms", c.packed_median_ms},
                      {"packed_min_ms", c.packed_min_ms},
                      {"max_error", c.max_error},
                      {"workspace_bytes", c.workspace_bytes},
                      {"quality", to_json(c.quality)}};
  if (const double ms = estimate(c.min_ms, c.median_ms); ms > 0)
    j["gflops"] = p.flops() / (ms * 1e6);
  if (!c.message.empty()) j["message"] = c.message;
  return j;
}

nlohmann::json winner_json(const PerfWinner& w, const ConvProblem& p) {
  return {{"algo", w.algo_id},
          {"config", w.config},
          {"median_ms", w.median_ms},
          {"min_ms", w.min_ms},
          {"gflops", estimate(w.min_ms, w.median_ms) > 0
                         ? p.flops() / (estimate(w.min_ms, w.median_ms) * 1e6)
                         : 0},
          {"quality", to_json(w.quality)},
          {"date", w.date},
          {"version", w.version}};
}

}  // namespace

std::string why_no_winner(const TuneResult& r) {
  if (r.candidates.empty())
    return "no candidate: every algorithm for the device was excluded (CONVTUNE_DISABLE, --algo) "
           "or is not applicable; `autotune explain` says which";
  // The skip reasons the tuner gives (conv::tune: why_skipped, the time budget), each with its
  // count and the first message as an example, in the order first met.
  struct Reason {
    std::string what, example;
    size_t count = 0;
  };
  std::vector<Reason> reasons;
  size_t skipped = 0, rejected = 0, failed = 0;
  for (const CandidateResult& c : r.candidates) {
    if (c.status == CandidateStatus::rejected) ++rejected;
    if (c.status == CandidateStatus::failed) ++failed;
    if (c.status != CandidateStatus::skipped) continue;
    ++skipped;
    std::string what = c.message;
    if (c.message.rfind("time budget", 0) == 0)
      what = "out of --budget";
    else if (c.message.find("exceeds the limit") != std::string::npos)
      what = "over --workspace-limit";
    else if (c.message.find("of this machine's") != std::string::npos)
      what = "with a workspace over 3/4 of this machine's memory";
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const Reason& x) { return x.what == what; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), Reason{what, c.message});
    ++it->count;
  }
  const bool none_ran = skipped == r.candidates.size();
  std::vector<std::string> parts;
  if (rejected) parts.push_back(std::to_string(rejected) + " rejected (over their error bound)");
  if (failed) parts.push_back(std::to_string(failed) + " failed");
  if (skipped) parts.push_back(std::to_string(skipped) + " skipped");
  for (const Reason& x : reasons)
    parts.push_back(std::to_string(x.count) + " " + x.what +
                    (x.what == x.example
                         ? std::string()
                         : " (" + std::string(x.count > 1 ? "e.g. " : "") + x.example + ")"));
  std::string s = none_ran ? "no candidate ran: " : "no candidate was correct: ";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  s += none_ran ? "; `autotune explain` says which" : "; `autotune explain` shows the errors";
  // A stored message may come from another machine's perf database: no terminal escapes.
  return conv::escaped(s);
}

std::string quality_text(const MeasureQuality& q, bool winner) {
  if (q.rounds <= 0) return "-";
  std::string s = std::to_string(q.clean_rounds) + "/" + std::to_string(q.rounds) + " clean";
  if (q.spread >= 0) s += ", spread " + fmt(100 * q.spread, 1) + "%";
  if (!q.noisy) return s;
  if (q.clean_rounds == 0) return "noisy: " + s;
  return s + (winner ? "; noisy: a candidate that might be faster was measured only under load"
                     : "; noisy on the Plan path");
}

nlohmann::json to_json(const MeasureQuality& q) {
  return {{"rounds", q.rounds},
          {"clean_rounds", q.clean_rounds},
          {"spread", q.spread >= 0 ? nlohmann::json(q.spread) : nlohmann::json(nullptr)},
          {"noisy", q.noisy}};
}

bool is_vendor(const std::string& algo_id) {
  return algo_id == "cpu.onednn" || algo_id.rfind("cuda.cudnn.", 0) == 0;
}

const PerfCandidate* baseline(const LayerOutcome& o) {
  const PerfCandidate* best = nullptr;
  for (const auto& c : o.candidates)
    if (is_vendor(c.algo_id) && c.status == CandidateStatus::ok &&
        (!best || c.min_ms < best->min_ms))
      best = &c;
  return best;
}

std::string baseline_name(const LayerOutcome& o) {
  return o.fingerprint.rfind("cpu", 0) == 0 ? "cpu.onednn" : "best cuDNN";
}

void print_tune_table(std::ostream& out, const std::vector<LayerOutcome>& layers) {
  const std::string vendor = layers.empty() ? "cpu.onednn" : baseline_name(layers.front());
  int width = 26;  // an unnamed layer shows its key, which is longer
  for (const auto& l : layers) width = std::max(width, static_cast<int>(label(l.problem).size()));
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s %-32s %10s %9s %14s %9s  %s\n", width, "layer", "winner",
                "ms", "GFLOP/s", (vendor + " ms").c_str(), "speed-up", "source");
  out << line << std::string(static_cast<size_t>(width) + 92, '-') << "\n";
  for (const auto& l : layers) {
    std::string winner =
        l.winner ? l.winner->algo_id + " " + l.winner->config : "(no candidate ok)";
    const double ms = l.winner ? estimate(l.winner->min_ms, l.winner->median_ms) : -1;
    const PerfCandidate* b = baseline(l);
    const double bms = b ? estimate(b->min_ms, b->median_ms) : -1;
    std::string ratio = (ms > 0 && bms > 0) ? fmt(bms / ms, 2) + "x" : "-";
    std::snprintf(line, sizeof line, "%-*s %-32s %10s %9s %14s %9s  %s\n", width,
                  label(l.problem).c_str(), winner.c_str(), fmt(ms, 3).c_str(),
                  fmt(ms > 0 ? l.problem.flops() / (ms * 1e6) : -1, 1).c_str(), fmt(bms, 3).c_str(),
                  ratio.c_str(),
                  ((l.source == "perfdb"   ? "stored in " + l.perfdb_path
                    : l.source == "subset" ? std::string("subset (not stored)")
                    : l.source == "memory" ? std::string("tuned now (not stored: read-only)")
                                           : std::string("tuned now")) +
                   (l.winner && l.winner->quality.noisy ? ", noisy (measured under load)" : ""))
                      .c_str());
    out << line;
  }
}

void print_explain(std::ostream& out, const TuneResult& r, double peak) {
  const ConvProblem& p = r.problem;
  out << "problem   " << to_descriptor(p) << "\n"
      << "key       " << p.key() << "\n"
      << "shape     N=" << p.N << " C=" << p.C << " H=" << p.H << " W=" << p.W << " -> K=" << p.K
      << " OH=" << p.OH() << " OW=" << p.OW() << ", kernel " << p.R << "x" << p.S << ", stride "
      << p.stride_h << "x" << p.stride_w << ", " << fmt(p.flops() / 1e9, 3) << " GFLOP\n"
      << "device    " << r.fingerprint << "\n"
      << "peak      " << (peak > 0 ? fmt(peak, 1) + " GFLOP/s (measured FMA peak)" : "unknown")
      << "\n"
      << "checked   "
      << (r.candidates.empty()
              ? std::string("nothing: no algorithm is applicable or selected (below)")
              : "against the " + r.reference +
                    "; rel error = max |y - y_ref| / (|bias| + sum|x*w|) per "
                    "output, norm err = the same over the algorithm's error "
                    "scale (adds the tile's magnitude for Winograd/FFT), "
                    "rejected above bound")
      << "\n\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-24s %-16s %-9s %9s %9s %9s %8s %6s %8s %9s %9s %9s  %s\n",
                "algorithm", "config", "status", "min ms", "median ms", "packed ms", "GFLOP/s",
                "% peak", "ws MiB", "rel error", "norm err", "bound", "measurement");
  out << line << "  " << std::string(158, '-') << "\n";
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    const double gf = c.gflops(p);
    // Errors not measured (a skipped or failed candidate) are -1: printed as "-".
    auto err = [](double e) {
      char b[32];
      std::snprintf(b, sizeof b, "%9.2e", e);
      return e < 0 ? std::string("-") : std::string(b);
    };
    std::snprintf(line, sizeof line,
                  "%c %-24s %-16s %-9s %9s %9s %9s %8s %6s %8s %9s %9s %9s  %s\n",
                  static_cast<int>(i) == r.winner ? '*' : ' ', c.algo_id.c_str(), c.config.c_str(),
                  to_string(c.status), fmt(c.min_ms, 3).c_str(), fmt(c.median_ms, 3).c_str(),
                  fmt(c.packed_min_ms, 3).c_str(), fmt(gf > 0 ? gf : -1, 1).c_str(),
                  fmt(peak > 0 && gf > 0 ? 100 * gf / peak : -1, 0).c_str(),
                  fmt(c.workspace_bytes / 1048576.0, 1).c_str(), err(c.max_rel_error).c_str(),
                  err(c.max_error).c_str(), err(c.error_bound).c_str(),
                  (quality_text(c.quality) + (c.from_perfdb ? " (stored)" : "")).c_str());
    out << line;
    // A stored message may come from another machine's perf database: no terminal escapes.
    if (!c.message.empty()) out << "      " << conv::escaped(c.message) << "\n";
  }
  for (const auto& n : r.not_applicable) {
    std::snprintf(line, sizeof line, "  %-24s %-16s %-9s %s\n", n.algo_id.c_str(), "-", "n/a",
                  n.reason.c_str());
    out << line;
  }
  out << "\n";
  if (r.winner >= 0) {
    const auto& w = r.candidates[r.winner];
    out << "winner (one-shot): " << w.algo_id << " " << w.config << ", " << fmt(w.min_ms, 3)
        << " ms (median " << fmt(w.median_ms, 3) << " ms)"
        << (r.noisy ? "; noisy: a candidate was only measured under load and might be faster" : "")
        << "\n";
  } else {
    out << "winner (one-shot): none: "
        << (r.candidates.empty() ? "no algorithm is applicable or selected"
                                 : "no candidate was measured correct")
        << "\n";
  }
  if (r.packed_winner >= 0) {
    const auto& w = r.candidates[r.packed_winner];
    out << "winner (Plan with packed weights): " << w.algo_id << " " << w.config << ", "
        << fmt(w.plan_ms(), 3) << " ms" << (r.packed_noisy ? "; noisy" : "") << "\n";
  }
}

nlohmann::json to_json(const LayerOutcome& o) {
  nlohmann::json j = {{"name", o.problem.name},       {"problem", to_descriptor(o.problem)},
                      {"key", o.problem.key()},       {"gflop", o.problem.flops() / 1e9},
                      {"fingerprint", o.fingerprint}, {"source", o.source}};
  if (!o.perfdb_path.empty()) j["perfdb"] = o.perfdb_path;
  j["winner"] = o.winner ? winner_json(*o.winner, o.problem) : nlohmann::json(nullptr);
  j["packed_winner"] =
      o.packed_winner ? winner_json(*o.packed_winner, o.problem) : nlohmann::json(nullptr);
  const PerfCandidate* b = baseline(o);
  j["baseline"] =
      b ? nlohmann::json{{"algo", b->algo_id}, {"min_ms", b->min_ms}, {"median_ms", b->median_ms}}
        : nlohmann::json(nullptr);
  if (b && o.winner && estimate(o.winner->min_ms, o.winner->median_ms) > 0)
    j["speedup"] =
        estimate(b->min_ms, b->median_ms) / estimate(o.winner->min_ms, o.winner->median_ms);
  j["candidates"] = nlohmann::json::array();
  for (const auto& c : o.candidates) j["candidates"].push_back(candidate_json(c, o.problem));
  if (o.tuned) {
    j["not_applicable"] = nlohmann::json::array();
    for (const auto& n : o.tuned->not_applicable)
      j["not_applicable"].push_back({{"algo", n.algo_id}, {"reason", n.reason}});
  }
  return j;
}

nlohmann::json failure_json(const ConvProblem& p, const std::string& error,
                            const std::string& device) {
  return {{"name", p.name},   {"problem", to_descriptor(p)},
          {"key", p.key()},   {"gflop", p.flops() / 1e9},
          {"device", device}, {"error", error}};
}

nlohmann::json to_json(const TuneResult& r, double peak) {
  nlohmann::json j = {{"name", r.problem.name},
                      {"problem", to_descriptor(r.problem)},
                      {"key", r.problem.key()},
                      {"gflop", r.problem.flops() / 1e9},
                      {"fingerprint", r.fingerprint},
                      {"reference", r.reference},
                      {"peak_gflops", peak},
                      {"elapsed_ms", r.elapsed_ms},
                      {"noisy", r.noisy},
                      {"packed_noisy", r.packed_noisy}};
  j["candidates"] = nlohmann::json::array();
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    j["candidates"].push_back({{"algo", c.algo_id},
                               {"config", c.config},
                               {"status", to_string(c.status)},
                               {"message", c.message},
                               {"median_ms", c.median_ms},
                               {"min_ms", c.min_ms},
                               {"max_ms", c.max_ms},
                               {"packed_median_ms", c.packed_median_ms},
                               {"packed_min_ms", c.packed_min_ms},
                               {"runs", c.runs},
                               {"quality", to_json(c.quality)},
                               {"from_perfdb", c.from_perfdb},
                               {"gflops", c.gflops(r.problem)},
                               {"workspace_bytes", c.workspace_bytes},
                               {"max_error", c.max_error},
                               {"max_rel_error", c.max_rel_error},
                               {"error_bound", c.error_bound},
                               {"winner", static_cast<int>(i) == r.winner},
                               {"packed_winner", static_cast<int>(i) == r.packed_winner}});
  }
  j["not_applicable"] = nlohmann::json::array();
  for (const auto& n : r.not_applicable)
    j["not_applicable"].push_back({{"algo", n.algo_id}, {"reason", n.reason}});
  return j;
}

nlohmann::json to_json(const PerfDb::Entry& e) {
  return {{"key", e.key},
          {"name", e.winner.name},
          {"path", to_string(e.path)},
          {"algo", e.winner.algo_id},
          {"config", e.winner.config},
          {"median_ms", e.winner.median_ms},
          {"min_ms", e.winner.min_ms},
          {"quality", to_json(e.winner.quality)},
          {"date", e.winner.date},
          {"version", e.winner.version}};
}

}  // namespace conv::cli
