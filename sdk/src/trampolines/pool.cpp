// Trampoline pools: arrays of identical call stubs in owned code windows, one PCMASK function per
// window, one name per stub handed out.
#include <jitunwind/trampolines.h>

#include "common/error.hpp"
#include <jitunwind/toolkit/names.hpp>
#include "trampolines/stub.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

namespace jitunwind {

using detail::make_error;

struct trampoline_pool::impl {
  session& owner;
  trampoline_pool_options options;
  mutable std::mutex mutex;

  struct pool_window {
    window* w = nullptr;
    uint64_t start = 0;
    size_t mapped = 0;  // bytes of the stub mapping (the pool owns the memory)
  };
  std::vector<pool_window> windows;
  uint32_t fresh = 0;              // next never-used slot (global numbering)
  std::vector<uint32_t> released;  // slots that may be handed out again (LIFO)
  std::vector<uint8_t> used;       // per slot: handed out and not released
  size_t in_use = 0;

  impl(session& s, trampoline_pool_options o) : owner(s), options(std::move(o)) {}

  uint32_t per_window() const { return static_cast<uint32_t>(options.stubs_per_window); }

  uint64_t slot_address(uint32_t slot) const {
    return windows[slot / per_window()].start + uint64_t{stub_stride} * (slot % per_window());
  }

  // Maps `bytes` of memory for stubs, near `options.near_address` when one is given: calls and
  // returns between code that lies terabytes apart are several times slower on some CPUs
  // (measured on AMD EPYC: ~10 ns instead of ~3.5 ns per trampoline call), so the stubs go
  // where the interpreter's own code is, as V8 does for its builtins.
  result<uint8_t*> map_stubs(size_t bytes) const {
    const uint64_t near = options.near_address;
    if (near != 0) {
      const uint64_t stride = uint64_t{64} << 20;
      const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      for (int64_t step : {1, -1, 2, -2, 4, -4, 8, -8, 16, -16}) {
        const int64_t delta = step * static_cast<int64_t>(stride);
        if (delta < 0 && near < static_cast<uint64_t>(-delta) + bytes) continue;
        const uint64_t hint = (near + static_cast<uint64_t>(delta)) & ~(page - 1);
        void* p = mmap(reinterpret_cast<void*>(hint), bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != MAP_FAILED) return static_cast<uint8_t*>(p);
      }
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return make_error(errc::no_memory, "trampolines: mmap of %zu bytes failed: %s", bytes,
                        std::strerror(errno));
    }
    return static_cast<uint8_t*>(p);
  }

  // Maps a stub array, fills it, makes it executable (never writable again) and publishes it as
  // one window holding one PCMASK function.
  result<void> add_window() {
    const size_t bytes = size_t{stub_stride} * per_window();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t mapped = (bytes + page - 1) / page * page;
    auto mem = map_stubs(mapped);
    if (!mem) return std::move(mem).error();
    uint8_t* base = *mem;
    std::memset(base, 0xcc, mapped);  // int3 everywhere but in the stubs
    for (size_t i = 0; i < per_window(); ++i) {
      std::memcpy(base + i * stub_stride, detail::amd64_stub.data(), stub_size);
    }
    if (mprotect(base, mapped, PROT_READ | PROT_EXEC) != 0) {
      const int e = errno;
      munmap(base, mapped);
      return make_error(errc::io_error, "trampolines: mprotect(RX) failed: %s", std::strerror(e));
    }
    const uint64_t start = reinterpret_cast<uint64_t>(base);
    described_window_options wo;
    wo.text_start = start;
    wo.text_size = bytes;
    auto w = owner.describe_window(wo);
    auto fail = [&](error e) -> result<void> {
      munmap(base, mapped);
      return e;
    };
    if (!w) return fail(std::move(w).error());
    auto frames = detail::stub_array_frames(start, per_window());
    if (!frames) return fail(std::move(frames).error());
    if (auto r = (*w)->append(options.array_name, *frames); !r) return fail(std::move(r).error());
    if (auto r = (*w)->publish(); !r) return fail(std::move(r).error());
    windows.push_back({*w, start, mapped});
    used.resize(used.size() + per_window(), 0);
    return {};
  }
};

trampoline_pool::trampoline_pool(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

trampoline_pool::~trampoline_pool() {
  // Unpublish, then unmap: the owner guarantees no trampoline runs any more. The window
  // objects stay with the session until its next poll frees them.
  for (auto& pw : impl_->windows) {
    (void)pw.w->retire(std::chrono::milliseconds(0));
    munmap(reinterpret_cast<void*>(pw.start), pw.mapped);
  }
}

result<std::unique_ptr<trampoline_pool>> trampoline_pool::create(
    session& s, const trampoline_pool_options& options) {
  if (s.options().target != abi::amd64) {
    return make_error(errc::unsupported, "trampolines: only x86-64 stubs exist (session abi %s)",
                      to_string(s.options().target));
  }
  if (options.stubs_per_window == 0 || options.stubs_per_window > (size_t{1} << 20)) {
    return make_error(errc::invalid_argument,
                      "trampolines: stubs_per_window %zu out of range (1..%zu)",
                      options.stubs_per_window, size_t{1} << 20);
  }
  if (options.array_name.empty()) {
    return make_error(errc::invalid_argument, "trampolines: array_name is empty");
  }
  // Every name is the prefix plus a function name: a prefix windows would refuse would make
  // every acquire fail later, so it is refused here.
  if (options.name_prefix.size() > 4096 || toolkit::has_control_bytes(options.name_prefix)) {
    return make_error(errc::invalid_argument,
                      "trampolines: name_prefix (%zu bytes) is too long or has control characters",
                      options.name_prefix.size());
  }
  return std::unique_ptr<trampoline_pool>(new trampoline_pool(std::make_unique<impl>(s, options)));
}

result<trampoline> trampoline_pool::acquire(std::string_view name) {
  if (name.empty()) return make_error(errc::invalid_argument, "trampolines: empty function name");
  std::lock_guard lock(impl_->mutex);
  impl& p = *impl_;
  uint32_t slot;
  if (!p.released.empty()) {
    slot = p.released.back();
  } else {
    if (p.fresh == p.windows.size() * p.per_window()) {
      // Full windows stay open: a released stub in them is renamed (not re-appended) later.
      if (auto r = p.add_window(); !r) return std::move(r).error();
    }
    slot = p.fresh;
  }
  const uint64_t address = p.slot_address(slot);
  window& w = *p.windows[slot / p.per_window()].w;
  const std::string full = p.options.name_prefix + std::string(name);
  auto frames = detail::stub_frames(address);
  if (!frames) return std::move(frames).error();
  if (auto r = w.name_range(full, *frames); !r) return std::move(r).error();
  if (auto r = w.publish(); !r) return std::move(r).error();
  // Committed only now: a failure above leaves the pool as it was.
  if (!p.released.empty() && p.released.back() == slot) {
    p.released.pop_back();
  } else {
    ++p.fresh;
  }
  p.used[slot] = 1;
  ++p.in_use;
  trampoline t;
  t.entry = reinterpret_cast<trampoline_entry>(address);
  t.address = address;
  t.return_address = address + return_offset;
  t.slot = slot;
  return t;
}

result<void> trampoline_pool::release(const trampoline& t) {
  std::lock_guard lock(impl_->mutex);
  impl& p = *impl_;
  if (t.slot >= p.fresh || p.slot_address(t.slot) != t.address) {
    return make_error(errc::invalid_argument,
                      "trampolines: release of slot %u at 0x%llx: not a trampoline of this pool",
                      t.slot, static_cast<unsigned long long>(t.address));
  }
  if (p.used[t.slot] == 0) {
    return make_error(errc::invalid_argument, "trampolines: slot %u released twice", t.slot);
  }
  p.used[t.slot] = 0;
  --p.in_use;
  // A stub handed out again carries another name at the same address, which perf cannot
  // always tell apart (docs/window.md): a session that never reuses addresses retires it.
  if (p.owner.recycles_addresses()) p.released.push_back(t.slot);
  return {};
}

size_t trampoline_pool::in_use() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->in_use;
}

std::vector<const window*> trampoline_pool::windows() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<const window*> out;
  for (const auto& pw : impl_->windows) out.push_back(pw.w);
  return out;
}

}  // namespace jitunwind
