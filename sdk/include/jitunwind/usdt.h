/// jitunwind/usdt.h — dynamic USDT: probes declared at run time.
///
/// A runtime declares a provider and its probes (names and typed arguments known only at run
/// time), then `load()`s it: the SDK writes a small ELF shared object with libelf (one stub
/// function per probe whose first instruction is the probe site, `.note.stapsdt` notes,
/// `.stapsdt.base`, semaphores in a writable `.probes` section), maps it into an address range
/// the provider keeps, and binds the `probe` handles to it. Tracers (bpftrace `usdt:`, perf `sdt_`,
/// libbpf `bpf_program__attach_usdt`, bcc) attach to it like to any compiled-in SDT probe, and the
/// kernel increments the probe's semaphore while one is attached, so
///
///     if (p.enabled()) p.fire(fn_id, name);
///
/// costs one load (the handle holds the semaphore's address) and a not-taken branch when nobody
/// traces, like a compiled-in `sys/sdt.h` probe.
///
/// Why not `dlopen`: `dlclose` unmaps the object, so a handle holding its semaphore's address
/// would read unmapped memory after an unload. The SDK maps the object itself (like ld.so:
/// private mappings of the file's PT_LOAD segments) so that each probe's semaphore has one
/// address for as long as a handle of it exists, and `unload()` replaces the object with inert
/// pages instead of a hole. The object is still a well-formed shared library (readelf,
/// eu-elflint, perf, bcc and libbpf read it as one), but it is not in the dynamic linker's list:
/// `dl_iterate_phdr` and gdb's `info sharedlibrary` do not show it. Tracers find it through
/// /proc/PID/maps, as they find any mapped object.
///
/// Where the object lives (`provider_options::location`):
/// - `memfd` (default): an anonymous memory file kept open while loaded. /proc/PID/maps shows
///   `/memfd:jitunwind-usdt:PROVIDER (deleted)`; tracers reach it as `/proc/PID/fd/N`
///   (`provider::object_path()`); nothing is left behind if the process dies.
/// - `file`: a regular file in a private runtime directory (`$XDG_RUNTIME_DIR/jitunwind`, else
///   `/tmp/jitunwind-UID`, mode 0700, ownership checked), named
///   `jitunwind-usdt-PROVIDER-PID-STARTTIME-N.so`, created with `O_EXCL|O_NOFOLLOW`, removed on
///   unload and at exit; files of dead processes are removed on the next load.
///
/// Arguments: up to 12 (`arg0`..`arg11` in bpftrace, `arg1`..`arg12` in perf), integers of 8 to
/// 64 bits (signed or not), pointers and C strings (passed as pointers; bpftrace reads them with
/// `str(argN)`). The first six travel in registers, the others in the caller's stack slots,
/// and the notes say exactly where (`-4@%edi 8@%rsi ... -4@8(%rsp)`). Doubles are rejected
/// (`errc::unsupported`): bpftrace 0.17 has no floating-point type and libbpf cannot read
/// `%xmm` registers; pass a scaled integer or the bit pattern as `u64` instead.
///
/// Thread-safety: a `provider` is used by one thread at a time (declaring, loading, unloading).
/// `probe::enabled()` and `probe::fire()` may be called from any number of threads at once.
/// After `unload()` (or the provider's destruction) returns, every handle of it is inert:
/// `enabled()` is false and `fire()` does nothing, never a crash; the handles of probes still
/// declared become live again on the next `load()`. `unload()` may run while other threads are
/// inside `enabled()`/`fire()`: the semaphores turn to zero pages and the stubs to `ret`
/// instructions in one step each, so a racing `fire()` either fires the old probe or returns.
/// What is not safe is a `fire()` that stalls across an `unload()` *and* the next `load()`
/// (the new object may put other code where its stub was); stop firing before reloading.
///
/// Linux x86-64 only (`errc::unsupported` elsewhere).
#pragma once

#include <jitunwind/config.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace jitunwind::usdt {

/// Type of a probe argument, as the note describes it to tracers.
enum class arg_type : uint8_t {
  i8,
  u8,
  i16,
  u16,
  i32,
  u32,
  i64,
  u64,
  pointer,  ///< any address, read as an unsigned 64-bit value
  string,   ///< `const char*` to a NUL-terminated string; tracers use `str(argN)`
  f64,      ///< rejected by `add_probe` with `errc::unsupported` (see the file comment)
};

/// "i8", "u8", …, "u64", "ptr", "str", "f64".
JITUNWIND_API const char* to_string(arg_type type) noexcept;
/// Inverse of `to_string` (also accepts "pointer", "string", "double"); nullopt if unknown.
JITUNWIND_API std::optional<arg_type> parse_arg_type(std::string_view text) noexcept;

inline constexpr size_t max_args = 12;           ///< arg0..arg11
inline constexpr size_t max_provider_name = 59;  ///< perf's "sdt_" + name must fit in 63
inline constexpr size_t max_probe_name = 63;     ///< kernel trace event name limit
inline constexpr size_t max_probes = 4096;       ///< per provider

/// Checks a provider or probe name: 1..max characters, `[A-Za-z_][A-Za-z0-9_]*` (what bpftrace,
/// perf and the kernel's event names accept). `errc::invalid_argument` naming the offending
/// character and its position.
JITUNWIND_API result<void> validate_provider_name(std::string_view name);
JITUNWIND_API result<void> validate_probe_name(std::string_view name);

/// The note's argument string for these types ("-4@%edi 8@%rsi", stack slots from the 7th
/// argument: "-8@8(%rsp)"). `errc::invalid_argument` / `unsupported` like `add_probe`.
JITUNWIND_API result<std::string> argument_string(span<const arg_type> args);

enum class object_location : uint8_t { memfd, file };

struct provider_options {
  object_location location = object_location::memfd;
  /// `file` mode only: use this directory instead of the per-user runtime directory. It must
  /// exist, be a directory (not a symlink), be owned by the effective user and not be writable
  /// by group or others.
  std::string directory;
  /// Receives notes about stale files removed and fallbacks taken.
  log_sink log;
};

namespace detail {
/// Shared between a provider and the handles of one declared probe. The handle reads it; only
/// the provider writes it (load/unload).
struct probe_slot {
  /// The probe's semaphore: in the provider's address range (reads 0 while not loaded), or a
  /// constant zero for default-constructed handles. Never changes.
  const volatile uint16_t* semaphore = nullptr;
  /// Keeps that address range mapped while any handle exists.
  std::shared_ptr<const void> keep_alive;
  /// The stub (probe site) in the loaded object, or null.
  std::atomic<void*> site{nullptr};
  std::string provider;
  std::string name;
  std::vector<arg_type> args;
  std::string arg_string;
};

template <class T>
inline constexpr bool is_probe_arg_v =
    std::is_integral_v<T> || std::is_enum_v<T> || std::is_pointer_v<T> || std::is_null_pointer_v<T>;

/// How a C++ argument travels: in a full 64-bit register or stack slot, sign-extended from
/// signed types and zero-extended from unsigned ones, so that a tracer reading the note's
/// narrower size (`-4@%edi`) or the whole slot gets the same value.
template <class T>
inline uint64_t to_slot(T v) noexcept {
  if constexpr (std::is_enum_v<T>) {
    return to_slot(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<uintptr_t>(v);
  } else if constexpr (std::is_null_pointer_v<T>) {
    return 0;
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));
  } else {
    return static_cast<uint64_t>(v);
  }
}

template <class T>
struct slot_of {
  using type = uint64_t;
};
}  // namespace detail

/// Handle of one declared probe. Cheap to copy (shares the slot with its provider); stays a
/// valid object after the provider is unloaded or destroyed (then inert). Holds the
/// semaphore's address itself, so `enabled()` is a single load.
class JITUNWIND_API probe {
 public:
  /// An inert handle (never enabled, fire does nothing).
  probe() noexcept;

  /// True while a tracer has the probe attached (the kernel or the tracer increments the
  /// semaphore). One load; false when not loaded.
  bool enabled() const noexcept { return *semaphore_ != 0; }

  /// Fires the probe: calls its stub with the arguments in the registers and stack slots the
  /// note describes. Arguments: integers, enums, bool, pointers (C strings as `const char*`);
  /// their number must be the declared one (asserted). No-op when not loaded. Thread-safe.
  template <class... A>
  void fire(A... args) const noexcept {
    static_assert(sizeof...(A) <= max_args, "usdt: a probe takes at most 12 arguments");
    static_assert((detail::is_probe_arg_v<A> && ...),
                  "usdt: probe arguments must be integers, enums, bool, pointers or nullptr "
                  "(floating point is not supported: tracers cannot read it)");
    void* site = slot_->site.load(std::memory_order_acquire);
    if (site == nullptr) return;
    assert(sizeof...(A) == slot_->args.size() && "usdt: wrong number of probe arguments");
    using stub_fn = void (*)(typename detail::slot_of<A>::type...);
    reinterpret_cast<stub_fn>(site)(detail::to_slot(args)...);
  }

  /// Fires with arguments already converted to 64-bit slots (the C API and the CLI use this).
  /// `count` must be the declared number; `errc`-free: wrong counts fire nothing.
  void fire_slots(const uint64_t* slots, size_t count) const noexcept;

  /// True while the provider is loaded (the probe has a site).
  bool loaded() const noexcept { return slot_->site.load(std::memory_order_acquire) != nullptr; }

  const std::string& provider_name() const noexcept { return slot_->provider; }
  const std::string& name() const noexcept { return slot_->name; }
  const std::vector<arg_type>& args() const noexcept { return slot_->args; }
  /// The note's argument string ("-4@%edi 8@%rsi").
  const std::string& arg_string() const noexcept { return slot_->arg_string; }

  /// Raw addresses for JIT compilers that embed the check and the call in generated code.
  /// The semaphore's address is fixed from `add_probe` on and stays readable (0 while not
  /// loaded) for as long as a handle of the probe exists, across unloads and reloads; null only
  /// for a default-constructed handle. The site (stub) is null when not loaded and changes
  /// with every `load()`: code that embeds it must be discarded before the next `unload()`.
  /// A provider's semaphores are consecutive 16-bit counters starting at an 8-byte aligned
  /// address: the probes first declared on a provider get them in declaration order (a hot
  /// path may check the first four with one 8-byte load); a later probe may reuse a removed
  /// probe's semaphore.
  const volatile uint16_t* semaphore_address() const noexcept;
  const void* site_address() const noexcept { return slot_->site.load(); }

 private:
  friend class provider;
  explicit probe(std::shared_ptr<const detail::probe_slot> slot)
      : semaphore_(slot->semaphore), slot_(std::move(slot)) {}
  const volatile uint16_t* semaphore_;
  std::shared_ptr<const detail::probe_slot> slot_;
};

/// A probe as declared (for listing).
struct probe_desc {
  std::string name;
  std::vector<arg_type> args;
  std::string arg_string;
};

namespace detail {
struct provider_impl;
}

/// A provider: a set of probes published together in one generated object.
class JITUNWIND_API provider {
 public:
  /// Validates the name (`validate_provider_name`) and options. `errc::unsupported` on other
  /// machines than Linux x86-64. Nothing is created on disk before `load()`.
  static result<provider> create(std::string_view name, const provider_options& options = {});

  provider(provider&&) noexcept;
  provider& operator=(provider&&) noexcept;
  /// Unloads (errors are ignored, reported to the log sink).
  ~provider();

  /// Declares a probe. Returns its handle at once (inert until `load()`). Errors, nothing
  /// declared: `invalid_argument` (bad name or type value), `already_exists` (duplicate name),
  /// `limit_exceeded` (more than 12 arguments, `max_probes` probes, or every one of the
  /// `max_probes` semaphores still held by a declared probe or by a live handle of a removed
  /// one), `unsupported` (f64), `bad_state` (provider loaded: unload first), `io_error` (the
  /// provider's address range could not be reserved).
  result<probe> add_probe(std::string_view name, span<const arg_type> args);
  result<probe> add_probe(std::string_view name, std::initializer_list<arg_type> args) {
    return add_probe(name, span<const arg_type>(args.begin(), args.size()));
  }
  /// Removes a declared probe; its handles become inert for good (its semaphore is reused
  /// only once no handle of it is left). `not_found`, `bad_state`.
  result<void> remove_probe(std::string_view name);
  /// Handle of a declared probe; `not_found`.
  result<probe> find_probe(std::string_view name) const;
  std::vector<probe_desc> probes() const;

  /// Generates the object, places it (memfd or file), loads it and binds every handle.
  /// Errors leave nothing loaded and nothing on disk: `bad_state` (already loaded, no probes),
  /// `io_error`/`permission_denied` (memfd, runtime directory, planted file), `malformed`
  /// (libelf refused the object; message says why).
  result<void> load();
  /// Makes every handle inert, replaces the object's pages with inert ones (zeroed semaphores,
  /// `ret` where the stubs were) and closes/removes its file. No-op when not loaded. See the
  /// file comment for the concurrency rule.
  result<void> unload();
  bool loaded() const noexcept;

  const std::string& name() const noexcept;
  const provider_options& options() const noexcept;
  /// Where tracers find the loaded object: `/proc/PID/fd/N` (memfd) or the file's path. Empty
  /// when not loaded.
  const std::string& object_path() const noexcept;
  /// Load address of the object (what its link-time addresses are relative to), 0 when not
  /// loaded.
  uintptr_t load_address() const noexcept;

 private:
  explicit provider(std::unique_ptr<detail::provider_impl> impl);
  std::unique_ptr<detail::provider_impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Reading SDT notes (ours or anyone's) and finding dynamic providers in another process.

/// One `.note.stapsdt` entry.
struct sdt_note {
  uint64_t pc = 0;         ///< probe address (link-time virtual address)
  uint64_t base = 0;       ///< `.stapsdt.base` address recorded in the note
  uint64_t semaphore = 0;  ///< semaphore address, 0 = none
  std::string provider;
  std::string name;
  std::string args;
};

/// Decodes the `.note.stapsdt` section of an ELF64 little-endian image (the whole file in
/// memory). Treats the image as hostile: `errc::malformed` naming the structure and values
/// ("usdt: note 3: descriptor size 12 < 24"). An image without the section yields no notes.
JITUNWIND_API result<std::vector<sdt_note>> read_sdt_notes(span<const uint8_t> elf_image);

/// A dynamic provider object mapped in a process.
struct remote_object {
  std::string mapping;      ///< path as /proc/PID/maps shows it
  std::string access_path;  ///< how to open it (/proc/PID/fd/N or the file path)
  uintptr_t load_address = 0;
  struct remote_probe {
    sdt_note note;
    uintptr_t semaphore_address = 0;          ///< in the process, 0 = none
    std::optional<uint16_t> semaphore_value;  ///< nullopt if it could not be read
  };
  std::vector<remote_probe> probes;
};

/// Finds jitunwind dynamic providers mapped in process `pid` (memfd `jitunwind-usdt:` mappings
/// and `jitunwind-usdt-*.so` files), decodes their notes and reads each semaphore with
/// `process_vm_readv`. Errors: `not_found` (no such process), `permission_denied`, `io_error`.
/// Objects that cannot be opened or decoded are skipped with a message in `warnings`.
JITUNWIND_API result<std::vector<remote_object>> find_providers(
    int pid, std::vector<std::string>* warnings = nullptr);

}  // namespace jitunwind::usdt
