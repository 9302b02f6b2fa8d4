// With frame pointers off, the SDK's SFrame unwinder (in-process, from a SIGTRAP context, no
// frame pointers) recovers exactly the shadow stack at every checkpoint, through native helper
// frames, every frame shape the code generator emits, and recompiled code.
#include "examples_support.hpp"

#include <regex>

using jitunwind::test::run;
using namespace toytest;

namespace {

struct summary {
  long checks = -1, exact = -1, complete = -1;
};

summary parse_summary(const std::string& err) {
  static const std::regex re(R"(verify-unwind: (\d+) checkpoints, (\d+) exact, (\d+) complete)");
  std::smatch m;
  summary s;
  if (std::regex_search(err, m, re)) {
    s.checks = std::stol(m[1]);
    s.exact = std::stol(m[2]);
    s.complete = std::stol(m[3]);
  }
  return s;
}

}  // namespace

TEST_CASE("SFrame unwinding recovers the exact ground-truth chain at every checkpoint") {
  if (examples_missing(TOY_JIT)) return;
  struct workload {
    sample program;
    std::vector<std::string> options;
    long min_checks;
  };
  const std::vector<workload> runs = {
      {{"verify.toy", {"50"}, ""}, {"--frame-pointers=off"}, 5000},
      {{"verify.toy", {"50"}, ""}, {"--frame-pointers=on"}, 5000},
      {{"recompile.toy", {"3000"}, ""}, {"--frame-pointers=off", "--recompile-every=50"}, 400},
      // Tiny windows: every recompilation fills a window, old ones are retired and reused
      // while code of several generations is on the stack.
      {{"recompile.toy", {"3000"}, ""},
       {"--windows=4k", "--frame-pointers=off", "--recompile-every=50"},
       400},
      {{"features.toy", {}, ""}, {"--frame-pointers=off"}, 1},
  };
  for (const workload& w : runs) {
    std::vector<std::string> options = w.options;
    options.push_back("--verify-unwind");
    INFO(w.program.file << " " << w.options.back());
    const auto r = run(command(TOY_JIT, options, w.program));
    CHECK(r.exit_code == 0);
    const summary s = parse_summary(r.err);
    CHECK(s.checks >= w.min_checks);
    CHECK(s.exact == s.checks);
    CHECK(s.complete == s.checks);
    // The same program without --verify-unwind prints the same thing.
    const auto plain = run(command(TOY_JIT, w.options, w.program));
    CHECK(plain.out == r.out);
  }
}
