// `jitunwind usdt`: fire dynamic probes for people validating tracers and their scripts, and
// list the dynamic providers of a running process.
#include <jitunwind/usdt.h>

#include "cli.hpp"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace jitunwind::cli {

namespace {

using namespace jitunwind::usdt;

// Times are capped at one day: larger ones overflow the clock arithmetic they feed. A bare
// number is in the unit the option's name says (--hold-ms 500, --timeout-s 5); 2s or 500ms too.
option_spec time_option(const char* name, const char* value_name, const char* help,
                        const char* bare_unit) {
  return {.name = name,
          .value_name = value_name,
          .help = help,
          .type = cmdline::kind::duration,
          .max = 24 * 3600,
          .bare_unit = bare_unit};
}

const command_spec fire_spec{
    "fire",
    "",
    "Create a provider with one probe at run time, then fire it.",
    "Declares probe NAME of provider P with the given argument types, generates and loads the "
    "object, prints where tracers find it (pid, object path, /proc/PID/maps name, the note's "
    "argument string and a bpftrace line to start from), optionally waits until a tracer "
    "enables the probe (its semaphore becomes non-zero), then fires it COUNT times with the "
    "given values.\n"
    "Argument types: i8 u8 i16 u16 i32 u32 i64 u64 ptr str (f64 is refused: tracers cannot "
    "read it). Values are decimal or 0x-hexadecimal; negative values for signed types; a str "
    "value is the text after the colon (it cannot contain a comma).\n"
    "The kernel increments the semaphore when it registers the uprobe, a moment before the "
    "tracer's program is attached: after --wait-attach the command waits --settle-ms more "
    "before the first fire.",
    {{"provider", 0, "P", "Provider name (letters, digits, '_'). Required."},
     {"probe", 0, "NAME", "Probe name (letters, digits, '_'). Required."},
     {"args", 0, "TYPE:VALUE,...", "Up to 12 typed values, e.g. i32:-5,u64:0xff,str:hello."},
     {"count", 'n', "N", "Fire N times (default 1; 0 = only create, wait, and exit).",
      cmdline::kind::whole},
     time_option("interval-ms", "MS", "Pause between fires (default 0).", "ms"),
     {"wait-attach", 'w', "", "Wait until a tracer enables the probe before firing."},
     time_option("timeout-s", "S", "With --wait-attach: give up after S seconds (default 60).",
                 "s"),
     time_option("settle-ms", "MS",
                 "With --wait-attach: pause after the probe is enabled (default 100).", "ms"),
     time_option("hold-ms", "MS", "Keep the provider loaded MS milliseconds after the last fire.",
                 "ms"),
     {"file", 0, "",
      "Place the object in a file in the private runtime directory instead of "
      "a memfd (for tools that need a real path, e.g. perf buildid-cache)."},
     {"dir", 0, "DIR", "With --file: use DIR (owned by you, not writable by others)."}},
    0,
    0,
    "jitunwind usdt fire --provider myrt --probe gc_start --args u32:2,str:young -w -n 3\n"
    "  (then, in another shell: bpftrace -p PID -e 'usdt:*:myrt:gc_start "
    "{ printf(\"%d %s\\n\", arg0, str(arg1)); }')\n"
    "jitunwind usdt fire --provider myrt --probe tick --file --count 1000 --interval-ms 10"};

const command_spec list_spec{
    "list",
    "",
    "Show the dynamic providers and probes of a running process.",
    "Finds the objects jitunwind generated in process PID (memfd mappings named "
    "`/memfd:jitunwind-usdt:P` and files named `jitunwind-usdt-*.so` in /proc/PID/maps), "
    "decodes their .note.stapsdt notes and reads each semaphore from the process's memory: a "
    "non-zero semaphore means a tracer has the probe enabled. Needs permission to read the "
    "process's memory (same user with ptrace access, or root).\n"
    "With --uprobe-events, prints instead one line per probe for "
    "/sys/kernel/tracing/uprobe_events (group sdt_PROVIDER, arguments arg1..argN typed from "
    "the notes): this defines the probes as perf events for tools that cannot resolve a "
    "memfd path themselves (perf buildid-cache needs a real file).",
    {{"pid", 'p', "PID", "The process to inspect. Required."},
     {"uprobe-events", 0, "", "Print uprobe_events definitions instead of the listing."}},
    0,
    0,
    "jitunwind usdt list -p 1234\n"
    "jitunwind usdt list -p 1234 --uprobe-events >> /sys/kernel/tracing/uprobe_events"};

struct typed_value {
  arg_type type;
  uint64_t slot;
  std::string text;  // for str
};

result<uint64_t> parse_integer(const std::string& text, arg_type t) {
  const bool is_signed =
      t == arg_type::i8 || t == arg_type::i16 || t == arg_type::i32 || t == arg_type::i64;
  const int bits = t == arg_type::i8 || t == arg_type::u8     ? 8
                   : t == arg_type::i16 || t == arg_type::u16 ? 16
                   : t == arg_type::i32 || t == arg_type::u32 ? 32
                                                              : 64;
  const bool negative = !text.empty() && text[0] == '-';
  bool too_large = false;
  auto magnitude = parse_u64(negative ? text.substr(1) : text, &too_large);
  const auto bad = [&](errc code, const std::string& why) {
    return error(code, "value '" + text + "' for " + to_string(t) + ": " + why);
  };
  const uint64_t max = bits == 64 ? (is_signed ? uint64_t{INT64_MAX} : UINT64_MAX)
                                  : (uint64_t{1} << (is_signed ? bits - 1 : bits)) - 1;
  // The limit of negative values, as a magnitude: 2^(bits-1).
  const uint64_t min_magnitude = is_signed ? max + 1 : 0;
  // The accepted range, so that the user need not look up the type's limits.
  const auto out_of_range = [&] {
    return bad(errc::out_of_range, "out of range (" +
                                       (is_signed ? "-" + std::to_string(min_magnitude) : "0") +
                                       " to " + std::to_string(max) + ")");
  };
  // Too large for 64 bits is still a number: out of range, like any other value past the limit.
  if (!magnitude && !too_large) return bad(errc::invalid_argument, "not a number");
  if (negative && !is_signed)
    return bad(errc::invalid_argument, "negative value for an unsigned type");
  if (!magnitude || *magnitude > (negative ? min_magnitude : max)) return out_of_range();
  if (negative) return static_cast<uint64_t>(-static_cast<int64_t>(*magnitude - 1) - 1);
  return *magnitude;
}

result<std::vector<typed_value>> parse_values(const std::string& spec) {
  std::vector<typed_value> out;
  if (spec.empty()) return out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = spec.find(',', pos);
    const std::string item =
        spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    const size_t colon = item.find(':');
    if (colon == std::string::npos)
      return error(errc::invalid_argument, "argument '" + item + "': expected TYPE:VALUE");
    const std::string type_name = item.substr(0, colon);
    const std::string value = item.substr(colon + 1);
    auto t = parse_arg_type(type_name);
    if (!t)
      return error(errc::invalid_argument, "argument '" + item + "': unknown type '" + type_name +
                                               "' (i8 u8 i16 u16 i32 u32 i64 u64 ptr str)");
    typed_value v{*t, 0, {}};
    if (*t == arg_type::f64)
      return error(errc::unsupported, "argument '" + item +
                                          "': f64 is not supported (bpftrace has no floating "
                                          "point and libbpf cannot read %xmm registers)");
    if (*t == arg_type::string) {
      v.text = value;
    } else {
      auto n = parse_integer(value, *t == arg_type::pointer ? arg_type::u64 : *t);
      if (!n)
        return error(n.error().code(),
                     "argument " + std::to_string(out.size()) + ": " + n.error().message());
      v.slot = *n;
    }
    out.push_back(std::move(v));
  }
  return out;
}

int run_fire(const std::string& program, const parsed_args& a) {
  auto prov_name = a.value("provider");
  auto probe_name = a.value("probe");
  if (!prov_name || !probe_name)
    return report(program, "--provider and --probe are required", exit_usage);
  auto values = parse_values(a.value("args").value_or(""));
  if (!values) return report(program, values.error().message(), exit_usage);
  const uint64_t count = a.whole("count", 1);
  const uint64_t interval_ms = duration_ms(a, "interval-ms", 0);
  const uint64_t timeout_ms = duration_ms(a, "timeout-s", 60000);
  const uint64_t settle_ms = duration_ms(a, "settle-ms", 100);
  const uint64_t hold_ms = duration_ms(a, "hold-ms", 0);

  provider_options options;
  if (a.flag("file")) options.location = object_location::file;
  if (auto d = a.value("dir")) {
    if (!a.flag("file")) return report(program, "--dir needs --file", exit_usage);
    options.directory = *d;
  }
  auto prov = provider::create(*prov_name, options);
  if (!prov) return report(program, prov.error().message(), exit_failure);
  std::vector<arg_type> types;
  std::vector<uint64_t> slots;
  for (const auto& v : *values) {
    types.push_back(v.type);
    slots.push_back(v.type == arg_type::string ? reinterpret_cast<uintptr_t>(v.text.c_str())
                                               : v.slot);
  }
  auto p = prov->add_probe(*probe_name, types);
  if (!p) return report(program, p.error().message(), exit_failure);
  if (auto r = prov->load(); !r) return report(program, r.error().message(), exit_failure);

  std::string bpf_args;
  for (size_t i = 0; i < types.size() && i < 6; ++i)
    bpf_args += std::string(", ") + (types[i] == arg_type::string ? "str(arg" : "arg") +
                std::to_string(i) + (types[i] == arg_type::string ? ")" : "");
  std::string bpf_fmt;
  for (size_t i = 0; i < types.size() && i < 6; ++i)
    bpf_fmt += types[i] == arg_type::string ? " %s" : " %lld";
  std::printf("pid: %d\n", getpid());
  std::printf("object: %s\n", prov->object_path().c_str());
  std::printf("probe: %s:%s\n", prov_name->c_str(), probe_name->c_str());
  std::printf("arguments: %s\n", p->arg_string().empty() ? "(none)" : p->arg_string().c_str());
  std::printf("bpftrace: bpftrace -p %d -e 'usdt:*:%s:%s { printf(\"%s%s\\n\"%s); }'\n", getpid(),
              prov_name->c_str(), probe_name->c_str(), probe_name->c_str(), bpf_fmt.c_str(),
              bpf_args.c_str());
  std::fflush(stdout);

  if (a.flag("wait-attach")) {
    const std::string timeout = timeout_ms % 1000 == 0 ? std::to_string(timeout_ms / 1000) + " s"
                                                       : std::to_string(timeout_ms) + " ms";
    std::fprintf(stderr, "%s: waiting up to %s for a tracer to enable %s:%s\n", program.c_str(),
                 timeout.c_str(), prov_name->c_str(), probe_name->c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!p->enabled()) {
      if (std::chrono::steady_clock::now() >= deadline)
        return report(program,
                      "no tracer enabled " + *prov_name + ":" + *probe_name + " within " + timeout,
                      exit_failure);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("enabled: yes\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (i > 0 && interval_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    p->fire_slots(slots.data(), slots.size());
  }
  std::printf("fired: %" PRIu64 "\n", count);
  std::fflush(stdout);
  if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  if (auto r = prov->unload(); !r) return report(program, r.error().message(), exit_failure);
  return exit_ok;
}

// "-4@%edi" -> "%di:s32"; "8@16(%rsp)" -> "+16(%sp):u64"; empty on anything else.
std::string fetch_arg(const std::string& spec) {
  const size_t at = spec.find('@');
  if (at == std::string::npos) return {};
  const int size = std::atoi(spec.substr(0, at).c_str());
  const int bytes = size < 0 ? -size : size;
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) return {};
  const std::string type = (size < 0 ? "s" : "u") + std::to_string(8 * bytes);
  std::string loc = spec.substr(at + 1);
  static const char* const regs[][5] = {
      {"di", "rdi", "edi", "di", "dil"}, {"si", "rsi", "esi", "si", "sil"},
      {"dx", "rdx", "edx", "dx", "dl"},  {"cx", "rcx", "ecx", "cx", "cl"},
      {"r8", "r8", "r8d", "r8w", "r8b"}, {"r9", "r9", "r9d", "r9w", "r9b"},
      {"sp", "rsp", "esp", "sp", "spl"}};
  auto reg_name = [&](const std::string& r) -> std::string {
    for (const auto& row : regs)
      for (int i = 1; i < 5; ++i)
        if (r == row[i]) return row[0];
    return {};
  };
  if (loc.size() > 1 && loc[0] == '%') {
    const std::string r = reg_name(loc.substr(1));
    return r.empty() ? std::string() : "%" + r + ":" + type;
  }
  const size_t paren = loc.find("(%");
  if (paren != std::string::npos && loc.back() == ')') {
    const std::string r = reg_name(loc.substr(paren + 2, loc.size() - paren - 3));
    if (r.empty()) return {};
    const std::string off = loc.substr(0, paren);
    return (off.empty() || off[0] == '-' ? off : "+" + off) + "(%" + r + "):" + type;
  }
  return {};
}

int run_list(const std::string& program, const parsed_args& a) {
  std::string bad;
  const auto pid = pid_option(a, &bad);
  if (!pid) return report(program, bad, exit_usage);
  std::vector<std::string> warnings;
  auto objects = find_providers(*pid, &warnings);
  if (!objects) return report(program, objects.error().message(), exit_failure);
  for (const auto& w : warnings)
    std::fprintf(stderr, "%s: warning: %s\n", program.c_str(), w.c_str());
  if (a.flag("uprobe-events")) {
    for (const auto& o : *objects) {
      // Files are named by their path; memfds by the fd that keeps them alive (the kernel
      // resolves /proc/PID/fd/N to the memfd's inode when the event is created).
      const std::string path = o.mapping.rfind("/memfd:", 0) == 0 ? o.access_path : o.mapping;
      for (const auto& p : o.probes) {
        std::string line;
        char head[64];
        std::snprintf(head, sizeof head, ":0x%" PRIx64, p.note.pc);
        line = "p:sdt_" + p.note.provider + "/" + p.note.name + " " + path + head;
        if (p.note.semaphore != 0) {
          char sem[32];
          std::snprintf(sem, sizeof sem, "(0x%" PRIx64 ")", p.note.semaphore);
          line += sem;
        }
        size_t i = 0, n = 1;
        const std::string& args = p.note.args;
        while (i < args.size()) {
          size_t sp = args.find(' ', i);
          if (sp == std::string::npos) sp = args.size();
          const std::string fetch = fetch_arg(args.substr(i, sp - i));
          if (fetch.empty())
            std::fprintf(stderr, "%s: warning: %s:%s: argument %zu '%s' not translated\n",
                         program.c_str(), p.note.provider.c_str(), p.note.name.c_str(), n,
                         args.substr(i, sp - i).c_str());
          else
            line += " arg" + std::to_string(n) + "=" + fetch;
          ++n;
          i = sp + 1;
        }
        std::printf("%s\n", line.c_str());
      }
    }
    return exit_ok;
  }
  std::printf("process %d: %zu dynamic provider object(s)\n", *pid, objects->size());
  for (const auto& o : *objects) {
    std::printf("%s\n  path for tracers: %s\n  load address: 0x%" PRIxPTR "\n", o.mapping.c_str(),
                o.access_path.c_str(), o.load_address);
    for (const auto& p : o.probes) {
      std::string state = "semaphore unreadable";
      if (p.semaphore_value)
        state = *p.semaphore_value != 0
                    ? "enabled (semaphore " + std::to_string(*p.semaphore_value) + ")"
                    : "disabled";
      std::printf("  %s:%s  %s  [%s]\n", p.note.provider.c_str(), p.note.name.c_str(),
                  state.c_str(), p.note.args.c_str());
    }
  }
  return exit_ok;
}

const command commands[] = {{&fire_spec, run_fire}, {&list_spec, run_list}};

void print_group_help(const std::string& program) {
  print_standard_group_help(
      program,
      "Dynamic USDT probes: declared at run time in a generated shared object that bpftrace,\n"
      "perf and libbpf attach to like to compiled-in SDT probes (docs/usdt.md).\n",
      commands);
}

}  // namespace

int usdt_main(const invocation& inv) {
  return run_group(inv, commands, print_group_help);
}

}  // namespace jitunwind::cli
