// Helpers of the tests of issue 22 ("the profiled process is an adversary"): the tools run
// under an address-space limit and a time bound against jitwalk's test JIT doing what a
// hostile process can do (tests/jitwalk/targets/hostile.hpp), or on hostile files made here
// (support/hostile_elf.hpp).
#pragma once

#include "support/background.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <jitunwind/frame.h>
#include <jitunwind/sframe.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace jitunwind::test::hostile {

// The tools under test; JITUNWIND_HOSTILE_CLI / JITUNWIND_HOSTILE_JITWALK name other builds
// (to see these tests fail on a build without the guards).
inline std::string cli() {
  const char* other = std::getenv("JITUNWIND_HOSTILE_CLI");
  return other != nullptr ? other : JITUNWIND_CLI_PATH;
}
inline std::string jit_target() {
  return JIT_TARGET;
}
inline std::string jitwalk() {
  const char* other = std::getenv("JITUNWIND_HOSTILE_JITWALK");
  return other != nullptr ? other : binary_path("bpf/jitwalk");
}

/// The bounds every run against a hostile object is held to (issue 22): address space, and CPU
/// time (user + system: what the work costs, whatever else the machine runs). Wall time is only
/// bounded loosely, to catch a tool that blocks (on a FIFO, say) rather than works.
inline constexpr uint64_t address_space_limit = uint64_t{256} << 20;
inline constexpr double seconds_per_object = 10;
inline constexpr double blocked_seconds = 60;

/// Runs `argv` with its address space limited to `limit` bytes (as `prlimit --as` does) and
/// checks that it ended by itself (no signal) within `seconds` of CPU time and `wall` seconds,
/// its peak resident memory within `limit` (max_rss_kib is the program's own, measured by
/// peak_rss.c; `cpu_seconds` its user + system time).
struct bounded_result : run_result {
  double cpu_seconds = 0;
};
inline bounded_result bounded(const std::vector<std::string>& argv,
                              uint64_t limit = address_space_limit,
                              double seconds = seconds_per_object, double wall = blocked_seconds) {
  temp_dir peak;
  std::vector<std::string> full = {PEAK_RSS, peak / "usage", std::to_string(limit)};
  full.insert(full.end(), argv.begin(), argv.end());
  bounded_result r;
  static_cast<run_result&>(r) = run(full, {}, std::chrono::seconds(static_cast<int>(wall)));
  std::istringstream usage(read_file(peak / "usage"));
  usage >> r.max_rss_kib >> r.cpu_seconds;
  INFO("command: " << argv.front() << " " << (argv.size() > 1 ? argv[1] : "") << " "
                   << (argv.size() > 2 ? argv[2] : ""));
  INFO("stdout: " << r.out.substr(0, 4000));
  INFO("stderr: " << r.err.substr(0, 4000));
  INFO("took " << r.seconds << " s (" << r.cpu_seconds << " s of CPU), peak RSS " << r.max_rss_kib
               << " KiB");
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code < 128);  // not killed by a signal (SIGBUS, SIGABRT on bad_alloc)
  CHECK(r.cpu_seconds <= seconds);
  CHECK(static_cast<uint64_t>(r.max_rss_kib) * 1024 <= limit);
  return r;
}

/// jit_target running in the background (its JIT code with frame pointers off, good windows 1
/// and 2) with the hostile options given; its standard error is kept, its perf map in /tmp is
/// removed once it has been killed (a churning target rewrites it until then), and the objects
/// it churns go to the test's directory (TMPDIR).
class target {
 public:
  explicit target(const std::vector<std::string>& hostile_options, double seconds = 60,
                  const std::string& mode = "deep")
      : err_(dir_ / "target.err"),
        process_(command(hostile_options, seconds, mode, dir_.path()), false, err_) {
    perf_map_.path = "/tmp/perf-" + std::to_string(pid()) + ".map";
  }
  pid_t pid() const { return process_.pid(); }
  std::string pid_text() const { return std::to_string(pid()); }
  std::string err() const { return read_file(err_); }
  const temp_dir& dir() const { return dir_; }

  /// Waits (30 s at most) until it has set up its hostile shapes.
  void wait_ready() const {
    for (int i = 0; i < 3000; ++i) {
      if (err().find("hostile shapes ready") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("the target did not set up its hostile shapes: " << err());
  }

  /// Waits (20 s at most) until `windows list` sees at least `at_least` windows or skipped
  /// entries (its good windows 1 and 2 first).
  void wait_for_windows(size_t at_least = 2) const {
    for (int i = 0; i < 400; ++i) {
      auto r = run({cli(), "windows", "list", "--json", "-p", pid_text()});
      if (!r.out.empty()) {
        auto doc = nlohmann::json::parse(r.out, nullptr, false);
        if (!doc.is_discarded() && doc["windows"].size() + doc["skipped"].size() >= at_least)
          return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("the target did not publish its windows");
  }

 private:
  static std::vector<std::string> command(const std::vector<std::string>& hostile, double seconds,
                                          const std::string& mode, const std::string& dir) {
    std::vector<std::string> argv = {"/usr/bin/env",
                                     "TMPDIR=" + dir,
                                     jit_target(),
                                     mode,
                                     "--seconds",
                                     std::to_string(seconds),
                                     "--depth",
                                     "20",
                                     "--no-checkpoint"};
    argv.insert(argv.end(), hostile.begin(), hostile.end());
    return argv;
  }
  struct removed_at_end {
    std::string path;
    ~removed_at_end() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  };
  temp_dir dir_;
  std::string err_;
  removed_at_end perf_map_;  // destroyed after process_: once the target is killed
  background process_;
};

/// A valid .sframe for one leaf function at 0x1000 (section address 0x1000).
inline std::vector<uint8_t> small_sframe() {
  const std::vector<function_desc> leaf = {recipes::leaf(abi::amd64, 0x1000, 16).value()};
  sframe::encoder_options o;
  o.section_address = 0x1000;
  return sframe::encode(o, leaf).value();
}

/// The windows of `windows list --json` output by id: {id -> usable}.
inline std::map<uint64_t, bool> usable_windows(const std::string& json_text) {
  std::map<uint64_t, bool> out;
  auto doc = nlohmann::json::parse(json_text, nullptr, false);
  if (doc.is_discarded()) return out;
  for (const auto& w : doc["windows"])
    out[w["id"].get<uint64_t>()] = w["usable"].is_boolean() && w["usable"].get<bool>();
  return out;
}

/// Folded stacks ("a;b;c COUNT") summed: the total, and the count of stacks containing `part`.
inline uint64_t folded_count(const std::string& text, const std::string& part = {}) {
  uint64_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    if (part.empty() || line.find(part) != std::string::npos) n += std::stoull(line.substr(sp + 1));
  }
  return n;
}

}  // namespace jitunwind::test::hostile
