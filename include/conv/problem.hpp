// conv::ConvProblem: one forward convolution, and its text form (oneDNN benchdnn descriptors).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conv/error.hpp"

namespace conv {

enum class DType { f32 };
enum class Layout { NCHW };

/// One forward convolution y = conv(x, w) + bias.
///
/// Tensors: x is N x C x H x W (NCHW), w is K x C/groups x R x S (KCRS = OIHW), bias is K,
/// y is N x K x OH x OW (NCHW); all fp32, dense, row-major.
/// OH = (H + pad_top + pad_bottom - ((R - 1) * dilation_h + 1)) / stride_h + 1, OW likewise.
/// Dilation 1 means a dense kernel (benchdnn writes that as dh0).
struct ConvProblem {
  int64_t N = 1, C = 1, H = 1, W = 1;  ///< input: batch, channels, height, width
  int64_t K = 1, R = 1, S = 1;         ///< output channels, kernel height, kernel width
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  DType dtype = DType::f32;
  Layout layout = Layout::NCHW;
  std::string name;  ///< optional layer name (descriptor's n"..."); not part of key()

  int64_t OH() const;
  int64_t OW() const;
  int64_t Cg() const { return C / groups; }  ///< input channels per group
  int64_t Kg() const { return K / groups; }  ///< output channels per group
  /// Direct-convolution FLOPs: 2 * N * K * (C/groups) * R * S * OH * OW (bias not counted).
  double flops() const;

  int64_t x_elems() const { return N * C * H * W; }
  int64_t w_elems() const { return K * Cg() * R * S; }
  int64_t y_elems() const { return N * K * OH() * OW(); }
  int64_t bias_elems() const { return K; }
  int64_t x_bytes() const { return x_elems() * 4; }
  int64_t w_bytes() const { return w_elems() * 4; }
  int64_t y_bytes() const { return y_elems() * 4; }

  /// Throws conv::Error naming the first bad field: sizes < 1, strides/dilations < 1, negative
  /// padding, C or K not divisible by groups, output size < 1, or element counts whose byte size
  /// overflows 64 bits.
  void validate() const;

  /// Canonical perf-database key: the descriptor with every field explicit and no name, e.g.
  /// "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0". Two problems have the same key
  /// exactly when they are the same convolution.
  std::string key() const;

  bool operator==(const ConvProblem& o) const;  ///< compares every field but name
  bool operator!=(const ConvProblem& o) const { return !(*this == o); }
};

/// Parses one oneDNN benchdnn convolution descriptor, e.g.
/// `g2mb1ic96ih27iw27oc256kh5kw5sh1sw1ph2pw2n"alexnet:conv2"`. `_` separators are allowed.
/// Defaults as benchdnn: iw=ih, kw=kh, sw=sh, pw=ph, dh=dw=0 (dense), g=1, mb=2 when omitted;
/// `oh`/`ow` given derive the bottom/right padding as benchdnn does.
/// Throws conv::Error with the character position of the first bad token, or the problem's
/// validate() error.
ConvProblem parse_descriptor(std::string_view text);

/// Prints a descriptor that parse_descriptor() reads back to the same problem (oh/ow are written
/// whenever bottom/right padding differs from top/left). The name is appended when non-empty.
std::string to_descriptor(const ConvProblem& p);

/// Reads a benchdnn batch file: one descriptor per line, `#` comments and blank lines skipped.
/// Throws conv::Error naming the file and line on unreadable files and bad descriptors.
std::vector<ConvProblem> read_batch_file(const std::string& path);

/// Builds a problem from MIOpenDriver-style flags (`-n -c -H -W -k -y -x -p -q -u -v -l -j -g`),
/// given as argv-like tokens, e.g. {"-n","1","-c","3",...}. Unset flags take MIOpenDriver's
/// defaults (documented in the implementation). Throws conv::Error naming the flag.
ConvProblem parse_miopen_flags(const std::vector<std::string>& args);

}  // namespace conv
