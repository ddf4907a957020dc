// Quoting user text into error messages.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace conv {

/// `s` in double quotes, control characters and DEL as \xHH: a descriptor, flag or model name
/// echoed in an error must not move the cursor, ring the bell or start a terminal escape.
inline std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace conv
