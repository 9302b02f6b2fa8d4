// Keeps the walker's tables and probes in step with the target process:
//  - native objects: every executable file mapping gets its .sframe/.eh_frame rows, and SDT
//    probes of interest (the SDK's jitunwind:* events, ground-truth `checkpoint` probes) are
//    attached; re-scanned when the dynamic loader reports a change or the SDK maps a dynamic
//    USDT provider (jitunwind:usdt_load, which the loader never sees);
//  - JIT windows: read from the target's registry (SDK reference reader), validated, converted,
//    loaded; replaced on window_publish, dropped on window_free; rejected windows are reported by
//    id once and never loaded;
//  - names: code_add events feed the symbolizer.
// Single-threaded: called from jitwalk's event loop.
#pragma once

#include <jitunwind/remote.h>

#include "guarded/budget.hpp"
#include "jitwalk/bpf_session.hpp"
#include "jitwalk/native_tables.hpp"
#include "jitwalk/symbolizer.hpp"
#include "jitwalk/table_cache.hpp"
#include "jitwalk/table_store.hpp"

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace jitwalk {

struct tracker_options {
  native_policy native;
  bool jit = true;                  ///< load JIT windows from the registry
  bool attach_events = true;        ///< attach jitunwind:* USDT events
  bool attach_checkpoints = false;  ///< attach every `checkpoint` probe (verify)
  std::string checkpoint_provider;  ///< only this provider's checkpoint probes ("" = any)
  /// jw_windows (BPF, 65536 entries) is pruned of windows that are gone once the USDT handlers
  /// have created more entries than this.
  size_t window_state_limit = 32768;
  /// The run's memory budget: a window's SFrame copy is charged while it is converted (null:
  /// not counted).
  jitunwind::detail::memory_budget* budget = nullptr;
  /// The process's address space id (walker.h, "Process trees"): its ranges are tagged with it.
  uint32_t asid = 0;
  /// Converted native tables are cached here across runs (table_cache.hpp); null: not cached.
  table_cache* cache = nullptr;
};

struct window_info {
  uint64_t id = 0;
  uint64_t generation = 0;
  uint64_t text_start = 0, text_size = 0;
  uint32_t uid = 0;  ///< 0 if not loaded (rejected, no SFrame yet)
  jitunwind::remote::window_state state = jitunwind::remote::window_state::live;
};

/// A checkpoint event with its variable-size parts (valid during the handler call only).
struct checkpoint_record {
  const jw_checkpoint_event* e = nullptr;
  std::span<const uint64_t> truth;  ///< ground truth, innermost first
  std::span<const uint64_t> fp;     ///< the kernel's frame-pointer walk
  std::span<const jw_frame> walk;   ///< our walk
};

struct tracker_stats {
  size_t objects = 0;            ///< executable mappings with tables
  size_t objects_sframe = 0;     ///< ... of which with .sframe
  size_t objects_sframe_v1 = 0;  ///< ... version 1 (binutils 2.40)
  size_t objects_sframe_v2 = 0;  ///< ... version 2 (binutils 2.41-2.45, LLVM)
  size_t objects_sframe_v3 = 0;  ///< ... version 3 (binutils >= 2.46)
  size_t objects_without = 0;    ///< executable mappings with no usable table
  size_t windows_loaded = 0;     ///< window generations loaded
  size_t windows_rejected = 0;   ///< window generations refused (hostile / invalid SFrame)
  size_t windows_freed = 0;
  size_t windows_vanished = 0;      ///< changed or freed before their SFrame could be read
  size_t slots_skipped = 0;         ///< registry entries the reader left out (said once each)
  size_t windows_untracked = 0;     ///< windows not followed: the memory budget was reached
  size_t window_states_pruned = 0;  ///< jw_windows entries deleted for windows that are gone
  size_t registry_reads = 0;
  size_t probes_attached = 0;
  size_t code_names = 0;
};

class tracker {
 public:
  tracker(bpf_session& bpf, table_store& tables, symbolizer& sym, pid_t pid, tracker_options o);

  /// Attaches the loader uprobe in the target's dynamic loader (`interp` path) — for a command
  /// started by jitwalk before it runs — or, if empty, in the ld.so found in its maps.
  result<void> attach_loader(const std::string& interp = {});
  /// Attaches wanted probes in an ELF file that is not mapped yet (the command's executable).
  void attach_probes_in(const std::string& path);

  /// Re-reads the maps: new executable objects get tables and probes, gone ones are dropped.
  void scan_objects();
  /// Reads the registry; loads new window generations, drops windows no longer present.
  void sync_registry();
  /// Handles one ring-buffer record other than checkpoints (those go to `checkpoint_handler`).
  void on_event(const void* data, size_t size);
  /// Publishes pending table changes and resumes the target if a handler stopped it.
  void flush();

  std::function<void(const checkpoint_record&)> checkpoint_handler;

  /// Is `pc` inside the text of a window currently known (live or retired)?
  const window_info* window_at(uint64_t pc) const;
  /// Time (bpf_ktime ns) the window behind range `uid` was freed; UINT64_MAX if not freed.
  uint64_t freed_time(uint32_t uid) const;
  /// Which code a walked frame is to be named by: a frame unwound with a JIT window's rows by
  /// that window and generation; a frame walked without rows by the publication stamp the
  /// walker gave it (the newest publication at the sample). Known for every uid ever loaded.
  jit_when naming(const jw_frame& f) const;
  /// The name the target gave the code at `pc` by its latest code_add event processed so far
  /// (events arrive in the target's order: at a checkpoint, the code live at that moment);
  /// null if none covers it. An oracle for verify, independent of `naming`.
  const std::string* live_name(uint64_t pc) const;
  const tracker_stats& stats() const noexcept { return stats_; }
  pid_t pid() const noexcept { return pid_; }
  uint32_t asid() const noexcept { return o_.asid; }
  /// Rejections so far: "window 7 (generation 12): <reason>" (the first 100, then "...").
  const std::vector<std::string>& rejections() const noexcept { return rejections_; }

 private:
  struct object_key {
    uint64_t dev, inode, start;
    auto operator<=>(const object_key&) const = default;
  };
  void attach_object_probes(const std::string& path, const elf_file& obj, uint64_t dev,
                            uint64_t inode);
  // load_window: a new window or generation replaces what was known of it; its SFrame is read
  // (read_window_sframe), turned into rows for its text (window_rows) and added to the tables.
  // A window that cannot be used is rejected (reject_window), one that went away meanwhile is
  // forgotten (the registry is read again).
  void load_window(const jitunwind::remote::window_record& w);
  std::optional<std::vector<uint8_t>> read_window_sframe(const jitunwind::remote::window_record& w);
  result<range_rows> window_rows(const jitunwind::remote::window_record& w,
                                 const std::vector<uint8_t>& sframe);
  void reject_window(const jitunwind::remote::window_record& w, const std::string& why);
  void drop_window(uint64_t id, uint64_t up_to_generation, uint64_t time);
  void prune_window_states();

  bpf_session& bpf_;
  table_store& tables_;
  symbolizer& sym_;
  pid_t pid_;
  tracker_options o_;
  std::map<object_key, uint32_t> objects_;          // executable mapping -> uid (0: no table)
  std::set<std::pair<uint64_t, uint64_t>> probed_;  // (dev, inode) whose probes are attached
  // (dev, inode) -> its parsed functions, during one scan_objects
  std::map<std::pair<uint64_t, uint64_t>, std::optional<result<native_functions>>> parsed_;
  std::optional<jitunwind::remote::registry_reader> reader_;
  std::map<uint64_t, window_info> windows_;                        // by window id
  std::set<std::pair<uint64_t, uint64_t>> rejected_;               // (id, generation)
  std::set<std::tuple<uint64_t, uint32_t, std::string>> skipped_;  // registry, slot, reason
  std::map<uint32_t, uint64_t> freed_at_;                          // uid -> time
  // uid -> (window id, generation) of every JIT range ever loaded (stacks are named after the
  // range may be gone).
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> uid_windows_;
  uint64_t newest_generation_ = 0;  // announced by window_publish or code_add
  // start -> (end, name) of the latest code_add covering each byte (live_name).
  std::map<uint64_t, std::pair<uint64_t, std::string>> live_names_;
  std::set<uint64_t> bpf_window_ids_;             // ids the USDT handlers made entries for
  std::map<uint64_t, uint64_t> max_loaded_gen_;   // id -> newest generation ever loaded
  std::map<uint64_t, size_t> dropped_at_commit_;  // id -> table commit count when dropped
  std::vector<std::string> rejections_;
  jitunwind::detail::budget_charge track_charge_;
  tracker_stats stats_;
  mutable std::vector<std::pair<uint64_t, const window_info*>> window_index_;  // by text start
  mutable bool window_index_dirty_ = true;
  bool resume_ = false;
  bool registry_dirty_ = false;
  bool objects_dirty_ = false;
  uint64_t registry_missing_since_ = 0;
};

}  // namespace jitwalk
