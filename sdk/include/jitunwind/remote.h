/// jitunwind/remote.h — reading another process's window registry (out of process).
///
/// A tool (the eBPF walker's user side, a profiler, a debugger) finds the `jitunwind_registry`
/// object in every ELF object mapped into the target (`/proc/PID/maps`, then `.dynsym` and
/// `.symtab`), and copies the registry with `process_vm_readv` without stopping the target,
/// following the seqlock protocol of docs/registry-abi.md: a torn or changing entry is re-read,
/// never returned; a retired window is never reported live.
///
/// Needs the right to read the target's memory (same user and ptrace_scope allowing it, or
/// CAP_SYS_PTRACE). Thread-safety: free functions are thread-safe; a `registry_reader` is used by
/// one thread at a time. Errors name the PID and what failed: `not_found` (no such process, no
/// file mappings (a zombie or kernel thread), no registry symbol in any mapped object),
/// `permission_denied`, `unsupported` (registry version this reader does not know), `malformed`
/// (impossible header values), `bad_state` (the window changed while its SFrame was read),
/// `out_of_range` (an address the target does not map, or a short read), `limit_exceeded` (an
/// entry array above the reader's limit), `no_memory`, `io_error`. One bad entry does not fail a
/// read: an entry with impossible values, or one that kept changing (or stayed locked) through
/// every retry, is left out and listed in `registry_snapshot::skipped` with the reason; the
/// other windows are returned.
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/frame.h>
#include <jitunwind/result.h>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace jitunwind::remote {

enum class window_state : uint32_t { free = 0, live = 1, retired = 2 };

/// "free", "live" or "retired".
JITUNWIND_API const char* to_string(window_state state) noexcept;

/// Where the symbol was found.
enum class symbol_table : uint8_t { dynsym = 0, symtab = 1, given = 2 };

/// One registry found in the target (a process has one per copy of the SDK it contains).
struct registry_location {
  uint64_t address = 0;     ///< run-time address of the `jitunwind_registry` object
  std::string object_path;  ///< the mapped ELF object that defines it, as in /proc/PID/maps
  symbol_table found_in = symbol_table::dynsym;
};

/// A consistent copy of one registry entry.
struct window_record {
  uint64_t window_id = 0;
  uint64_t generation = 0;  ///< unique per published contents; compare to detect changes
  window_state state = window_state::live;
  uint64_t text_start = 0;
  uint64_t text_size = 0;
  uint64_t sframe_address = 0;
  uint64_t sframe_size = 0;
  abi code_abi = abi::amd64;
  /// The SFrame version the writer says its section has (2 or 3); 0 when not said (no section
  /// yet, or a writer of 64-byte entries). The section's own header is what counts: readers
  /// that copy it check both agree.
  uint8_t sframe_version = 0;
  uint32_t slot = 0;              ///< index in the registry's entry array
  uint64_t entry_address = 0;     ///< address of the entry in the target
  uint64_t sequence = 0;          ///< the entry's sequence counter when copied
  uint64_t registry_address = 0;  ///< which registry (see registry_location::address)
};

/// A registry entry a read left out, and why ("state 9 is not free/live/retired", "kept
/// changing (or stayed locked) for 200 attempts").
struct skipped_slot {
  uint64_t registry_address = 0;
  uint32_t slot = 0;
  std::string reason;
  uint64_t entries = 1;  ///< entries this one stands for ("this entry and the later ones": more)
};

struct registry_snapshot {
  pid_t pid = 0;
  std::vector<registry_location> registries;
  std::vector<window_record> windows;  ///< live and retired windows, by registry then slot
  uint64_t torn_retries = 0;           ///< entries that had to be re-read (diagnostics)
  /// Entries left out, by registry then slot: per registry the first 256 with their reasons,
  /// then one entry counting the others.
  std::vector<skipped_slot> skipped;
};

/// One publisher of one session in the target, as the process reports it in the registry's
/// status area (docs/registry-abi.md, "Publisher status"): what `session::status()` says there.
/// The texts are the process's bytes (untrusted: escape them before printing).
struct publisher_record {
  uint64_t registry_address = 0;  ///< the registry whose header points to the area
  uint64_t session = 0;           ///< the session's number in the process (from 1)
  uint32_t publisher = 0;         ///< a jitunwind::publisher value (1 registry, 4 perfmap, ...)
  uint32_t state = 0;             ///< a jitunwind::publisher_state value (1 active, 2 failed, ...)
  uint64_t warnings = 0;          ///< warnings the publisher gave so far
  std::string message;            ///< its note or last error ("writing /tmp/perf-12.map")
  std::string last_warning;       ///< the last warning ("" if none)
};

/// "registry", "usdt-events", "perfmap", "jitdump", "gdb", "kernel" (JITUNWIND_PUBLISH's names);
/// "publisher N" for a value this reader does not know.
JITUNWIND_API std::string publisher_name(uint32_t publisher);
/// "disabled", "active", "failed", "unsupported"; "state N" otherwise.
JITUNWIND_API std::string publisher_state_name(uint32_t state);

struct publisher_snapshot {
  std::vector<publisher_record> publishers;  ///< by registry, then record
  /// Records or areas left out, with the reason ("status area at 0x..: bad magic", "record 3:
  /// kept changing ..."); a registry without a status area (an older SDK) is not one.
  std::vector<std::string> skipped;
};

struct read_options {
  /// Rounds of re-reading an entry that changed while being copied before skipping it (see
  /// registry_snapshot::skipped). Each round yields the CPU, so a writer that was descheduled
  /// mid-update can finish. One read re-reads at most 8 times this many entries in all: a
  /// registry with thousands of entries stuck mid-update costs a bounded time.
  unsigned max_attempts = 200;
  /// Also return retired windows (grace period); false: live windows only.
  bool include_retired = true;
  /// Largest SFrame section read_window_sframe accepts (the value comes from the target).
  uint64_t max_sframe_size = uint64_t{256} << 20;
  /// Largest entry array (slot_count * entry_size bytes) a registry read copies; the sizes come
  /// from the target, so a corrupt header must not make it copy gigabytes. The array is copied
  /// in chunks (the reader holds three chunks, not the array), so this bounds work, not memory:
  /// 256 MiB holds a full registry of 2^20 slots of today's 128-byte entries (v3).
  uint64_t max_entries_size = uint64_t{256} << 20;
  /// read_window_sframe copies the SFrame header first and then only the bytes it says the
  /// section uses (at most sframe_size): a window that claims a large section over memory the
  /// target never touched (free for it, not for the reader) costs its header; bytes without
  /// SFrame magic cost their first 28, which the decoder refuses. Off: sframe_size bytes are
  /// copied whatever they are.
  bool only_used_sframe = false;
  /// Most windows one snapshot keeps (all registries together): a target can claim a million
  /// entries; the windows beyond this many are not kept, one registry_snapshot::skipped entry
  /// (the first of them) says so. A walker that can follow only so many sets it lower.
  uint64_t max_windows = uint64_t{1} << 20;
};

/// Finds every `jitunwind_registry` in the target's mapped ELF objects.
/// Errors: not_found (no process, or no object defines the symbol), permission_denied.
JITUNWIND_API result<std::vector<registry_location>> locate_registries(pid_t pid);

/// locate_registries + one consistent read of each registry.
JITUNWIND_API result<registry_snapshot> read_registry(pid_t pid, const read_options& options = {});

/// Copies a window's SFrame section from the target (with `read_options::only_used_sframe`, only
/// the bytes its header says it uses), then re-reads the window's entry and fails
/// with `bad_state` if it changed meanwhile (the bytes might belong to newer contents) — also when
/// the copy failed because the window was freed and its memory unmapped meanwhile.
JITUNWIND_API result<std::vector<uint8_t>> read_window_sframe(pid_t pid, const window_record& w,
                                                              const read_options& options = {});

/// Repeated reads of one process without repeating the symbol search (the symbol lookup scans
/// every mapped ELF object; a read is three `process_vm_readv` calls per registry).
class JITUNWIND_API registry_reader {
 public:
  /// Locates the registries. Errors: as locate_registries.
  static result<registry_reader> open(pid_t pid, const read_options& options = {});
  /// For a known registry address (tests, tools that found it another way).
  static result<registry_reader> at_address(pid_t pid, uint64_t registry_address,
                                            const read_options& options = {});

  /// One consistent snapshot. Errors: see the header comment.
  result<registry_snapshot> read() const;
  /// The sum of the registries' change counters: unchanged means nothing was published,
  /// updated, retired or released since (one small read per registry).
  result<uint64_t> change_count() const;
  /// read_window_sframe for this reader's process.
  result<std::vector<uint8_t>> read_sframe(const window_record& w) const;
  /// The publishers' states the process reports (docs/registry-abi.md, "Publisher status"): a
  /// registry without a status area adds nothing. Errors: as read() for the registry headers;
  /// a bad status area or record is listed in publisher_snapshot::skipped, not an error.
  result<publisher_snapshot> read_publishers() const;

  pid_t pid() const { return pid_; }
  const std::vector<registry_location>& registries() const { return registries_; }

 private:
  registry_reader(pid_t pid, std::vector<registry_location> registries, read_options options)
      : pid_(pid), registries_(std::move(registries)), options_(options) {}
  pid_t pid_;
  std::vector<registry_location> registries_;
  read_options options_;
  // Copy buffers reused between reads (a reader is used by one thread at a time).
  mutable std::vector<uint8_t> scratch_[3];
};

}  // namespace jitunwind::remote
