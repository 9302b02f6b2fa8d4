// cmdline: the one command-line layer of this repository's programs — the `jitunwind` tool,
// `jitwalk` and the example runtimes (toy-jit, toy-interp, orc-jit).
//
// A command is a table (`command`, `option`): parse() reads argv against it and help_text()
// prints it, so `--help` documents exactly the options that are parsed. The table states what
// each value is — a flag, text, one of a few words, a whole number, a decimal, a duration, a
// size, a frequency — with its range, so every program reads `--seconds 1.5`, `-d 500ms`,
// `--max-memory 1G` and `-F 1kHz` alike (units.hpp), and every flag has its `--no-` form and
// an `=on|off` form. Usage errors name the option as it was typed and the bad value.
//
// Where it lives and why: cmdline/ at the top of the tree, beside the SDK rather than in it.
// The example runtimes link the SDK as an outside project would (jitunwind::jitunwind, public
// headers only) and must not reach into sdk/src; the tools use the SDK's private toolkit. A
// command line is neither SDK API nor toolkit, so it is a small static library of its own that
// depends on the C++ standard library alone (no SDK header, no exceptions thrown, so orc-jit's
// -fno-exceptions build uses it too). It is not installed: it is how this repository's
// programs read their arguments, not something the SDK offers.
//
// Thread-safety: none needed; a parse touches only its arguments and its result.
#pragma once

#include "cmdline/units.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cmdline {

/// Exit status of a bad command line (every program here uses 2, as getopt programs do).
inline constexpr int exit_usage = 2;

/// What an option's value is. Numbers are range-checked at parse time against option::min/max,
/// which are in the kind's base unit (seconds, bytes, Hz).
enum class kind : uint8_t {
  automatic,  ///< `flag` if the option has no value_name, `text` if it has one
  flag,       ///< no value: --NAME sets it, --no-NAME clears it, --NAME=on|off says which
  text,       ///< any text
  choice,     ///< one of option::choices
  whole,      ///< a whole number, decimal or 0x-hex
  decimal,    ///< a non-negative decimal ("1.5")
  duration,   ///< seconds; units ns us ms s m h; a bare number is in option::bare_unit
  size,       ///< bytes; units k M G T (powers of 1024); a bare number is in option::bare_unit
  frequency,  ///< Hz; units Hz kHz
};

/// One option of a command. The first four fields read as `{"format", 'f', "FMT", "help"}`.
struct option {
  std::string name;        ///< long name without dashes ("format")
  char short_name = 0;     ///< one-letter alias ('f'), 0 = none
  std::string value_name;  ///< placeholder shown in help ("FMT"); empty for a flag
  std::string help;        ///< one or more sentences
  kind type = kind::automatic;
  double min = 0;                                        ///< numbers: the least value accepted
  double max = std::numeric_limits<double>::infinity();  ///< numbers: the largest value accepted
  std::string bare_unit;             ///< duration/size: unit of a number without one ("ms", "MiB")
  std::vector<std::string> choices;  ///< kind::choice: the words accepted
  /// Set: the value may be left out (`--wait`, taken as this) and is only given as
  /// `--NAME=VALUE`; help shows `--NAME[=VALUE]`.
  std::optional<std::string> implicit_value;
  /// A flag that is on unless turned off: help shows its --no- form, which is what changes it.
  bool on_by_default = false;
  /// A value option that also has a --no-NAME form turning it off (`--table-cache DIR` and
  /// `--no-table-cache`). Flags always have it.
  bool negatable = false;
  /// Help shows options under headings; an option with a heading starts a new group.
  std::string heading;
};

/// How options and operands may mix on a command line.
enum class layout : uint8_t {
  /// Options anywhere among the operands, `--` ends the options (`jitunwind sframe dump FILE
  /// --format json`). Values as `--NAME VALUE` or `--NAME=VALUE`.
  interleaved,
  /// Options first; the first operand ends them and it and everything after it are operands
  /// (`toy-jit [OPTIONS] PROGRAM.toy ARGS...`: the program's own arguments may look like
  /// options). Long options take their value only as `--NAME=VALUE`.
  leading,
  /// Operands only after `--` (`jitwalk profile [OPTIONS] -- COMMAND ARGS...`): an operand
  /// before it is an error, so a typo never becomes a command to run.
  after_separator,
};

/// One command: its options, operands and help. The first eight fields keep the order the
/// `jitunwind` tool's tables are written in.
struct command {
  std::string name;         ///< "dump"; empty for a program without subcommands
  std::string operands;     ///< placeholder of the operands ("FILE...", "-- COMMAND [ARGS...]")
  std::string summary;      ///< one line, also shown in a command list
  std::string description;  ///< paragraphs shown after the usage line
  std::vector<option> options;
  size_t min_operands = 0;
  size_t max_operands = SIZE_MAX;
  std::string examples;  ///< shown last by --help, one command per line
  std::string notes;     ///< paragraphs shown after the options (exit status, files)
  layout style = layout::interleaved;
  /// The usage line after "Usage: PROGRAM" when "[OPTIONS] OPERANDS" does not say it.
  std::string usage;
};

/// The result of a parse: what was given, typed as the table says.
class parsed {
 public:
  bool help = false;                  ///< -h/--help was given (the rest is then not parsed)
  std::vector<std::string> operands;  ///< in order, those after `--` included
  size_t separator = SIZE_MAX;        ///< index in `operands` of the first one after `--`
  bool saw_separator = false;         ///< `--` was given (possibly with nothing after it)

  /// Whether the option was given in any form (--NAME, --no-NAME, -X).
  bool has(std::string_view name) const { return given_.count(name) != 0; }
  /// A flag: true if it was given and its last form turned it on.
  bool flag(std::string_view name) const;
  /// A flag, or a negatable option: its last form, nothing if not given.
  std::optional<bool> state(std::string_view name) const;
  /// The text of a value option as given (last one wins); nothing if absent or turned off.
  std::optional<std::string> value(std::string_view name) const;
  /// A whole or size option's value (sizes in bytes), `fallback` if absent.
  uint64_t whole(std::string_view name, uint64_t fallback) const;
  /// A decimal, duration (seconds) or frequency (Hz) option's value, `fallback` if absent.
  double decimal(std::string_view name, double fallback) const;
  /// Which of two options was given last (e.g. -q and -v): the name, or nothing if neither.
  std::optional<std::string> last_of(std::string_view a, std::string_view b) const;

  /// Records an option (the parser's side).
  struct entry {
    bool on = true;
    std::string text;
    uint64_t whole = 0;
    double decimal = 0;
    size_t position = 0;
  };
  void set(const std::string& name, entry e) { given_[name] = std::move(e); }

 private:
  std::map<std::string, entry, std::less<>> given_;
};

/// Parses `args` (the words after the program and command names) against `spec`. `-h`/`--help`
/// anywhere among the options wins over everything else (even a bad option before it). On a
/// usage error returns false with `*error` naming the option as typed and the bad value.
bool parse(const command& spec, std::span<const std::string> args, parsed& out, std::string* error);

/// The full --help text: "Usage: INVOCATION [OPTIONS] OPERANDS", summary, description, the
/// options (with --help), notes on flags and units that the options use, notes, examples.
/// `invocation` is how the command is run ("jitwalk profile", "toy-jit").
std::string help_text(const std::string& invocation, const command& spec);

/// The help of a program made of commands: "Usage: PROGRAM COMMAND [OPTIONS]", `about`, one
/// line per command (its name and summary) and where a command's help is.
std::string command_list_text(const std::string& program, const std::string& about,
                              std::span<const command* const> commands);

/// Prints "INVOCATION: error: MESSAGE" and "Try 'INVOCATION --help'." to stderr; returns
/// exit_usage.
int usage_error(const std::string& invocation, const std::string& message);

/// Parses argv[first..] for a program without subcommands: prints the help and returns 0 in
/// `*exit_status` for --help, prints the usage error and returns exit_usage there for a bad
/// line; returns true when the program should run.
bool parse_or_exit_status(const command& spec, const std::string& invocation, int argc, char** argv,
                          int first, parsed& out, int* exit_status);

/// `text` for a message: at most `limit` bytes of it (then "... (N bytes)"), control characters
/// (C0, DEL, UTF-8 C1) escaped as \xNN, so that a pasted binary or an escape sequence in an
/// argument cannot garble the terminal.
std::string shown(std::string_view text, size_t limit = 60);

/// Wraps `text` at `width` columns, each line indented by `indent` spaces; keeps newlines.
std::string wrap(const std::string& text, size_t indent, size_t width);

}  // namespace cmdline
