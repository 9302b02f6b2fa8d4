#include <catch2/catch.hpp>

extern "C" int window_capi_c_scenario(char* message, size_t message_size);

TEST_CASE("session and window C API from C") {
  char message[512] = {};
  const int failed_step = window_capi_c_scenario(message, sizeof message);
  INFO("failed at step " << failed_step << ": " << message);
  CHECK(failed_step == 0);
}
