// The C API of the remote reader, on this process and on a process that does not exist.
#include <catch2/catch.hpp>

#include <jitunwind/jitunwind.h>

#include "registry/registry_writer.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <cstring>
#include <string>

using namespace jitunwind;

TEST_CASE("C API: read this process's registry and a window's SFrame") {
  static const uint8_t sframe[24] = {0xe2, 0xde, 2, 1, 3};
  static const uint8_t code[32] = {};
  detail::registry_window w;
  w.window_id = 31337;
  w.text_start = reinterpret_cast<uint64_t>(code);
  w.text_size = sizeof code;
  w.sframe_address = reinterpret_cast<uint64_t>(sframe);
  w.sframe_size = sizeof sframe;
  auto pub = detail::registry().add(w);
  REQUIRE(pub.ok());

  jitunwind_remote_window* windows = nullptr;
  size_t count = 0;
  jitunwind_error err;
  REQUIRE(jitunwind_remote_read_registry(getpid(), &windows, &count, &err) == JITUNWIND_OK);
  const jitunwind_remote_window* mine = nullptr;
  for (size_t i = 0; i < count; ++i) {
    if (windows[i].window_id == 31337) mine = &windows[i];
  }
  REQUIRE(mine != nullptr);
  CHECK(mine->generation == pub->generation);
  CHECK(mine->state == JITUNWIND_REMOTE_WINDOW_LIVE);
  CHECK(mine->abi == 3);
  CHECK(mine->text_start == w.text_start);
  CHECK(mine->sframe_size == sizeof sframe);

  uint8_t* bytes = nullptr;
  size_t size = 0;
  REQUIRE(jitunwind_remote_read_sframe(getpid(), mine, &bytes, &size, &err) == JITUNWIND_OK);
  REQUIRE(size == sizeof sframe);
  CHECK(std::memcmp(bytes, sframe, size) == 0);
  jitunwind_remote_free(bytes);

  REQUIRE(detail::registry().release(pub->slot).ok());
  CHECK(jitunwind_remote_read_sframe(getpid(), mine, &bytes, &size, &err) == JITUNWIND_E_BAD_STATE);
  CHECK(bytes == nullptr);
  jitunwind_remote_free(windows);
  jitunwind_remote_free(nullptr);
}

TEST_CASE("C API: errors carry status and message") {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  jitunwind_remote_window* windows = reinterpret_cast<jitunwind_remote_window*>(1);
  size_t count = 99;
  jitunwind_error err;
  CHECK(jitunwind_remote_read_registry(pid, &windows, &count, &err) == JITUNWIND_E_NOT_FOUND);
  CHECK(err.status == JITUNWIND_E_NOT_FOUND);
  CHECK(std::string(err.message) == "pid " + std::to_string(pid) + ": no such process");
  CHECK(windows == nullptr);
  CHECK(count == 0);
  CHECK(jitunwind_remote_read_registry(getpid(), nullptr, &count, nullptr) ==
        JITUNWIND_E_INVALID_ARGUMENT);
}
