#include "cli.hpp"

#include <jitunwind/config.h>

#include <jitunwind/toolkit/budget.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>
#include <jitunwind/toolkit/output_file.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace jitunwind::cli {

namespace {

#define JITUNWIND_STR2(x) #x
#define JITUNWIND_STR(x) JITUNWIND_STR2(x)

error usage_error(std::string message) {
  return error(errc::invalid_argument, std::move(message));
}

const option_spec* find_long(const command_spec& spec, const std::string& name) {
  for (const auto& o : spec.options)
    if (o.name == name) return &o;
  return nullptr;
}

const option_spec* find_short(const command_spec& spec, char c) {
  for (const auto& o : spec.options)
    if (o.short_name == c) return &o;
  return nullptr;
}

/// Wraps `text` at `width` columns, each line prefixed by `indent` spaces; keeps explicit
/// newlines.
std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string word, current(indent, ' ');
    bool empty = true;
    while (words >> word) {
      if (!empty && current.size() + 1 + word.size() > width) {
        out += current + "\n";
        current.assign(indent, ' ');
        empty = true;
      }
      if (!empty) current += ' ';
      current += word;
      empty = false;
    }
    out += (empty ? std::string() : current) + "\n";
  }
  return out;
}

}  // namespace

const char* version_string() {
  return JITUNWIND_STR(JITUNWIND_VERSION_MAJOR) "." JITUNWIND_STR(
      JITUNWIND_VERSION_MINOR) "." JITUNWIND_STR(JITUNWIND_VERSION_PATCH);
}

result<parsed_args> parse(const command_spec& spec, std::span<const std::string> args) {
  parsed_args out;
  // --help wins over everything else on the line (even a bad option before it).
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") {
      out.help = true;
      return out;
    }
  }
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      out.operands.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    const option_spec* o = nullptr;
    std::optional<std::string> inline_value;
    std::string shown = a;
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
        shown = "--" + name;
      }
      o = find_long(spec, name);
    } else if (a.size() == 2) {
      o = find_short(spec, a[1]);
    }
    if (!o) {
      std::string what =
          "unknown option '" + toolkit::shortened(shown, 60) + "' for '" + spec.name + "'";
      // `check PROGRAM --opt`: most likely meant for the program.
      if (!out.operands.empty() && spec.operands.find("-- ") != std::string::npos)
        what += " (to pass options on to '" + out.operands.front() + "', put '--' before it)";
      return usage_error(what);
    }
    if (o->value_name.empty()) {
      if (inline_value) return usage_error("option --" + o->name + " takes no value");
      out.flags[o->name] = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size())
        return usage_error("option --" + o->name + " needs a value (" + o->value_name + ")");
      inline_value = args[++i];
    }
    out.values[o->name] = *inline_value;
  }
  if (out.operands.size() < spec.min_operands)
    return usage_error("'" + spec.name + "' needs " +
                       (spec.operands.empty() ? std::string("operands") : spec.operands));
  if (out.operands.size() > spec.max_operands)
    return usage_error("unexpected argument '" +
                       toolkit::shortened(out.operands[spec.max_operands], 60) + "' for '" +
                       spec.name + "'");
  return out;
}

std::string help_text(const std::string& program, const command_spec& spec) {
  std::string s = "Usage: " + program + " " + spec.name;
  if (!spec.options.empty()) s += " [OPTIONS]";
  if (!spec.operands.empty()) s += " " + spec.operands;
  s += "\n\n" + wrap(spec.summary, 0, 100);
  if (!spec.description.empty()) s += "\n" + wrap(spec.description, 0, 100);
  s += "\nOptions:\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& o : spec.options) {
    std::string left = o.short_name ? std::string("-") + o.short_name + ", " : std::string("    ");
    left += "--" + o.name;
    if (!o.value_name.empty()) left += " " + o.value_name;
    rows.emplace_back(left, o.help);
  }
  rows.emplace_back("-h, --help", "Show this help and exit.");
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  for (const auto& r : rows) {
    std::string body = wrap(r.second, 2 + width + 2, 100);
    body.replace(0, 2 + r.first.size(), "  " + r.first);
    s += body;
  }
  if (!spec.examples.empty()) s += "\nExamples:\n" + wrap(spec.examples, 2, 1000);
  return s;
}

std::string count_text(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string hex_text(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::optional<uint64_t> number_option(const parsed_args& a, const std::string& name,
                                      uint64_t fallback, std::string* bad, uint64_t max) {
  auto v = a.value(name);
  if (!v) return fallback;
  bool too_large = false;
  auto n = parse_u64(*v, &too_large);
  if (!n && too_large) {
    // Digits after all: say what the limit is, as for any other value above it.
    *bad = "--" + name + ": " + toolkit::shortened(*v) + " is more than " + std::to_string(max);
  } else if (!n) {
    *bad = "--" + name + ": '" + toolkit::shortened(*v) + "' is not a number";
  } else if (*n > max) {
    *bad = "--" + name + ": " + toolkit::shortened(*v) + " is more than " + std::to_string(max);
    n.reset();
  }
  return n;
}

std::optional<int> pid_option(const parsed_args& a, std::string* bad) {
  auto text = a.value("pid");
  if (!text) {
    *bad = "--pid is required";
    return std::nullopt;
  }
  auto pid = parse_u64(*text);
  if (!pid || *pid == 0 || *pid > INT_MAX) {
    *bad = "--pid: '" + toolkit::shortened(*text) + "' is not a process id";
    return std::nullopt;
  }
  return static_cast<int>(*pid);
}

std::optional<uint64_t> parse_u64(const std::string& text, bool* too_large) {
  if (too_large != nullptr) *too_large = false;
  // Digits only at the start: strtoull would skip blanks and then accept (and wrap) a sign.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const char* begin = text.c_str() + (hex ? 2 : 0);
  if (*begin == 0) return std::nullopt;
  // The first digit after "0x" is checked here: strtoull would skip blanks there too.
  if (!std::isxdigit(static_cast<unsigned char>(*begin))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(begin, &end, hex ? 16 : 10);
  if (*end != 0 || end == begin) return std::nullopt;
  // ERANGE after consuming every digit: a number, just more than 64 bits hold.
  if (errno == ERANGE && too_large != nullptr) *too_large = true;
  if (errno != 0) return std::nullopt;
  return static_cast<uint64_t>(v);
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
                                               toolkit::size_text(max_input_bytes) +
                                               ", not read further");
      bytes.insert(bytes.end(), buf, buf + n);
    }
  }
  // A FIFO would block the open (and every file after it), a device never ends: only regular
  // files are read, at most max_input_bytes.
  toolkit::open_rules rules;
  rules.no_follow = false;  // the user named it
  rules.max_bytes = max_input_bytes;
  return toolkit::read_guarded_file(path, rules);
}

result<void> write_file(const std::string& path, std::span<const uint8_t> bytes) {
  return toolkit::replace_file(path, bytes);
}

int report(const std::string& program, const std::string& message, int status) {
  std::fprintf(stderr, "%s: error: %s\n", program.c_str(), message.c_str());
  if (status == exit_usage) std::fprintf(stderr, "Try '%s --help'.\n", program.c_str());
  return status;
}

void print_standard_group_help(const std::string& program, const char* about,
                               std::span<const command> commands) {
  std::printf("Usage: %s COMMAND [OPTIONS]\n\n%s\nCommands:\n", program.c_str(), about);
  for (const auto& c : commands)
    std::printf("  %-6s %s\n", c.spec->name.c_str(), c.spec->summary.c_str());
  std::printf("\n`%s COMMAND --help` documents a command.\n", program.c_str());
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
      const std::string help = help_text(inv.program, *c.spec);
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
                "unknown command '" + toolkit::shortened(name, 60) + "' (commands: " + known + ")",
                exit_usage);
}

}  // namespace jitunwind::cli
