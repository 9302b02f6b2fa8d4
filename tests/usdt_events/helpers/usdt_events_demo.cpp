// Fires each SDK event a few times once a tracer is attached (waits up to 10 s for the
// window_publish semaphore), for trying the bpftrace one-liners of docs/usdt-events.md:
//   bpftrace -c ./build/tests/usdt_events/usdt_events_demo -e
//   'usdt:./build/tests/usdt_events/usdt_events_demo:jitunwind:window_publish { ... }'
#include "usdt_events/events.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace ev = jitunwind::detail::usdt_events;

int main() {
  for (int i = 0; i < 1000 && ev::semaphores().window_publish == 0 &&
                  ev::semaphores().code_add == 0 && ev::semaphores().window_retire == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (uint64_t w = 1; w <= 3; ++w) {
    const uint64_t text = 0x7f1200000000ull + w * 0x100000;
    ev::window_publish(w, 10 * w, text, 0x10000, text + 0x10000, 0x200);
    for (uint64_t f = 0; f < 2; ++f) {
      const std::string name = "jit_fn_" + std::to_string(w) + "_" + std::to_string(f);
      ev::code_add(text + f * 0x100, 0x80, name.c_str(), w);
    }
    ev::window_retire(w, 10 * w);
    ev::window_free(w, 10 * w);
  }
  std::printf("done\n");
  return 0;
}
