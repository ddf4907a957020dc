// Quoting user text into error messages.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "conv/error.hpp"

namespace conv {

/// A C0 control character or DEL: what would move a terminal's cursor or end a line.
inline bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

/// Length of the UTF-8 sequence starting at s[i] (1-4), or 0 when the bytes there are not one
/// (RFC 3629, as Python decodes: no overlong forms, surrogates or code points past U+10FFFF).
inline int utf8_length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const int n = b < 0x80 ? 1 : b < 0xc2 ? 0 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : b < 0xf5 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const auto c = n > 1 ? static_cast<unsigned char>(s[i + 1]) : 0x80;
  if ((b == 0xe0 && c < 0xa0) || (b == 0xed && c >= 0xa0) || (b == 0xf0 && c < 0x90) ||
      (b == 0xf4 && c >= 0x90))
    return 0;
  return n;
}

/// Index of the first byte of `s` that does not start a UTF-8 sequence (utf8_length), or npos
/// when all of `s` is UTF-8.
inline size_t utf8_error(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const int n = utf8_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

/// `s` with control characters, DEL and bytes that are not UTF-8 as \xHH: text echoed in an error
/// or a report must not move the cursor or start a terminal escape, and must stay valid UTF-8
/// for Python's exception message.
inline std::string escaped(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    const int n = utf8_length(s, i);
    if (n == 0 || is_control(s[i])) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

/// escaped(s) in double quotes.
inline std::string quoted(std::string_view s) {
  return "\"" + escaped(s) + "\"";
}

/// `s` with each control character as '_': a layer name that prints on one line (model imports,
/// descriptors and the perf database write names so).
inline std::string underscore_controls(std::string s) {
  std::replace_if(s.begin(), s.end(), is_control, '_');
  return s;
}

/// quoted() of `s` when it has at most `max` bytes; else of its first `max` bytes (back to the
/// start of a UTF-8 sequence) followed by `... (N bytes)`: a whole 300 KB line echoed into an
/// error message would bury the message.
inline std::string quoted_head(std::string_view s, size_t max = 200) {
  if (s.size() <= max) return quoted(s);
  return quoted(s.substr(0, utf8_cut(s, max))) + "... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace conv
