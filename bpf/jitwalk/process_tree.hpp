// Process trees: the processes a profile follows (the target and, when asked, the processes it
// forks and exec's, recursively) and what each needs to be walked and named.
//
// The BPF side keeps jw_follow (tgid -> address-space id, walker.h "Process trees"): the fork
// tracepoint adds a new process of a followed one with its parent's asid, the exec tracepoint
// gives the process a fresh asid, the exit tracepoint removes it; each sends an event here.
// An address space has one symbolizer and one tracker (tables, probes, JIT windows): the
// target's are the run's own (asid 0); an exec'd process gets new ones, loaded while the BPF
// handler holds it stopped at its first instruction (commands only). A forked child uses its
// parent's until it execs: the mappings are the same at the fork; code it loads or generates
// after the fork (dlopen, its own JIT windows) is not followed (frame-pointer fallback,
// [unknown] names).
//
// A process image ("process between two execs") is labelled "comm-PID" in the profile. Images
// that ended keep their symbolizer and tracker until the end of the run (stacks are named at the
// end); their tables leave the BPF index as soon as no live process uses the address space.
//
// Single-threaded: called from jitwalk's event loop.
#pragma once

#include "jitwalk/bpf_session.hpp"
#include "jitwalk/symbolizer.hpp"
#include "jitwalk/table_store.hpp"
#include "jitwalk/tracker.hpp"

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace jitwalk {

struct process_tree_options {
  symbolizer_limits limits;  ///< for the symbolizers of exec'd processes
  tracker_options tracker;   ///< for their trackers (the asid is set per address space)
};

/// A process between two execs.
struct process_image {
  pid_t pid = 0;
  pid_t parent = 0;  ///< 0 for the target
  uint32_t asid = 0;
  std::string comm;
  uint64_t samples = 0;
  bool ended = false;  ///< exited or exec'd
};

class process_tree {
 public:
  process_tree(bpf_session& bpf, table_store& tables, process_tree_options o);
  ~process_tree();

  /// The target, walked with the run's own symbolizer and tracker in address space 0.
  /// `started_by_us`: its first exec is the command's own start (keeps asid 0).
  result<void> add_root(pid_t pid, const std::string& comm, symbolizer& sym, tracker& tr,
                        bool started_by_us);

  /// Handles fork / exec / exit events; other events go to the tracker of their process.
  void on_event(const void* data, size_t size);
  /// Publishes table changes of every address space and resumes processes stopped for them.
  void flush();
  /// Re-reads the JIT registries of the live processes that own an address space.
  void sync_registry();
  /// SIGCONT to every live followed process (the run ends: none may stay stopped by a handler
  /// whose event jitwalk will not read).
  void resume_all();
  /// Re-reads the maps of live address spaces (names of code loaded since).
  void refresh_symbols();

  /// The symbolizer and tracker stacks of address space `asid` are named with (the target's
  /// for an asid never announced).
  symbolizer& sym(uint32_t asid);
  const tracker& track(uint32_t asid) const;
  /// Those of the target's current image: after the target exec'd (a wrapper such as env or a
  /// version-manager shim), the new program's. Its checkpoint handler moves along.
  symbolizer& root_sym() { return sym(root_last_asid_); }
  tracker& root_tracker() { return *spaces_.at(root_last_asid_).tr; }

  /// The first folded element of samples of process `tgid` (thread `tid`, 0: per process) in
  /// address space `asid`: "comm-PID" ("comm-PID/TID"), or with `merge` "comm" ("comm/TID").
  std::string label(uint32_t tgid, uint32_t tid, uint32_t asid, bool merge);
  /// Counts samples of an image (summary).
  void count(uint32_t tgid, uint32_t asid, uint64_t n);

  /// The summary's task line: processes and threads sampled, the busiest processes, samples of
  /// tasks not followed, and of tasks sampled while exiting (a followed process's last moments
  /// in the kernel, after jitwalk stopped following it).
  std::string summary(uint64_t not_followed, uint64_t exiting);
  /// The tables of every address space of the run added up (the summary's tables line: for one
  /// process, its own).
  tracker_stats total_stats() const;
  /// The images with samples, the busiest first (the summary's per-process name reports).
  std::vector<process_image> sampled() const;
  /// Processes with samples (other than `except`).
  size_t processes_sampled(pid_t except = 0) const;

 private:
  struct space {
    symbolizer* sym = nullptr;
    tracker* tr = nullptr;
    std::unique_ptr<symbolizer> own_sym;
    std::unique_ptr<tracker> own_tr;
    int live = 0;  // live processes in it
  };
  process_image& image(uint32_t tgid, uint32_t asid);
  void leave(uint32_t tgid);
  void on_exec(uint32_t tgid, uint32_t asid, const std::string& comm, bool stopped);

  bpf_session& bpf_;
  table_store& tables_;
  process_tree_options o_;
  std::map<uint32_t, space> spaces_;                               // by asid
  std::map<std::pair<uint32_t, uint32_t>, process_image> images_;  // (tgid, asid)
  std::map<uint32_t, uint32_t> live_;                              // tgid -> asid
  uint32_t root_ = 0;                                              // the target's tgid
  uint32_t root_last_asid_ = 0;  // the address space of its newest image
};

}  // namespace jitwalk
