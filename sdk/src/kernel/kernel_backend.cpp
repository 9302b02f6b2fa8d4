#include "kernel/kernel_backend.hpp"

#include "common/error.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace jitunwind::detail::kernel {
namespace {

class real_layer final : public syscall_layer {
 public:
  long prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
             unsigned long a5) override {
    const int rc = ::prctl(option, a2, a3, a4, a5);
    return rc < 0 ? -errno : rc;
  }
  long syscall2(long number, unsigned long a1, unsigned long a2) override {
    const long rc = ::syscall(number, a1, a2);
    return rc < 0 ? -errno : rc;
  }
};

// "EINVAL" etc. for messages (strerror texts are less recognizable in a status line).
const char* errno_name(long e) {
  switch (e) {
    case EINVAL:
      return "EINVAL";
    case ENOSYS:
      return "ENOSYS";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case EFAULT:
      return "EFAULT";
    case ENOMEM:
      return "ENOMEM";
    case EEXIST:
      return "EEXIST";
    case ENOENT:
      return "ENOENT";
    case EBUSY:
      return "EBUSY";
    default:
      return "errno";
  }
}

bool parse_number(std::string_view s, long max, long& out) {
  if (s.empty()) return false;
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0 || v > max) return false;
  out = v;
  return true;
}

unsigned long ul(uint64_t v) {
  return static_cast<unsigned long>(v);
}

}  // namespace

syscall_layer& real_syscalls() {
  static real_layer layer;
  return layer;
}

result<interface_spec> parse_interface_spec(std::string_view text) {
  if (text.empty() || text == "off" || text == "none") return interface_spec{};
  const size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  interface_spec spec;
  long max = INT_MAX;
  if (kind == "prctl") {
    spec.kind = interface_kind::prctl_range;
  } else if (kind == "prctl-legacy") {
    spec.kind = interface_kind::prctl_legacy;
  } else if (kind == "syscall") {
    spec.kind = interface_kind::syscall_setup;
    max = 4095;  // system call numbers of every Linux ABI are small; x32 bit etc. refused
  } else {
    return make_error(errc::invalid_argument,
                      "kernel SFrame interface \"%.*s\": unknown kind \"%.*s\" (use off, "
                      "prctl:ADD,REMOVE, prctl-legacy:ADD,REMOVE or syscall:REGISTER,UNREGISTER)",
                      static_cast<int>(text.size()), text.data(), static_cast<int>(kind.size()),
                      kind.data());
  }
  const std::string_view numbers =
      colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  const size_t comma = numbers.find(',');
  if (comma == std::string_view::npos || !parse_number(numbers.substr(0, comma), max, spec.add) ||
      !parse_number(numbers.substr(comma + 1), max, spec.remove) || spec.add == spec.remove) {
    return make_error(errc::invalid_argument,
                      "kernel SFrame interface \"%.*s\": needs two different decimal numbers in "
                      "1..%ld after \"%.*s:\" (they are never guessed)",
                      static_cast<int>(text.size()), text.data(), max,
                      static_cast<int>(kind.size()), kind.data());
  }
  return spec;
}

std::string configured_interface(std::string_view configured) {
  if (!configured.empty()) return std::string(configured);
  const char* env = std::getenv("JITUNWIND_KERNEL_SFRAME");
  return env != nullptr ? std::string(env) : std::string();
}

std::string to_string(const interface_spec& spec) {
  const char* kind = "off";
  switch (spec.kind) {
    case interface_kind::none:
      return "off";
    case interface_kind::prctl_range:
      kind = "prctl";
      break;
    case interface_kind::prctl_legacy:
      kind = "prctl-legacy";
      break;
    case interface_kind::syscall_setup:
      kind = "syscall";
      break;
  }
  return format("%s:%ld,%ld", kind, spec.add, spec.remove);
}

const char* to_string(backend_status status) noexcept {
  switch (status) {
    case backend_status::disabled:
      return "disabled";
    case backend_status::untested:
      return "untested";
    case backend_status::active:
      return "active";
    case backend_status::unsupported:
      return "unsupported";
  }
  return "unknown";
}

kernel_backend::kernel_backend(interface_spec spec, syscall_layer& calls, log_sink log)
    : spec_(spec),
      calls_(calls),
      log_(log),
      status_(spec.kind == interface_kind::none ? backend_status::disabled
                                                : backend_status::untested),
      status_message_(spec.kind == interface_kind::none
                          ? "kernel SFrame registration not configured "
                            "(JITUNWIND_KERNEL_SFRAME unset)"
                          : "kernel SFrame registration via " + to_string(spec) +
                                ": no window registered yet") {}

result<std::unique_ptr<kernel_backend>> kernel_backend::create(std::string_view spec,
                                                               syscall_layer& calls, log_sink log) {
  auto parsed = parse_interface_spec(spec);
  if (!parsed) return std::move(parsed).error();
  return std::unique_ptr<kernel_backend>(new kernel_backend(*parsed, calls, log));
}

long kernel_backend::issue_register(const kernel_window& w) {
  switch (spec_.kind) {
    case interface_kind::prctl_range:
      return calls_.prctl(static_cast<int>(spec_.add), ul(w.sframe_address),
                          ul(w.sframe_address + w.sframe_size), ul(w.text_start),
                          ul(w.text_start + w.text_size));
    case interface_kind::prctl_legacy:
      return calls_.prctl(static_cast<int>(spec_.add), ul(w.sframe_address), ul(w.text_start),
                          ul(w.text_start + w.text_size), 0);
    case interface_kind::syscall_setup: {
      sframe_setup setup{w.sframe_address, w.sframe_size, w.text_start, w.text_size};
      return calls_.syscall2(spec_.add, reinterpret_cast<unsigned long>(&setup), sizeof(setup));
    }
    case interface_kind::none:
      break;
  }
  return 0;
}

long kernel_backend::issue_unregister(uint64_t sframe_address) {
  switch (spec_.kind) {
    case interface_kind::prctl_range:
    case interface_kind::prctl_legacy:
      return calls_.prctl(static_cast<int>(spec_.remove), ul(sframe_address), 0, 0, 0);
    case interface_kind::syscall_setup: {
      // The proposal keys unregistration by sframe_start and requires the rest to be zero.
      sframe_setup setup{sframe_address, 0, 0, 0};
      return calls_.syscall2(spec_.remove, reinterpret_cast<unsigned long>(&setup), sizeof(setup));
    }
    case interface_kind::none:
      break;
  }
  return 0;
}

result<void> kernel_backend::register_window(const kernel_window& w) {
  if (w.sframe_address == 0 || w.sframe_size == 0 || w.text_start == 0 || w.text_size == 0 ||
      w.sframe_address + w.sframe_size < w.sframe_address ||
      w.text_start + w.text_size < w.text_start) {
    return make_error(errc::invalid_argument,
                      "kernel SFrame registration: window text 0x%llx+0x%llx, SFrame "
                      "0x%llx+0x%llx: empty or wrapping range",
                      static_cast<unsigned long long>(w.text_start),
                      static_cast<unsigned long long>(w.text_size),
                      static_cast<unsigned long long>(w.sframe_address),
                      static_cast<unsigned long long>(w.sframe_size));
  }
  std::lock_guard lock(mutex_);
  if (status_ == backend_status::disabled || status_ == backend_status::unsupported) {
    return ok_result();
  }
  const long rc = issue_register(w);
  if (rc >= 0) {
    registered_[w.sframe_address] = text_range{w.text_start, w.text_start + w.text_size};
    if (status_ != backend_status::active) {
      status_ = backend_status::active;
      status_message_ = "kernel SFrame registration via " + to_string(spec_) + ": active";
      log_(log_level::info, status_message_);
    }
    return ok_result();
  }
  const long e = -rc;
  const bool refusal = e == ENOSYS || e == EINVAL || e == EPERM || e == EACCES;
  if (status_ == backend_status::untested && refusal) {
    // prctl answers EINVAL both for an unknown option and for a section it rejects; before any
    // success we cannot tell them apart, so we stop here rather than keep calling.
    status_ = backend_status::unsupported;
    status_message_ = format(
        "kernel SFrame registration via %s: unsupported: the first registration (text "
        "0x%llx+0x%llx) returned %s (%s); this kernel does not provide that interface (or "
        "rejected the section); no further calls will be made",
        to_string(spec_).c_str(), static_cast<unsigned long long>(w.text_start),
        static_cast<unsigned long long>(w.text_size), errno_name(e),
        std::strerror(static_cast<int>(e)));
    log_(log_level::warning, status_message_);
    return error(errc::unsupported, status_message_);
  }
  std::string msg = format(
      "kernel SFrame registration via %s: the kernel rejected window text 0x%llx+0x%llx, "
      "SFrame 0x%llx+0x%llx: %s (%s)",
      to_string(spec_).c_str(), static_cast<unsigned long long>(w.text_start),
      static_cast<unsigned long long>(w.text_size),
      static_cast<unsigned long long>(w.sframe_address),
      static_cast<unsigned long long>(w.sframe_size), errno_name(e),
      std::strerror(static_cast<int>(e)));
  log_(log_level::warning, msg);
  return error(e == EINVAL ? errc::invalid_argument : errc::io_error, std::move(msg));
}

result<void> kernel_backend::unregister_window(const kernel_window& w) {
  std::lock_guard lock(mutex_);
  auto it = registered_.find(w.sframe_address);
  if (it == registered_.end()) return ok_result();
  registered_.erase(it);
  const long rc = issue_unregister(w.sframe_address);
  if (rc >= 0) return ok_result();
  const long e = -rc;
  std::string msg =
      format("kernel SFrame registration via %s: unregistering SFrame 0x%llx: %s (%s)",
             to_string(spec_).c_str(), static_cast<unsigned long long>(w.sframe_address),
             errno_name(e), std::strerror(static_cast<int>(e)));
  log_(log_level::warning, msg);
  return error(errc::io_error, std::move(msg));
}

backend_status kernel_backend::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

std::string kernel_backend::status_message() const {
  std::lock_guard lock(mutex_);
  return status_message_;
}

size_t kernel_backend::registered_count() const {
  std::lock_guard lock(mutex_);
  return registered_.size();
}

std::vector<text_range> kernel_backend::registered_texts() const {
  std::lock_guard lock(mutex_);
  std::vector<text_range> out;
  out.reserve(registered_.size());
  for (const auto& [address, text] : registered_) out.push_back(text);
  return out;
}

}  // namespace jitunwind::detail::kernel
