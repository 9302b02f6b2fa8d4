// Where the names of a profile came from, what stayed unnamed and why: the summary's "names"
// lines. Also the name of unnamed code grouped by mapping.
#pragma once

#include "jitwalk/jit_names.hpp"
#include "jitwalk/profile_data.hpp"

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace jitwalk {

/// The frame that stands for all unnamed code of one mapping: "[anon:0x7f..-0x7f..]" for
/// anonymous memory without a name, the kernel's name for named anonymous memory
/// ("[anon:v8]", "[heap]"), "[memfd:NAME]" for a memfd, "[PATH]" for a file that is not an ELF
/// object; "[unknown]" for an address outside every known mapping.
std::string mapping_group_name(const std::string& module, uint64_t start, uint64_t end);

/// Samples counted by the frame that names them. The "leaf" of a sample is its innermost user
/// frame (kernel frames skipped); JIT/anonymous frames are frames outside ELF objects (JIT
/// names and unnamed code), counted at every depth of every sample, weighted by its count.
struct name_counts {
  uint64_t samples = 0;
  /// Samples by the source of their leaf's name (index: name_source).
  std::array<uint64_t, 5> leaf_by_source{};
  uint64_t leaf_unnamed_anon = 0;    ///< leaf unnamed, outside any ELF object (JIT, anonymous)
  uint64_t leaf_unnamed_native = 0;  ///< leaf in an ELF object without a covering symbol
  uint64_t no_user_frame = 0;        ///< no user frame at all (only a cut marker)
  uint64_t jit_frames = 0;           ///< JIT/anonymous frames
  std::array<uint64_t, 5> jit_frames_by_source{};
};
/// `only`: count only the stacks whose first folded element (profile_stack::thread) it accepts
/// (one process of a tree); empty: all.
name_counts count_names(const profile_data& p,
                        const std::function<bool(const std::string&)>& only = {});

/// What one process published for names.
struct process_names {
  pid_t pid = 0;
  std::string comm;
  std::vector<jit_names::file_report> files;  ///< perf maps and jitdumps looked for
  size_t registry_windows = 0;                ///< jitunwind registry windows loaded
  /// Non-empty when jitwalk ended the command with a signal: how ("SIGTERM at the end of -d").
  std::string ended_by_signal;
  /// The process still ran when the profile ended (-p): its files may not be complete yet.
  bool still_running = false;
  /// Where its files were looked up when not in jitwalk's namespaces (process_view::where).
  std::string where;
  /// One process of several with samples: its lines say its name and sample count.
  bool one_of_tree = false;
  uint64_t samples = 0;
};

/// The summary lines (without the "jitwalk:" prefix): sources found and the samples each
/// named, the unnamed share and the likely reason; `verbose` adds one line per file.
std::vector<std::string> name_report_lines(const name_counts& c, const process_names& p,
                                           bool verbose);

}  // namespace jitwalk
