// bpftrace attached to the toyinterp USDT probes sees what the interpreter did.
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

// bpftrace map lines "@entries[NAME]: N".
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

}  // namespace

TEST_CASE("bpftrace counts of function__entry by name equal the interpreter's call statistics") {
  if (examples_missing(TOY_INTERP)) return;
  if (!jitunwind::test::may_run_privileged("bpftrace usdt probes")) return;
  if (!jitunwind::test::tool_available("bpftrace")) return;
  for (const sample& s : {sample{"mutual.toy", {"300"}, ""}, sample{"fib.toy", {"15"}, ""}}) {
    INFO(s.file);
    // The child inherits bpftrace's stderr: its --stats lines end up in r.err.
    std::string cmd = std::string(TOY_INTERP) + " --stats " + program_path(s.file);
    for (const auto& a : s.args) cmd += " " + a;
    const std::string script = std::string("usdt:") + TOY_INTERP +
                               ":toyinterp:function__entry { @entries[str(arg0)] = count(); } "
                               "usdt:" +
                               TOY_INTERP +
                               ":toyinterp:function__return { @returns[str(arg0)] = count(); }";
    const auto r = run({"bpftrace", "-e", script, "-c", cmd});
    REQUIRE(r.exit_code == 0);
    const auto stats = parse_stats(r.err);
    REQUIRE(!stats.empty());
    CHECK(parse_map(r.out, "entries") == stats);
    CHECK(parse_map(r.out, "returns") == stats);
  }
}
