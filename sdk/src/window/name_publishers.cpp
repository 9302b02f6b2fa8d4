// Publishers that name code for perf and gdb: "perfmap", "jitdump" and "gdb".
#include "window/backends.hpp"

#include "common/error.hpp"
#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/perfmap_writer.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <type_traits>
#include <optional>
#include <unordered_map>
#include <vector>

namespace jitunwind::detail {

namespace {

// Room on the stack for the entries of a small publish, constructed one by one (placement new)
// as they are filled in: a publish of one function does not initialize eight.
template <class T>
struct small_array {
  static constexpr size_t size = 8;
  static_assert(std::is_trivially_destructible_v<T>);
  alignas(T) unsigned char bytes[size * sizeof(T)];
  T* at(size_t i) { return reinterpret_cast<T*>(bytes) + i; }
};

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
  // live on the stack: no lock of our own (the writer orders concurrent publishes, and checks
  // for reused ranges under its lock).
  result<void> on_publish(const window_view& w) override {
    small_array<perfmap_entry> local;
    std::vector<perfmap_entry> large;
    if (w.added.size() > local.size) large.resize(w.added.size());
    perfmap_entry* out = w.added.size() > local.size ? large.data() : local.at(0);
    size_t n = 0;
    for (const published_function& f : w.added) {
      if (!f.named()) continue;  // stub arrays: their stubs are named one by one
      // window::append and name_range reject names with control bytes.
      new (out + n++) perfmap_entry{f.frames.start, f.frames.size, f.name, /*clean=*/true};
    }
    const std::span<const perfmap_entry> lines(out, n);
    std::vector<perfmap_writer::reused_line> reused;
    auto r = writer_->add_batch(lines, reused);
    for (const perfmap_entry& e : lines) {
      // perf's perf map reader skips a line whose name is shorter than 3 bytes (measured with
      // perf 6.1: "f0" is never used, "jit_f0" is): the code shows as [unknown].
      if (e.name.size() < 3 && !warned_enough(short_names_))
        log_(log_level::warning,
             format("%s: '%.*s' at 0x%llx: perf report ignores perf map names shorter than 3 "
                    "bytes (the code shows as [unknown]); jitwalk and perf inject --jit do not",
                    writer_->path().c_str(), static_cast<int>(e.name.size()), e.name.data(),
                    static_cast<unsigned long long>(e.start)));
      else if (e.name.size() < 3)
        log_(log_level::warning, "perf map name shorter than 3 bytes (perf report ignores it)");
    }
    for (const perfmap_writer::reused_line& u : reused) {
      if (!warned_enough(reuses_))
        warn_about_reuse(lines[u.entry], u);
      else
        log_(log_level::warning, "perf map line over code an earlier line named (perf report "
                                 "names one of the two wrong)");
    }
    return r;
  }
  result<void> on_retire(const window_view&) override { return writer_->flush(); }

 private:
  // perf reads the map after the run and takes one line for an address for every sample of the
  // profile (docs/window.md, "Reused addresses"): a line over bytes an earlier line named makes
  // one of the two codes misnamed, and nothing can take the earlier line back. Said once per
  // line, naming both.
  void warn_about_reuse(const perfmap_entry& e, const perfmap_writer::reused_line& earlier) {
    log_(log_level::warning,
         format("%s: '%.*s' at 0x%llx (%llu bytes) is code where the perf map named other "
                "code before ([0x%llx, 0x%llx)): perf report, which reads the map after the "
                "run, names every sample there after one of the two lines, whatever its time "
                "(perf map lines cannot be withdrawn). jitwalk names both right, and so does "
                "perf with the jitdump publisher and perf inject --jit; with memory the SDK "
                "places, address reuse off (the default with this publisher) avoids it",
                writer_->path().c_str(), static_cast<int>(e.name.size()), e.name.data(),
                static_cast<unsigned long long>(e.start), static_cast<unsigned long long>(e.size),
                static_cast<unsigned long long>(earlier.start),
                static_cast<unsigned long long>(earlier.end)));
  }

  // Whether the session has been sent as many warnings of this kind as it logs: the rest go
  // without their message formatted (the session counts them in status(); formatting one costs
  // more than publishing a function, and a runtime that reuses addresses warns per function).
  static bool warned_enough(std::atomic<uint64_t>& sent) {
    return sent.fetch_add(1, std::memory_order_relaxed) >= logged_warnings_per_publisher;
  }

  std::unique_ptr<perfmap_writer> writer_;
  log_sink log_;
  std::atomic<uint64_t> short_names_{0}, reuses_{0};
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

  // No lock of our own on a publish: the window's list of objects is found through its
  // publisher word (publishes of one window are never concurrent), the registrar locks itself.
  result<void> on_publish(const window_view& w) override {
    std::vector<gdbjit::registration_id>& objects = objects_of(w);
    for (const removed_function& f : w.removed) {
      if (auto r = take_out(objects, f.start); !r) return r;
    }
    small_array<gdbjit::function_symbol> local;
    std::vector<gdbjit::function_symbol> large;
    if (w.added.size() > local.size) large.resize(w.added.size());
    gdbjit::function_symbol* symbols = w.added.size() > local.size ? large.data() : local.at(0);
    size_t n = 0;
    for (const published_function& f : w.added) {
      // Stub arrays are skipped: their stubs are named one by one. Names were checked by
      // window::append / name_range (no control bytes).
      if (f.named())
        new (symbols + n++)
            gdbjit::function_symbol{f.name, f.frames.start, f.frames.size, &f.frames, true};
    }
    if (n == 0) return {};
    auto added = registrar_->append(objects.empty() ? 0 : objects.back(),
                                    std::span<const gdbjit::function_symbol>(symbols, n));
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
      w.state_of(publisher::gdb) = 0;
      auto it = by_window_.find(w.id);
      if (it == by_window_.end()) return {};
      objects.swap(it->second);
      by_window_.erase(it);
    }
    for (gdbjit::registration_id id : objects) {
      if (auto r = registrar_->remove(id); !r) return r;
    }
    return {};
  }

 private:
  // The window's objects, the one that grows last. The list lives in by_window_ (nodes stay put
  // until erased), and the window's publisher word points at it after its first publish.
  std::vector<gdbjit::registration_id>& objects_of(const window_view& w) {
    uint64_t& word = w.state_of(publisher::gdb);
    if (word == 0) {
      std::lock_guard lock(mutex_);
      word = reinterpret_cast<uintptr_t>(&by_window_[w.id]);
    }
    return *reinterpret_cast<std::vector<gdbjit::registration_id>*>(static_cast<uintptr_t>(word));
  }

  // Replaces the object holding the function at `start` by one without it.
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
  std::mutex mutex_;  // guards by_window_'s nodes (not the lists, which their windows own)
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
