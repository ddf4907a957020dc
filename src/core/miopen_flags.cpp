// MIOpenDriver conv command lines, as pasted from logs and bug reports. Flags, defaults and the
// "same"/"valid" padding modes follow ConvDriver::AddCmdLineArgs() and
// SetConvDescriptorFromCmdLineArgs() (MIOpen driver/conv_driver.hpp); values that would change
// the forward fp32 NCHW convolution we run are refused, run-control flags are checked and
// ignored.
#include <optional>
#include <string>

#include "conv/problem.hpp"
#include "quoted.hpp"

namespace conv {

namespace {

constexpr int64_t kMaxValue = int64_t{1} << 31;

enum class Kind {
  size,         // sets a ConvProblem field
  forward,      // -F: 1 (forward only) or absent
  mode,         // -m: conv (not trans)
  pad_mode,     // -z: default, same, valid
  layout,       // -I -O -f: NCHW
  spatial_dim,  // -_: 2
  zero,         // must be 0: -r pad_val, -Z tensor_vect
  one,          // must be 1: -L vector_length
  cast,         // -U -T -R: -1 (not set)
  ignored_int,  // run control and 3-D/transpose-only sizes: any integer
  ignored_str,  // file names, solution ids
};

struct Flag {
  char short_name;
  const char* long_name;
  Kind kind;
  int64_t ConvProblem::*field;  // Kind::size only
  int64_t default_value;        // Kind::size only
};

// MIOpenDriver's conv flags, in its order.
constexpr Flag kFlags[] = {
    {'I', "in_layout", Kind::layout, nullptr, 0},
    {'O', "out_layout", Kind::layout, nullptr, 0},
    {'f', "fil_layout", Kind::layout, nullptr, 0},
    {'_', "spatial_dim", Kind::spatial_dim, nullptr, 0},
    {'F', "forw", Kind::forward, nullptr, 0},
    {'n', "batchsize", Kind::size, &ConvProblem::N, 100},
    {'c', "in_channels", Kind::size, &ConvProblem::C, 3},
    {'!', "in_d", Kind::ignored_int, nullptr, 0},
    {'H', "in_h", Kind::size, &ConvProblem::H, 32},
    {'W', "in_w", Kind::size, &ConvProblem::W, 32},
    {'k', "out_channels", Kind::size, &ConvProblem::K, 32},
    {'@', "fil_d", Kind::ignored_int, nullptr, 0},
    {'y', "fil_h", Kind::size, &ConvProblem::R, 3},
    {'x', "fil_w", Kind::size, &ConvProblem::S, 3},
    {'#', "conv_stride_d", Kind::ignored_int, nullptr, 0},
    {'u', "conv_stride_h", Kind::size, &ConvProblem::stride_h, 1},
    {'v', "conv_stride_w", Kind::size, &ConvProblem::stride_w, 1},
    {'$', "pad_d", Kind::ignored_int, nullptr, 0},
    {'p', "pad_h", Kind::size, &ConvProblem::pad_top, 0},
    {'q', "pad_w", Kind::size, &ConvProblem::pad_left, 0},
    {'r', "pad_val", Kind::zero, nullptr, 0},
    {'%', "trans_output_pad_d", Kind::ignored_int, nullptr, 0},
    {'Y', "trans_output_pad_h", Kind::ignored_int, nullptr, 0},
    {'X', "trans_output_pad_w", Kind::ignored_int, nullptr, 0},
    {'i', "iter", Kind::ignored_int, nullptr, 0},
    {'V', "verify", Kind::ignored_int, nullptr, 0},
    {'C', "verification_cache", Kind::ignored_str, nullptr, 0},
    {'t', "time", Kind::ignored_int, nullptr, 0},
    {'w', "wall", Kind::ignored_int, nullptr, 0},
    {'s', "search", Kind::ignored_int, nullptr, 0},
    {'P', "printconv", Kind::ignored_int, nullptr, 0},
    {'o', "dump_output", Kind::ignored_int, nullptr, 0},
    {'d', "in_data", Kind::ignored_str, nullptr, 0},
    {'e', "weights", Kind::ignored_str, nullptr, 0},
    {'b', "bias", Kind::ignored_int, nullptr, 0},
    {'m', "mode", Kind::mode, nullptr, 0},
    {'z', "pad_mode", Kind::pad_mode, nullptr, 0},
    {'Z', "tensor_vect", Kind::zero, nullptr, 0},
    {'L', "vector_length", Kind::one, nullptr, 0},
    {'^', "dilation_d", Kind::ignored_int, nullptr, 0},
    {'l', "dilation_h", Kind::size, &ConvProblem::dilation_h, 1},
    {'j', "dilation_w", Kind::size, &ConvProblem::dilation_w, 1},
    {'a', "in_bias", Kind::ignored_str, nullptr, 0},
    {'g', "group_count", Kind::size, &ConvProblem::groups, 1},
    {'D', "dout_data", Kind::ignored_str, nullptr, 0},
    {'S', "solution", Kind::ignored_str, nullptr, 0},
    {'G', "gpualloc", Kind::ignored_int, nullptr, 0},
    {'U', "in_cast_type", Kind::cast, nullptr, 0},
    {'T', "out_cast_type", Kind::cast, nullptr, 0},
    {'R', "wei_cast_type", Kind::cast, nullptr, 0},
};

// MIOpenDriver's conv sub-commands other than "conv" (fp32), with their data types: convtune
// computes in fp32 only, so tuning them as fp32 would answer another question.
struct OtherSubcommand {
  const char* name;
  const char* data_type;
};
constexpr OtherSubcommand kOtherSubcommands[] = {
    {"convfp16", "fp16 (half)"}, {"convbfp16", "bf16 (bfloat16)"},
    {"convint8", "int8"},        {"convfp8", "fp8"},
    {"convbfp8", "bf8"},         {"convfp64", "fp64 (double)"}};

// The driver's program name as a log shows it: MIOpenDriver, with any path before it.
bool is_program_name(std::string_view token) {
  const size_t slash = token.rfind('/');
  return token.substr(slash == std::string_view::npos ? 0 : slash + 1) == "MIOpenDriver";
}

std::string name_of(const Flag& f) {
  return std::string("-") + f.short_name + "/--" + f.long_name;
}

// The flag a token names, and its inline value for `--long=value`.
const Flag* find_flag(std::string_view token, std::optional<std::string>* inline_value) {
  if (token.size() == 2 && token[0] == '-' && token[1] != '-') {
    for (const Flag& f : kFlags)
      if (f.short_name == token[1]) return &f;
    return nullptr;
  }
  if (token.size() < 3 || token.substr(0, 2) != "--") return nullptr;
  std::string_view name = token.substr(2);
  const size_t eq = name.find('=');
  if (eq != std::string_view::npos) {
    if (inline_value) *inline_value = std::string(name.substr(eq + 1));
    name = name.substr(0, eq);
  }
  for (const Flag& f : kFlags)
    if (name == f.long_name) return &f;
  return nullptr;
}

// A decimal integer; sizes in [0, 2^31], ignored integers in [-2^31, 2^31].
std::optional<int64_t> parse_int(std::string_view s, bool allow_negative) {
  const bool negative = allow_negative && !s.empty() && s[0] == '-';
  if (negative) s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
    if (v > kMaxValue) return std::nullopt;
  }
  return negative ? -v : v;
}

// Each ConvProblem field with the flag that sets it, to point validate() errors at the flag.
const Flag* flag_of_error(const std::string& message) {
  static constexpr std::pair<const char*, char> kFields[] = {
      {"N", 'n'},         {"C", 'c'},          {"H", 'H'},          {"W", 'W'},
      {"K", 'k'},         {"R", 'y'},          {"S", 'x'},          {"stride_h", 'u'},
      {"stride_w", 'v'},  {"pad_top", 'p'},    {"pad_bottom", 'p'}, {"pad_left", 'q'},
      {"pad_right", 'q'}, {"dilation_h", 'l'}, {"dilation_w", 'j'}, {"groups", 'g'}};
  for (const auto& [field, flag] : kFields)
    if (message.rfind(std::string("ConvProblem.") + field + ":", 0) == 0)
      for (const Flag& f : kFlags)
        if (f.short_name == flag) return &f;
  return nullptr;
}

// MIOpenDriver's "same" padding, per dimension: floor((k - s) / 2) when s divides the input,
// else floor((k - in % s) / 2), never negative.
int64_t same_pad(int64_t in, int64_t k, int64_t s) {
  const int64_t r = in % s == 0 ? k - s : k - in % s;
  return r > 0 ? r / 2 : 0;
}

}  // namespace

bool is_miopen_arg(std::string_view token, bool* value_follows) {
  std::optional<std::string> inline_value;
  const Flag* f = find_flag(token, &inline_value);
  if (value_follows) *value_follows = f && !inline_value;
  if (f) return true;
  if (token == "conv" || is_program_name(token)) return true;
  for (const OtherSubcommand& s : kOtherSubcommands)
    if (token == s.name) return true;
  return false;
}

ConvProblem parse_miopen_flags(const std::vector<std::string>& args) {
  std::optional<std::string> values[std::size(kFlags)];
  size_t i = 0;
  // A line pasted whole starts with the program name (./bin/MIOpenDriver conv -n 1 ...), which
  // the driver's sub-command must follow.
  if (!args.empty() && is_program_name(args[0])) {
    if (args.size() < 2 || args[1].empty() || args[1][0] == '-')
      throw Error("MIOpenDriver program name " + quoted(args[0]) +
                  ": its sub-command (\"conv\") must follow it");
    i = 1;
  }
  if (i < args.size() && !args[i].empty() && args[i][0] != '-') {
    const std::string& sub = args[i];
    for (const OtherSubcommand& s : kOtherSubcommands)
      if (sub == s.name)
        throw Error("MIOpenDriver sub-command " + quoted(sub) + ": its data type is " +
                    s.data_type +
                    ", but convtune computes fp32 convolutions only (the \"conv\" sub-command)");
    if (sub != "conv")
      throw Error("MIOpenDriver sub-command " + quoted(sub) +
                  ": expected \"conv\" (fp32 convolution)");
    ++i;
  }
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::optional<std::string> inline_value;
    const Flag* f = find_flag(a, &inline_value);
    if (!f)
      throw Error("MIOpen flag " + quoted(a) +
                  ": unknown flag (problem flags: -n -c -H -W -k -y -x -p -q -u -v -l -j -g; "
                  "see MIOpenDriver conv --help)");
    if (!inline_value && i + 1 >= args.size())
      throw Error("MIOpen flag " + name_of(*f) + ": missing value");
    values[f - kFlags] = inline_value ? *inline_value : args[++i];  // a later flag wins
  }

  ConvProblem p;
  std::string pad_mode = "default";
  for (size_t k = 0; k < std::size(kFlags); ++k) {
    const Flag& f = kFlags[k];
    if (f.kind == Kind::size) p.*(f.field) = f.default_value;
    if (!values[k]) continue;
    const std::string& v = *values[k];
    const std::string flag = "MIOpen flag " + name_of(f) + ": ";
    auto integer = [&](bool allow_negative) {
      const std::optional<int64_t> n = parse_int(v, allow_negative);
      if (!n)
        throw Error(flag + "expected an integer in [" + (allow_negative ? "-2^31" : "0") +
                    ", 2^31], got " + quoted(v));
      return *n;
    };
    switch (f.kind) {
      case Kind::size:
        p.*(f.field) = integer(false);
        break;
      case Kind::forward:
        if (integer(false) != 1)
          throw Error(flag + "forward only: convtune runs forward convolutions (-F 1), got " +
                      quoted(v) + " (0: fwd+bwd+wrw, 2: bwd, 4: wrw, 3/5/6: combinations)");
        break;
      case Kind::mode:
        if (v == "trans") throw Error(flag + "transposed convolution (\"trans\") is not supported");
        if (v != "conv") throw Error(flag + "expected \"conv\", got " + quoted(v));
        break;
      case Kind::pad_mode:
        if (v != "default" && v != "same" && v != "valid")
          throw Error(flag + "expected default, same or valid, got " + quoted(v));
        pad_mode = v;
        break;
      case Kind::layout:
        if (!v.empty() && v != "NCHW")
          throw Error(flag + "only NCHW tensors are supported, got " + quoted(v));
        break;
      case Kind::spatial_dim:
        if (integer(false) != 2)
          throw Error(flag + "only 2-D convolutions are supported, got " + quoted(v));
        break;
      case Kind::zero:
        if (integer(false) != 0) throw Error(flag + "only 0 is supported, got " + quoted(v));
        break;
      case Kind::one:
        if (integer(false) != 1) throw Error(flag + "only 1 is supported, got " + quoted(v));
        break;
      case Kind::cast:
        if (v != "-1") throw Error(flag + "casts are not supported (fp32 only), got " + quoted(v));
        break;
      case Kind::ignored_int:
        integer(true);
        break;
      case Kind::ignored_str:
        break;
    }
  }
  // MIOpenDriver treats group_count 0 as 1 (std::max(group_count, 1)).
  if (p.groups == 0) p.groups = 1;
  // As MIOpenDriver, the padding mode applies only to dense or 1x1 kernels.
  if (pad_mode != "default" &&
      ((p.dilation_h == 1 && p.dilation_w == 1) || (p.R == 1 && p.S == 1))) {
    if (pad_mode == "valid") {
      p.pad_top = p.pad_left = 0;
    } else if (p.stride_h > 0 && p.stride_w > 0) {
      p.pad_top = same_pad(p.H, p.R, p.stride_h);
      p.pad_left = same_pad(p.W, p.S, p.stride_w);
    }
  }
  p.pad_bottom = p.pad_top;
  p.pad_right = p.pad_left;
  try {
    p.validate();
  } catch (const Error& e) {
    const Flag* f = flag_of_error(e.what());
    const std::string what = e.what();
    // An output size below 1 comes from the kernel, padding and dilation as much as from the
    // input size: name all four flags (`conv -y 40` alone had blamed -H/--in_h).
    const bool h = what.find("dilated kernel height") != std::string::npos;
    if (h || what.find("dilated kernel width") != std::string::npos)
      throw Error(std::string("MIOpen flags ") +
                  (h ? "-H/--in_h, -y/--fil_h, -p/--pad_h and -l/--dilation_h: "
                     : "-W/--in_w, -x/--fil_w, -q/--pad_w and -j/--dilation_w: ") +
                  what);
    throw Error("MIOpen flag " + (f ? name_of(*f) : std::string("(problem)")) + ": " + what);
  }
  return p;
}

}  // namespace conv
