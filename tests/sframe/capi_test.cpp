// Runs the C-language tests of the frame and sframe C API (capi_c.c, compiled as C).
#include <catch2/catch.hpp>

#include <cstddef>

extern "C" int capi_c_encode_decode(char* why, size_t why_len);
extern "C" int capi_c_lookup_and_unwind(char* why, size_t why_len);

TEST_CASE("C API from C: build, encode, check, decode, relocate") {
  char why[1024] = "";
  const int line = capi_c_encode_decode(why, sizeof why);
  INFO("capi_c.c:" << line << ": " << why);
  CHECK(line == 0);
}

TEST_CASE("C API from C: table lookup, step and unwind") {
  char why[1024] = "";
  const int line = capi_c_lookup_and_unwind(why, sizeof why);
  INFO("capi_c.c:" << line << ": " << why);
  CHECK(line == 0);
}
