// Tests of the Caffe deploy.prototxt importer behind conv::import_model: the fixtures of
// tests/models (AlexNet, VGG-16, ResNet-50, MobileNetV2) against the shared layer lists, Caffe's
// shape rules on small nets, input shape overrides, and malformed files written by the tests.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "conv/model.hpp"

namespace {

using Catch::Matchers::Contains;

std::string fixture(const std::string& net) {
  return std::string(CONVTUNE_MODELS_DIR) + "/" + net + ".prototxt";
}

std::set<std::string> keys(const std::vector<conv::ConvProblem>& problems) {
  std::set<std::string> r;
  for (const auto& p : problems) r.insert(p.key());
  return r;
}

/// The problem named `name`; fails the test when there is none.
conv::ConvProblem named(const std::vector<conv::ConvProblem>& problems, const std::string& name) {
  for (const auto& p : problems)
    if (p.name == name) return p;
  FAIL("no problem named " << name);
  return {};
}

/// A fresh folder under the system temp folder, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto base = std::filesystem::temp_directory_path();
    for (int i = 0;; ++i) {
      dir_ = base / ("convtune_caffe_test_" + std::to_string(::getpid()) + "_" + std::to_string(i));
      if (std::filesystem::create_directory(dir_)) break;
    }
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  /// Writes `text` to <dir>/<name> and returns the path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

 private:
  std::filesystem::path dir_;
};

/// A net with one 1 x C x H x W input "data" (an Input layer), then `layers`.
std::string net(const std::string& layers, const std::string& dims = "1 3 32 32") {
  std::string shape;
  size_t start = 0;
  while (start < dims.size()) {
    size_t end = dims.find(' ', start);
    if (end == std::string::npos) end = dims.size();
    shape += "dim: " + dims.substr(start, end - start) + " ";
    start = end + 1;
  }
  return "name: \"t\"\nlayer { name: \"data\" type: \"Input\" top: \"data\"\n"
         "  input_param { shape { " +
         shape + "} } }\n" + layers;
}

/// A Convolution layer "c" on bottom "data" with the given convolution_param body.
std::string conv_layer(const std::string& param, const std::string& bottom = "data") {
  return "layer { name: \"c\" type: \"Convolution\" bottom: \"" + bottom +
         "\" top: \"c\"\n  convolution_param { " + param + " } }\n";
}

}  // namespace

TEST_CASE("caffe: AlexNet, VGG-16 and ResNet-50 give the shared layer lists' problems",
          "[import]") {
  for (const auto& [name, convs] :
       {std::pair<std::string, size_t>{"alexnet", 5}, {"vgg16", 13}, {"resnet50", 53}}) {
    INFO(name);
    const auto problems = conv::import_model(fixture(name));
    CHECK(problems.size() == convs);
    const auto expected =
        keys(conv::read_batch_file(std::string(CONVTUNE_LAYERS_DIR) + "/" + name + ".txt"));
    CHECK(keys(problems) == expected);
    for (const auto& p : problems) CHECK(p.name.rfind(name + ":", 0) == 0);
  }
}

TEST_CASE("caffe: AlexNet layers keep their names, order and groups", "[import]") {
  const auto problems = conv::import_model(fixture("alexnet"));
  REQUIRE(problems.size() == 5);
  const char* order[] = {"alexnet:conv1", "alexnet:conv2", "alexnet:conv3", "alexnet:conv4",
                         "alexnet:conv5"};
  for (size_t i = 0; i < 5; ++i) CHECK(problems[i].name == order[i]);
  const auto conv2 = named(problems, "alexnet:conv2");
  CHECK(conv2.groups == 2);
  CHECK(conv2.C == 96);
  CHECK(conv2.H == 27);  // 227 -> conv1 55 -> pool1 ceil(52 / 2) + 1 = 27
  CHECK(conv2.pad_top == 2);
  CHECK(named(problems, "alexnet:conv3").groups == 1);
  CHECK(named(problems, "alexnet:conv5").groups == 2);
  CHECK(named(problems, "alexnet:conv1").key() ==
        "g1mb1ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0dh0dw0");
}

TEST_CASE("caffe: ResNet-50 v1.5 shapes, with pool1's ceil rounding", "[import]") {
  const auto problems = conv::import_model(fixture("resnet50"));
  // pool1 (3x3, stride 2, no pad) on 112: floor would give 55, Caffe's ceil gives 56.
  CHECK(named(problems, "resnet50:res2a_branch2a").H == 56);
  CHECK(named(problems, "resnet50:res2a_branch1").K == 256);
  CHECK(named(problems, "resnet50:res2a_branch1").stride_h == 1);
  const auto b = named(problems, "resnet50:res3a_branch2b");  // v1.5: stride on the 3x3
  CHECK(b.stride_h == 2);
  CHECK(b.H == 56);
  CHECK(named(problems, "resnet50:res3a_branch2a").stride_h == 1);
  CHECK(named(problems, "resnet50:res3a_branch1").stride_h == 2);
  CHECK(named(problems, "resnet50:res5c_branch2c").H == 7);
}

TEST_CASE("caffe: MobileNetV2 has the 30 distinct convolutions of its (t, c, n, s) table",
          "[import]") {
  // Independent of the fixture's generator: the network from the paper's table.
  struct Block {
    int t, c, n, s;
  };
  const Block table[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                         {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  auto make = [](int64_t c, int64_t hw, int64_t k, int64_t r, int64_t s, int64_t g) {
    conv::ConvProblem p;
    p.C = c, p.H = p.W = hw, p.K = k, p.R = p.S = r, p.stride_h = p.stride_w = s, p.groups = g;
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = r / 2;
    return p.key();
  };
  std::set<std::string> expected{make(3, 224, 32, 3, 2, 1)};
  int64_t c = 32, hw = 112;
  for (const Block& b : table)
    for (int i = 0; i < b.n; ++i) {
      const int64_t s = i == 0 ? b.s : 1, hidden = c * b.t;
      if (b.t != 1) expected.insert(make(c, hw, hidden, 1, 1, 1));
      expected.insert(make(hidden, hw, hidden, 3, s, hidden));
      hw = (hw + 2 - 3) / s + 1;
      expected.insert(make(hidden, hw, b.c, 1, 1, 1));
      c = b.c;
    }
  expected.insert(make(320, 7, 1280, 1, 1, 1));
  REQUIRE(expected.size() == 30);

  const auto problems = conv::import_model(fixture("mobilenet_v2"));
  CHECK(problems.size() == 52);
  CHECK(keys(problems) == expected);
  for (const auto& p :
       conv::read_batch_file(std::string(CONVTUNE_LAYERS_DIR) + "/mobilenet_v2.txt")) {
    INFO(p.name);
    CHECK(expected.count(p.key()) == 1);
  }
  const auto dw = named(problems, "mobilenet_v2:conv2_1/dwise");
  CHECK(dw.groups == 32);
  CHECK(dw.C == 32);
  CHECK(named(problems, "mobilenet_v2:conv6_3/linear").K == 320);
}

TEST_CASE("caffe: InputShapes replace the file's input shape", "[import]") {
  const auto problems = conv::import_model(fixture("alexnet"), {{"data", {8, 3, 227, 227}}});
  REQUIRE(problems.size() == 5);
  for (const auto& p : problems) CHECK(p.N == 8);

  // input_dim (VGG-16) and input_shape (ResNet-50) forms too, with another image size.
  const auto vgg = conv::import_model(fixture("vgg16"), {{"data", {2, 3, 112, 112}}});
  CHECK(named(vgg, "vgg16:conv1_1").H == 112);
  CHECK(named(vgg, "vgg16:conv5_3").H == 7);
  for (const auto& p : vgg) CHECK(p.N == 2);
  const auto resnet = conv::import_model(fixture("resnet50"), {{"data", {4, 3, 448, 448}}});
  CHECK(named(resnet, "resnet50:res5c_branch2b").H == 14);
  for (const auto& p : resnet) CHECK(p.N == 4);
}

TEST_CASE("caffe: an input shape for an input the model lacks is an error", "[import]") {
  const std::string path = fixture("alexnet");
  REQUIRE_THROWS_AS(conv::import_model(path, {{"image", {1, 3, 227, 227}}}), conv::Error);
  REQUIRE_THROWS_WITH(
      conv::import_model(path, {{"image", {1, 3, 227, 227}}}),
      Contains(path) && Contains("input \"image\"") && Contains("its inputs are: data"));
  REQUIRE_THROWS_WITH(conv::import_model(path, {{"data", {1, 3, 0, 227}}}),
                      Contains(path) && Contains("input \"data\"") && Contains("[1, 2^31]"));
}

TEST_CASE("caffe: an input without a shape needs one from InputShapes", "[import]") {
  TempDir dir;
  const std::string text = "input: \"img\"\n" + conv_layer("num_output: 4 kernel_size: 3", "img");
  const std::string path = dir.write("noshape.prototxt", text);
  REQUIRE_THROWS_WITH(conv::import_model(path), Contains(path) && Contains("input \"img\"") &&
                                                    Contains("--input img=NxCxHxW"));
  const auto problems = conv::import_model(path, {{"img", {1, 2, 10, 12}}});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].name == "noshape:c");
  CHECK(problems[0].C == 2);
  CHECK(problems[0].OW() == 10);

  // An Input layer without input_param likewise.
  const std::string p2 =
      dir.write("noshape2.prototxt", "layer { name: \"in\" type: \"Input\" top: \"data\" }\n" +
                                         conv_layer("num_output: 4 kernel_size: 1"));
  REQUIRE_THROWS_WITH(conv::import_model(p2),
                      Contains(p2) && Contains("top \"data\"") && Contains("--input data=NxCxHxW"));
  CHECK(conv::import_model(p2, {{"data", {1, 1, 5, 5}}}).size() == 1);
}

TEST_CASE("caffe: convolution parameter forms", "[import]") {
  TempDir dir;
  SECTION("kernel_h / kernel_w, pad_h / pad_w, stride_h / stride_w") {
    const auto ps = conv::import_model(dir.write(
        "hw.prototxt",
        net(conv_layer("num_output: 6 kernel_h: 3 kernel_w: 1 pad_h: 1 stride_h: 2 stride_w: 1"))));
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].R == 3);
    CHECK(ps[0].S == 1);
    CHECK(ps[0].pad_top == 1);
    CHECK(ps[0].pad_bottom == 1);
    CHECK(ps[0].pad_left == 0);
    CHECK(ps[0].stride_h == 2);
    CHECK(ps[0].OH() == 16);
    CHECK(ps[0].OW() == 32);
  }
  SECTION("two values: H then W; dilation") {
    const auto ps = conv::import_model(dir.write(
        "two.prototxt", net(conv_layer("num_output: 6 kernel_size: 3 kernel_size: 5 pad: 0 pad: 2 "
                                       "dilation: 2 stride: 1 stride: 3"))));
    REQUIRE(ps.size() == 1);
    CHECK(ps[0].R == 3);
    CHECK(ps[0].S == 5);
    CHECK(ps[0].pad_left == 2);
    CHECK(ps[0].dilation_h == 2);
    CHECK(ps[0].dilation_w == 2);
    CHECK(ps[0].stride_w == 3);
    CHECK(ps[0].OH() == 28);  // 32 - (2 * 2 + 1) + 1
    CHECK(ps[0].OW() == 10);  // (32 + 4 - 9) / 3 + 1
  }
}

TEST_CASE("caffe: Pooling rounds up, clips the last window, and global pooling", "[import]") {
  TempDir dir;
  // A 1x1 convolution after the pooling shows its output size.
  auto pooled = [&](const std::string& dims, const std::string& param) {
    const std::string text =
        net("layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\"\n"
            "  pooling_param { " +
                param + " } }\n" + conv_layer("num_output: 2 kernel_size: 1", "p"),
            dims);
    const auto ps = conv::import_model(dir.write("pool.prototxt", text));
    REQUIRE(ps.size() == 1);
    return std::make_pair(ps[0].H, ps[0].W);
  };
  // ceil((4 + 2 - 3) / 2) + 1 = 3 (floor would give 2).
  CHECK(pooled("1 1 4 4", "pool: MAX kernel_size: 3 stride: 2 pad: 1") == std::make_pair(3L, 3L));
  // ceil((5 + 2 - 2) / 2) + 1 = 4, but the 4th window would start at 6 >= 5 + 1: clipped to 3.
  CHECK(pooled("1 1 5 5", "pool: AVE kernel_size: 2 stride: 2 pad: 1") == std::make_pair(3L, 3L));
  // No padding, no clipping: ceil((6 - 3) / 2) + 1 = 3.
  CHECK(pooled("1 1 6 6", "pool: MAX kernel_size: 3 stride: 2") == std::make_pair(3L, 3L));
  CHECK(pooled("1 1 6 6", "pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR") ==
        std::make_pair(2L, 2L));
  CHECK(pooled("1 1 9 7", "pool: AVE global_pooling: true") == std::make_pair(1L, 1L));
  CHECK(pooled("1 1 9 7", "kernel_h: 3 kernel_w: 1 stride_h: 3 stride_w: 1") ==
        std::make_pair(3L, 7L));
}

TEST_CASE("caffe: Split, Concat, Eltwise, in-place layers and include rules", "[import]") {
  TempDir dir;
  const std::string text =
      net("layer { name: \"split\" type: \"Split\" bottom: \"data\" top: \"s0\" top: \"s1\" }\n"
          "layer { name: \"a\" type: \"Convolution\" bottom: \"s0\" top: \"a\"\n"
          "  convolution_param { num_output: 8 kernel_size: 1 } }\n"
          "layer { name: \"a_relu\" type: \"ReLU\" bottom: \"a\" top: \"a\" }\n"
          "layer { name: \"b\" type: \"Convolution\" bottom: \"s1\" top: \"b\"\n"
          "  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n"
          "layer { name: \"cat\" type: \"Concat\" bottom: \"a\" bottom: \"b\" top: \"cat\" }\n"
          "layer { name: \"train_only\" type: \"Data\" top: \"label\" include { phase: TRAIN } }\n"
          "layer { name: \"d\" type: \"Convolution\" bottom: \"cat\" top: \"d\"\n"
          "  some_future_param { value: 3 } \n"
          "  convolution_param { num_output: 12 kernel_size: 1 } }\n"
          "layer { name: \"sum\" type: \"Eltwise\" bottom: \"d\" bottom: \"cat\" top: \"sum\" }\n"
          "layer { name: \"e\" type: \"Convolution\" bottom: \"sum\" top: \"e\"\n"
          "  convolution_param { num_output: 2 kernel_size: 1 } }\n"
          "layer { name: \"legacy\" type: \"Concat\" bottom: \"e\" bottom: \"e\" top: \"f\"\n"
          "  concat_param { concat_dim: 1 } }\n"
          "layer { name: \"g\" type: \"Convolution\" bottom: \"f\" top: \"g\"\n"
          "  convolution_param { num_output: 2 kernel_size: 1 } }\n",
          "1 16 8 8");
  const auto ps = conv::import_model(dir.write("branches.prototxt", text));
  REQUIRE(ps.size() == 5);
  CHECK(named(ps, "branches:a").C == 16);
  CHECK(named(ps, "branches:b").C == 16);
  CHECK(named(ps, "branches:d").C == 12);  // 8 + 4 concatenated
  CHECK(named(ps, "branches:e").C == 12);
  CHECK(named(ps, "branches:g").C == 4);
}

TEST_CASE("caffe: malformed files give errors naming file, layer and field", "[import]") {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    return dir.write(name + ".prototxt", text);
  };

  SECTION("syntax error: the message has the line") {
    const auto p = write("syntax", net(conv_layer("num_output: eight kernel_size: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("line 5") && Contains("eight"));
  }
  SECTION("unterminated message") {
    const auto p = write("unterminated", net("layer { name: \"c\"\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("line 5"));
  }
  SECTION("unknown layer type") {
    const auto p =
        write("type", net("layer { name: \"up\" type: \"Deconvolution\" bottom: \"data\" "
                          "top: \"up\" }\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) &&
                                                   Contains("layer \"up\" (Deconvolution)") &&
                                                   Contains("type: unsupported layer type"));
  }
  SECTION("missing bottom blob") {
    const auto p = write("bottom", net(conv_layer("num_output: 4 kernel_size: 3", "dta")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) &&
                                                   Contains("layer \"c\" (Convolution)") &&
                                                   Contains("bottom \"dta\": unknown blob"));
  }
  SECTION("Convolution without kernel_size") {
    const auto p = write("nokernel", net(conv_layer("num_output: 4 stride: 2")));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("layer \"c\" (Convolution)") &&
                            Contains("convolution_param.kernel_size: missing"));
  }
  SECTION("a misspelt kernel_size is skipped, and the error points at it") {
    const auto p = write("typo", net(conv_layer("num_output: 4 kernal_size: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("layer \"c\" (Convolution)") &&
                            Contains("convolution_param.kernel_size: missing") &&
                            Contains("kernal_size") && Contains("line 5"));
  }
  SECTION("kernel_h without kernel_w") {
    const auto p = write("kh", net(conv_layer("num_output: 4 kernel_h: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("convolution_param.kernel_w: missing"));
  }
  SECTION("deeply nested unknown fields: refused, no stack overflow") {
    std::string deep = "layer { name: \"x\" extra ";
    for (int i = 0; i < 100000; ++i) deep += "{ a ";
    const auto p = write("deep", deep);
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("line 1") && Contains("not a Caffe NetParameter"));
  }
  SECTION("Convolution without num_output") {
    const auto p = write("nonum", net(conv_layer("kernel_size: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("convolution_param.num_output"));
  }
  SECTION("kernel_size together with kernel_h") {
    const auto p = write("both", net(conv_layer("num_output: 4 kernel_size: 3 kernel_h: 3 "
                                                "kernel_w: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("layer \"c\"") &&
                            Contains("convolution_param.kernel_size: give either"));
  }
  SECTION("zero stride") {
    const auto p = write("stride", net(conv_layer("num_output: 4 kernel_size: 3 stride: 0")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("convolution_param.stride") &&
                                                   Contains(">= 1, got 0"));
  }
  SECTION("kernel larger than the padded input: output < 1") {
    const auto p =
        write("small", net(conv_layer("num_output: 4 kernel_size: 7 pad: 1"), "1 3 4 4"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("convolution_param.pad") &&
                                                   Contains("output height would be < 1"));
  }
  SECTION("pooling pad not smaller than the kernel") {
    const auto p = write("poolpad", net("layer { name: \"p\" type: \"Pooling\" bottom: \"data\" "
                                        "top: \"p\" pooling_param { kernel_size: 2 pad: 2 } }\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"p\" (Pooling)") &&
                                                   Contains("pooling_param.pad"));
  }
  SECTION("group that does not divide the channels") {
    const auto p = write("group", net(conv_layer("num_output: 4 kernel_size: 1 group: 2")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("convolution_param.group") &&
                                                   Contains("3 input channels"));
  }
  SECTION("V1 layers format") {
    const auto p = write("v1",
                         "name: \"old\"\ninput: \"data\"\ninput_dim: 1\ninput_dim: 3\n"
                         "input_dim: 8\ninput_dim: 8\n"
                         "layers { name: \"conv1\" type: CONVOLUTION bottom: \"data\" "
                         "top: \"conv1\" blobs_lr: 1\n"
                         "  convolution_param { num_output: 4 kernel_size: 3 } }\n");
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) &&
                                                   Contains("V1 `layers` format not supported") &&
                                                   Contains("upgrade_net_proto_text"));
  }
  SECTION("empty file") {
    const auto p = write("empty", "");
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("no layers"));
  }
  SECTION("binary garbage") {
    std::string bytes = "\x89PNG\r\n\x1a\n";
    uint32_t x = 12345;
    for (int i = 0; i < 4096; ++i) {
      x = x * 1103515245u + 12345u;
      bytes += static_cast<char>(x >> 24);
    }
    bytes += std::string(16, '\0');
    const auto p = write("garbage", bytes);
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("not a Caffe NetParameter") && Contains("line "));
  }
  SECTION("huge dims") {
    const auto p1 =
        write("hugein", net(conv_layer("num_output: 4 kernel_size: 3"), "1 3 99999999999 32"));
    REQUIRE_THROWS_WITH(conv::import_model(p1), Contains(p1) && Contains("layer \"data\"") &&
                                                    Contains("dim 2 is 99999999999"));
    const auto p2 = write("hugeout", net(conv_layer("num_output: 4000000000 kernel_size: 3")));
    REQUIRE_THROWS_WITH(conv::import_model(p2), Contains(p2) && Contains("layer \"c\"") &&
                                                    Contains("convolution_param.num_output") &&
                                                    Contains("<= 2^31"));
    // Beyond uint32: the parser refuses it, with the position.
    const auto p3 = write("hugek", net(conv_layer("num_output: 4 kernel_size: 99999999999")));
    REQUIRE_THROWS_WITH(conv::import_model(p3), Contains(p3) && Contains("line 5"));
    // Every size in range, but the tensors' byte counts overflow 64 bits.
    const auto p4 = write("hugebytes", net(conv_layer("num_output: 2147483648 kernel_size: 1"),
                                           "2147483648 2147483648 2147483648 2147483648"));
    REQUIRE_THROWS_WITH(conv::import_model(p4),
                        Contains(p4) && Contains("layer \"c\"") && Contains("convolution_param"));
    REQUIRE_THROWS_WITH(conv::import_model(fixture("alexnet"), {{"data", {1, 3, 227, 1L << 40}}}),
                        Contains("input \"data\"") && Contains("[1, 2^31]"));
  }
  SECTION("a layer name that is not UTF-8") {
    // Its bytes had been echoed raw (a newline, \x01, \xff on stderr) and ConvProblem.name
    // blamed; now the name is quoted with escapes and its own field named.
    std::string layer = conv_layer("num_output: 4 kernel_size: 3");
    layer.replace(layer.find("name: \"c\""), 9, "name: \"l\\n0\\001\\377\"");
    const auto p = write("badname", net(layer));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("\"l\\x0a0\\x01\\xff\": name: must be UTF-8 text"));
    try {
      conv::import_model(p);
    } catch (const conv::Error& e) {
      const std::string m = e.what();
      CHECK(m.find('\n') == std::string::npos);
      CHECK(m.find('\xff') == std::string::npos);
    }
    // A file name that is not UTF-8 names the problems with its odd byte escaped.
    std::ifstream in(fixture("alexnet"), std::ios::binary);
    const std::string odd = write("al\xffx", std::string(std::istreambuf_iterator<char>(in), {}));
    const auto problems = conv::import_model(odd);
    REQUIRE(problems.size() == 5);
    CHECK(problems[0].name == "al\\xffx:conv1");
  }
  SECTION("Eltwise of different shapes") {
    const auto p = write("eltwise", net(conv_layer("num_output: 3 kernel_size: 3") +
                                        "layer { name: \"sum\" type: \"Eltwise\" bottom: \"data\" "
                                        "bottom: \"c\" top: \"sum\" }\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"sum\" (Eltwise)") &&
                                                   Contains("bottom \"c\"") &&
                                                   Contains("1x3x30x30"));
  }
  SECTION("Concat along an axis out of range") {
    const auto p = write("concat", net("layer { name: \"cat\" type: \"Concat\" bottom: \"data\" "
                                       "bottom: \"data\" top: \"cat\" concat_param { axis: 4 } "
                                       "}\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"cat\" (Concat)") &&
                                                   Contains("concat_param.axis"));
  }
  SECTION("Convolution after InnerProduct: not 4-D") {
    const auto p = write("rank", net("layer { name: \"fc\" type: \"InnerProduct\" bottom: "
                                     "\"data\" top: \"fc\" inner_product_param { num_output: 10 "
                                     "} }\n" +
                                     conv_layer("num_output: 4 kernel_size: 1", "fc")));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("layer \"c\"") &&
                                                   Contains("bottom \"fc\": has shape 1x10"));
  }
  SECTION("a top produced twice") {
    const auto p = write("twice", net(conv_layer("num_output: 4 kernel_size: 1") +
                                      "layer { name: \"c2\" type: \"ReLU\" bottom: \"data\" "
                                      "top: \"c\" }\n"));
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("layer \"c2\" (ReLU)") && Contains("top \"c\""));
  }
  SECTION("input_dim count") {
    const auto p = write("dims", "input: \"data\"\ninput_dim: 1\ninput_dim: 3\ninput_dim: 8\n" +
                                     conv_layer("num_output: 4 kernel_size: 1"));
    REQUIRE_THROWS_WITH(conv::import_model(p), Contains(p) && Contains("input_dim: 3 values"));
  }
}

TEST_CASE("caffe: control characters in layer names become '_' and the descriptor reads back",
          "[import]") {
  TempDir dir;
  const auto p = dir.write(
      "ctl.prototxt",
      net("layer { name: \"c\\n1\\t\\x7f\" type: \"Convolution\" bottom: \"data\" top: \"c\"\n"
          "  convolution_param { num_output: 4 kernel_size: 3 } }\n"));
  const auto ps = conv::import_model(p);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].name == "ctl:c_1__");
  for (const char c : ps[0].name)
    CHECK(!(static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f));
  const conv::ConvProblem back = conv::parse_descriptor(conv::to_descriptor(ps[0]));
  CHECK(back == ps[0]);
  CHECK(back.name == ps[0].name);
}

TEST_CASE("caffe: Pooling reads kernel, pad and stride pairs as Caffe's PoolingLayer", "[import]") {
  // BVLC pooling_layer.cpp LayerSetUp: kernel_size OR (kernel_h and kernel_w); pad OR (pad_h and
  // pad_w); stride OR (stride_h and stride_w). One of a pair alone fails Caffe's CHECK (unlike
  // ConvolutionParameter, where a lone pad_h leaves pad_w 0); kernel_size with a lone kernel_h
  // passes the CHECKs and kernel_size is used.
  TempDir dir;
  auto pool_net = [&](const std::string& param, const std::string& dims = "1 1 9 9") {
    return dir.write("pool.prototxt",
                     net("layer { name: \"p\" type: \"Pooling\" bottom: \"data\" top: \"p\"\n"
                         "  pooling_param { " +
                             param + " } }\n" + conv_layer("num_output: 2 kernel_size: 1", "p"),
                         dims));
  };
  auto refused = [&](const std::string& param, const std::string& field) {
    const auto p = pool_net(param);
    REQUIRE_THROWS_WITH(conv::import_model(p),
                        Contains(p) && Contains("layer \"p\" (Pooling)") && Contains(field));
  };
  refused("kernel_size: 3 pad_h: 1", "pooling_param.pad_w: missing: pad_h needs it");
  refused("kernel_size: 3 pad_w: 1", "pooling_param.pad_h: missing: pad_w needs it");
  refused("kernel_size: 3 pad: 1 pad_h: 1 pad_w: 1", "pooling_param.pad: give either");
  refused("kernel_size: 3 stride_h: 2", "pooling_param.stride_w: missing: stride_h needs it");
  refused("kernel_size: 3 stride: 2 stride_h: 2 stride_w: 2", "pooling_param.stride: give either");
  refused("kernel_h: 3", "pooling_param.kernel_w: missing: kernel_h needs it");
  refused("kernel_size: 3 kernel_h: 3 kernel_w: 3", "pooling_param.kernel_size: give either");
  refused("pool: STOCHASTIC kernel_size: 3 pad: 1", "pooling_param.pad: Caffe implements padding");

  // Pairs given in full: (9 + 2 - 3) / 2 + 1 = 5 rows, (9 - 1) / 1 + 1 = 9 columns.
  auto ps = conv::import_model(
      pool_net("kernel_h: 3 kernel_w: 1 pad_h: 1 pad_w: 0 stride_h: 2 stride_w: 1"));
  REQUIRE(ps.size() == 1);
  CHECK((ps[0].H == 5 && ps[0].W == 9));
  // kernel_size wins over a lone kernel_h: 9 - 3 + 1 = 7 both ways.
  ps = conv::import_model(pool_net("kernel_size: 3 kernel_h: 5"));
  REQUIRE(ps.size() == 1);
  CHECK((ps[0].H == 7 && ps[0].W == 7));
}
