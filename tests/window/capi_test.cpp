#include <catch2/catch.hpp>

extern "C" int window_capi_c_scenario(char* message, size_t message_size);

TEST_CASE("session and window C API from C") {
  char message[512] = {};
  const int failed_step = window_capi_c_scenario(message, sizeof message);
  INFO("failed at step " << failed_step << ": " << message);
  CHECK(failed_step == 0);
}

extern "C" int window_capi_c_lifecycle(char* message, size_t message_size);

TEST_CASE("lifecycle C API from C: layouts, patch, retire_function, release, address reuse") {
  char message[512] = {};
  const int failed_step = window_capi_c_lifecycle(message, sizeof message);
  INFO("failed at step " << failed_step << ": " << message);
  CHECK(failed_step == 0);
}
