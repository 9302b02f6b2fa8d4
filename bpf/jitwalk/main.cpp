// jitwalk: eBPF stack walker for JIT code without frame pointers.
#include <malloc.h>

#include <cstdio>
#include <cstring>

#include "jitwalk/cli.hpp"

namespace {
const char* kHelp = R"(usage: jitwalk COMMAND [options]

An eBPF profiler that unwinds user stacks through JIT code without frame pointers, using the
SFrame tables a runtime publishes with the jitunwind SDK (and the .sframe / .eh_frame sections of
native objects). Needs root (BPF, perf events, uprobes).

commands:
  profile   sample a process and write folded stacks, an SVG flame graph, a pprof profile
  verify    run an example runtime and check every walked stack against its ground truth

`jitwalk COMMAND --help` describes each command. Documentation: docs/jitwalk.md.
)";
}  // namespace

int main(int argc, char** argv) {
  // Start-up reads whole sections (symbol and string tables, 2-8 MiB each for node) into
  // buffers freed soon after. As separate mmaps each would fault in fresh pages (~25 % of
  // jitwalk's page faults on `node -e 0`, expensive in a VM); from the heap, kept untrimmed,
  // the next buffer reuses them: node -e 0 takes 17 500 page faults instead of 30 700 and
  // starts ~0.5 s sooner here; the price is up to ~9 MiB more peak RSS on small targets (heap
  // kept instead of unmapped; docs/performance.md, "jitwalk start-up and memory").
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "profile")) return jitwalk::cmd_profile(argc, argv);
  if (!std::strcmp(argv[1], "verify")) return jitwalk::cmd_verify(argc, argv);
  std::fprintf(stderr, "jitwalk: unknown command '%s' (jitwalk --help)\n", argv[1]);
  return 2;
}
