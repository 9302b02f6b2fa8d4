// toy-interp: runs a toylang program in a bytecode interpreter.
#include "bytecode.h"
#include "interp.h"
#include "probes.h"
#include "toylang.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* usage =
    "usage: toy-interp [OPTIONS] PROGRAM.toy [ARGS...]\n"
    "\n"
    "Runs main(ARGS...) of a toylang program in a bytecode interpreter, printing what the\n"
    "program prints and then main's value.\n"
    "\n"
    "options:\n"
    "  --trampolines=on|off  call every toy function through its own native trampoline, so\n"
    "                        profilers and debuggers see toy:<function> frames (default on)\n"
    "  --probes=on|off       USDT probes toyinterp:function__entry/function__return/line\n"
    "                        (default on; untraced they cost one load per event)\n"
    "  --stats               print calls per function to stderr after the run\n"
    "  --dump-bytecode       print the bytecode and exit\n"
    "  --help                this text\n"
    "\n"
    "exit status: 0 ok, 1 compile error, 2 usage error, 3 runtime error\n";

struct options {
  bool trampolines = true;
  bool probes = true;
  bool stats = false;
  bool dump = false;
  std::string file;
  std::vector<std::string> args;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "toy-interp: %s\n(see toy-interp --help)\n", message.c_str());
  std::exit(2);
}

bool parse_on_off(std::string_view value, std::string_view flag) {
  if (value == "on") return true;
  if (value == "off") return false;
  usage_error(std::string(flag) + " takes 'on' or 'off', not '" + std::string(value) + "'");
}

options parse_command_line(int argc, char** argv) {
  options o;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.size() < 2 || a.substr(0, 2) != "--") break;
    const size_t eq = a.find('=');
    const std::string_view flag = a.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : a.substr(eq + 1);
    if (a == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (flag == "--trampolines" && eq != std::string_view::npos) {
      o.trampolines = parse_on_off(value, flag);
    } else if (flag == "--probes" && eq != std::string_view::npos) {
      o.probes = parse_on_off(value, flag);
    } else if (a == "--stats") {
      o.stats = true;
    } else if (a == "--dump-bytecode") {
      o.dump = true;
    } else if (a == "--") {
      ++i;
      break;
    } else {
      usage_error("unknown option '" + std::string(a) + "'");
    }
  }
  if (i >= argc) usage_error("no PROGRAM.toy given");
  o.file = argv[i++];
  for (; i < argc; ++i) o.args.emplace_back(argv[i]);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse_command_line(argc, argv);
  std::vector<toylang::diagnostic> errors;
  auto source = toylang::compile_file(opt.file, errors);
  if (!source) {
    std::fputs(toylang::format(opt.file, errors).c_str(), stderr);
    return 1;
  }
  std::string message;
  const auto args = toylang::parse_arguments(*source, opt.args, message);
  if (!args) usage_error(message);

  toyinterp::compile_options copts;
  copts.line_events = TOYINTERP_PROBES != 0 && opt.probes;
  const toyinterp::program program = toyinterp::compile(*source, copts);
  if (opt.dump) {
    std::fputs(toyinterp::disassemble(program).c_str(), stdout);
    return 0;
  }

  std::unique_ptr<toyinterp::probes> probes;
#if TOYINTERP_PROBES
  if (opt.probes) {
    std::string error;
    probes = toyinterp::probes::create(error);
    if (!probes)
      std::fprintf(stderr, "toy-interp: warning: probes unavailable: %s\n", error.c_str());
  }
#endif
  toyinterp::interp_options iopts;
  if (probes) {
    iopts.checkpoint_user = probes.get();
    iopts.on_checkpoint = [](void* user, int64_t tag, std::span<const uint64_t> addrs) {
      static_cast<toyinterp::probes*>(user)->checkpoint(tag, addrs.size(), addrs.data());
    };
  }
  (void)opt.trampolines;  // trampolines: see below (SDK module)
  toyinterp::interpreter interp(program, std::move(iopts), probes.get());
  const int64_t value = interp.run_main(*args);
  std::printf("%" PRId64 "\n", value);
  std::fflush(stdout);
  if (opt.stats) {
    for (const auto& f : program.functions) {
      std::fprintf(stderr, "calls %s %" PRIu64 "\n", f.name.c_str(), interp.call_counts()[f.index]);
    }
  }
  return 0;
}
