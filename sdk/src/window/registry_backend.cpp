// Publisher "registry": every published window is an entry of the process-wide registry that
// external unwinders read (docs/registry-abi.md).
#include "window/backends.hpp"

#include "registry/registry_writer.hpp"

#include <utility>

namespace jitunwind::detail {

namespace {

// The window's registry slot is kept in its publisher_state word (slot index + 1; 0: none), so
// a publish finds it without a lock or a lookup.
class registry_backend final : public publisher_backend {
 public:
  publisher kind() const noexcept override { return publisher::registry; }
  std::string note() const override { return "exported as jitunwind_registry"; }

  result<void> on_publish(const window_view& w) override {
    // The version byte of the section itself (the session's choice, 3 by default).
    const uint8_t version = w.sframe.size() > 2 ? w.sframe[2] : 0;
    const registry_window entry{w.id,           w.text_start, w.text_size, w.sframe_address,
                                w.sframe.size(), w.target,    version};
    uint64_t& slot = w.state_of(publisher::registry);
    if (slot == 0) {
      auto added = registry().add(entry, w.generation);
      if (!added) return std::move(added).error();
      slot = uint64_t{added->slot.index} + 1;
      return {};
    }
    auto updated = registry().update(slot_of(slot), entry, w.generation);
    if (!updated) return std::move(updated).error();
    return {};
  }

  result<void> on_retire(const window_view& w) override {
    const uint64_t slot = w.state_of(publisher::registry);
    if (slot == 0) return {};  // never published
    return registry().retire(slot_of(slot));
  }

  result<void> on_free(const window_view& w) override {
    const uint64_t slot = std::exchange(w.state_of(publisher::registry), 0);
    if (slot == 0) return {};
    return registry().release(slot_of(slot));
  }

 private:
  static registry_slot slot_of(uint64_t word) { return {static_cast<uint32_t>(word - 1)}; }
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_registry_backend(const session_options&) {
  return std::unique_ptr<publisher_backend>(std::make_unique<registry_backend>());
}

}  // namespace jitunwind::detail
