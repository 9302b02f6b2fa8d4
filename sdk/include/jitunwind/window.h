/// jitunwind/window.h — sessions and code windows: what a runtime embeds.
///
/// A `session` owns the publishers (registry, USDT events, perf map, jitdump, GDB JIT interface,
/// kernel registration) and the code windows. A window is an address range of code plus the
/// SFrame section that describes it (kept within ±2 GiB of the code, as SFrame's 32-bit FDE
/// offsets require). The runtime appends functions to a window in address order and publishes:
/// everything appended (or retired) since the last publish becomes visible to every active
/// publisher at once.
///
/// Lifecycle of a window (docs/window.md has the diagram and what each consumer sees): open
/// (append/publish, patch, retire_function) → sealed (no more appends) → retired (unpublished;
/// its code may still run until the runtime's grace period ends) → freed, or reused (same
/// range, open again). Every publish of any window gets a process-wide, increasing
/// **generation** (registry entries, USDT events, jitwalk and the CLI show it): `(window id,
/// generation)` names one published content. `reuse_count()` counts reuses of one window's
/// range; it is not a generation. A freed window's handle stays valid until
/// `session::release` (or the session's end).
///
/// Two kinds of windows:
/// - **owned**: the SDK maps the memory, laid out as `code_layout` says: `page_flip` (RW until
///   publish makes the pages RX; new code after a publish starts on a fresh page), or one of the
///   alias layouts, where code is written through a separate RW view of the same pages and
///   functions pack tightly whatever the publishing rhythm (`shared_alias`: perf maps still
///   name the code; `memfd_alias`: they do not). No page is ever writable and executable
///   through the same mapping.
/// - **described**: the runtime owns the memory (e.g. asmjit's JitRuntime); the SDK only
///   describes ranges inside it.
///
/// Thread-safety: `session` member functions are thread-safe. A `window` is used by one thread at
/// a time (append, publish, seal, patch, retire_function); different windows may be used from
/// different threads concurrently. `retire` and `reuse` must not race with operations on the
/// same window, nor `session::release` with anything on that window.
///
/// Errors: every fallible function returns `result`; a failing publisher never stops the others —
/// its failure is recorded in `session::status()` and reported through the log sink.
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/frame.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind {

/// The publishers. Values are bits of a `publisher_set`.
enum class publisher : uint32_t {
  registry = 1u << 0,     ///< in-process registry read by external unwinders (docs/registry-abi.md)
  usdt_events = 1u << 1,  ///< static USDT probes jitunwind:window_publish/window_retire/code_add
  perfmap = 1u << 2,      ///< /tmp/perf-PID.map
  jitdump = 1u << 3,      ///< jit-PID.dump for perf inject --jit
  gdb = 1u << 4,          ///< the GDB JIT interface
  kernel = 1u << 5,       ///< SFrame registration with the kernel (opt-in, needs `kernel_sframe`)
};
using publisher_set = uint32_t;
constexpr publisher_set operator|(publisher a, publisher b) {
  return static_cast<uint32_t>(a) | static_cast<uint32_t>(b);
}
constexpr publisher_set operator|(publisher_set a, publisher b) {
  return a | static_cast<uint32_t>(b);
}
constexpr bool contains(publisher_set s, publisher p) {
  return (s & static_cast<uint32_t>(p)) != 0;
}

/// The publishers whose readers find them unasked and whose cost fits a JIT that publishes
/// function by function: registry and USDT events (jitwalk), perf map (perf, bcc, bpftrace),
/// GDB JIT interface (a debugger that attaches, or a core file). `jitdump` is opt-in: it copies
/// every function's code into a file that only `perf inject --jit` reads, and costs more than
/// the others together (docs/publishers.md, "Which publishers are on by default").
inline constexpr publisher_set default_publishers =
    publisher::registry | publisher::usdt_events | publisher::perfmap | publisher::gdb;

/// "registry", "usdt-events", "perfmap", "jitdump", "gdb", "kernel".
JITUNWIND_API const char* to_string(publisher p) noexcept;
/// Parses a comma-separated list ("perfmap,jitdump", "all", "none", "default").
JITUNWIND_API result<publisher_set> parse_publishers(std::string_view list);

/// Whether a session may put new code at addresses that carried other published code before
/// (a recycled window's memory, `window::reuse`). perf cannot tell two codes at one address
/// apart in every case (docs/window.md, "Reused addresses"): with reuse off, freed owned
/// windows keep their address range reserved (no memory: the pages are dropped, the range is
/// mapped inaccessible), `window::reuse` is refused, described windows over a range that held
/// published code are refused, and trampoline pools hand out fresh stubs only.
enum class address_reuse : uint8_t {
  /// Off while a file publisher perf reads (perf map or jitdump) is active, else allowed.
  automatic = 0,
  allowed = 1,
  never = 2,
};
JITUNWIND_API const char* to_string(address_reuse r) noexcept;

/// How the file publishers (perf map, jitdump) put their records into their files. The in-memory
/// publishers (registry, SFrame, USDT events, GDB JIT interface, kernel) are always immediate:
/// an external unwinder or debugger sees a window the moment `publish` returns.
enum class durability : uint8_t {
  /// Every record is in the file (the page cache) when `publish` returns: one `write` per file
  /// and publish. `kill -9` loses nothing that was published.
  sync = 0,
  /// Records are built into a per-file buffer and written with one `write` when the buffer holds
  /// `flush_bytes`, when its oldest record is `flush_latency` old, when a window is sealed,
  /// retired or freed, on `session::flush()`, when the session is destroyed and at normal
  /// process exit (`exit`, return from `main`). `kill -9` (or `_exit`, or a crash) loses the
  /// records not written yet, at most `flush_latency` worth, never part of one. The default.
  batched = 1,
};
/// "sync", "batched".
JITUNWIND_API const char* to_string(durability d) noexcept;
/// Parses "sync" or "batched".
JITUNWIND_API result<durability> parse_durability(std::string_view text);

/// Limits of `session_options::flush_bytes` and `flush_latency` (checked by `session::create`).
inline constexpr size_t min_flush_bytes = 4096;
inline constexpr size_t max_flush_bytes = size_t{64} << 20;
inline constexpr std::chrono::milliseconds min_flush_latency{1};
inline constexpr std::chrono::milliseconds max_flush_latency{60000};

struct session_options {
  abi target = abi::amd64;
  publisher_set publishers = default_publishers;
  /// Durability of the perf map and of the jitdump (docs/publishers.md#durability).
  durability perfmap_durability = durability::batched;
  durability jitdump_durability = durability::batched;
  /// batched: a file's buffer is written once it holds this many bytes (at least 4096).
  size_t flush_bytes = size_t{64} << 10;
  /// batched: the longest a published record waits before it is written (at least 1 ms).
  std::chrono::milliseconds flush_latency{10};
  /// batched: a small background thread ("jitunwind-flush", all signals blocked), started at
  /// the first buffered record and ended after 100 ms without any, writes records that reach
  /// `flush_latency` while the runtime publishes nothing. false (runtimes that allow no threads of
  /// others): no thread; the bound then holds only while the runtime publishes or calls
  /// `session::poll()` or `session::flush()`; otherwise records wait for the next of those, a seal,
  /// retire or free, the session's end or process exit.
  bool flush_thread = true;
  /// Directory of perf-PID.map. perf reads /tmp only; change it for tests or containers.
  std::string perfmap_dir = "/tmp";
  /// Directory of jit-PID.dump; empty: $JITDUMPDIR if set, else /tmp (perf's DWARF unwinder
  /// only finds the injected objects under /tmp).
  std::string jitdump_dir;
  /// Kernel registration backend, e.g. "prctl:79,80" or "syscall:470,471"; empty = off. Never
  /// guessed: see docs/kernel-registration.md.
  std::string kernel_sframe;
  /// May new code go where other published code was? See `address_reuse`.
  address_reuse reuse = address_reuse::automatic;
  log_sink log;
  /// SFrame version of every window's section: 3 (the default: binutils 2.46 and the kernel
  /// series since v13 read it) or 2 (for readers of binutils 2.41-2.45 / LLVM's era). The kernel
  /// publisher hands the kernel v3 either way (it re-encodes a v2 window for the kernel).
  uint8_t sframe_version = 3;
  /// false: functions whose rows need an SFrame v3 FLEX FDE (CFA from a register other than
  /// SP/FP or from memory, RA/FP rules naming registers) are refused when added, naming the
  /// function and row — for runtimes that register with kernels whose v3 reader drops a whole
  /// section when it meets a FLEX FDE.
  bool sframe_allow_flex = true;

  /// Defaults overridden by the environment: JITUNWIND_PUBLISH (publisher list),
  /// JITUNWIND_DIR (perf map and jitdump directory), JITDUMPDIR, JITUNWIND_KERNEL_SFRAME,
  /// JITUNWIND_SFRAME_VERSION (2 or 3), JITUNWIND_SFRAME_FLEX (0 refuses FLEX, 1 allows it),
  /// JITUNWIND_DURABILITY ("sync", "batched", or per file "perfmap:sync,jitdump:batched"),
  /// JITUNWIND_FLUSH_MS (flush_latency, 1..60000), JITUNWIND_FLUSH_BYTES (flush_bytes, with an
  /// optional k or m suffix), JITUNWIND_FLUSH_THREAD ("on"/"off", "1"/"0"),
  /// JITUNWIND_ADDRESS_REUSE (`auto`, `allowed` or `never`), JITUNWIND_LOG (`stderr`,
  /// `file:PATH` or `off`: where `log` writes; JITUNWIND_LOG_LEVEL `debug`, `info`, `warning`
  /// (the default) or `error`). `invalid_argument` naming the variable for a value that does not
  /// parse; `io_error` for a JITUNWIND_LOG file that cannot be opened.
  JITUNWIND_API static result<session_options> from_env();
};

enum class publisher_state : uint8_t {
  disabled = 0,     ///< not requested
  active = 1,       ///< working
  failed = 2,       ///< stopped after an error (see message); the others go on
  unsupported = 3,  ///< this system cannot do it (e.g. no kernel SFrame registration)
};
JITUNWIND_API const char* to_string(publisher_state s) noexcept;

struct publisher_status {
  publisher which;
  publisher_state state;
  std::string message;  ///< the last error or a note ("writing /tmp/perf-123.map")
};

enum class window_state : uint8_t { open = 0, sealed = 1, retired = 2, freed = 3 };
JITUNWIND_API const char* to_string(window_state s) noexcept;

/// How an owned window's code memory is mapped (docs/window.md, "Code layouts"; costs in
/// docs/performance.md). Whatever the layout, no page is writable and executable through the
/// same mapping at once.
enum class code_layout : uint8_t {
  /// One private anonymous mapping: pages are RW and not executable until `publish` makes them
  /// RX; code allocated after a publish starts on a fresh page (a page per publish). perf maps
  /// name the code. `patch` flips the patched page(s) to RW and back: no thread may run code on
  /// them meanwhile.
  page_flip = 0,
  /// A memfd mapped twice, RX where the code runs and RW where it is written: functions pack
  /// tightly, nothing changes protection, but perf maps cannot name the code (perf reads them
  /// only for anonymous memory); jitdump can.
  memfd_alias = 1,
  /// A shared anonymous mapping seen twice (`mremap` of the RX view gives the RW alias):
  /// sub-page publishing like `memfd_alias`, and /proc/PID/maps shows both views as
  /// `/dev/zero (deleted)`, which perf treats as anonymous memory: perf maps name the code.
  /// The RW alias is not inherited by fork (MADV_DONTFORK): a child runs the code but cannot
  /// write into the parent's windows.
  shared_alias = 2,
};
JITUNWIND_API const char* to_string(code_layout l) noexcept;

struct owned_window_options {
  /// Bytes of code the window can hold (rounded up to pages).
  size_t code_capacity = 1 << 20;
  /// Bytes reserved for the window's SFrame (two buffers of this size, rounded up to pages);
  /// 0 = a size derived from code_capacity. Appending fails with `limit_exceeded` when full.
  size_t sframe_capacity = 0;
  code_layout layout = code_layout::page_flip;
};

struct described_window_options {
  uint64_t text_start = 0;
  size_t text_size = 0;
  /// Bytes for the window's SFrame (two buffers of this size, rounded up to 64 bytes; buffers
  /// of small windows share mappings); 0 = a size derived from text_size.
  size_t sframe_capacity = 0;
};

class session;

/// A code window. Created by a session, owned by it; valid until the session is destroyed.
class JITUNWIND_API window {
 public:
  virtual ~window() = default;

  uint64_t id() const noexcept { return id_; }
  /// How many times `reuse` gave this window's range back (0 for a window never reused). Not a
  /// generation: consumers key rows and names by (id, `published_generation()`).
  uint32_t reuse_count() const noexcept { return reuse_count_; }
  /// The process-wide generation of this window's last publish (what the registry, the USDT
  /// events, jitwalk and `jitunwind windows` show); 0 before the first publish of the
  /// window's current use (a reuse starts over).
  virtual uint64_t published_generation() const noexcept = 0;
  virtual window_state state() const noexcept = 0;
  virtual uint64_t text_start() const noexcept = 0;
  virtual size_t text_size() const noexcept = 0;
  virtual bool owned() const noexcept = 0;

  /// Owned windows: reserves `size` bytes of code (aligned) after what was reserved before and
  /// returns the address the code will run at and a writable view of it. The view is valid until
  /// the next `publish`. With the jitdump publisher active, a gap of 160 bytes follows each
  /// allocation (perf maps each function's unwinding data right after its code).
  /// `limit_exceeded` when the window is full, `bad_state` unless open,
  /// `invalid_argument` for described windows.
  struct code_space {
    uint64_t address = 0;
    span<uint8_t> writable;
  };
  virtual result<code_space> allocate(size_t size, size_t alignment = 16) = 0;

  /// Appends a function (its `start`/`size` are absolute addresses inside the window, after the
  /// end of the previous function). `moved_from` != 0 says the code was copied from that address
  /// (jitdump CODE_MOVE). Not visible to anyone until `publish`. Errors: `invalid_argument`
  /// (rows, out of order, overlapping, outside the window, bad name), `limit_exceeded` (SFrame
  /// capacity), `bad_state` (not open). Nothing is appended on error.
  /// A PCMASK function (`frames.pcmask_rep != 0`: an array of identical stubs) goes into the
  /// SFrame and the registry only; the naming publishers (perf map, jitdump, GDB, code_add
  /// events) skip it, because one name over the whole array would hide the stubs' own names
  /// and `.eh_frame` cannot express PCMASK rows. Name the stubs with `name_range`.
  virtual result<void> append(std::string_view name, const function_desc& frames,
                              uint64_t moved_from = 0) = 0;

  /// Names part of an appended function for the publishers that name code (perf map line,
  /// jitdump CODE_LOAD with CODE_UNWINDING_INFO, GDB JIT symbol), with `frames` describing that
  /// part on its own (e.g. one stub of an array of identical stubs that a single PCMASK
  /// function describes, see trampolines.h). The window's SFrame and the registry are not
  /// changed: the appended function already covers the range. Visible at the next publish;
  /// naming the same range again later supersedes the earlier name (jitdump records it by
  /// time, the perf map gets another line). Allowed on open and sealed windows.
  /// Errors: `invalid_argument` (bad name or rows, range not inside one appended function),
  /// `bad_state` (retired or freed window).
  virtual result<void> name_range(std::string_view name, const function_desc& frames) = 0;

  /// Makes every function appended since the last publish visible to all active publishers
  /// (owned windows: their pages become RX first). Publisher failures do not fail the call
  /// (see session::status()); errors are for the window itself (`bad_state`).
  virtual result<void> publish() = 0;

  /// No more appends; publishes what is pending.
  virtual result<void> seal() = 0;

  /// Overwrites published (or appended) code in place: `bytes` at `address`, which must lie
  /// inside one appended function; its rows are unchanged (patch instructions for ones of the
  /// same frame effect: a call target, an inline-cache constant, a jump into a trap). W^X holds
  /// throughout. When `patch` returns, every thread of the process executes the new bytes
  /// (membarrier SYNC_CORE, where the kernel has it). Concurrent execution of the patched bytes
  /// (docs/window.md, "Patching"): with the alias layouts, a patch of at most 8 bytes inside
  /// one naturally aligned 8-byte word is one atomic store; anything else must not be running.
  /// With `page_flip` the patched pages are not executable during the call: no thread may run
  /// code on them. Allowed on open and sealed windows. Errors: `invalid_argument` (described
  /// window, empty patch, range not inside one function), `bad_state` (retired or freed).
  virtual result<void> patch(uint64_t address, span<const uint8_t> bytes) = 0;

  /// Takes one function out of the window at the next `publish`: its rows leave the SFrame
  /// (registry, kernel), its GDB symbol goes, `code_remove` fires; the perf map and jitdump
  /// cannot withdraw a name (docs/window.md). Its code stays where it is (consumers keep
  /// naming it) and its space is not reused: it comes back with the window. Call it once no
  /// thread runs in the function and none will enter it again: without rows a frame still in it
  /// cannot be unwound. Allowed on open and sealed windows. Errors: `invalid_argument` (no
  /// appended function starts at `start`), `bad_state` (retired or freed window).
  virtual result<void> retire_function(uint64_t start) = 0;

  /// Unpublishes the window: removed from the registry (tombstone), kernel unregistered, GDB
  /// objects removed, a `window_retire` event fired. The code may still be running: after
  /// `grace` (measured by session::poll) `on_grace_over` is called (from the thread calling
  /// poll) and the window is freed, unless the callback returns `true` to keep it for `reuse`
  /// (ignored when the session does not reuse addresses, or the handle was released). The
  /// callback runs inside session::poll: it must not call poll or release.
  /// The session may keep a freed window's memory (wiped, as by `reuse`) for its next window of
  /// the same capacities, unless address reuse is off; see docs/window.md.
  virtual result<void> retire(std::chrono::milliseconds grace,
                              std::function<bool(window&)> on_grace_over = {}) = 0;

  /// A retired window whose grace period is over and that was kept: back to open, same range,
  /// `reuse_count()` + 1, no functions; its next publish has a new generation. Owned code is
  /// wiped: what was allocated becomes int3, the range RW and not executable (the pages stay
  /// resident). `bad_state` also when the session's address reuse is off.
  virtual result<void> reuse() = 0;

  /// Functions appended (published or not) in address order: {name, start, size}.
  struct function_entry {
    std::string name;
    uint64_t start;
    uint32_t size;
  };
  virtual std::vector<function_entry> functions() const = 0;

  /// The SFrame section as last published (empty before the first publish).
  virtual span<const uint8_t> published_sframe() const noexcept = 0;

 protected:
  window(uint64_t id) : id_(id) {}
  uint64_t id_;
  uint32_t reuse_count_ = 0;
};

/// Owns the publishers and windows. Create one per process (or per runtime in a process).
class JITUNWIND_API session {
 public:
  /// Validates the options and starts the requested publishers. A publisher that cannot start
  /// (an unwritable directory, a kernel publisher without or with an unparsable
  /// `kernel_sframe`) is marked failed/unsupported and logged; the session is still created.
  /// `invalid_argument` for an unknown ABI or durability, publisher bits outside `publisher`,
  /// or flush limits outside [min_flush_bytes, max_flush_bytes] / [min_flush_latency,
  /// max_flush_latency].
  static result<std::unique_ptr<session>> create(const session_options& options);
  virtual ~session() = default;

  virtual result<window*> create_owned_window(const owned_window_options& options) = 0;
  /// The SFrame buffers are placed by searching the address space for room within ±2 GiB of
  /// the range; small windows share mappings. Errors: `out_of_range` (no room in reach: the
  /// message says how much was needed and the largest gap found), `already_exists` (overlaps a
  /// window not freed, or, with address reuse off, code published before), `no_memory`.
  virtual result<window*> describe_window(const described_window_options& options) = 0;

  /// Runs due grace-period callbacks and frees retired windows. Call it regularly (e.g. from the
  /// runtime's safepoint). Returns the number of windows freed or kept for reuse. With
  /// `batched` file publishers it also writes records that have waited `flush_latency`.
  virtual size_t poll() = 0;

  /// Ends a window handle, so that a runtime that keeps creating windows does not keep their
  /// handles: a freed window goes now; a retired one whose grace period is running goes when
  /// it is over (its callback still runs, but cannot keep it); a retired window kept for reuse
  /// is freed now. The pointer is invalid afterwards. Errors: `bad_state` (open or sealed:
  /// retire it first), `invalid_argument` (not a window of this session, or released already).
  virtual result<void> release(window* w) = 0;

  /// Whether this session puts new code at addresses that carried published code before
  /// (session_options::reuse, with `automatic` resolved against the active publishers).
  virtual bool recycles_addresses() const noexcept = 0;
  /// Writes every buffered perf map line and jitdump record now (one `write` per file); a no-op
  /// under `sync`. A file that cannot be written marks its publisher failed, as a publish would,
  /// and the first such error is returned (`io_error`).
  virtual result<void> flush() = 0;

  virtual std::vector<publisher_status> status() const = 0;
  virtual const session_options& options() const noexcept = 0;

 protected:
  session() = default;
};

}  // namespace jitunwind
