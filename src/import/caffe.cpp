// The Caffe deploy.prototxt importer: parses the text into caffe.proto's NetParameter (our
// subset, caffe.proto), resolves the input shapes, then walks the layers in file order carrying
// every blob's shape (caffe_layers.cpp has the per-type rules) and emits one problem per
// Convolution layer.
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "caffe.pb.h"
#include "caffe_layers.hpp"
#include "importers.hpp"
#include "limits.hpp"
#include "quoted.hpp"

namespace conv::import {

namespace {

using caffe_layers::kMaxDim;
using caffe_layers::Layer;
using caffe_layers::Shape;
using caffe_layers::to_string;

/// Deeper files are refused: Caffe nets nest 4 deep, and deeper input could exhaust the stack.
constexpr int kMaxNesting = 64;
/// What the importer's own tables keep per message (layer) on top of protobuf's object.
constexpr uint64_t kImporterBytesPerMessage = 512;
/// Skipped unknown fields remembered for hints; the rest are dropped.
constexpr size_t kMaxWarnings = 100;

/// Parser messages may quote bytes of a binary file: show them as \xNN.
std::string printable(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      r += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    }
  }
  return r;
}

/// Keeps the parser's first error and its warnings (skipped unknown fields), with 1-based
/// line and column.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  std::string first_error;
  std::vector<std::string> warnings;

#if GOOGLE_PROTOBUF_VERSION >= 4022000  // protobuf 22+: RecordError replaces AddError
  void RecordError(int line, google::protobuf::io::ColumnNumber column,
                   absl::string_view message) override {
    error(line, column, std::string(message));
  }
  void RecordWarning(int line, google::protobuf::io::ColumnNumber column,
                     absl::string_view message) override {
    warning(line, column, std::string(message));
  }
#else
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    error(line, column, message);
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    warning(line, column, message);
  }
#endif

 private:
  void error(int line, int column, const std::string& message) {
    if (first_error.empty()) first_error = where(line, column) + printable(message);
  }
  void warning(int line, int column, const std::string& message) {
    if (warnings.size() < kMaxWarnings)
      warnings.push_back(where(line, column) + printable(message));
  }
  static std::string where(int line, int column) {
    return "line " + std::to_string(line + 1) + " column " + std::to_string(column + 1) + ": ";
  }
};

/// An upper estimate of the memory TextFormat's parse of `text` allocates: each message opened
/// (`{` or `<` outside strings and comments) as large as a LayerParameter, each field (`:`) as a
/// string with its heap copy, plus the importer's own tables per message.
uint64_t estimate_parse_bytes(const std::string& text) {
  uint64_t messages = 0, fields = 0;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (comment) {
      comment = c != '\n';
    } else if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote || c == '\n')
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      comment = true;
    } else if (c == '{' || c == '<') {
      ++messages;
    } else if (c == ':') {
      ++fields;
    }
  }
  const uint64_t message_bytes =
      caffe::LayerParameter::default_instance().SpaceUsedLong() + 48 + kImporterBytesPerMessage;
  return text.size() + messages * message_bytes + fields * 64;
}

/// Reads and parses the file. Unknown fields are skipped (deploy files carry many fields the
/// importer has no use for) and kept in `skipped`; any syntax error is fatal, with its position.
caffe::NetParameter parse(const Source& src, std::vector<std::string>& skipped) {
  const uint64_t size = checked_file_size(src);
  std::ifstream in(src.path, std::ios::binary);
  if (!in) src.fail("cannot open for reading");
  std::string text;  // read in chunks: a file that grows after the stat cannot make it unbounded
  text.reserve(static_cast<size_t>(size));
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > size) src.fail("grew while it was read");
  }
  if (in.bad()) src.fail("read error");
  check_parse_estimate(src, estimate_parse_bytes(text), size, "messages and fields");
  caffe::NetParameter net;
  Collector errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);
  parser.SetRecursionLimit(kMaxNesting);  // also bounds the skipping of unknown messages
  if (!parser.ParseFromString(text, &net)) {
    src.fail("not a Caffe NetParameter text file: " +
             (errors.first_error.empty() ? std::string("parse error") : errors.first_error));
  }
  skipped = std::move(errors.warnings);
  return net;
}

/// The net's state, with its stages as a set (built once: per rule, a net state with many
/// stages and as many rules made the import quadratic).
struct State {
  caffe::NetState net;
  std::set<std::string> stages;
};

/// Caffe's Net::StateMeetsRule.
bool meets(const State& s, const caffe::NetStateRule& rule) {
  const caffe::NetState& state = s.net;
  const std::set<std::string>& stages = s.stages;
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const std::string& s : rule.stage())
    if (!stages.count(s)) return false;
  for (const std::string& s : rule.not_stage())
    if (stages.count(s)) return false;
  return true;
}

/// Caffe's Net::FilterNet for one layer: whether it is part of the net in `state` (TEST unless
/// the file's `state` says otherwise).
bool included(const Layer& l, const State& state) {
  const auto& p = l.param;
  if (p.include_size() && p.exclude_size())
    l.fail("include", "give include or exclude rules, not both");
  bool in = p.include_size() == 0;
  for (const auto& rule : p.exclude())
    if (meets(state, rule)) in = false;
  for (const auto& rule : p.include())
    if (meets(state, rule)) in = true;
  return in;
}

/// Checks a shape's dims against [1, 2^31]; `what` names where it came from.
void check_shape(const Source& src, const std::string& what, const Shape& s) {
  if (s.empty()) src.fail(what + ": empty shape");
  if (s.size() > 8) src.fail(what + ": " + std::to_string(s.size()) + " dims; at most 8");
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 1 || s[i] > kMaxDim)
      src.fail(what + ": dim " + std::to_string(i) + " is " + std::to_string(s[i]) +
               ", expected an integer in [1, 2^31]");
}

Shape to_shape(const caffe::BlobShape& b) {
  return Shape(b.dim().begin(), b.dim().end());
}

/// One model input: where it is declared (for messages) and its shape in the file, if any.
struct Input {
  std::string origin;  ///< `input "data"` or `layer "data" (Input): top "data"`
  std::string field;   ///< where the file's shape is: input_dim, input_shape, input_param.shape
  std::optional<Shape> shape;
};

/// The model's inputs by name: net-level `input` (with input_shape or 4 input_dim per input) and
/// the tops of Input layers. Throws for inconsistent counts and duplicate names.
std::map<std::string, Input> declared_inputs(const Source& src, const caffe::NetParameter& net,
                                             const std::vector<Layer>& layers) {
  std::map<std::string, Input> r;
  auto add = [&](const std::string& name, Input in) {
    if (name.empty()) src.fail(in.origin + ": empty input name");
    if (r.count(name))
      src.fail(in.origin + ": input \"" + name + "\" is already declared by " + r[name].origin);
    r[name] = std::move(in);
  };
  const int n = net.input_size();
  if (net.input_shape_size() && net.input_dim_size())
    src.fail("input_shape and input_dim: give one of them, not both");
  if (net.input_shape_size() && net.input_shape_size() != n)
    src.fail("input_shape: " + std::to_string(net.input_shape_size()) + " shapes for " +
             std::to_string(n) + " inputs; give one per input");
  if (net.input_dim_size() && net.input_dim_size() != 4 * n)
    src.fail("input_dim: " + std::to_string(net.input_dim_size()) + " values for " +
             std::to_string(n) + " inputs; give 4 (N, C, H, W) per input");
  for (int i = 0; i < n; ++i) {
    Input in{"input \"" + net.input(i) + "\"", net.input_dim_size() ? "input_dim" : "input_shape",
             std::nullopt};
    if (net.input_shape_size()) in.shape = to_shape(net.input_shape(i));
    if (net.input_dim_size())
      in.shape = Shape(net.input_dim().begin() + 4 * i, net.input_dim().begin() + 4 * i + 4);
    add(net.input(i), std::move(in));
  }
  for (const Layer& l : layers) {
    if (l.param.type() != "Input") continue;
    const auto& shapes = l.param.input_param().shape();
    const int tops = l.param.top_size();
    if (tops == 0) l.fail("top", "an Input layer needs at least one top");
    if (shapes.size() > 1 && shapes.size() != tops)
      l.fail("input_param.shape", std::to_string(shapes.size()) + " shapes for " +
                                      std::to_string(tops) + " tops; give one, or one per top");
    for (int t = 0; t < tops; ++t) {
      Input in{l.label() + ": top \"" + l.param.top(t) + "\"", "input_param.shape", std::nullopt};
      if (!shapes.empty()) in.shape = to_shape(shapes[shapes.size() == 1 ? 0 : t]);
      add(l.param.top(t), std::move(in));
    }
  }
  return r;
}

/// The shape of every input: `given` where named there, else the file's. Throws for a name in
/// `given` that is no input, and for an input without any shape.
std::map<std::string, Shape> input_shapes(const Source& src,
                                          const std::map<std::string, Input>& declared,
                                          const InputShapes& given) {
  for (const auto& [name, dims] : given)
    if (!declared.count(name)) {
      std::string names;
      for (const auto& d : declared) names += (names.empty() ? "" : ", ") + d.first;
      src.fail("input " + conv::quoted(name) +
               " (given as an input shape): the model has no such input; " +
               (names.empty() ? std::string("it declares none") : "its inputs are: " + names));
    }
  std::map<std::string, Shape> r;
  for (const auto& [name, in] : declared) {
    const auto g = given.find(name);
    if (g != given.end()) {
      check_shape(src, "input " + conv::quoted(name) + " (given as an input shape)", g->second);
      r[name] = g->second;
    } else if (in.shape) {
      check_shape(src, in.origin + ": " + in.field, *in.shape);
      r[name] = *in.shape;
    } else {
      src.fail(in.origin + ": no shape in the file; pass --input " + name +
               "=NxCxHxW (conv::InputShapes)");
    }
  }
  return r;
}

/// Throws unless the layer has between the given numbers of bottoms and tops.
void need_counts(const Layer& l, int min_bottoms, int max_bottoms, int min_tops, int max_tops) {
  auto check = [&](const char* what, int n, int lo, int hi) {
    if (n >= lo && n <= hi) return;
    const std::string want = lo == hi    ? std::to_string(lo)
                             : hi > 1000 ? "at least " + std::to_string(lo)
                                         : std::to_string(lo) + " to " + std::to_string(hi);
    l.fail(what, "has " + std::to_string(n) + ", " + l.param.type() + " takes " + want);
  };
  check("bottom", l.param.bottom_size(), min_bottoms, max_bottoms);
  check("top", l.param.top_size(), min_tops, max_tops);
}

/// The layer types after Input that the walk knows.
constexpr const char* kTypes[] = {"Convolution", "Pooling",   "ReLU",         "LRN",
                                  "Dropout",     "BatchNorm", "Scale",        "Split",
                                  "Concat",      "Eltwise",   "InnerProduct", "Softmax"};

/// Propagates shapes through the active layers, appending each Convolution's problem.
class Walk {
 public:
  explicit Walk(std::map<std::string, Shape> inputs) : blobs_(std::move(inputs)) {}

  void layer(const Layer& l, std::vector<ConvProblem>& problems) {
    constexpr int kMany = 1 << 30;
    const std::string& type = l.param.type();
    if (type == "Input") {
      need_counts(l, 0, 0, 1, kMany);
      return;  // its tops are inputs, already known
    }
    if (type.empty()) l.fail("type", "missing");
    if (std::find(std::begin(kTypes), std::end(kTypes), type) == std::end(kTypes)) {
      std::string list;
      for (const char* t : kTypes) list += std::string(list.empty() ? "" : ", ") + t;
      l.fail("type", "unsupported layer type \"" + type + "\"; supported: Input, " + list);
    }
    std::vector<Shape> xs;
    for (const std::string& b : l.param.bottom()) xs.push_back(bottom(l, b));
    const std::vector<std::string> bottoms(l.param.bottom().begin(), l.param.bottom().end());
    if (type == "Convolution") {
      need_counts(l, 1, 1, 1, 1);
      problems.push_back(caffe_layers::convolution(l, bottoms[0], xs[0]));
      set_tops(l, caffe_layers::convolution_output(problems.back()));
    } else if (type == "Pooling") {
      need_counts(l, 1, 1, 1, 2);  // MAX may output its argmax mask as a second top
      set_tops(l, caffe_layers::pooling(l, bottoms[0], xs[0]));
    } else if (type == "ReLU" || type == "LRN" || type == "Dropout" || type == "BatchNorm" ||
               type == "Softmax") {
      need_counts(l, 1, 1, 1, 1);
      set_tops(l, xs[0]);
    } else if (type == "Scale") {
      need_counts(l, 1, 2, 1, 1);  // a second bottom holds the scale factors
      set_tops(l, xs[0]);
    } else if (type == "Split") {
      need_counts(l, 1, 1, 1, kMany);
      set_tops(l, xs[0]);
    } else if (type == "Concat") {
      need_counts(l, 1, kMany, 1, 1);
      set_tops(l, caffe_layers::concat(l, bottoms, xs));
    } else if (type == "Eltwise") {
      need_counts(l, 2, kMany, 1, 1);
      set_tops(l, caffe_layers::eltwise(l, bottoms, xs));
    } else if (type == "InnerProduct") {
      need_counts(l, 1, 1, 1, 1);
      set_tops(l, caffe_layers::inner_product(l, xs[0]));
    }
  }

 private:
  std::map<std::string, Shape> blobs_;

  const Shape& bottom(const Layer& l, const std::string& name) const {
    const auto it = blobs_.find(name);
    if (it == blobs_.end())
      l.fail("bottom \"" + name + "\"",
             "unknown blob: no input and no earlier layer has it as a top");
    return it->second;
  }

  /// Every top gets `shape`. A top may reuse a name only in place (the name is a bottom of the
  /// same layer), as in Caffe.
  void set_tops(const Layer& l, const Shape& shape) {
    for (const std::string& t : l.param.top()) {
      const bool in_place =
          std::find(l.param.bottom().begin(), l.param.bottom().end(), t) != l.param.bottom().end();
      if (blobs_.count(t) && !in_place)
        l.fail("top \"" + t + "\"",
               "blob is already produced by an earlier layer or input (only an in-place layer, "
               "top == bottom, may reuse a name)");
      blobs_[t] = shape;
    }
  }
};

}  // namespace

std::vector<ConvProblem> import_caffe_prototxt(const Source& src, const InputShapes& inputs) {
  std::vector<std::string> skipped;
  const caffe::NetParameter net = parse(src, skipped);
  if (net.layers_size() > 0)
    src.fail(
        "V1 `layers` format not supported, upgrade with upgrade_net_proto_text (Caffe's "
        "tools; it rewrites `layers { type: CONVOLUTION }` as `layer { type: "
        "\"Convolution\" }`)");
  if (net.layer_size() == 0)
    src.fail("no layers: the file has no `layer { ... }` entries (an empty or non-Caffe file?)");
  State state{net.state(), {net.state().stage().begin(), net.state().stage().end()}};
  if (!state.net.has_phase()) state.net.set_phase(caffe::TEST);  // a deploy net runs in TEST
  std::vector<Layer> layers;
  for (int i = 0; i < net.layer_size(); ++i) {
    Layer l{src, net.layer(i), i, skipped};
    if (included(l, state)) layers.push_back(l);
  }
  Walk walk(input_shapes(src, declared_inputs(src, net, layers), inputs));
  std::vector<ConvProblem> problems;
  for (const Layer& l : layers) walk.layer(l, problems);
  return problems;
}

}  // namespace conv::import
