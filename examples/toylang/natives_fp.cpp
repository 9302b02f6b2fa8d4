// Compiled with -fno-omit-frame-pointer (see CMakeLists.txt): a frame-pointer walk through this
// helper finds its caller.
#include "builtins.h"

extern "C" __attribute__((noinline)) int64_t toylang_native_fp(int64_t n) {
  uint64_t x = static_cast<uint64_t>(n) * 0x9e3779b97f4a7c15ull + 1;
  uint64_t acc = 0;
  for (int64_t i = 0; i < (n & 0xffff); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    acc += x >> 32;
    // Keeps the loop a real loop (no closed form, no vectorization across iterations).
    asm volatile("" : "+r"(x), "+r"(acc));
  }
  // A value kept in the stack frame, as most real helpers have: GCC 12 sets up no frame (and so
  // no frame pointer, whatever the flags) in a leaf function that does not use its stack.
  volatile uint64_t spill = acc ^ x;
  return static_cast<int64_t>(spill & 0xffff);
}
