// Publisher "registry": every published window is an entry of the process-wide registry that
// external unwinders read (docs/registry-abi.md).
#include "window/backends.hpp"

#include "registry/registry_writer.hpp"

#include <mutex>
#include <unordered_map>

namespace jitunwind::detail {

namespace {

class registry_backend final : public publisher_backend {
 public:
  publisher kind() const noexcept override { return publisher::registry; }
  std::string note() const override { return "exported as jitunwind_registry"; }

  result<void> on_publish(const window_view& w) override {
    // The version byte of the section itself (the session's choice, 3 by default).
    const uint8_t version = w.sframe.size() > 2 ? w.sframe[2] : 0;
    const registry_window entry{w.id,           w.text_start, w.text_size, w.sframe_address,
                                w.sframe.size(), w.target,    version};
    std::unique_lock lock(mutex_);
    auto it = slots_.find(w.id);
    if (it == slots_.end()) {
      lock.unlock();
      auto added = registry().add(entry, w.generation);
      if (!added) return std::move(added).error();
      lock.lock();
      slots_[w.id] = added->slot;
      return {};
    }
    const registry_slot slot = it->second;
    lock.unlock();
    auto updated = registry().update(slot, entry, w.generation);
    if (!updated) return std::move(updated).error();
    return {};
  }

  result<void> on_retire(const window_view& w) override {
    auto slot = find(w.id);
    if (!slot) return {};  // never published
    return registry().retire(*slot);
  }

  result<void> on_free(const window_view& w) override {
    std::optional<registry_slot> slot;
    {
      std::lock_guard lock(mutex_);
      auto it = slots_.find(w.id);
      if (it == slots_.end()) return {};
      slot = it->second;
      slots_.erase(it);
    }
    return registry().release(*slot);
  }

 private:
  std::optional<registry_slot> find(uint64_t id) {
    std::lock_guard lock(mutex_);
    auto it = slots_.find(id);
    if (it == slots_.end()) return std::nullopt;
    return it->second;
  }

  std::mutex mutex_;
  std::unordered_map<uint64_t, registry_slot> slots_;
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_registry_backend(const session_options&) {
  return std::unique_ptr<publisher_backend>(std::make_unique<registry_backend>());
}

}  // namespace jitunwind::detail
