// conv::Error: the one exception type convtune throws for bad input and failed calls.
#pragma once

#include <stdexcept>
#include <string>

namespace conv {

/// Thrown for every rejected input and every failed operation. The message names the offending
/// field or argument first (e.g. "ConvProblem.stride_h: must be >= 1, got 0").
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace conv
