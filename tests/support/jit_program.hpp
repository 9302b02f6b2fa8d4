// Helpers of the small JIT programs the tests drive (tests/jitdump/testjit,
// tests/window/targets/recompile_jit, tests/jitwalk/targets/jit_target): header-only and on the
// public API, so programs that link the library as a runtime would can use them.
#pragma once

#include <jitunwind/result.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace jitunwind::test {

/// The prefix of `die`'s message; each program's main sets it.
inline const char* program_name = "jit program";

/// Prints "<program>: <what>" and exits with status 2 (a setup failure, not a test verdict).
[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program_name, what.c_str());
  std::exit(2);
}

/// The value of `r`, or `die` naming `what` and the error.
template <class T>
T must(result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message());
  return std::move(r).value();
}

inline void must(result<void> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message());
}

/// Machine code being emitted, little-endian.
struct code_buf {
  std::vector<uint8_t> b;
  void put(std::initializer_list<uint8_t> v) { b.insert(b.end(), v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  uint32_t at() const { return static_cast<uint32_t>(b.size()); }
};

}  // namespace jitunwind::test
