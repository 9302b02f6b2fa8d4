// The SDK's static USDT probes seen by a real tracer: bpftrace attaches to this test executable
// (SDK linked statically, so the probes and their semaphores are in it), the semaphores go
// non-zero, and every event arrives with its exact arguments.
#include <catch2/catch.hpp>

#include "remote/child.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"
#include "usdt_events/events.hpp"

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <thread>

using namespace jitunwind;
namespace ev = jitunwind::detail::usdt_events;

namespace {

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool all_enabled() {
  auto s = ev::semaphores();
  return s.window_publish && s.window_retire && s.window_free && s.code_add && s.code_remove &&
         s.usdt_load && s.usdt_unload;
}

bool none_enabled() {
  auto s = ev::semaphores();
  return !s.window_publish && !s.window_retire && !s.window_free && !s.code_add && !s.code_remove &&
         !s.usdt_load && !s.usdt_unload;
}

template <class F>
bool wait_for(F&& condition, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// Keeps the calling thread on the CPU it runs on while alive: bpftrace reads one buffer per CPU,
// so events fired from one CPU are printed in the order they were fired.
class pinned_to_this_cpu {
 public:
  pinned_to_this_cpu() {
    saved_ok_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  }
  ~pinned_to_this_cpu() {
    if (saved_ok_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  pinned_to_this_cpu(const pinned_to_this_cpu&) = delete;
  pinned_to_this_cpu& operator=(const pinned_to_this_cpu&) = delete;

 private:
  cpu_set_t saved_{};
  bool saved_ok_ = false;
};

// A raised semaphore says the uprobe exists, not that bpftrace's program is attached to it yet
// (that comes a moment later, probe by probe). Fires one sentinel event of every probe until
// bpftrace printed each, then a marker, and reads up to the marker: what follows is complete.
void wait_until_every_probe_prints(test::child_process& bpftrace) {
  const std::string kinds[] = {"publish",     "retire",    "free",       "code_add",
                               "code_remove", "usdt_load", "usdt_unload"};
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.size() < std::size(kinds) && std::chrono::steady_clock::now() < deadline) {
    ev::window_publish(998, 0, 0, 0, 0, 0);
    ev::window_retire(998, 0);
    ev::window_free(998, 0);
    ev::code_add(0, 0, "sentinel", 998);
    ev::code_remove(0, 0, 998);
    ev::usdt_load("sentinel", 0, "sentinel");
    ev::usdt_unload("sentinel", 0);
    for (std::string l; !(l = bpftrace.read_line(std::chrono::milliseconds(100))).empty();)
      seen.insert(l.substr(0, l.find(' ')));
  }
  REQUIRE(seen.size() == std::size(kinds));
  ev::window_free(997, 0);
  std::string l;
  while ((l = bpftrace.read_line(std::chrono::seconds(30))) != "free 997 0") REQUIRE(!l.empty());
}

}  // namespace

TEST_CASE("bpftrace sees every event with its arguments, semaphores count attachment") {
  if (!test::may_run_privileged("attaching bpftrace to USDT probes")) return;
  if (!test::tool_available("bpftrace")) return;
  REQUIRE(none_enabled());
  // Untraced: nothing fires, and the code path is only the semaphore test.
  ev::window_publish(1, 2, 3, 4, 5, 6);

  const std::string exe = self_exe();
  const std::string p = "usdt:" + exe + ":jitunwind:";
  const std::string program =
      "BEGIN { printf(\"attached\\n\"); }\n" + p +
      "window_publish { printf(\"publish %llu %llu %llx %llu %llx %llu\\n\", arg0, arg1, arg2, "
      "arg3, arg4, arg5); }\n" +
      p + "window_retire { printf(\"retire %llu %llu\\n\", arg0, arg1); }\n" + p +
      "window_free { printf(\"free %llu %llu\\n\", arg0, arg1); if (arg0 == 999) { exit(); } }\n" +
      p +
      "code_add { printf(\"code_add %llx %llu [%s] %llu\\n\", arg0, arg1, str(arg2), arg3); }\n" +
      p + "code_remove { printf(\"code_remove %llx %llu %llu\\n\", arg0, arg1, arg2); }\n" + p +
      "usdt_load { printf(\"usdt_load [%s] %llx [%s]\\n\", str(arg0), arg1, str(arg2)); }\n" + p +
      "usdt_unload { printf(\"usdt_unload [%s] %llx\\n\", str(arg0), arg1); }\n";
  test::child_process bpftrace(
      {"/usr/bin/env", "bpftrace", "-p", std::to_string(getpid()), "-e", program});
  // bpftrace prints "Attaching N probes..." and then our BEGIN line.
  std::string line;
  for (int i = 0; i < 5 && line != "attached"; ++i)
    line = bpftrace.read_line(std::chrono::seconds(60));
  REQUIRE(line == "attached");
  REQUIRE(wait_for(all_enabled, std::chrono::seconds(30)));
  auto s = ev::semaphores();
  CHECK(s.window_publish >= 1);
  pinned_to_this_cpu pin;
  wait_until_every_probe_prints(bpftrace);

  std::ostringstream expected;
  char buf[256];
  for (uint64_t i = 0; i < 20; ++i) {
    const uint64_t text = 0x7f0000001000ull + i * 0x10000;
    const uint64_t sframe = 0xffff800000000000ull + i;  // all 64 bits must survive
    ev::window_publish(i, 100 + i, text, 4096 + i, sframe, 64 * i);
    std::snprintf(buf, sizeof buf, "publish %llu %llu %llx %llu %llx %llu\n",
                  static_cast<unsigned long long>(i), static_cast<unsigned long long>(100 + i),
                  static_cast<unsigned long long>(text), static_cast<unsigned long long>(4096 + i),
                  static_cast<unsigned long long>(sframe), static_cast<unsigned long long>(64 * i));
    expected << buf;
    const std::string name = "fn_" + std::to_string(i) + " with spaces (lua:42)";
    ev::code_add_lazy(
        text + 16, 32 + i, [&] { return name; }, i);
    std::snprintf(buf, sizeof buf, "code_add %llx %llu [%s] %llu\n",
                  static_cast<unsigned long long>(text + 16),
                  static_cast<unsigned long long>(32 + i), name.c_str(),
                  static_cast<unsigned long long>(i));
    expected << buf;
    ev::code_remove(text + 16, 32 + i, i);
    std::snprintf(buf, sizeof buf, "code_remove %llx %llu %llu\n",
                  static_cast<unsigned long long>(text + 16),
                  static_cast<unsigned long long>(32 + i), static_cast<unsigned long long>(i));
    expected << buf;
    ev::window_retire(i, 100 + i);
    expected << "retire " << i << " " << 100 + i << "\n";
    ev::window_free(i, 100 + i);
    expected << "free " << i << " " << 100 + i << "\n";
  }
  ev::code_add(0x1234, 1, "plain", 7);
  expected << "code_add 1234 1 [plain] 7\n";
  ev::usdt_load("toyinterp", 0x7f1234560000ull, "/proc/42/fd/7");
  expected << "usdt_load [toyinterp] 7f1234560000 [/proc/42/fd/7]\n";
  ev::usdt_unload("toyinterp", 0x7f1234560000ull);
  expected << "usdt_unload [toyinterp] 7f1234560000\n";
  ev::window_free(999, 1);  // bpftrace exits on this one
  expected << "free 999 1\n";

  std::string got;
  for (;;) {
    std::string l = bpftrace.read_line(std::chrono::seconds(30));
    if (l.empty()) break;
    got += l + "\n";
  }
  CHECK(bpftrace.finish() == 0);
  CHECK(got == expected.str());
  // Detached: the kernel decremented the semaphores again.
  CHECK(wait_for(none_enabled, std::chrono::seconds(30)));
}

TEST_CASE("the shared library carries the same probes with semaphores") {
  if (!test::tool_available("readelf")) return;
  const std::string lib = test::binary_path("sdk/libjitunwind.so");
  auto notes = test::run({"readelf", "-n", lib});
  REQUIRE(notes.exit_code == 0);
  for (const char* name : {"window_publish", "window_retire", "window_free", "code_add",
                           "code_remove", "usdt_load", "usdt_unload"}) {
    INFO(name);
    const size_t at = notes.out.find(std::string("Name: ") + name + "\n");
    REQUIRE(at != std::string::npos);
    const size_t sem = notes.out.find("Semaphore: 0x", at);
    REQUIRE(sem != std::string::npos);
    CHECK(std::stoull(notes.out.substr(sem + 13, 16), nullptr, 16) != 0);
  }
  auto sections = test::run({"readelf", "-S", "-W", lib});
  CHECK(sections.out.find(" .probes ") != std::string::npos);
  if (!test::may_run_privileged("bpftrace -l on USDT probes")) return;
  if (!test::tool_available("bpftrace")) return;
  auto listed = test::run({"bpftrace", "-l", "usdt:" + lib + ":jitunwind:*"});
  INFO(listed.err);
  for (const char* name : {"window_publish", "window_retire", "window_free", "code_add",
                           "code_remove", "usdt_load", "usdt_unload"}) {
    CHECK(listed.out.find(std::string("jitunwind:") + name + "\n") != std::string::npos);
  }
}
