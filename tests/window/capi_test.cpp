#include <catch2/catch.hpp>

#include "support/process.hpp"

#include <unistd.h>

#include <string>

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

extern "C" int window_capi_c_durability(const char* dir, const char* map);

TEST_CASE("durability from C: batched written by jitunwind_session_flush, sync by publish") {
  jitunwind::test::temp_dir dir;
  const std::string map = dir / ("perf-" + std::to_string(::getpid()) + ".map");
  CHECK(window_capi_c_durability(dir.path().c_str(), map.c_str()) == 0);
}

extern "C" int window_capi_c_accessors(void);

TEST_CASE("window accessors from C: text range, ownership, functions, published SFrame, name_range") {
  CHECK(window_capi_c_accessors() == 0);
}
