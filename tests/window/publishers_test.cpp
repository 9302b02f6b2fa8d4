// The window module driving the registry, USDT-event and kernel publishers.
#include <jitunwind/remote.h>
#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>

using namespace jitunwind;

namespace {

std::optional<remote::window_record> find_window(uint64_t id, bool include_retired) {
  remote::read_options ro;
  ro.include_retired = include_retired;
  auto snap = remote::read_registry(getpid(), ro);
  REQUIRE(snap.ok());
  for (const auto& w : snap->windows)
    if (w.window_id == id) return w;
  return std::nullopt;
}

}  // namespace

TEST_CASE("published windows appear in the registry with fresh generations") {
  session_options o;
  o.publishers = publisher::registry | publisher::usdt_events;
  auto s = session::create(o);
  REQUIRE(s.ok());
  for (const auto& st : (*s)->status()) {
    if (st.which == publisher::registry || st.which == publisher::usdt_events)
      CHECK(st.state == publisher_state::active);
    else
      CHECK(st.state == publisher_state::disabled);
  }
  auto w = (*s)->create_owned_window({.code_capacity = 1 << 16});
  REQUIRE(w.ok());
  window& win = **w;
  CHECK_FALSE(find_window(win.id(), true));  // nothing before the first publish

  auto a = win.allocate(32);
  REQUIRE(a.ok());
  std::memset(a->writable.data(), 0xc3, 32);
  REQUIRE(win.append("f", *recipes::leaf(abi::amd64, a->address, 32)).ok());
  REQUIRE(win.publish().ok());
  auto first = find_window(win.id(), false);
  REQUIRE(first);
  CHECK(first->state == remote::window_state::live);
  CHECK(first->text_start == win.text_start());
  CHECK(first->sframe_address == reinterpret_cast<uint64_t>(win.published_sframe().data()));
  CHECK(first->sframe_size == win.published_sframe().size());
  auto bytes = remote::read_window_sframe(getpid(), *first);
  REQUIRE(bytes.ok());
  auto decoded = sframe::decode(*bytes, first->sframe_address);
  REQUIRE(decoded.ok());
  CHECK(decoded->functions.size() == 1);

  auto b = win.allocate(32);
  REQUIRE(b.ok());
  std::memset(b->writable.data(), 0xc3, 32);
  REQUIRE(win.append("g", *recipes::leaf(abi::amd64, b->address, 32)).ok());
  REQUIRE(win.publish().ok());
  auto second = find_window(win.id(), false);
  REQUIRE(second);
  CHECK(second->generation > first->generation);
  CHECK(second->sframe_address != first->sframe_address);  // double-buffered

  REQUIRE(win.retire(std::chrono::milliseconds(0), [](window&) { return true; }).ok());
  CHECK_FALSE(find_window(win.id(), false));  // never live once retired
  auto retired = find_window(win.id(), true);
  REQUIRE(retired);
  CHECK(retired->state == remote::window_state::retired);
  CHECK(retired->generation == second->generation);

  REQUIRE((*s)->poll() == 1);
  REQUIRE(win.reuse().ok());
  CHECK_FALSE(find_window(win.id(), true));  // released on reuse
  auto c = win.allocate(32);
  REQUIRE(c.ok());
  std::memset(c->writable.data(), 0xc3, 32);
  REQUIRE(win.append("h", *recipes::leaf(abi::amd64, c->address, 32)).ok());
  REQUIRE(win.publish().ok());
  auto third = find_window(win.id(), false);
  REQUIRE(third);
  CHECK(third->generation > second->generation);

  s->reset();  // shutting down releases everything
  CHECK_FALSE(find_window(third->window_id, true));
}

TEST_CASE("a kernel interface the kernel does not have is reported unsupported once") {
  std::vector<std::string> logs;
  session_options o;
  o.publishers = publisher::kernel | publisher::registry;
  // No kernel assigns this system call number: the first registration gets ENOSYS.
  o.kernel_sframe = "syscall:1000,1001";
  o.log.fn = [](void* user, log_level, std::string_view m) {
    static_cast<std::vector<std::string>*>(user)->emplace_back(m);
  };
  o.log.user = &logs;
  o.log.min_level = log_level::debug;
  auto s = session::create(o);
  REQUIRE(s.ok());
  auto w = (*s)->create_owned_window({.code_capacity = 1 << 16});
  REQUIRE(w.ok());
  for (int i = 0; i < 3; ++i) {
    auto a = (*w)->allocate(16);
    REQUIRE(a.ok());
    std::memset(a->writable.data(), 0xc3, 16);
    REQUIRE((*w)->append("f" + std::to_string(i), *recipes::leaf(abi::amd64, a->address, 16)).ok());
    REQUIRE((*w)->publish().ok());  // the window itself is fine
  }
  bool kernel_seen = false;
  for (const auto& st : (*s)->status()) {
    if (st.which == publisher::kernel) {
      kernel_seen = true;
      CHECK(st.state == publisher_state::unsupported);
      CHECK_THAT(st.message, Catch::Contains("window"));
    }
    if (st.which == publisher::registry) CHECK(st.state == publisher_state::active);
  }
  CHECK(kernel_seen);
  size_t kernel_errors = 0;
  for (const auto& m : logs)
    if (m.find("kernel") != std::string::npos && m.find("unsupported") != std::string::npos)
      ++kernel_errors;
  CHECK(kernel_errors >= 1);
  CHECK(find_window((*w)->id(), false));  // the registry went on
}
