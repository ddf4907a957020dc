// Shape rules of Caffe layers, following BVLC Caffe's LayerSetUp/Reshape code
// (base_conv_layer.cpp, pooling_layer.cpp, concat_layer.cpp, eltwise_layer.cpp,
// inner_product_layer.cpp): the same defaults, the same rounding, the same refusals. Every value
// is range-checked before any arithmetic, so hostile files cannot overflow.
#include "caffe_layers.hpp"

#include <optional>

#include "quoted.hpp"

namespace conv::import::caffe_layers {

namespace {

/// One value per spatial axis.
struct HW {
  int64_t h, w;
};

/// Throws unless `v` is in [lo, kMaxDim].
void check_range(const Layer& l, const std::string& field, int64_t v, int64_t lo) {
  if (v < lo) l.fail(field, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  if (v > kMaxDim) l.fail(field, "must be <= 2^31, got " + std::to_string(v));
}

/// A per-axis parameter given as `name` (one value for both axes, or two: H then W) or as
/// <base>_h / <base>_w (`h`, `w` when present; base is "kernel" for kernel_size, else name), as
/// Caffe's 2-D layers read it. `pair_required`: one of the _h / _w pair alone is an error;
/// otherwise the absent one is 0. Without any value the result is `dflt`, or a "missing" error
/// when dflt is empty. Values must be >= `lo`.
HW spatial(const Layer& l, const std::string& param, const std::string& message_type,
           const std::string& name, const std::vector<int64_t>& values, std::optional<int64_t> h,
           std::optional<int64_t> w, bool pair_required, std::optional<int64_t> dflt, int64_t lo) {
  const std::string field = param + "." + name;
  const std::string base = name == "kernel_size" ? "kernel" : name;
  const std::string name_h = base + "_h", name_w = base + "_w";
  HW r{0, 0};
  if (h || w) {
    if (!values.empty())
      l.fail(field, "give either " + name + " or " + name_h + " and " + name_w + ", not both");
    const std::string both = " (Caffe's " + l.param.type() + " layer requires " + name_h + " and " +
                             name_w + " together)";
    if (pair_required && !h)
      l.fail(param + "." + name_h, "missing: " + name_w + " needs it" + both);
    if (pair_required && !w)
      l.fail(param + "." + name_w, "missing: " + name_h + " needs it" + both);
    r = {h.value_or(0), w.value_or(0)};
    check_range(l, param + "." + name_h, r.h, lo);
    check_range(l, param + "." + name_w, r.w, lo);
    return r;
  }
  if (values.empty()) {
    if (!dflt)
      l.missing(field, message_type, "give " + name + " (or " + name_h + " and " + name_w + ")");
    return {*dflt, *dflt};
  }
  if (values.size() > 2)
    l.fail(field,
           std::to_string(values.size()) + " values; a 2-D layer takes 1 (both axes) or 2 (H, W)");
  for (int64_t v : values) check_range(l, field, v, lo);
  return values.size() == 1 ? HW{values[0], values[0]} : HW{values[0], values[1]};
}

template <typename Repeated>
std::vector<int64_t> to_vector(const Repeated& r) {
  return std::vector<int64_t>(r.begin(), r.end());
}

/// The bottom must be 4-D (NCHW) for spatial layers.
void need_4d(const Layer& l, const std::string& bottom, const Shape& x) {
  if (x.size() != 4)
    l.fail("bottom \"" + bottom + "\"",
           "has shape " + to_string(x) + "; " + l.param.type() + " needs a 4-D NCHW blob");
}

/// Canonical axis index of `axis` (negative counts from the end) for a blob of rank `rank`.
int64_t canonical_axis(const Layer& l, const std::string& field, int64_t axis, size_t rank) {
  const int64_t n = static_cast<int64_t>(rank);
  if (axis < -n || axis >= n)
    l.fail(field, "axis " + std::to_string(axis) + " is out of range for a " + std::to_string(n) +
                      "-D blob");
  return axis < 0 ? axis + n : axis;
}

}  // namespace

std::string to_string(const Shape& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r.empty() ? "(scalar)" : r;
}

std::string Layer::label() const {
  const std::string n =
      param.name().empty() ? "#" + std::to_string(index) : conv::quoted(param.name());
  return "layer " + n + " (" + (param.type().empty() ? "no type" : param.type()) + ")";
}

std::string Layer::name() const {
  return param.name().empty() ? "layer" + std::to_string(index) : param.name();
}

void Layer::fail(const std::string& field, const std::string& what) const {
  src.fail(label() + ": " + field + ": " + what);
}

void Layer::missing(const std::string& field, const std::string& message_type,
                    const std::string& hint) const {
  std::string what = "missing: " + hint;
  for (const std::string& w : skipped)
    if (w.find("\"" + message_type + "\"") != std::string::npos) {
      what += " (the file has a field the importer skipped, a misspelling? " + w + ")";
      break;
    }
  fail(field, what);
}

ConvProblem convolution(const Layer& l, const std::string& bottom, const Shape& x) {
  const auto& cp = l.param.convolution_param();
  const std::string P = "convolution_param", T = "caffe.ConvolutionParameter";
  need_4d(l, bottom, x);
  if (canonical_axis(l, P + ".axis", cp.axis(), x.size()) != 1)
    l.fail(P + ".axis", "must be 1 (the channels of NCHW), got " + std::to_string(cp.axis()));
  if (!cp.has_num_output()) l.missing(P + ".num_output", T, "give num_output");
  check_range(l, P + ".num_output", cp.num_output(), 1);
  auto opt = [](bool has, uint32_t v) { return has ? std::optional<int64_t>(v) : std::nullopt; };
  const HW k = spatial(l, P, T, "kernel_size", to_vector(cp.kernel_size()),
                       opt(cp.has_kernel_h(), cp.kernel_h()), opt(cp.has_kernel_w(), cp.kernel_w()),
                       true, std::nullopt, 1);
  const HW s =
      spatial(l, P, T, "stride", to_vector(cp.stride()), opt(cp.has_stride_h(), cp.stride_h()),
              opt(cp.has_stride_w(), cp.stride_w()), true, 1, 1);
  const HW pad = spatial(l, P, T, "pad", to_vector(cp.pad()), opt(cp.has_pad_h(), cp.pad_h()),
                         opt(cp.has_pad_w(), cp.pad_w()), false, 0, 0);
  const HW d = spatial(l, P, T, "dilation", to_vector(cp.dilation()), std::nullopt, std::nullopt,
                       false, 1, 1);
  const int64_t g = cp.group();
  check_range(l, P + ".group", g, 1);
  if (x[1] % g != 0)
    l.fail(P + ".group", std::to_string(g) + " does not divide the " + std::to_string(x[1]) +
                             " input channels of bottom \"" + bottom + "\"");
  if (cp.num_output() % g != 0)
    l.fail(P + ".group",
           std::to_string(g) + " does not divide num_output " + std::to_string(cp.num_output()));
  // All values are <= 2^31, so extents and padded sizes fit easily in int64.
  const char* axis_names[2] = {"height", "width"};
  const int64_t in[2] = {x[2], x[3]}, kk[2] = {k.h, k.w}, dd[2] = {d.h, d.w},
                pp[2] = {pad.h, pad.w}, ss[2] = {s.h, s.w};
  for (int a = 0; a < 2; ++a) {
    const int64_t extent = dd[a] * (kk[a] - 1) + 1, padded = in[a] + 2 * pp[a];
    if (padded < extent)
      l.fail(P + ".pad", std::string("input ") + axis_names[a] + " " + std::to_string(in[a]) +
                             " + 2 * pad " + std::to_string(pp[a]) + " = " +
                             std::to_string(padded) + " is smaller than the dilated kernel " +
                             axis_names[a] + " " + std::to_string(extent) + " (kernel_size " +
                             std::to_string(kk[a]) + ", dilation " + std::to_string(dd[a]) +
                             "), so the output " + axis_names[a] + " would be < 1");
    const int64_t out = (padded - extent) / ss[a] + 1;
    if (out > kMaxDim)
      l.fail(P + ".pad",
             std::string("output ") + axis_names[a] + " " + std::to_string(out) + " is over 2^31");
  }
  ConvProblem p;
  p.N = x[0], p.C = x[1], p.H = x[2], p.W = x[3];
  p.K = cp.num_output(), p.R = k.h, p.S = k.w;
  p.stride_h = s.h, p.stride_w = s.w;
  p.pad_top = p.pad_bottom = pad.h;
  p.pad_left = p.pad_right = pad.w;
  p.dilation_h = d.h, p.dilation_w = d.w;
  p.groups = g;
  try {
    p.validate();  // what is left: tensors whose byte size overflows 64 bits
  } catch (const Error& e) {
    l.fail("convolution_param", e.what());
  }
  return checked(l.src, l.name(), p);
}

Shape convolution_output(const ConvProblem& p) {
  return {p.N, p.K, p.OH(), p.OW()};
}

Shape pooling(const Layer& l, const std::string& bottom, const Shape& x) {
  const auto& pp = l.param.pooling_param();
  const std::string P = "pooling_param", T = "caffe.PoolingParameter";
  need_4d(l, bottom, x);
  auto opt = [](bool has, uint32_t v) { return has ? std::optional<int64_t>(v) : std::nullopt; };
  auto single = [](bool has, uint32_t v) {
    return has ? std::vector<int64_t>{v} : std::vector<int64_t>{};
  };
  HW k{x[2], x[3]};
  if (pp.global_pooling()) {
    if (pp.has_kernel_size() || pp.has_kernel_h() || pp.has_kernel_w())
      l.fail(P + ".kernel_size", "must not be given with global_pooling: true");
  } else if (pp.has_kernel_size() && pp.has_kernel_h() != pp.has_kernel_w()) {
    // Caffe's PoolingLayer::LayerSetUp refuses kernel_size with both kernel_h and kernel_w, but
    // with only one of them it passes its checks and uses kernel_size, ignoring the other.
    k = spatial(l, P, T, "kernel_size", single(true, pp.kernel_size()), std::nullopt, std::nullopt,
                true, std::nullopt, 1);
  } else {
    k = spatial(l, P, T, "kernel_size", single(pp.has_kernel_size(), pp.kernel_size()),
                opt(pp.has_kernel_h(), pp.kernel_h()), opt(pp.has_kernel_w(), pp.kernel_w()), true,
                std::nullopt, 1);
  }
  const HW s = spatial(l, P, T, "stride", single(pp.has_stride(), pp.stride()),
                       opt(pp.has_stride_h(), pp.stride_h()), opt(pp.has_stride_w(), pp.stride_w()),
                       true, 1, 1);
  const HW pad =
      spatial(l, P, T, "pad", single(pp.has_pad(), pp.pad()), opt(pp.has_pad_h(), pp.pad_h()),
              opt(pp.has_pad_w(), pp.pad_w()), true, 0, 0);
  if (pp.global_pooling() && (pad.h || pad.w || s.h != 1 || s.w != 1))
    l.fail(P + ".global_pooling", "only pad 0 and stride 1 go with global_pooling: true");
  const bool padded = pad.h || pad.w;
  if (padded && pp.pool() == caffe::PoolingParameter::STOCHASTIC)
    l.fail(P + ".pad", "Caffe implements padding only for MAX and AVE pooling, not STOCHASTIC");
  const char* axis_names[2] = {"height", "width"};
  const int64_t in[2] = {x[2], x[3]}, kk[2] = {k.h, k.w}, ppad[2] = {pad.h, pad.w},
                ss[2] = {s.h, s.w};
  int64_t out[2];
  for (int a = 0; a < 2; ++a) {
    if (padded && ppad[a] >= kk[a])
      l.fail(P + ".pad", std::string("pad ") + axis_names[a] + " " + std::to_string(ppad[a]) +
                             " must be smaller than the kernel " + axis_names[a] + " " +
                             std::to_string(kk[a]));
    const int64_t span = in[a] + 2 * ppad[a] - kk[a];
    if (span < 0)
      l.fail(P + ".kernel_size", std::string("kernel ") + axis_names[a] + " " +
                                     std::to_string(kk[a]) + " is larger than the input " +
                                     axis_names[a] + " " + std::to_string(in[a]) + " + 2 * pad " +
                                     std::to_string(ppad[a]));
    const bool ceil = pp.round_mode() == caffe::PoolingParameter::CEIL;
    out[a] = (ceil ? (span + ss[a] - 1) / ss[a] : span / ss[a]) + 1;
    // Caffe: the last window must start inside the image or its top/left padding.
    if (padded && (out[a] - 1) * ss[a] >= in[a] + ppad[a]) --out[a];
    if (out[a] > kMaxDim)
      l.fail(P + ".pad", std::string("output ") + axis_names[a] + " " + std::to_string(out[a]) +
                             " is over 2^31");
  }
  return {x[0], x[1], out[0], out[1]};
}

Shape concat(const Layer& l, const std::vector<std::string>& bottoms,
             const std::vector<Shape>& xs) {
  const auto& cp = l.param.concat_param();
  if (cp.has_axis() && cp.has_concat_dim())
    l.fail("concat_param.concat_dim", "give either axis or the legacy concat_dim, not both");
  const std::string field = cp.has_concat_dim() ? "concat_param.concat_dim" : "concat_param.axis";
  const int64_t axis = canonical_axis(
      l, field, cp.has_concat_dim() ? int64_t{cp.concat_dim()} : cp.axis(), xs[0].size());
  Shape r = xs[0];
  for (size_t j = 1; j < xs.size(); ++j) {
    bool same = xs[j].size() == r.size();
    for (size_t a = 0; same && a < r.size(); ++a)
      same = static_cast<int64_t>(a) == axis || xs[j][a] == r[a];
    if (!same)
      l.fail("bottom \"" + bottoms[j] + "\"",
             "shape " + to_string(xs[j]) + " does not match bottom \"" + bottoms[0] + "\" " +
                 to_string(xs[0]) + " outside the concat axis " + std::to_string(axis));
    r[axis] += xs[j][axis];  // each term <= 2^31: no overflow before the check below
    if (r[axis] > kMaxDim) l.fail(field, "concatenated size is over 2^31");
  }
  return r;
}

Shape eltwise(const Layer& l, const std::vector<std::string>& bottoms,
              const std::vector<Shape>& xs) {
  const auto& ep = l.param.eltwise_param();
  if (ep.coeff_size() != 0 && ep.coeff_size() != static_cast<int>(xs.size()))
    l.fail("eltwise_param.coeff", std::to_string(ep.coeff_size()) + " values for " +
                                      std::to_string(xs.size()) + " bottoms; give one per bottom");
  if (ep.coeff_size() != 0 && ep.operation() != caffe::EltwiseParameter::SUM)
    l.fail("eltwise_param.coeff", "only the SUM operation takes coefficients");
  for (size_t j = 1; j < xs.size(); ++j)
    if (xs[j] != xs[0])
      l.fail("bottom \"" + bottoms[j] + "\"",
             "shape " + to_string(xs[j]) + " differs from bottom \"" + bottoms[0] + "\" " +
                 to_string(xs[0]) + "; Eltwise needs equal shapes");
  return xs[0];
}

Shape inner_product(const Layer& l, const Shape& x) {
  const auto& ip = l.param.inner_product_param();
  const std::string P = "inner_product_param";
  if (!ip.has_num_output())
    l.missing(P + ".num_output", "caffe.InnerProductParameter", "give num_output");
  check_range(l, P + ".num_output", ip.num_output(), 1);
  const int64_t axis = canonical_axis(l, P + ".axis", ip.axis(), x.size());
  Shape r(x.begin(), x.begin() + axis);
  r.push_back(ip.num_output());
  return r;
}

}  // namespace conv::import::caffe_layers
