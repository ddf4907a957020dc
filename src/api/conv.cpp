// best_forward and forward: the two one-shot entry points.
#include "conv/conv.hpp"

#include <unordered_map>

#include "choose.hpp"
#include "device_ops.hpp"
#include "quoted.hpp"

namespace conv {

FindMode parse_find_mode(const std::string& text) {
  if (text == "tune") return FindMode::tune;
  if (text == "heuristic") return FindMode::heuristic;
  if (text == "db_only") return FindMode::db_only;
  throw Error("find_mode: expected tune, heuristic or db_only, got " + conv::quoted(text));
}

const char* to_string(ChoiceSource s) {
  switch (s) {
    case ChoiceSource::perfdb:
      return "perfdb";
    case ChoiceSource::tuned:
      return "tuned";
    case ChoiceSource::named:
      return "named";
    default:
      return "heuristic";
  }
}

namespace {

void check_tensors(const DeviceOps& ops, const float* x, const float* w, const float* bias,
                   const float* y) {
  if (!x) throw Error("x: null input tensor");
  if (!w) throw Error("w: null weight tensor");
  if (!y) throw Error("y: null output tensor");
  ops.check_pointer(x, "x");
  ops.check_pointer(w, "w");
  ops.check_pointer(y, "y");
  if (bias) ops.check_pointer(bias, "bias");
}

// The library-owned workspace: one growing buffer per calling thread and device.
void* library_workspace(const Device& d, const DeviceOps& ops, size_t bytes) {
  thread_local std::unordered_map<int, DeviceBuffer> buffers;
  DeviceBuffer& b = buffers[d.kind == Device::Kind::cpu ? -1 : d.index];
  b.reserve(ops, bytes);
  return b.data();
}

}  // namespace

ForwardResult best_forward(const ConvProblem& p, const float* x, const float* w, const float* bias,
                           float* y, const ForwardOptions& o) {
  p.validate();
  const DeviceOps& ops = device_ops(o.device);
  check_tensors(ops, x, w, bias, y);
  const Choice c = choose(p, o, ExecPath::oneshot);
  ForwardArgs a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.threads = resolve_threads(o.threads);
  a.stream = o.stream;
  if (o.workspace) {
    if (o.workspace_size < c.workspace_bytes)
      throw Error("workspace: " + std::string(c.algo->id()) + " " + c.config + " needs " +
                  std::to_string(c.workspace_bytes) + " bytes, the caller gave " +
                  std::to_string(o.workspace_size));
    a.workspace = o.workspace, a.workspace_size = o.workspace_size;
  } else {
    a.workspace = library_workspace(o.device, ops, c.workspace_bytes);
    a.workspace_size = c.workspace_bytes;
  }
  c.algo->forward(p, c.config, a);
  return {std::string(c.algo->id()), c.config, c.source, c.perfdb_path};
}

void forward(const std::string& algo_id, const std::string& config, const ConvProblem& p,
             const float* x, const float* w, const float* bias, float* y, void* workspace,
             size_t workspace_size, int threads) {
  p.validate();
  const Choice c = named_choice(p, algo_id, config, Device::cpu());
  const Algorithm* algo = c.algo;
  check_tensors(device_ops(Device::cpu()), x, w, bias, y);
  const int resolved_threads = resolve_threads(threads);
  const size_t need = c.workspace_bytes;
  if (workspace_size < need || (need > 0 && !workspace))
    throw Error("workspace: " + algo_id + " " + config + " needs " + std::to_string(need) +
                " bytes, got " + std::to_string(workspace ? workspace_size : 0));
  ForwardArgs a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.workspace = workspace, a.workspace_size = workspace_size;
  a.threads = resolved_threads;
  algo->forward(p, config, a);
}

}  // namespace conv
