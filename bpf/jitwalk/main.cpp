// jitwalk: eBPF stack walker for JIT code without frame pointers.
#include <malloc.h>

#include <cstdio>
#include <cstring>

#include "jitwalk/cli.hpp"

namespace {

const char* about =
    "An eBPF profiler that unwinds user stacks through JIT code without frame pointers, using "
    "the SFrame tables a runtime publishes with the jitunwind SDK (and the .sframe / .eh_frame "
    "sections of native objects). Needs root (BPF, perf events, uprobes). Documentation: "
    "docs/jitwalk.md.";

const cmdline::command* const commands[] = {&jitwalk::profile_command, &jitwalk::verify_command};

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
    const std::string help = cmdline::command_list_text("jitwalk", about, commands);
    std::fputs(help.c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? cmdline::exit_usage : 0;
  }
  if (!std::strcmp(argv[1], "profile")) return jitwalk::cmd_profile(argc, argv);
  if (!std::strcmp(argv[1], "verify")) return jitwalk::cmd_verify(argc, argv);
  return cmdline::usage_error(
      "jitwalk",
      std::string("unknown command '") + cmdline::shown(argv[1]) + "' (commands: profile, verify)");
}
