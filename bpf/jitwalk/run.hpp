// What `profile` and `verify` share: starting or attaching to the target, loading and attaching
// the walker, the event loop, signals.
#pragma once

#include "jitwalk/bpf_session.hpp"
#include "jitwalk/proc.hpp"
#include "jitwalk/process_tree.hpp"
#include "jitwalk/symbolizer.hpp"
#include "jitwalk/table_store.hpp"
#include "jitwalk/tracker.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace jitwalk {

struct target_spec {
  pid_t pid = 0;                     ///< -p
  std::vector<std::string> command;  ///< -- CMD ARGS
};

struct run_options {
  target_spec target;
  bpf_options bpf;
  tracker_options tracker;
  uint32_t max_depth = JW_DEFAULT_DEPTH;
  bool kernel_stacks = false;
  bool per_thread = false;
  bool fp_only = false;      ///< walk with frame pointers only (our BPF walker)
  bool sync_tables = false;  ///< SIGSTOP the target on window_publish until its rows are loaded
  /// Follow the processes the target forks and exec's (docs/jitwalk.md, "Process trees").
  bool follow_children = false;
  double duration_s = 0;  ///< 0 = until the command exits / Ctrl-C
  /// What the target's data may make jitwalk hold (--max-memory): symbols of its objects, its
  /// JIT names, section and SFrame copies being converted (docs/jitwalk.md, "Reading hostile
  /// processes").
  uint64_t max_memory = uint64_t{1} << 30;
  /// The most read from one perf map or jitdump, and the largest ELF section read (--max-file).
  uint64_t max_file_bytes = uint64_t{512} << 20;
  /// Cache converted native tables by build ID across runs (--no-table-cache, --table-cache DIR;
  /// empty dir: table_cache::default_dir()).
  bool table_cache = true;
  std::string table_cache_dir;
};

/// A prepared session: BPF loaded, target started (gated) or attached, tables and probes set.
class run_session {
 public:
  static result<std::unique_ptr<run_session>> start(const run_options& o);
  ~run_session();

  bpf_session& bpf() { return *bpf_; }
  /// The tracker and symbolizer of the target's current image (a new one after it exec'd).
  tracker& track() { return tree_->root_tracker(); }
  symbolizer& sym() { return tree_->root_sym(); }
  /// The target and the processes followed with it.
  process_tree& processes() { return *tree_; }
  const table_store& tables() const { return *tables_; }
  pid_t pid() const { return pid_; }
  child_process* child() { return child_ ? &*child_ : nullptr; }
  const std::string& process_name() const { return process_name_; }
  const jitunwind::toolkit::memory_budget& budget() const { return *budget_; }
  /// The native table cache, or null when disabled.
  const table_cache* cache() const { return cache_ && cache_->enabled() ? cache_.get() : nullptr; }

  /// Lets a gated command run (no-op for -p). Errors name the command.
  result<void> go();
  /// Runs the event loop until the command exits, the process disappears, the duration passes
  /// or SIGINT/SIGTERM arrives. `tick` is called about every `tick_ms`.
  void loop(const std::function<void()>& tick, int tick_ms = 1000);
  /// Sampling is over: no BPF handler stops a process of the tree from now on, and those it
  /// stopped are resumed (a process ended with a signal must be running to act on it).
  void release_all();
  /// Why loop() returned.
  std::string stop_reason() const { return stop_reason_; }
  double elapsed_s() const;

 private:
  run_session() = default;
  run_options o_;
  std::unique_ptr<jitunwind::toolkit::memory_budget> budget_;
  std::unique_ptr<bpf_session> bpf_;
  std::unique_ptr<table_store> tables_;
  std::unique_ptr<symbolizer> sym_;
  std::unique_ptr<table_cache> cache_;
  std::map<std::string, native_summary> shared_native_;  // tracker_options::shared_native
  shared_objects shared_objects_;                        // symbolizer_limits::objects
  std::unique_ptr<tracker> tracker_;
  std::unique_ptr<process_tree> tree_;
  std::optional<child_process> child_;
  pid_t pid_ = 0;
  std::string process_name_;
  std::chrono::steady_clock::time_point started_;
  std::string stop_reason_;
};

/// Installs SIGINT/SIGTERM handlers that make loop() return; true once one arrived.
void install_stop_signals();
bool stop_requested();

}  // namespace jitwalk
