// Publishers that name code for perf and gdb: "perfmap", "jitdump" and "gdb".
#include "window/backends.hpp"

#include "common/error.hpp"
#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace jitunwind::detail {

namespace {

// The file publishers' buffered records (durability::batched) are written when a window is
// sealed, retired or freed, besides the writers' own triggers (size, latency bound).
template <class Writer>
result<void> flush_writer(Writer& w, bool due_only, uint64_t now_ns) {
  return due_only ? w.flush_if_due(now_ns) : w.flush();
}

// perf map lines are never withdrawn: perf takes the last line for an address, so a reused
// range simply gets new lines.
class perfmap_backend final : public publisher_backend {
 public:
  explicit perfmap_backend(std::unique_ptr<perfmap_writer> w) : writer_(std::move(w)) {}
  publisher kind() const noexcept override { return publisher::perfmap; }
  std::string note() const override { return "writing " + writer_->path(); }
  result<void> on_seal(const window_view&) override { return writer_->flush(); }
  result<void> on_free(const window_view&) override { return writer_->flush(); }
  result<void> flush(bool due_only, uint64_t now_ns) override {
    return flush_writer(*writer_, due_only, now_ns);
  }

  // All lines of a publish stay together (one write under sync). The entries of a small publish
  // live on the stack: no lock of our own (the writer orders concurrent publishes).
  result<void> on_publish(const window_view& w) override {
    constexpr size_t small = 8;
    perfmap_entry local[small];
    std::vector<perfmap_entry> large;
    if (w.added.size() > small) large.resize(w.added.size());
    perfmap_entry* out = w.added.size() > small ? large.data() : local;
    size_t n = 0;
    for (const published_function& f : w.added) {
      if (!f.named()) continue;  // stub arrays: their stubs are named one by one
      // window::append and name_range reject names with control bytes.
      out[n++] = {f.frames.start, f.frames.size, f.name, /*clean=*/true};
    }
    return writer_->add_batch(std::span<const perfmap_entry>(out, n));
  }
  result<void> on_retire(const window_view&) override { return writer_->flush(); }

 private:
  std::unique_ptr<perfmap_writer> writer_;
};

class jitdump_backend final : public publisher_backend {
 public:
  explicit jitdump_backend(std::unique_ptr<jitdump_writer> w) : writer_(std::move(w)) {}
  ~jitdump_backend() override { (void)writer_->close(); }
  publisher kind() const noexcept override { return publisher::jitdump; }
  std::string note() const override { return "writing " + writer_->path(); }
  result<void> on_seal(const window_view&) override { return writer_->flush(); }
  result<void> flush(bool due_only, uint64_t now_ns) override {
    return flush_writer(*writer_, due_only, now_ns);
  }

  // All records of a publish go out together (jitdump_writer::write_batch): one write under
  // sync, or into the buffer under batched.
  result<void> on_publish(const window_view& w) override {
    std::lock_guard lock(mutex_);
    batch_.clear();
    for (const published_function& f : w.added) {
      if (!f.named()) continue;  // stub arrays: their stubs are named one by one
      jitdump_entry e;
      e.load.name = f.name;
      e.load.code_addr = f.frames.start;
      e.load.code =
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(f.frames.start), f.frames.size);
      e.load.frame = &f.frames;
      e.load.clean_name = true;  // window::append and name_range reject control bytes
      // Code copied from announced code is a CODE_MOVE of its index; code never announced (e.g.
      // published before jitdump was on) is loaded.
      if (f.moved_from != 0) {
        if (const uint64_t* index = find_index(f.moved_from)) {
          e.move_index = *index;
          e.old_addr = f.moved_from;
        }
      }
      batch_.push_back(e);
    }
    if (batch_.empty()) return {};
    if (auto r = writer_->write_batch(batch_, &indices_); !r) return r;
    // A runtime publishes the same window many times in a row: keep its entry at hand.
    if (last_ == nullptr || last_id_ != w.id) {
      last_ = &windows_[w.text_start];
      last_->id = w.id;
      last_->end = w.text_start + w.text_size;
      ids_[w.id] = w.text_start;
      last_id_ = w.id;
    }
    for (size_t i = 0; i < batch_.size(); ++i)
      last_->functions.emplace_back(batch_[i].load.code_addr, indices_[i]);
    return {};
  }

  result<void> on_retire(const window_view&) override { return writer_->flush(); }

  // After the grace period the code is gone: its index can no longer be the source of a move.
  result<void> on_free(const window_view& w) override {
    {
      std::lock_guard lock(mutex_);
      auto id = ids_.find(w.id);
      if (id != ids_.end()) {
        windows_.erase(id->second);
        ids_.erase(id);
      }
      if (last_id_ == w.id) last_ = nullptr;
    }
    return writer_->flush();
  }

 private:
  // The code index of the code announced at `addr` in a live window (caller holds mutex_).
  const uint64_t* find_index(uint64_t addr) const {
    auto it = windows_.upper_bound(addr);
    if (it == windows_.begin()) return nullptr;
    const per_window& pw = std::prev(it)->second;
    if (addr >= pw.end) return nullptr;
    // Appended in address order; a window's range is reset (on_free) before it is reused.
    auto f = std::lower_bound(pw.functions.begin(), pw.functions.end(), addr,
                              [](const auto& e, uint64_t a) { return e.first < a; });
    if (f == pw.functions.end() || f->first != addr) return nullptr;
    return &f->second;
  }

  struct per_window {
    uint64_t id = 0;
    uint64_t end = 0;
    std::vector<std::pair<uint64_t, uint64_t>> functions;  // (code address, code index)
  };

  std::unique_ptr<jitdump_writer> writer_;
  std::mutex mutex_;
  std::map<uint64_t, per_window> windows_;      // by text start
  std::unordered_map<uint64_t, uint64_t> ids_;  // window id -> text start
  per_window* last_ = nullptr;                  // of the last publish (map nodes do not move)
  uint64_t last_id_ = 0;
  std::vector<jitdump_entry> batch_;            // one publish (mutex_)
  std::vector<uint64_t> indices_;               // its code indices (mutex_)
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
      // Stub arrays are skipped: their stubs are named one by one. Names were checked by
      // window::append / name_range (no control bytes).
      if (f.named())
        batch.push_back({f.name, f.frames.start, f.frames.size, &f.frames, /*clean_name=*/true});
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

namespace {

file_policy policy_for(durability mode, const session_options& o, flusher* background) {
  file_policy p;
  p.mode = mode;
  p.flush_bytes = o.flush_bytes;
  p.latency_ns = static_cast<uint64_t>(o.flush_latency.count()) * 1000000u;
  p.background = mode == durability::batched ? background : nullptr;
  return p;
}

}  // namespace

result<std::unique_ptr<publisher_backend>> make_perfmap_backend(const session_options& o,
                                                                flusher* background) {
  perfmap_options po;
  po.dir = o.perfmap_dir.empty() ? "/tmp" : o.perfmap_dir;
  po.policy = policy_for(o.perfmap_durability, o, background);
  auto w = perfmap_writer::create(po);
  if (!w) return std::move(w).error();
  return std::unique_ptr<publisher_backend>(std::make_unique<perfmap_backend>(std::move(*w)));
}

result<std::unique_ptr<publisher_backend>> make_jitdump_backend(const session_options& o,
                                                                flusher* background) {
  jitdump_options jo;
  jo.dir = o.jitdump_dir;
  jo.policy = policy_for(o.jitdump_durability, o, background);
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
