// `jitunwind windows`: what a running process has published through the jitunwind registry,
// seen from outside as a profiler sees it (list), and as it changes (watch).
#include <jitunwind/remote.h>

#include "cli.hpp"
#include "proc_files.hpp"
#include "sframe_input.hpp"
#include "sframe_text.hpp"
#include "window_tables.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
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
    "the reason. Function names come from the process's perf map (/tmp/perf-PID.map) when it "
    "writes one.";

const command_spec list_spec{
    "list",
    "",
    "Show the code windows a running process has published, and check their SFrame data.",
    std::string("Finds every jitunwind registry in process PID (one per copy of the SDK it has "
                "mapped) and lists its windows: id, generation, state (live, or retired: in its "
                "grace period), text range, SFrame section, ABI and number of functions.\n") +
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
     {"json", 0, "", "One JSON document instead of text (addresses as integers)."},
     {"perf-map", 0, "FILE", "Read names from FILE instead of /tmp/perf-PID.map."}},
    0,
    0,
    "jitunwind windows list -p 4242\n"
    "jitunwind windows list -p 4242 --functions --live\n"
    "jitunwind windows list -p 4242 --json | jq '.windows[] | select(.usable | not)'"};

const command_spec watch_spec{
    "watch",
    "",
    "Follow a running process's code windows as they are published, retired and freed.",
    std::string(
        "Prints the windows process PID has published, then one line per change: a window "
        "published (a new generation), retired, or freed (gone from the registry). The "
        "registry's change counter is polled every --interval-ms: changes between two polls are "
        "seen together (a window published and freed in between is not seen at all). Ends "
        "when the process exits, after --seconds, or on Ctrl-C, with a count of what was seen.\n") +
        reading_note +
        "\nExit status: 0 if every window seen was usable, 1 if one was not or the registry "
        "cannot be read, 2 for a bad command line.",
    {{"pid", 'p', "PID", "The process to follow (a thread id means its process). Required."},
     {"functions", 'f', "", "Also list the functions of each newly published window."},
     {"interval-ms", 0, "MS", "Poll the registry every MS milliseconds (default 100, 1 to 60000)."},
     {"seconds", 0, "S", "Stop after S seconds (default: until the process exits)."},
     {"json", 0, "", "One JSON object per line and event (JSON Lines), for jq and scripts."},
     {"perf-map", 0, "FILE", "Read names from FILE instead of /tmp/perf-PID.map."}},
    0,
    0,
    "jitunwind windows watch -p 4242\n"
    "jitunwind windows watch -p 4242 --json --seconds 10 > windows.jsonl"};

std::atomic<bool> stop_watching{false};

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
  return s + ", " + to_string(w.table->info().target) + ", " +
         count_text(function_count(w), "function");
}

void print_functions(const loaded_window& w, const perf_map_names& names, const char* indent) {
  for (const function_desc& f : functions_of(w)) {
    auto it = names.names().find(f.start);
    std::printf("%s%s  size %-6u %-8s %s\n", indent, hex_text(f.start).c_str(), f.size,
                count_text(f.rows.size(), "row").c_str(),
                it == names.names().end() ? "" : it->second.c_str());
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
  source.function_symbols = names.names();
  std::printf("\n%s", render_sframe_text("process " + std::to_string(pid), source, *d).c_str());
}

struct opened {
  pid_t process = 0;
  remote::registry_reader reader;
  perf_map_names names;
};

// The reader and the names for `--pid`; an error message on failure.
result<opened> open_target(const parsed_args& a, std::string& bad_usage) {
  const auto pid = pid_option(a, &bad_usage);
  if (!pid) return error(errc::invalid_argument, bad_usage);
  const pid_t process = process_of(*pid);
  auto reader = remote::registry_reader::open(process);
  if (!reader) return std::move(reader).error();
  perf_map_names names(a.value("perf-map").value_or(perf_map_path(process)));
  names.update();
  return opened{process, std::move(reader).value(), std::move(names)};
}

int run_list(const std::string& program, const parsed_args& a) {
  std::string bad;
  auto target = open_target(a, bad);
  if (!target)
    return report(program, target.error().message(), bad.empty() ? exit_failure : exit_usage);
  auto loaded = load_windows(target->reader, std::nullopt);
  if (!loaded) return report(program, loaded.error().message(), exit_failure);
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
  const auto& registries = target->reader.registries();
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
    doc["summary"] = {{"windows", windows.size()},
                      {"live", live},
                      {"retired", windows.size() - live},
                      {"functions", functions},
                      {"unusable", unusable}};
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    std::printf("process %d: %s (%zu live, %zu retired), %s, %zu unusable\n", target->process,
                count_text(windows.size(), "window").c_str(), live, windows.size() - live,
                count_text(functions, "function").c_str(), unusable);
    for (const remote::registry_location& r : registries) {
      std::printf("\nregistry %s in %s (%s)\n", hex_text(r.address).c_str(), r.object_path.c_str(),
                  symbol_table_text(r.found_in));
      for (const loaded_window& w : windows) {
        if (w.record.registry_address != r.address) continue;
        std::printf("  %s\n", window_line(w).c_str());
        if (a.flag("functions")) print_functions(w, target->names, "    ");
      }
    }
    if (a.flag("rows"))
      for (const loaded_window& w : windows)
        if (w.table) print_rows(target->process, w, target->names);
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    return report(program, std::string("cannot write the output: ") + std::strerror(errno),
                  exit_failure);
  return unusable == 0 ? exit_ok : exit_failure;
}

// ---- watch ----

// A window's identity across polls: the same generation of the same window of one registry.
using window_key = std::tuple<uint64_t, uint64_t, uint64_t>;  // registry, id, generation

window_key key_of(const remote::window_record& r) {
  return {r.registry_address, r.window_id, r.generation};
}

struct watch_state {
  std::map<window_key, remote::window_state> seen;
  uint64_t present = 0, published = 0, retired = 0, freed = 0, unusable = 0;
};

class event_printer {
 public:
  event_printer(bool as_json, bool functions, const perf_map_names& names)
      : json_(as_json), functions_(functions), names_(names) {}

  void window(double t, const char* event, const loaded_window& w) {
    if (json_) {
      json j{{"time", t}, {"event", event}};
      j.update(window_json(w, functions_ ? &names_ : nullptr));
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%+9.3fs %-9s %s\n", t, event, window_line(w).c_str());
      if (functions_ && std::string_view(event) != "retired")
        print_functions(w, names_, "            ");
    }
    std::fflush(stdout);
  }

  void freed(double t, const window_key& k) {
    const auto& [registry, id, generation] = k;
    if (json_) {
      std::printf("%s\n", json{{"time", t},
                               {"event", "freed"},
                               {"registry", registry},
                               {"id", id},
                               {"generation", generation}}
                              .dump()
                              .c_str());
    } else {
      std::printf("%+9.3fs %-9s window %" PRIu64 " (generation %" PRIu64 ")\n", t, "freed", id,
                  generation);
    }
    std::fflush(stdout);
  }

 private:
  bool json_, functions_;
  const perf_map_names& names_;
};

// Compares a new snapshot with what was seen and prints the differences: windows gone first,
// then windows retired, then new ones (the order within one poll is not known; this one reads
// as a window's life).
void report_changes(double t, const std::vector<loaded_window>& now, watch_state& st,
                    event_printer& out, bool first) {
  // A new window that changed while it was read is left for the next poll (which sees what
  // it became); a known one keeps its place.
  std::map<window_key, const loaded_window*> next;
  for (const loaded_window& w : now)
    if (!w.changed || st.seen.count(key_of(w.record)) != 0) next[key_of(w.record)] = &w;
  for (const auto& [k, state] : st.seen) {
    if (next.count(k) != 0) continue;
    ++st.freed;
    out.freed(t, k);
  }
  for (const auto& [k, w] : next) {
    auto it = st.seen.find(k);
    if (it == st.seen.end() || it->second == w->record.state ||
        w->record.state != remote::window_state::retired)
      continue;
    ++st.retired;
    out.window(t, "retired", *w);
  }
  for (const auto& [k, w] : next) {
    if (st.seen.count(k) != 0) continue;
    const bool live = w->record.state == remote::window_state::live;
    st.unusable += !w->why.empty();
    ++(first ? st.present : live ? st.published : st.retired);
    out.window(t, first ? "present" : live ? "published" : "retired", *w);
  }
  st.seen.clear();
  for (const auto& [k, w] : next) st.seen[k] = w->record.state;
}

int run_watch(const std::string& program, const parsed_args& a) {
  std::string bad;
  const auto interval = number_option(a, "interval-ms", 100, &bad, 60000);
  const auto seconds = number_option(a, "seconds", 0, &bad, 24 * 3600);
  if (!bad.empty()) return report(program, bad, exit_usage);
  if (*interval == 0) return report(program, "--interval-ms: must be at least 1", exit_usage);
  auto target = open_target(a, bad);
  if (!target)
    return report(program, target.error().message(), bad.empty() ? exit_failure : exit_usage);

  struct sigaction sa {};
  sa.sa_handler = [](int) { stop_watching = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  watch_state st;
  event_printer out(a.flag("json"), a.flag("functions"), target->names);
  std::optional<uint64_t> seen_count;
  std::string ended = "interrupted";
  bool first = true;
  for (;;) {
    if (stop_watching) break;
    if (*seconds != 0 && elapsed() >= static_cast<double>(*seconds)) {
      ended = "time limit";
      break;
    }
    auto count = target->reader.change_count();
    if (!count) {
      if (!process_running(target->process)) {
        ended = "the process exited";
        break;
      }
      return report(program, count.error().message(), exit_failure);
    }
    if (*count != seen_count) {
      auto now = load_windows(target->reader, std::nullopt);
      if (!now) {
        if (!process_running(target->process)) {
          ended = "the process exited";
          break;
        }
        return report(program, now.error().message(), exit_failure);
      }
      target->names.update();
      report_changes(elapsed(), *now, st, out, first);
      first = false;
      seen_count = *count;
      if (std::ferror(stdout)) {  // e.g. `| head` has read enough
        ended = "the output was closed";
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
  }
  std::fprintf(stderr,
               "%s: %s after %.1f s: %" PRIu64 " present at the start, %" PRIu64
               " published, %" PRIu64 " retired, %" PRIu64 " freed, %" PRIu64 " unusable\n",
               program.c_str(), ended.c_str(), elapsed(), st.present, st.published, st.retired,
               st.freed, st.unusable);
  return st.unusable == 0 ? exit_ok : exit_failure;
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
