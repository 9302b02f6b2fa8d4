// perf record -g (frame pointers) + perf report: JIT names come from our perf map.
#include "support/perf_script.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <unistd.h>
#include <catch2/catch.hpp>

#include <regex>

using namespace jitunwind::test;

namespace {

int pid_from(const std::string& out) {
  std::smatch m;
  static const std::regex pid_line(R"(pid (\d+))");
  REQUIRE(std::regex_search(out, m, pid_line));
  return std::stoi(m[1]);
}

}  // namespace

TEST_CASE("perf report names frame-pointer JIT code from /tmp/perf-PID.map") {
  if (!may_run_privileged("perf record") || !tool_available("perf")) return;
  temp_dir dir;
  const std::string data = dir / "perf.data";
  const run_result rec =
      run({"perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", data, "--",
           binary_path("tests/jitdump/testjit"), "--fp", "--perfmap", "/tmp", "--seconds", "1"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.exit_code == 0);
  const std::string map = "/tmp/perf-" + std::to_string(pid_from(rec.out)) + ".map";
  struct remove_map {
    std::string path;
    ~remove_map() { ::unlink(path.c_str()); }
  } cleanup{map};
  const std::string text = read_file(map);
  CHECK_THAT(text, Catch::Contains(" jit_outer\n") && Catch::Contains(" jit_inner\n"));

  const run_result script = run({"perf", "script", "-i", data, "-F", "ip,sym"});
  INFO(script.err);
  REQUIRE(script.exit_code == 0);
  const auto chains = perf_script_chains(script.out);
  const size_t inner = chains_starting_with(chains, "jit_inner");
  const size_t outer = chains_starting_with(chains, "jit_outer");
  INFO("samples " << chains.size() << ", in jit_inner " << inner << ", in jit_outer " << outer);
  CHECK(inner >= 20);
  CHECK(outer >= 10);
  // Frame pointers carry the walk from JIT code through its JIT caller into main.
  CHECK(chains_with(chains, {"jit_inner", "jit_outer"}, "main") >= inner * 8 / 10);
  CHECK(chains_with(chains, {"native_work", "jit_inner", "jit_outer"}, "main") >= 1);

  const run_result report =
      run({"perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym"});
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  CHECK_THAT(report.out, Catch::Contains("[.] jit_inner") && Catch::Contains("[.] jit_outer"));
}
