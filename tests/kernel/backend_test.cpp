// Kernel SFrame registration: configuration parsing, exact argument marshaling of every
// interface variant against a recording fake, status handling, and the real kernel of this
// machine (which has none of the interfaces).
#include <catch2/catch.hpp>

#include "kernel/kernel_backend.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail::kernel;

namespace jitunwind::detail::kernel {
bool operator==(const sframe_setup& a, const sframe_setup& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}
}  // namespace jitunwind::detail::kernel

namespace {

struct recorded_call {
  bool is_prctl = false;
  long number = 0;             // prctl option or syscall number
  unsigned long args[4] = {};  // prctl arg2..arg5, or syscall arg1..arg2
  sframe_setup setup{};        // syscall: the structure the pointer pointed to at the call
  bool operator==(const recorded_call&) const = default;
};

class fake_layer final : public syscall_layer {
 public:
  std::vector<recorded_call> calls;
  std::vector<long> results;  // popped front per call; empty: 0

  long prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
             unsigned long a5) override {
    recorded_call c;
    c.is_prctl = true;
    c.number = option;
    c.args[0] = a2;
    c.args[1] = a3;
    c.args[2] = a4;
    c.args[3] = a5;
    calls.push_back(c);
    return next();
  }
  long syscall2(long number, unsigned long a1, unsigned long a2) override {
    recorded_call c;
    c.number = number;
    c.args[0] = a1;
    c.args[1] = a2;
    if (a2 == sizeof(sframe_setup)) std::memcpy(&c.setup, reinterpret_cast<void*>(a1), a2);
    calls.push_back(c);
    return next();
  }

 private:
  long next() {
    if (results.empty()) return 0;
    long r = results.front();
    results.erase(results.begin());
    return r;
  }
};

// Counts calls that reach the real kernel.
class counting_layer final : public syscall_layer {
 public:
  int count = 0;
  long prctl(int o, unsigned long a, unsigned long b, unsigned long c, unsigned long d) override {
    ++count;
    return real_syscalls().prctl(o, a, b, c, d);
  }
  long syscall2(long n, unsigned long a, unsigned long b) override {
    ++count;
    return real_syscalls().syscall2(n, a, b);
  }
};

const kernel_window win{0x7f0000100000, 0x240, 0x7f0000200000, 0x3000};

struct log_capture {
  std::vector<std::string> lines;
  static void fn(void* user, log_level level, std::string_view m) {
    static_cast<log_capture*>(user)->lines.push_back(std::string(to_string(level)) + ": " +
                                                     std::string(m));
  }
  log_sink sink() { return {&fn, this, log_level::debug}; }
};

}  // namespace

TEST_CASE("interface specs: explicit numbers only, clear errors") {
  CHECK(parse_interface_spec("")->kind == interface_kind::none);
  CHECK(parse_interface_spec("off")->kind == interface_kind::none);
  CHECK(*parse_interface_spec("prctl:79,80") ==
        interface_spec{interface_kind::prctl_range, 79, 80});
  CHECK(*parse_interface_spec("prctl-legacy:74,75") ==
        interface_spec{interface_kind::prctl_legacy, 74, 75});
  CHECK(*parse_interface_spec("syscall:471,472") ==
        interface_spec{interface_kind::syscall_setup, 471, 472});
  for (const char* bad :
       {"prctl", "prctl:", "prctl:79", "prctl:79,", "prctl:79,79", "prctl:-1,2", "prctl:0x4f,80",
        "prctl:79,80,81", "syscall:5000,5001", "sframe:1,2", "auto", "prctl: 79,80"}) {
    INFO(bad);
    auto r = parse_interface_spec(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::invalid_argument);
    CHECK(r.error().message().find(std::string("\"") + bad + "\"") != std::string::npos);
  }
  CHECK(to_string(*parse_interface_spec("prctl-legacy:74,75")) == "prctl-legacy:74,75");
}

TEST_CASE("configuration comes from the option, else from JITUNWIND_KERNEL_SFRAME") {
  unsetenv("JITUNWIND_KERNEL_SFRAME");
  CHECK(configured_interface("") == "");
  setenv("JITUNWIND_KERNEL_SFRAME", "syscall:471,472", 1);
  CHECK(configured_interface("") == "syscall:471,472");
  CHECK(configured_interface("prctl:79,80") == "prctl:79,80");
  unsetenv("JITUNWIND_KERNEL_SFRAME");
}

TEST_CASE("nothing configured: no call is ever made") {
  fake_layer fake;
  auto b = kernel_backend::create("", fake);
  REQUIRE(b.ok());
  CHECK((*b)->status() == backend_status::disabled);
  CHECK((*b)->register_window(win).ok());
  CHECK((*b)->unregister_window(win).ok());
  CHECK(fake.calls.empty());
}

TEST_CASE("prctl (2025 series): ADD sframe_start, sframe_end, text_start, text_end") {
  fake_layer fake;
  auto b = kernel_backend::create("prctl:79,80", fake);
  REQUIRE(b.ok());
  REQUIRE((*b)->register_window(win).ok());
  REQUIRE((*b)->unregister_window(win).ok());
  REQUIRE(fake.calls.size() == 2);
  CHECK(fake.calls[0] ==
        recorded_call{true, 79, {0x7f0000100000, 0x7f0000100240, 0x7f0000200000, 0x7f0000203000}});
  CHECK(fake.calls[1] == recorded_call{true, 80, {0x7f0000100000, 0, 0, 0}});
}

TEST_CASE("prctl-legacy (2023/2024 series): ADD sframe_addr, text_start, text_end, 0") {
  fake_layer fake;
  auto b = kernel_backend::create("prctl-legacy:74,75", fake);
  REQUIRE(b.ok());
  REQUIRE((*b)->register_window(win).ok());
  REQUIRE((*b)->unregister_window(win).ok());
  REQUIRE(fake.calls.size() == 2);
  CHECK(fake.calls[0] ==
        recorded_call{true, 74, {0x7f0000100000, 0x7f0000200000, 0x7f0000203000, 0}});
  CHECK(fake.calls[1] == recorded_call{true, 75, {0x7f0000100000, 0, 0, 0}});
}

TEST_CASE("syscall (2026 proposal): struct sframe_setup by pointer plus its size") {
  fake_layer fake;
  auto b = kernel_backend::create("syscall:471,472", fake);
  REQUIRE(b.ok());
  REQUIRE((*b)->register_window(win).ok());
  REQUIRE((*b)->unregister_window(win).ok());
  REQUIRE(fake.calls.size() == 2);
  CHECK_FALSE(fake.calls[0].is_prctl);
  CHECK(fake.calls[0].number == 471);
  CHECK(fake.calls[0].args[1] == 32);
  CHECK(fake.calls[0].setup == sframe_setup{0x7f0000100000, 0x240, 0x7f0000200000, 0x3000});
  CHECK(fake.calls[1].number == 472);
  CHECK(fake.calls[1].args[1] == 32);
  CHECK(fake.calls[1].setup == sframe_setup{0x7f0000100000, 0, 0, 0});
}

TEST_CASE("a kernel without the interface is reported unsupported once, then left alone") {
  fake_layer fake;
  log_capture log;
  fake.results = {-EINVAL};
  auto b = kernel_backend::create("prctl:79,80", fake, log.sink());
  REQUIRE(b.ok());
  CHECK((*b)->status() == backend_status::untested);
  auto first = (*b)->register_window(win);
  REQUIRE_FALSE(first.ok());
  CHECK(first.error().code() == errc::unsupported);
  CHECK(first.error().message().find("prctl:79,80") != std::string::npos);
  CHECK(first.error().message().find("EINVAL") != std::string::npos);
  CHECK((*b)->status() == backend_status::unsupported);
  CHECK((*b)->register_window(win).ok());
  CHECK((*b)->unregister_window(win).ok());
  CHECK(fake.calls.size() == 1);
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0].rfind("warning: ", 0) == 0);
}

TEST_CASE("syscall ENOSYS means unsupported") {
  fake_layer fake;
  fake.results = {-ENOSYS};
  auto b = kernel_backend::create("syscall:471,472", fake);
  REQUIRE(b.ok());
  CHECK((*b)->register_window(win).error().code() == errc::unsupported);
  CHECK((*b)->status_message().find("ENOSYS") != std::string::npos);
}

TEST_CASE("after a success, a rejected section is an error for that window only") {
  fake_layer fake;
  log_capture log;
  fake.results = {0, -EINVAL, -ENOMEM, 0};
  auto b = kernel_backend::create("prctl:79,80", fake, log.sink());
  REQUIRE(b.ok());
  REQUIRE((*b)->register_window(win).ok());
  CHECK((*b)->status() == backend_status::active);
  kernel_window second = win;
  second.sframe_address += 0x1000;
  auto rejected = (*b)->register_window(second);
  REQUIRE_FALSE(rejected.ok());
  CHECK(rejected.error().code() == errc::invalid_argument);
  CHECK(rejected.error().message().find("rejected window text 0x7f0000200000+0x3000") !=
        std::string::npos);
  CHECK((*b)->register_window(second).error().code() == errc::io_error);
  CHECK((*b)->status() == backend_status::active);
  CHECK((*b)->registered_count() == 1);
  // Only the registered window is unregistered; the refused one is ignored.
  CHECK((*b)->unregister_window(second).ok());
  CHECK((*b)->unregister_window(win).ok());
  CHECK(fake.calls.size() == 4);
  CHECK(fake.calls[3].number == 80);
  CHECK((*b)->registered_count() == 0);
}

TEST_CASE("invalid windows are refused without a call") {
  fake_layer fake;
  auto b = kernel_backend::create("prctl:79,80", fake);
  REQUIRE(b.ok());
  kernel_window empty = win;
  empty.sframe_size = 0;
  CHECK((*b)->register_window(empty).error().code() == errc::invalid_argument);
  kernel_window wraps = win;
  wraps.text_start = ~uint64_t{0} - 4;
  CHECK((*b)->register_window(wraps).error().code() == errc::invalid_argument);
  CHECK(fake.calls.empty());
}

TEST_CASE("this machine's kernel: explicit but unknown interfaces report unsupported") {
  // Numbers chosen so that no kernel can mean anything else by them: a system call number far
  // above every table, a prctl option far above every defined one.
  static const uint8_t sframe[64] = {};
  static const uint8_t text[64] = {};
  const kernel_window real{reinterpret_cast<uint64_t>(sframe), sizeof sframe,
                           reinterpret_cast<uint64_t>(text), sizeof text};
  for (const char* spec : {"syscall:1000,1001", "prctl:1000000,1000001"}) {
    INFO(spec);
    counting_layer counting;
    auto b = kernel_backend::create(spec, counting);
    REQUIRE(b.ok());
    auto r = (*b)->register_window(real);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::unsupported);
    CHECK((*b)->status() == backend_status::unsupported);
    CHECK((*b)->register_window(real).ok());
    CHECK(counting.count == 1);
    WARN((*b)->status_message());
  }
}
