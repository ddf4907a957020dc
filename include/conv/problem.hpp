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
  /// padding, a name longer than 4096 bytes, C or K not divisible by groups, output size < 1 or
  /// > 2^31 (the descriptor grammar's limit, so key() always parses back), x, w, y or the
  /// zero-padded x over 2^48 bytes (256 TiB), or direct-convolution work N*K*(C/g)*R*S*OH*OW
  /// over 2^60 multiply-adds (bounds under which every algorithm's workspace size fits 64 bits).
  void validate() const;

  /// Canonical perf-database key: the descriptor with every field explicit and no name, e.g.
  /// "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0". Two problems have the same key
  /// exactly when they are the same convolution. Throws as validate() for an invalid problem.
  std::string key() const;

  bool operator==(const ConvProblem& o) const;  ///< compares every field but name
  bool operator!=(const ConvProblem& o) const { return !(*this == o); }
};

/// Parses one oneDNN benchdnn convolution descriptor, e.g.
/// `g2mb1ic96ih27iw27oc256kh5kw5sh1sw1ph2pw2n"alexnet:conv2"`.
///
/// Tokens (any order, each at most once, `_` separators allowed, surrounding whitespace
/// ignored): g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw, each followed by a decimal number
/// in [0, 2^31], and the name: n"..." (`\"` and `\\` escape a quote and a backslash; tokens may
/// follow) or n<rest> (the rest of the text, as benchdnn); UTF-8 without control characters
/// (a name goes into batch files, one descriptor per line). 3D tokens (id od kd sd pd dd) are
/// rejected. Defaults and derivations as benchdnn's str2desc/sanitize_desc:
/// - g=1, mb=2; ic and oc are required.
/// - h tokens (ih oh kh sh ph dh): when any is given, ih and kh are required; sh=1, dh=0 (dense;
///   benchdnn dilation d is our dilation d+1). When none is given the problem is 1D along w
///   (ih=kh=1).
/// - w tokens: when none is given, w copies h (iw=ih, kw=kh, sw=sh, pw=ph, dw=dh, ow=oh); when any
///   is given, iw and kw are required and sw=1, dw=0 (benchdnn fails rather than mixing).
/// - Without oh: pad_top = pad_bottom = ph (default 0). With oh: ph defaults to
///   max(0, ((oh-1)*sh - ih + ext)/2) with ext = (kh-1)*(dh+1)+1, and
///   pad_bottom = (oh-1)*sh - ih + ext - pad_top; when that is negative, 0 is used if it gives
///   the same OH. Likewise for w.
/// Returns a validated problem. Throws conv::Error `descriptor "<text>": position <i>: <what>`
/// (i is the 0-based offset of the bad token) for an empty text, unknown, 3D or duplicate
/// tokens, a missing or too large number, an unterminated name, an oh/ow that no padding >= 0
/// gives; `descriptor "<text>": missing "<tok>"` for a required token; and
/// `descriptor "<text>": "<tok>": ConvProblem.<field>: ...` for a validate() error.
ConvProblem parse_descriptor(std::string_view text);

/// Prints a descriptor that parse_descriptor() reads back to the same problem (operator==) and
/// name: mb, ic, ih, oc, kh always; g, sh, ph, dh when not default; the w tokens only when w
/// differs from h; oh/ow whenever the bottom/right padding gives another output size than
/// top/left padding on both sides would (so asymmetric problems round-trip; end padding that
/// adds no output is dropped, as in key()). The name is appended as n"..." (`"` and `\`
/// escaped, control characters set through the API written as `_`) when non-empty. Printing is
/// canonical: equal problems with equal names print equal text.
std::string to_descriptor(const ConvProblem& p);

/// Reads a benchdnn batch file: whitespace-separated words, one or more per line (a UTF-8 byte
/// order mark at the start of the file is skipped). A word is a
/// descriptor (parse_descriptor) or a benchdnn option. `#` outside a quoted name starts a comment
/// to the end of the line; blank lines are skipped; a word ending in `\` continues with the next
/// word (benchdnn). Options: `--mb=N` sets the batch of the following descriptors (N = 0: as
/// written; this and nested files), `--reset` clears it, `--batch=FILE` reads FILE (relative to
/// this file's folder) in place; `--match=REGEX` keeps only the following descriptors (this and
/// nested files) in which the POSIX basic regular expression REGEX matches somewhere (as benchdnn:
/// regcomp with no flags, regexec), matched against the descriptor as to_descriptor() prints it
/// (`--mb` applied, name included: `mb1ic3ih227oc96kh11sh4n"alexnet:conv1"`); `--match=` (empty)
/// and `--reset` keep all again. `--dir=` other than FWD_B, FWD_D or FWD_I and
/// `--cfg=`/`--dt=` other than f32 are refused (they ask for another computation); every other
/// word starting with `-` (--conv, --mode=P, --alg, --attr-..., --stag, -v...) is ignored since
/// it does not change the forward convolution. Returns the problems in file order. Throws
/// conv::Error
/// `<path>:<line>: <descriptor error>` for a bad descriptor or option, and
/// `batch file "<path>": cannot open for reading` when the file cannot be read.
std::vector<ConvProblem> read_batch_file(const std::string& path);
/// As read_batch_file(path); `*unmatched` (when not null) is set to the number of descriptors
/// that `--match` left out.
std::vector<ConvProblem> read_batch_file(const std::string& path, size_t* unmatched);

/// Builds a problem from a MIOpenDriver conv command line given as argv-like tokens, e.g.
/// {"conv","-n","1","-c","3","-H","227","-W","227","-k","96","-y","11","-x","11","-u","4",
/// "-v","4","-F","1","-t","1"} (the leading sub-command is optional; the driver's program name,
/// a token whose last path component is `MIOpenDriver`, may precede it, as in a line pasted
/// from a log: {"./bin/MIOpenDriver","conv",...}, and then the sub-command must follow it).
/// Every flag of MIOpenDriver's conv driver is accepted, short or long (`--batchsize 8`,
/// `--batchsize=8`), a later one overriding an earlier one, with MIOpenDriver's defaults for
/// unset ones:
/// -n/--batchsize 100, -c/--in_channels 3, -H/--in_h 32, -W/--in_w 32, -k/--out_channels 32,
/// -y/--fil_h 3, -x/--fil_w 3, -p/--pad_h 0, -q/--pad_w 0 (symmetric padding),
/// -u/--conv_stride_h 1, -v/--conv_stride_w 1, -l/--dilation_h 1, -j/--dilation_w 1 (1 = dense),
/// -g/--group_count 1 (0 means 1); -z/--pad_mode same|valid recomputes the padding as
/// MIOpenDriver does (dense or 1x1 kernels only). Run-control and 3-D/transpose-only flags
/// (-i -V -C -t -w -s -P -o -d -e -b -a -D -S -G, -! -@ -# -$ -^ -% -Y -X) are checked for
/// their type and ignored. Values are decimal integers in [0, 2^31] for problem flags.
/// Throws conv::Error `MIOpen flag <flag>: ...` for an unknown flag, a missing or bad value, the
/// validate() error of the field the flag sets, and for what would change the fp32 NCHW forward
/// convolution: -F other than 1 ("forward only"), -m trans, -_ 3 (3-D), layouts other than
/// NCHW, -r (pad value) other than 0, -Z/-L vectorised tensors, -U/-T/-R casts; and
/// `MIOpenDriver sub-command "<s>": its data type is <type>, ...` for convfp16, convbfp16,
/// convint8, convfp8, convbfp8 and convfp64 (convtune computes fp32 only), and
/// `MIOpenDriver program name "<p>": ...` when no sub-command follows the program name.
ConvProblem parse_miopen_flags(const std::vector<std::string>& args);

/// Whether `token` is a MIOpenDriver conv flag (`-n`, `--batchsize`, `--batchsize=8`),
/// sub-command (`conv`, `convfp16`, ...) or program name (`MIOpenDriver`, any path before it:
/// `./bin/MIOpenDriver`); `value_follows` (optional) is set when the flag's
/// value is the next token. Lets a command line pick MIOpenDriver arguments out of its own.
bool is_miopen_arg(std::string_view token, bool* value_follows = nullptr);

}  // namespace conv
