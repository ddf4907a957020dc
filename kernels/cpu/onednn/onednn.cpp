// cpu.onednn: oneDNN (Intel, "oneAPI Deep Neural Network Library", v2.6, Debian libdnnl-dev)
// forward convolution, used as the baseline every other CPU algorithm is measured against.
// The convolution is created with algorithm::convolution_auto (config "auto"; "direct" =
// convolution_direct is offered only when "auto" picks a Winograd implementation) and
// format_tag::any for source, weights and destination, so oneDNN chooses its own layouts and JIT
// kernels (with 2.6 on AVX-512: brgconv with NHWC activations and Acdb32a/Acdb64a weights;
// nChw8c/OIhw8i8o on AVX2). The NCHW -> chosen source reorder, the KCRS -> chosen weights reorder
// and the chosen -> NCHW destination reorder run inside forward() (skipped where the choice is
// plain), so the algorithm takes and returns the same NCHW tensors as every other one. A Plan
// reorders the weights once (pack_weights). Config "plain" (offered when "auto" reorders
// something) gives oneDNN the NCHW/KCRS/NCHW tensors as they are: no reorder at all, which wins
// where the reorders cost more than the blocked kernels save (1x1 layers on small images).
// Cost: N*K*C/g*R*S*OH*OW FMAs for the direct kernels (Winograd F(4x4,3x3) when "auto" chooses
// it), plus one memory-bound pass over x, w and y for the reorders.
// Workspace: the reordered src, weights and dst buffers (64-byte aligned offsets) plus oneDNN's
// scratchpad (scratchpad_mode::user), the maximum over 1..thread_ceiling() threads. oneDNN itself
// still allocates small bookkeeping per execute (its argument map); all tensors and scratch come
// from the workspace.
#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "conv/algorithm.hpp"
#include "device_ops.hpp"
#include "kernels.hpp"
#include "problem_fields.hpp"

namespace conv::kernels {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

constexpr size_t kAlign = 64;
size_t round_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

[[noreturn]] void throw_dnnl(const std::string& what, const dnnl::error& e) {
  throw Error("cpu.onednn: " + what + ": " + e.what() + " (" + dnnl_status2str(e.status) + ")");
}

void check_status(dnnl_status_t s, const char* what) {
  if (s != dnnl_success)
    throw Error(std::string("cpu.onednn: ") + what + ": " + dnnl_status2str(s));
}

// oneDNN's OpenMP runtime reads omp_get_max_threads() both when it creates a primitive (the JIT
// convolutions fix their thread split, and size per-thread scratchpad, in the primitive
// descriptor) and when it executes one. threadpool_interop::set_max_concurrency exists only in
// threadpool builds, so the only per-call control with this build is the nthreads-var ICV, which
// OpenMP keeps per thread (per task): setting it here and restoring it on exit affects the calling
// thread alone, never other threads of the application.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(std::max(1, threads));
  }
  ~ScopedOmpThreads() { omp_set_num_threads(saved_); }
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

// The largest thread count workspace_bytes() and packed_weights_bytes() plan for; fixed for the
// life of the process so both answers never change. oneDNN's scratchpad grows with the thread
// count, so forward() runs a larger args.threads with this many threads instead (more OpenMP
// threads than processors only oversubscribe the cores).
int thread_ceiling() {
  static const int ceiling = std::max(omp_get_num_procs(), resolve_threads(0));
  return ceiling;
}

// CONVTUNE_MAX_ISA caps the baseline too, so a capped run compares like with like: oneDNN's
// own ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) wins when set. oneDNN accepts the cap only before
// its first ISA query; when the process used oneDNN before us, its setting stays.
void cap_onednn_isa() {
  const char* ours = std::getenv("CONVTUNE_MAX_ISA");
  if (!ours || !*ours || onednn_max_isa_env()) return;
  const CpuIsa isa = cpu_isa();
  try {
    dnnl::set_max_cpu_isa(isa == CpuIsa::avx512 ? dnnl::cpu_isa::avx512_core
                          : isa == CpuIsa::avx2 ? dnnl::cpu_isa::avx2
                                                : dnnl::cpu_isa::sse41);
  } catch (const dnnl::error&) {
  }
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine = [] {
    cap_onednn_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

// "auto": oneDNN's own layouts (reorders in and out) and algorithm; "direct": the same without
// Winograd; "plain": NCHW, KCRS and NCHW as they are, no reorder (oneDNN's gemm- or jit-based
// plain-layout kernels), which is faster where the reorders cost more than blocking saves.
enum class Variant { automatic, direct, plain };

Variant parse_config(const std::string& config) {
  if (config == "auto") return Variant::automatic;
  if (config == "direct") return Variant::direct;
  if (config == "plain") return Variant::plain;
  throw Error("config: cpu.onednn has \"auto\", \"direct\" and \"plain\", got \"" + config + "\"");
}

// The problem's plain (user-facing) memory descriptors.
struct PlainDescs {
  memory::desc x, w, b, y;
};

memory::dims weight_dims(const ConvProblem& p) {
  if (p.groups == 1) return {p.K, p.C, p.R, p.S};
  return {p.groups, p.Kg(), p.Cg(), p.R, p.S};
}

PlainDescs plain_descs(const ConvProblem& p) {
  const auto f32 = memory::data_type::f32;
  // KCRS weights with groups are exactly goihw: group g's K/g x C/g x R x S block is contiguous.
  return {memory::desc({p.N, p.C, p.H, p.W}, f32, tag::nchw),
          memory::desc(weight_dims(p), f32, p.groups == 1 ? tag::oihw : tag::goihw),
          memory::desc({p.K}, f32, tag::x),
          memory::desc({p.N, p.K, p.OH(), p.OW()}, f32, tag::nchw)};
}

// Must be called with the OpenMP thread count the primitive will run with.
dnnl::convolution_forward::primitive_desc make_conv_pd(const ConvProblem& p, Variant v) {
  const auto f32 = memory::data_type::f32;
  const PlainDescs plain = plain_descs(p);
  const memory::desc x_any({p.N, p.C, p.H, p.W}, f32, tag::any);
  const memory::desc w_any(weight_dims(p), f32, tag::any);
  const memory::desc y_any({p.N, p.K, p.OH(), p.OW()}, f32, tag::any);
  // oneDNN counts dilation from 0 (dense) where ConvProblem counts from 1.
  const bool as_is = v == Variant::plain;
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference,
      v == Variant::automatic ? dnnl::algorithm::convolution_auto
                              : dnnl::algorithm::convolution_direct,
      as_is ? plain.x : x_any, as_is ? plain.w : w_any, plain.b, as_is ? plain.y : y_any,
      {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_top, p.pad_left},
      {p.pad_bottom, p.pad_right});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine());
}

dnnl::reorder::primitive_desc make_reorder_pd(const memory::desc& from, const memory::desc& to) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to, attr);
}

// Everything decided for one (problem, variant, thread count): the convolution, the reorders it
// needs and where their buffers sit in the workspace. Must be built under ScopedOmpThreads.
struct Design {
  dnnl::convolution_forward::primitive_desc conv;
  memory::desc packed_w;                      // the layout pack_weights() writes
  dnnl::reorder::primitive_desc x_in, y_out;  // empty when the chosen layout is plain
  dnnl::reorder::primitive_desc w_in;         // plain KCRS -> conv layout; empty when equal
  dnnl::reorder::primitive_desc pw_in;        // packed layout -> conv layout; empty when equal
  size_t x_off = 0, w_off = 0, y_off = 0, scratch_off = 0, scratch_bytes = 0, total = 0;
};

size_t scratch_of(const dnnl::primitive_desc_base& pd) {
  return pd ? pd.scratchpad_desc().get_size() : 0;
}

// `packed_w` null: the packed layout is the convolution's own weights layout (the canonical design
// at thread_ceiling() threads defines it for every other thread count).
Design make_design(const ConvProblem& p, Variant v, const memory::desc* packed_w) {
  const PlainDescs plain = plain_descs(p);
  Design d;
  d.conv = make_conv_pd(p, v);
  const memory::desc x = d.conv.src_desc(), w = d.conv.weights_desc(), y = d.conv.dst_desc();
  d.packed_w = packed_w ? *packed_w : w;
  if (x != plain.x) d.x_in = make_reorder_pd(plain.x, x);
  if (y != plain.y) d.y_out = make_reorder_pd(y, plain.y);
  if (w != plain.w) d.w_in = make_reorder_pd(plain.w, w);
  if (w != d.packed_w) d.pw_in = make_reorder_pd(d.packed_w, w);
  size_t off = 0;
  const auto take = [&off](size_t bytes) {
    const size_t at = off;
    off += round_up(bytes);
    return at;
  };
  if (d.x_in) d.x_off = take(x.get_size());
  if (d.w_in || d.pw_in) d.w_off = take(w.get_size());
  if (d.y_out) d.y_off = take(y.get_size());
  // The primitives run one after another, so they share one scratchpad region.
  d.scratch_bytes = std::max({scratch_of(d.conv), scratch_of(d.x_in), scratch_of(d.y_out),
                              scratch_of(d.w_in), scratch_of(d.pw_in)});
  d.scratch_off = take(d.scratch_bytes);
  d.total = off;
  return d;
}

// Cache key: the problem's fields plus the variant, so a lookup allocates nothing.
using ProblemKey = std::tuple<ProblemFields, int>;
ProblemKey problem_key(const ConvProblem& p, Variant v) {
  return {problem_fields(p), static_cast<int>(v)};
}

// Thread-count-independent facts about (problem, variant), computed once.
struct Shape {
  bool ok = false;
  std::string reason;     // why oneDNN refused, when !ok
  size_t workspace = 0;   // max Design::total over 1..thread_ceiling() threads
  memory::desc packed_w;  // canonical packed weights layout
  bool packs = false;     // packed_w is not plain KCRS
  bool reorders = false;  // some tensor is reordered in or out (a layout other than plain)
  std::string impl;       // oneDNN implementation at thread_ceiling() threads
};

// Problems oneDNN 2.6 cannot be asked about, found with AVX-512 (none failed under the AVX2 cap):
// - its jit convolutions keep tensor sizes in 32-bit ints: creating the 1x1 convolution of an
//   output of 2^17 channels x 2^20 positions (2^37 elements, 0 modulo 2^32) divided by zero
//   (SIGFPE), and sizes that wrap to other values would index wrongly; the blocked layouts pad
//   channels to 16, so K = 1 and 2^28 output positions are 2^32 elements there;
// - creating a convolution takes host memory in proportion to the output width, about 3 KB per
//   column for a padded 1x1 (1.5-3 GB at 2^20 columns, so a valid problem of 2^24 could exhaust
//   24 GiB); 2^15 columns take about 100 MB;
// - likewise about 4 bytes per kernel tap (4.2 GB and 12 s for 8388607x129 taps).
constexpr int64_t kMaxOneDnnElems = (int64_t{1} << 31) - 1, kMaxOneDnnOw = int64_t{1} << 15,
                  kMaxOneDnnTaps = int64_t{1} << 20;

Shape make_shape(const ConvProblem& p, Variant v) {
  Shape s;
  // Tensor sizes counted with channels padded to 16, as the blocked layouts (nChw16c,
  // OIhw16i16o) store them.
  const auto up16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  struct Limit {
    const char* field;
    int64_t value, most;
    const char* what;
  };
  const char* const elems =
      " elements with channels padded to 16; oneDNN 2.6's jit convolutions index in 32 bits";
  const Limit limits[] = {
      {"x", p.N * up16(p.C) * p.H * p.W, kMaxOneDnnElems, elems},
      {"w", p.groups * up16(p.Kg()) * up16(p.Cg()) * p.R * p.S, kMaxOneDnnElems, elems},
      {"y", p.N * up16(p.K) * p.OH() * p.OW(), kMaxOneDnnElems, elems},
      {"OW", p.OW(), kMaxOneDnnOw,
       " output columns; oneDNN 2.6 takes about 3 KB of memory per column to create a "
       "convolution"},
      {"R, S", p.R * p.S, kMaxOneDnnTaps,
       " kernel taps; oneDNN 2.6 takes about 4 bytes of memory per tap to create a convolution"},
  };
  for (const Limit& l : limits)
    if (l.value > l.most) {
      s.reason = std::string(l.field) + ": " + std::to_string(l.value) + l.what +
                 ", so cpu.onednn takes at most " + std::to_string(l.most);
      return s;
    }
  try {
    {
      ScopedOmpThreads scope(thread_ceiling());
      Design d = make_design(p, v, nullptr);
      s.packed_w = d.packed_w;
      s.workspace = d.total;
      s.reorders = d.x_in || d.y_out || d.w_in;
      s.impl = d.conv.impl_info_str();
    }
    for (int t = 1; t < thread_ceiling(); ++t) {
      ScopedOmpThreads scope(t);
      s.workspace = std::max(s.workspace, make_design(p, v, &s.packed_w).total);
    }
    s.packs = s.packed_w != plain_descs(p).w;
    s.ok = true;
  } catch (const dnnl::error& e) {
    s.reason = std::string("oneDNN 2.6 cannot create this convolution: ") + e.what() + " (" +
               dnnl_status2str(e.status) + ")";
  }
  return s;
}

// One reusable set of memory objects and a stream: they carry per-call data handles, so two
// threads running the same problem at once each take their own.
struct Context {
  dnnl::stream stream;
  memory x_user, x_blk, w_plain, w_packed, w_blk, bias, y_blk, y_user;
  memory scratch_conv, scratch_x, scratch_y, scratch_w, scratch_pw;
};

memory unbound(const memory::desc& md) {
  return memory(md, cpu_engine(), DNNL_MEMORY_NONE);
}
memory unbound_scratch(const dnnl::primitive_desc_base& pd) {
  return pd ? unbound(pd.scratchpad_desc()) : memory();
}

// The primitives for one (problem, variant, thread count), ready to execute.
struct Executable {
  Design design;
  PlainDescs plain;
  size_t required = 0;  // workspace_bytes(): the Shape's maximum
  dnnl::primitive conv, x_in, y_out, w_in, pw_in;
  std::vector<float> zero_bias;  // stands in for a null bias: one primitive, one weights layout
  std::mutex pool_mutex;
  std::vector<std::unique_ptr<Context>> pool;

  std::unique_ptr<Context> make_context() const {
    auto c = std::make_unique<Context>();
    c->stream = dnnl::stream(cpu_engine());
    c->x_user = unbound(plain.x);
    c->w_plain = unbound(plain.w);
    c->w_packed = unbound(design.packed_w);
    c->bias = unbound(plain.b);
    c->y_user = unbound(plain.y);
    c->x_blk = unbound(design.conv.src_desc());
    c->w_blk = unbound(design.conv.weights_desc());
    c->y_blk = unbound(design.conv.dst_desc());
    c->scratch_conv = unbound_scratch(design.conv);
    c->scratch_x = unbound_scratch(design.x_in);
    c->scratch_y = unbound_scratch(design.y_out);
    c->scratch_w = unbound_scratch(design.w_in);
    c->scratch_pw = unbound_scratch(design.pw_in);
    return c;
  }
};

using ExecKey = std::tuple<ProblemKey, int>;

// The allowed global state: caches of oneDNN descriptors and primitives, keyed by problem (and
// thread count for primitives), never evicted (each entry is a few JIT kernels).
struct Cache {
  std::mutex mutex;
  std::map<ProblemKey, std::shared_ptr<const Shape>> shapes;
  std::map<ExecKey, std::shared_ptr<Executable>> executables;
};
Cache& cache() {
  static Cache c;
  return c;
}

std::shared_ptr<const Shape> get_shape(const ConvProblem& p, Variant v) {
  const ProblemKey key = problem_key(p, v);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.shapes.find(key);
    if (it != c.shapes.end()) return it->second;
  }
  // Built outside the lock: descriptor creation takes milliseconds; a racing thread's copy wins.
  auto shape = std::make_shared<const Shape>(make_shape(p, v));
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.shapes.emplace(key, std::move(shape)).first->second;
}

const Shape& usable_shape(const std::shared_ptr<const Shape>& s) {
  if (!s->ok) throw Error("problem: cpu.onednn cannot run it: " + s->reason);
  return *s;
}

std::shared_ptr<Executable> get_executable(const ConvProblem& p, Variant v, int threads) {
  const ExecKey key{problem_key(p, v), threads};
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.executables.find(key);
    if (it != c.executables.end()) return it->second;
  }
  const auto shape = get_shape(p, v);
  const Shape& s = usable_shape(shape);
  auto e = std::make_shared<Executable>();
  try {
    ScopedOmpThreads scope(threads);
    e->design = make_design(p, v, &s.packed_w);
    e->plain = plain_descs(p);
    e->required = s.workspace;
    e->conv = dnnl::convolution_forward(e->design.conv);
    if (e->design.x_in) e->x_in = dnnl::reorder(e->design.x_in);
    if (e->design.y_out) e->y_out = dnnl::reorder(e->design.y_out);
    if (e->design.w_in) e->w_in = dnnl::reorder(e->design.w_in);
    if (e->design.pw_in) e->pw_in = dnnl::reorder(e->design.pw_in);
    e->zero_bias.assign(p.K, 0.0f);
    e->pool.push_back(e->make_context());
    e->pool.reserve(8);
  } catch (const dnnl::error& err) {
    throw_dnnl("creating the primitives for " + p.key(), err);
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.executables.emplace(key, std::move(e)).first->second;
}

// Borrows a Context from the executable's pool for one call.
class ContextLease {
 public:
  explicit ContextLease(Executable& e) : e_(e) {
    {
      std::lock_guard<std::mutex> lock(e_.pool_mutex);
      if (!e_.pool.empty()) {
        c_ = std::move(e_.pool.back());
        e_.pool.pop_back();
      }
    }
    if (!c_) c_ = e_.make_context();  // only when calls on this problem overlap
  }
  ~ContextLease() {
    std::lock_guard<std::mutex> lock(e_.pool_mutex);
    e_.pool.push_back(std::move(c_));
  }
  Context& operator*() const { return *c_; }
  Context* operator->() const { return c_.get(); }

 private:
  Executable& e_;
  std::unique_ptr<Context> c_;
};

void execute(const dnnl::primitive& prim, const Context& c,
             std::initializer_list<dnnl_exec_arg_t> args, const char* what) {
  // The C call takes the arguments as given; the C++ wrapper would copy them into a vector.
  check_status(dnnl_primitive_execute(prim.get(), c.stream.get(), static_cast<int>(args.size()),
                                      args.begin()),
               what);
}

dnnl_exec_arg_t arg(int which, const memory& m) {
  return {which, m.get()};
}

class OneDnn final : public Algorithm {
 public:
  std::string_view id() const override { return "cpu.onednn"; }
  // oneDNN picks and writes the kernels: another oneDNN is another implementation.
  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    return "2+onednn." + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }
  Device::Kind device() const override { return Device::Kind::cpu; }
  NumericClass numeric_class() const override { return NumericClass::exact_order; }

  Applicability do_applicable(const ConvProblem& p) const override {
    if (p.dtype != DType::f32) return Applicability::no("dtype: cpu.onednn runs f32 only");
    if (p.layout != Layout::NCHW) return Applicability::no("layout: cpu.onednn runs NCHW only");
    const auto s = get_shape(p, Variant::automatic);
    if (!s->ok) return Applicability::no(s->reason);
    return Applicability::yes();
  }

  std::vector<std::string> do_configs(const ConvProblem& p) const override {
    std::vector<std::string> out{"auto"};
    // convolution_auto only ever differs from convolution_direct by choosing Winograd.
    const auto s = get_shape(p, Variant::automatic);
    if (s->ok && is_winograd(*s)) out.push_back("direct");
    // The plain variant differs only when "auto" chose other layouts.
    if (s->ok && s->reorders && get_shape(p, Variant::plain)->ok) out.push_back("plain");
    return out;
  }

  size_t do_workspace_bytes(const ConvProblem& p, const std::string& config) const override {
    return usable_shape(get_shape(p, parse_config(config))).workspace;
  }

  double do_error_bound(const ConvProblem& p, const std::string& config) const override {
    const auto s = get_shape(p, parse_config(config));
    if (s->ok && is_winograd(*s)) {
      // oneDNN's Winograd is F(4x4, 3x3) (6x6 tiles): its transforms amplify rounding by about
      // two orders of magnitude over the direct sum (Lavin & Gray 2016; Barabasz et al. 2020).
      return 256 * exact_order_error_bound(p);
    }
    return exact_order_error_bound(p);
  }

  size_t do_packed_weights_bytes(const ConvProblem& p, const std::string& config) const override {
    const Shape& s = usable_shape(get_shape(p, parse_config(config)));
    // Plain KCRS is already what the convolution reads: nothing to pack.
    return s.packs ? s.packed_w.get_size() : 0;
  }

  void do_pack_weights(const ConvProblem& p, const std::string& config, const float* w,
                       void* packed, int threads) const override {
    const Shape& s = usable_shape(get_shape(p, parse_config(config)));
    try {
      ScopedOmpThreads scope(threads);
      const memory::desc plain = plain_descs(p).w;
      memory from(plain, cpu_engine(), const_cast<float*>(w));
      memory to(s.packed_w, cpu_engine(), packed);
      dnnl::stream stream(cpu_engine());
      // Not the hot path (once per Plan), so the reorder is built and run with oneDNN's own
      // scratchpad.
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
    } catch (const dnnl::error& e) {
      throw_dnnl("packing the weights of " + p.key(), e);
    }
  }

  void do_forward(const ConvProblem& p, const std::string& config,
                  const ForwardArgs& a) const override {
    const Variant v = parse_config(config);
    const int threads = std::min(a.threads, thread_ceiling());
    const std::shared_ptr<Executable> e = get_executable(p, v, threads);
    const Design& d = e->design;
    char* ws = static_cast<char*>(a.workspace);

    try {
      ContextLease c(*e);
      ScopedOmpThreads scope(threads);
      c->x_user.set_data_handle(const_cast<float*>(a.x));
      c->y_user.set_data_handle(a.y);
      c->bias.set_data_handle(const_cast<float*>(a.bias ? a.bias : e->zero_bias.data()));
      c->x_blk.set_data_handle(ws + d.x_off);
      c->w_blk.set_data_handle(ws + d.w_off);
      c->y_blk.set_data_handle(ws + d.y_off);
      for (memory* m :
           {&c->scratch_conv, &c->scratch_x, &c->scratch_y, &c->scratch_w, &c->scratch_pw})
        if (*m) m->set_data_handle(ws + d.scratch_off);

      if (d.x_in)
        execute(e->x_in, *c,
                {arg(DNNL_ARG_FROM, c->x_user), arg(DNNL_ARG_TO, c->x_blk),
                 arg(DNNL_ARG_SCRATCHPAD, c->scratch_x)},
                "reordering the input to oneDNN's layout");

      // The weights the convolution reads: caller's KCRS or packed ones, reordered when the
      // convolution at this thread count wants another layout.
      const memory* weights;
      if (a.packed_weights) {
        c->w_packed.set_data_handle(const_cast<void*>(a.packed_weights));
        weights = &c->w_packed;
        if (d.pw_in) {
          execute(e->pw_in, *c,
                  {arg(DNNL_ARG_FROM, c->w_packed), arg(DNNL_ARG_TO, c->w_blk),
                   arg(DNNL_ARG_SCRATCHPAD, c->scratch_pw)},
                  "reordering packed weights to this thread count's layout");
          weights = &c->w_blk;
        }
      } else {
        c->w_plain.set_data_handle(const_cast<float*>(a.w));
        weights = &c->w_plain;
        if (d.w_in) {
          execute(e->w_in, *c,
                  {arg(DNNL_ARG_FROM, c->w_plain), arg(DNNL_ARG_TO, c->w_blk),
                   arg(DNNL_ARG_SCRATCHPAD, c->scratch_w)},
                  "reordering the weights to oneDNN's layout");
          weights = &c->w_blk;
        }
      }

      execute(e->conv, *c,
              {arg(DNNL_ARG_SRC, d.x_in ? c->x_blk : c->x_user), arg(DNNL_ARG_WEIGHTS, *weights),
               arg(DNNL_ARG_BIAS, c->bias), arg(DNNL_ARG_DST, d.y_out ? c->y_blk : c->y_user),
               arg(DNNL_ARG_SCRATCHPAD, c->scratch_conv)},
              "running the convolution");

      if (d.y_out)
        execute(e->y_out, *c,
                {arg(DNNL_ARG_FROM, c->y_blk), arg(DNNL_ARG_TO, c->y_user),
                 arg(DNNL_ARG_SCRATCHPAD, c->scratch_y)},
                "reordering the output to NCHW");
      check_status(dnnl_stream_wait(c->stream.get()), "waiting for the stream");
    } catch (const dnnl::error& err) {
      throw_dnnl("forward " + p.key(), err);
    }
  }

 private:
  static bool is_winograd(const Shape& s) { return s.impl.find("wino") != std::string::npos; }
};

}  // namespace

const Algorithm& cpu_onednn() {
  static const OneDnn algo;
  return algo;
}

}  // namespace conv::kernels
