// gdb in batch mode, as the tests drive it: run a program to a breakpoint and read `bt`.
#pragma once

#include "support/process.hpp"

#include <string>
#include <vector>

namespace jitunwind::test {

/// Runs `program` (argv) under `gdb -batch -nx` (no debuginfod), stops at the first hit of
/// `breakpoint` and prints `bt`. `before_run`: more gdb commands, given before `run` (e.g.
/// "set environment LD_PRELOAD=...").
run_result gdb_backtrace(const std::string& breakpoint, const std::vector<std::string>& program,
                         const std::vector<std::string>& before_run = {});

/// Function names of the frames of a gdb `bt`, innermost first ("??" for unknown frames).
std::vector<std::string> backtrace_names(const std::string& gdb_output);

}  // namespace jitunwind::test
