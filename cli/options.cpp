// Problem collection and device parsing for the autotune subcommands.
#include "options.hpp"

#include "conv/model.hpp"
#include "quoted.hpp"

#include <cstdlib>
#include <iostream>
#include <set>

namespace conv::cli {

std::vector<conv::ConvProblem> collect_problems(const TuneArgs& t, const MiopenArgs& miopen) {
  std::vector<conv::ConvProblem> problems;
  try {
    for (const auto& d : t.descriptors) problems.push_back(conv::parse_descriptor(d));
    for (const auto& b : t.batches) {
      size_t unmatched = 0;
      auto ps = conv::read_batch_file(b, &unmatched);
      if (unmatched > 0)
        std::cerr << "autotune: " << conv::escaped(b) << ": --match left out " << unmatched
                  << " of " << unmatched + ps.size() << " problem(s)\n";
      problems.insert(problems.end(), ps.begin(), ps.end());
    }
    conv::InputShapes inputs;
    for (const auto& text : t.inputs) {
      auto [name, dims] = conv::parse_input_shape(text);
      if (!inputs.emplace(name, dims).second)
        throw UsageError("--input \"" + text + "\": input \"" + name + "\" given twice");
    }
    if (!inputs.empty() && t.models.empty()) throw UsageError("--input: only applies to --model");
    for (const auto& m : t.models) {
      auto ps = conv::import_model(m, inputs);
      if (ps.empty()) std::cerr << "autotune: " << m << ": no 2-D convolution in this model\n";
      problems.insert(problems.end(), ps.begin(), ps.end());
    }
    if (miopen.any()) problems.push_back(miopen.problem());
  } catch (const conv::Error& e) {
    throw UsageError(e.what());
  }
  if (problems.empty())
    throw UsageError(
        "no problem given: pass a DESCRIPTOR, --batch FILE, --model FILE or MIOpenDriver flags");
  return problems;
}

conv::Device parse_device(const std::string& text) {
  try {
    return conv::Device::parse(text);
  } catch (const conv::Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace conv::cli

namespace conv::cli {

namespace {

// A non-negative integer, all of `text`; -1 otherwise.
long parse_index(const std::string& text) {
  if (text.empty() || text.size() > 9) return -1;
  long v = 0;
  for (const char ch : text) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v;
}

long env_index(const char* name, bool required) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    if (required) throw UsageError(std::string("--shard auto: ") + name + " is not set");
    return -1;
  }
  const long i = parse_index(v);
  if (i < 0)
    throw UsageError(std::string("--shard auto: ") + name +
                     ": expected a non-negative integer, got \"" + v + "\"");
  return i;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  if (text.empty()) return {};
  long index = -1, count = -1;
  std::string from;
  if (text == "auto") {
    if (std::getenv("SLURM_ARRAY_TASK_ID")) {
      const long min = std::max(0L, env_index("SLURM_ARRAY_TASK_MIN", false));
      const long max = env_index("SLURM_ARRAY_TASK_MAX", false);
      const long step = env_index("SLURM_ARRAY_TASK_STEP", false);
      count = env_index("SLURM_ARRAY_TASK_COUNT", true);
      // Shard i is task MIN + i: a stepped or listed array would leave shards untuned.
      if (step > 1 || (max >= 0 && max - min + 1 != count))
        throw UsageError(
            "--shard auto: the Slurm array is not a contiguous range (SLURM_ARRAY_TASK_MIN " +
            std::to_string(min) + ", _MAX " + std::to_string(max) + ", _STEP " +
            std::to_string(step) + ", _COUNT " + std::to_string(count) +
            "), so some shards would never be tuned; submit --array=0-" +
            std::to_string(count - 1) + " (a % limit is fine)");
      const long id = env_index("SLURM_ARRAY_TASK_ID", true);
      if (id < min)
        throw UsageError("--shard auto: SLURM_ARRAY_TASK_ID " + std::to_string(id) +
                         " is below SLURM_ARRAY_TASK_MIN " + std::to_string(min));
      index = id - min;
      from = "SLURM_ARRAY_TASK_ID";
    } else if (std::getenv("JOB_COMPLETION_INDEX")) {
      index = env_index("JOB_COMPLETION_INDEX", true);
      count = env_index("CONVTUNE_SHARD_COUNT", true);
      from = "JOB_COMPLETION_INDEX";
    } else {
      throw UsageError(
          "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor "
          "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set");
    }
  } else {
    const size_t slash = text.find('/');
    if (slash != std::string::npos) {
      index = parse_index(text.substr(0, slash));
      count = parse_index(text.substr(slash + 1));
    }
    from = "--shard";
  }
  if (index < 0 || count < 1 || index >= count)
    throw UsageError("--shard: expected I/N with 0 <= I < N, got " +
                     (text == "auto" ? "index " + std::to_string(index) + " of " +
                                           std::to_string(count) + " from " + from
                                     : "\"" + text + "\""));
  return {static_cast<size_t>(index), static_cast<size_t>(count)};
}

std::vector<conv::ConvProblem> select_shard(const std::vector<conv::ConvProblem>& problems,
                                            const Shard& shard, size_t* duplicates) {
  std::vector<conv::ConvProblem> out;
  std::set<std::string> seen;
  size_t distinct = 0;
  *duplicates = 0;
  for (const auto& p : problems) {
    if (!seen.insert(p.key()).second) {
      ++*duplicates;
      continue;
    }
    if (distinct++ % shard.count == shard.index) out.push_back(p);
  }
  return out;
}

}  // namespace conv::cli
