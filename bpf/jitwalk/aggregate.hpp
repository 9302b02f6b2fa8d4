// Drains the BPF aggregation maps, symbolizes new stacks while the target is alive, and keeps
// the statistics jitwalk reports (root / cut / fallback, frames per table source).
#pragma once

#include "jitwalk/bpf_session.hpp"
#include "jitwalk/late_names.hpp"
#include "jitwalk/process_tree.hpp"
#include "jitwalk/profile_data.hpp"
#include "jitwalk/symbolizer.hpp"
#include "jitwalk/tracker.hpp"

#include <array>
#include <map>
#include <string>
#include <unordered_map>

namespace jitwalk {

struct walk_summary {
  uint64_t samples = 0;  ///< aggregated samples (stacks weighted by count)
  uint64_t root = 0;     ///< walked to the outermost frame
  /// ... without a frame-pointer step: every caller came from a table row.
  uint64_t root_tables_only = 0;
  uint64_t fallback = 0;  ///< used the frame-pointer fallback at least once
  uint64_t stale = 0;     ///< refused a freed window's rows at least once
  std::array<uint64_t, JW_STOP_COUNT_> by_stop{};
  /// Frames by how they were unwound: [0] table rows of a JIT window, [1] native .sframe,
  /// [2] native .eh_frame, [3] frame-pointer fallback, [4] last frame of a stack.
  std::array<uint64_t, 5> frames{};
  /// Steps from an interrupted frame without rows to the caller whose return address was at the
  /// stack pointer (JW_M_SP_RA: a frameless leaf the frame-pointer fallback would skip); also
  /// counted in frames[3] (no table was used).
  uint64_t sp_ra = 0;
  /// Steps that failed, by the same source as frames[0..3]: the walk tried that method at its
  /// last frame and stopped there without reaching the root (walker.h, jw_stack.end_method).
  /// Steps tried = frames[i] + failed[i].
  std::array<uint64_t, 4> failed{};
  /// Walks that made no step at all (only the sampled PC, not at the root).
  uint64_t no_step = 0;
  uint64_t kernel_stack_lost = 0;
};

/// The "caller steps" line: shares of the steps tried per source, failures per source, and the
/// walks that made no step ("" when no walk tried a step).
std::string step_counts(const walk_summary& sum);

/// The walk summary of `profile -v`: walks to the root by tables only and through frame-pointer
/// steps, cut walks (those ended at JIT code whose rows were not loaded yet apart), walks that
/// used the frame-pointer fallback; one line each.
std::vector<std::string> walk_accounting(const walk_summary& sum);

/// A frame-pointer step (enum jw_method): no rows for the PC, or a gap, or a freed window's.
bool is_fp_method(unsigned method) noexcept;

const char* stop_name(unsigned stop) noexcept;
/// The stop's key in JSON reports ("unsupported_rule", ...).
const char* stop_key(unsigned stop) noexcept;
/// "3 depth limit, 1 unreadable stack" for the non-zero counts, the outermost frame (a proper
/// end) left out; empty when nothing else ended a walk.
std::string stop_counts(const std::array<uint64_t, JW_STOP_COUNT_>& by_stop);

/// True for the functions where well-formed user stacks end on x86-64 Linux (process and thread
/// entry points of glibc and musl).
bool is_entry_function(const std::string& name) noexcept;

struct aggregate_options {
  bool kernel = false;
  bool per_thread = false;
  bool mark_cut = true;          ///< cut stacks get an outermost "[cut: reason]" frame
  bool merge_processes = false;  ///< label stacks by comm only, not "comm-PID"
  /// Frames left unnamed when first seen are named again at the end (resolve_late).
  bool rename_late = true;
  /// Unnamed code stays one "[unknown 0x...]" frame per address instead of one frame per
  /// mapping (--raw-addresses).
  bool raw_addresses = false;
};

class aggregator {
 public:
  aggregator(bpf_session& bpf, symbolizer& sym, const tracker& tr, profile_data& out,
             aggregate_options o);
  /// Names and labels each sample by its process (process_tree) instead of `sym` and `tr`.
  void follow(process_tree* tree) { tree_ = tree; }
  /// Moves everything aggregated in BPF so far into the profile.
  void drain();
  /// After the last drain: names the frames that were unnamed when first seen against
  /// everything the runtime published by now (the whole perf map and jitdump; a jitdump name
  /// counts only if loaded before the frame was first seen, so a reused address gets the code
  /// that was there), then groups what is still unnamed by mapping (unless raw_addresses).
  late_summary resolve_late();
  const walk_summary& summary() const noexcept { return summary_; }

 private:
  struct cached_frame {
    uint32_t id;
    bool entry;
  };
  uint32_t user_frame(const jw_frame& frame, bool caller, bool fp_found, bool sp_found, bool* entry,
                      uint32_t tgid);
  const std::string& thread_name(uint32_t tgid, uint32_t tid);

  bpf_session& bpf_;
  symbolizer* sym_;    // of the sample being drained (its address space)
  const tracker* tr_;  // likewise
  uint32_t asid_ = 0;
  process_tree* tree_ = nullptr;
  profile_data& out_;
  aggregate_options o_;
  walk_summary summary_;
  // A user stack, symbolized the first time it is seen (its hash covers the PCs and the tables
  // used, so later samples with the same hash are the same code).
  struct known_stack {
    std::vector<uint32_t> frames;  // profile frame ids, leaf first
    std::array<uint64_t, 5> steps{};
    uint64_t sp_ra = 0;
    int failed = -1;  // the source (0..3) whose step failed at the last frame, -1: none
    uint8_t stop = 0;
    bool root = false, fallback = false, stale = false;
  };
  const known_stack& know(uint64_t hash, const jw_stack* st, uint32_t tgid);
  late_names late_;  // frames unnamed when first seen
  std::unordered_map<uint64_t, known_stack> stacks_;
  std::map<std::tuple<uint64_t, bool, bool, bool, jit_when, uint32_t>, cached_frame> frame_cache_;
  std::map<uint64_t, uint32_t> kernel_cache_;
  std::map<std::pair<uint32_t, uint32_t>, std::string> thread_names_;  // (tid or tgid, asid)
};

}  // namespace jitwalk
