// conv::ForwardOptions from the keyword arguments conv2d and Plan share.
#pragma once

#include <optional>
#include <string>

#include "args.hpp"
#include "conv/conv.hpp"
#include "conv/error.hpp"

namespace convtune_py {

/// The threads keyword: an int in [0, conv::kMaxThreads] (0 = the OpenMP default). Throws
/// conv::Error naming "threads".
inline int thread_arg(nanobind::handle v) {
  static const std::string range = "[0, " + std::to_string(conv::kMaxThreads) + "]";
  const int64_t t = int_arg(v, "threads", range.c_str());
  conv::resolve_threads(t);  // throws conv::Error naming "threads" when out of range
  return static_cast<int>(t);
}

/// threads 0 = the OpenMP default; perfdb "" / nullopt = PerfDb::default_path(); find_mode "tune",
/// "heuristic" or "db_only" (nullopt = the default, tune; CONVTUNE_FIND_MODE overrides either way);
/// timing "cold", "hot" or "warm" (conv::Timing). Throws conv::Error naming the keyword.
inline conv::ForwardOptions forward_options(int threads, const std::optional<std::string>& perfdb,
                                            const std::optional<std::string>& find_mode,
                                            const std::string& timing) {
  conv::ForwardOptions o;
  conv::resolve_threads(threads);  // throws conv::Error naming "threads" when out of range
  o.threads = threads;
  if (perfdb) o.perfdb_path = *perfdb;
  if (find_mode) o.find_mode = conv::parse_find_mode(*find_mode);
  o.timing = conv::parse_timing(timing);
  return o;
}

}  // namespace convtune_py
