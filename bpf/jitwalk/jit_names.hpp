// Names of JIT code from the three places runtimes publish them: the SDK's code_add USDT events
// (live, exact order), jitdump files (CODE_LOAD / CODE_MOVE, CLOCK_MONOTONIC timestamps) and
// perf maps (/tmp/perf-PID.map, no time: used when nothing else names an address).
//
// Addresses are reused (windows recycled, code moved, functions renamed), so every name carries
// when it was published: the SDK's events give the publication generation (process-wide, only
// growing) and the window; jitdump gives a time. A lookup asks for the name of the code that
// was there at a given publication (see jit_when), else by time.
#pragma once

#include <jitunwind/toolkit/budget.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>
#include "jitwalk/common.hpp"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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

  /// The perf map and jitdump files are the target's (docs/jitwalk.md, "Reading hostile
  /// processes"): opened without following a link and without blocking on a FIFO, only as
  /// regular files owned by `owner` (if set), at most `max_file_bytes` read from each; every
  /// name kept is charged to `budget` (null: not counted), and names that do not fit are
  /// dropped (counted in dropped()).
  void set_limits(jitunwind::toolkit::memory_budget* budget, uint64_t max_file_bytes,
                  std::optional<uid_t> owner);
  /// Paths are resolved in this root directory (the target's, process_view::root_fd; -1:
  /// jitwalk's own). The fd stays the caller's.
  void set_root(int root_fd) noexcept { root_fd_ = root_fd; }

  /// The name of the code at `pc` as `when` says (by generation first, then by time); else the
  /// last perf map line covering it; else null.
  const entry* find(uint64_t pc, const jit_when& when) const;

  /// False if the entry is empty or did not fit the budget (then dropped).
  bool add(entry e);
  /// The newest timed entry covering `pc` published before `before` (ns); else the last perf
  /// map line covering it; else null. At most `max_examined` entries are looked at, nearest
  /// start below `pc` first (the newest of one start first): beyond that many names stacked
  /// over one address, the newest of the nearest ones answers.
  const entry* find(uint64_t pc, uint64_t before = UINT64_MAX) const;
  static constexpr size_t max_examined = 256;
  /// Entries looked at by all find() calls so far (how the bound above is tested).
  uint64_t examined() const noexcept { return examined_; }
  size_t size() const noexcept { return count_; }
  /// Whether any name kept carries a publication generation (the process publishes code_add
  /// events): only then can a generation choose between names.
  bool has_generations() const noexcept { return with_generation_ != 0; }
  /// Names not kept because the memory budget was reached.
  uint64_t dropped() const noexcept { return dropped_; }

  /// Reads what was appended to a perf map since the last call (from the start again if the
  /// file was replaced or truncated); lines that do not parse are skipped. Returns entries
  /// read. A file that cannot be read under the rules above is reported once (warning).
  size_t load_perf_map(const std::string& path);
  /// Reads the records appended to a jitdump file since the last call (CODE_LOAD, CODE_MOVE).
  /// Returns entries read; `malformed` if the header is not a jitdump header, `io_error` if
  /// unreadable, the open errors of guarded_file.
  result<size_t> load_jitdump(const std::string& path);

  /// A perf map or jitdump asked for so far: whether it was there and what it gave (the
  /// name-source report).
  struct file_report {
    std::string path;
    std::string what;  ///< "perf map" or "jitdump"
    bool found = false;
    uint64_t bytes = 0;    ///< bytes read (whole lines or records)
    uint64_t entries = 0;  ///< names read from it
    std::string refused;   ///< why it was not read, if it exists but was refused
  };
  std::vector<file_report> files() const;

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
  struct file_state {
    uint64_t device = 0, inode = 0;
    uint64_t done = 0;    // bytes consumed (whole lines or records)
    std::string refused;  // the last reason the file was not read (reported once)
    std::string what;
    bool found = false;
    uint64_t entries = 0;
  };
  // Reads what was appended to `path` since the last call in pieces, each given to the parser
  // with its file offset; the parser says how many bytes it used (whole lines or records: the
  // rest is offered again next time) and returns how many entries it found.
  using appended_parser =
      std::function<result<size_t>(std::string_view data, uint64_t offset, size_t& used)>;
  result<size_t> read_appended(const std::string& path, const char* what,
                               const appended_parser& parse);
  // The file at `path` under the rules, as `st` knew it: a replaced or truncated file is read
  // from the start (`restarted`).
  result<jitunwind::toolkit::guarded_file> open_names_file(const std::string& path, file_state& st,
                                                          const char* what, bool& restarted);
  std::map<std::string, file_state> files_;
  jitunwind::toolkit::memory_budget* budget_ = nullptr;
  uint64_t max_file_bytes_ = uint64_t{512} << 20;
  std::optional<uid_t> owner_;
  int root_fd_ = -1;
  jitunwind::toolkit::budget_charge charge_;
  uint64_t dropped_ = 0;
  std::map<uint64_t, std::pair<std::string, uint64_t>> jitdump_index_;  // code_index -> name, size
  size_t count_ = 0;
  size_t with_generation_ = 0;
  mutable uint64_t examined_ = 0;
  // Charges `bytes` of names to the budget; false (counted in dropped_) if they do not fit.
  bool charge(uint64_t bytes);
};

}  // namespace jitwalk
