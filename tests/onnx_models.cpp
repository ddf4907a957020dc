// ONNX model builders for the importer tests, written from the published architectures:
// AlexNet (Krizhevsky et al. 2012, as Caffe's bvlc_alexnet), VGG-16 (Simonyan & Zisserman 2014,
// configuration D), ResNet-50 v1.5 (He et al. 2015; torchvision's stride on the 3x3) and
// MobileNetV2 (Sandler et al. 2018, Table 2).
#include "onnx_models.hpp"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace onnx_models {

namespace {

/// Builds one graph layer by layer; every layer's output tensor is named after its node.
class Net {
 public:
  Net(const std::string& name, const Options& o, const std::vector<int64_t>& input_dims,
      const std::string& input = "input")
      : o_(o) {
    model_.set_ir_version(8);
    model_.set_producer_name("convtune tests");
    auto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(13);
    g_ = model_.mutable_graph();
    g_->set_name(name);
    auto* t = g_->add_input();
    t->set_name(input);
    auto* tensor = t->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < input_dims.size(); ++i) {
      auto* d = tensor->mutable_shape()->add_dim();
      if (i == 0 && o.symbolic_batch)
        d->set_dim_param("N");
      else
        d->set_dim_value(input_dims[i]);
    }
  }

  /// A float weight tensor: a zero-filled initializer or a graph input with this shape.
  std::string weight(const std::string& name, const std::vector<int64_t>& dims) {
    if (o_.weights == Weights::initializers) {
      auto* t = g_->add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      int64_t n = 1;
      for (const int64_t d : dims) t->add_dims(d), n *= d;
      t->set_raw_data(std::string(static_cast<size_t>(n) * 4, '\0'));
    } else {
      auto* in = g_->add_input();
      in->set_name(name);
      auto* tensor = in->mutable_type()->mutable_tensor_type();
      tensor->set_elem_type(onnx::TensorProto::FLOAT);
      for (const int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
    }
    return name;
  }

  onnx::NodeProto& node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs) {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& in : inputs) n->add_input(in);
    n->add_output(name);
    return *n;
  }

  /// k x k convolution with bias; strides and pads only written when not the default.
  std::string conv(const std::string& name, const std::string& x, int64_t cin, int64_t cout,
                   int64_t k, int64_t stride, int64_t pad, int64_t group = 1) {
    auto& n =
        node("Conv", name,
             {x, weight(name + ".W", {cout, cin / group, k, k}), weight(name + ".B", {cout})});
    set_attr(n, "kernel_shape", std::vector<int64_t>{k, k});
    if (stride != 1) set_attr(n, "strides", std::vector<int64_t>{stride, stride});
    if (pad != 0) set_attr(n, "pads", std::vector<int64_t>{pad, pad, pad, pad});
    if (group != 1) set_attr(n, "group", group);
    return name;
  }
  std::string bn(const std::string& name, const std::string& x, int64_t c) {
    node("BatchNormalization", name,
         {x, weight(name + ".scale", {c}), weight(name + ".B", {c}), weight(name + ".mean", {c}),
          weight(name + ".var", {c})});
    return name;
  }
  std::string op(const std::string& op_type, const std::string& name,
                 const std::vector<std::string>& inputs) {
    node(op_type, name, inputs);
    return name;
  }
  std::string maxpool(const std::string& name, const std::string& x, int64_t k, int64_t s,
                      int64_t pad) {
    auto& n = node("MaxPool", name, {x});
    set_attr(n, "kernel_shape", std::vector<int64_t>{k, k});
    set_attr(n, "strides", std::vector<int64_t>{s, s});
    if (pad) set_attr(n, "pads", std::vector<int64_t>{pad, pad, pad, pad});
    return name;
  }
  std::string lrn(const std::string& name, const std::string& x) {
    auto& n = node("LRN", name, {x});
    set_attr(n, "size", int64_t{5});
    auto* a = n.add_attribute();
    a->set_name("alpha"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(1e-4f);
    a = n.add_attribute();
    a->set_name("beta"), a->set_type(onnx::AttributeProto::FLOAT), a->set_f(0.75f);
    return name;
  }
  /// Fully connected layer on a flat input: Gemm(x, W^T) + B, W stored as out x in.
  std::string gemm(const std::string& name, const std::string& x, int64_t in, int64_t out) {
    auto& n = node("Gemm", name, {x, weight(name + ".W", {out, in}), weight(name + ".B", {out})});
    set_attr(n, "transB", int64_t{1});
    return name;
  }

  onnx::ModelProto finish(const std::string& out) {
    auto* o = g_->add_output();
    o->set_name(out);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return model_;
  }

 private:
  Options o_;
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
};

onnx::AttributeProto& attr(onnx::NodeProto& node, const std::string& name) {
  for (auto& a : *node.mutable_attribute()) {
    if (a.name() != name) continue;
    a.Clear();
    a.set_name(name);
    return a;
  }
  auto* a = node.add_attribute();
  a->set_name(name);
  return *a;
}

}  // namespace

void set_attr(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& ints) {
  auto& a = attr(node, name);
  a.set_type(onnx::AttributeProto::INTS);
  for (const int64_t v : ints) a.add_ints(v);
}
void set_attr(onnx::NodeProto& node, const std::string& name, int64_t i) {
  auto& a = attr(node, name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(i);
}
void set_attr(onnx::NodeProto& node, const std::string& name, const std::string& s) {
  auto& a = attr(node, name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(s);
}

onnx::ModelProto alexnet(const Options& o) {
  Net net("alexnet", o, {1, 3, 227, 227});
  std::string x = net.conv("conv1", "input", 3, 96, 11, 4, 0);
  x = net.maxpool("pool1", net.lrn("norm1", net.op("Relu", "relu1", {x})), 3, 2, 0);  // 27
  x = net.conv("conv2", x, 96, 256, 5, 1, 2, 2);
  x = net.maxpool("pool2", net.lrn("norm2", net.op("Relu", "relu2", {x})), 3, 2, 0);  // 13
  x = net.op("Relu", "relu3", {net.conv("conv3", x, 256, 384, 3, 1, 1)});
  x = net.op("Relu", "relu4", {net.conv("conv4", x, 384, 384, 3, 1, 1, 2)});
  x = net.op("Relu", "relu5", {net.conv("conv5", x, 384, 256, 3, 1, 1, 2)});
  x = net.op("Flatten", "flatten", {net.maxpool("pool5", x, 3, 2, 0)});  // 256 x 6 x 6
  x = net.op("Relu", "relu6", {net.gemm("fc6", x, 256 * 6 * 6, 4096)});
  x = net.op("Relu", "relu7", {net.gemm("fc7", x, 4096, 4096)});
  return net.finish(net.op("Softmax", "prob", {net.gemm("fc8", x, 4096, 1000)}));
}

onnx::ModelProto vgg16(const Options& o) {
  Net net("vgg16", o, {1, 3, 224, 224});
  const std::vector<std::vector<int64_t>> blocks = {
      {64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
  std::string x = "input";
  int64_t c = 3;
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (size_t i = 0; i < blocks[b].size(); ++i) {
      const std::string id = std::to_string(b + 1) + "_" + std::to_string(i + 1);
      x = net.op("Relu", "relu" + id, {net.conv("conv" + id, x, c, blocks[b][i], 3, 1, 1)});
      c = blocks[b][i];
    }
    x = net.maxpool("pool" + std::to_string(b + 1), x, 2, 2, 0);
  }
  x = net.op("Flatten", "flatten", {x});  // 512 x 7 x 7
  x = net.op("Relu", "relu6", {net.gemm("fc6", x, 512 * 7 * 7, 4096)});
  x = net.op("Relu", "relu7", {net.gemm("fc7", x, 4096, 4096)});
  return net.finish(net.op("Softmax", "prob", {net.gemm("fc8", x, 4096, 1000)}));
}

onnx::ModelProto resnet50(const Options& o) {
  Net net("resnet50", o, {1, 3, 224, 224});
  std::string x = net.bn("bn1", net.conv("conv1", "input", 3, 64, 7, 2, 3), 64);
  x = net.maxpool("pool1", net.op("Relu", "relu1", {x}), 3, 2, 1);  // 56
  const int64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  int64_t c = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t w = widths[stage];
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      const std::string id = "res" + std::to_string(stage + 2) + char('a' + b);
      const int64_t stride = (b == 0 && stage > 0) ? 2 : 1;  // v1.5: on the 3x3
      std::string y = net.bn(id + "_bn2a", net.conv(id + "_branch2a", x, c, w, 1, 1, 0), w);
      y = net.op("Relu", id + "_relu2a", {y});
      y = net.bn(id + "_bn2b", net.conv(id + "_branch2b", y, w, w, 3, stride, 1), w);
      y = net.op("Relu", id + "_relu2b", {y});
      y = net.bn(id + "_bn2c", net.conv(id + "_branch2c", y, w, 4 * w, 1, 1, 0), 4 * w);
      const std::string shortcut =
          b == 0 ? net.bn(id + "_bn1", net.conv(id + "_branch1", x, c, 4 * w, 1, stride, 0), 4 * w)
                 : x;
      x = net.op("Relu", id + "_relu", {net.op("Add", id + "_add", {y, shortcut})});
      c = 4 * w;
    }
  }
  x = net.op("Flatten", "flatten", {net.op("GlobalAveragePool", "pool5", {x})});
  return net.finish(net.gemm("fc1000", x, 2048, 1000));
}

onnx::ModelProto mobilenet_v2(const Options& o) {
  Net net("mobilenet_v2", o, {1, 3, 224, 224});
  std::string x = net.bn("stem_bn", net.conv("stem", "input", 3, 32, 3, 2, 1), 32);
  x = net.op("Relu", "stem_relu", {x});
  struct Row {
    int64_t t, c, n, s;
  };
  const Row rows[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int64_t c = 32, block = 0;
  for (const Row& r : rows) {
    for (int64_t i = 0; i < r.n; ++i, ++block) {
      const std::string id = "block" + std::to_string(block);
      const int64_t stride = i == 0 ? r.s : 1, hidden = c * r.t;
      std::string y = x;
      if (r.t != 1) {
        y = net.bn(id + "_expand_bn", net.conv(id + "_expand", y, c, hidden, 1, 1, 0), hidden);
        y = net.op("Relu", id + "_expand_relu", {y});
      }
      y = net.bn(id + "_dw_bn", net.conv(id + "_dw", y, hidden, hidden, 3, stride, 1, hidden),
                 hidden);
      y = net.op("Relu", id + "_dw_relu", {y});
      y = net.bn(id + "_project_bn", net.conv(id + "_project", y, hidden, r.c, 1, 1, 0), r.c);
      x = (stride == 1 && c == r.c) ? net.op("Add", id + "_add", {x, y}) : y;
      c = r.c;
    }
  }
  x = net.bn("last_bn", net.conv("last", x, 320, 1280, 1, 1, 0), 1280);
  x = net.op("Relu", "last_relu", {x});
  x = net.op("Flatten", "flatten", {net.op("GlobalAveragePool", "pool", {x})});
  return net.finish(net.gemm("classifier", x, 1280, 1000));
}

onnx::ModelProto single_conv(const std::vector<int64_t>& x_dims, const std::vector<int64_t>& w_dims,
                             const std::string& op) {
  Net net("single_conv", Options{false, Weights::initializers}, x_dims, "x");
  net.node(op, "conv", {"x", net.weight("w", w_dims)}).set_output(0, "y");
  return net.finish("y");
}

std::vector<std::string> write_networks(const std::string& dir, const Options& o) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  const std::pair<const char*, onnx::ModelProto (*)(const Options&)> networks[] = {
      {"alexnet.onnx", alexnet},
      {"vgg16.onnx", vgg16},
      {"resnet50.onnx", resnet50},
      {"mobilenet_v2.onnx", mobilenet_v2}};
  std::vector<std::string> paths;
  for (const auto& [file, build] : networks) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    std::ofstream out(path, std::ios::binary);
    if (!out || !build(o).SerializeToOstream(&out) || !out.flush())
      throw std::runtime_error("cannot write " + path);
    paths.push_back(path);
  }
  return paths;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "convtune_onnx_XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  dir_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TempDir::write(const std::string& file, const std::string& bytes) const {
  const std::string path = dir_ + "/" + file;
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string TempDir::write(const std::string& file, const onnx::ModelProto& model) const {
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw std::runtime_error("cannot serialize " + file);
  return write(file, bytes);
}

}  // namespace onnx_models
