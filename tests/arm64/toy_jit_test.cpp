// toy-jit on AArch64, cross-built and run under qemu-user by the arm64 stage
// (scripts/test.d/40-arm64.sh): the A64 code generator computes what the x86-64 one computes,
// emits the frame shapes it claims, and the in-process SFrame verifier (--verify-unwind: the
// SDK's unwinder over the rows the JIT published, from a trap's registers, compared with the
// shadow stack) is exact at every checkpoint in every shape, with and without signed return
// addresses; the negative controls (wrong rows) make it fail.
#include "toy-jit/examples_support.hpp"

#include <regex>

using jitunwind::test::run;
using namespace toytest;

namespace {

// The frame shapes of codegen_a64.cpp (functions that call; leaf functions keep x30 in every
// configuration) and the signing variants.
const std::vector<std::vector<std::string>> shapes = {
    {"--frame-pointers=on"},
    {"--frame-pointers=off"},
    {"--frame-pointers=off", "--save-lr-only"},
};
const std::vector<std::vector<std::string>> signing = {{}, {"--pauth=a"}, {"--pauth=b"}};

std::vector<std::string> join(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string words(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

struct summary {
  long checks = -1, exact = -1, complete = -1, trapped = 0;
};

summary parse_summary(const std::string& err) {
  static const std::regex re(
      R"(verify-unwind: (\d+) checkpoints, (\d+) exact, (\d+) complete(, (\d+) from a trap)?)");
  std::smatch m;
  summary s;
  if (std::regex_search(err, m, re)) {
    s.checks = std::stol(m[1]);
    s.exact = std::stol(m[2]);
    s.complete = std::stol(m[3]);
    if (m[5].matched) s.trapped = std::stol(m[5]);
  }
  return s;
}

bool host_reference_missing() {
  if (HOST_TOY_JIT[0] != '\0') return false;
  FAIL(
      "no x86-64 reference: configure with -DJITUNWIND_HOST_TOY_JIT=<host build>/examples/"
      "toy-jit/toy-jit (scripts/test.d/40-arm64.sh does)");
  return true;
}

}  // namespace

TEST_CASE("every sample program prints on AArch64 what it prints on x86-64, in every frame shape") {
  if (examples_missing(TOY_JIT) || host_reference_missing()) return;
  // Each shape once plain, and the runtime's other modes spread over the shapes.
  const std::vector<std::vector<std::string>> runs = {
      {"--frame-pointers=on"},
      {"--frame-pointers=off", "--pauth=a", "--shadow-stack"},
      {"--frame-pointers=off", "--save-lr-only", "--pauth=b", "--recompile-every=7"},
      {"--frame-pointers=on", "--pauth=b", "--recompile-every=7", "--windows=4k"},
  };
  for (const sample& s : samples()) {
    INFO(s.file << " " << (s.args.empty() ? "" : s.args[0]));
    const auto reference = run(command(HOST_TOY_JIT, {}, s));
    REQUIRE(reference.exit_code == 0);
    if (!s.known_value.empty()) CHECK(last_line(reference.out) == s.known_value);
    for (const auto& options : runs) {
      INFO(words(options));
      const auto r = run(command(TOY_JIT, options, s));
      CHECK(r.exit_code == 0);
      CHECK(r.err == "");
      CHECK(r.out == reference.out);
    }
  }
}

TEST_CASE(
    "runtime errors on AArch64: division by zero and stack overflow, from leaf functions too") {
  if (examples_missing(TOY_JIT)) return;
  jitunwind::test::temp_dir dir;
  // `div` divides in a leaf (no calls): its error path is a tail call from a freed frame.
  const std::string div = dir / "div.toy";
  REQUIRE(jitunwind::test::write_file(
      div,
      "fn div(a, b) {\n  return a / b;\n}\nfn main(a) {\n  print(1);\n  return div(10, a);\n}\n"));
  const std::string deep = dir / "deep.toy";
  REQUIRE(jitunwind::test::write_file(deep,
                                      "fn f(n) { return f(n + 1) + 1; }\n"
                                      "fn main() { return f(0); }\n"));
  for (const auto& shape : shapes) {
    INFO(words(shape));
    auto r = run(join({TOY_JIT, "--publish=none"}, join(shape, {div, "0"})));
    CHECK(r.exit_code == 3);
    CHECK(r.out == "1\n");
    CHECK_THAT(r.err, Catch::Contains(":2:12: runtime error: division by zero"));
    r = run(join({TOY_JIT, "--publish=none"}, join(shape, {div, "-1"})));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "1\n-10\n");
    r = run(join({TOY_JIT, "--publish=none"}, join(shape, {deep})));
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("stack overflow (toy recursion too deep) in 'f'"));
  }
}

TEST_CASE("the rows describe each AArch64 frame shape (--dump-frames)") {
  if (examples_missing(TOY_JIT)) return;
  const sample verify{"verify.toy", {"0"}, ""};
  // `bare` is a leaf (its checkpoint is a trap, not a call); `wide` calls.
  struct expectation {
    std::vector<std::string> options;
    std::vector<std::string> wide_rows;  // regexes, each matching one row of toy:wide
  };
  const std::vector<expectation> cases = {
      {{"--frame-pointers=on"},
       {R"(CFA=sp\+16  x30@CFA-8  x29@CFA-16)", R"(CFA=x29\+16  x30@CFA-8  x29@CFA-16)"}},
      {{"--frame-pointers=off"},
       {R"(CFA=sp\+16  x30@CFA-8  x29@CFA-16)", R"(CFA=sp\+\d+  x30@CFA-8  x29@CFA-16)"}},
      {{"--frame-pointers=off", "--save-lr-only"},
       {R"(CFA=sp\+16  x30@CFA-16\n)", R"(CFA=sp\+\d+  x30@CFA-16\n)"}},
      {{"--frame-pointers=on", "--pauth=a"},
       // paciasp, the frame record, ldp (still signed), autiasp
       {R"(\+4 +CFA=sp\+0  x30 \(signed\)\n)", R"(CFA=x29\+16  x30@CFA-8 \(signed\)  x29@CFA-16)",
        R"(CFA=sp\+0  x30 \(signed\)\n  \+\d+ +CFA=sp\+0  x30\n)"}},
  };
  for (const expectation& e : cases) {
    INFO(words(e.options));
    const auto r = run(command(TOY_JIT, join(e.options, {"--dump-frames"}), verify));
    REQUIRE(r.exit_code == 0);
    // The leaf: every row says the return address is in x30 and nothing is saved.
    const auto bare = r.err.find("toy:bare at ");
    const auto wide = r.err.find("toy:wide at ");
    REQUIRE(bare != std::string::npos);
    REQUIRE(wide != std::string::npos);
    const std::string bare_rows = r.err.substr(bare, r.err.find("\ntoy:", bare + 1) - bare) + "\n";
    INFO(bare_rows);
    CHECK(bare_rows.find("@CFA") == std::string::npos);
    CHECK(bare_rows.find("(signed)") == std::string::npos);
    CHECK_THAT(bare_rows, Catch::Contains("  x30\n"));
    const std::string wide_rows = r.err.substr(wide, r.err.find("\ntoy:", wide + 1) - wide) + "\n";
    INFO(wide_rows);
    for (const std::string& row : e.wide_rows) {
      INFO(row);
      CHECK(std::regex_search(wide_rows, std::regex(row)));
    }
  }
}

TEST_CASE(
    "the in-process verifier is exact at every checkpoint, every frame shape, pauth on and off") {
  if (examples_missing(TOY_JIT)) return;
  struct workload {
    sample program;
    std::vector<std::string> options;
    long min_checks;
    long min_trapped;  // checkpoints in leaf functions
  };
  std::vector<workload> runs;
  for (const auto& shape : shapes) {
    for (const auto& sign : signing) {
      runs.push_back({{"verify.toy", {"8"}, ""}, join(shape, sign), 800, 8});
    }
  }
  // Recompiled code of several generations on the stack, in tiny windows that are retired and
  // reused; the hot leaf saves x30 only around its recompile call (a shrink-wrapped frame).
  runs.push_back({{"recompile.toy", {"2000"}, ""},
                  {"--frame-pointers=off", "--pauth=a", "--windows=4k", "--recompile-every=50"},
                  300,
                  300});
  runs.push_back({{"recompile.toy", {"2000"}, ""},
                  {"--frame-pointers=on", "--save-lr-only", "--recompile-every=50"},
                  300,
                  300});
  runs.push_back({{"features.toy", {}, ""}, {"--frame-pointers=off", "--pauth=b"}, 1, 0});
  long total = 0, trapped = 0;
  for (const workload& w : runs) {
    INFO(w.program.file << " " << words(w.options));
    const auto r = run(command(TOY_JIT, join(w.options, {"--verify-unwind"}), w.program));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    const summary s = parse_summary(r.err);
    CHECK(s.checks >= w.min_checks);
    CHECK(s.exact == s.checks);
    CHECK(s.complete == s.checks);
    CHECK(s.trapped >= w.min_trapped);
    total += s.checks;
    trapped += s.trapped;
  }
  std::printf("arm64 verify-unwind: %ld checkpoints exact over %zu runs (%ld in leaf functions)\n",
              total, runs.size(), trapped);
}

TEST_CASE("negative controls: wrong rows make the AArch64 verifier fail") {
  if (examples_missing(TOY_JIT)) return;
  const sample verify{"verify.toy", {"3"}, ""};
  std::vector<std::vector<std::string>> runs;
  for (const auto& shape : shapes) runs.push_back(join(shape, {"--wrong-rows=ra-slot"}));
  // The code signs, the rows do not say so: the unwinder takes the signed words as addresses.
  // This also shows that qemu's -cpu max really signs (with NOP-like PAC the walk would be exact).
  runs.push_back({"--frame-pointers=off", "--pauth=a", "--wrong-rows=unsigned"});
  runs.push_back({"--frame-pointers=on", "--save-lr-only", "--pauth=b", "--wrong-rows=unsigned"});
  for (const auto& options : runs) {
    INFO(words(options));
    const auto r = run(command(TOY_JIT, join(options, {"--verify-unwind"}), verify));
    CHECK(r.exit_code == 5);
    const summary s = parse_summary(r.err);
    CHECK(s.checks > 100);
    // Every checkpoint with a JIT caller below the innermost JIT frame goes wrong.
    CHECK(s.exact < s.checks / 10);
    CHECK_THAT(r.err, Catch::Contains("first difference at"));
    // The program itself still computes the right thing.
    const auto plain = run(command(TOY_JIT, options, verify));
    CHECK(plain.exit_code == 0);
    CHECK(plain.out == r.out);
  }
}
