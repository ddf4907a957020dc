// conv::Error: the one exception type convtune throws for bad input and failed calls.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace conv {

/// `message` itself when it has at most 4096 bytes; else its first 1024 bytes (back to the start
/// of a UTF-8 sequence) and "... (N bytes)": input echoed into a message (a 300 KB descriptor,
/// path or option value) must not bury what the message says first.
inline std::string shorten_message(const std::string& message) {
  constexpr size_t kMaxBytes = 4096, kHeadBytes = 1024;
  if (message.size() <= kMaxBytes) return message;
  size_t cut = kHeadBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xc0) == 0x80) --cut;
  return message.substr(0, cut) + "... (" + std::to_string(message.size()) + " bytes)";
}

/// Thrown for every rejected input and every failed operation. The message names the offending
/// field or argument first (e.g. "ConvProblem.stride_h: must be >= 1, got 0"); messages longer
/// than 4096 bytes are shortened (shorten_message).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(shorten_message(message)) {}
};

}  // namespace conv
