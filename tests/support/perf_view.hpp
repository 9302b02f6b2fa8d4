// Test helper: what perf makes of a JIT program, sample by sample (docs/integrating.md, "What
// perf sees"). The program prints "pid N" and, whenever a new set of JIT functions starts
// running, "phase F0 F1 ... from T": F0 is called by native code, each calls the next, the last
// calls a native leaf (T: CLOCK_MONOTONIC seconds, the clock of `perf record -k 1`). A sample
// taken in phase P must show, innermost first, the native leaf (optional), then P's functions
// from the one it is in down to F0, then `main` further up.
#pragma once

#include "support/perf_script.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace jitunwind::test {

struct phase {
  std::vector<std::string> chain;  // outermost (called by native code) first
  double from = 0;
};

inline std::vector<phase> announced_phases(const std::string& out) {
  std::vector<phase> phases;
  static const std::regex line(R"(^phase (.*) from ([0-9.]+)$)");
  std::istringstream in(out);
  std::string text;
  while (std::getline(in, text)) {
    std::smatch m;
    if (!std::regex_match(text, m, line)) continue;
    phase p;
    std::istringstream names(m[1].str());
    for (std::string n; names >> n;) p.chain.push_back(n);
    p.from = std::stod(m[2]);
    phases.push_back(std::move(p));
  }
  return phases;
}

struct perf_sample {
  double time = 0;
  std::vector<std::string> frames;  // symbols, innermost first
};

/// `perf script -F time,ip,sym` output, one entry per sample.
inline std::vector<perf_sample> perf_samples(const std::string& out) {
  std::vector<perf_sample> samples;
  static const std::regex head(R"(^\s*(\d+\.\d+):\s*(.*)$)");
  static const std::regex frame(R"(^\s+[0-9a-f]+ (.*?)(\+0x[0-9a-f]+)?( \(.*\))?$)");
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, head)) {
      samples.push_back({std::stod(m[1]), {}});
      // Without call chains the ip and symbol follow the time on the same line.
      const std::string as_frame = " " + m[2].str();
      std::smatch f;
      if (m[2].length() != 0 && std::regex_match(as_frame, f, frame))
        samples.back().frames.push_back(f[1]);
    } else if (!samples.empty() && std::regex_match(line, m, frame)) {
      samples.back().frames.push_back(m[1]);
    }
  }
  return samples;
}

/// Of the samples that ran JIT code (a JIT function, an unnamed frame or a native leaf as the
/// innermost frame): those whose JIT frames all carry names of the functions running at the
/// sample's time, and those whose stack is whole: every JIT frame expected, then `main`.
struct perf_view {
  size_t samples = 0, named = 0, to_main = 0;
  double named_share() const { return samples ? double(named) / double(samples) : 0; }
  double main_share() const { return samples ? double(to_main) / double(samples) : 0; }
  std::string text() const {
    std::ostringstream o;
    o.precision(1);
    o << std::fixed << samples << " samples, named right " << 100 * named_share()
      << " %, whole to main " << 100 * main_share() << " %";
    return o.str();
  }
};

inline perf_view judge(const std::vector<perf_sample>& samples, const std::vector<phase>& phases,
                       const std::vector<std::string>& leaves) {
  perf_view v;
  std::set<std::string> jit_names = {"[unknown]"};
  for (const phase& p : phases) jit_names.insert(p.chain.begin(), p.chain.end());
  for (const perf_sample& s : samples) {
    const phase* live = nullptr;
    for (const phase& p : phases)
      if (p.from <= s.time) live = &p;
    if (live == nullptr || s.frames.empty()) continue;
    size_t at = 0;
    const bool in_leaf = std::find(leaves.begin(), leaves.end(), s.frames[0]) != leaves.end();
    if (in_leaf) at = 1;
    size_t end = at;
    while (end < s.frames.size() && jit_names.count(s.frames[end]) != 0) ++end;
    if (end == at && !in_leaf) continue;  // not in JIT code
    ++v.samples;
    if (end == at) continue;  // in the leaf, no JIT caller found
    const std::vector<std::string>& chain = live->chain;
    bool named = true;
    for (size_t i = at; i < end; ++i)
      named = named && std::find(chain.begin(), chain.end(), s.frames[i]) != chain.end();
    v.named += named;
    // Whole: the JIT frames are chain[k], ..., chain[0] (k = the last one if in the leaf).
    const size_t depth = end - at;
    bool whole = named && depth <= chain.size() && (!in_leaf || depth == chain.size());
    for (size_t i = 0; whole && i < depth; ++i) whole = s.frames[at + i] == chain[depth - 1 - i];
    whole = whole && std::find(s.frames.begin() + static_cast<ptrdiff_t>(end), s.frames.end(),
                               "main") != s.frames.end();
    v.to_main += whole;
  }
  return v;
}

/// jitwalk's folded stacks ("outermost;...;innermost COUNT") judged like perf's samples. They
/// carry no time: a stack's phase is the one whose chain has its innermost JIT name, or, for a
/// stack in the native leaf, `leaves[i]` for phase i (each phase calls a leaf of its own).
inline perf_view judge_folded(const std::string& folded, const std::vector<phase>& phases,
                              const std::vector<std::string>& leaves) {
  std::vector<perf_sample> samples;
  std::vector<double> times;
  std::istringstream in(folded);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    perf_sample s;
    std::istringstream frames(line.substr(0, sp));
    for (std::string f; std::getline(frames, f, ';');) s.frames.insert(s.frames.begin(), f);
    if (s.frames.empty()) continue;
    // The phase: by the leaf, else by the innermost frame of some chain.
    s.time = -1;
    for (size_t i = 0; i < leaves.size() && i < phases.size(); ++i)
      if (s.frames[0] == leaves[i]) s.time = phases[i].from;
    for (size_t f = 0; s.time < 0 && f < s.frames.size(); ++f)
      for (const phase& p : phases)
        if (s.time < 0 && std::find(p.chain.begin(), p.chain.end(), s.frames[f]) != p.chain.end())
          s.time = p.from;
    if (s.time < 0) continue;
    const uint64_t count = std::stoull(line.substr(sp + 1));
    for (uint64_t i = 0; i < count; ++i) samples.push_back(s);
  }
  return judge(samples, phases, leaves);
}

/// perf's two ways to see JIT code.
enum class perf_mode {
  perf_map,  ///< perf record -g (frame pointers), names from /tmp/perf-PID.map
  jitdump,   ///< perf record --call-graph dwarf, perf inject --jit, names and unwinding from it
};

inline const char* to_string(perf_mode m) {
  return m == perf_mode::perf_map ? "perf -g + perf map" : "perf dwarf + inject --jit";
}

struct perf_view_run {
  perf_view view;
  std::string program_out, program_err;
  std::vector<phase> phases;
};

/// Runs `tool` (perf record, jitwalk profile: ending in "--") over `command` with JITUNWIND_DIR
/// and JITDUMPDIR set to `dir` and `extra_env`; keeps what the program printed.
inline run_result run_under(std::vector<std::string> tool, const std::vector<std::string>& command,
                            const temp_dir& dir, const std::vector<std::string>& extra_env,
                            perf_view_run& r) {
  tool.insert(tool.end(), {"env", "JITUNWIND_DIR=" + dir.path(), "JITDUMPDIR=" + dir.path()});
  tool.insert(tool.end(), extra_env.begin(), extra_env.end());
  tool.insert(tool.end(), command.begin(), command.end());
  run_result rec = run(tool, {}, std::chrono::seconds(120));
  r.program_out = rec.out;
  r.program_err = rec.err;
  r.phases = announced_phases(rec.out);
  return rec;
}

/// Runs `command` (with JITUNWIND_DIR and JITDUMPDIR set to `dir`) under perf in `mode`, and
/// judges every sample. The perf map is copied to /tmp for perf script (perf reads maps only
/// there) and removed again; perf.data and the injected objects stay in `dir`.
inline perf_view_run perf_view_of(const std::vector<std::string>& command, perf_mode mode,
                                  const temp_dir& dir, const std::vector<std::string>& jit_callees,
                                  const std::vector<std::string>& extra_env = {}) {
  perf_view_run r;
  // 1000 Hz; DWARF mode copies 4 KiB of stack per sample: the programs' stacks from the leaf to
  // main take well under 1 KiB, and perf's unwinding of every sample is most of a run's time
  // (32 KiB under ASan: dwarf_call_graph).
  const std::string dwarf_stack = dwarf_call_graph(4096);
  std::vector<std::string> argv = {
      "perf", "record", "-q", "-k", "1", "-e", "cpu-clock", "-F", "1000", "-o", dir / "perf.data"};
  if (mode == perf_mode::perf_map) {
    argv.push_back("-g");
  } else {
    argv.insert(argv.end(), {"--call-graph", dwarf_stack});
  }
  argv.push_back("--");
  // The jitdump publisher is off by default (it costs every publication a write): asked for.
  std::vector<std::string> env = extra_env;
  if (mode == perf_mode::jitdump) env.push_back("JITUNWIND_PUBLISH=default,jitdump");
  const run_result rec = run_under(argv, command, dir, env, r);
  if (rec.exit_code != 0) return r;
  std::string data = dir / "perf.data";
  std::string copied;
  if (mode == perf_mode::jitdump) {
    const run_result inj = run({"perf", "inject", "--jit", "-i", data, "-o", dir / "perf.jit.data"},
                               {}, std::chrono::seconds(120));
    if (inj.exit_code != 0) {
      r.program_err += inj.err;
      return r;
    }
    data = dir / "perf.jit.data";
  } else {
    const int pid = printed_pid(rec.out);
    const std::string map = "/tmp/perf-" + std::to_string(pid) + ".map";
    if (pid > 0 && ::access(map.c_str(), F_OK) != 0 &&
        write_file(map, read_file(dir / ("perf-" + std::to_string(pid) + ".map"))))
      copied = map;
  }
  const run_result script =
      run({"perf", "script", "-i", data, "-F", "time,ip,sym"}, {}, std::chrono::seconds(120));
  if (!copied.empty()) ::unlink(copied.c_str());
  r.view = judge(perf_samples(script.out), r.phases, jit_callees);
  return r;
}

/// `jitwalk profile` of `command` (JITUNWIND_DIR and JITDUMPDIR set to `dir`), judged from its
/// folded stacks and the phases the program printed.
inline perf_view_run jitwalk_view_of(const std::string& jitwalk,
                                     const std::vector<std::string>& command, const temp_dir& dir,
                                     const std::vector<std::string>& leaves,
                                     const std::vector<std::string>& extra_env = {}) {
  perf_view_run r;
  const run_result rec =
      run_under({jitwalk, "profile", "-q", "-F", "999", "--folded", dir / "stacks.folded", "--"},
                command, dir, extra_env, r);
  if (rec.exit_code == 0) r.view = judge_folded(read_file(dir / "stacks.folded"), r.phases, leaves);
  return r;
}

/// The start addresses a program printed ("fn NAME 0xSTART SIZE from T"), in order.
inline std::vector<uint64_t> printed_starts(const std::string& out) {
  std::vector<uint64_t> v;
  static const std::regex fn(R"(^fn \S+ 0x([0-9a-f]+) )");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, fn)) v.push_back(std::stoull(m[1], nullptr, 16));
  }
  return v;
}

/// Code the SDK's side places (owned windows, the asmjit glue, the ORC plugin): perf right in
/// both modes, packed or replaced (the new code goes to a new address). `profile(shape, mode)`
/// runs the program under perf.
template <class Profile>
void check_placed_by_sdk(const Profile& profile) {
  for (perf_mode mode : {perf_mode::perf_map, perf_mode::jitdump}) {
    const perf_view_run packed = profile("packed", mode);
    CHECK(packed.view.named_share() >= 0.95);
    CHECK(packed.view.main_share() >= 0.95);
    CHECK(packed.program_err.find("warning") == std::string::npos);
    const perf_view_run reused = profile("reused", mode);
    const auto at = printed_starts(reused.program_out);
    REQUIRE(at.size() == 2);
    CHECK(at[0] != at[1]);
    CHECK(reused.view.named_share() >= 0.95);
    CHECK(reused.view.main_share() >= 0.95);
  }
}

}  // namespace jitunwind::test
