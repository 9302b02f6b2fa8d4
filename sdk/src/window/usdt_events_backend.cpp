// Publisher "usdt-events": the SDK's static probes (provider jitunwind, docs/usdt-events.md).
// Each event fires after the registry change it announces (this backend runs last).
#include "window/backends.hpp"

#include "usdt_events/events.hpp"

namespace jitunwind::detail {

namespace {

class usdt_events_backend final : public publisher_backend {
 public:
  publisher kind() const noexcept override { return publisher::usdt_events; }
  std::string note() const override { return "probes jitunwind:window_publish, code_add, ..."; }

  result<void> on_publish(const window_view& w) override {
    for (const removed_function& f : w.removed)
      usdt_events::code_remove(f.start, f.size, w.id, w.generation);
    for (const published_function& f : w.added) {
      if (f.named())
        usdt_events::code_add(f.frames.start, f.frames.size, f.name.data(), w.id, w.generation);
    }
    usdt_events::window_publish(w.id, w.generation, w.text_start, w.text_size, w.sframe_address,
                                w.sframe.size());
    return {};
  }

  result<void> on_retire(const window_view& w) override {
    usdt_events::window_retire(w.id, w.generation);
    return {};
  }

  result<void> on_free(const window_view& w) override {
    usdt_events::window_free(w.id, w.generation);
    return {};
  }
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_usdt_events_backend(const session_options&) {
  return std::unique_ptr<publisher_backend>(std::make_unique<usdt_events_backend>());
}

}  // namespace jitunwind::detail
