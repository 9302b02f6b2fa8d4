// Helpers of the jitwalk end-to-end tests (integration_test.cpp: the test targets,
// examples_test.cpp: the example runtimes): running jitwalk and reading what it wrote.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "png_check.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

namespace jitwalk_test {

inline std::string jitwalk() {
  return jitunwind::test::binary_path("bpf/jitwalk");
}

/// Folded stacks ("frame;frame;... COUNT" lines) summed per stack.
inline std::map<std::string, uint64_t> parse_folded(const std::string& text) {
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] += std::stoull(line.substr(sp + 1));
  }
  return out;
}

inline uint64_t total(const std::map<std::string, uint64_t>& f) {
  uint64_t n = 0;
  for (const auto& [k, v] : f) n += v;
  return n;
}

/// Removes the /tmp/perf-PID.map and /tmp/jit-PID.dump of every process jitwalk's report names
/// ("pid N"): jitwalk, like perf, reads a process's perf map only from /tmp, so the targets
/// write it there, and the tests remove it once jitwalk is done.
inline void remove_tmp_files_of(const jitunwind::test::run_result& jitwalk_run) {
  static const std::regex pid(R"(pid (\d+))");
  for (const std::string* text : {&jitwalk_run.out, &jitwalk_run.err}) {
    for (auto it = std::sregex_iterator(text->begin(), text->end(), pid);
         it != std::sregex_iterator(); ++it) {
      std::remove(("/tmp/perf-" + (*it)[1].str() + ".map").c_str());
      std::remove(("/tmp/jit-" + (*it)[1].str() + ".dump").c_str());
    }
  }
}

/// Runs `jitwalk verify --json FILE OPTIONS -- COMMAND` and returns the JSON report (an empty
/// object if jitwalk wrote none); the run's result goes to `out`.
inline nlohmann::json verify(const std::vector<std::string>& command,
                             jitunwind::test::run_result* out,
                             const std::vector<std::string>& options = {}) {
  jitunwind::test::temp_dir dir;
  std::vector<std::string> argv = {jitwalk(), "verify", "--json", dir / "v.json"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  *out = jitunwind::test::run(argv, {}, std::chrono::seconds(300));
  remove_tmp_files_of(*out);
  const std::string text = jitunwind::test::read_file(dir / "v.json");
  return text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
}

// `perf script -F ip,sym` text: each sample's user frames, leaf first. With call chains
// (`callchains`) a sample is a block of tab-indented lines ended by a blank line; without, a
// line. Kernel frames are left out (a kernel sample without call chains has no user frame).
inline std::vector<std::vector<std::string>> perf_samples(const std::string& text,
                                                          bool callchains) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  bool open = false;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t") == std::string::npos) {
      open = false;
      continue;
    }
    if (!callchains || !open) out.emplace_back();
    open = true;
    std::istringstream f(line);
    std::string ip, sym;
    f >> ip >> sym;
    if (ip.size() == 16 && ip.rfind("ffff", 0) == 0) continue;  // a kernel address
    out.back().push_back(sym);
  }
  return out;
}

/// The text form of a gzipped pprof profile (protoc --decode with bpf/proto/profile.proto).
/// protoc must be available.
inline std::string decode_pprof(const std::string& pb_gz) {
  namespace jt = jitunwind::test;
  auto d =
      jt::run_shell("gzip -dc " + pb_gz + " | protoc --proto_path=" + jt::source_path("bpf/proto") +
                    " --decode=perftools.profiles.Profile profile.proto");
  INFO(d.err);
  REQUIRE(d.exit_code == 0);
  return d.out;
}

/// Renders `svg` in headless Chromium at `window_size` ("WIDTH,HEIGHT"), saves the
/// screenshot as `png` and counts its green pixels (the flame graph's frames). Chromium must be
/// available.
inline size_t green_pixels(const std::string& svg, const std::string& png,
                           const std::string& window_size) {
  namespace jt = jitunwind::test;
  auto shot =
      jt::run({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--screenshot=" + png, "--window-size=" + window_size, "file://" + svg},
              {}, std::chrono::seconds(90));
  REQUIRE(shot.exit_code == 0);
  image img;
  REQUIRE(decode_png(jt::read_file(png), img));
  size_t green = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    if (img.rgb[i + 1] > 160 && img.rgb[i] < 120 && img.rgb[i + 2] < 100) ++green;
  }
  return green;
}

}  // namespace jitwalk_test
