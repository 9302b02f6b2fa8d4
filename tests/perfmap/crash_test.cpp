// What `kill -9` loses in each durability mode, through a session (tests/jitdump/testjit
// --session --stress: two threads publish small functions through their own windows until the
// process kills itself), 100 runs per mode; docs/publishers.md#what-a-crash-loses.
//
//   every mode: the perf map holds whole lines only (none crosses a page boundary, where the
//               kernel can stop a write), the jitdump parses (a record cut at a page boundary is
//               a truncated tail, which perf skips too), and what each file holds is, for every
//               thread, its first functions in order (records reach the files in publish order);
//   sync:       nothing whose publish returned is missing (testjit counts those in a shared
//               mapping that survives the kill);
//   batched:    what is missing is at most what fits in the buffer being filled and the one
//               being written (2 x (flush_bytes + a publish)).
// Under perf record, perf inject --jit accepts all 100 dumps of a mode and makes one object per
// complete CODE_LOAD.
#include <jitunwind/window.h>

#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"

#include "support/perf_map_text.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

using namespace jitunwind;
using namespace jitunwind::test;
namespace jd = jitunwind::detail::jitdump;

namespace {

constexpr int runs = 100;
constexpr int threads = 2;
constexpr size_t flush_bytes = 64 * 1024;  // the session's default

std::string testjit() {
  return binary_path("tests/jitdump/testjit");
}

// Run i: killed 5..64 ms after the threads start, publishing 1 or 8 functions at a time.
int kill_after_ms(int i) {
  return 5 + (i * 37) % 60;
}
int batch_of(int i) {
  return i % 2 == 0 ? 1 : 8;
}

// "stress_t<t>_fn<i>_with_a_longer_name" -> (t, i); false for anything else.
bool parse_name(std::string_view name, int& t, uint64_t& i) {
  constexpr std::string_view prefix = "stress_t", middle = "_fn", suffix = "_with_a_longer_name";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  name.remove_prefix(prefix.size());
  name.remove_suffix(suffix.size());
  if (name.size() < middle.size() + 2 || name[0] < '0' || name[0] >= '0' + threads) return false;
  t = name[0] - '0';
  name.remove_prefix(1);
  if (!name.starts_with(middle)) return false;
  name.remove_prefix(middle.size());
  i = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    i = i * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

// Per thread: how many of its first functions a file holds, in order; `problem` otherwise.
struct prefixes {
  uint64_t count[threads] = {};
  std::string problem;
  void add(std::string_view name) {
    int t = 0;
    uint64_t i = 0;
    if (!problem.empty()) return;
    if (!parse_name(name, t, i)) {
      problem = "unexpected name '" + std::string(name) + "'";
    } else if (i != count[t]) {
      problem = "thread " + std::to_string(t) + ": function " + std::to_string(i) +
                " where function " + std::to_string(count[t]) + " was due";
    } else {
      ++count[t];
    }
  }
};

struct run_files {
  std::string map, dump, progress;
};

run_files files_in(const std::string& dir) {
  run_files f;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("perf-")) f.map = e.path();
    if (name.starts_with("jit-") && name.ends_with(".dump")) f.dump = e.path();
  }
  f.progress = dir + "/progress";
  return f;
}

std::vector<uint64_t> read_progress(const std::string& path) {
  const std::string bytes = read_file(path);
  std::vector<uint64_t> out(threads, 0);
  if (bytes.size() == sizeof(uint64_t) * threads)
    std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

struct totals {
  uint64_t published = 0, in_map = 0, in_dump = 0;
  int runs_losing = 0, dumps_cut = 0;
  uint64_t max_lost = 0;
};

// Checks one killed run's files; returns what is wrong (empty: nothing).
std::string check_run(const run_files& f, durability mode, int batch, totals& sum) {
  if (f.map.empty() || f.dump.empty()) return "no perf map or no jitdump";
  const perf_map_text text = parse_perf_map_text(read_file(f.map));
  if (!text.problem.empty()) return "perf map: " + text.problem;
  prefixes map;
  for (const std::string& line : text.lines) {
    // "START 10 NAME"
    const size_t a = line.find(' ');
    if (a == std::string::npos || line.compare(a, 4, " 10 ") != 0)
      return "perf map line '" + line + "'";
    map.add(std::string_view(line).substr(a + 4));
  }
  if (!map.problem.empty()) return "perf map: " + map.problem;

  const std::string bytes = read_file(f.dump);
  auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!d) return "jitdump: " + d.error().message();
  prefixes dump;
  for (size_t r = 0; r < d->records.size(); ++r) {
    if (d->records[r].id != jd::code_load) continue;
    if (r == 0 || d->records[r - 1].id != jd::code_unwinding_info)
      return "jitdump: CODE_LOAD " + std::to_string(r) + " without its CODE_UNWINDING_INFO";
    dump.add(d->records[r].name);
  }
  if (!dump.problem.empty()) return "jitdump: " + dump.problem;
  if (d->truncated_tail != 0) ++sum.dumps_cut;

  const std::vector<uint64_t> published = read_progress(f.progress);
  uint64_t lost_lines = 0, lost_loads = 0;
  for (int t = 0; t < threads; ++t) {
    const uint64_t p = published[t];
    // A publish may have returned without its count being stored yet: one batch more.
    if (map.count[t] > p + batch || dump.count[t] > p + batch)
      return "thread " + std::to_string(t) + ": more functions in the files than published (" +
             std::to_string(map.count[t]) + ", " + std::to_string(dump.count[t]) + " of " +
             std::to_string(p) + ")";
    if (mode == durability::sync && (map.count[t] < p || dump.count[t] < p))
      return "sync: thread " + std::to_string(t) + " published " + std::to_string(p) +
             " functions; the perf map has " + std::to_string(map.count[t]) + ", the jitdump " +
             std::to_string(dump.count[t]);
    lost_lines += p > map.count[t] ? p - map.count[t] : 0;
    lost_loads += p > dump.count[t] ? p - dump.count[t] : 0;
    sum.published += p;
    sum.in_map += map.count[t];
    sum.in_dump += dump.count[t];
  }
  // Batched: at most the buffer being filled and the one being written, each flush_bytes plus
  // one publish (8 functions), are lost; a line is at least 40 bytes, the records of a function
  // at least 150.
  const uint64_t most = 2 * (flush_bytes + 8 * 400);
  if (lost_lines * 40 > most || lost_loads * 150 > most)
    return "lost " + std::to_string(lost_lines) + " perf map lines and " +
           std::to_string(lost_loads) + " jitdump loads, more than two buffers";
  if (lost_lines + lost_loads > 0) ++sum.runs_losing;
  sum.max_lost = std::max(sum.max_lost, std::max(lost_lines, lost_loads));
  return {};
}

std::vector<std::string> stress_command(const std::string& dir, durability mode, int i,
                                        bool paced) {
  std::vector<std::string> argv = {testjit(),         "--session",
                                   "--stress",        std::to_string(threads),
                                   "--kill-after-ms", std::to_string(kill_after_ms(i)),
                                   "--batch",         std::to_string(batch_of(i)),
                                   "--jitdump",       dir,
                                   "--durability",    to_string(mode)};
  if (paced) {
    argv.insert(argv.end(), {"--stress-pause-us", "1000"});
  } else {
    argv.insert(argv.end(), {"--perfmap", dir, "--progress", dir + "/progress"});
  }
  return argv;
}

void hundred_kills(durability mode) {
  temp_dir dir;
  totals sum;
  for (int i = 0; i < runs; ++i) {
    const std::string run_dir = dir / ("run" + std::to_string(i));
    std::filesystem::create_directory(run_dir);
    const run_result r = run(stress_command(run_dir, mode, i, false));
    INFO("run " << i << " (" << to_string(mode) << ", kill after " << kill_after_ms(i)
                << " ms, batch " << batch_of(i) << "): " << r.out << r.err);
    REQUIRE(r.exit_code == 128 + 9);
    const std::string problem = check_run(files_in(run_dir), mode, batch_of(i), sum);
    INFO(problem);
    REQUIRE(problem.empty());
    std::filesystem::remove_all(run_dir);
  }
  // Not asserted: what the runs lost (batched) and how often a write was cut.
  WARN(runs << " kill -9 runs, " << to_string(mode) << ": " << sum.published
            << " functions published, " << sum.in_map << " in perf maps, " << sum.in_dump
            << " in jitdumps; " << sum.runs_losing << " runs lost some (at most " << sum.max_lost
            << " functions); " << sum.dumps_cut << " dumps end in a cut record");
  CHECK(sum.published > runs * 100);  // the kills did land during heavy publishing
  if (mode == durability::sync) CHECK(sum.runs_losing == 0);
}

// Under perf record: every dump of a mode, injected at once.
void hundred_kills_injected(durability mode) {
  temp_dir dir;
  std::ostringstream script;
  for (int i = 0; i < runs; ++i) {
    for (const std::string& a : stress_command(dir.path(), mode, i, true)) script << a << ' ';
    script << ">/dev/null\n";
  }
  REQUIRE(write_file(dir / "runs.sh", script.str()));
  const std::string data = dir / "perf.data", jitted = dir / "perf.jit.data";
  const run_result rec = run({"perf", "record", "-q", "-k", "1", "-e", "cpu-clock", "-F", "99",
                              "-o", data, "--", "/bin/sh", dir / "runs.sh"},
                             {}, std::chrono::seconds(300));
  INFO(rec.out << rec.err);
  REQUIRE(std::filesystem::exists(data));
  size_t dumps = 0, loads = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("jit-")) continue;
    ++dumps;
    const std::string bytes = read_file(e.path());
    auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    INFO(name << ": " << (d.ok() ? "" : d.error().message()));
    REQUIRE(d.ok());
    for (const auto& r : d->records) loads += r.id == jd::code_load;
  }
  CHECK(dumps == runs);
  CHECK(loads > runs * 5);
  const run_result inj =
      run({"perf", "inject", "--jit", "-i", data, "-o", jitted}, {}, std::chrono::seconds(300));
  INFO(inj.out << inj.err);
  REQUIRE(inj.exit_code == 0);
  size_t objects = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    objects += e.path().filename().string().starts_with("jitted-");
  INFO(dumps << " dumps, " << loads << " complete CODE_LOADs, " << objects << " jitted objects");
  CHECK(objects == loads);
  CHECK(run({"perf", "report", "-i", jitted, "--stdio"}).exit_code == 0);
}

}  // namespace

TEST_CASE("kill -9 x100, sync: whole perf map lines, parseable dumps, nothing published lost") {
  hundred_kills(durability::sync);
}

TEST_CASE("kill -9 x100, batched: whole lines, parseable dumps, only the buffered tail lost") {
  hundred_kills(durability::batched);
}

TEST_CASE("kill -9 x100 under perf record, sync: perf inject --jit accepts every dump") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  hundred_kills_injected(durability::sync);
}

TEST_CASE("kill -9 x100 under perf record, batched: perf inject --jit accepts every dump") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  hundred_kills_injected(durability::batched);
}
