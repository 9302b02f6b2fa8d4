// Out-of-process reader of the registry hammer: reads the registry of PID with the public remote
// API for SECONDS and checks every accepted entry and SFrame buffer against the ground truth in
// hammer_truth.hpp. Prints one statistics line; exit status 1 on any violation.
// Usage: registry_hammer_reader PID SECONDS
#include <jitunwind/remote.h>

#include "remote/hammer_truth.hpp"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace jitunwind;
using namespace jitunwind::test::hammer;

namespace {

struct seen_entry {
  uint64_t generation = 0;
  remote::window_state state = remote::window_state::live;
  uint64_t window_id = 0, text_start = 0, text_size = 0, sframe_address = 0, sframe_size = 0;
};

uint64_t violations = 0;

void violation(const char* what, const remote::window_record& w) {
  if (++violations <= 20) {
    std::fprintf(stderr,
                 "VIOLATION: %s: slot %u window %" PRIu64 " generation %" PRIu64
                 " state %s "
                 "text 0x%" PRIx64 "+0x%" PRIx64 " sframe 0x%" PRIx64 "+0x%" PRIx64 "\n",
                 what, w.slot, w.window_id, w.generation, remote::to_string(w.state), w.text_start,
                 w.text_size, w.sframe_address, w.sframe_size);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PID SECONDS\n", argv[0]);
    return 2;
  }
  const pid_t pid = std::atoi(argv[1]);
  const double seconds = std::atof(argv[2]);
  auto reader = remote::registry_reader::open(pid);
  if (!reader) {
    std::fprintf(stderr, "open: %s\n", reader.error().message().c_str());
    return 2;
  }
  std::map<std::pair<uint64_t, uint32_t>, seen_entry> last;  // (registry, slot) -> last seen
  uint64_t snapshots = 0, windows = 0, sframe_ok = 0, sframe_changed = 0, torn = 0,
           read_failures = 0, distinct_generations = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    auto snap = reader->read();
    if (!snap) {
      std::fprintf(stderr, "read: %s\n", snap.error().message().c_str());
      return 2;
    }
    ++snapshots;
    torn += snap->torn_retries;
    read_failures += snap->skipped.size();  // refused (never accepted) slots that kept changing
    for (const remote::window_record& w : snap->windows) {
      if (w.window_id < id_base) continue;  // not a hammer window
      ++windows;
      if (w.text_size != text_size_for(w.window_id, w.text_start) ||
          w.sframe_size != sframe_size_for(w.window_id, w.text_start)) {
        violation("entry fields inconsistent (torn entry accepted)", w);
      }
      seen_entry now{w.generation, w.state,          w.window_id,  w.text_start,
                     w.text_size,  w.sframe_address, w.sframe_size};
      auto [it, inserted] = last.try_emplace({w.registry_address, w.slot}, now);
      if (!inserted) {
        seen_entry& before = it->second;
        if (w.generation < before.generation) {
          violation("generation went backwards in a slot", w);
        } else if (w.generation == before.generation) {
          if (w.window_id != before.window_id || w.text_start != before.text_start ||
              w.text_size != before.text_size || w.sframe_address != before.sframe_address ||
              w.sframe_size != before.sframe_size) {
            violation("same generation with different contents", w);
          }
          if (before.state == remote::window_state::retired &&
              w.state == remote::window_state::live) {
            violation("retired generation reported live again", w);
          }
        } else {
          ++distinct_generations;
        }
        before = now;
      }
      // Check a subset of SFrame buffers (every one costs 2 more process_vm_readv calls).
      if ((windows & 3) != 0) continue;
      auto bytes = reader->read_sframe(w);
      if (!bytes) {
        if (bytes.error().code() == errc::bad_state) {
          ++sframe_changed;
          continue;
        }
        std::fprintf(stderr, "read_sframe: %s\n", bytes.error().message().c_str());
        return 2;
      }
      truth t;
      if (bytes->size() < sizeof(t)) {
        violation("SFrame buffer shorter than the truth record", w);
        continue;
      }
      std::memcpy(&t, bytes->data(), sizeof(t));
      ++sframe_ok;
      if (t.magic != magic || t.checksum != checksum_of(t)) {
        violation("SFrame buffer corrupt", w);
      } else if (t.window_id != w.window_id || t.text_start != w.text_start ||
                 t.text_size != w.text_size || t.sframe_size != w.sframe_size) {
        violation("SFrame buffer belongs to other contents", w);
      } else if (w.state == remote::window_state::live && t.marker != marker_live) {
        violation(t.marker == marker_retired ? "retired window reported live"
                                             : "stale window reported live",
                  w);
      } else if (w.state == remote::window_state::retired && t.marker == marker_stale) {
        violation("released window reported retired", w);
      }
    }
  }
  std::printf("snapshots=%" PRIu64 " windows=%" PRIu64 " new_generations=%" PRIu64
              " sframe_ok=%" PRIu64 " sframe_changed=%" PRIu64 " torn_retries=%" PRIu64
              " read_failures=%" PRIu64 " violations=%" PRIu64 "\n",
              snapshots, windows, distinct_generations, sframe_ok, sframe_changed, torn,
              read_failures, violations);
  return violations == 0 ? 0 : 1;
}
