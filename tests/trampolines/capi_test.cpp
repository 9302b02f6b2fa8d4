// The trampolines C API (capi.c is compiled as C11).
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdlib>

extern "C" int trampolines_capi_roundtrip(char* msg, size_t len);

TEST_CASE("C API: create, acquire, call, release, refuse bad input") {
  // The C API's session is configured from the environment: no perf map or jitdump in /tmp.
  setenv("JITUNWIND_PUBLISH", "registry,usdt-events", 1);
  char msg[600] = "";
  CHECK(trampolines_capi_roundtrip(msg, sizeof msg) == 0);
  INFO(msg);
  CHECK(msg[0] == '\0');
}

extern "C" int trampolines_capi_in_session(char* msg, size_t len);

TEST_CASE("C API: a pool in the caller's session") {
  char msg[600] = "";
  CHECK(trampolines_capi_in_session(msg, sizeof msg) == 0);
  INFO(msg);
  CHECK(msg[0] == '\0');
}
