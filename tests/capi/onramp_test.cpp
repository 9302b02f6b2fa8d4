// The on-ramp (jitunwind_name_code, jitunwind::name_code): one call names code the runtime
// placed; the implicit default session comes from the environment. The C side (onramp_c.c) is
// compiled as C; here: what the profilers' sources (perf map, registry) then hold.
#include <jitunwind/jitunwind.h>
#include <jitunwind/onramp.h>
#include <jitunwind/remote.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/process.hpp"

namespace t = jitunwind::test;

extern "C" void* capi_onramp_c_name(char* msg, size_t len);
extern "C" const size_t capi_onramp_answer_size;  // bytes of the named code (per machine)

namespace {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The live registry window whose text starts at `start`, or null.
const jitunwind::remote::window_record* live_window_at(
    const jitunwind::remote::registry_snapshot& snap, uint64_t start) {
  for (const auto& w : snap.windows)
    if (w.text_start == start && w.state == jitunwind::remote::window_state::live) return &w;
  return nullptr;
}

}  // namespace

TEST_CASE("capi on-ramp: one C call names code in the perf map and the registry") {
  t::temp_dir dir;
  // The default session is configured from the environment on first use.
  setenv("JITUNWIND_PUBLISH", "perfmap,registry", 1);
  setenv("JITUNWIND_DIR", dir.path().c_str(), 1);
  char msg[256];
  void* code = capi_onramp_c_name(msg, sizeof msg);
  INFO(msg);
  REQUIRE(code != nullptr);
  const auto start = reinterpret_cast<uint64_t>(code);
  // The perf map is batched by default: written within 10 ms, or now.
  jitunwind_session* s = nullptr;
  REQUIRE(jitunwind_default_session(&s, nullptr) == JITUNWIND_OK);
  REQUIRE(jitunwind_session_flush(s, nullptr) == JITUNWIND_OK);

  const std::string map = t::read_file(dir / ("perf-" + std::to_string(getpid()) + ".map"));
  INFO(map);
  CHECK(map.find(hex(start) + " " + hex(capi_onramp_answer_size) + " c:answer\n") !=
        std::string::npos);
  CHECK(map.find(hex(start + 64) + " 20 c:scratch2\n") != std::string::npos);

  auto snap = jitunwind::remote::read_registry(getpid());
  REQUIRE(snap.ok());
  const auto* w = live_window_at(*snap, start);
  REQUIRE(w != nullptr);
  CHECK(w->text_size == capi_onramp_answer_size);
  CHECK(w->sframe_size > 0);
  CHECK(live_window_at(*snap, start + 64) != nullptr);

  // Forgotten: gone from the registry (its window retired with no grace period and freed).
  REQUIRE(jitunwind_forget_code(code, nullptr) == JITUNWIND_OK);
  snap = jitunwind::remote::read_registry(getpid());
  REQUIRE(snap.ok());
  CHECK(live_window_at(*snap, start) == nullptr);
}

TEST_CASE("capi on-ramp: C++ name_code checks rows like window::append") {
  setenv("JITUNWIND_PUBLISH", "registry", 1);
  static const unsigned char code[32] = {0xc3};
  // A row past the end of the code.
  jitunwind::frame_row bad = jitunwind::entry_row(jitunwind::abi::amd64);
  bad.pc_offset = 40;
  const jitunwind::frame_row rows[] = {jitunwind::entry_row(jitunwind::abi::amd64), bad};
  auto r = jitunwind::name_code(code, sizeof code, "cxx:bad", rows);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == jitunwind::errc::invalid_argument);
  // Nothing was kept: the same range can be named with good rows.
  REQUIRE(jitunwind::name_code(code, sizeof code, "cxx:good", jitunwind::span(rows, 1)).ok());
  auto s = jitunwind::default_session();
  REQUIRE(s.ok());
  CHECK(*s != nullptr);
  REQUIRE(jitunwind::forget_code(code).ok());
}

TEST_CASE("capi on-ramp: a bad environment is reported by the first call") {
  setenv("JITUNWIND_PUBLISH", "no-such-publisher", 1);
  static const unsigned char code[16] = {0xc3};
  jitunwind_error err;
  CHECK(jitunwind_name_code(code, sizeof code, "x", nullptr, 0, &err) ==
        JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::Contains("JITUNWIND_PUBLISH"));
}
