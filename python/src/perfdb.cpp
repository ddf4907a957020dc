// Perf databases and the device from Python: read_perfdb (every row, as `autotune db export
// --json` writes them), default_perfdb_path, fingerprint, cpu_isa, algorithms.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "bindings.hpp"
#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/perfdb.hpp"
#include "options.hpp"
#include "results.hpp"

namespace convtune_py {

namespace {

const char* kReadDoc = R"(Every row of a perf database file, read-only.

read_perfdb(path=None) -> dict

path: the SQLite perf database (default: default_perfdb_path()). Returns
{"path", "schema", "winners": [...], "candidates": [...]} with the fields of
`autotune db export --json`:
winners (ordered by fingerprint, key, path): fingerprint, key, path ("oneshot" or "packed"),
name (layer name when tuned), algo, config, median_ms, min_ms, quality {rounds, clean_rounds,
spread, noisy}, date (UTC ISO 8601), version;
candidates (by fingerprint, key, algo, config): fingerprint, key, algo, config, algo_version,
status ("ok", "rejected", "failed", "skipped"), median_ms, min_ms, max_ms, packed_median_ms,
packed_min_ms, max_error, workspace_bytes, message, quality, date, version.
Times in ms and errors are None where not measured. Raises convtune.Error when the file is
missing or not a convtune perf database.)";

nb::dict read_perfdb(nb::handle path_obj) {
  const std::optional<std::string> path = optional_path_arg(path_obj, "path");
  conv::PerfDb::Rows rows;
  std::string file;
  int schema = 0;
  {
    nb::gil_scoped_release unlocked;
    file = path ? *path : conv::PerfDb::default_path();
    conv::PerfDb db = conv::PerfDb::open(file, true);
    rows = db.rows();
    schema = db.file_schema_version();
  }
  nb::list winners, candidates;
  for (const auto& r : rows.winners) {
    const auto& w = r.winner;
    nb::dict d;
    d["fingerprint"] = r.fingerprint, d["key"] = r.key, d["path"] = conv::to_string(r.path);
    d["name"] = w.name, d["algo"] = w.algo_id, d["config"] = w.config;
    d["median_ms"] = number(w.median_ms), d["min_ms"] = number(w.min_ms);
    d["quality"] = quality(w.quality), d["date"] = w.date, d["version"] = w.version;
    winners.append(d);
  }
  for (const auto& r : rows.candidates) {
    const auto& c = r.candidate;
    nb::dict d;
    d["fingerprint"] = r.fingerprint, d["key"] = r.key, d["algo"] = c.algo_id;
    d["config"] = c.config, d["algo_version"] = c.algo_version,
    d["status"] = conv::to_string(c.status);
    d["median_ms"] = number(c.median_ms), d["min_ms"] = number(c.min_ms);
    d["max_ms"] = number(c.max_ms), d["packed_median_ms"] = number(c.packed_median_ms);
    d["packed_min_ms"] = number(c.packed_min_ms), d["max_error"] = number(c.max_error);
    d["workspace_bytes"] = c.workspace_bytes, d["message"] = c.message;
    d["quality"] = quality(c.quality), d["date"] = c.date, d["version"] = r.version;
    candidates.append(d);
  }
  nb::dict out;
  out["path"] = path_object(file);
  out["schema"] = schema;
  out["winners"] = winners;
  out["candidates"] = candidates;
  return out;
}

std::vector<std::string> algorithms() {
  std::vector<std::string> ids;
  for (const conv::Algorithm* a : conv::registry()) ids.emplace_back(a->id());
  return ids;
}

}  // namespace

void bind_perfdb(nb::module_& m) {
  m.def("read_perfdb", &read_perfdb, nb::arg("path").none() = nb::none(), kReadDoc);
  m.def(
      "default_perfdb_path", [] { return path_object(conv::PerfDb::default_path()); },
      "The user perf database path: $CONVTUNE_PERFDB, else $XDG_CACHE_HOME/convtune/"
      "perfdb.sqlite, else ~/.cache/convtune/perfdb.sqlite. Raises convtune.Error when none "
      "is set.");
  m.def(
      "fingerprint",
      [](nb::handle threads, nb::handle timing) {
        return conv::Device::cpu().fingerprint(thread_arg(threads),
                                               conv::parse_timing(str_arg(timing, "timing")));
      },
      nb::arg("threads").none() = 0, nb::arg("timing").none() = "cold",
      "The text that identifies this CPU and how it was timed in perf databases: "
      "'cpu|<brand>|<ISA>|threads=N|timing=cold' (threads 0 = the OpenMP default; timing 'cold', "
      "'warm' or 'hot'; '|onednn=<cap>' before '|threads' where ONEDNN_MAX_CPU_ISA keeps oneDNN "
      "below "
      "<ISA>). Raises convtune.Error naming threads or timing for a bad value or type.");
  m.def(
      "cpu_isa", [] { return std::string(conv::to_string(conv::cpu_isa())); },
      "The instruction set the CPU kernels use: 'avx512', 'avx2' or 'scalar' (capped by "
      "$CONVTUNE_MAX_ISA).");
  m.def("algorithms", &algorithms,
        "The registered algorithm ids in registry order, minus $CONVTUNE_DISABLE ones.");
}

}  // namespace convtune_py
