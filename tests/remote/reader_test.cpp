// The out-of-process reader against real processes: the SDK linked statically (registry in
// .dynsym and only in .symtab), as a shared library, a fake registry of another version, a
// process without the SDK, and a process that does not exist.
#include <catch2/catch.hpp>

#include <jitunwind/registry_abi.h>
#include <jitunwind/remote.h>

#include "registry/registry_writer.hpp"
#include "remote/child.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

using namespace jitunwind;

namespace {

void check_target_windows(const remote::registry_snapshot& snap, int count) {
  REQUIRE(snap.windows.size() == static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const remote::window_record& w = snap.windows[static_cast<size_t>(i)];
    INFO("window " << i);
    CHECK(w.slot == static_cast<uint32_t>(i));
    CHECK(w.window_id == 1000u + static_cast<unsigned>(i));
    CHECK(w.text_start == 0x100000ull * static_cast<uint64_t>(i + 1));
    CHECK(w.text_size == 0x1000u + static_cast<unsigned>(i));
    CHECK(w.sframe_address == 0x7000000ull + 0x100ull * static_cast<uint64_t>(i));
    CHECK(w.sframe_size == 0x40u + static_cast<unsigned>(i));
    CHECK(w.code_abi == abi::amd64);
    CHECK(w.state == (i % 2 == 1 ? remote::window_state::retired : remote::window_state::live));
    CHECK(w.generation > 0);
    CHECK(w.sequence % 2 == 0);
    if (i > 0) CHECK(w.generation > snap.windows[static_cast<size_t>(i - 1)].generation);
  }
}

std::string nm_dynamic(const std::string& path) {
  return test::run({"nm", "-D", "--defined-only", path}).out;
}

}  // namespace

TEST_CASE("statically linked SDK: registry found in .dynsym with every field") {
  const std::string exe = test::binary_path("tests/remote/registry_target_dynsym");
  CHECK(nm_dynamic(exe).find("jitunwind_registry") != std::string::npos);
  test::child_process child({exe, "5"});
  REQUIRE(child.read_line() == "ready");
  auto snap = remote::read_registry(child.pid());
  REQUIRE(snap.ok());
  REQUIRE(snap->registries.size() == 1);
  CHECK(snap->registries[0].object_path == exe);
  CHECK(snap->registries[0].found_in == remote::symbol_table::dynsym);
  CHECK(snap->pid == child.pid());
  check_target_windows(*snap, 5);

  remote::read_options live_only;
  live_only.include_retired = false;
  auto live = remote::read_registry(child.pid(), live_only);
  REQUIRE(live.ok());
  CHECK(live->windows.size() == 3);
  for (const auto& w : live->windows) CHECK(w.state == remote::window_state::live);
  CHECK(child.finish() == 0);
}

TEST_CASE("statically linked SDK without the export flag: registry found in .symtab") {
  const std::string exe = test::binary_path("tests/remote/registry_target_symtab");
  CHECK(nm_dynamic(exe).find("jitunwind_registry") == std::string::npos);
  test::child_process child({exe, "3"});
  REQUIRE(child.read_line() == "ready");
  auto snap = remote::read_registry(child.pid());
  REQUIRE(snap.ok());
  REQUIRE(snap->registries.size() == 1);
  CHECK(snap->registries[0].found_in == remote::symbol_table::symtab);
  check_target_windows(*snap, 3);
  CHECK(child.finish() == 0);
}

TEST_CASE("shared libjitunwind.so: registry found in the library, empty before any window") {
  const std::string exe = test::binary_path("tests/remote/registry_target_shared");
  test::child_process child({exe});
  REQUIRE(child.read_line().rfind("ready", 0) == 0);
  auto snap = remote::read_registry(child.pid());
  REQUIRE(snap.ok());
  REQUIRE(snap->registries.size() == 1);
  CHECK(snap->registries[0].object_path.find("libjitunwind.so") != std::string::npos);
  CHECK(snap->registries[0].found_in == remote::symbol_table::dynsym);
  CHECK(snap->windows.empty());
  auto reader = remote::registry_reader::open(child.pid());
  REQUIRE(reader.ok());
  auto changes = reader->change_count();
  REQUIRE(changes.ok());
  CHECK(*changes == 0);
  CHECK(child.finish() == 0);
}

TEST_CASE("own process: windows published now are read back, SFrame bytes too") {
  detail::registry_window w;
  static const uint8_t sframe[] = {0xe2, 0xde, 2, 1, 3, 0, 0xf8, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  static const uint8_t code[64] = {0xc3};
  w.window_id = 777;
  w.text_start = reinterpret_cast<uint64_t>(code);
  w.text_size = sizeof(code);
  w.sframe_address = reinterpret_cast<uint64_t>(sframe);
  w.sframe_size = sizeof(sframe);
  auto pub = detail::registry().add(w);
  REQUIRE(pub.ok());
  auto reader = remote::registry_reader::open(getpid());
  REQUIRE(reader.ok());
  auto before = reader->change_count();
  REQUIRE(before.ok());
  auto snap = reader->read();
  REQUIRE(snap.ok());
  const remote::window_record* found = nullptr;
  for (const auto& r : snap->windows) {
    if (r.window_id == 777 && r.generation == pub->generation) found = &r;
  }
  REQUIRE(found != nullptr);
  CHECK(found->state == remote::window_state::live);
  auto bytes = reader->read_sframe(*found);
  REQUIRE(bytes.ok());
  CHECK(std::vector<uint8_t>(std::begin(sframe), std::end(sframe)) == *bytes);

  // After the window changes, bytes read for the old copy are refused.
  REQUIRE(detail::registry().retire(pub->slot).ok());
  auto stale = reader->read_sframe(*found);
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code() == errc::bad_state);
  CHECK(stale.error().message().find("changed while its SFrame was read") != std::string::npos);
  auto after = reader->change_count();
  REQUIRE(after.ok());
  CHECK(*after > *before);
  REQUIRE(detail::registry().release(pub->slot).ok());
}

TEST_CASE("reader errors name the pid and what failed") {
  SECTION("no such process") {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    REQUIRE(pid > 0);
    waitpid(pid, nullptr, 0);
    auto r = remote::read_registry(pid);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::not_found);
    CHECK(r.error().message() == "pid " + std::to_string(pid) + ": no such process");
  }
  SECTION("a zombie: no file mappings, not a permission problem") {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    REQUIRE(pid > 0);
    // Not reaped yet: a zombie, whose /proc/PID/maps is empty.
    for (int i = 0; i < 500; ++i) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      if (line.find(") Z ") != std::string::npos) break;
      usleep(10 * 1000);
    }
    auto r = remote::read_registry(pid);
    waitpid(pid, nullptr, 0);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::not_found);
    CHECK(r.error().message() ==
          "pid " + std::to_string(pid) + " has no file mappings (a zombie or a kernel thread?)");
  }
  SECTION("process without the SDK") {
    test::child_process child({"/bin/cat"});
    // Until exec has happened the child's maps are ours (which has a registry): wait for cat.
    for (int i = 0; i < 500; ++i) {
      char exe[256] = {};
      const std::string link = "/proc/" + std::to_string(child.pid()) + "/exe";
      if (readlink(link.c_str(), exe, sizeof exe - 1) > 0 &&
          std::string(exe).find("cat") != std::string::npos)
        break;
      usleep(10 * 1000);
    }
    usleep(50 * 1000);  // and for the loader to map libc
    auto r = remote::read_registry(child.pid());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::not_found);
    CHECK(r.error().message().find("pid " + std::to_string(child.pid()) +
                                   ": no mapped ELF object defines jitunwind_registry") == 0);
    child.finish();
  }
  SECTION("registry of another ABI version") {
    test::child_process child({test::binary_path("tests/remote/registry_fake"), "2"});
    REQUIRE(child.read_line() == "ready");
    auto r = remote::read_registry(child.pid());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::unsupported);
    CHECK(r.error().message().find("pid " + std::to_string(child.pid()) + ": registry at 0x") == 0);
    CHECK(r.error().message().find("registry_fake: registry ABI version 2, this reader supports "
                                   "version 1") != std::string::npos);
    child.finish();
  }
  SECTION("corrupt magic") {
    test::child_process child({test::binary_path("tests/remote/registry_fake"), "1", "NOTMAGIC"});
    REQUIRE(child.read_line() == "ready");
    auto r = remote::read_registry(child.pid());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::malformed);
    CHECK(r.error().message().find("bad magic") != std::string::npos);
    child.finish();
  }
  SECTION("no permission") {
    if (geteuid() != 0) return;  // needs to drop to another user
    test::child_process child({test::binary_path("tests/remote/registry_target_dynsym"), "1"});
    REQUIRE(child.read_line() == "ready");
    const pid_t target = child.pid();
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t reader = fork();
    if (reader == 0) {
      close(fds[0]);
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
      auto r = remote::read_registry(target);
      const int code = r.ok() ? 0 : static_cast<int>(r.error().code());
      const std::string msg = r.ok() ? std::string() : r.error().message();
      (void)!write(fds[1], msg.data(), msg.size());
      _exit(code);
    }
    close(fds[1]);
    char buf[1024];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    close(fds[0]);
    int status = 0;
    waitpid(reader, &status, 0);
    const std::string msg(buf, n > 0 ? static_cast<size_t>(n) : 0);
    INFO(msg);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == static_cast<int>(errc::permission_denied));
    CHECK(msg.find("pid " + std::to_string(target)) == 0);
    child.finish();
  }
}
