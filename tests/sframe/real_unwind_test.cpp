// Real unwinding: a program built with -O2 -fomit-frame-pointer -Wa,--gsframe is interrupted by
// a profiling timer deep in a call chain; our unwinder, reading the program's own .sframe (v1,
// PIE load bias applied) and a copy of its stack, must recover exactly the return addresses the
// functions recorded with __builtin_return_address(0). See programs/unwind_target.c.
#include "support/process.hpp"

#include <catch2/catch.hpp>

namespace t = jitunwind::test;

TEST_CASE("unwinds a real -fomit-frame-pointer program from a signal's interrupted context") {
#ifndef JITUNWIND_SFRAME_UNWIND_TARGET
  FAIL("sframe_unwind_target was not built (it needs gcc and gas with --gsframe)");
#else
  // Each run interrupts `spin` at a different instruction; the load bias changes too (ASLR).
  for (int run = 0; run < 5; ++run) {
    auto r = t::run({JITUNWIND_SFRAME_UNWIND_TARGET}, {}, std::chrono::seconds(60));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("\nPASS\n") != std::string::npos);
    // Ten return addresses: spin, mid_frame, vla_frame, 5 x recurse, big_frame, main.
    const auto rec = r.out.find("recorded:");
    REQUIRE(rec != std::string::npos);
    const std::string line = r.out.substr(rec, r.out.find('\n', rec) - rec);
    CHECK(std::count(line.begin(), line.end(), ' ') == 10);
    CHECK(r.out.find("stop: no_table") != std::string::npos);
  }
#endif
}
