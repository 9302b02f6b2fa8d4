// The loaded BPF walker: skeleton lifecycle, map views, perf events, probes, ring buffer.
#pragma once

#include "jitwalk/common.hpp"
#include "jitwalk/table_store.hpp"
#include "walker.h"

#include <sys/types.h>

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct walker;
struct bpf_link;
struct ring_buffer;
struct bpf_program;

namespace jitwalk {

struct bpf_options {
  uint32_t row_capacity = 1u << 20;         ///< rows in jw_rows (16 bytes each)
  uint32_t stack_capacity = 8192;           ///< distinct user stacks between drains
  uint32_t stack_depth = JW_DEFAULT_DEPTH;  ///< frames a stored stack holds (<= JW_MAX_DEPTH)
  uint32_t count_capacity = 65536;  ///< distinct (stack, thread, kernel stack) keys between drains
};

enum class program {
  sample,
  sample_kfp,
  checkpoint,
  window_publish,
  window_retire,
  window_free,
  code_add,
  loader
};
const char* to_string(program p) noexcept;

struct prog_stats {
  uint64_t run_time_ns = 0;
  uint64_t run_cnt = 0;
};

class bpf_session {
 public:
  /// Opens, sizes and loads the walker (the verifier runs here). Errors name what failed
  /// (`permission_denied` without root/CAP_BPF, `io_error` otherwise) and carry libbpf's message.
  static result<std::unique_ptr<bpf_session>> open(const bpf_options& o);
  ~bpf_session();

  /// Runtime settings (BPF .data, shared with the kernel; writes take effect immediately).
  jw_config& config();
  table_views views();
  /// Replaces the walker's row array by one of `capacity` rows holding the current rows at the
  /// same indexes (table_views::grow). `io_error` if the kernel refuses.
  result<std::span<jw_row>> grow_rows(size_t capacity);

  /// cpu-clock sampling at `hz` with `which` (sample or sample_kfp), on the given threads: one
  /// per-task event each, inherited by the threads and processes they create later (so a command
  /// started by jitwalk needs only its first thread). Threads already attached are skipped; a
  /// thread that exited meanwhile is ignored. `io_error` if no event at all could be attached.
  result<void> attach_sampling(program which, unsigned hz, const std::vector<pid_t>& tids);
  /// Same on every online CPU (system-wide events, filtered by the target's PID in BPF).
  result<void> attach_sampling_cpus(program which, unsigned hz);
  /// Stops sampling (closes the perf events); probes stay attached.
  void detach_sampling();
  /// USDT probe `provider:name` in the object at `path`, for process `pid`.
  result<void> attach_usdt(program which, pid_t pid, const std::string& path,
                           const std::string& provider, const std::string& name);
  /// Uprobe on a function entry of the object at `path`, for process `pid`.
  result<void> attach_uprobe(program which, pid_t pid, const std::string& path,
                             const std::string& function);
  size_t link_count() const noexcept { return links_.size(); }

  /// Delivers ring buffer records (a walker.h event) to `handler`; waits up to `timeout_ms`.
  /// Returns the number of records consumed.
  using event_handler = std::function<void(const void* data, size_t size)>;
  result<int> poll_events(int timeout_ms, const event_handler& handler);

  /// Reads and removes every aggregated count; `fn(key, count)` for each.
  void drain_counts(const std::function<void(const jw_count_key&, uint64_t)>& fn);
  std::optional<jw_stack> read_stack(uint64_t hash);
  void delete_stack(uint64_t hash);
  std::vector<uint64_t> read_kernel_stack(int32_t id);

  /// jw_windows maintenance (user space never creates entries).
  void delete_window_state(uint64_t id);
  std::optional<jw_window_state> read_window_state(uint64_t id);
  size_t window_state_count();

  /// Process trees (walker.h): follows process `tgid` in address space `t.asid`.
  result<void> follow(uint32_t tgid, const jw_task& t);
  /// Attaches the fork / exec / exit tracepoints (`io_error` naming the one that failed).
  result<void> attach_process_events();
  /// Every thread sampled so far: tid -> tgid.
  std::vector<std::pair<uint32_t, uint32_t>> sampled_threads();

  std::array<uint64_t, JW_STAT_COUNT_> stats();
  /// Kernel-measured run time of a program (needs stats enabled: `enable_run_time_stats`).
  prog_stats stats_of(program p);
  result<void> enable_run_time_stats();

 private:
  bpf_session() = default;
  ::bpf_program* prog(program p);

  walker* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  std::vector<int> perf_fds_;
  std::vector<bpf_link*> perf_links_;
  std::set<pid_t> sampled_tids_;
  ring_buffer* rb_ = nullptr;
  const event_handler* current_handler_ = nullptr;
  void* rows_map_ = nullptr;
  size_t rows_map_size_ = 0;
  size_t rows_capacity_ = 0;
  int rows_fd_ = -1;  // the row array that replaced the skeleton's (grow_rows), or -1
  void* ranges_map_ = nullptr;
  size_t ranges_map_size_ = 0;
  void* ctl_map_ = nullptr;
  size_t ctl_map_size_ = 0;
  int stats_fd_ = -1;
  int ncpus_ = 1;
};

}  // namespace jitwalk
