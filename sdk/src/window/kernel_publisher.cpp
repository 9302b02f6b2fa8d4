// Publisher "kernel": SFrame registration with the running kernel, opt-in only
// (docs/kernel-registration.md). The kernel's SFrame series (v13 and later) reads SFrame v3
// only, sorted and PC-relative: the publisher hands it the window's section when that is v3 (the
// default) and otherwise a v3 copy it encodes and keeps mapped until the window is unregistered.
// Every section goes through the series' registration checklist first: one the kernel would
// refuse is reported by the failed check and not registered. The kernel's copy of a window is
// replaced on every publish: the previous section is unregistered before the new one is
// registered, because the series refuse overlapping text ranges.
#include "window/backends.hpp"

#include <jitunwind/sframe.h>

#include "common/error.hpp"
#include "kernel/kernel_backend.hpp"
#include "kernel/registration_check.hpp"

#include <algorithm>
#include <map>

namespace jitunwind::detail {

namespace {

// The window's v2 section re-encoded as v3 into `out`, whose address the FDE starts are
// relative to (so `out` must not move until it is unregistered).
result<void> as_v3(std::span<const uint8_t> section, uint64_t address, std::vector<uint8_t>& out) {
  auto sized = sframe::convert(section, address, {});
  if (!sized) return std::move(sized).error();
  out.assign(sized->size(), 0);
  sframe::encoder_options at;
  at.section_address = reinterpret_cast<uint64_t>(out.data());
  auto placed = sframe::convert(section, address, at);
  if (!placed) return std::move(placed).error();
  // Into `out`'s own buffer: the offsets are relative to it.
  std::copy(placed->begin(), placed->end(), out.begin());
  return {};
}

class kernel_publisher final : public publisher_backend {
 public:
  kernel_publisher(std::unique_ptr<kernel::kernel_backend> k, log_sink log)
      : kernel_(std::move(k)), log_(log) {}

  publisher kind() const noexcept override { return publisher::kernel; }
  std::string note() const override {
    return "interface " + kernel::to_string(kernel_->interface()) + ", " +
           kernel::to_string(kernel_->status());
  }

  result<void> on_publish(const window_view& w) override {
    if (auto r = unregister(w.id); !r) return r;
    std::span<const uint8_t> section = w.sframe;
    uint64_t address = w.sframe_address;
    if (section.size() > 2 && section[2] != sframe::version_3) {
      std::vector<uint8_t>& copy = copies_[w.id];
      if (auto r = as_v3(section, address, copy); !r) {
        refused(w, "re-encoding its SFrame v" + std::to_string(section[2]) +
                       " section as v3: " + r.error().message());
        return {};
      }
      section = copy;
      address = reinterpret_cast<uint64_t>(copy.data());
    }
    // Only the published code is executable; an owned window's tail is not mapped RX yet.
    const kernel::kernel_window kw{address, section.size(), w.text_start,
                                   w.code_end - w.text_start};
    auto maps = kernel_->calls().mappings();
    if (!maps) return std::move(maps).error();
    const auto texts = kernel_->registered_texts();
    if (auto failed = kernel::check_registration(kw.sframe_address, section, kw.text_start,
                                                 kw.text_size, *maps, texts)) {
      refused(w, "the kernel's registration " + failed->message);
      return {};
    }
    auto r = kernel_->register_window(kw);
    if (r) {
      registered_[w.id] = kw;
      return {};
    }
    if (r.error().code() != errc::unsupported) {
      // The kernel knows the interface but refused this section: the window is not known to
      // the kernel, the others still may be.
      refused(w, r.error().message());
      return {};
    }
    return r;
  }

  result<void> on_retire(const window_view& w) override { return unregister(w.id); }

 private:
  result<void> unregister(uint64_t id) {
    auto it = registered_.find(id);
    if (it == registered_.end()) return {};
    const kernel::kernel_window kw = it->second;
    registered_.erase(it);
    auto r = kernel_->unregister_window(kw);
    copies_.erase(id);  // after the kernel forgot it
    return r;
  }

  void refused(const window_view& w, const std::string& why) {
    log_(log_level::warning, "kernel: window " + std::to_string(w.id) + " not registered: " + why);
  }

  std::unique_ptr<kernel::kernel_backend> kernel_;
  log_sink log_;
  std::map<uint64_t, kernel::kernel_window> registered_;  // window id -> what the kernel has
  std::map<uint64_t, std::vector<uint8_t>> copies_;       // window id -> v3 copy of a v2 section
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_kernel_publisher(const session_options& o,
                                                                 kernel::syscall_layer& calls) {
  auto k =
      kernel::kernel_backend::create(kernel::configured_interface(o.kernel_sframe), calls, o.log);
  if (!k) return std::move(k).error();
  if ((*k)->status() == kernel::backend_status::disabled)
    return make_error(errc::invalid_argument,
                      "kernel: no interface configured (set kernel_sframe or "
                      "JITUNWIND_KERNEL_SFRAME, e.g. \"prctl:79,80\"); it is never guessed");
  return std::unique_ptr<publisher_backend>(
      std::make_unique<kernel_publisher>(std::move(k).value(), o.log));
}

result<std::unique_ptr<publisher_backend>> make_kernel_publisher(const session_options& o) {
  return make_kernel_publisher(o, kernel::real_syscalls());
}

}  // namespace jitunwind::detail
