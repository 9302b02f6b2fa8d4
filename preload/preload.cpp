// libjitunwind_preload.so — zero-code integration for runtimes that register their JIT code's
// CFI the standard way. It interposes libgcc's `__register_frame` / `__deregister_frame`: each
// registered `.eh_frame` is decoded (cfi::decode, the converter `sframe build --from-eh-frame`
// uses) and its functions are published in a described code window of one jitunwind session
// (publishers from JITUNWIND_PUBLISH, default: registry and perf map). Deregistration retires
// the window.
//
// It must never break the host: the real function is always called, with the host's argument,
// whatever happened here; a failure of ours is logged once (stderr, "jitunwind preload: ...")
// and that registration is simply not published. Registrations from several threads are
// serialized by a mutex, held across fork() (pthread_atfork) so a child never inherits it
// locked. Not async-signal-safe (it allocates), which __register_frame callers never need; in a
// fork child the inherited session is not used (the pid differs) and nothing is published
// there: the child's registrations go to libgcc only.
#include <jitunwind/cfi.h>
#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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

class preload_state {
 public:
  static preload_state& get() {
    static preload_state* s = new preload_state();  // never destroyed: calls may come at exit
    return *s;
  }

  void on_register(void* begin) {
    std::lock_guard lock(mutex_);
    if (!ready()) return;
    const auto* bytes = static_cast<const uint8_t*>(begin);
    const size_t size = section_extent(bytes);
    if (size == 0) return log_once("a registered .eh_frame has no terminator within 64 MiB");
    jitunwind::cfi::decoder_options o;
    o.section_address = reinterpret_cast<uint64_t>(begin);
    auto d = jitunwind::cfi::decode(std::span<const uint8_t>(bytes, size), o);
    if (!d) return log_once(d.error().message());
    left_out_ += d->left_out.size();
    if (d->functions.empty()) return;
    jitunwind::described_window_options wo;
    wo.text_start = d->functions.front().start;
    wo.text_size = d->functions.back().start + d->functions.back().size - wo.text_start;
    // Sized to the rows (the default assumes a few rows per 64 bytes of code; compiled code
    // can have more). A function the encoder refuses is reported by append below.
    jitunwind::sframe::encoder_options eo;
    eo.section_address = wo.text_start;
    if (auto bytes = jitunwind::sframe::encode(eo, d->functions))
      wo.sframe_capacity = bytes->size();
    auto w = session_->describe_window(wo);
    if (!w) return log_once(w.error().message());
    char name[40];
    for (const jitunwind::function_desc& f : d->functions) {
      std::snprintf(name, sizeof name, "jit:0x%llx", static_cast<unsigned long long>(f.start));
      if (auto a = (*w)->append(name, f); !a) log_once(a.error().message());
    }
    (void)(*w)->publish();
    windows_[begin] = *w;
  }

  void on_deregister(void* begin) {
    std::lock_guard lock(mutex_);
    auto it = windows_.find(begin);
    if (it == windows_.end() || !session_ || getpid() != pid_) return;
    // The host frees the code after deregistering it: no grace period.
    (void)it->second->retire(std::chrono::milliseconds(0));
    windows_.erase(it);
    session_->poll();
  }

  register_fn real_register = nullptr;
  register_fn real_deregister = nullptr;

 private:
  preload_state() {
    real_register = reinterpret_cast<register_fn>(dlsym(RTLD_NEXT, "__register_frame"));
    real_deregister = reinterpret_cast<register_fn>(dlsym(RTLD_NEXT, "__deregister_frame"));
    // A fork while another thread registers would leave the child's copy of the mutex locked
    // forever: hold it across fork() so both sides get it unlocked.
    pthread_atfork([] { get().mutex_.lock(); }, [] { get().mutex_.unlock(); },
                   [] { get().mutex_.unlock(); });
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
    if (std::getenv("JITUNWIND_PUBLISH") == nullptr)
      o->publishers = jitunwind::publisher::registry | jitunwind::publisher::perfmap;
    o->log = {&log_sink, this, jitunwind::log_level::warning};
    auto s = jitunwind::session::create(*o);
    if (!s) {
      failed_ = true;
      log_once(s.error().message());
      return false;
    }
    session_ = std::move(*s);
    pid_ = getpid();
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
  std::unique_ptr<jitunwind::session> session_;
  pid_t pid_ = 0;
  bool failed_ = false;
  std::atomic<bool> logged_{false};
  size_t left_out_ = 0;
  std::map<void*, jitunwind::window*> windows_;
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
