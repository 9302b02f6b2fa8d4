// The clocks of the perf_paths programs (tests/support/perf_view.hpp): CLOCK_MONOTONIC seconds,
// the clock perf record -k 1 stamps samples with, for the times they print; and the thread's
// CPU time, which their phases are measured in (a busy machine makes a phase take longer, not
// have fewer samples). Header-only, no library.
#pragma once

#include <time.h>

namespace jitunwind::test {

inline double monotonic_seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

inline double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

}  // namespace jitunwind::test
