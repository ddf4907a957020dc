// conv::ForwardOptions from the keyword arguments conv2d and Plan share.
#pragma once

#include <optional>
#include <string>

#include "args.hpp"
#include "conv/conv.hpp"
#include "conv/error.hpp"

namespace convtune_py {

/// The threads keyword: an int in [0, 2^31) (0 = all). Throws conv::Error naming "threads".
inline int thread_arg(nanobind::handle v) {
  const int64_t t = int_arg(v, "threads", "[0, 2^31)");
  if (t < -0x7fffffff || t > 0x7fffffff)  // negative: resolve_threads says it
    throw conv::Error("threads: must be in [0, 2^31) (0 = all), got " + std::to_string(t));
  return static_cast<int>(t);
}

/// threads 0 = all; perfdb "" / nullopt = PerfDb::default_path(); find_mode "tune", "heuristic"
/// or "db_only" (nullopt = the default, tune; CONVTUNE_FIND_MODE overrides either way).
inline conv::ForwardOptions forward_options(int threads, const std::optional<std::string>& perfdb,
                                            const std::optional<std::string>& find_mode) {
  conv::ForwardOptions o;
  conv::resolve_threads(threads);  // throws conv::Error naming "threads" when negative
  o.threads = threads;
  if (perfdb) o.perfdb_path = *perfdb;
  if (find_mode) o.find_mode = conv::parse_find_mode(*find_mode);
  return o;
}

}  // namespace convtune_py
