// The registry under fire: 8 threads publish, update, retire, release and re-add windows of the
// process-wide registry for 10 s (JITUNWIND_HAMMER_SECONDS) while a separate process reads it
// with process_vm_readv through the public remote API and checks every accepted entry against
// ground truth (hammer_truth.hpp). An in-process reader thread reads at the same time with C++
// atomics (what TSan checks in scripts/test.d/25-tsan.sh).
#include <catch2/catch.hpp>

#include "registry/registry_writer.hpp"
#include "remote/hammer_truth.hpp"
#include "support/process.hpp"

#include <sys/prctl.h>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail;
namespace hammer = jitunwind::test::hammer;

namespace {

struct hammer_window {
  uint64_t id = 0;
  uint64_t version = 0;
  registry_slot slot;
  enum { live, retired, released } state = released;
  int current = 0;  // which buffer the entry points to
  alignas(64) uint8_t buffers[2][hammer::buffer_size] = {};
};

void write_truth(hammer_window& w, int buffer, uint64_t text_start) {
  hammer::truth t{};
  t.magic = hammer::magic;
  t.marker = hammer::marker_live;
  t.window_id = w.id;
  t.text_start = text_start;
  t.text_size = hammer::text_size_for(w.id, text_start);
  t.sframe_size = hammer::sframe_size_for(w.id, text_start);
  t.version = w.version;
  t.checksum = hammer::checksum_of(t);
  std::memcpy(w.buffers[buffer], &t, sizeof(t));
}

void set_marker(hammer_window& w, int buffer, uint64_t marker) {
  // Only the marker changes; the checksum does not cover it.
  std::memcpy(w.buffers[buffer] + offsetof(hammer::truth, marker), &marker, sizeof(marker));
}

registry_window describe(const hammer_window& w, int buffer, uint64_t text_start) {
  registry_window r;
  r.window_id = w.id;
  r.text_start = text_start;
  r.text_size = hammer::text_size_for(w.id, text_start);
  r.sframe_address = reinterpret_cast<uint64_t>(w.buffers[buffer]);
  r.sframe_size = hammer::sframe_size_for(w.id, text_start);
  return r;
}

double hammer_seconds() {
  const char* s = std::getenv("JITUNWIND_HAMMER_SECONDS");
  return s != nullptr ? std::atof(s) : 10.0;
}

}  // namespace

TEST_CASE("8 writer threads vs an out-of-process reader: no torn or stale entry accepted") {
  // Allow the reader (our child) to read us where Yama restricts ptrace to ancestors.
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  registry_writer& reg = registry();
  constexpr unsigned threads = 8, windows_per_thread = 12;
  std::vector<std::unique_ptr<hammer_window>> windows;
  for (unsigned i = 0; i < threads * windows_per_thread; ++i) {
    windows.push_back(std::make_unique<hammer_window>());
    windows.back()->id = hammer::id_base + i;
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops{0}, errors{0}, local_reads{0}, local_bad{0};
  std::vector<std::thread> writers;
  for (unsigned t = 0; t < threads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        hammer_window& w = *windows[t * windows_per_thread + rng() % windows_per_thread];
        const unsigned dice = static_cast<unsigned>(rng() % 10);
        bool ok = true;
        if (w.state == hammer_window::released || (dice < 6)) {
          // Publish new contents in the spare buffer, then point the entry at it.
          ++w.version;
          const int spare = 1 - w.current;
          const uint64_t text =
              0x10000000 + ((w.id - hammer::id_base) << 24) + (w.version % 65536) * 16;
          write_truth(w, spare, text);
          if (w.state == hammer_window::released) {
            auto p = reg.add(describe(w, spare, text));
            ok = p.ok();
            if (ok) w.slot = p->slot;
          } else {
            ok = reg.update(w.slot, describe(w, spare, text)).ok();
            // The old contents may be changed as soon as update() returned.
            set_marker(w, w.current, hammer::marker_stale);
          }
          w.current = spare;
          w.state = hammer_window::live;
        } else if (w.state == hammer_window::live) {
          ok = reg.retire(w.slot).ok();
          set_marker(w, w.current, hammer::marker_retired);
          w.state = hammer_window::retired;
        } else {
          ok = reg.release(w.slot).ok();
          set_marker(w, w.current, hammer::marker_stale);
          w.state = hammer_window::released;
        }
        if (!ok) errors.fetch_add(1, std::memory_order_relaxed);
        ++n;
        if ((n & 255) == 0) ops.fetch_add(256, std::memory_order_relaxed);
      }
    });
  }
  std::thread local_reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (const registry_record& r : reg.read_local()) {
        if (r.window.window_id < hammer::id_base) continue;
        local_reads.fetch_add(1, std::memory_order_relaxed);
        if (r.window.text_size != hammer::text_size_for(r.window.window_id, r.window.text_start)) {
          local_bad.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  });

  const double seconds = hammer_seconds();
  auto reader = test::run({test::binary_path("tests/remote/registry_hammer_reader"),
                           std::to_string(getpid()), std::to_string(seconds)},
                          {}, std::chrono::seconds(static_cast<int>(seconds) + 120));
  stop = true;
  for (auto& w : writers) w.join();
  local_reader.join();
  for (auto& w : windows) {
    if (w->state != hammer_window::released) (void)reg.release(w->slot);
  }

  INFO("reader stdout: " << reader.out);
  INFO("reader stderr: " << reader.err);
  INFO("writer operations: " << ops.load() << ", in-process reads: " << local_reads.load());
  WARN("registry hammer: " << reader.out << "writer operations ~" << ops.load()
                           << ", in-process entries read " << local_reads.load());
  CHECK_FALSE(reader.timed_out);
  CHECK(reader.exit_code == 0);
  CHECK(reader.out.find("violations=0") != std::string::npos);
  CHECK(errors.load() == 0);
  CHECK(local_bad.load() == 0);
  CHECK(ops.load() > 1000);
  // The reader really checked something: snapshots, SFrame buffers, and changing generations.
  auto field = [&](const char* name) {
    const size_t at = reader.out.find(std::string(name) + "=");
    return at == std::string::npos
               ? 0ull
               : std::strtoull(reader.out.c_str() + at + std::strlen(name) + 1, nullptr, 10);
  };
  CHECK(field("snapshots") > 10);
  CHECK(field("sframe_ok") > 10);
  CHECK(field("new_generations") > 10);
}
