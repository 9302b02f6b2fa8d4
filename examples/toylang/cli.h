// Command-line helpers shared by the mains of the example runtimes (toy-jit, toy-interp), so both
// read options and report mistakes the same way: usage errors exit 2 with
// "PROGRAM: MESSAGE\n(see PROGRAM --help)" on stderr.
#pragma once

#include "toylang.h"

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

/// Prints "PROGRAM: MESSAGE" and "(see PROGRAM --help)" to stderr and exits with status 2.
[[noreturn]] void usage_error(const char* program, const std::string& message);

/// Walks a command line `PROGRAM [--OPTION[=VALUE]...] [--] FILE.toy [ARGS...]` one option at a
/// time; the caller dispatches on flag()/arg() and converts the value with the parsers below,
/// which end the process with a usage error on a bad value. Not thread-safe (one per main).
class option_scanner {
 public:
  /// `program` and `usage` must outlive the scanner (string literals in practice).
  option_scanner(const char* program, const char* usage, int argc, char** argv)
      : program_(program), usage_(usage), argc_(argc), argv_(argv) {}

  /// Moves to the next option. False at the first argument that does not start with "--" and
  /// after "--" (which is consumed). "--help" prints the usage text to stdout and exits 0.
  bool next();

  std::string_view arg() const { return arg_; }      ///< the whole option, "--flag=value"
  std::string_view flag() const { return flag_; }    ///< up to '=', "--flag"
  bool has_value() const { return has_value_; }      ///< whether there was an '='
  std::string_view value() const { return value_; }  ///< after '=', or ""

  [[noreturn]] void error(const std::string& message) const { usage_error(program_, message); }
  /// Usage error "unknown option 'ARG'", or "option '--FLAG' needs a value (--FLAG=...)" when
  /// the usage text documents "--FLAG=" and ARG has no '='.
  [[noreturn]] void unknown() const;

  /// The value as "on" (true) or "off" (false).
  bool on_off() const;
  /// The value as a decimal non-negative integer.
  uint64_t count() const { return parse_count(value_); }
  /// The value as a byte count with an optional k/m/g suffix (powers of 1024), 1 byte to 4g.
  size_t size() const;
  /// The value as whole seconds, 1..3600.
  int seconds() const;
  /// The value as a list of SDK publishers (jitunwind::parse_publishers).
  jitunwind::publisher_set publishers() const;

  /// After the options: PROGRAM.toy (usage error "no PROGRAM.toy given" if missing) and the
  /// arguments after it.
  void operands(std::string& file, std::vector<std::string>& args);

 private:
  uint64_t parse_count(std::string_view text) const;

  const char* program_;
  const char* usage_;
  int argc_;
  char** argv_;
  int next_ = 1;
  std::string_view arg_, flag_, value_;
  bool has_value_ = false;
};

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
