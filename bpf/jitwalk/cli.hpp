// The command lines of jitwalk's commands, read with the repository's command-line layer
// (cmdline/): each command is a table, from which `--help` is generated.
#pragma once

#include <cmdline/cmdline.hpp>

#include "jitwalk/common.hpp"
#include "jitwalk/run.hpp"

namespace jitwalk {

/// The tables of `jitwalk profile` and `jitwalk verify` (main lists them in its help).
extern const cmdline::command profile_command;
extern const cmdline::command verify_command;

/// Options both commands have, read into `ro` and g_verbosity: --max-depth, --native-tables,
/// --window-state-limit, --sync-tables, -d, -q/-v. Returns a usage error, empty if none.
std::string read_shared_options(const cmdline::parsed& a, run_options& ro);

/// Parses `jitwalk NAME argv[2..]` against `spec`: true when the command should run; otherwise
/// the help was printed or a usage error reported, with `*exit_status` set (0 or 2).
bool parse_command_line(const cmdline::command& spec, int argc, char** argv, cmdline::parsed& a,
                        int* exit_status);

/// A usage error found after parsing: reported as the parser reports its own; returns 2.
int usage_failure(const cmdline::command& spec, const std::string& message);

int cmd_profile(int argc, char** argv);
int cmd_verify(int argc, char** argv);

}  // namespace jitwalk
