// Choosing an algorithm for a problem: the in-process winner cache, the perf database and the
// find modes. Shared by best_forward and Plan.
#pragma once

#include <string>

#include "conv/conv.hpp"

namespace conv {

struct Choice {
  const Algorithm* algo = nullptr;
  std::string config;
  ChoiceSource source = ChoiceSource::tuned;
  size_t workspace_bytes = 0;
  std::string perfdb_path;  ///< the file the winner came from when source is perfdb
};

/// The algorithm to run `p` with on options.device for `path` (cache -> perfdb -> find mode).
/// Throws conv::Error as best_forward documents.
Choice choose(const ConvProblem& p, const ForwardOptions& options, ExecPath path);

/// One named algorithm and config for `p` on `device`, checked: throws conv::Error naming
/// algo_id (unknown, other device, not applicable, with the reason) or config (unknown).
Choice named_choice(const ConvProblem& p, const std::string& algo_id, const std::string& config,
                    const Device& device);

/// Forgets the in-process winner cache (tests use it to force a perf-database read).
void clear_winner_cache();

/// CONVTUNE_FIND_MODE if set (throws conv::Error naming it when invalid), else options'.
FindMode effective_find_mode(const ForwardOptions& options);

}  // namespace conv
