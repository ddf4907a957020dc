// The dates perf databases store: UTC ISO 8601 "YYYY-MM-DDTHH:MM:SSZ". A database file from
// another machine is untrusted input, and a merge keeps the newest row per key: a row dated 9999
// would win every later merge, so a date must be a real calendar time and not in the future.
#pragma once

#include <cctype>
#include <cstring>
#include <ctime>
#include <string>

namespace conv {

/// "" for a good date, else why not (the text ends a "date: ..." message). A day of clock skew
/// between machines is allowed.
inline std::string date_problem(const std::string& d) {
  static const char* shape = "dddd-dd-ddTdd:dd:ddZ";
  bool ok = d.size() == std::strlen(shape);
  for (size_t i = 0; ok && i < d.size(); ++i)
    ok = shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(d[i])) != 0 : d[i] == shape[i];
  if (!ok) return "malformed date (expected UTC ISO 8601 like 2026-01-31T12:00:00Z)";
  auto num = [&](size_t at, size_t n) { return std::stoi(d.substr(at, n)); };
  const int year = num(0, 4), month = num(5, 2), day = num(8, 2);
  const int hour = num(11, 2), minute = num(14, 2), second = num(17, 2);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (year < 1970 || month < 1 || month > 12 || day < 1 ||
      day > days[month - 1] + (month == 2 && leap) || hour > 23 || minute > 59 || second > 60)
    return "not a calendar date and time after 1970: " + d;
  std::tm t{};
  t.tm_year = year - 1900, t.tm_mon = month - 1, t.tm_mday = day;
  t.tm_hour = hour, t.tm_min = minute, t.tm_sec = second;
  if (timegm(&t) > std::time(nullptr) + 86400) return "in the future: " + d;
  return "";
}

}  // namespace conv
