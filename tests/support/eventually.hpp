// Waiting in tests for something another thread or process does "soon" (a flusher thread, a
// child): polls every millisecond, gives up after `limit` — generous, so that only a thing that
// never happens fails, not a slow machine.
#pragma once

#include <chrono>
#include <thread>

namespace jitunwind::test {

/// Whether `done()` became true within `limit`.
template <class F>
bool eventually(F&& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace jitunwind::test
