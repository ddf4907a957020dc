/* bochscpu-python's wheel is built against glibc >= 2.38, whose C23 strtoull and sscanf carry
   new symbol names; on an older glibc (Debian 12: 2.36) they are the same functions under the old
   names. Preloaded into the emulator's Python only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

unsigned long long __isoc23_strtoull(const char* s, char** end, int base) {
  return strtoull(s, end, base);
}

int __isoc23_sscanf(const char* s, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = vsscanf(s, format, args);
  va_end(args);
  return n;
}
