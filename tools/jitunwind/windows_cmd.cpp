// `jitunwind windows`: what a running process has published through the jitunwind registry,
// seen from outside as a profiler sees it (list), and as it changes (watch).
#include <jitunwind/remote.h>
#include <jitunwind/window.h>

#include "cli.hpp"
#include <jitunwind/toolkit/input_cuts.hpp>
#include <jitunwind/toolkit/budget.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>
#include "proc_files.hpp"
#include "sframe_input.hpp"
#include "sframe_text.hpp"
#include "window_tables.hpp"

#include <nlohmann/json.hpp>

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <tuple>

namespace jitunwind::cli {

namespace {

using json = nlohmann::ordered_json;  // keys in the order written

const char* const reading_note =
    "The registry is read with process_vm_readv, so the process is not stopped; this needs "
    "permission to read its memory (same user with ptrace access, or root). Each window's SFrame "
    "section is copied and validated as a profiler would use it: a window without SFrame, with "
    "SFrame that does not validate or that describes code outside the window is UNUSABLE, with "
    "the reason. Function names come from the process's perf map when it writes one: "
    "/tmp/perf-PID.map, or in the directory of JITUNWIND_DIR if the process has that in its "
    "environment. A thread id stands for its process (whose main thread may have ended). A "
    "registry entry that cannot be read (impossible values, or stuck in the middle of an update) "
    "is skipped, with the reason, and the other windows are still listed.";

// What the process's data may make the tool hold (docs/cli.md, "Reading hostile processes").
constexpr uint64_t default_max_memory_mib = 64;
// Sizes in MiB when bare (--max-memory 64), or with a unit (--max-memory 1G); 1 MiB to 1 TiB.
option_spec mib_option(const char* name, const char* help) {
  return {.name = name,
          .value_name = "MIB",
          .help = help,
          .type = cmdline::kind::size,
          .min = 1 << 20,
          .max = double(uint64_t{1} << 40),
          .bare_unit = "MiB"};
}
const option_spec max_memory_option = mib_option(
    "max-memory",
    "Memory the process's data may take in this tool: its windows' SFrame copies, their records "
    "and the names of its perf map (default 64). Windows beyond it are reported as not read.");
const option_spec max_file_option = mib_option(
    "max-file",
    "The most read from the perf map (default 256): a larger one is read that far, with a note.");

const command_spec list_spec{
    "list",
    "",
    "Show the code windows a running process has published, and check their SFrame data.",
    std::string("Finds every jitunwind registry in process PID (one per copy of the SDK it has "
                "mapped) and lists its windows: id, generation, state (live, or retired: in its "
                "grace period), text range, SFrame section and its version, ABI and number of "
                "functions. Before the windows, what each session of the process says about its "
                "publishers (session::status()): state, what it writes, and how many warnings it "
                "gave, with the last one (an SDK that predates the status area says nothing).\n") +
        reading_note +
        "\nExit status: 0 if every window is usable (also when none is published), 1 if one is "
        "not or the registry cannot be read (no such process, no registry in it, no "
        "permission), 2 for a bad command line.",
    {{"pid", 'p', "PID", "The process to inspect (a thread id means its process). Required."},
     {"functions", 'f', "", "Also list each window's functions: start, size, rows, name."},
     {"rows", 0, "",
      "Also print each usable window's SFrame section in full, as `jitunwind sframe dump` "
      "does (header, then every function with its rows)."},
     {"live", 0, "", "Only live windows (default: also retired ones)."},
     {"json", 0, "",
      "One JSON document instead of text (addresses as integers; `usable` is null for a window "
      "that kept changing while it was read)."},
     {"perf-map", 0, "FILE", "Read names from FILE (a regular file) instead of the process's own."},
     max_memory_option,
     max_file_option},
    0,
    0,
    "jitunwind windows list -p 4242\n"
    "jitunwind windows list -p 4242 --functions --live\n"
    "jitunwind windows list -p 4242 --json | jq '.windows[] | select(.usable == false)'"};

const command_spec watch_spec{
    "watch",
    "",
    "Follow a running process's code windows as they are published, retired and freed.",
    std::string(
        "Prints the windows process PID has published (present), then one line per change: a "
        "window published, updated (a new generation: more code, or its memory reused), "
        "retired (in its grace period), or freed (gone from the registry). The "
        "registry's change counter is polled every --interval-ms: changes between two polls are "
        "seen together (a window published and freed in between is not seen at all). Waits for "
        "the process to load the SDK if it has not yet, and looks for its registries again "
        "after an exec. Ends when the process exits, after --seconds, on Ctrl-C or when the "
        "output is closed, with a count of what was seen.\n") +
        reading_note +
        "\nExit status: 0 if every window seen was usable, 1 if one was not or the registry "
        "cannot be read, 2 for a bad command line.",
    {{"pid", 'p', "PID", "The process to follow (a thread id means its process). Required."},
     {"functions", 'f', "", "Also list the functions of each newly published window."},
     {"interval-ms", 0, "MS", "Poll the registry every MS milliseconds (default 100, 1 to 60000).",
      cmdline::kind::duration, 0.001, 60, "ms"},
     {"seconds", 0, "S", "Stop after S seconds (default 0: when the process exits).",
      cmdline::kind::duration, 0, 24 * 3600},
     {"json", 0, "", "One JSON object per line and event (JSON Lines), for jq and scripts."},
     {"perf-map", 0, "FILE", "Read names from FILE (a regular file) instead of the process's own."},
     max_memory_option,
     max_file_option},
    0,
    0,
    "jitunwind windows watch -p 4242\n"
    "jitunwind windows watch -p 4242 --json --seconds 10 > windows.jsonl"};

std::atomic<bool> stop_watching{false};

// Names, paths and messages come from the target and may hold any bytes: invalid UTF-8 is
// replaced (U+FFFD) rather than refused.
std::string dump_text(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

const char* symbol_table_text(remote::symbol_table t) {
  switch (t) {
    case remote::symbol_table::dynsym:
      return ".dynsym";
    case remote::symbol_table::symtab:
      return ".symtab";
    case remote::symbol_table::given:
      return "given";
  }
  return "?";
}

// What the command needs to show a window's functions: decoded once, on demand.
std::vector<function_desc> functions_of(const loaded_window& w) {
  if (!w.table) return {};
  auto d = sframe::decode(w.sframe, w.record.sframe_address);
  return d ? std::move(d->functions) : std::vector<function_desc>{};
}

size_t function_count(const loaded_window& w) {
  return w.table ? w.table->info().num_fdes : 0;
}

json window_json(const loaded_window& w, const perf_map_names* names) {
  const remote::window_record& r = w.record;
  json j;
  j["id"] = r.window_id;
  j["generation"] = r.generation;
  j["state"] = remote::to_string(r.state);
  j["registry"] = r.registry_address;
  j["slot"] = r.slot;
  j["text_start"] = r.text_start;
  j["text_size"] = r.text_size;
  j["sframe_address"] = r.sframe_address;
  j["sframe_size"] = r.sframe_size;
  j["abi"] = w.table ? to_string(w.table->info().target) : to_string(r.code_abi);
  // The section's version once validated, else what the registry entry says (0: not said).
  j["sframe_version"] = w.table ? w.table->info().version : r.sframe_version;
  if (w.changed)
    j["usable"] = nullptr;  // not known: it changed while it was read
  else
    j["usable"] = w.why.empty();
  if (!w.why.empty()) j["why"] = w.why;
  if (w.changed) j["changed"] = true;
  j["function_count"] = function_count(w);
  if (names != nullptr) {
    json fs = json::array();
    for (const function_desc& f : functions_of(w)) {
      json fj{{"start", f.start}, {"size", f.size}, {"rows", f.rows.size()}};
      if (f.pcmask_rep != 0) fj["pcmask_rep"] = f.pcmask_rep;
      auto it = names->names().find(f.start);
      if (it != names->names().end()) fj["name"] = it->second;
      fs.push_back(std::move(fj));
    }
    j["functions"] = std::move(fs);
  }
  return j;
}

// "window 3 (generation 12, live): text 0x7f..-0x7f.. (4096 bytes), SFrame 0x..+544 bytes,
// amd64, 20 functions" or "..., UNUSABLE: why".
std::string window_line(const loaded_window& w) {
  const remote::window_record& r = w.record;
  std::string s = "window " + std::to_string(r.window_id) + " (generation " +
                  std::to_string(r.generation) + ", " + remote::to_string(r.state) + "): text " +
                  hex_text(r.text_start) + "-" + hex_text(r.text_start + r.text_size) + " (" +
                  count_text(r.text_size, "byte") + ")";
  if (r.sframe_size != 0)
    s += ", SFrame " + hex_text(r.sframe_address) + "+" + count_text(r.sframe_size, "byte");
  if (w.changed) return s + ", changed while being read (republished or freed meanwhile)";
  if (!w.why.empty()) return s + ", UNUSABLE: " + w.why;
  return s + ", SFrame v" + std::to_string(w.table->info().version) + ", " +
         to_string(w.table->info().target) + ", " + count_text(function_count(w), "function");
}

void print_functions(const loaded_window& w, const perf_map_names& names, const char* indent) {
  for (const function_desc& f : functions_of(w)) {
    auto it = names.names().find(f.start);
    std::printf("%s%s  size %-6u %-8s %s\n", indent, hex_text(f.start).c_str(), f.size,
                count_text(f.rows.size(), "row").c_str(),
                it == names.names().end() ? "" : toolkit::terminal_text(it->second).c_str());
  }
}

void print_rows(pid_t pid, const loaded_window& w, const perf_map_names& names) {
  auto d = sframe::decode(w.sframe, w.record.sframe_address);
  if (!d) return;  // usable windows decode (the table validated the same bytes)
  sframe_source source;
  source.bytes = w.sframe;
  source.address = w.record.sframe_address;
  source.where = "section of window " + std::to_string(w.record.window_id) + " (generation " +
                 std::to_string(w.record.generation) + ")";
  source.function_symbols = names.names();  // escaped by render_sframe_text
  std::printf("\n%s", render_sframe_text("process " + std::to_string(pid), source, *d).c_str());
}

// What --pid and --perf-map name.
struct target_info {
  pid_t given = 0;    // as given: a thread id is allowed
  pid_t process = 0;  // its thread group
  perf_map_names names;
};

uint64_t max_memory(const parsed_args& a) {
  return a.whole("max-memory", default_max_memory_mib << 20);
}

// A usage error sets `bad_usage`. The process's own perf map is its file: read under the rules
// of docs/cli.md ("Reading hostile processes"), its names charged to `budget`.
result<target_info> resolve_target(const parsed_args& a, std::string& bad_usage,
                                   toolkit::memory_budget* budget) {
  const auto pid = pid_option(a, &bad_usage);
  if (!pid) return error(errc::invalid_argument, bad_usage);
  if (auto f = a.value("perf-map"); f && f->empty()) {
    bad_usage = "--perf-map: empty file name";
    return error(errc::invalid_argument, bad_usage);
  }
  const uint64_t max_file = a.whole("max-file", perf_map_names::default_max_bytes);
  const pid_t process = process_of(*pid);
  if (auto f = a.value("perf-map")) {
    if (auto ok = check_perf_map_file(*f); !ok) return std::move(ok).error();
    return target_info{*pid, process, perf_map_names(*f, std::nullopt, budget, max_file)};
  }
  // Owned by the process's user, as perf requires (a root process's may be any root file).
  const uid_t owner = process_owner(process).value_or(0);
  return target_info{
      *pid, process,
      perf_map_names(perf_map_path(process, live_task(process, *pid)), owner, budget, max_file)};
}

// Why names are missing, said once on stderr: a warning when a limit left names out (the run then
// ends with exit_input_cut), a note when the file was refused or is not there.
void report_names_problem(const std::string& program, const perf_map_names& names) {
  static std::string said;
  if (names.problem().empty() || names.problem() == said) return;
  said = names.problem();
  std::fprintf(stderr, "%s: %s: %s\n", program.c_str(), names.cut() ? "warning" : "note",
               toolkit::terminal_text(said).c_str());
}

// Functions of live windows the perf map does not name while the process's perf map publisher is
// active: its records are batched by default and reach the file up to its flush latency after
// the registry (docs/publishers.md#durability). Said once on stderr, so that an empty name
// column right after a publish is not taken for a runtime that names nothing.
void report_names_pending(const std::string& program, const std::vector<loaded_window>& windows,
                          const perf_map_names& names,
                          const std::vector<remote::publisher_record>& publishers) {
  const bool writing = std::any_of(publishers.begin(), publishers.end(), [](const auto& p) {
    return p.publisher == static_cast<uint32_t>(jitunwind::publisher::perfmap) &&
           p.state == static_cast<uint32_t>(jitunwind::publisher_state::active);
  });
  if (!writing) return;
  size_t pending = 0;
  for (const loaded_window& w : windows)
    if (w.record.state == remote::window_state::live)
      for (const function_desc& f : functions_of(w)) pending += !names.names().contains(f.start);
  if (pending == 0) return;
  std::fprintf(stderr,
               "%s: note: %s of live windows not in the perf map (yet): a perf map written in "
               "batches (the default) gets its lines up to JITUNWIND_FLUSH_MS (10 ms by default) "
               "after a publish; list again to see their names\n",
               program.c_str(), count_text(pending, "function").c_str());
}

// `status`, or exit_input_cut when it is exit_ok and a limit left part of the target's data out
// (the memory budget refused something, or the perf map's names were cut; input_cuts.hpp).
int status_after_cuts(int status, const toolkit::memory_budget& budget,
                      const perf_map_names& names, bool names_used) {
  if (status != exit_ok) return status;
  return budget.refusals() != 0 || (names_used && names.cut()) ? toolkit::exit_input_cut : status;
}

// A publisher as session::status() words it in the process: "perfmap (session 1): active, writing
// /tmp/perf-12.map; 2 warnings, the last: ...". The texts are the process's: escaped.
std::string publisher_line(const remote::publisher_record& p) {
  std::string s = remote::publisher_name(p.publisher) + " (session " + std::to_string(p.session) +
                  "): " + remote::publisher_state_name(p.state);
  if (!p.message.empty()) s += ", " + toolkit::terminal_text(p.message);
  if (p.warnings != 0)
    s += "; " + count_text(p.warnings, "warning") +
         ", the last: " + toolkit::terminal_text(p.last_warning);
  return s;
}

json publisher_json(const remote::publisher_record& p) {
  return {{"registry", p.registry_address},
          {"session", p.session},
          {"publisher", remote::publisher_name(p.publisher)},
          {"state", remote::publisher_state_name(p.state)},
          {"message", p.message},
          {"warnings", p.warnings},
          {"last_warning", p.last_warning}};
}

json skipped_json(const remote::skipped_slot& k) {
  return {{"registry", k.registry_address},
          {"slot", k.slot},
          {"reason", k.reason},
          {"entries", k.entries}};
}

std::string skipped_line(const remote::skipped_slot& k) {
  return "slot " + std::to_string(k.slot) + " SKIPPED: " + toolkit::terminal_text(k.reason);
}

// The registries, read through a live thread: a main thread that ended by pthread_exit is a
// zombie whose /proc files show no memory, while the process goes on.
result<remote::registry_reader> open_reader(const target_info& t) {
  const pid_t task = live_task(t.process, t.given);
  remote::read_options options;
  options.only_used_sframe = true;  // a claimed size over untouched memory costs its header
  return remote::registry_reader::open(task != 0 ? task : t.given, options);
}

// A window that changed while it was read (the process republished or freed it meanwhile) is
// read again with the whole registry, a few times: `list` reports one state, not a race.
result<std::vector<loaded_window>> load_settled(const remote::registry_reader& reader,
                                                pid_t process, toolkit::memory_budget* budget,
                                                std::vector<remote::skipped_slot>& skipped) {
  for (int round = 0;; ++round) {
    auto loaded = load_windows(reader, std::nullopt, process, budget, &skipped);
    if (!loaded || round == 5) return loaded;
    if (std::none_of(loaded->begin(), loaded->end(),
                     [](const loaded_window& w) { return w.changed; }))
      return loaded;
  }
}

int run_list(const std::string& program, const parsed_args& a) {
  std::string bad;
  if (a.flag("rows") && a.flag("json"))
    return report(program, "--rows is a text listing: it cannot go with --json", exit_usage);
  toolkit::memory_budget budget(max_memory(a), "raise it with --max-memory");
  auto target = resolve_target(a, bad, &budget);
  if (!target)
    return report(program, target.error().message(), bad.empty() ? exit_failure : exit_usage);
  auto reader = open_reader(*target);
  if (!reader) return report(program, reader.error().message(), exit_failure);
  std::vector<remote::skipped_slot> skipped;
  auto loaded = load_settled(*reader, target->process, &budget, skipped);
  if (!loaded) return report(program, loaded.error().message(), exit_failure);
  // What the process's sessions say about their publishers (an older SDK: nothing).
  auto publishers = reader->read_publishers();
  if (!publishers) return report(program, publishers.error().message(), exit_failure);
  if (a.flag("functions") || a.flag("rows")) {
    target->names.update();
    report_names_problem(program, target->names);
  }
  std::vector<loaded_window> windows;
  for (loaded_window& w : *loaded)
    if (!a.flag("live") || w.record.state == remote::window_state::live)
      windows.push_back(std::move(w));

  size_t live = 0, functions = 0, unusable = 0;
  for (const loaded_window& w : windows) {
    live += w.record.state == remote::window_state::live;
    functions += function_count(w);
    unusable += !w.why.empty() && !w.changed;
  }
  uint64_t skipped_entries = 0;  // one skipped_slot may stand for many ("and the later ones")
  for (const remote::skipped_slot& k : skipped) skipped_entries += k.entries;
  unusable += skipped_entries;
  const auto& registries = reader->registries();
  if (a.flag("json")) {
    json doc;
    doc["pid"] = target->process;
    json regs = json::array();
    for (const remote::registry_location& r : registries)
      regs.push_back({{"address", r.address},
                      {"object", r.object_path},
                      {"symbol_table", symbol_table_text(r.found_in)}});
    doc["registries"] = std::move(regs);
    json ws = json::array();
    for (const loaded_window& w : windows)
      ws.push_back(window_json(w, a.flag("functions") ? &target->names : nullptr));
    doc["windows"] = std::move(ws);
    json sk = json::array();
    for (const remote::skipped_slot& k : skipped) sk.push_back(skipped_json(k));
    doc["skipped"] = std::move(sk);
    json ps = json::array();
    for (const remote::publisher_record& p : publishers->publishers)
      ps.push_back(publisher_json(p));
    doc["publishers"] = std::move(ps);
    doc["publishers_skipped"] = publishers->skipped;
    doc["summary"] = {
        {"windows", windows.size()}, {"live", live},         {"retired", windows.size() - live},
        {"functions", functions},    {"unusable", unusable}, {"skipped", skipped_entries}};
    std::printf("%s\n", dump_text(doc, 2).c_str());
  } else {
    std::printf("process %d: %s (%zu live, %zu retired), %s, %zu unusable", target->process,
                count_text(windows.size(), "window").c_str(), live, windows.size() - live,
                count_text(functions, "function").c_str(), unusable);
    if (!skipped.empty())
      std::printf(" (%llu registry %s skipped)", static_cast<unsigned long long>(skipped_entries),
                  skipped_entries == 1 ? "entry" : "entries");
    std::printf("\n");
    for (const remote::registry_location& r : registries) {
      std::printf("\nregistry %s in %s (%s)\n", hex_text(r.address).c_str(),
                  toolkit::terminal_text(r.object_path).c_str(), symbol_table_text(r.found_in));
      for (const remote::publisher_record& p : publishers->publishers)
        if (p.registry_address == r.address) std::printf("  %s\n", publisher_line(p).c_str());
      for (const loaded_window& w : windows) {
        if (w.record.registry_address != r.address) continue;
        std::printf("  %s\n", window_line(w).c_str());
        if (a.flag("functions")) print_functions(w, target->names, "    ");
      }
      for (const remote::skipped_slot& k : skipped)
        if (k.registry_address == r.address) std::printf("  %s\n", skipped_line(k).c_str());
    }
    for (const std::string& why : publishers->skipped)
      std::printf("publisher status SKIPPED: %s\n", toolkit::terminal_text(why).c_str());
    if (a.flag("rows"))
      for (const loaded_window& w : windows)
        if (w.table) print_rows(target->process, w, target->names);
  }
  if (a.flag("functions") || a.flag("rows"))
    report_names_pending(program, windows, target->names, publishers->publishers);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    return report(program, std::string("cannot write the output: ") + std::strerror(errno),
                  exit_failure);
  return status_after_cuts(unusable == 0 ? exit_ok : exit_failure, budget, target->names,
                           a.flag("functions") || a.flag("rows"));
}

// ---- watch ----

// A window across polls: one window of one registry. Its generation tells whether its contents
// changed (every update of a window gets a new one).
using window_key = std::pair<uint64_t, uint64_t>;  // registry, id
struct seen_window {
  uint64_t generation = 0;
  remote::window_state state = remote::window_state::live;
};

struct watch_state {
  std::map<window_key, seen_window> seen;
  std::set<std::tuple<uint64_t, uint32_t, std::string>> skipped;  // registry, slot, reason
  uint64_t present = 0, published = 0, updated = 0, retired = 0, freed = 0, unusable = 0;
  uint64_t skips = 0;
};

class event_printer {
 public:
  event_printer(bool as_json, bool functions, const perf_map_names& names)
      : json_(as_json), functions_(functions), names_(names) {}
  /// With several registries (copies of the SDK) window ids repeat: lines then say whose.
  void name_registries(bool on) { name_registry_ = on; }

  void window(double t, const char* event, const loaded_window& w) {
    if (json_) {
      json j{{"time", t}, {"event", event}};
      j.update(window_json(w, functions_ ? &names_ : nullptr));
      std::printf("%s\n", dump_text(j).c_str());
    } else {
      std::printf("%+9.3fs %-9s %s%s\n", t, event, registry_text(w.record.registry_address).c_str(),
                  window_line(w).c_str());
      if (functions_ && std::string_view(event) != "retired")
        print_functions(w, names_, "            ");
    }
  }

  void skipped(double t, const remote::skipped_slot& k) {
    if (json_) {
      json j{{"time", t}, {"event", "skipped"}};
      j.update(skipped_json(k));
      std::printf("%s\n", dump_text(j).c_str());
    } else {
      std::printf("%+9.3fs %-9s %s%s\n", t, "skipped", registry_text(k.registry_address).c_str(),
                  skipped_line(k).c_str());
    }
  }

  void freed(double t, const window_key& k, uint64_t generation) {
    if (json_) {
      std::printf("%s\n", dump_text(json{{"time", t},
                                         {"event", "freed"},
                                         {"registry", k.first},
                                         {"id", k.second},
                                         {"generation", generation}})
                              .c_str());
    } else {
      std::printf("%+9.3fs %-9s %swindow %" PRIu64 " (generation %" PRIu64 ")\n", t, "freed",
                  registry_text(k.first).c_str(), k.second, generation);
    }
  }

 private:
  std::string registry_text(uint64_t address) const {
    return name_registry_ ? "registry " + hex_text(address) + ": " : std::string();
  }
  bool json_, functions_, name_registry_ = false;
  const perf_map_names& names_;
};

// Everything seen is gone (the process exec'd another image, or unloaded the SDK).
void report_all_freed(double t, watch_state& st, event_printer& out) {
  for (const auto& [k, old] : st.seen) {
    ++st.freed;
    out.freed(t, k, old.generation);
  }
  st.seen.clear();
}

// Compares a new snapshot with what was seen and prints the differences: windows gone first,
// then the others in registry and id order (the order of changes within one poll is unknown).
void report_changes(double t, const std::vector<loaded_window>& now, watch_state& st,
                    event_printer& out, bool first) {
  using remote::window_state;
  std::map<window_key, const loaded_window*> next;
  std::set<window_key> listed;
  for (const loaded_window& w : now) {
    const window_key k{w.record.registry_address, w.record.window_id};
    listed.insert(k);
    // A window that changed while it was read is left for the next poll, which sees what it
    // became; until then it keeps what was seen of it.
    if (!w.changed) next[k] = &w;
  }
  std::map<window_key, seen_window> seen;
  for (const auto& [k, old] : st.seen) {
    const bool still_listed = listed.count(k) != 0;
    if (next.count(k) == 0 && still_listed) {
      seen[k] = old;  // changed while read: nothing to say yet
    } else if (!still_listed) {
      ++st.freed;
      out.freed(t, k, old.generation);
    }
  }
  for (const auto& [k, w] : next) {
    const remote::window_record& r = w->record;
    seen[k] = {r.generation, r.state};
    auto it = st.seen.find(k);
    const char* event = nullptr;
    if (it == st.seen.end()) {
      event = first ? "present" : r.state == window_state::live ? "published" : "retired";
      ++(first ? st.present : r.state == window_state::live ? st.published : st.retired);
    } else if (it->second.generation == r.generation) {
      // Only retirement changes a window without a new generation.
      if (it->second.state == r.state || r.state != window_state::retired) continue;
      event = "retired";
      ++st.retired;
      out.window(t, event, *w);
      continue;  // its usability was counted when this generation was announced
    } else if (it->second.state == window_state::retired) {
      // A retired window is not republished: it was freed and its id reused in between.
      ++st.freed;
      out.freed(t, k, it->second.generation);
      event = r.state == window_state::live ? "published" : "retired";
      ++(r.state == window_state::live ? st.published : st.retired);
    } else {
      event = r.state == window_state::live ? "updated" : "retired";
      ++(r.state == window_state::live ? st.updated : st.retired);
    }
    st.unusable += !w->why.empty();
    out.window(t, event, *w);
  }
  st.seen = std::move(seen);
}

// Registry entries skipped that were not skipped (for that reason) at the previous read.
void report_skipped(double t, const std::vector<remote::skipped_slot>& now, watch_state& st,
                    event_printer& out) {
  std::set<std::tuple<uint64_t, uint32_t, std::string>> next;
  for (const remote::skipped_slot& k : now) {
    auto key = std::make_tuple(k.registry_address, k.slot, k.reason);
    if (st.skipped.count(key) == 0) {
      st.skips += k.entries;
      out.skipped(t, k);
    }
    next.insert(std::move(key));
  }
  st.skipped = std::move(next);
}

// True if standard output can no longer be written (a pipe whose reader left: `| head`), so a
// quiet process does not keep the command running with nobody reading.
bool output_closed() {
  pollfd p{1, 0, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

// The time of a watch: how long it has run, whether --seconds is up, and the pause between two
// polls, slept in short slices so that Ctrl-C, the time limit and a closed output end the
// watch promptly whatever the interval.
class watch_clock {
 public:
  using clock = std::chrono::steady_clock;
  watch_clock(double interval_s, double limit_s)
      : interval_(
            std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(interval_s))),
        limit_s_(limit_s) {}
  double elapsed() const { return std::chrono::duration<double>(clock::now() - start_).count(); }
  bool time_is_up() const { return limit_s_ != 0 && elapsed() >= limit_s_; }
  void pause() const {
    const auto wake = clock::now() + interval_;
    while (!stop_watching && clock::now() < wake && !time_is_up() && !output_closed())
      std::this_thread::sleep_for(
          std::min<clock::duration>(std::chrono::milliseconds(20), wake - clock::now()));
  }

 private:
  const clock::time_point start_ = clock::now();
  const clock::duration interval_;
  const double limit_s_;
};

// Follows one process's registries poll by poll: finds them (again after an exec), reads a
// snapshot whenever the change counter moved, and prints what changed.
class registry_watch {
 public:
  registry_watch(const std::string& program, target_info& target, bool as_json, bool functions,
                 toolkit::memory_budget& budget, const watch_clock& time)
      : program_(program),
        target_(target),
        functions_(functions),
        budget_(budget),
        time_(time),
        out_(as_json, functions, target.names) {}

  /// Why the watch ends before this poll, or nothing to go on.
  std::optional<std::string> stop_reason() const {
    if (stop_watching) return "interrupted";
    if (output_closed()) return "the output was closed";
    if (time_.time_is_up()) return "time limit";
    if (!process_running(target_.process)) return "the process exited";
    return std::nullopt;
  }

  /// One poll. False when the watch ends (`ended`, and `failure` if it failed).
  bool poll() {
    if (!reader_ && !connect()) return failure.empty();
    auto count = reader_->change_count();
    std::optional<std::vector<loaded_window>> now;
    std::vector<remote::skipped_slot> skipped;
    if (count && *count != seen_count_) {
      auto loaded = load_windows(*reader_, std::nullopt, target_.process, &budget_, &skipped);
      if (loaded)
        now = std::move(loaded).value();
      else
        count = std::move(loaded).error();
    }
    if (!count) {
      // Look for the registries again at the next poll (the process may have exec'd another
      // image); 20 failed reads in a row, though, are a registry that cannot be read.
      reader_.reset();
      return !failed_again(count.error());
    }
    errors_in_a_row_ = 0;
    if (now) return print(*now, skipped, *count);
    return true;
  }

  const watch_state& state() const { return st_; }
  std::string ended = "interrupted";
  std::string failure;

 private:
  // Opens the registries: false while the process has none (yet, or after an exec into an image
  // without the SDK: what was seen of the old image is then gone; waiting is not an error).
  bool connect() {
    auto opened = open_reader(target_);
    if (!opened) {
      if (opened.error().code() != errc::not_found) {
        failed_again(opened.error());
        return false;
      }
      if (!said_waiting_)
        std::fprintf(stderr, "%s: %s; waiting for the process to load the jitunwind SDK\n",
                     program_.c_str(), opened.error().message().c_str());
      said_waiting_ = true;
      errors_in_a_row_ = 0;
      report_all_freed(time_.elapsed(), st_, out_);
      std::fflush(stdout);
      return false;
    }
    std::vector<std::pair<uint64_t, std::string>> now_registries;
    for (const remote::registry_location& r : opened->registries())
      now_registries.emplace_back(r.address, r.object_path);
    // Other registries: a new image (exec). The same ones: a read that failed for a moment.
    if (now_registries != registries_) report_all_freed(time_.elapsed(), st_, out_);
    registries_ = std::move(now_registries);
    out_.name_registries(registries_.size() > 1);
    reader_ = std::move(opened).value();
    said_waiting_ = false;
    seen_count_.reset();
    return true;
  }

  // Counts a failed open or read; true (the watch has failed) at the 20th in a row.
  bool failed_again(const error& e) {
    if (++errors_in_a_row_ < 20) return false;
    failure = e.message();
    ended = "failed";
    return true;
  }

  // Prints what changed in snapshot `now`; false if the output is gone.
  bool print(const std::vector<loaded_window>& now,
             const std::vector<remote::skipped_slot>& skipped, uint64_t count) {
    if (functions_) {
      target_.names.update();
      report_names_problem(program_, target_.names);
    }
    report_changes(time_.elapsed(), now, st_, out_, first_);
    report_skipped(time_.elapsed(), skipped, st_, out_);
    first_ = false;
    // A window that changed while it was read is read again at the next poll even if nothing
    // else changes.
    seen_count_.reset();
    if (std::none_of(now.begin(), now.end(), [](const loaded_window& w) { return w.changed; }))
      seen_count_ = count;
    std::fflush(stdout);
    if (!std::ferror(stdout)) return true;
    ended = "the output was closed";
    return false;
  }

  const std::string& program_;
  target_info& target_;
  const bool functions_;
  toolkit::memory_budget& budget_;
  const watch_clock& time_;
  watch_state st_;
  event_printer out_;
  std::optional<remote::registry_reader> reader_;
  std::vector<std::pair<uint64_t, std::string>> registries_;  // of the last reader opened
  std::optional<uint64_t> seen_count_;  // of the last snapshot read whole; none: read again
  unsigned errors_in_a_row_ = 0;
  bool first_ = true, said_waiting_ = false;
};

void stop_watching_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_watching = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int run_watch(const std::string& program, const parsed_args& a) {
  stop_watching_on_signals();
  const watch_clock time(a.decimal("interval-ms", 0.1), a.decimal("seconds", 0));
  toolkit::memory_budget budget(max_memory(a), "raise it with --max-memory");
  std::string bad;
  auto target = resolve_target(a, bad, &budget);
  if (!target)
    return report(program, target.error().message(), bad.empty() ? exit_failure : exit_usage);
  if (!process_running(target->process))
    return report(program, "pid " + std::to_string(target->given) + ": no such process",
                  exit_failure);

  registry_watch watch(program, *target, a.flag("json"), a.flag("functions"), budget, time);
  for (;; time.pause()) {
    if (auto why = watch.stop_reason()) {
      watch.ended = *why;
      break;
    }
    if (!watch.poll()) break;
  }
  const watch_state& st = watch.state();
  std::fprintf(stderr,
               "%s: %s after %.1f s: %" PRIu64 " present at the start, %" PRIu64
               " published, %" PRIu64 " updated, %" PRIu64 " retired, %" PRIu64 " freed, %" PRIu64
               " unusable, %" PRIu64 " registry entries skipped\n",
               program.c_str(), watch.ended.c_str(), time.elapsed(), st.present, st.published,
               st.updated, st.retired, st.freed, st.unusable, st.skips);
  if (!watch.failure.empty()) return report(program, watch.failure, exit_failure);
  return status_after_cuts(st.unusable == 0 && st.skips == 0 ? exit_ok : exit_failure, budget,
                           target->names, a.flag("functions"));
}

const command commands[] = {{&list_spec, &run_list}, {&watch_spec, &run_watch}};

void print_group_help(const std::string& program) {
  print_standard_group_help(
      program,
      "Inspect the code windows a running process has published through the jitunwind\n"
      "registry, from outside, as a profiler reads them.\n",
      commands);
}

}  // namespace

int windows_main(const invocation& inv) {
  return run_group(inv, commands, &print_group_help);
}

}  // namespace jitunwind::cli
