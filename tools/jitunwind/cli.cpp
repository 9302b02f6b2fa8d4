#include "cli.hpp"

#include <jitunwind/config.h>

#include "guarded/budget.hpp"
#include "guarded/file.hpp"
#include "guarded/output.hpp"
#include "guarded/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace jitunwind::cli {

namespace {

#define JITUNWIND_STR2(x) #x
#define JITUNWIND_STR(x) JITUNWIND_STR2(x)

}  // namespace

const char* version_string() {
  return JITUNWIND_STR(JITUNWIND_VERSION_MAJOR) "." JITUNWIND_STR(
      JITUNWIND_VERSION_MINOR) "." JITUNWIND_STR(JITUNWIND_VERSION_PATCH);
}

result<parsed_args> parse(const command_spec& spec, std::span<const std::string> args) {
  parsed_args out;
  std::string message;
  if (!cmdline::parse(spec, args, out, &message))
    return error(errc::invalid_argument, std::move(message));
  return out;
}

std::string help_text(const std::string& program, const command_spec& spec) {
  return cmdline::help_text(program + " " + spec.name, spec);
}

std::string count_text(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string hex_text(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t duration_ms(const parsed_args& a, const std::string& name, uint64_t fallback) {
  if (!a.value(name)) return fallback;
  return static_cast<uint64_t>(std::llround(a.decimal(name, 0) * 1000));
}

std::optional<int> pid_option(const parsed_args& a, std::string* bad) {
  auto text = a.value("pid");
  if (!text) {
    *bad = "--pid is required";
    return std::nullopt;
  }
  auto pid = parse_u64(*text);
  if (!pid || *pid == 0 || *pid > INT_MAX) {
    *bad = "--pid: '" + detail::shortened(*text) + "' is not a process id";
    return std::nullopt;
  }
  return static_cast<int>(*pid);
}

std::optional<uint64_t> parse_u64(const std::string& text, bool* too_large) {
  cmdline::number_error why = cmdline::number_error::none;
  auto v = cmdline::parse_whole(text, &why);
  if (too_large != nullptr) *too_large = why == cmdline::number_error::too_large;
  return v;
}

result<std::vector<uint8_t>> read_file(const std::string& path) {
  if (path == "-") {
    // Standard input may be a pipe: read it to its end, never without bound.
    std::vector<uint8_t> bytes;
    uint8_t buf[65536];
    for (;;) {
      const ssize_t n = ::read(0, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return error(errc::io_error,
                     std::string("standard input: cannot read: ") + std::strerror(errno));
      if (n == 0) return bytes;
      if (bytes.size() + static_cast<size_t>(n) > max_input_bytes)
        return error(errc::limit_exceeded, "standard input: more than " +
                                               detail::size_text(max_input_bytes) +
                                               ", not read further");
      bytes.insert(bytes.end(), buf, buf + n);
    }
  }
  // A FIFO would block the open (and every file after it), a device never ends: only regular
  // files are read, at most max_input_bytes.
  detail::open_rules rules;
  rules.no_follow = false;  // the user named it
  rules.max_bytes = max_input_bytes;
  return detail::read_guarded_file(path, rules);
}

result<void> write_file(const std::string& path, std::span<const uint8_t> bytes) {
  return detail::replace_file(path, bytes);
}

int report(const std::string& program, const std::string& message, int status) {
  if (status == exit_usage) return cmdline::usage_error(program, message);
  std::fprintf(stderr, "%s: error: %s\n", program.c_str(), message.c_str());
  return status;
}

void print_standard_group_help(const std::string& program, const char* about,
                               std::span<const command> commands) {
  std::vector<const command_spec*> specs;
  for (const command& c : commands) specs.push_back(c.spec);
  const std::string help = cmdline::command_list_text(program, about, specs);
  std::fwrite(help.data(), 1, help.size(), stdout);
}

int run_group(const invocation& inv, std::span<const command> commands,
              void (*print_group_help)(const std::string& program)) {
  if (inv.args.empty()) {
    print_group_help(inv.program);
    return exit_usage;
  }
  const std::string& name = inv.args[0];
  if (name == "-h" || name == "--help" || name == "help") {
    print_group_help(inv.program);
    return exit_ok;
  }
  std::string known;
  for (const command& c : commands) {
    known += (known.empty() ? "" : ", ") + c.spec->name;
    if (name != c.spec->name) continue;
    const std::string program = inv.program + " " + name;
    auto args = parse(*c.spec, std::span(inv.args).subspan(1));
    if (!args) return report(program, args.error().message(), exit_usage);
    if (args->help) {
      const std::string help = cli::help_text(inv.program, *c.spec);
      std::fwrite(help.data(), 1, help.size(), stdout);
      return exit_ok;
    }
    return c.run(program, *args);
  }
  // --help anywhere wins, as it does for a command's own options.
  for (const std::string& a : inv.args) {
    if (a == "-h" || a == "--help") {
      print_group_help(inv.program);
      return exit_ok;
    }
  }
  return report(inv.program,
                "unknown command '" + detail::shortened(name, 60) + "' (commands: " + known + ")",
                exit_usage);
}

}  // namespace jitunwind::cli
