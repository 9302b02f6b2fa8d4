// Registration of code windows' SFrame sections with the running kernel (docs/
// kernel-registration.md). The kernel ABI is not merged upstream; the posted series used
// different prctl option numbers and argument lists, and the newest proposal adds system calls
// with unassigned numbers. So this backend is strictly opt-in: it issues exactly the calls a
// configuration string names ("prctl:79,80", "prctl-legacy:74,75", "syscall:NNN,MMM", also from
// the environment variable JITUNWIND_KERNEL_SFRAME) and nothing at all without one. It never
// guesses a number. A kernel that refuses the first registration with ENOSYS/EINVAL/EPERM is
// reported "unsupported" once (log_sink + status()) and no further calls are made.
#pragma once

#include <jitunwind/log.h>
#include <jitunwind/result.h>

#include "kernel/registration_check.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::detail::kernel {

/// The system calls the backend issues; the real one is real_syscalls(), tests use fakes.
/// Both return the kernel's result: >= 0 on success, -errno on failure.
class syscall_layer {
 public:
  virtual ~syscall_layer() = default;
  virtual long prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4,
                     unsigned long arg5) = 0;
  virtual long syscall2(long number, unsigned long arg1, unsigned long arg2) = 0;
  /// The process's mappings, for the registration checklist (real: /proc/self/maps).
  virtual result<std::vector<vma>> mappings() { return read_own_mappings(); }
};

/// prctl(2) and syscall(2) of this process. Thread-safe.
syscall_layer& real_syscalls();

/// Which kernel interface, with which argument list.
enum class interface_kind {
  none,           ///< nothing configured: no call is ever made
  prctl_range,    ///< prctl(ADD, sframe_start, sframe_end, text_start, text_end) /
                  ///< prctl(REMOVE, sframe_start, 0, 0, 0): series v5 (Apr 2025) .. v12 (Nov 2025),
                  ///< e.g. 78,79 / 79,80
  prctl_legacy,   ///< prctl(ADD, sframe_addr, text_start, text_end, 0) /
                  ///< prctl(REMOVE, sframe_addr, 0, 0, 0): series v1 (2023, 71,72), v2-v3 (2024,
                  ///< 74,75)
  syscall_setup,  ///< sframe_register(&sframe_setup, sizeof) / sframe_unregister(&{sframe_start},
                  ///< sizeof): May 2026 proposal; numbers not assigned upstream
};

struct interface_spec {
  interface_kind kind = interface_kind::none;
  long add = 0;     ///< prctl option or system call number that registers
  long remove = 0;  ///< prctl option or system call number that unregisters
  bool operator==(const interface_spec&) const = default;
};

/// Parses "", "off", "none", "prctl:ADD,REMOVE", "prctl-legacy:ADD,REMOVE",
/// "syscall:REGISTER,UNREGISTER" (decimal numbers). Errors: invalid_argument naming the text.
result<interface_spec> parse_interface_spec(std::string_view text);

/// The text to parse: `configured` if not empty, else $JITUNWIND_KERNEL_SFRAME, else "".
std::string configured_interface(std::string_view configured);

/// "prctl:79,80" etc. ("off" for none).
std::string to_string(const interface_spec& spec);

/// UAPI structure of the May 2026 sframe_register/sframe_unregister proposal (32 bytes, passed
/// by pointer together with its size so the kernel can extend it).
struct sframe_setup {
  uint64_t sframe_start;
  uint64_t sframe_size;
  uint64_t text_start;
  uint64_t text_size;
};
static_assert(sizeof(sframe_setup) == 32);

/// One window as the kernel sees it.
struct kernel_window {
  uint64_t sframe_address = 0;
  uint64_t sframe_size = 0;
  uint64_t text_start = 0;
  uint64_t text_size = 0;
};

enum class backend_status {
  disabled,     ///< not configured: does nothing
  untested,     ///< configured, no call made yet
  active,       ///< at least one registration succeeded
  unsupported,  ///< the kernel refused the first registration: no more calls are made
};

/// "disabled", "untested", "active", "unsupported".
const char* to_string(backend_status status) noexcept;

/// Registers and unregisters windows. Thread-safe (one mutex around the calls).
class kernel_backend {
 public:
  /// `spec` as for parse_interface_spec (callers pass configured_interface(option)).
  /// `calls` must outlive the backend. Errors: invalid_argument for a bad spec.
  static result<std::unique_ptr<kernel_backend>> create(std::string_view spec, syscall_layer& calls,
                                                        log_sink log = {});

  /// Registers the window's SFrame with the kernel. Disabled or unsupported: does nothing and
  /// succeeds. The call that discovers the kernel does not support it returns `unsupported`
  /// (and logs one warning); later calls do nothing. A kernel that supports the interface but
  /// rejects this section: `invalid_argument` / `io_error` naming the window and errno (the
  /// session goes on; the window is just not known to the kernel).
  /// Errors also: invalid_argument for an empty or wrapping range (no call made).
  result<void> register_window(const kernel_window& window);

  /// Unregisters a window registered before (keyed by its SFrame address). A window that was
  /// never registered (disabled, unsupported, refused) is ignored. Errors: io_error with errno.
  result<void> unregister_window(const kernel_window& window);

  backend_status status() const;
  /// Why the status is what it is ("prctl 79 returned EINVAL on the first registration ...").
  std::string status_message() const;
  const interface_spec& interface() const { return spec_; }
  /// Number of windows currently registered with the kernel.
  size_t registered_count() const;
  /// The text ranges of the windows currently registered (the kernel refuses overlaps).
  std::vector<text_range> registered_texts() const;
  /// The system calls this backend issues (for the checklist's view of the mappings).
  syscall_layer& calls() const { return calls_; }

 private:
  kernel_backend(interface_spec spec, syscall_layer& calls, log_sink log);
  long issue_register(const kernel_window& w);
  long issue_unregister(uint64_t sframe_address);

  const interface_spec spec_;
  syscall_layer& calls_;
  const log_sink log_;
  mutable std::mutex mutex_;
  backend_status status_;
  std::string status_message_;
  std::map<uint64_t, text_range> registered_;  // SFrame start address -> its text
};

}  // namespace jitunwind::detail::kernel
