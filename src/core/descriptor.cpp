// Text forms of a ConvProblem: oneDNN benchdnn convolution descriptors (parse, print, batch
// files). The descriptor rules follow benchdnn's str2desc() and sanitize_desc() (oneDNN
// tests/benchdnn/conv/conv_aux.cpp, tests/benchdnn/common.cpp), batch files follow benchdnn's
// batch(). MIOpenDriver command lines are miopen_flags.cpp.
// Everything here is linear in the length of the text.
#include <regex.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "conv/problem.hpp"
#include "quoted.hpp"
#include "regular_file.hpp"

namespace conv {

namespace {

// Every number must fit ConvProblem::validate()'s size bound; it also keeps the padding
// derivation below far from int64 overflow.
constexpr int64_t kMaxValue = int64_t{1} << 31;

bool is_digit(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}
bool is_space(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// Parses a decimal in [0, kMaxValue]; nullopt on anything else (sign, junk, too large).
std::optional<int64_t> parse_size(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
    if (v > kMaxValue) return std::nullopt;
  }
  return v;
}

// ---- descriptor parsing --------------------------------------------------------------------

struct Value {
  int64_t v = 0;
  size_t pos = 0;  // where the token starts, for error messages
};

// The tokens of one spatial dimension, as written.
struct Dim {
  std::optional<Value> i, o, k, s, p, d;
  bool any() const { return i || o || k || s || p || d; }
};

struct Parsed {
  std::optional<Value> g, mb, ic, oc;
  Dim h, w;
  std::string name;
};

class DescriptorParser {
 public:
  explicit DescriptorParser(std::string_view text) : text_(text) {}

  Parsed parse() {
    size_t begin = 0, end = text_.size();
    while (begin < end && is_space(text_[begin])) ++begin;
    while (end > begin && is_space(text_[end - 1])) --end;
    if (begin == end) fail("empty descriptor");
    pos_ = begin;
    end_ = end;
    Parsed r;
    while (pos_ < end_) {
      if (text_[pos_] == '_') {
        ++pos_;
        continue;
      }
      if (text_[pos_] == 'n') {
        parse_name(r);
        continue;
      }
      const size_t at = pos_;
      std::optional<Value>* slot = nullptr;
      const std::string_view tok = match_token(r, &slot);
      if (!slot) unknown_token(at);
      if (slot->has_value())
        fail_at(at, "duplicate " + quoted(tok) + " (first at position " +
                        std::to_string((*slot)->pos) + ")");
      pos_ += tok.size();
      *slot = Value{parse_number(tok), at};
    }
    return r;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("descriptor " + quoted_head(text_) + ": " + what);
  }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    fail("position " + std::to_string(at) + ": " + what);
  }

 private:
  std::string_view match_token(Parsed& r, std::optional<Value>** slot) {
    const std::pair<const char*, std::optional<Value>*> table[] = {
        {"mb", &r.mb},  {"ic", &r.ic},  {"ih", &r.h.i}, {"iw", &r.w.i},
        {"oc", &r.oc},  {"oh", &r.h.o}, {"ow", &r.w.o}, {"kh", &r.h.k},
        {"kw", &r.w.k}, {"sh", &r.h.s}, {"sw", &r.w.s}, {"ph", &r.h.p},
        {"pw", &r.w.p}, {"dh", &r.h.d}, {"dw", &r.w.d}, {"g", &r.g}};
    const std::string_view rest = text_.substr(pos_, end_ - pos_);
    for (const auto& [tok, s] : table) {
      if (rest.substr(0, std::strlen(tok)) == tok) {
        *slot = s;
        return tok;
      }
    }
    return {};
  }

  [[noreturn]] void unknown_token(size_t at) const {
    const std::string_view two = text_.substr(at, std::min<size_t>(2, end_ - at));
    for (const char* t : {"id", "od", "kd", "sd", "pd", "dd"})
      if (two == t)
        fail_at(at, "3D token " + quoted(two) +
                        " is not supported: convtune convolutions are 2D (ih/iw, kh/kw, ...)");
    size_t len = 0;
    while (at + len < end_ && std::isalpha(static_cast<unsigned char>(text_[at + len]))) ++len;
    fail_at(at, "unknown token " + quoted_head(text_.substr(at, std::max<size_t>(len, 1))) +
                    " (expected g mb ic ih iw oc oh ow kh kw sh sw ph pw dh dw or n)");
  }

  int64_t parse_number(std::string_view tok) {
    const size_t at = pos_;
    while (pos_ < end_ && is_digit(text_[pos_])) ++pos_;
    if (pos_ == at) fail_at(at, "expected a number after " + quoted(tok));
    const std::string_view digits = text_.substr(at, pos_ - at);
    const std::optional<int64_t> v = parse_size(digits);
    if (!v)
      fail_at(at, "number " + quoted_head(digits) + " after " + quoted(tok) +
                      " is too large (at most 2^31 = " + std::to_string(kMaxValue) + ")");
    return *v;
  }

  // n"quoted name" (\" and \\ escape a quote and a backslash; tokens may follow) or nbare_name
  // (benchdnn: everything after `n` is the name).
  void parse_name(Parsed& r) {
    const size_t at = pos_;
    if (name_pos_)
      fail_at(at, "duplicate \"n\" (first at position " + std::to_string(*name_pos_) + ")");
    name_pos_ = at;
    ++pos_;
    if (pos_ < end_ && text_[pos_] == '"') {
      ++pos_;
      std::string name;
      while (true) {
        if (pos_ >= end_) fail_at(at, "unterminated name: n\" without a closing '\"'");
        const char c = text_[pos_++];
        if (c == '"') break;
        if (c == '\\' && pos_ < end_ && (text_[pos_] == '"' || text_[pos_] == '\\')) {
          name += text_[pos_++];
          continue;
        }
        no_control(c, pos_ - 1);
        name += c;
      }
      utf8(name, at);
      r.name = std::move(name);
    } else {
      for (size_t i = pos_; i < end_; ++i) no_control(text_[i], i);
      r.name = std::string(text_.substr(pos_, end_ - pos_));
      utf8(r.name, at);
      pos_ = end_;
    }
  }

  // Names reach Python, JSON and terminals as text: bytes that are not UTF-8 would fail there
  // (UnicodeDecodeError) or print as garbage, far from the file that held them.
  void utf8(const std::string& name, size_t at) const {
    if (const size_t i = utf8_error(name); i != std::string_view::npos)
      fail_at(at, "name: not UTF-8 text (byte " + std::to_string(i) + " of the name)");
  }

  // A name is printed into batch files, one descriptor per line: a newline or other control
  // character in it could not be read back.
  void no_control(char c, size_t at) const {
    if (is_control(c)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
      fail_at(at, std::string("name: control character ") + hex + " (not allowed in names)");
    }
  }

  std::string_view text_;
  size_t pos_ = 0, end_ = 0;
  std::optional<size_t> name_pos_;
};

struct Resolved {
  int64_t i, k, s, d;  // d in our convention: 1 = dense
  int64_t p_begin, p_end;
};

struct DimNames {
  const char *i, *o, *k, *p;
};

// benchdnn's per-dimension rules: without oh, the output follows from the (default 0) padding
// and both sides get ph; with oh but no ph, ph = ((oh-1)*sh - ih + ext) / 2; with oh, the end
// padding is what makes exactly oh outputs.
Resolved resolve(const DescriptorParser& parser, const Dim& dim, const DimNames& n) {
  if (!dim.i || !dim.k)
    parser.fail(std::string("missing ") + quoted(!dim.i ? n.i : n.k) + ": a dimension with any " +
                "of its tokens given needs its input size " + quoted(n.i) + " and kernel size " +
                quoted(n.k) + " (benchdnn rule)");
  Resolved r;
  r.i = dim.i->v;
  r.k = dim.k->v;
  r.s = dim.s ? dim.s->v : 1;
  r.d = (dim.d ? dim.d->v : 0) + 1;
  r.p_begin = r.p_end = dim.p ? dim.p->v : 0;
  // Bad sizes are left for validate() to name; oh cannot be checked against them.
  if (!dim.o || r.i < 1 || r.k < 1 || r.s < 1) return r;
  const int64_t o = dim.o->v;
  auto fail_o = [&](const std::string& what) {
    parser.fail_at(dim.o->pos, quoted(n.o) + " " + std::to_string(o) + ": " + what);
  };
  if (o < 1) fail_o("must be >= 1");
  // Sizes are <= 2^31 + 1, so this stays below 2^63.
  const int64_t ext = (r.k - 1) * r.d + 1;
  const int64_t total = (o - 1) * r.s - r.i + ext;  // both paddings, with no unused end padding
  if (!dim.p) r.p_begin = std::max<int64_t>(0, total / 2);
  r.p_end = total - r.p_begin;
  if (r.p_end < 0) {
    // The smallest valid end padding, 0, still gives `o` outputs when the negative value only
    // cut into the last stride; otherwise oh asks for fewer outputs than the input gives.
    r.p_end = 0;
    const int64_t span = r.i + r.p_begin - ext;
    if (span < 0 || span / r.s + 1 != o)
      fail_o("too small: with " + quoted(n.p) + " " + std::to_string(r.p_begin) +
             " and no end padding the output size is " +
             (span < 0 ? std::string("< 1") : std::to_string(span / r.s + 1)));
  }
  if (r.p_end > kMaxValue)
    fail_o("too large: it needs end padding " + std::to_string(r.p_end) + " > 2^31");
  return r;
}

// Each ConvProblem field with its descriptor token, to point validate() errors (which name the
// field) at the text the user wrote.
struct FieldName {
  const char *field, *token;
};
constexpr FieldName kFieldNames[] = {
    {"N", "mb"},         {"C", "ic"},          {"H", "ih"},          {"W", "iw"},
    {"K", "oc"},         {"R", "kh"},          {"S", "kw"},          {"stride_h", "sh"},
    {"stride_w", "sw"},  {"pad_top", "ph"},    {"pad_left", "pw"},   {"pad_bottom", "oh"},
    {"pad_right", "ow"}, {"dilation_h", "dh"}, {"dilation_w", "dw"}, {"groups", "g"},
};

const FieldName* field_of_error(const std::string& message) {
  for (const FieldName& f : kFieldNames)
    if (message.rfind(std::string("ConvProblem.") + f.field + ":", 0) == 0) return &f;
  return nullptr;
}

}  // namespace

ConvProblem parse_descriptor(std::string_view text) {
  DescriptorParser parser(text);
  const Parsed d = parser.parse();
  if (!d.ic) parser.fail("missing \"ic\" (input channels)");
  if (!d.oc) parser.fail("missing \"oc\" (output channels)");
  if (!d.h.any() && !d.w.any()) parser.fail("missing \"ih\" and \"kh\" (no spatial size given)");
  // benchdnn: a dimension none of whose tokens is given is trivial (h: size 1, a 1D
  // convolution along w) or copies h (w: square problem).
  Resolved rh{1, 1, 1, 1, 0, 0};
  if (d.h.any()) rh = resolve(parser, d.h, {"ih", "oh", "kh", "ph"});
  const Resolved rw = d.w.any() ? resolve(parser, d.w, {"iw", "ow", "kw", "pw"}) : rh;

  ConvProblem p;
  p.groups = d.g ? d.g->v : 1;
  p.N = d.mb ? d.mb->v : 2;
  p.C = d.ic->v;
  p.K = d.oc->v;
  p.H = rh.i;
  p.R = rh.k;
  p.stride_h = rh.s;
  p.dilation_h = rh.d;
  p.pad_top = rh.p_begin;
  p.pad_bottom = rh.p_end;
  p.W = rw.i;
  p.S = rw.k;
  p.stride_w = rw.s;
  p.dilation_w = rw.d;
  p.pad_left = rw.p_begin;
  p.pad_right = rw.p_end;
  p.name = d.name;
  try {
    p.validate();
  } catch (const Error& e) {
    const FieldName* f = field_of_error(e.what());
    // benchdnn's dh/dw count the gaps between taps: the dilation the error names is dh + 1.
    const bool dilation = f && f->token[0] == 'd';
    parser.fail((f ? quoted(f->token) + ": " : std::string()) + e.what() +
                (dilation ? " (" + quoted(f->token) + " is the dilation minus 1)" : ""));
  }
  return p;
}

// ---- descriptor printing -------------------------------------------------------------------

std::string to_descriptor(const ConvProblem& p) {
  p.validate();
  // oh/ow are written only when the end padding changes the output size from what padding
  // ph/pw on both sides gives: extra end padding that adds no output row is not part of the
  // convolution (see key()), and leaving it out makes the text canonical.
  auto symmetric_out = [](int64_t i, int64_t k, int64_t s, int64_t d, int64_t pad) {
    const int64_t span = i + 2 * pad - ((k - 1) * d + 1);
    return span < 0 ? int64_t{0} : span / s + 1;
  };
  const bool oh = symmetric_out(p.H, p.R, p.stride_h, p.dilation_h, p.pad_top) != p.OH();
  // w tokens are written only when w differs from h: benchdnn copies h to w when none is given,
  // and needs iw and kw when any is.
  const bool w = !(p.W == p.H && p.S == p.R && p.stride_w == p.stride_h &&
                   p.dilation_w == p.dilation_h && p.pad_left == p.pad_top && p.OW() == p.OH());
  const bool ow = w && symmetric_out(p.W, p.S, p.stride_w, p.dilation_w, p.pad_left) != p.OW();
  std::ostringstream s;
  if (p.groups != 1) s << "g" << p.groups;
  s << "mb" << p.N << "ic" << p.C << "ih" << p.H;
  if (w) s << "iw" << p.W;
  s << "oc" << p.K;
  if (oh) s << "oh" << p.OH();
  if (ow) s << "ow" << p.OW();
  s << "kh" << p.R;
  if (w) s << "kw" << p.S;
  if (p.stride_h != 1) s << "sh" << p.stride_h;
  if (w && p.stride_w != 1) s << "sw" << p.stride_w;
  if (p.pad_top != 0 || oh) s << "ph" << p.pad_top;  // with oh, a missing ph would be derived
  if (w && (p.pad_left != 0 || ow)) s << "pw" << p.pad_left;
  if (p.dilation_h != 1) s << "dh" << p.dilation_h - 1;
  if (w && p.dilation_w != 1) s << "dw" << p.dilation_w - 1;
  if (!p.name.empty()) {
    s << "n\"";
    // As model imports do: a control character set through the API would end the line.
    for (char c : underscore_controls(p.name)) {
      if (c == '"' || c == '\\') s << '\\';
      s << c;
    }
    s << '"';
  }
  return s.str();
}

// ---- batch files ---------------------------------------------------------------------------

namespace {

// A compiled POSIX basic regular expression, as benchdnn's --match compiles it (regcomp with
// no flags; REG_NOSUB as only whether it matches is asked).
class Regex {
 public:
  // Throws conv::Error with regerror()'s message when `pattern` is not a valid expression.
  explicit Regex(const std::string& pattern) {
    if (const int rc = ::regcomp(&re_, pattern.c_str(), REG_NOSUB); rc != 0) {
      char what[256];
      ::regerror(rc, &re_, what, sizeof what);
      throw Error(std::string("not a valid regular expression (POSIX basic, as benchdnn): ") +
                  what);
    }
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { ::regfree(&re_); }
  // Whether the expression matches somewhere in `text` (benchdnn: regexec, not anchored).
  bool search(const std::string& text) const {
    return ::regexec(&re_, text.c_str(), 0, nullptr, 0) == 0;
  }

 private:
  regex_t re_;
};

struct BatchState {
  int64_t mb = 0;  // benchdnn --mb: 0 = as in the descriptor
  // benchdnn --match: only problems whose descriptor matches are read (null: all).
  std::shared_ptr<const Regex> match;
  size_t unmatched = 0;           // descriptors --match left out
  std::vector<std::string> open;  // the files being read, outermost first, as canonical paths
};

// The file's canonical path, or the path itself where it cannot be resolved (the open that
// follows then names the problem).
std::string canonical_or_same(const std::string& path) {
  const std::unique_ptr<char, decltype(&std::free)> c(::realpath(path.c_str(), nullptr),
                                                      &std::free);
  return c ? std::string(c.get()) : path;
}

// Splits a line into whitespace-separated words; a `"`...`"` part of a word may hold spaces
// and `#`; `#` elsewhere starts a comment.
std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_quote = false, have = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quote) {
      word += c;
      if (c == '\\' && i + 1 < line.size()) {
        word += line[++i];
      } else if (c == '"') {
        in_quote = false;
      }
      continue;
    }
    if (c == '#') break;
    if (is_space(c)) {
      if (have) words.push_back(word);
      word.clear();
      have = false;
      continue;
    }
    word += c;
    have = true;
    if (c == '"') in_quote = true;
  }
  if (have) words.push_back(word);  // an open quote is left for the descriptor parser to report
  return words;
}

// Why a benchdnn option would make the batch's problems other than forward fp32 convolutions,
// or null: tuning them as such would answer another question than the file asks.
const char* changes_the_convolution(const std::string& word) {
  auto value = [&](const char* option) -> std::optional<std::string> {
    const size_t n = std::strlen(option);
    if (word.compare(0, n, option) != 0) return std::nullopt;
    return word.substr(n);
  };
  if (auto dir = value("--dir="); dir && *dir != "FWD_B" && *dir != "FWD_D" && *dir != "FWD_I")
    return "convtune runs forward convolutions only (--dir=FWD_B, FWD_D or FWD_I)";
  for (const char* option : {"--cfg=", "--dt="})
    if (auto dt = value(option); dt && *dt != "f32" && *dt != "f32:f32:f32")
      return "convtune computes in fp32 only (f32)";
  return nullptr;
}

void read_batch(const std::string& path, BatchState& st, std::vector<ConvProblem>& out) {
  require_regular_file(path, "batch file");
  st.open.push_back(canonical_or_same(path));
  struct Close {
    std::vector<std::string>& open;
    ~Close() { open.pop_back(); }
  } close{st.open};
  std::ifstream in(path);
  if (!in) throw Error("batch file " + quoted(path) + ": cannot open for reading");
  std::string line, pending;  // pending: a word continued with a trailing backslash
  int lineno = 0, pending_line = 0;
  auto fail = [&](int at, const std::string& what) {
    throw Error(conv::escaped(path) + ":" + std::to_string(at) + ": " + what);
  };
  auto handle = [&](const std::string& word, int at) {
    if (word.rfind("--mb=", 0) == 0) {
      const std::optional<int64_t> mb = parse_size(word.substr(5));
      if (!mb) fail(at, quoted_head(word) + ": expected --mb=N with 0 <= N <= 2^31");
      st.mb = *mb;
    } else if (word.rfind("--match=", 0) == 0) {
      // benchdnn: an empty pattern matches everything.
      try {
        st.match = word.size() == 8 ? nullptr : std::make_shared<const Regex>(word.substr(8));
      } catch (const Error& e) {
        fail(at, quoted_head(word) + ": " + e.what());
      }
    } else if (word == "--reset") {
      st.mb = 0;
      st.match = nullptr;
    } else if (word.rfind("--batch=", 0) == 0) {
      std::string file = word.substr(8);
      const size_t slash = path.rfind('/');
      if (!file.empty() && file[0] != '/' && slash != std::string::npos)
        file = path.substr(0, slash + 1) + file;  // relative to the including file
      if (st.open.size() > 16)
        fail(at, quoted_head(word) + ": batch files nested more than 16 deep");
      const std::string canon = canonical_or_same(file);
      if (std::find(st.open.begin(), st.open.end(), canon) != st.open.end()) {
        std::string chain;
        for (const std::string& f : st.open) chain += quoted(f) + " -> ";
        fail(at, quoted_head(word) + ": a --batch cycle (" + chain + quoted(canon) +
                     "): that file is already being read");
      }
      try {
        read_batch(file, st, out);
      } catch (const Error& e) {
        fail(at, e.what());
      }
    } else if (const char* why = changes_the_convolution(word)) {
      fail(at, quoted_head(word) + ": " + why);
    } else if (word[0] == '-') {
      // Other benchdnn options (--conv, --alg, --attr-..., --stag, -v...) choose how a problem
      // is run or checked, not what the forward convolution computes.
    } else {
      try {
        ConvProblem p = parse_descriptor(word);
        if (st.mb != 0) {
          p.N = st.mb;
          p.validate();
        }
        // Matched as `autotune layers` prints the problem: its descriptor, name included.
        if (st.match && !st.match->search(to_descriptor(p))) {
          ++st.unmatched;
          return;
        }
        out.push_back(std::move(p));
      } catch (const Error& e) {
        fail(at, e.what());
      }
    }
  };
  while (std::getline(in, line)) {
    // Editors on Windows start UTF-8 files with a byte order mark, which is no part of a word.
    if (++lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    for (const std::string& w : split_words(line)) {
      std::string word = w;
      int at = lineno;
      if (!pending.empty()) {
        // benchdnn joins a word ending in `\` with the next word, without a space.
        word = pending + word;
        at = pending_line;
        pending.clear();
      }
      if (word == "\\") continue;  // a lone `\` only continues the line
      if (word.back() == '\\') {
        word.pop_back();
        pending = word;
        pending_line = at;
        continue;
      }
      handle(word, at);
    }
  }
  if (in.bad()) throw Error("batch file " + quoted(path) + ": read error");
  if (!pending.empty()) handle(pending, pending_line);
}

}  // namespace

std::vector<ConvProblem> read_batch_file(const std::string& path) {
  return read_batch_file(path, nullptr);
}

std::vector<ConvProblem> read_batch_file(const std::string& path, size_t* unmatched) {
  BatchState st;
  std::vector<ConvProblem> out;
  read_batch(path, st, out);
  if (unmatched) *unmatched = st.unmatched;
  return out;
}

}  // namespace conv
