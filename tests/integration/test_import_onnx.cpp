// conv::import_model on ONNX files built by onnx_models.cpp: the published networks against
// layers/, padding and attribute semantics, and the errors for what is refused.
#include <array>
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <random>
#include <set>

#include "conv/model.hpp"
#include "onnx_models.hpp"

namespace {

using Catch::Matchers::Contains;
using onnx_models::TempDir;

std::set<std::string> keys(const std::vector<conv::ConvProblem>& problems) {
  std::set<std::string> out;
  for (const auto& p : problems) out.insert(p.key());
  return out;
}

std::set<std::string> layer_keys(const std::string& net, int64_t batch = 1) {
  auto problems = conv::read_batch_file(CONVTUNE_LAYERS_DIR "/" + net + ".txt");
  for (auto& p : problems) p.N = batch;
  return keys(problems);
}

/// The conv::Error message of importing `path`, or "" when it imports.
std::string import_error(const std::string& path, const conv::InputShapes& inputs = {}) {
  try {
    conv::import_model(path, inputs);
  } catch (const conv::Error& e) {
    return e.what();
  }
  return "";
}

/// The one problem of a single_conv model after `edit`.
conv::ConvProblem import_single(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                const std::function<void(onnx::NodeProto&)>& edit) {
  onnx::ModelProto m = onnx_models::single_conv(x, w);
  edit(*m.mutable_graph()->mutable_node(0));
  const TempDir dir;
  const auto problems = conv::import_model(dir.write("single.onnx", m));
  REQUIRE(problems.size() == 1);
  return problems[0];
}

}  // namespace

TEST_CASE("ONNX AlexNet VGG-16 and ResNet-50 import as the layers of layers/", "[import]") {
  const TempDir dir;
  struct Net {
    std::string name;
    onnx::ModelProto (*build)(const onnx_models::Options&);
    size_t convs;
  };
  for (const Net& net :
       {Net{"alexnet", onnx_models::alexnet, 5}, Net{"vgg16", onnx_models::vgg16, 13},
        Net{"resnet50", onnx_models::resnet50, 53}}) {
    SECTION(net.name) {
      const auto problems = conv::import_model(dir.write(net.name + ".onnx", net.build({})));
      CHECK(problems.size() == net.convs);
      CHECK(keys(problems) == layer_keys(net.name));
      for (const auto& p : problems) CHECK(p.name.rfind(net.name + ":", 0) == 0);
    }
  }
}

TEST_CASE("ONNX MobileNetV2 imports its 30 distinct convolutions", "[import]") {
  // Expected set from the (t, c, n, s) table of Sandler et al. 2018, independent of the builder.
  std::set<std::string> expected;
  auto add = [&](int64_t c, int64_t k, int64_t h, int64_t r, int64_t stride, int64_t g) {
    conv::ConvProblem p;
    p.C = c, p.K = k, p.H = p.W = h, p.R = p.S = r, p.groups = g;
    p.stride_h = p.stride_w = stride;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = r / 2;
    expected.insert(p.key());
  };
  add(3, 32, 224, 3, 2, 1);  // stem
  int64_t c = 32, h = 112;
  const int64_t table[][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                              {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& [t, out, n, s] : table) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t stride = i == 0 ? s : 1, hidden = c * t, oh = (h - 1) / stride + 1;
      if (t != 1) add(c, hidden, h, 1, 1, 1);     // expand 1x1
      add(hidden, hidden, h, 3, stride, hidden);  // depthwise 3x3
      add(hidden, out, oh, 1, 1, 1);              // project 1x1
      c = out, h = oh;
    }
  }
  add(320, 1280, 7, 1, 1, 1);
  REQUIRE(expected.size() == 30);

  const TempDir dir;
  const onnx_models::Options weights_with_data{false, onnx_models::Weights::initializers};
  const auto problems = conv::import_model(
      dir.write("mobilenet_v2.onnx", onnx_models::mobilenet_v2(weights_with_data)));
  CHECK(problems.size() == 52);
  const auto imported = keys(problems);
  CHECK(imported == expected);
  for (const auto& key : layer_keys("mobilenet_v2")) CHECK(imported.count(key) == 1);
}

TEST_CASE("ONNX problems are named stem:node and unnamed nodes after their output", "[import]") {
  const TempDir dir;
  const auto problems = conv::import_model(dir.write("alexnet.onnx", onnx_models::alexnet()));
  std::vector<std::string> names;
  for (const auto& p : problems) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"alexnet:conv1", "alexnet:conv2", "alexnet:conv3",
                                          "alexnet:conv4", "alexnet:conv5"});

  onnx::ModelProto m = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  m.mutable_graph()->mutable_node(0)->clear_name();
  const auto unnamed = conv::import_model(dir.write("tiny.onnx", m));
  REQUIRE(unnamed.size() == 1);
  CHECK(unnamed[0].name == "tiny:y");
}

TEST_CASE("ONNX symbolic batch needs an input shape which InputShapes give", "[import]") {
  const TempDir dir;
  const std::string path = dir.write("resnet50.onnx", onnx_models::resnet50({true}));
  const std::string error = import_error(path);
  CHECK_THAT(error, Contains(path) && Contains("node \"conv1\" (Conv)") && Contains("\"N\"") &&
                        Contains("--input input=NxCxHxW"));

  const auto problems = conv::import_model(path, {{"input", {4, 3, 224, 224}}});
  REQUIRE(problems.size() == 53);
  for (const auto& p : problems) CHECK(p.N == 4);
  CHECK(keys(problems) == layer_keys("resnet50", 4));

  // A given shape replaces a fixed one too, and shapes downstream follow it.
  const std::string fixed = dir.write("vgg16.onnx", onnx_models::vgg16());
  const auto big = conv::import_model(fixed, {{"input", {2, 3, 448, 448}}});
  REQUIRE(big.size() == 13);
  CHECK(big.back().N == 2);
  CHECK(big.back().H == 28);  // conv5_3 at 448 / 16
}

TEST_CASE("ONNX input shape errors for an unknown input and a wrong rank", "[import]") {
  const TempDir dir;
  const std::string path = dir.write("alexnet.onnx", onnx_models::alexnet({true}));
  CHECK_THAT(import_error(path, {{"data", {1, 3, 227, 227}}}),
             Contains(path) && Contains("--input \"data\"") && Contains("no such input") &&
                 Contains("\"input\""));
  CHECK_THAT(import_error(path, {{"input", {1, 3, 227}}}),
             Contains(path) && Contains("node \"conv1\" (Conv)") && Contains("needs 4"));
}

TEST_CASE("ONNX auto_pad SAME_UPPER and SAME_LOWER put the odd pad at the end or start",
          "[import]") {
  // H = 11, R = 4, stride 2: OH = ceil(11/2) = 6, total = (6-1)*2 + 4 - 11 = 3 -> 1 + 2.
  // W = 10: OW = 5, total = 4*2 + 4 - 10 = 2 -> 1 + 1.
  for (const std::string mode : {"SAME_UPPER", "SAME_LOWER"}) {
    const auto p = import_single({1, 3, 11, 10}, {8, 3, 4, 4}, [&](onnx::NodeProto& n) {
      onnx_models::set_attr(n, "auto_pad", mode);
      onnx_models::set_attr(n, "strides", std::vector<int64_t>{2, 2});
    });
    const bool upper = mode == "SAME_UPPER";
    CHECK(p.pad_top == (upper ? 1 : 2));
    CHECK(p.pad_bottom == (upper ? 2 : 1));
    CHECK(p.pad_left == 1);
    CHECK(p.pad_right == 1);
    CHECK(p.OH() == 6);
    CHECK(p.OW() == 5);
  }
  const auto valid = import_single({1, 3, 11, 10}, {8, 3, 4, 4}, [](onnx::NodeProto& n) {
    onnx_models::set_attr(n, "auto_pad", std::string("VALID"));
  });
  CHECK(valid.pad_top + valid.pad_left + valid.pad_bottom + valid.pad_right == 0);
  CHECK(valid.OH() == 8);
}

TEST_CASE("ONNX pads are top left bottom right and dilations and group carry over", "[import]") {
  const auto p = import_single({2, 8, 20, 30}, {16, 2, 3, 5}, [](onnx::NodeProto& n) {
    onnx_models::set_attr(n, "pads", std::vector<int64_t>{1, 2, 3, 4});
    onnx_models::set_attr(n, "dilations", std::vector<int64_t>{2, 3});
    onnx_models::set_attr(n, "strides", std::vector<int64_t>{1, 2});
    onnx_models::set_attr(n, "group", int64_t{4});
    onnx_models::set_attr(n, "kernel_shape", std::vector<int64_t>{3, 5});
  });
  CHECK(p.pad_top == 1);
  CHECK(p.pad_left == 2);
  CHECK(p.pad_bottom == 3);
  CHECK(p.pad_right == 4);
  CHECK(p.dilation_h == 2);
  CHECK(p.dilation_w == 3);
  CHECK(p.stride_h == 1);
  CHECK(p.stride_w == 2);
  CHECK(p.groups == 4);
  CHECK((p.N == 2 && p.C == 8 && p.H == 20 && p.W == 30 && p.K == 16 && p.R == 3 && p.S == 5));
  CHECK(p.OH() == 20 + 1 + 3 - 5 + 1);         // 20
  CHECK(p.OW() == (30 + 2 + 4 - 13) / 2 + 1);  // 12
}

TEST_CASE("ONNX 1-D and 3-D Conv and ConvTranspose are not supported", "[import]") {
  const TempDir dir;
  const std::string conv1d = dir.write("c1.onnx", onnx_models::single_conv({1, 3, 10}, {8, 3, 3}));
  CHECK_THAT(import_error(conv1d), Contains(conv1d) && Contains("node \"conv\" (Conv)") &&
                                       Contains("not supported") && Contains("1-D"));
  const std::string conv3d =
      dir.write("c3.onnx", onnx_models::single_conv({1, 3, 6, 6, 6}, {8, 3, 3, 3, 3}));
  CHECK_THAT(import_error(conv3d), Contains(conv3d) && Contains("node \"conv\" (Conv)") &&
                                       Contains("not supported") && Contains("3-D"));
  // X of rank 3 known only after inference, W of rank 4 without kernel_shape (onnx 1.12's
  // inference indexed past X's dims): refused naming the node.
  onnx::ModelProto mixed = onnx_models::single_conv({1, 4, 8}, {4, 4, 3, 3});
  auto* g = mixed.mutable_graph();
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("xr");
  g->mutable_node()->SwapElements(0, 1);
  g->mutable_node(1)->set_input(0, "xr");
  const std::string mixed_path = dir.write("mixed.onnx", mixed);
  CHECK_THAT(import_error(mixed_path), Contains("node \"conv\" (Conv)") &&
                                           Contains("not supported") &&
                                           Contains("input X \"xr\" has 3 dims"));
  // The same with W computed by another node: still refused naming the node and X.
  onnx::ModelProto computed_w = mixed;
  auto* cg = computed_w.mutable_graph();
  auto* id = cg->add_node();
  id->set_op_type("Identity");
  id->add_input("w");
  id->add_output("wi");
  cg->mutable_node()->SwapElements(1, 2);
  cg->mutable_node(2)->set_input(1, "wi");
  const std::string computed_path = dir.write("computed_w.onnx", computed_w);
  CHECK_THAT(import_error(computed_path),
             Contains("node \"conv\" (Conv)") && Contains("input X \"xr\" has 3 dims"));
  const std::string deconv =
      dir.write("ct.onnx", onnx_models::single_conv({1, 3, 8, 8}, {3, 8, 3, 3}, "ConvTranspose"));
  CHECK_THAT(import_error(deconv), Contains(deconv) && Contains("node \"conv\" (ConvTranspose)") &&
                                       Contains("not supported"));
}

TEST_CASE("ONNX files that are not models are refused naming the file", "[import]") {
  const TempDir dir;
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  const std::string random = dir.write("random.onnx", noise);
  CHECK_THAT(import_error(random),
             Contains("model \"" + random + "\"") && Contains("not an ONNX model"));

  std::string bytes;
  REQUIRE(onnx_models::single_conv({1, 3, 32, 32}, {64, 3, 7, 7}).SerializeToString(&bytes));
  const std::string truncated = dir.write("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(import_error(truncated), Contains(truncated) && Contains("not an ONNX model"));

  const std::string empty = dir.write("empty.onnx", "");
  CHECK_THAT(import_error(empty), Contains(empty) && Contains("empty file"));

  onnx::ModelProto no_nodes;
  no_nodes.set_ir_version(8);
  no_nodes.mutable_graph()->set_name("g");
  const std::string graphless = dir.write("graphless.onnx", no_nodes);
  CHECK_THAT(import_error(graphless), Contains(graphless) && Contains("no nodes"));
}

TEST_CASE("ONNX malformed Conv nodes are refused naming node and attribute", "[import]") {
  struct Case {
    const char* what;
    std::vector<int64_t> x, w;
    std::function<void(onnx::NodeProto&)> edit;
    std::vector<std::string> expect;  // beyond the path and `node "conv" (Conv)`
  };
  using onnx_models::set_attr;
  using V = std::vector<int64_t>;
  const std::vector<Case> cases = {
      {"missing W",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) { n.mutable_input()->RemoveLast(); },
       {"input W", "missing"}},
      {"negative pads",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         set_attr(n, "pads", V{0, -1, 0, 0});
       },
       {"attribute \"pads\"", "-1"}},
      {"zero stride",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         set_attr(n, "strides", V{1, 0});
       },
       {"attribute \"strides\"", "0 at index 1"}},
      {"absurd stride",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         set_attr(n, "strides", V{int64_t{1} << 40, 1});
       },
       {"attribute \"strides\"", "2^31"}},
      {"wrong pads length",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         set_attr(n, "pads", V{1, 1});
       },
       {"attribute \"pads\"", "expected 4 values"}},
      {"kernel_shape disagrees with W",
       {1, 3, 8, 8},
       {4, 3, 5, 5},
       [](onnx::NodeProto& n) {
         set_attr(n, "kernel_shape", V{3, 3});
       },
       {"attribute \"kernel_shape\"", "[3, 3]", "[4, 3, 5, 5]"}},
      {"group does not divide C",
       {1, 3, 8, 8},
       {4, 1, 3, 3},
       [](onnx::NodeProto& n) { set_attr(n, "group", int64_t{2}); },
       {"attribute \"group\"", "does not divide the 3 input channels"}},
      {"group of the wrong type",
       {1, 4, 8, 8},
       {4, 2, 3, 3},
       [](onnx::NodeProto& n) { set_attr(n, "group", V{2}); },
       {"attribute \"group\"", "expected an INT"}},
      {"pads with auto_pad",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         set_attr(n, "pads", V{1, 1, 1, 1});
         set_attr(n, "auto_pad", std::string("SAME_UPPER"));
       },
       {"attribute \"pads\"", "auto_pad"}},
      {"unknown auto_pad",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) { set_attr(n, "auto_pad", std::string("SAME")); },
       {"attribute \"auto_pad\"", "\"SAME\""}},
      {"W channels disagree with X",
       {1, 3, 8, 8},
       {4, 2, 3, 3},
       [](onnx::NodeProto&) {},
       {"input W \"w\"", "2 input channels per group"}},
      {"kernel larger than the padded input",
       {1, 3, 4, 4},
       {4, 3, 7, 7},
       [](onnx::NodeProto&) {},
       {"node \"conv\" (Conv)", "ConvProblem.H"}},
      // The four below imported as if nothing were wrong (a fresh user's trial).
      {"four inputs",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) { n.add_input("w"), n.add_input("w"); },
       {"4 inputs: Conv takes X, W and an optional B"}},
      {"attribute given twice",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) {
         for (int i = 0; i < 2; ++i) {
           onnx::AttributeProto* a = n.add_attribute();
           a->set_name("pads");
           a->set_type(onnx::AttributeProto::INTS);
           for (int k = 0; k < 4; ++k) a->add_ints(i);
         }
       },
       {"attribute \"pads\": given twice"}},
      {"bias of another shape than K",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       [](onnx::NodeProto& n) { n.add_input("w"); },  // 4x3x3x3, not [4]
       {"input B \"w\": expected shape [4]"}},
  };
  const TempDir dir;
  for (const Case& c : cases) {
    SECTION(c.what) {
      onnx::ModelProto m = onnx_models::single_conv(c.x, c.w);
      c.edit(*m.mutable_graph()->mutable_node(0));
      const std::string path = dir.write("broken.onnx", m);
      const std::string error = import_error(path);
      INFO(error);
      CHECK_THAT(error, Contains("model \"" + path + "\": "));
      if (std::string(c.what) != "kernel larger than the padded input")
        CHECK_THAT(error, Contains("node \"conv\" (Conv): "));
      for (const auto& e : c.expect) CHECK_THAT(error, Contains(e));
    }
  }
}

TEST_CASE("ONNX Conv input without a shape asks for an input shape", "[import]") {
  onnx::ModelProto m = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  const TempDir dir;
  const std::string path = dir.write("shapeless.onnx", m);
  CHECK_THAT(import_error(path), Contains(path) && Contains("node \"conv\" (Conv)") &&
                                     Contains("input X \"x\"") && Contains("--input x=NxCxHxW"));
  const auto problems = conv::import_model(path, {{"x", {3, 3, 9, 9}}});
  REQUIRE(problems.size() == 1);
  CHECK((problems[0].N == 3 && problems[0].H == 9 && problems[0].OH() == 7));
}

TEST_CASE("ONNX symbolic dims of an inner tensor name the graph input behind them", "[import]") {
  // x (batch "B") -> Relu -> xr -> Conv: the error points at x, which --input can set.
  onnx::ModelProto m = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  auto* g = m.mutable_graph();
  g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("B");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("x");
  relu->add_output("xr");
  g->mutable_node()->SwapElements(0, 1);
  g->mutable_node(1)->set_input(0, "xr");
  const TempDir dir;
  const std::string path = dir.write("inner.onnx", m);
  CHECK_THAT(import_error(path), Contains(path) && Contains("input X \"xr\"") &&
                                     Contains("(\"B\"), from graph input \"x\"") &&
                                     Contains("--input x=NxCxHxW"));
  const auto problems = conv::import_model(path, {{"x", {5, 3, 8, 8}}});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].N == 5);
}

namespace {

/// `m` (one Conv) with a node `op` named `name` (`inputs`, output `out`) inserted just before the
/// Conv, which then reads `out` as X.
onnx::ModelProto with_node_before_conv(onnx::ModelProto m, const std::string& op,
                                       const std::string& name, const std::string& out,
                                       const std::vector<std::string>& inputs = {"x"}) {
  auto* g = m.mutable_graph();
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& in : inputs) n->add_input(in);
  n->add_output(out);
  int i = g->node_size() - 1;
  for (; i > 0 && g->node(i - 1).op_type() != "Conv"; --i) {
  }
  for (int j = g->node_size() - 1; j >= i; --j) g->mutable_node()->SwapElements(j, j - 1);
  g->mutable_node(i)->set_input(0, out);  // the Conv, now after the new node
  return m;
}

}  // namespace

TEST_CASE("ONNX control characters in node names become '_' and the descriptor reads back",
          "[import]") {
  onnx::ModelProto m = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  m.mutable_graph()->mutable_node(0)->set_name("bad\nname\x01\x7f");
  const TempDir dir;
  const auto problems = conv::import_model(dir.write("ctl.onnx", m));
  REQUIRE(problems.size() == 1);
  const conv::ConvProblem& p = problems[0];
  CHECK(p.name == "ctl:bad_name__");
  for (const char c : p.name)
    CHECK(!(static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f));
  const conv::ConvProblem back = conv::parse_descriptor(conv::to_descriptor(p));
  CHECK(back == p);
  CHECK(back.name == p.name);
}

TEST_CASE("ONNX graph conflicts are named before shape inference", "[import]") {
  const TempDir dir;
  onnx::ModelProto no_inputs = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  no_inputs.mutable_graph()->mutable_node(0)->clear_input();
  const std::string path = dir.write("noinputs.onnx", no_inputs);
  const std::string error = import_error(path);
  CHECK_THAT(error, Contains("model \"" + path + "\": node \"conv\" (Conv): input W: missing"));
  CHECK_THAT(error, !Contains("ShapeInferenceError"));

  // The initializer "w" is 4x3x3x3; the graph also declares "w" as an input of 4x3x5x5.
  onnx::ModelProto conflict = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  auto* w = conflict.mutable_graph()->add_input();
  w->set_name("w");
  auto* t = w->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const int64_t d : {4, 3, 5, 5}) t->mutable_shape()->add_dim()->set_dim_value(d);
  const std::string conflict_path = dir.write("conflict.onnx", conflict);
  const std::string conflict_error = import_error(conflict_path);
  CHECK_THAT(conflict_error, Contains(conflict_path) && Contains("graph input \"w\"") &&
                                 Contains("[4, 3, 5, 5]") && Contains("[4, 3, 3, 3]"));
  CHECK_THAT(conflict_error, !Contains("ShapeInferenceError"));

  // Agreeing declarations (a symbolic dim included) import.
  t->mutable_shape()->mutable_dim(2)->set_dim_value(3);
  t->mutable_shape()->mutable_dim(3)->set_dim_param("k");
  CHECK(conv::import_model(dir.write("agree.onnx", conflict)).size() == 1);

  // Two nodes writing one tensor: which one a later Conv reads would be a guess.
  onnx::ModelProto twice = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  onnx::NodeProto* second = twice.mutable_graph()->add_node();
  *second = twice.graph().node(0);
  second->set_name("again");
  const std::string twice_path = dir.write("twice.onnx", twice);
  CHECK_THAT(import_error(twice_path),
             Contains(twice_path) &&
                 Contains("node \"again\" (Conv): output \"y\": also written by node \"conv\""));
  onnx::ModelProto over = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  over.mutable_graph()->mutable_node(0)->set_output(0, "w");
  CHECK_THAT(import_error(dir.write("over.onnx", over)),
             Contains("node \"conv\" (Conv): output \"w\": also an initializer"));
}

TEST_CASE("ONNX shapes that inference cannot give name the node, not --input", "[import]") {
  const TempDir dir;
  const auto base = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});

  const std::string unknown_op =
      dir.write("foobar.onnx", with_node_before_conv(base, "FooBar", "p", "pool1"));
  std::string error = import_error(unknown_op);
  CHECK_THAT(error, Contains(unknown_op) && Contains("node \"conv\" (Conv)") &&
                        Contains("input X \"pool1\": shape unknown: the importer cannot infer "
                                 "it (produced by node \"p\" (FooBar): an operator the "
                                 "importer's shape inference does not cover)"));
  CHECK_THAT(error, !Contains("--input"));

  // Two hops: Relu after FooBar has no shape either; the error names where inference stopped.
  onnx::ModelProto chain = with_node_before_conv(base, "FooBar", "p", "pool1");
  chain = with_node_before_conv(chain, "Relu", "r", "xr", {"pool1"});
  error = import_error(dir.write("chain.onnx", chain));
  CHECK_THAT(error, Contains("input X \"xr\": shape unknown") &&
                        Contains("it stopped at node \"p\" (FooBar)"));
  CHECK_THAT(error, !Contains("--input"));

  // Reshape to a shape computed at run time (a graph input), and to one from Shape, which the
  // importer reads.
  onnx::ModelProto reshape = with_node_before_conv(base, "Reshape", "r", "xr", {"x", "s"});
  auto* s_in = reshape.mutable_graph()->add_input();
  s_in->set_name("s");
  s_in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  s_in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  error = import_error(dir.write("reshape.onnx", reshape));
  CHECK_THAT(error, Contains("input X \"xr\": shape unknown: the importer cannot infer it "
                             "(produced by node \"r\" (Reshape): its input shape \"s\" is not "
                             "a constant"));
  CHECK_THAT(error, !Contains("--input"));
  onnx::ModelProto from_shape = with_node_before_conv(base, "Shape", "shp", "s");
  from_shape = with_node_before_conv(from_shape, "Reshape", "r", "xr", {"x", "s"});
  const auto reshaped = conv::import_model(dir.write("from_shape.onnx", from_shape));
  REQUIRE(reshaped.size() == 1);
  CHECK(reshaped[0].OH() == 6);

  // The file declares a rank but no dims for the unknown op's output.
  onnx::ModelProto ranked = with_node_before_conv(base, "FooBar", "p", "pool1");
  auto* vi = ranked.mutable_graph()->add_value_info();
  vi->set_name("pool1");
  for (int i = 0; i < 4; ++i) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  error = import_error(dir.write("ranked.onnx", ranked));
  CHECK_THAT(error, Contains("input X \"pool1\": dimension 0 is unknown: the importer cannot "
                             "infer it (produced by node \"p\" (FooBar)"));
  CHECK_THAT(error, !Contains("--input"));

  // A graph input without a shape behind the unknown op still asks for --input.
  onnx::ModelProto shapeless = with_node_before_conv(base, "Relu", "r", "xr");
  shapeless.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  CHECK_THAT(import_error(dir.write("shapeless.onnx", shapeless)),
             Contains("input X \"xr\": shape unknown (from graph input \"x\")") &&
                 Contains("--input x=NxCxHxW"));
}

TEST_CASE("ONNX Conv tensors other than FLOAT are refused, unknown types pass", "[import]") {
  const TempDir dir;
  onnx::ModelProto half = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  half.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT16);
  auto* w = half.mutable_graph()->mutable_initializer(0);
  w->set_data_type(onnx::TensorProto::FLOAT16);
  w->set_raw_data(std::string(4 * 3 * 3 * 3 * 2, '\0'));
  const std::string path = dir.write("half.onnx", half);
  CHECK_THAT(import_error(path), Contains("model \"" + path +
                                          "\": node \"conv\" (Conv): input X \"x\": element type "
                                          "FLOAT16: only FLOAT (fp32) models are supported"));

  onnx::ModelProto int8 = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  int8.mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::INT8);
  int8.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(4 * 3 * 3 * 3, '\0'));
  CHECK_THAT(import_error(dir.write("int8.onnx", int8)),
             Contains("input W \"w\": element type INT8: only FLOAT (fp32)"));

  onnx::ModelProto untyped = onnx_models::single_conv({1, 3, 8, 8}, {4, 3, 3, 3});
  untyped.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::UNDEFINED);
  const auto problems = conv::import_model(dir.write("untyped.onnx", untyped));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].OH() == 6);
}

TEST_CASE("make_onnx_models creates its folder when missing", "[import]") {
  const TempDir dir;
  const std::string nested = dir.path() + "/new/deeper";
  const auto paths = onnx_models::write_networks(nested);
  REQUIRE(paths.size() == 4);
  CHECK(paths[0] == nested + "/alexnet.onnx");
  for (const auto& p : paths) CHECK(std::filesystem::is_regular_file(p));
  CHECK(conv::import_model(paths[0]).size() == 5);
  // Writing again into the existing folder works too.
  CHECK(onnx_models::write_networks(nested).size() == 4);
}

TEST_CASE(
    "ONNX bad values on a Conv's input chain are refused; subgraphs and functions are not entered",
    "[import]") {
  const TempDir dir;
  // x -> <node> -> "xn" -> Conv.
  const auto before_conv = [](onnx::ModelProto& m, onnx::NodeProto node) {
    auto* g = m.mutable_graph();
    node.add_input("x");
    node.add_output("xn");
    *g->add_node() = node;
    g->mutable_node()->SwapElements(0, 1);
    g->mutable_node(1)->set_input(0, "xn");
  };
  // A model-local function my::<name>(a) -> b with an empty body, and a node calling it.
  const auto local_function = [](onnx::ModelProto& m, const char* name) {
    auto* opset = m.add_opset_import();
    opset->set_domain("my");
    opset->set_version(1);
    onnx::FunctionProto* f = m.add_functions();
    f->set_name(name);
    f->set_domain("my");
    f->add_input("a");
    f->add_output("b");
    *f->add_opset_import() = *opset;
    return f;
  };
  const auto call_of = [](const char* function) {
    onnx::NodeProto call;
    call.set_op_type(function);
    call.set_domain("my");
    call.set_name("call");
    return call;
  };
  const auto ints = [](onnx::NodeProto& n, const char* name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const int64_t i : v) a->add_ints(i);
  };
  // blocksize^2 wraps to 0 in int64, which onnx 1.12 divides by.
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 1, 3, 3});
    onnx::NodeProto d2s;
    d2s.set_op_type("DepthToSpace");
    d2s.set_name("d2s");
    auto* a = d2s.add_attribute();
    a->set_name("blocksize");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(int64_t{1} << 40);
    before_conv(m, d2s);
    CHECK_THAT(import_error(dir.write("d2s.onnx", m)),
               Contains("node \"d2s\" (DepthToSpace): attribute \"blocksize\"") &&
                   Contains("out of range"));
  }
  // An If whose branch has strides 0 (onnx 1.12 inferred the branch and divided by them): the
  // importer never enters subgraphs, so the If's output is unknown and named as such.
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 4, 3, 3});
    onnx::NodeProto if_node;
    if_node.set_op_type("If");
    if_node.set_name("if");
    auto* branch = if_node.add_attribute();
    branch->set_name("then_branch");
    branch->set_type(onnx::AttributeProto::GRAPH);
    onnx::NodeProto* pool = branch->mutable_g()->add_node();
    pool->set_op_type("MaxPool");
    pool->set_name("pool");
    pool->add_input("x");
    pool->add_output("p");
    ints(*pool, "kernel_shape", {2, 2});
    ints(*pool, "strides", {0, 0});
    before_conv(m, if_node);
    CHECK_THAT(import_error(dir.write("if.onnx", m)),
               Contains("input X \"xn\": shape unknown: the importer cannot infer it (produced "
                        "by node \"if\" (If): an operator the importer's shape inference does "
                        "not cover)"));
    // Its condition undefined: refused as ONNX's checker does, naming the tensor.
    m.mutable_graph()->mutable_node(0)->set_input(0, "cond");
    CHECK_THAT(import_error(dir.write("if_cond.onnx", m)),
               Contains("node \"if\" (If): input \"cond\": no node, graph input or "
                        "initializer gives it"));
  }
  // A model-local function that calls itself (onnx inferred its body until the stack
  // overflowed): a call's outputs are unknown, the body is never read.
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 4, 3, 3});
    onnx::FunctionProto* f = local_function(m, "F");
    onnx::NodeProto* self = f->add_node();
    *self = call_of("F");
    self->add_input("a");
    self->add_output("b");
    before_conv(m, call_of("F"));
    CHECK_THAT(import_error(dir.write("recursive.onnx", m)),
               Contains("(produced by node \"call\" (F): an operator of domain \"my\" (a "
                        "custom op or a model-local function))"));
  }
  // Named for what the file holds: W's dims and the cycle (its tensors had been reported as
  // produced by no node).
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 4, 3, 3});
    m.mutable_graph()->mutable_initializer(0)->set_dims(2, -3);
    CHECK_THAT(import_error(dir.write("negw.onnx", m)),
               Contains("initializer \"w\": dims[2] = -3 is out of range [0, 2^31]"));
  }
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 4, 3, 3});
    auto* g = m.mutable_graph();
    for (const auto& [name, in, out] : {std::array<const char*, 3>{"r1", "t2", "t1"},
                                        std::array<const char*, 3>{"r2", "t1", "t2"}}) {
      auto* relu = g->add_node();
      relu->set_op_type("Relu");
      relu->set_name(name);
      relu->add_input(in);
      relu->add_output(out);
    }
    g->mutable_node(0)->set_input(0, "t1");
    CHECK_THAT(import_error(dir.write("cycle.onnx", m)),
               Contains("the graph has a cycle") && Contains("\"r1\"") && Contains("\"r2\""));
  }
  // Omitted optional inputs and outputs are empty names, not one tensor: a Dropout with both
  // imports (it had been taken for a node reading its own output).
  {
    onnx::ModelProto m = onnx_models::single_conv({1, 4, 8, 8}, {4, 4, 3, 3});
    onnx::NodeProto dropout;
    dropout.set_op_type("Dropout");
    dropout.set_name("dropout");
    before_conv(m, dropout);
    auto* d = m.mutable_graph()->mutable_node(0);
    d->add_input("");
    d->add_input("");
    d->add_output("");
    CHECK(conv::import_model(dir.write("dropout.onnx", m)).size() == 1);
  }
}
