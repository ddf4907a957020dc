// conv::Plan: choose once (on the packed-weights path), keep the workspace and the packed
// weights, run many times without any lookup.
#include <atomic>
#include <mutex>
#include <vector>

#include "choose.hpp"
#include "conv/conv.hpp"
#include "device_ops.hpp"

namespace conv {

struct Plan::Impl {
  ConvProblem problem;
  ForwardOptions options;
  const DeviceOps* ops = nullptr;
  Choice choice;
  ForwardResult result;
  DeviceBuffer workspace;
  DeviceBuffer packed;
  bool has_packed = false;
  const float* kept_w = nullptr;  // a copy of the weights, for algorithms that do not pack
  // Calls from several threads share the workspace and the packed weights: they take turns
  // (unlocked, they had silently mixed each other's intermediate results).
  std::mutex mutex;
  // has_packed || kept_w, readable without the mutex: Python asks it holding the GIL, which
  // waiting for another thread's execute() would hold for the whole convolution.
  std::atomic<bool> weights_kept{false};
};

Plan::Plan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;
Plan::~Plan() = default;

namespace {

std::unique_ptr<Plan::Impl> make_impl(const ConvProblem& p, const ForwardOptions& o) {
  p.validate();
  auto impl = std::make_unique<Plan::Impl>();
  impl->problem = p;
  impl->options = o;
  impl->options.threads = resolve_threads(o.threads);
  impl->ops = &device_ops(o.device);
  return impl;
}

void finish(Plan::Impl& impl) {
  const Choice& c = impl.choice;
  impl.result = {std::string(c.algo->id()), c.config, c.source, c.perfdb_path};
  if (impl.options.workspace) {
    if (impl.options.workspace_size < c.workspace_bytes)
      throw Error("workspace: " + impl.result.algo_id + " " + c.config + " needs " +
                  std::to_string(c.workspace_bytes) + " bytes, the caller gave " +
                  std::to_string(impl.options.workspace_size));
  } else {
    impl.workspace = DeviceBuffer(*impl.ops, c.workspace_bytes);
  }
}

}  // namespace

Plan Plan::create(const ConvProblem& p, const ForwardOptions& o) {
  auto impl = make_impl(p, o);
  impl->choice = choose(p, impl->options, ExecPath::packed);
  finish(*impl);
  return Plan(std::move(impl));
}

Plan Plan::create(const ConvProblem& p, const std::string& algo_id, const std::string& config,
                  const ForwardOptions& o) {
  auto impl = make_impl(p, o);
  impl->choice = named_choice(p, algo_id, config, o.device);
  finish(*impl);
  return Plan(std::move(impl));
}

Plan::Impl& Plan::impl() const {
  if (!impl_) throw Error("Plan: this plan was moved from");
  return *impl_;
}

void Plan::pack_weights(const float* w) {
  const std::lock_guard<std::mutex> lock(impl().mutex);
  if (!w) throw Error("w: null weight tensor");
  impl_->ops->check_pointer(w, "w");
  const Choice& c = impl_->choice;
  const size_t bytes = c.algo->packed_weights_bytes(impl_->problem, c.config);
  if (bytes == 0) {
    // This algorithm reads KCRS weights on every call: keep a copy of them, so that, as with the
    // algorithms that pack, changing the caller's array later never changes what execute()
    // computes, whichever algorithm was chosen.
    const size_t wb = static_cast<size_t>(impl_->problem.w_bytes());
    std::vector<unsigned char> host(wb);
    void* stream = impl_->options.stream;
    impl_->ops->download(host.data(), w, wb, stream);
    impl_->packed.reserve(*impl_->ops, wb);
    impl_->ops->upload(impl_->packed.data(), host.data(), wb, stream);
    impl_->ops->synchronize(stream);
    impl_->kept_w = static_cast<const float*>(impl_->packed.data());
    impl_->weights_kept = true;
    return;
  }
  impl_->packed.reserve(*impl_->ops, bytes);
  c.algo->pack_weights(impl_->problem, c.config, w, impl_->packed.data(), impl_->options.threads);
  impl_->has_packed = true;
  impl_->weights_kept = true;
}

bool Plan::has_packed_weights() const {
  return impl().weights_kept;
}

void Plan::execute(const float* x, const float* w, const float* bias, float* y) {
  const std::lock_guard<std::mutex> lock(impl().mutex);
  // A given w is the one used, as in any one-shot call: the packed weights are only for calls
  // without one (running them instead would silently answer for the weights packed earlier).
  const bool given = w != nullptr;
  if (!w) w = impl_->kept_w;
  if (!x) throw Error("x: null input tensor");
  if (!y) throw Error("y: null output tensor");
  if (!w && !impl_->has_packed) throw Error("w: null weight tensor and no packed weights");
  const DeviceOps& ops = *impl_->ops;
  ops.check_pointer(x, "x");
  ops.check_pointer(y, "y");
  if (w) ops.check_pointer(w, "w");
  if (bias) ops.check_pointer(bias, "bias");
  ForwardArgs a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.threads = impl_->options.threads;
  a.stream = impl_->options.stream;
  if (impl_->has_packed && !given) a.packed_weights = impl_->packed.data();
  if (impl_->options.workspace) {
    a.workspace = impl_->options.workspace, a.workspace_size = impl_->options.workspace_size;
  } else {
    a.workspace = impl_->workspace.data(), a.workspace_size = impl_->workspace.size();
  }
  impl_->choice.algo->forward(impl_->problem, impl_->choice.config, a);
}

const ConvProblem& Plan::problem() const {
  return impl().problem;
}
const ForwardResult& Plan::choice() const {
  return impl().result;
}
size_t Plan::workspace_bytes() const {
  return impl().choice.workspace_bytes;
}

}  // namespace conv
