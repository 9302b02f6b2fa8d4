// jitwalk: eBPF stack walker for JIT code without frame pointers.
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
