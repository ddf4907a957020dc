// Reading an untrusted .onnx file: its size checked before it is read, the memory its parse would
// take estimated in one pass over the wire format before protobuf allocates anything.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <unordered_map>

#include "limits.hpp"
#include "onnx_read.hpp"

namespace conv::import::onnx_import {

namespace {

namespace pb = google::protobuf;
using Wire = pb::internal::WireFormatLite;

/// protobuf's own default recursion limit: deeper files fail its parse anyway.
constexpr int kMaxDepth = 100;

/// What the importer's own maps (producers, shapes, the cycle check) take per node, measured on
/// a 393 k node chain with short names (docs/model-import.md).
constexpr uint64_t kImporterBytesPerNode = 512;

/// An upper estimate of the memory ParseFromString allocates for a message, in bytes: per
/// sub-message its empty size plus a heap block's overhead and a slot in its repeated field's
/// array (which may be twice as long as needed), per string its object and its heap copy, per
/// varint of a repeated field 16 bytes. Unknown fields cost as much as strings. Each node adds
/// what the importer keeps of it after the parse.
class Estimate {
 public:
  uint64_t bytes = 0;
  uint64_t messages = 0;

  /// False when the bytes are not valid wire format (protobuf's parse reports that).
  bool walk(pb::io::CodedInputStream& in, const pb::Descriptor* type, int depth) {
    for (uint32_t tag; (tag = in.ReadTag()) != 0;) {
      const pb::FieldDescriptor* f = type->FindFieldByNumber(Wire::GetTagFieldNumber(tag));
      switch (Wire::GetTagWireType(tag)) {
        case Wire::WIRETYPE_VARINT: {
          uint64_t v;
          if (!in.ReadVarint64(&v)) return false;
          bytes += 16;
          break;
        }
        case Wire::WIRETYPE_FIXED64:
          if (!in.Skip(8)) return false;
          bytes += 16;
          break;
        case Wire::WIRETYPE_FIXED32:
          if (!in.Skip(4)) return false;
          bytes += 16;
          break;
        case Wire::WIRETYPE_LENGTH_DELIMITED: {
          uint32_t len;
          if (!in.ReadVarint32(&len) || len > static_cast<uint32_t>(INT_MAX)) return false;
          if (f && f->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
            if (depth >= kMaxDepth) return false;
            bytes += empty_size(f->message_type()) + 32;
            ++messages;
            if (f->message_type() == onnx::NodeProto::descriptor()) bytes += kImporterBytesPerNode;
            const auto limit = in.PushLimit(static_cast<int>(len));
            if (!walk(in, f->message_type(), depth + 1)) return false;
            in.PopLimit(limit);
          } else if (f && f->is_packable()) {
            bytes += packed_bytes(in, f, len);
          } else {
            bytes += 64 + (len > 15 ? len + 17 : 0);
            if (!in.Skip(static_cast<int>(len))) return false;
          }
          break;
        }
        default:
          return false;  // groups: ONNX has none
      }
    }
    return in.ConsumedEntireMessage();
  }

 private:
  std::unordered_map<const pb::Descriptor*, uint64_t> sizes_;

  uint64_t empty_size(const pb::Descriptor* type) {
    auto [it, fresh] = sizes_.emplace(type, 0);
    if (fresh)
      it->second =
          pb::MessageFactory::generated_factory()->GetPrototype(type)->SpaceUsedLong() + 16;
    return it->second;
  }

  /// A packed repeated scalar: fixed-size elements as stored, varints at 8 bytes each, doubled
  /// for the array's growth.
  static uint64_t packed_bytes(pb::io::CodedInputStream& in, const pb::FieldDescriptor* f,
                               uint32_t len) {
    const void* data;
    int size;
    uint64_t varints = 0;
    uint32_t left = len;
    while (left > 0 && in.GetDirectBufferPointer(&data, &size)) {
      const int take = static_cast<int>(std::min<uint32_t>(left, static_cast<uint32_t>(size)));
      const auto* p = static_cast<const uint8_t*>(data);
      varints +=
          static_cast<uint64_t>(std::count_if(p, p + take, [](uint8_t b) { return b < 0x80; }));
      in.Skip(take);
      left -= static_cast<uint32_t>(take);
    }
    const bool fixed = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT ||
                       f->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE ||
                       f->type() == pb::FieldDescriptor::TYPE_FIXED32 ||
                       f->type() == pb::FieldDescriptor::TYPE_FIXED64 ||
                       f->type() == pb::FieldDescriptor::TYPE_SFIXED32 ||
                       f->type() == pb::FieldDescriptor::TYPE_SFIXED64;
    return fixed ? len : varints * 16;
  }
};

}  // namespace

onnx::ModelProto read_model(const Source& src) {
  const uint64_t size = checked_file_size(src);
  if (size == 0) src.fail("empty file, not an ONNX model");
  if (size > static_cast<uint64_t>(INT_MAX))
    src.fail("larger than 2 GiB, protobuf's limit (ONNX external data is not supported)");
  std::ifstream in(src.path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    src.fail("cannot read " + std::to_string(size) + " bytes");
  {
    pb::io::CodedInputStream wire(reinterpret_cast<const uint8_t*>(bytes.data()),
                                  static_cast<int>(size));
    Estimate e;
    if (e.walk(wire, onnx::ModelProto::descriptor(), 0))
      check_parse_estimate(src, e.bytes, size,
                           std::to_string(e.messages) + " messages (nodes, attributes, tensors)");
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    src.fail("not an ONNX model: protobuf parsing of ModelProto failed (garbage or truncated)");
  if (model.ir_version() <= 0) src.fail("not an ONNX model: ModelProto.ir_version is missing");
  if (!model.has_graph() || model.graph().node_size() == 0)
    src.fail("not an ONNX model: ModelProto.graph is missing or has no nodes");
  return model;
}

}  // namespace conv::import::onnx_import
