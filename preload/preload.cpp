// libjitunwind_preload.so — zero-code integration for runtimes that register their JIT code's
// CFI the standard way. It interposes libgcc's `__register_frame` / `__deregister_frame`: each
// registered `.eh_frame` is decoded (cfi::decode, the converter `sframe build --from-eh-frame`
// uses) and its functions are published in a described code window of one jitunwind session
// (publishers from JITUNWIND_PUBLISH, default: registry, perf map and USDT events; gdb is
// refused). Deregistration retires the window.
//
// Names come from the GDB JIT interface (gdb_names.hpp) when the runtime uses it (LLVM with
// debugger support), else functions are "jit:0x<start>". LLVM registers the `.eh_frame` first
// and the debug object just after (seen with gdb on LLVM 22: __register_frame, then
// __jit_debug_register_code), so a registration whose functions are not all named yet waits
// up to JITUNWIND_PRELOAD_NAME_WAIT_MS (default 50; 0: never) on a worker thread that looks for
// the names every millisecond and then publishes, named or not (or sooner, with the names it has,
// when the code is deregistered or the process exits first). A process without a
// `__jit_debug_descriptor` publishes at once; when a wait ends with no object listed, the
// process does not use the interface and later registrations publish at once too.
//
// It must never break the host: the real function is always called, with the host's argument,
// whatever happened here; a failure of ours is logged once (stderr, "jitunwind preload: ...")
// and that registration is simply not published.
//
// Threads, signals, fork: registrations from several threads are serialized by a mutex, held
// across fork() (pthread_atfork) so a child never inherits it locked; in a fork child the
// inherited session is not used (the pid differs) and nothing is published there: the child's
// registrations go to libgcc only. Our part allocates and locks, so it is not async-signal-safe
// — neither is libgcc's own __register_frame (it allocates its object with malloc), so no host
// can call it from a signal handler. If a signal handler does call it on a thread that is inside
// our part already, the nested call skips our part (a thread-local guard) instead of deadlocking
// on the mutex. The worker thread blocks every signal, so the host's handlers never run on it.
#include "gdb_names.hpp"

#include <jitunwind/cfi.h>
#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using register_fn = void (*)(void*);

// An .eh_frame registered with libgcc is one section ending in a zero length. Its extent is
// found by walking the entry lengths; a section larger than this is not published.
constexpr size_t max_section = size_t{64} << 20;
constexpr size_t max_entries = size_t{1} << 20;

size_t section_extent(const uint8_t* begin) {
  size_t off = 0;
  for (size_t n = 0; n < max_entries; ++n) {
    uint32_t len32;
    std::memcpy(&len32, begin + off, 4);
    if (len32 == 0) return off;
    uint64_t len = len32;
    size_t header = 4;
    if (len32 == 0xffffffff) {
      std::memcpy(&len, begin + off + 4, 8);
      header = 12;
    }
    if (len > max_section || off + header + len > max_section) return 0;
    off += header + static_cast<size_t>(len);
  }
  return 0;
}

using clock = std::chrono::steady_clock;

// Set while a thread runs our part of a call: a signal handler that registers frames on that
// thread meanwhile skips our part instead of waiting for the mutex it holds.
thread_local bool inside = false;

struct reentry_guard {
  bool entered = false;
  reentry_guard() {
    if (!inside) entered = inside = true;
  }
  ~reentry_guard() {
    if (entered) inside = false;
  }
};

// Milliseconds a registration waits for its names (JITUNWIND_PRELOAD_NAME_WAIT_MS).
std::chrono::milliseconds name_wait_from_env() {
  const char* v = std::getenv("JITUNWIND_PRELOAD_NAME_WAIT_MS");
  if (v == nullptr || *v == '\0') return std::chrono::milliseconds(50);
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  if (*end != '\0' || ms < 0 || ms > 10000) return std::chrono::milliseconds(50);
  return std::chrono::milliseconds(ms);
}

class preload_state {
 public:
  static preload_state& get() {
    static preload_state* s = new preload_state();  // never destroyed: calls may come at exit
    return *s;
  }

  void on_register(void* begin) {
    reentry_guard guard;
    if (!guard.entered) return;
    std::unique_lock lock(mutex_);
    if (!ready()) return;
    const auto* bytes = static_cast<const uint8_t*>(begin);
    const size_t size = section_extent(bytes);
    if (size == 0) return log_once("a registered .eh_frame has no terminator within 64 MiB");
    jitunwind::cfi::decoder_options o;
    o.section_address = reinterpret_cast<uint64_t>(begin);
    o.restore_popped_fp = true;  // code with frame pointers: the window API takes its rows
    auto d = jitunwind::cfi::decode(std::span<const uint8_t>(bytes, size), o);
    if (!d) return log_once(d.error().message());
    left_out_ += d->left_out.size();
    if (d->functions.empty()) return;
    pending p{begin, std::move(d->functions), clock::now() + name_wait_};
    // No descriptor in the process at all: nobody will name these functions, publish now.
    const bool interface = names_.refresh();
    if (!interface || all_named(p) || name_wait_.count() == 0 || gdb_unused_) return publish(p);
    if (!start_worker()) return publish(p);
    pending_.push_back(std::move(p));
    wake_.notify_one();
  }

  void on_deregister(void* begin) {
    reentry_guard guard;
    if (!guard.entered) return;
    std::lock_guard lock(mutex_);
    if (!session_ || getpid() != pid_) return;
    // Still waiting for its names: the code ran, and a perf map read after the process ended
    // must name its samples, so it is published now with the names it has, then retired.
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->begin == begin) {
        publish(*it);
        pending_.erase(it);
        break;
      }
    }
    auto it = windows_.find(begin);
    if (it == windows_.end()) return;
    names_.forget(it->second->text_start(), it->second->text_start() + it->second->text_size());
    // The host frees the code after deregistering it: no grace period.
    (void)it->second->retire(std::chrono::milliseconds(0));
    windows_.erase(it);
    session_->poll();
  }

  // At exit, registrations still waiting for names are published as they are (the perf map
  // files are flushed by an atexit handler registered before this one, so it runs after it).
  void publish_pending_at_exit() {
    reentry_guard guard;
    if (!guard.entered) return;
    std::lock_guard lock(mutex_);
    if (!session_ || getpid() != pid_) return;
    for (const pending& p : pending_) publish(p);
    pending_.clear();
  }

  register_fn real_register = nullptr;
  register_fn real_deregister = nullptr;

 private:
  // A decoded registration waiting for the names of its functions.
  struct pending {
    void* begin = nullptr;
    std::vector<jitunwind::function_desc> functions;
    clock::time_point deadline;
  };

  preload_state() : name_wait_(name_wait_from_env()) {
    real_register = reinterpret_cast<register_fn>(dlsym(RTLD_NEXT, "__register_frame"));
    real_deregister = reinterpret_cast<register_fn>(dlsym(RTLD_NEXT, "__deregister_frame"));
    // A fork while another thread registers would leave the child's copy of the mutex locked
    // forever: hold it across fork() so both sides get it unlocked. The child has no worker
    // thread and publishes nothing, so its copy of the waiting registrations is dropped.
    pthread_atfork([] { get().mutex_.lock(); }, [] { get().mutex_.unlock(); },
                   [] {
                     preload_state& s = get();
                     s.pending_.clear();
                     s.worker_started_ = false;
                     s.mutex_.unlock();
                   });
  }

  bool all_named(const pending& p) const {
    for (const jitunwind::function_desc& f : p.functions)
      if (names_.find(f.start) == nullptr) return false;
    return true;
  }

  // The worker, started at the first registration that waits (caller holds mutex_). Detached:
  // it waits on the condition variable for as long as the process lives.
  bool start_worker() {
    if (worker_started_) return true;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);  // inherited by the new thread
    try {
      std::thread([this] { worker(); }).detach();
      worker_started_ = true;
    } catch (const std::system_error& e) {
      log_once(std::string("cannot start the naming thread: ") + e.what());
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return worker_started_;
  }

  void worker() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (pending_.empty()) {
        wake_.wait(lock);
        continue;
      }
      wake_.wait_for(lock, std::chrono::milliseconds(1));
      if (getpid() != pid_) return;
      names_.refresh();
      const auto now = clock::now();
      for (auto it = pending_.begin(); it != pending_.end();) {
        const bool named = all_named(*it);
        if (!named && now < it->deadline) {
          ++it;
          continue;
        }
        // A wait that ended with nothing ever listed: the process does not use the interface.
        if (!named && names_.listed() == 0) gdb_unused_ = true;
        publish(*it);
        it = pending_.erase(it);
      }
    }
  }

  // Publishes one registration's functions in a described window (caller holds mutex_).
  void publish(const pending& p) {
    const auto& fs = p.functions;
    jitunwind::described_window_options wo;
    wo.text_start = fs.front().start;
    wo.text_size = fs.back().start + fs.back().size - wo.text_start;
    // Sized to the rows (the default assumes a few rows per 64 bytes of code; compiled code
    // can have more). A function the encoder refuses is reported by append below.
    jitunwind::sframe::encoder_options eo;
    eo.section_address = wo.text_start;
    if (auto bytes = jitunwind::sframe::encode(eo, fs)) wo.sframe_capacity = bytes->size();
    auto w = session_->describe_window(wo);
    if (!w) return log_once(w.error().message());
    char fallback[40];
    for (const jitunwind::function_desc& f : fs) {
      const std::string* name = names_.find(f.start);
      if (name == nullptr) {
        std::snprintf(fallback, sizeof fallback, "jit:0x%llx",
                      static_cast<unsigned long long>(f.start));
      }
      if (auto a = (*w)->append(name != nullptr ? *name : fallback, f); !a)
        log_once(a.error().message());
    }
    (void)(*w)->publish();
    windows_[p.begin] = *w;
  }

  // The session, created at the first registration (caller holds mutex_).
  bool ready() {
    if (session_) return getpid() == pid_;
    if (failed_) return false;
    auto o = jitunwind::session_options::from_env();
    if (!o) {
      failed_ = true;
      log_once(o.error().message());
      return false;
    }
    // The USDT events tell jitwalk about each window the moment it is published (without them
    // it finds windows at its next poll of the registry, up to a second later).
    if (std::getenv("JITUNWIND_PUBLISH") == nullptr)
      o->publishers = jitunwind::publisher::registry | jitunwind::publisher::perfmap |
                      jitunwind::publisher::usdt_events;
    if (jitunwind::contains(o->publishers, jitunwind::publisher::gdb)) {
      // Our descriptor is hidden inside this library, and exporting it would put it first in
      // gdb's search (LD_PRELOAD loads first) and hide the runtime's own entries: refused.
      o->publishers &= ~static_cast<uint32_t>(jitunwind::publisher::gdb);
      std::fprintf(stderr,
                   "jitunwind preload: the gdb publisher is not available under the preload and "
                   "is left out (JITUNWIND_PUBLISH): gdb reads the runtime's own JIT interface, "
                   "which the preload leaves untouched (docs/integrating.md, section 3)\n");
    }
    // JITUNWIND_LOG chose a destination: everything goes there. Otherwise the first problem
    // goes to stderr.
    if (o->log.fn == nullptr) o->log = {&log_sink, this, jitunwind::log_level::warning};
    auto s = jitunwind::session::create(*o);
    if (!s) {
      failed_ = true;
      log_once(s.error().message());
      return false;
    }
    session_ = std::move(*s);
    pid_ = getpid();
    // Registered after the session's own handlers, so it runs before they flush the files.
    std::atexit([] { get().publish_pending_at_exit(); });
    return true;
  }

  static void log_sink(void* self, jitunwind::log_level, std::string_view m) {
    static_cast<preload_state*>(self)->log_once(std::string(m));
  }
  void log_once(const std::string& m) {
    if (logged_.exchange(true)) return;
    std::fprintf(stderr, "jitunwind preload: %s (further problems are not reported)\n", m.c_str());
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::unique_ptr<jitunwind::session> session_;
  pid_t pid_ = 0;
  bool failed_ = false;
  std::atomic<bool> logged_{false};
  size_t left_out_ = 0;
  std::map<void*, jitunwind::window*> windows_;
  const std::chrono::milliseconds name_wait_;
  jitunwind_preload::gdb_names names_;
  std::vector<pending> pending_;
  bool worker_started_ = false;
  bool gdb_unused_ = false;
};

}  // namespace

extern "C" __attribute__((visibility("default"))) void __register_frame(void* begin) {
  preload_state& s = preload_state::get();
  if (s.real_register != nullptr) s.real_register(begin);
  if (begin != nullptr) s.on_register(begin);
}

extern "C" __attribute__((visibility("default"))) void __deregister_frame(void* begin) {
  preload_state& s = preload_state::get();
  if (begin != nullptr) s.on_deregister(begin);
  if (s.real_deregister != nullptr) s.real_deregister(begin);
}
