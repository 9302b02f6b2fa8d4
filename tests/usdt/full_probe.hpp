// The 12-argument probe that the tracer tests (bpftrace, libbpf) read back: every argument type,
// negative values, 64-bit extremes, a pointer and a string. Each test checks the values it
// receives against its own literal expectations.
#pragma once

#include <jitunwind/usdt.h>

#include "tracer_support.hpp"

#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <string>

namespace jitunwind::test {

struct full_probe {
  usdt::provider prov;
  usdt::probe p;
};

/// The string argument (argument 9).
inline constexpr const char* full_text_arg = "hello usdt";
/// Its address is the pointer argument (argument 8).
inline int full_marker = 0;

/// A loaded provider `<prefix>_<pid>_<n>` with the probe "all" (REQUIREs that it worked).
inline full_probe make_full_probe(const std::string& prefix, usdt::object_location where) {
  using usdt::arg_type;
  usdt::provider_options o;
  o.location = where;
  auto prov = usdt::provider::create(unique_provider(prefix), o);
  REQUIRE(prov.ok());
  auto p =
      prov->add_probe("all", {arg_type::i8, arg_type::u8, arg_type::i16, arg_type::u16,
                              arg_type::i32, arg_type::u32, arg_type::i64, arg_type::u64,
                              arg_type::pointer, arg_type::string, arg_type::i32, arg_type::i64});
  REQUIRE(p.ok());
  REQUIRE(prov->load().ok());
  return {std::move(*prov), *p};
}

/// Fires "all" once with: -128, 255, -32768, 65535, INT32_MIN, UINT32_MAX,
/// INT64_MIN, UINT64_MAX, &full_marker, full_text_arg, -7, INT64_MAX.
inline void fire_full(const usdt::probe& p) {
  p.fire(int8_t{-128}, uint8_t{255}, int16_t{-32768}, uint16_t{65535}, INT32_MIN, UINT32_MAX,
         INT64_MIN, UINT64_MAX, &full_marker, full_text_arg, int32_t{-7}, INT64_MAX);
}

}  // namespace jitunwind::test
