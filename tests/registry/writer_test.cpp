// Unit tests of the registry writer on private instances (own header, small capacity) and on the
// process-wide one.
#include <catch2/catch.hpp>

#include <jitunwind/registry_abi.h>

#include "registry/registry_writer.hpp"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail;

namespace {

registry_window window(uint64_t id, uint64_t text = 0x10000, uint64_t sframe = 0x20000) {
  registry_window w;
  w.window_id = id;
  w.text_start = text;
  w.text_size = 0x1000;
  w.sframe_address = sframe;
  w.sframe_size = 0x80;
  w.sframe_version = 3;
  return w;
}

}  // namespace

TEST_CASE("header is valid before the first window") {
  jitunwind_registry_header h{};
  registry_writer w(h, 8);
  CHECK(std::memcmp(h.magic, "JITUNWRG", 8) == 0);
  CHECK(h.version == JITUNWIND_REGISTRY_VERSION);
  CHECK(h.header_size == 64);
  CHECK(h.entry_size == 128);  // 64 before the SFrame version field
  CHECK(h.capacity == 8);
  CHECK(h.entries == 0);
  CHECK(h.slot_count == 0);
  CHECK(w.read_local().empty());
}

TEST_CASE("add, update, retire, release change entries and generations") {
  jitunwind_registry_header h{};
  registry_writer w(h, 8);
  auto a = w.add(window(7));
  REQUIRE(a.ok());
  CHECK(a->slot.index == 0);
  CHECK(a->generation >= 1);
  CHECK(h.entries != 0);
  CHECK(h.slot_count == 1);
  CHECK(h.writer_pid == static_cast<uint64_t>(getpid()));

  auto* e = reinterpret_cast<jitunwind_registry_entry*>(h.entries);
  CHECK(e[0].seq % 2 == 0);
  CHECK(e[0].seq > 0);
  CHECK(e[0].window_id == 7);
  CHECK(e[0].generation == a->generation);
  CHECK(e[0].state == JITUNWIND_WINDOW_LIVE);
  CHECK(e[0].sframe_version == 3);
  CHECK(e[0].text_start == 0x10000);
  CHECK(e[0].sframe_addr == 0x20000);
  CHECK(e[0].abi == 3);

  const uint64_t changes = h.change_count;
  auto g2 = w.update(a->slot, window(7, 0x30000, 0x40000));
  REQUIRE(g2.ok());
  CHECK(*g2 > a->generation);
  CHECK(e[0].generation == *g2);
  CHECK(e[0].text_start == 0x30000);
  CHECK(h.change_count == changes + 1);

  REQUIRE(w.retire(a->slot).ok());
  CHECK(e[0].state == JITUNWIND_WINDOW_RETIRED);
  CHECK(e[0].generation == *g2);  // retiring keeps the generation
  auto rec = w.read_slot(a->slot);
  REQUIRE(rec.ok());
  CHECK(rec->state == registry_state::retired);

  // A retired window can be re-published (reuse of the window), with a new generation.
  auto g3 = w.update(a->slot, window(7, 0x50000, 0x60000));
  REQUIRE(g3.ok());
  CHECK(*g3 > *g2);
  CHECK(e[0].state == JITUNWIND_WINDOW_LIVE);

  REQUIRE(w.release(a->slot).ok());
  CHECK(e[0].state == JITUNWIND_WINDOW_FREE);
  CHECK(e[0].generation == 0);
  CHECK(w.read_local().empty());

  // The freed slot is reused first, with a generation never seen before.
  auto b = w.add(window(8));
  REQUIRE(b.ok());
  CHECK(b->slot.index == 0);
  CHECK(b->generation > *g3);
}

TEST_CASE("misuse is refused with bad_state and leaves the entry untouched") {
  jitunwind_registry_header h{};
  registry_writer w(h, 4);
  CHECK(w.retire(registry_slot{0}).error().code() == errc::bad_state);  // never issued
  auto a = w.add(window(1));
  REQUIRE(a.ok());
  auto* e = reinterpret_cast<jitunwind_registry_entry*>(h.entries);
  const uint64_t seq = e[0].seq;
  REQUIRE(w.retire(a->slot).ok());
  const uint64_t seq_retired = e[0].seq;
  CHECK(seq_retired == seq + 2);
  auto again = w.retire(a->slot);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == errc::bad_state);
  CHECK(again.error().message().find("retired") != std::string::npos);
  CHECK(e[0].seq == seq_retired);  // refused: counter restored
  REQUIRE(w.release(a->slot).ok());
  CHECK(w.release(a->slot).error().code() == errc::bad_state);
  CHECK(w.update(a->slot, window(1)).error().code() == errc::bad_state);
  CHECK(w.begin_update(a->slot).error().code() == errc::bad_state);
  CHECK(w.commit_update(a->slot, window(1)).error().code() == errc::bad_state);
  CHECK(w.update(registry_slot{3}, window(1)).error().code() == errc::bad_state);
}

TEST_CASE("invalid windows are refused") {
  jitunwind_registry_header h{};
  registry_writer w(h, 4);
  auto empty = window(1);
  empty.text_size = 0;
  CHECK(w.add(empty).error().code() == errc::invalid_argument);
  auto wraps = window(2, ~uint64_t{0} - 10);
  CHECK(w.add(wraps).error().code() == errc::invalid_argument);
  auto half = window(3);
  half.sframe_address = 0;
  auto r = w.add(half);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("window 3") != std::string::npos);
  auto no_sframe = window(4);
  no_sframe.sframe_address = 0;
  no_sframe.sframe_size = 0;
  CHECK(w.add(no_sframe).ok());  // a window may be published before it has an SFrame
  auto bad_abi = window(5);
  bad_abi.code_abi = static_cast<abi>(9);
  CHECK(w.add(bad_abi).error().code() == errc::invalid_argument);
}

TEST_CASE("capacity is a fixed maximum with a clear error") {
  jitunwind_registry_header h{};
  registry_writer w(h, 3);
  std::vector<registry_slot> slots;
  for (uint64_t i = 0; i < 3; ++i) {
    auto a = w.add(window(i));
    REQUIRE(a.ok());
    slots.push_back(a->slot);
  }
  auto full = w.add(window(99));
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code() == errc::limit_exceeded);
  CHECK(full.error().message().find("all 3 slots") != std::string::npos);
  REQUIRE(w.release(slots[1]).ok());
  auto again = w.add(window(100));
  REQUIRE(again.ok());
  CHECK(again->slot.index == 1);
}

TEST_CASE("begin_update keeps the slot odd until commit_update") {
  jitunwind_registry_header h{};
  registry_writer w(h, 2);
  auto a = w.add(window(1));
  REQUIRE(a.ok());
  auto* e = reinterpret_cast<jitunwind_registry_entry*>(h.entries);
  REQUIRE(w.begin_update(a->slot).ok());
  CHECK(e[0].seq % 2 == 1);
  CHECK(w.read_local().empty());  // a busy slot is never returned half-written
  auto g = w.commit_update(a->slot, window(1, 0x70000));
  REQUIRE(g.ok());
  CHECK(e[0].seq % 2 == 0);
  auto all = w.read_local();
  REQUIRE(all.size() == 1);
  CHECK(all[0].window.text_start == 0x70000);
  CHECK(all[0].generation == *g);
}

TEST_CASE("the process-wide registry is the exported object") {
  registry_writer& global = registry();
  CHECK(&global == &registry());
  CHECK(global.capacity() == registry_writer::default_capacity);
  auto a = global.add(window(4242));
  REQUIRE(a.ok());
  auto recs = global.read_local();
  bool seen = false;
  for (const auto& r : recs) seen |= r.window.window_id == 4242 && r.generation == a->generation;
  CHECK(seen);
  CHECK(std::memcmp(global.header().magic, JITUNWIND_REGISTRY_MAGIC, 8) == 0);
  REQUIRE(global.release(a->slot).ok());
}

TEST_CASE("concurrent writers and an in-process reader never see a torn entry") {
  // Each writer keeps the invariant text_size == f(window_id, text_start) in every published
  // state; a torn copy would break it. Run under TSan (scripts/test.d/25-tsan.sh) this also checks
  // the C++ memory-model side of the seqlock.
  jitunwind_registry_header h{};
  registry_writer w(h, 64);
  auto size_of = [](uint64_t id, uint64_t text) { return 0x1000 + ((id * 31 + text) % 4096); };
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, seen{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<registry_slot> mine;
      uint64_t n = 0;
      for (unsigned i = 0; i < 4; ++i) {
        auto win = window(t * 100 + i, 0x100000 + n * 64);
        win.text_size = size_of(win.window_id, win.text_start);
        mine.push_back(w.add(win)->slot);
      }
      while (!stop.load(std::memory_order_relaxed)) {
        ++n;
        const unsigned i = n % 4;
        auto win = window(t * 100 + i, 0x100000 + n * 64);
        win.text_size = size_of(win.window_id, win.text_start);
        if (n % 7 == 0) {
          (void)w.retire(mine[i]);
        } else {
          (void)w.update(mine[i], win);
        }
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (const auto& r : w.read_local()) {
        seen.fetch_add(1, std::memory_order_relaxed);
        if (r.window.text_size != size_of(r.window.window_id, r.window.text_start)) {
          bad.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (auto& t : threads) t.join();
  INFO("entries read " << seen.load());
  CHECK(seen.load() > 0);
  CHECK(bad.load() == 0);
}
