// The importer's own ONNX shape inference (src/import/onnx_ops.cpp) on small graphs between the
// model input and a Conv: each op's output shape as the ONNX operator specification gives it,
// read back from the Conv's problem, and nodes whose inputs contradict the rule refused.
#include <catch2/catch.hpp>

#include <climits>
#include <functional>

#include "conv/model.hpp"
#include "onnx_models.hpp"

namespace {

using Catch::Matchers::Contains;
using onnx_models::TempDir;

/// x [1, 4, 8, 8] -> nodes (built by `build`, which returns the tensor the Conv reads) -> Conv
/// with W [2, channels, 1, 1].
struct Chain {
  onnx::ModelProto model;
  onnx::GraphProto* g;
  explicit Chain(int64_t opset = 13) : model(onnx_models::single_conv({1, 4, 8, 8}, {2, 4, 1, 1})) {
    g = model.mutable_graph();
    model.mutable_opset_import(0)->set_version(opset);
  }
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> in,
                        const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return *n;
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (const int64_t i : v) t->add_int64_data(i);
    return name;
  }
  std::string floats(const std::string& name, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (const float f : v) t->add_float_data(f);
    return name;
  }
  /// Moves the Conv (node 0) last, reading `x`, with W's input channels `c`.
  std::string write(const TempDir& dir, const std::string& x, int64_t c) {
    g->mutable_node(0)->set_input(0, x);
    for (int i = 0; i + 1 < g->node_size(); ++i) g->mutable_node()->SwapElements(i, i + 1);
    g->mutable_initializer(0)->set_dims(1, c);
    g->mutable_initializer(0)->set_raw_data(std::string(static_cast<size_t>(2 * c) * 4, '\0'));
    return dir.write("chain.onnx", model);
  }
};

void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  onnx_models::set_attr(n, name, v);
}

/// The NCHW of the one Conv's input after the chain.
std::vector<int64_t> conv_input(Chain& c, const std::string& x, int64_t channels) {
  const TempDir dir;
  const auto problems = conv::import_model(c.write(dir, x, channels));
  REQUIRE(problems.size() == 1);
  const auto& p = problems[0];
  return {p.N, p.C, p.H, p.W};
}

std::string chain_error(Chain& c, const std::string& x, int64_t channels) {
  const TempDir dir;
  try {
    conv::import_model(c.write(dir, x, channels));
  } catch (const conv::Error& e) {
    return e.what();
  }
  return "";
}

using Dims = std::vector<int64_t>;

}  // namespace

TEST_CASE("ONNX shape rules: pooling with pads, strides and ceil_mode", "[import]") {
  Chain max;
  auto& m = max.node("MaxPool", {"x"}, "p");
  set_ints(m, "kernel_shape", {3, 3});
  set_ints(m, "strides", {2, 2});
  set_ints(m, "pads", {1, 1, 1, 1});
  CHECK(conv_input(max, "p", 4) == Dims{1, 4, 4, 4});
  // (8 - 3) / 2 + 1: floor 3, ceil 4.
  for (const int64_t ceil_mode : {0, 1}) {
    Chain avg;
    auto& a = avg.node("AveragePool", {"x"}, "p");
    set_ints(a, "kernel_shape", {3, 3});
    set_ints(a, "strides", {2, 2});
    onnx_models::set_attr(a, "ceil_mode", ceil_mode);
    CHECK(conv_input(avg, "p", 4) == Dims{1, 4, 3 + ceil_mode, 3 + ceil_mode});
  }
  Chain same;
  auto& s = same.node("MaxPool", {"x"}, "p");
  set_ints(s, "kernel_shape", {3, 3});
  set_ints(s, "strides", {3, 3});
  onnx_models::set_attr(s, "auto_pad", std::string("SAME_UPPER"));
  CHECK(conv_input(same, "p", 4) == Dims{1, 4, 3, 3});
  Chain global;
  global.node("GlobalAveragePool", {"x"}, "p");
  CHECK(conv_input(global, "p", 4) == Dims{1, 4, 1, 1});
}

TEST_CASE("ONNX shape rules: Pad, Resize, Concat, Split, Slice, Transpose", "[import]") {
  Chain pad;
  pad.node("Pad", {"x", pad.ints("pads", {0, 0, 1, 2, 0, 0, 3, 4})}, "p");
  CHECK(conv_input(pad, "p", 4) == Dims{1, 4, 12, 14});
  Chain pad2(2);  // opset 2: pads is an attribute
  set_ints(pad2.node("Pad", {"x"}, "p"), "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(conv_input(pad2, "p", 4) == Dims{1, 4, 10, 10});

  Chain resize;
  resize.node("Resize", {"x", "", resize.floats("scales", {1, 1, 2, 1.5f})}, "r");
  CHECK(conv_input(resize, "r", 4) == Dims{1, 4, 16, 12});
  Chain resize10(10);  // opset 10: X, scales
  resize10.node("Resize", {"x", resize10.floats("scales", {1, 1, 0.5f, 0.5f})}, "r");
  CHECK(conv_input(resize10, "r", 4) == Dims{1, 4, 4, 4});

  Chain concat;
  onnx_models::set_attr(concat.node("Concat", {"x", "x"}, "c"), "axis", int64_t{-3});
  CHECK(conv_input(concat, "c", 8) == Dims{1, 8, 8, 8});

  Chain split;
  auto& sp = split.node("Split", {"x", split.ints("split", {1, 3})}, "a");
  sp.add_output("b");
  onnx_models::set_attr(sp, "axis", int64_t{1});
  CHECK(conv_input(split, "b", 3) == Dims{1, 3, 8, 8});

  Chain slice;  // INT64_MAX: to the end, as exporters write it
  slice.node(
      "Slice",
      {"x", slice.ints("starts", {2}), slice.ints("ends", {LLONG_MAX}), slice.ints("axes", {-2})},
      "s");
  CHECK(conv_input(slice, "s", 4) == Dims{1, 4, 6, 8});
  Chain step;
  step.node("Slice",
            {"x", step.ints("starts", {-1}), step.ints("ends", {LLONG_MIN}), step.ints("axes", {3}),
             step.ints("steps", {-3})},
            "s");
  CHECK(conv_input(step, "s", 4) == Dims{1, 4, 8, 3});

  Chain transpose;
  set_ints(transpose.node("Transpose", {"x"}, "t"), "perm", {0, 2, 1, 3});
  CHECK(conv_input(transpose, "t", 8) == Dims{1, 8, 4, 8});
  Chain d2s;
  onnx_models::set_attr(d2s.node("DepthToSpace", {"x"}, "d"), "blocksize", int64_t{2});
  CHECK(conv_input(d2s, "d", 1) == Dims{1, 1, 16, 16});
}

TEST_CASE("ONNX shape rules: shapes computed from Shape, Gather, Mul and Concat", "[import]") {
  // PyTorch's exports size a Resize or Reshape this way: sizes = [1, 4] ++ (shape(x)[2:4] * 2).
  Chain c;
  c.node("Shape", {"x"}, "s");
  c.node("Gather", {"s", c.ints("hw", {2, 3})}, "g");
  c.node("Mul", {"g", c.ints("two", {2})}, "m");
  onnx_models::set_attr(c.node("Concat", {c.ints("nc", {1, 4}), "m"}, "sizes"), "axis", int64_t{0});
  c.node("Resize", {"x", "", "", "sizes"}, "r");
  CHECK(conv_input(c, "r", 4) == Dims{1, 4, 16, 16});

  // Flatten, then Reshape back with 0 (copy) and -1 (infer); Unsqueeze and Squeeze.
  Chain f;
  f.node("Flatten", {"x"}, "flat");
  f.node("Reshape", {"flat", f.ints("shape", {0, 4, 8, -1})}, "r");
  f.node("Unsqueeze", {"r", f.ints("axes", {0})}, "u");
  f.node("Squeeze", {"u", f.ints("axes0", {0})}, "q");
  CHECK(conv_input(f, "q", 4) == Dims{1, 4, 8, 8});

  // Broadcasting a [4, 1, 1] bias and a Where with a scalar.
  Chain b;
  auto* bias = b.g->add_initializer();
  bias->set_name("bias");
  bias->set_data_type(onnx::TensorProto::FLOAT);
  for (const int64_t d : {4, 1, 1}) bias->add_dims(d);
  bias->set_raw_data(std::string(16, '\0'));
  b.node("Add", {"x", "bias"}, "a");
  CHECK(conv_input(b, "a", 4) == Dims{1, 4, 8, 8});
}

TEST_CASE("ONNX nodes whose inputs contradict their rule are refused naming the node", "[import]") {
  Chain reshape;
  reshape.node("Reshape", {"x", reshape.ints("shape", {1, 3, -1})}, "r");
  CHECK_THAT(chain_error(reshape, "r", 4),
             Contains("node \"r\" (Reshape): input shape: [1, 3, -1] does not divide the 256 "
                      "elements of X"));
  Chain concat;
  auto* other = concat.g->add_input();
  other->set_name("x2");
  auto* shape = other->mutable_type()->mutable_tensor_type()->mutable_shape();
  for (const int64_t d : {1, 4, 9, 8}) shape->add_dim()->set_dim_value(d);
  onnx_models::set_attr(concat.node("Concat", {"x", "x2"}, "c"), "axis", int64_t{1});
  CHECK_THAT(chain_error(concat, "c", 8),
             Contains("node \"c\" (Concat): input dims differ on axis 2: [1, 4, 8, 8] and "
                      "[1, 4, 9, 8]"));
  Chain gather;
  gather.node("Shape", {"x"}, "s");
  gather.node("Gather", {"s", gather.ints("i", {7})}, "g");
  gather.node("Reshape", {"x", "g"}, "r");
  CHECK_THAT(chain_error(gather, "r", 4),
             Contains("node \"g\" (Gather): input indices: 7 is out of range for 4 values"));
  Chain pool;
  auto& p = pool.node("MaxPool", {"x"}, "p");
  set_ints(p, "kernel_shape", {9, 9});
  CHECK_THAT(chain_error(pool, "p", 4),
             Contains("node \"p\" (MaxPool): input dimension 2 = 8 plus pads is smaller than "
                      "the window (9)"));
  Chain big;
  big.node("Resize", {"x", "", big.floats("scales", {1, 1, 1e9f, 1})}, "r");
  CHECK_THAT(chain_error(big, "r", 4),
             Contains("node \"r\" (Resize): output dimension 2: 8000000000 is out of range"));
}
