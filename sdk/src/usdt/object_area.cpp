#include "usdt/object_area.hpp"

#include "common/error.hpp"

#include <jitunwind/usdt.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace jitunwind::usdt::detail {

using jitunwind::detail::make_error;

namespace {

constexpr uintptr_t page = 0x1000;
constexpr uint8_t x86_ret = 0xc3;

constexpr uintptr_t page_down(uintptr_t v) {
  return v & ~(page - 1);
}
constexpr uintptr_t page_up(uintptr_t v) {
  return page_down(v + page - 1);
}

// Room below the semaphores for the R and R X segments. The largest object (max_probes probes
// with the longest names) needs about 1.4 MiB: 8193 symbols, 1.06 MiB of names, the hash
// table, 64 KiB of stubs. `map` checks the real size anyway.
constexpr uintptr_t room_below = 4u << 20;
// Room from the semaphores on: max_probes u16s, then .dynamic (7 entries).
constexpr uintptr_t room_above = page_up(2 * max_probes + 8 * 16 + 8);
static_assert(room_above <= 4 * page);

// Fresh anonymous pages over [from, to), replacing whatever was there in one step.
bool replace_with_anonymous(uintptr_t from, uintptr_t to, int prot) {
  if (to <= from) return true;
  void* p = mmap(reinterpret_cast<void*>(from), to - from, prot,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p != MAP_FAILED;
}

// Executable pages of `ret` over [from, to), swapped in with one mremap so that a thread
// executing there never sees a moment without code.
bool replace_with_returns(uintptr_t from, uintptr_t to) {
  if (to <= from) return true;
  const size_t len = to - from;
  void* tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return false;
  std::memset(tmp, x86_ret, len);
  if (mprotect(tmp, len, PROT_READ | PROT_EXEC) != 0 ||
      mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(from)) ==
          MAP_FAILED) {
    munmap(tmp, len);
    return false;
  }
  return true;
}

}  // namespace

result<std::shared_ptr<object_area>> object_area::reserve(const std::string& provider) {
  void* p = mmap(nullptr, room_below + room_above, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return make_error(errc::io_error, "usdt: provider '%s': cannot reserve %zu KiB: %s",
                      provider.c_str(), static_cast<size_t>((room_below + room_above) >> 10),
                      std::strerror(errno));
  std::shared_ptr<object_area> a(new object_area);
  a->provider_ = provider;
  a->start_ = reinterpret_cast<uintptr_t>(p);
  a->semaphores_ = a->start_ + room_below;
  a->end_ = a->semaphores_ + room_above;
  if (mprotect(reinterpret_cast<void*>(a->semaphores_), room_above, PROT_READ) != 0)
    return make_error(errc::io_error, "usdt: provider '%s': mprotect of the semaphores: %s",
                      provider.c_str(), std::strerror(errno));
  return a;
}

object_area::~object_area() {
  if (start_ != 0) munmap(reinterpret_cast<void*>(start_), end_ - start_);
}

result<void> object_area::make_inert(uintptr_t from, uintptr_t text_start, uintptr_t text_end) {
  // Semaphores first: from here on every `enabled()` reads 0.
  bool ok = replace_with_anonymous(semaphores_, end_, PROT_READ);
  ok = replace_with_returns(text_start, text_end) && ok;
  ok = replace_with_anonymous(from, text_start, PROT_NONE) && ok;
  ok = replace_with_anonymous(text_end, semaphores_, PROT_NONE) && ok;
  if (!ok)
    return make_error(errc::io_error, "usdt: provider '%s': cannot replace the object's pages: %s",
                      provider_.c_str(), std::strerror(errno));
  return ok_result();
}

result<uintptr_t> object_area::map(int fd, const object_layout& layout, const std::string& what) {
  if (base_ != 0)
    return make_error(errc::bad_state, "usdt: provider '%s': an object is already mapped",
                      provider_.c_str());
  const object_segment* rw = layout.segments.empty() ? nullptr : &layout.segments.back();
  if (rw == nullptr || !rw->writable || rw->start != layout.probes_section ||
      page_down(layout.probes_section) != layout.probes_section)
    return make_error(
        errc::malformed, "usdt: provider '%s': %s: .probes (0x%llx) does not start the RW segment",
        provider_.c_str(), what.c_str(), static_cast<unsigned long long>(layout.probes_section));
  if (layout.probes_section > semaphores_ - start_ || rw->end - rw->start > end_ - semaphores_)
    return make_error(
        errc::limit_exceeded,
        "usdt: provider '%s': %s: the object (%llu + %llu bytes) does not fit in "
        "the provider's %zu + %zu bytes of address space",
        provider_.c_str(), what.c_str(), static_cast<unsigned long long>(layout.probes_section),
        static_cast<unsigned long long>(rw->end - rw->start),
        static_cast<size_t>(semaphores_ - start_), static_cast<size_t>(end_ - semaphores_));

  const uintptr_t base = semaphores_ - layout.probes_section;
  uintptr_t text_start = base, text_end = base;
  for (const object_segment& s : layout.segments) {
    const uintptr_t from = page_down(s.start), to = page_up(s.end);
    const int prot = PROT_READ | (s.writable ? PROT_WRITE : 0) | (s.executable ? PROT_EXEC : 0);
    // MAP_PRIVATE like ld.so: the kernel's uprobe reference counter increments the semaphores
    // in a private, writable mapping of the file.
    void* p = mmap(reinterpret_cast<void*>(base + from), to - from, prot, MAP_PRIVATE | MAP_FIXED,
                   fd, static_cast<off_t>(from));
    if (p == MAP_FAILED) {
      const int err = errno;
      (void)make_inert(base, text_start, text_end);
      return make_error(errc::io_error,
                        "usdt: provider '%s': cannot map %s [0x%llx, 0x%llx) at %p: %s",
                        provider_.c_str(), what.c_str(), static_cast<unsigned long long>(from),
                        static_cast<unsigned long long>(to), reinterpret_cast<void*>(base + from),
                        std::strerror(err));
    }
    if (s.executable) {
      text_start = base + from;
      text_end = base + to;
    }
  }
  base_ = base;
  text_start_ = text_start;
  text_end_ = text_end;
  return base;
}

result<void> object_area::unmap() {
  if (base_ == 0) return ok_result();
  auto r = make_inert(base_, text_start_, text_end_);
  base_ = text_start_ = text_end_ = 0;
  return r;
}

}  // namespace jitunwind::usdt::detail
