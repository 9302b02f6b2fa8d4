// Private: the GDB JIT interface publisher, driven by the session/window module.
//
// GDB (and LLDB) find `__jit_debug_descriptor` and `__jit_debug_register_code` by name, put a
// breakpoint on the function and, each time it is called, read the descriptor's
// `relevant_entry`: an in-memory ELF object per registration. Ours holds the functions' symbols,
// a `.text` section (SHT_NOBITS at the real addresses) and an `.eh_frame` (absolute addresses)
// generated from the same rows as SFrame, so `bt` in gdb walks through JIT frames without frame
// pointers. When another JIT in the process (LLVM ORC, ...) defines the same symbols, see
// `descriptor_policy` and docs/publishers.md.
#pragma once

#include <jitunwind/cfi.h>
#include <jitunwind/frame.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>
#include <jitunwind/toolkit/gdb_jit.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace jitunwind::detail::gdbjit {

using toolkit::gdb_jit::jit_action;
using toolkit::gdb_jit::jit_code_entry;
using toolkit::gdb_jit::jit_descriptor;
using toolkit::gdb_jit::jit_noaction;
using toolkit::gdb_jit::jit_register;
using toolkit::gdb_jit::jit_unregister;

/// Which descriptor registrations go to. GDB (13.1 observed; older versions by design) reads
/// the descriptor of the first object in load order that defines both symbols, whichever
/// object's `__jit_debug_register_code` was called (jitunwind/toolkit/gdb_jit.hpp). Entries in any other
/// descriptor stay invisible to it.
enum class descriptor_policy : uint8_t {
  /// The descriptor gdb reads: ours when this library is the first definer (or nobody else
  /// defines one), otherwise the first definer's (as `shared`, with an info message in the log).
  automatic = 0,
  /// Always this library's own descriptor and function (reached directly, never through symbol
  /// interposition). Invisible to gdb when another object that defines them loads first.
  own = 1,
  /// Join the first definer's list and call its `__jit_debug_register_code` (e.g. the one of a
  /// program with LLVM's ORC JIT linked in). That JIT's lock is not ours: registrations must not
  /// run concurrently with its own. Fails (not_found) when no loaded object defines them.
  shared = 2,
};

/// What create() found about the descriptor symbols.
struct descriptor_info {
  const jit_descriptor* used = nullptr;   ///< where our entries go
  const jit_descriptor* ours = nullptr;   ///< this library's storage
  const jit_descriptor* first = nullptr;  ///< first definer in load order (null: none found)
  std::string first_object;               ///< its path; "" for the main program
  uintptr_t first_register_code = 0;      ///< its __jit_debug_register_code
  descriptor_policy policy = descriptor_policy::own;  ///< own or shared, as chosen
};

/// Finds out which definitions exist (reads the loaded objects' symbol tables; no side
/// effects).
descriptor_info inspect_descriptors();

struct registrar_options {
  abi target = abi::amd64;
  descriptor_policy policy = descriptor_policy::automatic;
  log_sink log;
};

/// One function of a registration.
struct function_symbol {
  std::string_view name;  ///< control characters become '?'
  uint64_t start = 0;
  uint64_t size = 0;
  const function_desc* frame = nullptr;  ///< rows for .eh_frame (optional); start must match
  /// The caller has already made sure `name` has no control bytes (window::append rejects
  /// them): it is copied without being scanned again.
  bool clean_name = false;
};

/// Opaque id of a registration.
using registration_id = uint64_t;

/// The in-memory ELF object gdb reads for `functions` (exposed for tests and tools).
result<std::vector<uint8_t>> build_object(abi target, std::span<const function_symbol> functions);

/// Registers batches of functions with the debugger. All registrars of the process share the
/// descriptor's list and one process-wide lock; registration and unregistration are O(1) in the
/// number of live registrations (plus building the object, O(size of the batch)).
/// Thread-safe. The destructor unregisters what is still registered.
class registrar {
 public:
  static result<std::unique_ptr<registrar>> create(const registrar_options& options);
  ~registrar();
  registrar(const registrar&) = delete;
  registrar& operator=(const registrar&) = delete;

  /// Builds one ELF object for the batch, links it at the head of the list and notifies the
  /// debugger. invalid_argument: empty batch, empty name, size 0, rows not matching a function.
  result<registration_id> add(std::span<const function_symbol> functions);
  /// Unlinks and frees it, notifying the debugger. not_found for an unknown id.
  result<void> remove(registration_id id);

  /// Growing registrations (one per code window; growing_object.hpp): adds `functions` to the
  /// object `id` in place and notifies the debugger again (unregister + register: an attached gdb
  /// reads it anew), so a publish costs its functions, not a new object. A new object holds them
  /// when `id` is 0, when they do not fit (`replaced`: it holds `id`'s functions too, and `id`
  /// is gone), or when a debugger is attached (debugger_attached(): it then reads each batch
  /// once instead of the window's whole object again). Errors as for add(); not_found for an
  /// unknown id or one made by add().
  struct appended {
    registration_id id = 0;  ///< the object that holds the functions now
    bool replaced = false;   ///< it replaced `id`
  };
  result<appended> append(registration_id id, std::span<const function_symbol> functions);
  /// Replaces the growing object `id` by a copy without the function that starts at `start`.
  /// Returns the copy's id (0: nothing was left, the object is gone); not_found if `id` holds no
  /// such function (or is unknown).
  result<registration_id> remove_function(registration_id id, uint64_t start);
  /// Whether a debugger keeps its breakpoint on the function we notify (gdb does while the
  /// process runs): it then reads every registration as it happens.
  bool debugger_attached() const noexcept;

  const descriptor_info& descriptor() const noexcept { return info_; }
  size_t live_registrations() const;

 private:
  struct node;
  registrar() = default;
  /// Links `n` at the head of the list and announces it (descriptor lock held).
  registration_id link(std::unique_ptr<node> n);
  /// Announces `e` again after it grew (descriptor lock held).
  void reannounce(jit_code_entry& e);

  registrar_options options_;
  descriptor_info info_;
  jit_descriptor* target_ = nullptr;
  void (*notify_)() noexcept = nullptr;
  std::unordered_map<registration_id, std::unique_ptr<node>> live_;
  std::mutex build_mutex_;           // guards cfi_ (taken before the descriptor lock)
  std::optional<cfi::encoder> cfi_;  // reused for every object (its CIE is built once)
  registration_id next_id_ = 1;
};

}  // namespace jitunwind::detail::gdbjit
