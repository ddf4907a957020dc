// The checks of the Algorithm interface shared by every kernel, and its defaults.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "conv/algorithm.hpp"
#include "conv/device.hpp"
#include "conv/error.hpp"
#include "fork_guard.hpp"
#include "problem_fields.hpp"

namespace conv {

double exact_order_error_bound(const ConvProblem& p) {
  const double u = std::ldexp(1.0, -24);
  const double n = static_cast<double>(p.Cg() * p.R * p.S);
  return 16 * u * std::sqrt(n) + 8 * u;
}

std::vector<double> error_scale(const Algorithm& algo, const ConvProblem& p,
                                const std::string& config, const float* x, const float* w,
                                const double* abs_sum, int threads) {
  std::vector<double> s(abs_sum, abs_sum + p.y_elems());
  algo.add_error_scale(p, config, x, w, s.data(), threads);
  return s;
}

namespace {

// Packed weights are an opaque buffer: a CPU algorithm's starts with this tag, so that a buffer
// packed for another config, problem or algorithm (each of which lays the weights out
// differently) is refused instead of read as if it fitted. 64 bytes keep the payload aligned.
constexpr size_t kTagBytes = kPackedWeightsTagBytes;
constexpr uint64_t kTagMagic = 0x6b6361507674636eULL;  // "nctvPack"

struct Tag {
  uint64_t magic = kTagMagic;
  uint64_t hash = 0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(Tag) <= kTagBytes);

// FNV-1a over the algorithm, the config and the problem as ConvProblem::operator== sees it
// (key(): the output size, not the bottom and right padding that add no output). The batch
// counts: cpu.onednn's weights layout is oneDNN's choice for the whole problem.
uint64_t tag_hash(std::string_view id, const std::string& config, const ConvProblem& p) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const auto add = [&](const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  };
  add(id.data(), id.size());
  add("", 1);
  add(config.data(), config.size());
  const ProblemFields fields = key_fields(p);
  add(fields.data(), sizeof fields);
  return h;
}

std::string who(const Algorithm& a) {
  return ": " + std::string(a.id()) + ": ";
}

// The tensors a call writes (y, the workspace) must not share a byte with any other: a kernel
// reads x, w and the bias after it has written parts of y and the workspace, so an in-place
// call (y = x) had returned silently wrong results. The workspace counts with the `used` bytes
// of the config, not the caller's capacity: one scratch arena may hold the workspace and,
// after it, the tensors. Throws naming the written one first.
void check_disjoint(const Algorithm& algo, const ConvProblem& p, const ForwardArgs& a,
                    size_t packed_bytes, size_t used) {
  struct Span {
    const char* name;
    const void* at;
    size_t bytes;
  };
  Span spans[] = {
      {"y", a.y, static_cast<size_t>(p.y_bytes())},
      {"workspace", a.workspace, a.workspace ? a.workspace_size : 0},
      {"x", a.x, static_cast<size_t>(p.x_bytes())},
      {"w", a.packed_weights ? nullptr : a.w, static_cast<size_t>(p.w_bytes())},
      {"bias", a.bias, a.bias ? static_cast<size_t>(p.K) * sizeof(float) : 0},
      {"packed_weights", a.packed_weights, packed_bytes},
  };
  const auto overlap = [](const Span& s, const Span& t) {
    if (!s.at || !t.at || s.bytes == 0 || t.bytes == 0) return false;
    const auto lo = reinterpret_cast<uintptr_t>(s.at), tlo = reinterpret_cast<uintptr_t>(t.at);
    return lo < tlo + t.bytes && tlo < lo + s.bytes;
  };
  constexpr size_t kWritten = 2, kWorkspace = 1;
  bool trimmed = false;  // spans[kWorkspace] holds the used bytes, not the capacity
  for (size_t i = 0; i < kWritten; ++i) {
    for (size_t j = i + 1; j < std::size(spans); ++j) {
      const Span &s = spans[i], &t = spans[j];
      if (!overlap(s, t)) continue;
      if (!trimmed && (i == kWorkspace || j == kWorkspace)) {
        // Shrinking the span only removes overlaps, so the pairs checked before stay clear.
        spans[kWorkspace].bytes = std::min(spans[kWorkspace].bytes, used);
        trimmed = true;
        if (!overlap(s, t)) continue;
      }
      throw Error(std::string(s.name) + who(algo) + "overlaps " + t.name +
                  " (y and the workspace need memory of their own: in-place convolution is not "
                  "supported)");
    }
  }
}

}  // namespace

Applicability Algorithm::applicable(const ConvProblem& p) const {
  p.validate();
  return do_applicable(p);
}

std::vector<std::string> Algorithm::configs(const ConvProblem& p) const {
  p.validate();
  return do_configs(p);
}

size_t Algorithm::workspace_bytes(const ConvProblem& p, const std::string& config) const {
  // An algorithm's size formulas hold only for problems it runs (cpu.winograd's tile counts for
  // a strided problem had come out negative and wrapped).
  if (const Applicability ap = applicable(p); !ap.ok) throw Error(ap.reason);
  return do_workspace_bytes(p, config);
}

double Algorithm::error_bound(const ConvProblem& p, const std::string& config) const {
  p.validate();
  return do_error_bound(p, config);
}

double Algorithm::do_error_bound(const ConvProblem& p, const std::string& /*config*/) const {
  return exact_order_error_bound(p);
}

void Algorithm::add_error_scale(const ConvProblem& p, const std::string& config, const float* x,
                                const float* w, double* scale, int threads) const {
  p.validate();
  if (!x) throw Error("x" + who(*this) + "null input");
  if (!w) throw Error("w" + who(*this) + "null weights");
  if (!scale) throw Error("scale" + who(*this) + "null output");
  const int t = resolve_threads(threads);
  note_parallel_region(t);
  do_add_error_scale(p, config, x, w, scale, t);
}

size_t Algorithm::packed_weights_bytes(const ConvProblem& p, const std::string& config) const {
  if (const Applicability ap = applicable(p); !ap.ok) throw Error(ap.reason);
  const size_t n = do_packed_weights_bytes(p, config);
  return n == 0 || device() != Device::Kind::cpu ? n : n + kTagBytes;
}

void Algorithm::forward(const ConvProblem& p, const std::string& config,
                        const ForwardArgs& args) const {
  if (const Applicability ap = applicable(p); !ap.ok) throw Error(ap.reason);
  if (!args.x) throw Error("x" + who(*this) + "null input");
  if (!args.y) throw Error("y" + who(*this) + "null output");
  ForwardArgs a = args;
  a.threads = resolve_threads(args.threads);
  size_t packed_payload = 0;
  if (a.packed_weights) {
    const size_t n = do_packed_weights_bytes(p, config);
    packed_payload = n;
    if (n == 0) {
      a.packed_weights = nullptr;  // this config reads w
    } else if (device() == Device::Kind::cpu) {
      Tag tag;
      std::memcpy(&tag, a.packed_weights, sizeof tag);
      if (tag.magic != kTagMagic || tag.hash != tag_hash(id(), config, p) || tag.payload_bytes != n)
        throw Error("packed_weights" + who(*this) +
                    "not packed by pack_weights() for this algorithm, config \"" + config +
                    "\" and problem " + p.key());
      a.packed_weights = static_cast<const char*>(a.packed_weights) + kTagBytes;
    }
  }
  if (!a.w && !a.packed_weights)
    throw Error("w" + who(*this) + "null weights" +
                (args.packed_weights ? " (config \"" + config + "\" packs no weights)" : ""));
  // The one workspace check for every algorithm.
  const size_t need =
      a.packed_weights ? do_packed_workspace_bytes(p, config) : do_workspace_bytes(p, config);
  if (a.workspace_size < need || (need > 0 && !a.workspace))
    throw Error("workspace" + who(*this) + "config \"" + config + "\" needs " +
                std::to_string(need) + " bytes, got " +
                (a.workspace ? std::to_string(a.workspace_size) : "a null pointer"));
  check_disjoint(*this, p, a, packed_payload, need);
  note_parallel_region(a.threads);
  do_forward(p, config, a);
}

void Algorithm::pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                             void* packed, int threads) const {
  if (const Applicability ap = applicable(p); !ap.ok) throw Error(ap.reason);
  if (!w) throw Error("w" + who(*this) + "null weights");
  if (!packed) throw Error("packed" + who(*this) + "null buffer");
  const int t = resolve_threads(threads);
  note_parallel_region(t);
  const size_t n = do_packed_weights_bytes(p, config);
  if (n == 0)
    throw Error("config" + who(*this) + "\"" + config +
                "\" packs no weights (packed_weights_bytes is 0)");
  if (device() != Device::Kind::cpu) {
    do_pack_weights(p, config, w, packed, t);
    return;
  }
  // The tag is written last: a buffer whose packing threw is not taken for a packed one.
  std::memset(packed, 0, kTagBytes);
  do_pack_weights(p, config, w, static_cast<char*>(packed) + kTagBytes, t);
  Tag tag;
  tag.hash = tag_hash(id(), config, p);
  tag.payload_bytes = n;
  std::memcpy(packed, &tag, sizeof tag);
}

void Algorithm::do_pack_weights(const ConvProblem& /*p*/, const std::string& config,
                                const float* /*w*/, void* /*packed*/, int /*threads*/) const {
  throw Error("config" + who(*this) + "\"" + config + "\" packs no weights");
}

}  // namespace conv
