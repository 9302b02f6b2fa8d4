// toy-jit computes what the interpreter computes, for every sample program, with frame
// pointers on and off, with the shadow stack, and while recompiling.
#include "examples_support.hpp"

using jitunwind::test::run;
using namespace toytest;

TEST_CASE("every sample program gives the interpreter's output in both frame-pointer modes") {
  if (examples_missing(TOY_JIT)) return;
  for (const sample& s : samples()) {
    INFO(s.file << " " << (s.args.empty() ? "" : s.args[0]));
    const auto reference = run(command(TOY_INTERP, {}, s));
    REQUIRE(reference.exit_code == 0);
    if (!s.known_value.empty()) CHECK(last_line(reference.out) == s.known_value);
    for (const char* fp : {"--frame-pointers=on", "--frame-pointers=off"}) {
      for (const std::vector<std::string>& extra :
           {std::vector<std::string>{}, {"--shadow-stack"}, {"--recompile-every=7"}}) {
        std::vector<std::string> options{fp};
        options.insert(options.end(), extra.begin(), extra.end());
        INFO(fp << " " << (extra.empty() ? "" : extra[0]));
        const auto r = run(command(TOY_JIT, options, s));
        CHECK(r.exit_code == 0);
        CHECK(r.err == "");
        CHECK(r.out == reference.out);
      }
    }
  }
}

TEST_CASE("compile errors name file:line:column and exit with status 1") {
  if (examples_missing(TOY_JIT)) return;
  jitunwind::test::temp_dir dir;
  struct bad {
    std::string source;
    std::string expected;  // after "<file>:"
  };
  const std::vector<bad> cases = {
      {"fn main() {\n  return 1 +;\n}\n", "2:13: error: expected an expression, found ';'"},
      {"fn main() { return f(1); }\n", "1:20: error: call to undefined function 'f'"},
      {"fn main() {\n  let x = 1;\n  let x = 2;\n  return x;\n}\n",
       "3:3: error: 'x' is already declared in this block"},
      {"fn g(a, b) { return a; }\nfn main() { return g(1); }\n",
       "2:20: error: 'g' takes 2 arguments, 1 given"},
      {"fn main() { return 99999999999999999999; }\n",
       "1:20: error: integer literal out of range (largest is 9223372036854775807)"},
      {"fn f() { return 0; }\n", "1:1: error: no function 'main'"},
      {"fn main() { return 1 $ 2; }\n", "1:22: error: unexpected character '$'"},
      {"fn main() { return 0x1ffffffffffffffff; }\n",
       "1:20: error: integer literal out of range (largest is 0xffffffffffffffff)"},
      {"fn main() { y = 3; return 0; }\n",
       "1:13: error: assignment to undeclared variable 'y' (use 'let')"},
  };
  for (const bad& b : cases) {
    const std::string file = dir / "bad.toy";
    REQUIRE(jitunwind::test::write_file(file, b.source));
    for (const char* binary : {TOY_JIT, TOY_INTERP}) {
      const auto r = run({binary, file});
      INFO(binary << ": " << b.source);
      CHECK(r.exit_code == 1);
      CHECK(r.err == file + ":" + b.expected + "\n");
      CHECK(r.out == "");
    }
  }
}

TEST_CASE("runtime errors and usage errors have their own exit statuses") {
  if (examples_missing(TOY_JIT)) return;
  jitunwind::test::temp_dir dir;
  const std::string div = dir / "div.toy";
  REQUIRE(jitunwind::test::write_file(div, "fn main(a) {\n  print(1);\n  return 10 / a;\n}\n"));
  const std::string deep = dir / "deep.toy";
  REQUIRE(jitunwind::test::write_file(deep,
                                      "fn f(n) { return f(n + 1) + 1; }\n"
                                      "fn main() { return f(0); }\n"));
  for (const char* binary : {TOY_JIT, TOY_INTERP}) {
    INFO(binary);
    const std::string quiet = "--publish=none";  // no perf maps left in /tmp
    auto r = run({binary, quiet, div, "0"});
    CHECK(r.exit_code == 3);
    CHECK(r.out == "1\n");
    CHECK(r.err == div + ":3:13: runtime error: division by zero\n");
    r = run({binary, quiet, div, "2"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "1\n5\n");
    r = run({binary, div});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("'main' takes 1 argument, 0 given") != std::string::npos);
    r = run({binary, div, "12x"});
    CHECK(r.exit_code == 2);
    r = run({binary, "--no-such-option", div, "1"});
    CHECK(r.exit_code == 2);
    r = run({binary, quiet, deep});
    CHECK(r.exit_code == 3);
    CHECK(r.err == deep + ":1:1: runtime error: stack overflow (toy recursion too deep) in 'f'\n");
    // A stack smaller than the usual 256 KiB margin still gets the error, not a segfault.
    r = jitunwind::test::run_shell("ulimit -s 200 && exec " + std::string(binary) + " " + quiet +
                                   " " + deep);
    CHECK(r.exit_code == 3);
    CHECK(r.err == deep + ":1:1: runtime error: stack overflow (toy recursion too deep) in 'f'\n");
    // Output that cannot be written is an error, not a silent success.
    r = jitunwind::test::run_shell(std::string(binary) + " " + quiet + " " + div + " 2 >/dev/full");
    CHECK(r.exit_code == 3);
    CHECK(r.err.find("writing standard output failed") != std::string::npos);
    // --publish wins over $JITUNWIND_PUBLISH, even one the SDK would reject.
    r = jitunwind::test::run_shell("JITUNWIND_PUBLISH=bogus " + std::string(binary) + " " + quiet +
                                   " " + div + " 2");
    CHECK(r.exit_code == 0);
    CHECK(r.out == "1\n5\n");
    r = run({binary, "--publish", div, "2"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("option '--publish' needs a value (--publish=...)") != std::string::npos);
    r = jitunwind::test::run_shell("JITUNWIND_PUBLISH=bogus " + std::string(binary) + " " + div +
                                   " 2");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("JITUNWIND_PUBLISH: unknown publisher 'bogus'") != std::string::npos);
    // Hex arguments spell any 64-bit pattern, as literals do.
    r = run({binary, quiet, div, "0xfffffffffffffffe"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "1\n-5\n");
    r = run({binary, quiet, div, " 2"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("argument ' 2' is not a 64-bit integer") != std::string::npos);
    r = run({binary, quiet, dir.path()});
    CHECK(r.exit_code == 1);
    CHECK(r.err == dir.path() + ": error: cannot read '" + dir.path() + "': Is a directory\n");
    r = run({binary, "--help"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Usage: ") == 0);
  }
}

TEST_CASE("toy-interp: --dump-bytecode needs no arguments for main, and out of memory is an error") {
  if (examples_missing(TOY_JIT)) return;
  jitunwind::test::temp_dir dir;
  const std::string file = dir / "one.toy";
  REQUIRE(jitunwind::test::write_file(file, "fn main(a) { return a; }\n"));
  auto r = run({TOY_INTERP, "--dump-bytecode", file});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("fn main (arity 1") == 0);
  // Too little address space for the 32 MiB value stack: a message, not std::bad_alloc.
  r = jitunwind::test::run_shell("ulimit -v 40000 && exec " + std::string(TOY_INTERP) +
                                 " --publish=none " + file + " 5");
  CHECK(r.exit_code == 3);
  CHECK(r.err == "toy-interp: out of memory\n");
}

TEST_CASE("deep recursion ends in the result or a stack overflow error, never a crash or a hang") {
  if (examples_missing(TOY_JIT)) return;
  jitunwind::test::temp_dir dir;
  const std::string quiet = "--publish=none";
  // A 320 KiB frame: larger than the stack guard's margin, so it is checked before it is made.
  std::string big = "fn f(d) {\n";
  for (int i = 0; i < 40000; ++i)
    big += "  let a" + std::to_string(i) + " = " + std::to_string(i) + ";\n";
  big += "  if (d == 0) { return a1; }\n  return f(d - 1) + 1;\n}\nfn main(n) { return f(n); }\n";
  const std::string big_file = dir / "big.toy";
  REQUIRE(jitunwind::test::write_file(big_file, big));
  const std::string overflow =
      ":1:1: runtime error: stack overflow (toy recursion too deep) in 'f'\n";
  for (const char* fp : {"--frame-pointers=on", "--frame-pointers=off"}) {
    INFO(fp);
    auto r = run({TOY_JIT, quiet, fp, "--windows=8m", big_file, "3"});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "4\n");
    r = run({TOY_JIT, quiet, fp, "--windows=8m", big_file, "100"});
    CHECK(r.exit_code == 3);
    CHECK(r.err == big_file + overflow);
  }
  const std::string deep = dir / "deep.toy";
  REQUIRE(jitunwind::test::write_file(
      deep,
      "fn f(n) { if (n == 0) { checkpoint(1); return 0; } return f(n - 1) + 1; }\n"
      "fn main(n) { return f(n); }\n"));
  // A 1 GB stack allows more frames than the shadow stack (2^20 entries) holds: its bounds
  // check reports the overflow instead of writing past it.
  for (const char* mode : {"--shadow-stack", "--verify-unwind"}) {
    INFO(mode);
    const auto r = jitunwind::test::run_shell("ulimit -s 1000000 && exec " + std::string(TOY_JIT) +
                                              " " + quiet + " " + mode + " " + deep + " 1100000");
    CHECK(r.exit_code == 3);
    CHECK(r.err == deep + overflow);
  }
  // Recompiling at every call, 40 000 frames deep: each recompilation polls for windows to
  // retire, which scans the stack; that once took minutes (a scan per window per poll), so the
  // run's timeout is the check.
  const auto r =
      run({TOY_JIT, quiet, "--recompile-every=1", deep, "40000"}, {}, std::chrono::seconds(60));
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "40000\n");
}
