// conv::Error: the one exception type convtune throws for bad input and failed calls.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conv {

/// The largest length <= `max` (< text.size()) at which `text` can be cut without splitting a
/// UTF-8 sequence: back from `max` over continuation bytes.
inline size_t utf8_cut(std::string_view text, size_t max) {
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return cut;
}

/// `message` itself when it has at most 4096 bytes; else its first and last 1024 bytes (cut
/// between UTF-8 sequences) around "... (N bytes) ...": input echoed into a message (a 300 KB
/// descriptor, path or option value) must not bury the field named first nor the reason given
/// last.
inline std::string shorten_message(const std::string& message) {
  constexpr size_t kMaxBytes = 4096, kEndBytes = 1024;
  if (message.size() <= kMaxBytes) return message;
  size_t tail = message.size() - kEndBytes;
  while (tail < message.size() && (static_cast<unsigned char>(message[tail]) & 0xc0) == 0x80)
    ++tail;
  return message.substr(0, utf8_cut(message, kEndBytes)) + "... (" +
         std::to_string(message.size()) + " bytes) ..." + message.substr(tail);
}

/// Thrown for every rejected input and every failed operation. The message names the offending
/// field or argument first (e.g. "ConvProblem.stride_h: must be >= 1, got 0"); messages longer
/// than 4096 bytes are shortened (shorten_message).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(shorten_message(message)) {}
};

}  // namespace conv
