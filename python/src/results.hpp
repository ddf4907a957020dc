// Measurement values as Python objects, shared by tune()/explain() and read_perfdb().
#pragma once

#include <nanobind/nanobind.h>

#include "conv/perfdb.hpp"

namespace convtune_py {

/// A time or error, None where the library stores -1 (unknown).
inline nanobind::object number(double v) {
  return v >= 0 ? nanobind::object(nanobind::float_(v)) : nanobind::none();
}

/// MeasureQuality as {"rounds", "clean_rounds", "spread" (None when unknown), "noisy"}.
inline nanobind::dict quality(const conv::MeasureQuality& q) {
  nanobind::dict d;
  d["rounds"] = q.rounds;
  d["clean_rounds"] = q.clean_rounds;
  d["spread"] = number(q.spread);
  d["noisy"] = q.noisy;
  return d;
}

}  // namespace convtune_py
