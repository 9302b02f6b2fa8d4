// Names of JIT code from the three places runtimes publish them: the SDK's code_add USDT events
// (live, exact order), jitdump files (CODE_LOAD / CODE_MOVE, CLOCK_MONOTONIC timestamps) and
// perf maps (/tmp/perf-PID.map, no time: used when nothing else names an address).
//
// Addresses are reused (windows recycled, code moved, functions renamed), so every name carries
// when it was published: the SDK's events give the publication generation (process-wide, only
// growing) and the window; jitdump gives a time. A lookup asks for the name of the code that
// was there at a given publication (see jit_when), else by time.
#pragma once

#include "jitwalk/common.hpp"

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace jitwalk {

/// Which code a frame is to be named by.
struct jit_when {
  /// != 0: the frame was unwound with the rows of this window at `generation`: its code is the
  /// window's newest function at the PC published at or before that generation.
  uint64_t window_id = 0;
  /// With window_id: the rows' generation. Without: the newest publication when the sample was
  /// taken (the walk's stamp), so the code is the newest published at the PC by then in any
  /// window. 0: not known.
  uint64_t generation = 0;
  /// When no name carries a generation (events lost, names from jitdump only): the newest name
  /// published before this time (ns).
  uint64_t before = UINT64_MAX;
  auto operator<=>(const jit_when&) const = default;
};

class jit_names {
 public:
  enum class origin : uint8_t { event, jitdump, perfmap };

  struct entry {
    uint64_t start = 0;
    uint64_t size = 0;
    std::string name;
    uint64_t time = 0;  ///< CLOCK_MONOTONIC ns; for perf map lines the line number
    origin from = origin::event;
    uint64_t window_id = 0;   ///< code_add events: the window
    uint64_t generation = 0;  ///< code_add events: the publication (0: not given)
  };

  void add(entry e);
  /// The name of the code at `pc` as `when` says (by generation first, then by time); else the
  /// last perf map line covering it; else null.
  const entry* find(uint64_t pc, const jit_when& when) const;
  /// The newest timed entry covering `pc` published before `before` (ns); else the last perf
  /// map line covering it; else null.
  const entry* find(uint64_t pc, uint64_t before = UINT64_MAX) const;
  size_t size() const noexcept { return count_; }

  /// Reads what was appended to a perf map since the last call; lines that do not parse are
  /// skipped. Returns entries read.
  size_t load_perf_map(const std::string& path);
  /// Reads the records appended to a jitdump file since the last call (CODE_LOAD, CODE_MOVE).
  /// Returns entries read; `malformed` if the
  /// header is not a jitdump header, `io_error` if unreadable.
  result<size_t> load_jitdump(const std::string& path);

  /// The parsers behind the loaders, on bytes already read. `done` / `used`: bytes consumed
  /// (whole records or lines; a partial last one is left for the next call).
  result<size_t> parse_jitdump(std::string_view data, size_t& done);
  size_t parse_perf_map(std::string_view text, size_t& used);
  /// Whole jitdump records in `data` (which starts at file offset `done`); advances `done`.
  size_t parse_jitdump_records(std::string_view data, size_t& done);

 private:
  std::map<uint64_t, std::vector<entry>> timed_;    // by start; each vector in insertion order
  std::map<uint64_t, std::vector<entry>> perfmap_;  // by start
  uint64_t max_size_ = 0;
  uint64_t perfmap_lines_ = 0;
  std::map<std::string, size_t> consumed_;  // bytes already read per file (files only grow)
  std::map<uint64_t, std::pair<std::string, uint64_t>> jitdump_index_;  // code_index -> name, size
  size_t count_ = 0;
};

}  // namespace jitwalk
