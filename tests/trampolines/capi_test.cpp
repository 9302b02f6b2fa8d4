// The trampolines C API (capi.c is compiled as C11).
#include <catch2/catch.hpp>

#include <cstddef>

extern "C" int trampolines_capi_roundtrip(char* msg, size_t len);

TEST_CASE("C API: create, acquire, call, release, refuse bad input") {
  char msg[600] = "";
  CHECK(trampolines_capi_roundtrip(msg, sizeof msg) == 0);
  INFO(msg);
  CHECK(msg[0] == '\0');
}
