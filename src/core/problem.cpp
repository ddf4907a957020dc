#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <vector>

#include "conv/problem.hpp"

#include "quoted.hpp"

namespace conv {

namespace {

int64_t extent(int64_t k, int64_t d) {
  return (k - 1) * d + 1;
}

[[noreturn]] void bad(const char* field, const std::string& what, int64_t got) {
  std::ostringstream s;
  s << "ConvProblem." << field << ": " << what << ", got " << got;
  throw Error(s.str());
}

void need_positive(const char* field, int64_t v) {
  if (v < 1) bad(field, "must be >= 1", v);
}

}  // namespace

int64_t ConvProblem::OH() const {
  if (stride_h < 1) return 0;  // unvalidated problem: no division by zero
  return (H + pad_top + pad_bottom - extent(R, dilation_h)) / stride_h + 1;
}

int64_t ConvProblem::OW() const {
  if (stride_w < 1) return 0;
  return (W + pad_left + pad_right - extent(S, dilation_w)) / stride_w + 1;
}

double ConvProblem::flops() const {
  return 2.0 * N * K * Cg() * R * S * static_cast<double>(OH()) * OW();
}

void ConvProblem::validate() const {
  // Sizes are bounded so that every later sum or product of two of them fits in int64.
  constexpr int64_t kMax = int64_t{1} << 31;
  const std::pair<const char*, int64_t> sizes[] = {{"N", N},
                                                   {"C", C},
                                                   {"H", H},
                                                   {"W", W},
                                                   {"K", K},
                                                   {"R", R},
                                                   {"S", S},
                                                   {"stride_h", stride_h},
                                                   {"stride_w", stride_w},
                                                   {"dilation_h", dilation_h},
                                                   {"dilation_w", dilation_w},
                                                   {"groups", groups}};
  for (const auto& [field, v] : sizes) {
    need_positive(field, v);
    if (v > kMax) bad(field, "must be <= 2^31", v);
  }
  const std::pair<const char*, int64_t> pads[] = {{"pad_top", pad_top},
                                                  {"pad_left", pad_left},
                                                  {"pad_bottom", pad_bottom},
                                                  {"pad_right", pad_right}};
  for (const auto& [field, v] : pads) {
    if (v < 0) bad(field, "must be >= 0", v);
    if (v > kMax) bad(field, "must be <= 2^31", v);
  }
  // The perf database and its text export hold names of at most 4096 bytes (longer ones failed
  // only at the database write, after tuning).
  if (name.size() > 4096)
    bad("name", "must be at most 4096 bytes", static_cast<int64_t>(name.size()));
  // Names reach Python, JSON and the perf database as text.
  if (const size_t i = std::min(utf8_error(name), name.find('\0')); i != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(name[i]));
    throw Error(std::string("ConvProblem.name: must be UTF-8 text without NUL bytes; byte ") +
                std::to_string(i) + " is " + byte);
  }
  if (C % groups != 0) bad("C", "must be divisible by groups (" + std::to_string(groups) + ")", C);
  if (K % groups != 0) bad("K", "must be divisible by groups (" + std::to_string(groups) + ")", K);
  if (H + pad_top + pad_bottom < extent(R, dilation_h))
    bad("H",
        "padded height is smaller than the dilated kernel height " +
            std::to_string(extent(R, dilation_h)) + ", so OH < 1",
        H);
  if (W + pad_left + pad_right < extent(S, dilation_w))
    bad("W",
        "padded width is smaller than the dilated kernel width " +
            std::to_string(extent(S, dilation_w)) + ", so OW < 1",
        W);
  // key() and to_descriptor() write OH and OW, and the descriptor grammar reads numbers up to
  // 2^31 only: a larger output would print a key that no parser reads back.
  // H alone is at most 2^31, so a larger output comes from the padding.
  // The larger pad of the two is named (a descriptor's oh/ow set the bottom/right one).
  const bool top = pad_top >= pad_bottom, left = pad_left >= pad_right;
  if (OH() > kMax)
    bad(top ? "pad_top" : "pad_bottom",
        "output height OH = " + std::to_string(OH()) + " must be <= 2^31",
        top ? pad_top : pad_bottom);
  if (OW() > kMax)
    bad(left ? "pad_left" : "pad_right",
        "output width OW = " + std::to_string(OW()) + " must be <= 2^31",
        left ? pad_left : pad_right);
  // Tensors are bounded to 2^48 bytes (256 TiB, more than any machine's memory) and the
  // direct-convolution work to 2^60 multiply-adds, so that the algorithms' workspace formulas (a
  // small multiple of a tensor, or im2col's (C/g*R*S) x (OH*OW) matrix) fit in 64 bits: an im2col
  // workspace that wraps to 0 bytes would be accepted. The message blames the field of the largest
  // factor (the one most likely mistyped) and lists every factor.
  struct Factor {
    const char* field;
    int64_t value;
  };
  // Algorithm::forward validates on every call: no allocation unless the check fails.
  auto check = [](const char* what, int64_t unit, int log2_limit, const char* units,
                  std::initializer_list<Factor> factors) {
    int64_t r = unit;
    bool over = false;
    for (const Factor& f : factors) over = over || __builtin_mul_overflow(r, f.value, &r);
    if (!over && r <= (int64_t{1} << log2_limit)) return;
    std::vector<int64_t> values;
    const Factor* largest = factors.begin();
    for (const Factor& f : factors) {
      values.push_back(f.value);
      if (f.value > largest->value) largest = &f;
    }
    if (unit != 1) values.push_back(unit);
    std::ostringstream s;
    s << "ConvProblem." << largest->field << ": " << what << " = ";
    for (size_t i = 0; i < values.size(); ++i) s << (i ? "*" : "") << values[i];
    s << " " << units << " is more than 2^" << log2_limit;
    throw Error(s.str());
  };
  auto check_bytes = [&](const char* what, std::initializer_list<Factor> factors) {
    check(what, 4, 48, "bytes", factors);
  };
  // An output or padded size is the padding's fault when the padding exceeds the input.
  const char* oh_field = pad_top + pad_bottom <= H ? "H" : top ? "pad_top" : "pad_bottom";
  const char* ow_field = pad_left + pad_right <= W ? "W" : left ? "pad_left" : "pad_right";
  check_bytes("x byte size N*C*H*W*4", {{"N", N}, {"C", C}, {"H", H}, {"W", W}});
  check_bytes("w byte size K*(C/groups)*R*S*4", {{"K", K}, {"C", Cg()}, {"R", R}, {"S", S}});
  check_bytes("y byte size N*K*OH*OW*4", {{"N", N}, {"K", K}, {oh_field, OH()}, {ow_field, OW()}});
  check_bytes("zero-padded x byte size N*C*(H+pad_top+pad_bottom)*(W+pad_left+pad_right)*4",
              {{"N", N},
               {"C", C},
               {oh_field, H + pad_top + pad_bottom},
               {ow_field, W + pad_left + pad_right}});
  check("direct-convolution work N*K*(C/groups)*R*S*OH*OW", 1, 60, "multiply-adds",
        {{"N", N}, {"K", K}, {"C", Cg()}, {"R", R}, {"S", S}, {oh_field, OH()}, {ow_field, OW()}});
  if (dtype != DType::f32) throw Error("ConvProblem.dtype: only f32 is supported");
  if (layout != Layout::NCHW) throw Error("ConvProblem.layout: only NCHW is supported");
}

std::string ConvProblem::key() const {
  validate();
  // Written with oh/ow, so bottom/right padding that yields no extra output row or column (and
  // thus does not change the convolution) does not change the key either.
  std::ostringstream s;
  s << "g" << groups << "mb" << N << "ic" << C << "ih" << H << "iw" << W << "oc" << K << "oh"
    << OH() << "ow" << OW() << "kh" << R << "kw" << S << "sh" << stride_h << "sw" << stride_w
    << "ph" << pad_top << "pw" << pad_left << "dh" << dilation_h - 1 << "dw" << dilation_w - 1;
  return s.str();
}

bool ConvProblem::operator==(const ConvProblem& o) const {
  return key() == o.key();
}

}  // namespace conv
