// Command-line plumbing shared by every command group of the `jitunwind` tool: commands are
// tables of the repository's command-line layer (cmdline/: parsing, generated --help, --no-
// forms, numbers with units), plus the tool's group dispatch, messages and whole-file I/O with
// errors that name the file.
#pragma once

#include <jitunwind/result.h>
#include <cmdline/cmdline.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace jitunwind::cli {

/// Exit statuses of the tool.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;  ///< the input is invalid, a file cannot be read/written
inline constexpr int exit_usage = 2;    ///< bad command line

/// What a group's entry point receives: the words after the group name.
struct invocation {
  std::string program;  ///< "jitunwind <group>", for messages and help
  std::vector<std::string> args;
};

/// An option of a command (cmdline::option: `{"format", 'f', "FMT", "help"}`, or with a kind
/// and range for numbers).
using option_spec = cmdline::option;
/// A command: name, operands, summary, description, options, operand counts, examples.
using command_spec = cmdline::command;
/// What a command line gave, typed as its table says.
using parsed_args = cmdline::parsed;

/// Parses `args` against `spec` (cmdline::parse): `--name VALUE`, `--name=VALUE`, `-x VALUE`,
/// flags and their --no- forms, `--` ends options, `-h`/`--help` anywhere sets `help`. Errors
/// are messages for the user.
result<parsed_args> parse(const command_spec& spec, std::span<const std::string> args);

/// The full --help text of a command of group `program` ("jitunwind sframe").
std::string help_text(const std::string& program, const command_spec& spec);

/// "1 row", "3 rows".
std::string count_text(size_t n, const std::string& noun);

/// "0x1f".
std::string hex_text(uint64_t v);

/// Parses an unsigned integer in decimal or 0x-hexadecimal. On failure `*too_large` (if given)
/// tells a well-formed number above 2^64-1 (report it as out of range) from text that is not a
/// number at all.
std::optional<uint64_t> parse_u64(const std::string& text, bool* too_large = nullptr);

/// A duration option (kind::duration) in whole milliseconds, `fallback` if it is absent.
uint64_t duration_ms(const parsed_args& a, const std::string& name, uint64_t fallback);

/// The required `--pid` option as a process (or thread) id; nothing (and `*bad` set) if it is
/// missing or not a positive id.
std::optional<int> pid_option(const parsed_args& a, std::string* bad);

/// The largest input file the tool reads.
inline constexpr uint64_t max_input_bytes = uint64_t{1} << 30;

/// Reads a whole file, or standard input for "-". Only regular files are read (a FIFO would
/// block, a device never ends), at most max_input_bytes. Errors name the path and the reason:
/// not_found, io_error ("is a FIFO, not a regular file"), limit_exceeded.
result<std::vector<uint8_t>> read_file(const std::string& path);
/// Writes a whole file under the output policy of guarded/output.hpp: an existing symbolic
/// link, FIFO or device at PATH is refused; the contents go to a new file renamed over PATH.
result<void> write_file(const std::string& path, std::span<const uint8_t> bytes);

/// Prints "PROGRAM: error: MESSAGE" (and a hint to --help for usage errors) to stderr and
/// returns `status`.
int report(const std::string& program, const std::string& message, int status);

/// One command of a group: its spec and what runs it.
struct command {
  const command_spec* spec;
  int (*run)(const std::string& program, const parsed_args& args);
};

/// The usual group help: "Usage: PROGRAM COMMAND [OPTIONS]", `about` (one or more lines, each
/// ending in a newline), the commands with their summaries, and where command help is.
void print_standard_group_help(const std::string& program, const char* about,
                               std::span<const command> commands);

/// Runs `jitunwind <group> COMMAND ...`: no command prints the group help (exit_usage), -h/--help
/// prints it (exit_ok), otherwise parses the command's options and runs it (or prints its help).
int run_group(const invocation& inv, std::span<const command> commands,
              void (*print_group_help)(const std::string& program));

/// The version printed by `--version`.
const char* version_string();

}  // namespace jitunwind::cli
