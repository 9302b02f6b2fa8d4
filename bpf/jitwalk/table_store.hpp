// The walker's tables in BPF memory: a row array and a double-buffered, sorted range index
// (see walker.h for the protocol). table_store works on plain memory views so it can be tested
// without BPF; in jitwalk the views are the mmapped BPF_F_MMAPABLE arrays.
//
// Not thread-safe: one thread (jitwalk's event loop) owns it.
#pragma once

#include "jitwalk/common.hpp"
#include "jitwalk/rows.hpp"
#include "walker.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

namespace jitwalk {

struct table_views {
  std::span<jw_row> rows;
  std::span<jw_range> ranges;  ///< 2 * JW_RANGE_CAP entries: half 0, then half 1
  jw_ctl* ctl = nullptr;
  /// Replaces the row array with one of at least `rows` entries holding the same rows at the
  /// same indexes, and returns it (the walker uses it from then on); null: the array is fixed.
  std::function<result<std::span<jw_row>>(size_t rows)> grow;
};

/// What a range stands for (kept in user space; the BPF side only sees jw_range).
struct range_info {
  table_source source = table_source::sframe;
  uint64_t window_id = 0;   ///< JIT windows
  uint64_t generation = 0;  ///< JIT windows
  std::string label;        ///< object path or "window 7 gen 2", for messages
  /// The address space (walker.h, "Process trees"): ranges of different ones never overlap;
  /// the index holds them tagged, (asid << JW_ASID_SHIFT) | address.
  uint32_t asid = 0;
  /// Non-empty: the rows are the same for every range with this key (one native object's part,
  /// mapped by several processes): they are placed in the row array once and shared, kept until
  /// the last range using them is removed.
  std::string shared_rows;
};

/// The index key of an address in an address space.
constexpr uint64_t asid_key(uint32_t asid, uint64_t addr) {
  return (uint64_t{asid} << JW_ASID_SHIFT) | addr;
}

struct table_stats {
  size_t ranges = 0;
  size_t rows_used = 0;
  size_t rows_capacity = 0;
  size_t commits = 0;
  /// The most rows and ranges committed at once during the run (processes that ended take
  /// their ranges out of the index; these keep what the run needed).
  size_t rows_peak = 0;
  size_t ranges_peak = 0;
  /// Ranges added with rows another range already held (shared_rows), and the rows that saved.
  size_t shared_ranges = 0;
  size_t shared_rows_saved = 0;
  /// Times the row array was replaced by a larger one (table_views::grow).
  size_t grown = 0;
};

class table_store {
 public:
  explicit table_store(table_views views);

  /// Queues a range; it becomes visible to the walker at the next `commit`. Ranges it overlaps
  /// are removed in the same commit (the newest description of an address wins). Returns the
  /// range's uid. `limit_exceeded` if the uid space, rows or index would overflow.
  result<uint32_t> add(range_rows rows, range_info info);
  /// A range over [start, end) with the rows already given for `info.shared_rows` (by a live
  /// range): false, nothing queued, if no live range has them.
  result<uint32_t> add_shared(uint64_t start, uint64_t end, range_info info);
  /// Whether a live range holds the rows of this key (then add_shared needs no rows).
  bool has_shared(const std::string& key) const { return shared_.count(key) != 0; }
  /// Queues the removal of a live or pending range (unknown uids are ignored).
  void remove(uint32_t uid);
  /// Removes every range for which `pred` is true.
  void remove_if(const std::function<bool(const range_info&)>& pred);

  /// Writes pending changes into the inactive half and makes it current. When the rows do not
  /// fit, the array grows (to twice its size or what is needed, at most max_rows) if the views
  /// allow it; `limit_exceeded` if they still do not fit (the failing ranges are dropped and
  /// named, the others published).
  result<void> commit();
  bool dirty() const noexcept { return dirty_; }
  /// The most rows the array may grow to (1 GiB of rows).
  static constexpr size_t max_rows = size_t{1} << 26;

  /// The info of a live (committed or pending) range, or null.
  const range_info* info(uint32_t uid) const;
  /// The live range covering `pc` in address space `asid` (by the last committed index), or 0.
  uint32_t find(uint64_t pc, uint32_t asid = 0) const;
  table_stats stats() const;

 private:
  struct entry {
    uint64_t start = 0, end = 0;
    uint32_t row_first = 0, row_count = 0;
    bool placed = false;  // rows written to the row array
    range_rows pending;   // rows until placed
    range_info info;
  };
  // Rows shared by the ranges of one key (range_info::shared_rows).
  struct shared_slice {
    uint32_t first = 0, count = 0;
    bool placed = false;
    range_rows pending;  // rows until placed
    size_t refs = 0;
  };
  struct released {
    uint32_t first, count;
    size_t commit;  // released by this commit; free once the next commit has rewritten a half
  };

  result<uint32_t> allocate(uint32_t count);
  result<uint32_t> queue(entry e);
  void release_rows(entry& e);
  void free_slots(uint32_t first, uint32_t count);

  table_views v_;
  std::map<uint32_t, entry> live_;  // by uid
  std::map<std::string, shared_slice> shared_;
  std::vector<released> quarantine_;
  std::map<uint32_t, uint32_t> free_;  // first -> count, coalesced
  uint32_t next_uid_ = 1;
  size_t commits_ = 0;
  size_t rows_peak_ = 0, ranges_peak_ = 0;
  size_t shared_ranges_ = 0, shared_rows_saved_ = 0;
  size_t grown_ = 0;
  std::string grow_problem_;  // why the array could not grow
  bool dirty_ = false;
};

}  // namespace jitwalk
