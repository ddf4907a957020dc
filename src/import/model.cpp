// conv::import_model: format detection and dispatch; the importers are onnx.cpp and caffe.cpp.
#include <charconv>
#include <filesystem>
#include <fstream>

#include "conv/model.hpp"
#include "importers.hpp"
#include "quoted.hpp"
#include "regular_file.hpp"

namespace conv {

namespace import {

void Source::fail(const std::string& what) const {
  throw Error("model " + conv::quoted(path) + ": " + what);
}

ConvProblem checked(const Source& src, const std::string& where, ConvProblem p) {
  // Control characters would reach `autotune layers` output raw, and the descriptor printer
  // escapes only `"` and `\`, so a name like "c\n1" could not be read back by --batch.
  p.name = underscore_controls(src.net + ":" + where);
  // The layer's own name field is at fault, not ConvProblem.name (which the message had blamed,
  // echoing the bytes raw).
  if (const size_t i = utf8_error(where); i != std::string::npos)
    src.fail(conv::quoted(where) + ": name: must be UTF-8 text; byte " + std::to_string(i) +
             " is not");
  try {
    p.validate();
  } catch (const Error& e) {
    src.fail(conv::quoted(where) + ": " + e.what());
  }
  return p;
}

}  // namespace import

std::pair<std::string, std::vector<int64_t>> parse_input_shape(std::string_view text) {
  const std::string quoted = "--input \"" + std::string(text) + "\": ";
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos)
    throw Error(quoted + "expected NAME=DIMS, e.g. data=1x3x224x224");
  if (eq == 0) throw Error(quoted + "empty input name");
  std::vector<int64_t> dims;
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    const size_t x = rest.find('x');
    const std::string_view d = rest.substr(0, x);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
    if (d.empty() || ec != std::errc() || end != d.data() + d.size() || v < 1 ||
        v > (int64_t{1} << 31))
      throw Error(quoted + "dimension \"" + std::string(d) +
                  "\": expected an integer in [1, 2^31]");
    dims.push_back(v);
    if (x == std::string_view::npos) break;
    rest = rest.substr(x + 1);
  }
  return {std::string(text.substr(0, eq)), dims};
}

ModelFormat model_format(const std::string& path) {
  require_regular_file(path, "model");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("model " + conv::quoted(path) + ": cannot open for reading");
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".onnx") return ModelFormat::onnx;
  if (ext == ".prototxt" || ext == ".pbtxt") return ModelFormat::caffe_prototxt;
  char buf[512];
  in.read(buf, sizeof buf);
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    const unsigned char c = static_cast<unsigned char>(buf[i]);
    if (c < 0x09 || (c > 0x0d && c < 0x20)) return ModelFormat::onnx;  // binary protobuf
  }
  return ModelFormat::caffe_prototxt;
}

std::vector<ConvProblem> import_model(const std::string& path, const InputShapes& inputs) {
  const ModelFormat format = model_format(path);
  // Problem names are UTF-8: a file name that is not (Python's import_model takes bytes) names
  // its problems with the odd bytes escaped, rather than failing every layer.
  const import::Source src{path, escaped(std::filesystem::path(path).stem().string())};
  return format == ModelFormat::onnx ? import::import_onnx(src, inputs)
                                     : import::import_caffe_prototxt(src, inputs);
}

}  // namespace conv
