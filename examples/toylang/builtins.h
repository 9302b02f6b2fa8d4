// Builtin functions of toylang. Each back end calls them its own way (the JIT emits native
// calls, the interpreter calls them from its eval loop), but the semantics live here so that
// both runtimes print exactly the same thing.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace toylang {

enum class builtin : uint8_t {
  print,        ///< print(x): writes x and a newline to stdout, returns x
  checkpoint,   ///< checkpoint(tag): fires the runtime's ground-truth probe, returns 0
  native_fp,    ///< native_fp(n): native work, compiled WITH frame pointers, returns a hash
  native_nofp,  ///< native_nofp(n): native work, compiled WITHOUT frame pointers
};

struct builtin_info {
  builtin id;
  const char* name;
  uint32_t arity;
};

/// Every builtin, indexed by `static_cast<size_t>(builtin)`.
std::span<const builtin_info> builtins();

/// The builtin called `name`, if any.
const builtin_info* find_builtin(std::string_view name);

/// print(x). Uses stdio (buffered); runtimes flush before exiting.
int64_t print_value(int64_t x);

/// native_fp(n) / native_nofp(n): `n & 0xffff` rounds of a xorshift mix seeded with n (so a
/// profiler sees time spent in them), then a value that depends on every round. Defined in two
/// files compiled with and without -fno-omit-frame-pointer respectively. `noinline` so that
/// their frames are real.
extern "C" int64_t toylang_native_fp(int64_t n);
extern "C" int64_t toylang_native_nofp(int64_t n);

/// Address of the C function implementing a pure native builtin (native_fp, native_nofp,
/// print), or null for runtime-specific ones (checkpoint).
using native_fn = int64_t (*)(int64_t);
native_fn native_entry(builtin id);

}  // namespace toylang
