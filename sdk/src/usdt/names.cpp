// Names, argument types and the note's argument strings.
#include <jitunwind/usdt.h>

#include "common/error.hpp"

#include <array>
#include <cctype>
#include <cstdio>

namespace jitunwind::usdt {

namespace {

struct type_info {
  arg_type type;
  const char* name;
  int size;  // bytes; negative = signed (the SDT convention)
};

constexpr std::array<type_info, 11> types = {{
    {arg_type::i8, "i8", -1},
    {arg_type::u8, "u8", 1},
    {arg_type::i16, "i16", -2},
    {arg_type::u16, "u16", 2},
    {arg_type::i32, "i32", -4},
    {arg_type::u32, "u32", 4},
    {arg_type::i64, "i64", -8},
    {arg_type::u64, "u64", 8},
    {arg_type::pointer, "ptr", 8},
    {arg_type::string, "str", 8},
    {arg_type::f64, "f64", 8},
}};

const type_info* info(arg_type t) {
  for (const auto& i : types)
    if (i.type == t) return &i;
  return nullptr;
}

// The SysV x86-64 integer argument registers, by width: 8, 4, 2, 1 bytes.
constexpr std::array<std::array<const char*, 4>, 6> registers = {{
    {"rdi", "edi", "di", "dil"},
    {"rsi", "esi", "si", "sil"},
    {"rdx", "edx", "dx", "dl"},
    {"rcx", "ecx", "cx", "cl"},
    {"r8", "r8d", "r8w", "r8b"},
    {"r9", "r9d", "r9w", "r9b"},
}};

size_t width_index(int bytes) {
  switch (bytes) {
    case 8:
      return 0;
    case 4:
      return 1;
    case 2:
      return 2;
    default:
      return 3;
  }
}

result<void> validate_name(std::string_view what, std::string_view name, size_t max) {
  if (name.empty())
    return jitunwind::detail::make_error(errc::invalid_argument, "usdt: empty %.*s name",
                                         static_cast<int>(what.size()), what.data());
  if (name.size() > max)
    return jitunwind::detail::make_error(
        errc::invalid_argument,
        "usdt: %.*s name '%.*s' is %zu characters long (at most %zu: "
        "perf and the kernel's trace events limit names)",
        static_cast<int>(what.size()), what.data(), static_cast<int>(name.size()), name.data(),
        name.size(), max);
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool ok =
        c == '_' || (c < 0x80 && std::isalpha(c)) || (i > 0 && c < 0x80 && std::isdigit(c));
    if (!ok) {
      char shown[8];
      if (c >= 0x20 && c < 0x7f)
        std::snprintf(shown, sizeof shown, "'%c'", c);
      else
        std::snprintf(shown, sizeof shown, "0x%02x", c);
      return jitunwind::detail::make_error(
          errc::invalid_argument,
          "usdt: %.*s name '%.*s': character %s at position %zu is not accepted by tracers "
          "(use letters, digits and '_', not starting with a digit)",
          static_cast<int>(what.size()), what.data(), static_cast<int>(name.size()), name.data(),
          shown, i);
    }
  }
  return ok_result();
}

}  // namespace

const char* to_string(arg_type type) noexcept {
  const type_info* i = info(type);
  return i != nullptr ? i->name : "unknown";
}

std::optional<arg_type> parse_arg_type(std::string_view text) noexcept {
  for (const auto& i : types)
    if (text == i.name) return i.type;
  if (text == "pointer") return arg_type::pointer;
  if (text == "string") return arg_type::string;
  if (text == "double") return arg_type::f64;
  return std::nullopt;
}

result<void> validate_provider_name(std::string_view name) {
  // The SDK's own static events use this provider: a dynamic one of the same name makes
  // tracers that resolve probes by provider and name (bpftrace -p) fail for both.
  if (name == "jitunwind")
    return jitunwind::detail::make_error(
        errc::invalid_argument,
        "usdt: provider name 'jitunwind' is reserved for the SDK's own events");
  return validate_name("provider", name, max_provider_name);
}

result<void> validate_probe_name(std::string_view name) {
  return validate_name("probe", name, max_probe_name);
}

result<std::string> argument_string(span<const arg_type> args) {
  if (args.size() > max_args)
    return jitunwind::detail::make_error(
        errc::limit_exceeded, "usdt: %zu arguments (tracers address at most %zu: arg0..arg11)",
        args.size(), max_args);
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    const type_info* t = info(args[i]);
    if (t == nullptr)
      return jitunwind::detail::make_error(errc::invalid_argument,
                                           "usdt: argument %zu: unknown type %d", i,
                                           static_cast<int>(args[i]));
    if (args[i] == arg_type::f64)
      return jitunwind::detail::make_error(
          errc::unsupported,
          "usdt: argument %zu: f64 is not supported: bpftrace 0.17 has no floating-point type "
          "and libbpf cannot read %%xmm registers; pass a scaled integer or the bits as u64",
          i);
    if (!out.empty()) out += ' ';
    out += std::to_string(t->size);
    out += '@';
    const int bytes = t->size < 0 ? -t->size : t->size;
    if (i < registers.size()) {
      out += '%';
      out += registers[i][width_index(bytes)];
    } else {
      // At the probe site (the stub's first instruction) %rsp points at the return address;
      // the caller's 7th argument is the next 8-byte slot above it.
      out += std::to_string(8 * (i - registers.size() + 1));
      out += "(%rsp)";
    }
  }
  return out;
}

}  // namespace jitunwind::usdt
