// Compiled with -fomit-frame-pointer (see CMakeLists.txt): RBP is not touched here, so a
// frame-pointer walk that starts in this helper skips its caller's frame. Only the helper's
// SFrame/eh_frame rows describe it correctly.
#include "builtins.h"

extern "C" __attribute__((noinline)) int64_t toylang_native_nofp(int64_t n) {
  uint64_t x = static_cast<uint64_t>(n) * 0xbf58476d1ce4e5b9ull + 3;
  uint64_t acc = 0;
  for (int64_t i = 0; i < (n & 0xffff); ++i) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    acc += (x * 0x2545f4914f6cdd1dull) >> 40;
    asm volatile("" : "+r"(x), "+r"(acc));
  }
  return static_cast<int64_t>((acc + x) & 0xffff);
}
