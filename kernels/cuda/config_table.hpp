// Running a CUDA algorithm's config from its table of {name, ..., run} rows (cuda.direct,
// cuda.implicit_gemm): one lookup and one error message that lists the table.
#pragma once

#include <string>
#include <string_view>

#include "conv/algorithm.hpp"
#include "conv/error.hpp"

namespace conv::gpu {

/// Runs the row of `table` named `config`; throws conv::Error `config: <algo> has no config
/// "<config>" (known: ...)` when there is none.
template <class Row, size_t N>
void run_config(const Row (&table)[N], std::string_view algo, const std::string& config,
                const ConvProblem& p, const ForwardArgs& a) {
  std::string known;
  for (const Row& r : table) {
    if (config == r.name) return r.run(p, a);
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  throw Error("config: " + std::string(algo) + " has no config \"" + config +
              "\" (known: " + known + ")");
}

}  // namespace conv::gpu
