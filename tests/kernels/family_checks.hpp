// Checks shared by the kernel families' test files: every config of an algorithm on a problem,
// with several thread counts and optionally packed weights, against the float64 reference.
#pragma once

#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>
#include <vector>

#include "conv/algorithm.hpp"
#include "support.hpp"

namespace convtest {

inline std::string label(const conv::ConvProblem& p, const std::string& config, bool packed,
                         const convtest::CheckResult& r) {
  return p.key() + " (" + p.name + ") config " + config + (packed ? " [packed]" : "") +
         ": max error " + std::to_string(r.max_error) + " bound " + std::to_string(r.bound) +
         ", non-finite " + std::to_string(r.nonfinite) + "; " + r.where;
}

// Checks every config in `configs` of `algo` on `ref` with each thread count, on packed weights
// where the thread count is `packed_threads`; returns the number of runs.
inline int check_configs(convtest::ReferenceCase& ref, const conv::Algorithm& algo,
                         const std::vector<std::string>& configs,
                         std::initializer_list<int> threads, int packed_threads = 0) {
  int runs = 0;
  for (const std::string& config : configs)
    for (int t : threads) {
      const bool packed = t == packed_threads;
      const auto r = ref.check(algo, config, packed, t);
      INFO(label(ref.problem(), config, packed, r) + ", " + std::string(algo.id()) + ", threads " +
           std::to_string(t));
      CHECK(r.nonfinite == 0);
      CHECK(r.max_error <= r.bound);
      ++runs;
    }
  return runs;
}

// check_configs on each of `descriptors` (reference data seeded seed + its index); returns the
// number of runs.
inline int check_descriptors(const conv::Algorithm& algo,
                             const std::vector<std::string>& descriptors,
                             const std::vector<std::string>& configs,
                             std::initializer_list<int> threads, int packed_threads,
                             uint64_t seed) {
  int runs = 0;
  for (size_t i = 0; i < descriptors.size(); ++i) {
    convtest::ReferenceCase ref(conv::parse_descriptor(descriptors[i]), seed + i);
    runs += check_configs(ref, algo, configs, threads, packed_threads);
  }
  return runs;
}

}  // namespace convtest
