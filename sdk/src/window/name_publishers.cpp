// Publishers that name code for perf and gdb: "perfmap", "jitdump" and "gdb".
#include "window/backends.hpp"

#include "common/error.hpp"
#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
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

// perf map lines are never withdrawn (the format has no way to; docs/window.md, "Reused
// addresses", says what perf makes of several lines for one address), so a reused range gets
// new lines and a retired function keeps its line.
class perfmap_backend final : public publisher_backend {
 public:
  perfmap_backend(std::unique_ptr<perfmap_writer> w, log_sink log)
      : writer_(std::move(w)), log_(log) {}
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
    warn_about_reuse(std::span<const perfmap_entry>(out, n));
    return writer_->add_batch(std::span<const perfmap_entry>(out, n));
  }
  result<void> on_retire(const window_view&) override { return writer_->flush(); }

 private:
  // perf reads the map after the run and takes one line for an address for every sample of the
  // profile (docs/window.md, "Reused addresses"): a line over bytes an earlier line named makes
  // one of the two codes misnamed, and nothing can take the earlier line back. Said once per
  // line, naming both; `named_` is every range the map has named (start -> end).
  void warn_about_reuse(std::span<const perfmap_entry> lines) {
    std::lock_guard lock(mutex_);
    for (const perfmap_entry& e : lines) {
      // perf's perf map reader skips a line whose name is shorter than 3 bytes (measured with
      // perf 6.1: "f0" is never used, "jit_f0" is): the code shows as [unknown].
      if (e.name.size() < 3)
        log_(log_level::warning,
             format("%s: '%.*s' at 0x%llx: perf report ignores perf map names shorter than 3 "
                    "bytes (the code shows as [unknown]); jitwalk and perf inject --jit do not",
                    writer_->path().c_str(), static_cast<int>(e.name.size()), e.name.data(),
                    static_cast<unsigned long long>(e.start)));
      const uint64_t end = e.start + e.size;
      auto next = named_.upper_bound(e.start);
      std::optional<std::pair<uint64_t, uint64_t>> earlier;
      if (next != named_.begin() && std::prev(next)->second > e.start) earlier = *std::prev(next);
      if (!earlier && next != named_.end() && next->first < end) earlier = *next;
      if (earlier)
        log_(log_level::warning,
             format("%s: '%.*s' at 0x%llx (%llu bytes) is code where the perf map named other "
                    "code before ([0x%llx, 0x%llx)): perf report, which reads the map after the "
                    "run, names every sample there after one of the two lines, whatever its time "
                    "(perf map lines cannot be withdrawn). jitwalk names both right, and so does "
                    "perf with the jitdump publisher and perf inject --jit; with memory the SDK "
                    "places, address reuse off (the default with this publisher) avoids it",
                    writer_->path().c_str(), static_cast<int>(e.name.size()), e.name.data(),
                    static_cast<unsigned long long>(e.start),
                    static_cast<unsigned long long>(e.size),
                    static_cast<unsigned long long>(earlier->first),
                    static_cast<unsigned long long>(earlier->second)));
      uint64_t& known_end = named_[e.start];
      known_end = std::max(known_end, end);
    }
  }

  std::unique_ptr<perfmap_writer> writer_;
  log_sink log_;
  std::mutex mutex_;
  std::map<uint64_t, uint64_t> named_;
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
      // Code copied from elsewhere (window::append's moved_from) is loaded like new code, not
      // written as CODE_MOVE: perf inject maps a move as the original load's object at the new
      // address, and perf 6.1's DWARF unwinder then cuts about half of the call chains through
      // it — byte-identical copies included (toy-jit recompiling: 454 of 974 samples reached
      // main with moves, 2543 of 2543 with loads; docs/window.md, "Reused addresses").
      batch_.push_back(e);
    }
    if (batch_.empty()) return {};
    if (auto r = writer_->write_batch(batch_, nullptr); !r) return r;
    return {};
  }

  result<void> on_retire(const window_view&) override { return writer_->flush(); }

  result<void> on_free(const window_view&) override { return writer_->flush(); }

 private:
  std::unique_ptr<jitdump_writer> writer_;
  std::mutex mutex_;
  std::vector<jitdump_entry> batch_;  // one publish (mutex_)
};

// One growing GDB JIT object per window (gdbjit::registrar::append): a publish adds its
// functions to it in place. While a debugger is attached each publish gets an object of its own
// (gdb then reads every batch once), so a window may have several; all go when it is retired. A
// function taken out (window::retire_function) leaves by replacing the object that holds it with
// a copy without it.
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
    std::lock_guard lock(mutex_);
    std::vector<gdbjit::registration_id>& objects = objects_of(w.id);
    for (const removed_function& f : w.removed) {
      if (auto r = take_out(objects, f.start); !r) return r;
    }
    symbols_.clear();
    for (const published_function& f : w.added) {
      // Stub arrays are skipped: their stubs are named one by one. Names were checked by
      // window::append / name_range (no control bytes).
      if (f.named())
        symbols_.push_back({f.name, f.frames.start, f.frames.size, &f.frames, /*clean_name=*/true});
    }
    if (symbols_.empty()) return {};
    auto added = registrar_->append(objects.empty() ? 0 : objects.back(), symbols_);
    if (!added) return std::move(added).error();
    if (added->replaced)
      objects.back() = added->id;
    else if (objects.empty() || objects.back() != added->id)
      objects.push_back(added->id);
    return {};
  }

  result<void> on_retire(const window_view& w) override {
    std::vector<gdbjit::registration_id> objects;
    {
      std::lock_guard lock(mutex_);
      auto it = by_window_.find(w.id);
      if (it == by_window_.end()) return {};
      objects.swap(it->second);
      by_window_.erase(it);
      last_ = nullptr;
    }
    for (gdbjit::registration_id id : objects) {
      if (auto r = registrar_->remove(id); !r) return r;
    }
    return {};
  }

 private:
  // The window's objects, the one that grows last (caller holds mutex_). Windows publish again
  // and again: the last one looked up is kept (map nodes stay put until erased).
  std::vector<gdbjit::registration_id>& objects_of(uint64_t window_id) {
    if (last_ == nullptr || last_id_ != window_id) {
      last_ = &by_window_[window_id];
      last_id_ = window_id;
    }
    return *last_;
  }

  // Replaces the object holding the function at `start` by one without it (caller holds mutex_).
  result<void> take_out(std::vector<gdbjit::registration_id>& objects, uint64_t start) {
    for (size_t i = 0; i < objects.size(); ++i) {
      auto rest = registrar_->remove_function(objects[i], start);
      if (!rest && rest.error().code() == errc::not_found) continue;
      if (!rest) return std::move(rest).error();
      if (*rest == 0)
        objects.erase(objects.begin() + static_cast<ptrdiff_t>(i));
      else
        objects[i] = *rest;
      return {};
    }
    return {};  // never named (a stub array's part, or published before gdb was on)
  }

  std::unique_ptr<gdbjit::registrar> registrar_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<gdbjit::registration_id>> by_window_;
  std::vector<gdbjit::registration_id>* last_ = nullptr;
  uint64_t last_id_ = 0;
  std::vector<gdbjit::function_symbol> symbols_;  // one publish's (mutex_)
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
  return std::unique_ptr<publisher_backend>(
      std::make_unique<perfmap_backend>(std::move(*w), o.log));
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
