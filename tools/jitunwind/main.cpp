// jitunwind: command-line companion of the jitunwind SDK.
//
// `jitunwind <group> <command> [options]`. Each command group lives in its own file
// `<group>_cmd.cpp` (picked up by CMake automatically) that defines
// `int jitunwind::cli::<group>_main(const invocation&)`; registering it is one line in
// JITUNWIND_CLI_GROUPS below.
#include "cli.hpp"

#include <cstdio>
#include <cstring>
#include <string>

// One line per command group: GROUP(name, one-line summary).
#define JITUNWIND_CLI_GROUPS(GROUP)                                            \
  GROUP(sframe, "decode, validate, build and convert SFrame unwind sections")  \
  GROUP(usdt, "fire dynamic USDT probes, list a process's dynamic providers")  \
  GROUP(unwind, "check a runtime's published unwind rows at every instruction it runs")      \
  GROUP(windows, "list and follow the code windows a running process has published")

namespace jitunwind::cli {
#define JITUNWIND_DECLARE_GROUP(name, summary) int name##_main(const invocation& inv);
JITUNWIND_CLI_GROUPS(JITUNWIND_DECLARE_GROUP)
#undef JITUNWIND_DECLARE_GROUP
}  // namespace jitunwind::cli

namespace {

struct group_entry {
  const char* name;
  const char* summary;
  int (*run)(const jitunwind::cli::invocation&);
};

constexpr group_entry groups[] = {
#define JITUNWIND_GROUP_ENTRY(name, summary) {#name, summary, &jitunwind::cli::name##_main},
    JITUNWIND_CLI_GROUPS(JITUNWIND_GROUP_ENTRY)
#undef JITUNWIND_GROUP_ENTRY
};

void print_help() {
  std::printf(
      "Usage: jitunwind GROUP COMMAND [OPTIONS] [ARGS]\n"
      "\n"
      "Command-line companion of the jitunwind SDK, which makes JIT and interpreter code\n"
      "visible to Linux profilers, tracers and debuggers.\n"
      "\n"
      "Command groups:\n");
  for (const auto& g : groups) std::printf("  %-10s %s\n", g.name, g.summary);
  std::printf(
      "\n"
      "Options:\n"
      "  -h, --help     Show this help and exit. `jitunwind GROUP --help` lists a group's\n"
      "                 commands, `jitunwind GROUP COMMAND --help` documents a command.\n"
      "  -V, --version  Print the version and exit.\n"
      "\n"
      "Exit status: 0 on success, 1 when an input is invalid or a file cannot be read or\n"
      "written, 2 for a bad command line.\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace jitunwind::cli;
  if (argc < 2) {
    print_help();
    return exit_usage;
  }
  const std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "help") {
    print_help();
    return exit_ok;
  }
  if (first == "-V" || first == "--version") {
    std::printf("jitunwind %s\n", version_string());
    return exit_ok;
  }
  for (const auto& g : groups) {
    if (first != g.name) continue;
    invocation inv;
    inv.program = std::string("jitunwind ") + g.name;
    for (int i = 2; i < argc; ++i) inv.args.emplace_back(argv[i]);
    return g.run(inv);
  }
  // --help anywhere wins, as it does for a command's own options.
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      print_help();
      return exit_ok;
    }
  }
  return report("jitunwind", "unknown command group '" + first + "'", exit_usage);
}
