// Toolkit: putting text that another process chose (function names from its perf map or
// symbol tables, its command name, paths it maps, numbers given on a command line) into
// messages and terminal output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace jitunwind::toolkit {

/// `text` with everything a terminal could act on made visible: control bytes (below 0x20 and
/// 0x7f; newline and tab as \n and \t), C1 controls (U+0080 to U+009F, which some terminals
/// take as escape sequences) and bytes that are not UTF-8, each as \xNN. Printable ASCII and
/// other valid UTF-8 are kept. Backslashes are kept as they are.
std::string terminal_text(std::string_view text);

/// `text` for a message, cut to its first `max` bytes plus "... (N bytes)" when longer, then
/// terminal_text'ed: a 5000-digit number or a megabyte name does not flood the message.
std::string shortened(std::string_view text, size_t max = 40);

}  // namespace jitunwind::toolkit
