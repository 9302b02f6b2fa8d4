// Shared by the tests of the example runtimes (tests/toy-jit, tests/interpreter).
#pragma once

#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace toytest {

/// A sample program with arguments small enough for tests, and its known result where one is
/// known independently of both runtimes.
struct sample {
  std::string file;  // under examples/toy-jit/programs/
  std::vector<std::string> args;
  std::string known_value;  // main's value ("" = compare runtimes only)
};

inline const std::vector<sample>& samples() {
  static const std::vector<sample> all = {
      {"fib.toy", {"20"}, "6765"},     {"fib.toy", {"1"}, "1"},    {"mutual.toy", {"1000"}, ""},
      {"mutual.toy", {"5"}, ""},       {"features.toy", {}, "7"},  {"spin.toy", {"300"}, ""},
      {"recompile.toy", {"2000"}, ""}, {"verify.toy", {"20"}, ""},
  };
  return all;
}

inline std::string program_path(const std::string& file) {
  return jitunwind::test::source_path("examples/toy-jit/programs/" + file);
}

/// argv for a runtime. The publishers default to those that leave no files behind (perf maps
/// and jitdumps would accumulate in /tmp); a --publish in `options` overrides it.
inline std::vector<std::string> command(const std::string& binary,
                                        const std::vector<std::string>& options, const sample& s) {
  std::vector<std::string> argv{binary, "--publish=registry,usdt-events,gdb"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(program_path(s.file));
  argv.insert(argv.end(), s.args.begin(), s.args.end());
  return argv;
}

/// The last line of a program's output (main's value).
inline std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

/// True (after a WARN) when the example binaries were not built (JITUNWIND_BUILD_EXAMPLES=OFF).
inline bool examples_missing(const char* binary) {
  if (binary[0] != '\0') return false;
  WARN("SKIPPED: examples not built (JITUNWIND_BUILD_EXAMPLES=OFF)");
  return true;
}

/// A runtime started with --wait-for-tracer in the background (stdout and stderr to files), so
/// that a tracer can attach to its dynamic USDT provider with -p PID before it runs.
struct waiting_runtime {
  int pid = -1;
  std::string out_file, err_file;

  /// Starts `argv` (which must contain --wait-for-tracer) and waits until its provider is
  /// loaded. pid stays -1 on failure.
  waiting_runtime(const std::vector<std::string>& argv, const jitunwind::test::temp_dir& dir)
      : out_file(dir / "runtime.out"), err_file(dir / "runtime.err") {
    std::string cmd;
    for (const auto& a : argv) cmd += "'" + a + "' ";
    cmd += ">'" + out_file + "' 2>'" + err_file + "' & echo $!";
    const auto r = jitunwind::test::run_shell(cmd);
    if (r.exit_code != 0) return;
    pid = std::stoi(r.out);
    for (int i = 0; i < 1000; ++i) {
      if (jitunwind::test::read_file(err_file).find("waiting for a tracer") != std::string::npos)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid = -1;
  }

  /// Waits (at most `timeout`) for the process to end; false if it is still running. The
  /// runtime is an orphan (its shell exited), so whoever adopted it reaps it: a zombie has ended.
  bool wait_exit(std::chrono::seconds timeout = std::chrono::seconds(60)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
    while (std::chrono::steady_clock::now() < deadline) {
      if (kill(pid, 0) != 0) return true;
      const std::string s = jitunwind::test::read_file(stat);
      const auto paren = s.rfind(')');
      if (paren != std::string::npos && paren + 2 < s.size() &&
          (s[paren + 2] == 'Z' || s[paren + 2] == 'X'))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  ~waiting_runtime() {
    if (pid > 0 && kill(pid, 0) == 0) kill(pid, SIGKILL);
  }

  std::string out() const { return jitunwind::test::read_file(out_file); }
  std::string err() const { return jitunwind::test::read_file(err_file); }
};

/// A bpftrace probe that ends the script when process `pid` exits (bpftrace -p keeps running
/// after its target is gone). The tracepoint needs tracefs, which a fresh machine may not have
/// mounted: it is mounted here when absent.
inline std::string exit_with(int pid) {
  std::string why;
  if (!jitunwind::test::ensure_tracefs(&why)) FAIL(why);
  return " tracepoint:sched:sched_process_exit /pid == " + std::to_string(pid) + "/ { exit(); }";
}

/// One run of a runtime traced with bpftrace on its ground-truth probe PROVIDER:checkpoint.
struct traced_checkpoints {
  std::string bpftrace_out;  ///< @n (count), @deepest (max count), @distinct[1] (see below)
  std::string checkpoints;   ///< the runtime's own account: N of "checkpoints N deepest D"
  std::string deepest;       ///< D of it
};

/// Starts `argv` (which must contain --wait-for-tracer and --stats), runs bpftrace -p on it
/// until it exits and returns both accounts (REQUIREs that both worked). @distinct[1] counts
/// checkpoints whose entry 0 differs from the outermost entry (distinct return addresses).
inline traced_checkpoints trace_checkpoints(const std::vector<std::string>& argv,
                                            const std::string& provider) {
  jitunwind::test::temp_dir dir;
  waiting_runtime rt(argv, dir);
  REQUIRE(rt.pid > 0);
  const std::string script =
      "usdt:*:" + provider +
      ":checkpoint { @n = count(); @deepest = max(arg1); "
      "if (arg1 > 1) { @distinct[*(uint64*)arg2 != *(uint64*)(arg2 + 8 * (arg1 - 1))] = "
      "count(); } }" +
      exit_with(rt.pid);
  const auto r = jitunwind::test::run({"bpftrace", "-p", std::to_string(rt.pid), "-e", script});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);  // before waiting: a runtime bpftrace never reached waits for it
  REQUIRE(rt.wait_exit());
  const std::string err = rt.err();
  INFO(err);
  std::smatch m;
  REQUIRE(std::regex_search(err, m, std::regex(R"(checkpoints (\d+) deepest (\d+))")));
  return {r.out, m[1].str(), m[2].str()};
}

}  // namespace toytest
