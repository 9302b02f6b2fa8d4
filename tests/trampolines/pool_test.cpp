// Trampoline pools: stubs that call through, one PCMASK FDE per window, reuse, placement.
#include <jitunwind/sframe.h>
#include <jitunwind/trampolines.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <optional>
#include <set>

using namespace jitunwind;

namespace {

std::unique_ptr<session> make_session() {
  session_options o;
  o.publishers = 0;  // windows only: these tests read the SFrame themselves
  auto s = session::create(o);
  REQUIRE(s.ok());
  return std::move(*s);
}

struct seen_call {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  uint64_t return_address = 0;
  uint64_t frame = 0;  // the target's rbp: the stub's frame is right above it
};
seen_call seen;
// Runs inside the target while the stub's frame is live on the stack.
void (*inside_target)() = nullptr;

__attribute__((noinline)) uint64_t target(void* a, void* b, void* c) {
  seen = {a, b, c, reinterpret_cast<uint64_t>(__builtin_return_address(0)),
          reinterpret_cast<uint64_t>(__builtin_frame_address(0))};
  if (inside_target != nullptr) inside_target();
  return reinterpret_cast<uint64_t>(a) * 3 + 1;
}

uint64_t caller_frame = 0;

__attribute__((noinline)) uint64_t call_through(const trampoline& t, void* a, void* b, void* c) {
  caller_frame = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  const uint64_t r = t.entry(a, b, c, &target);
  asm volatile("" ::: "memory");  // keep the call a call (no tail call)
  return r;
}

bool read_memory(void*, uint64_t address, void* out, size_t len) {
  std::memcpy(out, reinterpret_cast<const void*>(address), len);
  return true;
}

}  // namespace

TEST_CASE("a trampoline calls its target with the arguments and returns its result") {
  auto s = make_session();
  auto pool = trampoline_pool::create(*s, {});
  REQUIRE(pool.ok());
  auto t = (*pool)->acquire("fib");
  REQUIRE(t.ok());
  int x, y;
  const uint64_t r = call_through(*t, reinterpret_cast<void*>(14), &x, &y);
  CHECK(r == 43);
  CHECK(seen.a == reinterpret_cast<void*>(14));
  CHECK(seen.b == &x);
  CHECK(seen.c == &y);
  // The return address the stub leaves on the stack is the one the pool announces.
  CHECK(seen.return_address == t->return_address);
  CHECK(t->return_address == t->address + trampoline_pool::return_offset);
}

TEST_CASE("one PCMASK function describes a window's stubs and unwinds through any of them") {
  auto s = make_session();
  trampoline_pool_options o;
  o.stubs_per_window = 64;
  auto pool = trampoline_pool::create(*s, o);
  REQUIRE(pool.ok());
  std::vector<trampoline> ts;
  for (int i = 0; i < 10; ++i) {
    auto t = (*pool)->acquire("f" + std::to_string(i));
    REQUIRE(t.ok());
    ts.push_back(*t);
  }
  const auto windows = (*pool)->windows();
  REQUIRE(windows.size() == 1);
  const auto bytes = windows[0]->published_sframe();
  const uint64_t section = reinterpret_cast<uint64_t>(bytes.data());
  auto decoded = sframe::decode(bytes, section);
  REQUIRE(decoded.ok());
  REQUIRE(decoded->functions.size() == 1);
  const function_desc& f = decoded->functions[0];
  CHECK(f.pcmask_rep == trampoline_pool::stub_stride);
  CHECK(f.start == windows[0]->text_start());
  CHECK(f.size == 64 * trampoline_pool::stub_stride);
  // push rbp (1 byte); mov rbp, rsp (3); call rcx (2); pop rbp (1); ret (1)
  REQUIRE(f.rows.size() == 4);
  CHECK((f.rows[0].pc_offset == 0 && f.rows[0].cfa == cfa_base::sp && f.rows[0].cfa_offset == 8));
  CHECK((f.rows[1].pc_offset == 1 && f.rows[1].cfa == cfa_base::sp && f.rows[1].cfa_offset == 16 &&
         f.rows[1].fp == fp_rule::saved && f.rows[1].fp_offset == -16));
  CHECK((f.rows[2].pc_offset == 4 && f.rows[2].cfa == cfa_base::fp && f.rows[2].cfa_offset == 16));
  CHECK((f.rows[3].pc_offset == 7 && f.rows[3].cfa == cfa_base::sp && f.rows[3].cfa_offset == 8 &&
         f.rows[3].fp == fp_rule::unchanged));

  // Unwind one step out of the stub, from inside the target: the stub's frame is the target's
  // caller frame (rbp = [target rbp], pc = the return address into the stub).
  static std::optional<sframe::table> table;
  table.emplace(sframe::table::create(bytes, section).value());
  static sframe::step_result step;
  inside_target = [] {
    sframe::regs stub;
    stub.pc = seen.return_address;
    stub.sp = seen.frame + 16;
    stub.fp = *reinterpret_cast<const uint64_t*>(seen.frame);
    const auto row = table->find(stub.pc - 1);
    step = {};
    if (row) step = sframe::step(abi::amd64, row->row, stub, false, {&read_memory, nullptr});
  };
  for (const trampoline& t : {ts[0], ts[7], ts[9]}) {
    call_through(t, nullptr, nullptr, nullptr);
    REQUIRE(seen.return_address == t.return_address);
    REQUIRE(step.ok);
    // Back in call_through: its frame pointer, and a return address just after its call.
    CHECK(step.caller.fp == caller_frame);
    CHECK(step.caller.pc > reinterpret_cast<uint64_t>(&call_through));
    CHECK(step.caller.pc < reinterpret_cast<uint64_t>(&call_through) + 256);
  }
  inside_target = nullptr;
}

TEST_CASE("released stubs are reused under a new name, full windows add windows") {
  auto s = make_session();
  trampoline_pool_options o;
  o.stubs_per_window = 4;
  o.name_prefix = "toy:";
  auto pool = trampoline_pool::create(*s, o);
  REQUIRE(pool.ok());
  std::vector<trampoline> ts;
  std::set<uint64_t> addresses;
  for (int i = 0; i < 10; ++i) {
    auto t = (*pool)->acquire("g" + std::to_string(i));
    REQUIRE(t.ok());
    ts.push_back(*t);
    addresses.insert(t->address);
  }
  CHECK(addresses.size() == 10);
  CHECK((*pool)->windows().size() == 3);
  CHECK((*pool)->in_use() == 10);

  REQUIRE((*pool)->release(ts[5]).ok());
  CHECK((*pool)->in_use() == 9);
  auto again = (*pool)->release(ts[5]);
  REQUIRE(!again.ok());
  CHECK(again.error().code() == errc::invalid_argument);
  trampoline foreign = ts[5];
  foreign.address += 1;
  CHECK((*pool)->release(foreign).error().code() == errc::invalid_argument);

  auto reused = (*pool)->acquire("h");
  REQUIRE(reused.ok());
  CHECK(reused->address == ts[5].address);
  CHECK((*pool)->windows().size() == 3);
  // The window lists the stub under both names, in the order they were given.
  const auto entries = (*pool)->windows()[1]->functions();
  std::vector<std::string> names;
  for (const auto& e : entries) {
    if (e.start == ts[5].address) names.push_back(e.name);
  }
  CHECK(names == std::vector<std::string>{"toy:g5", "toy:h"});
  CHECK(call_through(*reused, reinterpret_cast<void*>(2), nullptr, nullptr) == 7);
}

TEST_CASE("with address reuse off, released stubs are never handed out again") {
  session_options so;
  so.publishers = 0;
  so.reuse = address_reuse::never;
  auto s = session::create(so);
  REQUIRE(s.ok());
  trampoline_pool_options o;
  o.stubs_per_window = 4;
  auto pool = trampoline_pool::create(**s, o);
  REQUIRE(pool.ok());
  std::set<uint64_t> addresses;
  for (int i = 0; i < 12; ++i) {
    auto t = (*pool)->acquire("f" + std::to_string(i));
    REQUIRE(t.ok());
    CHECK(addresses.insert(t->address).second);  // a stub no other name ever had
    REQUIRE((*pool)->release(*t).ok());
  }
  CHECK((*pool)->in_use() == 0);
  CHECK((*pool)->windows().size() == 3);
}

TEST_CASE("stubs are placed near the requested address") {
  auto s = make_session();
  trampoline_pool_options o;
  o.near_address = reinterpret_cast<uint64_t>(&target);
  auto pool = trampoline_pool::create(*s, o);
  REQUIRE(pool.ok());
  auto t = (*pool)->acquire("near");
  REQUIRE(t.ok());
  const int64_t distance = static_cast<int64_t>(t->address - o.near_address);
  CHECK(distance < (int64_t{2} << 30));
  CHECK(distance > -(int64_t{2} << 30));
}

TEST_CASE("invalid options and names are refused") {
  auto s = make_session();
  trampoline_pool_options o;
  o.stubs_per_window = 0;
  CHECK(trampoline_pool::create(*s, o).error().code() == errc::invalid_argument);
  o.stubs_per_window = (size_t{1} << 20) + 1;
  CHECK(trampoline_pool::create(*s, o).error().code() == errc::invalid_argument);
  // A prefix every name would inherit is checked once, up front.
  trampoline_pool_options prefixed;
  prefixed.name_prefix = "toy\n";
  CHECK(trampoline_pool::create(*s, prefixed).error().code() == errc::invalid_argument);
  prefixed.name_prefix = std::string(5000, 'p');
  CHECK(trampoline_pool::create(*s, prefixed).error().code() == errc::invalid_argument);
  auto pool = trampoline_pool::create(*s, {});
  REQUIRE(pool.ok());
  CHECK((*pool)->acquire("").error().code() == errc::invalid_argument);
  CHECK((*pool)->acquire("bad\nname").error().code() == errc::invalid_argument);
  CHECK((*pool)->in_use() == 0);
}

TEST_CASE("window::name_range only names ranges inside appended functions") {
  auto s = make_session();
  auto w = s->create_owned_window({});
  REQUIRE(w.ok());
  auto space = (*w)->allocate(64);
  REQUIRE(space.ok());
  std::memset(space->writable.data(), 0xc3, 64);
  auto f = recipes::leaf(abi::amd64, space->address, 32);
  REQUIRE(f.ok());
  REQUIRE((*w)->append("whole", *f).ok());
  auto inside = recipes::leaf(abi::amd64, space->address + 16, 16);
  auto outside = recipes::leaf(abi::amd64, space->address + 24, 16);  // crosses the end
  CHECK((*w)->name_range("part", *inside).ok());
  CHECK((*w)->name_range("across", *outside).error().code() == errc::invalid_argument);
  CHECK((*w)->name_range("", *inside).error().code() == errc::invalid_argument);
  REQUIRE((*w)->publish().ok());
  // The SFrame has the appended function only.
  auto decoded = sframe::decode((*w)->published_sframe(),
                                reinterpret_cast<uint64_t>((*w)->published_sframe().data()));
  REQUIRE(decoded.ok());
  CHECK(decoded->functions.size() == 1);
  REQUIRE((*w)->retire(std::chrono::milliseconds(0)).ok());
  CHECK((*w)->name_range("late", *inside).error().code() == errc::bad_state);
}
