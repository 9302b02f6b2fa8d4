// Command-line helpers shared by the mains of the example runtimes (toy-jit, toy-interp), so both
// read options and report mistakes the same way. Options are tables of the repository's
// command-line layer (cmdline/, standard C++ only: the examples still use the SDK only through
// its public headers): --help is generated from them, every flag has its --no- form and =on|off,
// sizes and durations take units. Usage errors exit 2 with "PROGRAM: error: MESSAGE" and a hint
// to --help on stderr.
#pragma once

#include "toylang.h"

#include <cmdline/cmdline.hpp>

#include <jitunwind/log.h>
#include <jitunwind/window.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace toylang {
class unwind_checker;
}

namespace toylang::cli {

/// Prints "PROGRAM: error: MESSAGE" and a hint to --help to stderr and exits with status 2.
[[noreturn]] void usage_error(const char* program, const std::string& message);

/// Parses `PROGRAM [OPTIONS] PROGRAM.toy [ARGS...]` against `spec` (its style must be
/// cmdline::layout::leading: the toy program's own arguments may look like options). --help
/// prints the help and exits 0; a usage error exits 2.
cmdline::parsed parse_command_line(const cmdline::command& spec, const char* program, int argc,
                                   char** argv);

/// The option --publish=LIST of both runtimes, and its value as SDK publishers
/// (jitunwind::parse_publishers; a bad list is a usage error).
cmdline::option publish_option(const char* what);
jitunwind::publisher_set publishers(const char* program, const std::string& list);

/// The option --wait-for-tracer[=S] (30 s when given without a value), and its value in whole
/// seconds (rounded up), 0 if absent.
cmdline::option wait_for_tracer_option(const char* help);
int wait_for_tracer_seconds(const cmdline::parsed& a);

/// What the options leave: the PROGRAM.toy and the arguments after it.
struct operands {
  std::string file;
  std::vector<std::string> args;
};
operands program_operands(const cmdline::parsed& a);

/// A toy program ready to run: the compiled source and main's arguments.
struct loaded_program {
  program source;
  std::vector<int64_t> args;
};

/// Compiles `file` and parses main's arguments (unless `with_args` is false: nothing will
/// run). Compile errors go to stderr as "file:line:column: error: ..." and exit with status 1;
/// bad arguments are a usage error.
loaded_program load(const char* program, const std::string& file,
                    const std::vector<std::string>& args, bool with_args = true);

/// Makes a failed allocation print "PROGRAM: out of memory" and exit with status 3 (a runtime
/// error) instead of aborting on an uncaught std::bad_alloc. `program` must outlive the process.
void exit_on_out_of_memory(const char* program);

/// A log sink that prints "PROGRAM: jitunwind LEVEL: MESSAGE" lines to stderr, warnings and
/// above. `program` must outlive every use of the sink.
jitunwind::log_sink stderr_log(const char* program);

/// End of a run that printed to stdout: flushes it and returns `status`, or prints "PROGRAM:
/// writing standard output failed: REASON" and returns 3 if any of the output was lost (a full
/// disk, a closed pipe), so a lost result never looks like success.
int finish_output(const char* program, int status);

/// End of a --verify-unwind run: prints "PROGRAM: <checker summary>" to stderr and returns the
/// exit status, 5 if any checkpoint was not exact or not complete, else 0.
int verify_unwind_status(const char* program, const unwind_checker& checker);

}  // namespace toylang::cli
