#include "usdt_support.h"

#include <unistd.h>

#include <cstdio>
#include <thread>

namespace toylang {

void fire_checkpoint(const jitunwind::usdt::probe& p, int64_t tag,
                     std::span<const uint64_t> addrs) {
  if (addrs.size() > 512 || !p.enabled()) return;
  p.fire(tag, static_cast<uint64_t>(addrs.size()), addrs.data());
}

bool wait_for_tracer(const char* program, const jitunwind::usdt::provider& provider,
                     std::span<const jitunwind::usdt::probe> probes, std::chrono::seconds timeout,
                     bool all) {
  std::fprintf(stderr,
               "%s: pid %d waiting for a tracer on provider %s (%s), e.g. bpftrace -p %d -e "
               "'usdt:*:%s:* { ... }'\n",
               program, static_cast<int>(getpid()), provider.name().c_str(),
               provider.object_path().c_str(), static_cast<int>(getpid()), provider.name().c_str());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t enabled = 0;
    for (const auto& p : probes) enabled += p.enabled() ? 1 : 0;
    if (all ? enabled == probes.size() : enabled > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace toylang
