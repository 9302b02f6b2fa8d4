// The C API from a strict C89 translation unit (c89_c.c, -std=c89 -pedantic -Werror).
#include <catch2/catch.hpp>

#include <cstddef>

extern "C" int capi_c89_scenario(char* msg, size_t len);

TEST_CASE("capi C89: a C89 runtime describes saved registers and publishes a function") {
  char msg[512];
  const int rc = capi_c89_scenario(msg, sizeof msg);
  INFO(msg);
  CHECK(rc == 0);
}
