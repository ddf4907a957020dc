// autotune verify: conv::verify on the given layers, as a table or JSON.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "conv/conv.hpp"
#include "options.hpp"
#include "quoted.hpp"

namespace conv::cli {

int run_verify(const Common& c, const TuneArgs& t, const MiopenArgs& miopen) {
  const std::vector<conv::ConvProblem> problems = collect_problems(t, miopen);
  conv::ForwardOptions o;
  o.device = parse_device(c.device);
  o.threads = c.threads;
  o.timing = c.timing_mode();
  o.perfdb_path = c.db_path();
  const std::vector<conv::Verification> checks = conv::verify(problems, o);
  const auto layer = [](const conv::ConvProblem& p) { return p.name.empty() ? p.key() : p.name; };
  if (c.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& v : checks) {
      nlohmann::json e = {{"layer", layer(v.problem)},
                          {"key", v.problem.key()},
                          {"path", conv::to_string(v.path)},
                          {"algo", v.algo_id},
                          {"config", v.config},
                          {"stored_ms", v.stored_ms},
                          {"observed_ms", v.observed_ms},
                          {"noisy", v.noisy},
                          {"marked", v.marked}};
      if (!v.error.empty()) e["error"] = v.error;
      j.push_back(e);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%-28s %-8s %-34s %10s %12s %8s  %s\n", "layer", "path", "winner", "stored ms",
              "observed ms", "ratio", "verdict");
  int marked = 0;
  for (const auto& v : checks) {
    const std::string verdict = !v.error.empty() ? "could not run: " + conv::escaped(v.error)
                                : v.marked       ? "slower: marked, the next tune measures it again"
                                : v.noisy ? "noisy: measured only under load, nothing concluded"
                                          : "ok";
    std::printf("%-28.28s %-8s %-34.34s %10.3f %12.3f %7.2fx  %s\n",
                conv::escaped(layer(v.problem)).c_str(), conv::to_string(v.path),
                conv::escaped(v.algo_id + " " + v.config).c_str(), v.stored_ms, v.observed_ms,
                v.observed_ms / v.stored_ms, verdict.c_str());
    marked += v.marked;
  }
  std::printf(
      "%zu stored winner(s) verified (%s timing, called as a caller does and timed as "
      "the tuner times candidates), %d marked\n",
      checks.size(), conv::to_string(o.timing), marked);
  return 0;
}

}  // namespace conv::cli
