// bpftrace attached to the toyinterp dynamic USDT provider sees what the interpreter did.
#include "examples_support.hpp"
#include "support/privileges.hpp"

#include <map>
#include <regex>
#include <sstream>

using jitunwind::test::run;
using namespace toytest;

namespace {

// "calls NAME N" lines of --stats.
std::map<std::string, long> parse_stats(const std::string& err) {
  std::map<std::string, long> out;
  static const std::regex re(R"(^calls (\S+) (\d+)$)");
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, re)) out[m[1]] = std::stol(m[2]);
  }
  return out;
}

// bpftrace map lines "@NAME[KEY]: N".
std::map<std::string, long> parse_map(const std::string& out, const std::string& map) {
  std::map<std::string, long> result;
  const std::regex re("^@" + map + R"(\[(\S+)\]: (\d+)$)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, re)) result[m[1]] = std::stol(m[2]);
  }
  return result;
}

bool bpftrace_ready() {
  return !examples_missing(TOY_INTERP) && jitunwind::test::may_run_privileged("bpftrace usdt") &&
         jitunwind::test::tool_available("bpftrace");
}

}  // namespace

TEST_CASE("bpftrace counts of function__entry by name equal the interpreter's call statistics") {
  if (!bpftrace_ready()) return;
  for (const sample& s : {sample{"mutual.toy", {"300"}, ""}, sample{"fib.toy", {"15"}, ""}}) {
    INFO(s.file);
    jitunwind::test::temp_dir dir;
    // bpftrace attaches the two probes one after the other: the runtime must wait for both, or
    // the first calls are counted by one probe and not the other.
    waiting_runtime rt(command(TOY_INTERP,
                               {"--wait-for-tracer=60",
                                "--wait-for-probes=function__entry,function__return", "--stats"},
                               s),
                       dir);
    REQUIRE(rt.pid > 0);
    const std::string script =
        "usdt:*:toyinterp:function__entry { @entries[str(arg0)] = count(); } "
        "usdt:*:toyinterp:function__return { @returns[str(arg0)] = count(); "
        "@depth = max(arg1); }" +
        exit_with(rt.pid);
    const auto r = run({"bpftrace", "-p", std::to_string(rt.pid), "-e", script});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);  // before waiting: a runtime bpftrace never reached waits for it
    REQUIRE(rt.wait_exit());
    INFO(rt.err());
    const auto stats = parse_stats(rt.err());
    REQUIRE(!stats.empty());
    CHECK(parse_map(r.out, "entries") == stats);
    CHECK(parse_map(r.out, "returns") == stats);
  }
}

TEST_CASE("bpftrace reads the ground truth of the checkpoint probe") {
  if (!bpftrace_ready()) return;
  // Every entry must lie in the trampolines (named toy:* in the perf map, checked elsewhere);
  // here: counts, depths and that entry 0 differs from the last (distinct trampolines).
  const traced_checkpoints t = trace_checkpoints(
      command(TOY_INTERP, {"--wait-for-tracer=60", "--stats"}, {"verify.toy", {"3"}, ""}),
      "toyinterp");
  INFO(t.bpftrace_out);
  CHECK(std::stol(t.checkpoints) > 100);
  CHECK(t.bpftrace_out.find("@n: " + t.checkpoints + "\n") != std::string::npos);
  CHECK(t.bpftrace_out.find("@deepest: " + t.deepest + "\n") != std::string::npos);
  CHECK(t.bpftrace_out.find("@distinct[1]: ") != std::string::npos);
}
