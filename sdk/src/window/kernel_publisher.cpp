// Publisher "kernel": SFrame registration with the running kernel, opt-in only
// (docs/kernel-registration.md). The kernel's copy of a window is replaced on every publish:
// the previous section is unregistered before the new one is registered, because the posted
// kernel series refuse overlapping text ranges.
#include "window/backends.hpp"

#include "common/error.hpp"
#include "kernel/kernel_backend.hpp"

namespace jitunwind::detail {

namespace {

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
    if (w.previous_sframe_size != 0) {
      if (auto r = kernel_->unregister_window({w.previous_sframe_address, w.previous_sframe_size,
                                               w.text_start, w.code_end - w.text_start});
          !r)
        return r;
    }
    // Only the published code is executable; an owned window's tail is not mapped RX yet.
    auto r = kernel_->register_window(
        {w.sframe_address, w.sframe.size(), w.text_start, w.code_end - w.text_start});
    if (!r && r.error().code() != errc::unsupported) {
      // The kernel knows the interface but refused this section: the window is not known to
      // the kernel, the others still may be.
      log_(log_level::warning,
           "kernel refused window " + std::to_string(w.id) + ": " + r.error().message());
      return {};
    }
    return r;
  }

  result<void> on_retire(const window_view& w) override {
    if (w.sframe.empty()) return {};
    return kernel_->unregister_window(
        {w.sframe_address, w.sframe.size(), w.text_start, w.code_end - w.text_start});
  }

 private:
  std::unique_ptr<kernel::kernel_backend> kernel_;
  log_sink log_;
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_kernel_publisher(const session_options& o) {
  auto k = kernel::kernel_backend::create(kernel::configured_interface(o.kernel_sframe),
                                          kernel::real_syscalls(), o.log);
  if (!k) return std::move(k).error();
  if ((*k)->status() == kernel::backend_status::disabled)
    return make_error(errc::invalid_argument,
                      "kernel: no interface configured (set kernel_sframe or "
                      "JITUNWIND_KERNEL_SFRAME, e.g. \"prctl:79,80\"); it is never guessed");
  return std::unique_ptr<publisher_backend>(
      std::make_unique<kernel_publisher>(std::move(k).value(), o.log));
}

}  // namespace jitunwind::detail
