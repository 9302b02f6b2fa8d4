// Publishers that name code for perf and gdb: "perfmap", "jitdump" and "gdb".
#include "window/backends.hpp"

#include "common/error.hpp"
#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace jitunwind::detail {

namespace {

// perf map lines are never withdrawn: perf takes the last line for an address, so a reused
// range simply gets new lines.
class perfmap_backend final : public publisher_backend {
 public:
  explicit perfmap_backend(std::unique_ptr<perfmap_writer> w) : writer_(std::move(w)) {}
  publisher kind() const noexcept override { return publisher::perfmap; }
  std::string note() const override { return "writing " + writer_->path(); }

  result<void> on_publish(const window_view& w) override {
    for (const published_function& f : w.added) {
      if (!f.named()) continue;  // stub arrays: their stubs are named one by one
      if (auto r = writer_->add(f.frames.start, f.frames.size, f.name); !r) return r;
    }
    return {};
  }
  result<void> on_retire(const window_view&) override { return {}; }

 private:
  std::unique_ptr<perfmap_writer> writer_;
};

class jitdump_backend final : public publisher_backend {
 public:
  explicit jitdump_backend(std::unique_ptr<jitdump_writer> w) : writer_(std::move(w)) {}
  ~jitdump_backend() override { (void)writer_->close(); }
  publisher kind() const noexcept override { return publisher::jitdump; }
  std::string note() const override { return "writing " + writer_->path(); }

  result<void> on_publish(const window_view& w) override {
    for (const published_function& f : w.added) {
      if (!f.named()) continue;  // stub arrays: their stubs are named one by one
      const uint64_t start = f.frames.start;
      if (f.moved_from != 0) {
        std::optional<uint64_t> index = take_index(f.moved_from);
        if (index) {
          if (auto r = writer_->move(*index, f.moved_from, start, f.frames.size, &f.frames); !r)
            return r;
          remember(w.id, start, *index);
          continue;
        }
        // The old code was never announced (e.g. published before jitdump was on): load it.
      }
      jitdump_load load;
      load.name = f.name;
      load.code_addr = start;
      load.code = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(start), f.frames.size);
      load.frame = &f.frames;
      auto index = writer_->load(load);
      if (!index) return std::move(index).error();
      remember(w.id, start, *index);
    }
    return {};
  }

  result<void> on_retire(const window_view&) override { return {}; }

  // After the grace period the code is gone: its index can no longer be the source of a move.
  result<void> on_free(const window_view& w) override {
    std::lock_guard lock(mutex_);
    auto it = by_window_.find(w.id);
    if (it == by_window_.end()) return {};
    for (uint64_t addr : it->second) index_by_address_.erase(addr);
    by_window_.erase(it);
    return {};
  }

 private:
  void remember(uint64_t window_id, uint64_t addr, uint64_t index) {
    std::lock_guard lock(mutex_);
    index_by_address_[addr] = index;
    by_window_[window_id].push_back(addr);
  }
  std::optional<uint64_t> take_index(uint64_t addr) {
    std::lock_guard lock(mutex_);
    auto it = index_by_address_.find(addr);
    if (it == index_by_address_.end()) return std::nullopt;
    return it->second;
  }

  std::unique_ptr<jitdump_writer> writer_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, uint64_t> index_by_address_;  // code address -> code index
  std::unordered_map<uint64_t, std::vector<uint64_t>> by_window_;
};

// One GDB JIT object per publish batch; all of a window's objects go when it is retired.
class gdb_backend final : public publisher_backend {
 public:
  explicit gdb_backend(std::unique_ptr<gdbjit::registrar> r) : registrar_(std::move(r)) {}
  publisher kind() const noexcept override { return publisher::gdb; }
  std::string note() const override {
    return registrar_->descriptor().policy == gdbjit::descriptor_policy::own
               ? "own __jit_debug_descriptor"
               : "sharing the __jit_debug_descriptor of " +
                     (registrar_->descriptor().first_object.empty()
                          ? std::string("the main program")
                          : registrar_->descriptor().first_object);
  }

  result<void> on_publish(const window_view& w) override {
    std::vector<gdbjit::function_symbol> batch;
    batch.reserve(w.added.size());
    for (const published_function& f : w.added) {
      // Stub arrays are skipped: their stubs are named one by one.
      if (f.named()) batch.push_back({f.name, f.frames.start, f.frames.size, &f.frames});
    }
    if (batch.empty()) return {};
    auto id = registrar_->add(batch);
    if (!id) return std::move(id).error();
    std::lock_guard lock(mutex_);
    by_window_[w.id].push_back(*id);
    return {};
  }

  result<void> on_retire(const window_view& w) override {
    std::vector<gdbjit::registration_id> ids;
    {
      std::lock_guard lock(mutex_);
      auto it = by_window_.find(w.id);
      if (it == by_window_.end()) return {};
      ids.swap(it->second);
      by_window_.erase(it);
    }
    for (auto id : ids) {
      if (auto r = registrar_->remove(id); !r) return r;
    }
    return {};
  }

 private:
  std::unique_ptr<gdbjit::registrar> registrar_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<gdbjit::registration_id>> by_window_;
};

}  // namespace

result<std::unique_ptr<publisher_backend>> make_perfmap_backend(const session_options& o) {
  perfmap_options po;
  po.dir = o.perfmap_dir.empty() ? "/tmp" : o.perfmap_dir;
  auto w = perfmap_writer::create(po);
  if (!w) return std::move(w).error();
  return std::unique_ptr<publisher_backend>(std::make_unique<perfmap_backend>(std::move(*w)));
}

result<std::unique_ptr<publisher_backend>> make_jitdump_backend(const session_options& o) {
  jitdump_options jo;
  jo.dir = o.jitdump_dir;
  jo.target = o.target;
  jo.log = o.log;
  auto w = jitdump_writer::create(jo);
  if (!w) return std::move(w).error();
  return std::unique_ptr<publisher_backend>(std::make_unique<jitdump_backend>(std::move(*w)));
}

result<std::unique_ptr<publisher_backend>> make_gdb_backend(const session_options& o) {
  gdbjit::registrar_options ro;
  ro.target = o.target;
  ro.log = o.log;
  auto r = gdbjit::registrar::create(ro);
  if (!r) return std::move(r).error();
  return std::unique_ptr<publisher_backend>(std::make_unique<gdb_backend>(std::move(*r)));
}

}  // namespace jitunwind::detail
