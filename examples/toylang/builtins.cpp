#include "builtins.h"

#include <array>
#include <cinttypes>
#include <cstdio>

namespace toylang {

namespace {
constexpr std::array<builtin_info, 4> table = {{
    {builtin::print, "print", 1},
    {builtin::checkpoint, "checkpoint", 1},
    {builtin::native_fp, "native_fp", 1},
    {builtin::native_nofp, "native_nofp", 1},
}};

int64_t print_entry(int64_t x) {
  return print_value(x);
}
}  // namespace

std::span<const builtin_info> builtins() {
  return table;
}

const builtin_info* find_builtin(std::string_view name) {
  for (const builtin_info& b : table) {
    if (name == b.name) return &b;
  }
  return nullptr;
}

int64_t print_value(int64_t x) {
  std::printf("%" PRId64 "\n", x);
  return x;
}

native_fn native_entry(builtin id) {
  switch (id) {
    case builtin::print:
      return &print_entry;
    case builtin::native_fp:
      return &toylang_native_fp;
    case builtin::native_nofp:
      return &toylang_native_nofp;
    case builtin::checkpoint:
      return nullptr;
  }
  return nullptr;
}

}  // namespace toylang
