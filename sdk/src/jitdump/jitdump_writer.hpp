// Private: the jitdump publisher (`jit-PID.dump` for `perf inject --jit`), driven by the
// session/window module.
//
// Usage with perf:
//   perf record -k 1 -e cpu-clock --call-graph dwarf -p PID   (CLOCK_MONOTONIC timestamps)
//   perf inject --jit -i perf.data -o perf.jit.data             (writes jitted-PID-N.so next to
//                                                                the dump)
//   perf report -i perf.jit.data
#pragma once

#include <jitunwind/cfi.h>
#include <jitunwind/frame.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>

#include "perfmap/record_file.hpp"

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::detail {

struct jitdump_options {
  /// Directory of jit-PID.dump; empty: $JITDUMPDIR if set, else /tmp. perf inject writes the
  /// jitted-PID-N.so files into the same directory, and perf's libdw unwinder only treats
  /// objects whose path starts with "/tmp/jitted-" as JIT objects: keep it under /tmp for
  /// `--call-graph dwarf` (the default does).
  std::string dir;
  pid_t pid = 0;  ///< 0: getpid()
  abi target = abi::amd64;
  /// Write CODE_UNWINDING_INFO (.eh_frame + .eh_frame_hdr) before each CODE_LOAD that comes
  /// with rows.
  bool unwinding_info = true;
  /// perf builds with libcrypto derive the build-id of jitted-PID-N.so from (code_addr, code)
  /// and merge objects with equal build-ids; identical code re-loaded at a reused address would
  /// then show the first name. true: the last (up to 8) code bytes copied into the dump are
  /// XORed with a per-writer salt and the code index (the live code is untouched; perf annotate
  /// shows the altered bytes).
  bool unique_build_ids = false;
  log_sink log;
  /// When records reach the file (perfmap/record_file.hpp). The writer's default is sync;
  /// sessions pass their durability (batched by default). Either way each record's timestamp
  /// is the time of the call that made it (perf inject matches samples by it).
  file_policy policy;
};

/// One function to announce.
struct jitdump_load {
  std::string_view name;  ///< NUL bytes and control characters become '?'
  uint64_t code_addr = 0;
  std::span<const uint8_t> code;         ///< the code bytes (as at code_addr); size = code size
  const function_desc* frame = nullptr;  ///< rows for CODE_UNWINDING_INFO; start == code_addr
  /// The caller has already made sure `name` has no control bytes (window::append rejects
  /// them): it is copied without being scanned again.
  bool clean_name = false;
};

/// One function of a batch (`jitdump_writer::write_batch`).
struct jitdump_entry {
  /// A CODE_LOAD; for a move, `code_addr` is the new address, `code.size()` the code size and
  /// `frame` the rows at the new address (name and code bytes unused).
  jitdump_load load;
  /// Set: CODE_MOVE of this code index from `old_addr` (same bytes) instead of a CODE_LOAD.
  std::optional<uint64_t> move_index;
  uint64_t old_addr = 0;
};

/// Unwinding info laid out for perf's genelf (see jitdump_writer.cpp).
struct jitdump_unwinding {
  std::vector<uint8_t> data;  ///< .eh_frame then .eh_frame_hdr
  uint64_t eh_frame_hdr_size = 0;
  uint64_t mapped_size = 0;
};

/// .eh_frame + .eh_frame_hdr for a function loaded with `code_size` bytes at `code_addr`,
/// positioned where perf inject puts them in jitted-PID-N.so (right after the code, 8-byte
/// aligned). `frame == nullptr`: a CIE without FDEs and mapped_size 0 (no unwinding info).
result<jitdump_unwinding> make_jitdump_unwinding(abi target, uint64_t code_addr, uint64_t code_size,
                                                 const function_desc* frame);

/// Writes DIR/jit-PID.dump. The file stays mapped (PROT_READ|PROT_EXEC, MAP_PRIVATE) while the
/// writer lives so that `perf record` sees its path. Thread-safe: the records of each call stay
/// together (CODE_UNWINDING_INFO with its CODE_LOAD or CODE_MOVE; a batch's records all
/// together), in call order; under sync they are written with one `write` before the call
/// returns, under batched with other calls' records later, built straight into the write buffer
/// (record_file.hpp). A failed write leaves the file ending at a complete record. A process
/// killed in the middle of a write that spans pages can leave a cut-off last record (the kernel
/// checks for fatal signals between pages): perf and `jitdump::parse` read a file up to its
/// last complete record.
class jitdump_writer {
 public:
  /// Creates/truncates the dump (same safety rules as the perf map: no symlinks, regular file,
  /// owned by us), writes the header and maps it. unsupported: the directory does not allow
  /// PROT_EXEC mappings (noexec mount).
  static result<std::unique_ptr<jitdump_writer>> create(const jitdump_options& options);
  ~jitdump_writer();  ///< close() if not done
  jitdump_writer(const jitdump_writer&) = delete;
  jitdump_writer& operator=(const jitdump_writer&) = delete;

  /// Writes CODE_UNWINDING_INFO (if rows are given and enabled) then CODE_LOAD. Returns the
  /// code index (the N of jitted-PID-N.so). invalid_argument: empty code or name, rows that do
  /// not start at code_addr or extend past the code; bad_state after close().
  /// perf maps each injected object over [code_addr, code_addr + ALIGN_8(size) + mapped_size):
  /// code placed inside the previous load's range hides that load's unwinding data from perf,
  /// so the writer logs a warning then (leave `make_jitdump_unwinding(...).mapped_size` bytes
  /// after ALIGN_8(size) free, as the test JIT does).
  result<uint64_t> load(const jitdump_load& load);

  /// The code of `code_index` was copied from old_addr to new_addr (same bytes). perf maps the
  /// same jitted-PID-N.so at the new address. When `frame` (rows at new_addr) is given,
  /// CODE_UNWINDING_INFO is written first so the injected mapping covers the unwinding data.
  result<void> move(uint64_t code_index, uint64_t old_addr, uint64_t new_addr, uint64_t code_size,
                    const function_desc* frame = nullptr);

  /// The records of several functions with one `write` (one system call for the batch): for
  /// each entry in order what `load` or `move` would write, all with one timestamp. Every entry
  /// is checked first (errors as `load` / `move`); if one is bad, nothing is written. When
  /// `indices` is given it receives one code index per entry (a load's new index, or the moved
  /// one). An empty batch writes nothing.
  result<void> write_batch(std::span<const jitdump_entry> entries,
                           std::vector<uint64_t>* indices = nullptr);

  /// Writes the buffered records (batched) now; see record_file::flush.
  result<void> flush() { return file_->flush(); }
  /// Writes them if the oldest is due at `now_ns` (CLOCK_MONOTONIC).
  result<void> flush_if_due(uint64_t now_ns) { return file_->flush_if_due(now_ns); }

  /// Writes CODE_CLOSE (after everything buffered), unmaps and closes. Further calls return
  /// bad_state. In a forked child nothing is written (the dump is the parent's).
  result<void> close();

  const std::string& path() const noexcept { return path_; }
  /// Records made so far (written, or buffered under batched).
  uint64_t records_written() const noexcept;

 private:
  jitdump_writer() = default;
  result<void> check_entry(const jitdump_entry& e) const;
  /// Appends a CODE_UNWINDING_INFO record to `out` (caller holds the file's lock); returns
  /// mapped_size.
  result<uint64_t> append_unwinding(std::vector<uint8_t>& out, uint64_t code_addr,
                                    uint64_t code_size, const function_desc* frame,
                                    uint64_t timestamp);

  jitdump_options options_;
  std::string path_;
  /// The dump after its header; its lock guards the state below.
  std::unique_ptr<record_file> file_;
  void* marker_ = nullptr;
  size_t marker_len_ = 0;
  uint64_t next_index_ = 0;
  uint64_t records_ = 0;
  uint64_t salt_ = 0;
  pid_t pid_ = 0;
  /// perf keeps the last CODE_UNWINDING_INFO until a CODE_LOAD consumes it; after a MOVE that
  /// carried one, a LOAD without rows must reset it (see load()).
  bool unconsumed_unwinding_ = false;
  /// What perf inject --jit will map, by start address (see note_perf_view): the code's end,
  /// the end of the mapping (code + ALIGN_8 padding + mapped_size, cut where a newer load
  /// starts), the code index, whether it carries unwinding data.
  struct perf_map {
    uint64_t code_end, map_end, index;
    bool unwinding;
  };
  std::map<uint64_t, perf_map> perf_maps_;
  /// Reused for every CODE_UNWINDING_INFO: the CIE is built once.
  std::optional<cfi::encoder> cfi_;
  struct load_done {
    uint64_t addr, size, mapped, index;
    std::string_view name;
  };
  std::vector<load_done> loads_;  // loads of one call, for the overlap warnings
  /// Adds a load to perf_maps_; what perf will get wrong because of it goes to `warnings`.
  void note_perf_view(const load_done& d, std::vector<std::string>& warnings);
};

}  // namespace jitunwind::detail
