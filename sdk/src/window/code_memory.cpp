#include "window/code_memory.hpp"

#include "common/error.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace jitunwind::detail {

size_t page_size() noexcept {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

size_t round_up(size_t v, size_t align) noexcept { return (v + align - 1) / align * align; }

bool within_sframe_reach(uint64_t text_start, uint64_t text_size, uint64_t sframe_start,
                         uint64_t sframe_size) noexcept {
  const uint64_t lo = text_start < sframe_start ? text_start : sframe_start;
  const uint64_t text_end = text_start + text_size;
  const uint64_t sframe_end = sframe_start + sframe_size;
  const uint64_t hi = text_end > sframe_end ? text_end : sframe_end;
  return hi - lo < (uint64_t{1} << 31);
}

result<owned_memory> owned_memory::create(size_t code_capacity, size_t sframe_capacity,
                                          bool dual) {
  const size_t page = page_size();
  if (code_capacity == 0)
    return make_error(errc::invalid_argument, "owned window: code capacity is 0");
  if (code_capacity > (size_t{1} << 30) || sframe_capacity > (size_t{1} << 28))
    return make_error(errc::invalid_argument,
                      "owned window: code capacity %zu / SFrame capacity %zu too large (max 1 GiB "
                      "of code, 256 MiB of SFrame per window)",
                      code_capacity, sframe_capacity);
  owned_memory m;
  m.code_capacity_ = round_up(code_capacity, page);
  const size_t each = round_up(sframe_capacity, page);
  m.reservation_ = m.code_capacity_ + 2 * each;
  void* base = mmap(nullptr, m.reservation_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
  if (base == MAP_FAILED)
    return make_error(errc::no_memory, "owned window: mmap of %zu bytes failed: %s",
                      m.reservation_, std::strerror(errno));
  m.exec_ = static_cast<uint8_t*>(base);
  m.sframe_ = sframe_buffers(m.exec_ + m.code_capacity_, each);
  if (dual) {
    m.memfd_ = memfd_create("jitunwind-code", MFD_CLOEXEC);
    if (m.memfd_ < 0 || ftruncate(m.memfd_, static_cast<off_t>(m.code_capacity_)) != 0)
      return make_error(errc::io_error, "owned window: memfd for dual mapping failed: %s",
                        std::strerror(errno));
    // The executable view replaces the start of the reservation, keeping SFrame within reach.
    void* rx = mmap(m.exec_, m.code_capacity_, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED,
                    m.memfd_, 0);
    void* rw = mmap(nullptr, m.code_capacity_, PROT_READ | PROT_WRITE, MAP_SHARED, m.memfd_, 0);
    if (rx == MAP_FAILED || rw == MAP_FAILED)
      return make_error(errc::no_memory, "owned window: dual mapping failed: %s",
                        std::strerror(errno));
    m.write_alias_ = static_cast<uint8_t*>(rw);
  }
  return m;
}

owned_memory::owned_memory(owned_memory&& o) noexcept { *this = std::move(o); }

owned_memory& owned_memory::operator=(owned_memory&& o) noexcept {
  if (this != &o) {
    release();
    exec_ = std::exchange(o.exec_, nullptr);
    reservation_ = std::exchange(o.reservation_, 0);
    code_capacity_ = std::exchange(o.code_capacity_, 0);
    write_alias_ = std::exchange(o.write_alias_, nullptr);
    memfd_ = std::exchange(o.memfd_, -1);
    sframe_ = std::exchange(o.sframe_, sframe_buffers{});
  }
  return *this;
}

owned_memory::~owned_memory() { release(); }

void owned_memory::release() noexcept {
  if (write_alias_ != nullptr) munmap(write_alias_, code_capacity_);
  if (exec_ != nullptr) munmap(exec_, reservation_);
  if (memfd_ >= 0) close(memfd_);
  exec_ = nullptr;
  write_alias_ = nullptr;
  memfd_ = -1;
}

uint8_t* owned_memory::writable_for(uint64_t address) const noexcept {
  const size_t offset = address - code_address();
  return (write_alias_ != nullptr ? write_alias_ : exec_) + offset;
}

result<void> owned_memory::make_executable(size_t offset, size_t len) {
  if (dual() || len == 0) return {};
  const size_t page = page_size();
  const size_t begin = offset / page * page;
  const size_t end = round_up(offset + len, page);
  if (end > code_capacity_)
    return make_error(errc::out_of_range, "owned window: range %zu+%zu past capacity %zu", offset,
                      len, code_capacity_);
  if (mprotect(exec_ + begin, end - begin, PROT_READ | PROT_EXEC) != 0)
    return make_error(errc::io_error, "owned window: mprotect RX of %zu bytes at %p failed: %s",
                      end - begin, static_cast<void*>(exec_ + begin), std::strerror(errno));
  return {};
}

result<void> owned_memory::wipe(size_t used) {
  used = std::min(used, code_capacity_);
  if (dual()) {
    std::memset(write_alias_, 0xcc, used);  // int3: stale jumps trap
    return {};
  }
  // Whole range writable and not executable first (never both), then overwrite the old code.
  // Fresh zero pages (mmap MAP_FIXED) would do the same, but every page would fault again.
  if (mprotect(exec_, code_capacity_, PROT_READ | PROT_WRITE) != 0)
    return make_error(errc::io_error,
                      "owned window: making %zu bytes writable for reuse failed: %s",
                      code_capacity_, std::strerror(errno));
  std::memset(exec_, 0xcc, used);
  return {};
}

// ---- near_buffers ----

result<near_buffers> near_buffers::create(uint64_t text_start, size_t text_size, size_t each) {
  const size_t page = page_size();
  each = round_up(each, page);
  const size_t len = 2 * each;
  const uint64_t text_end = text_start + text_size;
  // Try just after the text, then just before it, then a few steps further away.
  const int64_t steps[] = {0, -1, 1, -2, 2, 4, -4, 16, -16, 64, -64};
  for (int64_t step : steps) {
    uint64_t hint;
    const uint64_t stride = uint64_t{16} << 20;  // 16 MiB
    if (step >= 0)
      hint = round_up(text_end, page) + static_cast<uint64_t>(step) * stride;
    else if (text_start > len + static_cast<uint64_t>(-step) * stride)
      hint = (text_start - len) / page * page - static_cast<uint64_t>(-step - 1) * stride;
    else
      continue;
    void* p = mmap(reinterpret_cast<void*>(hint), len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) continue;
    const uint64_t got = reinterpret_cast<uint64_t>(p);
    if (!within_sframe_reach(text_start, text_size, got, len)) {
      munmap(p, len);
      continue;
    }
    near_buffers b;
    b.base_ = p;
    b.len_ = len;
    b.sframe_ = sframe_buffers(static_cast<uint8_t*>(p), each);
    return b;
  }
  return make_error(errc::out_of_range,
                    "described window [0x%llx, 0x%llx): no room for %zu bytes of SFrame within "
                    "±2 GiB of the code",
                    static_cast<unsigned long long>(text_start),
                    static_cast<unsigned long long>(text_end), len);
}

near_buffers::near_buffers(near_buffers&& o) noexcept { *this = std::move(o); }

near_buffers& near_buffers::operator=(near_buffers&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) munmap(base_, len_);
    base_ = std::exchange(o.base_, nullptr);
    len_ = std::exchange(o.len_, 0);
    sframe_ = std::exchange(o.sframe_, sframe_buffers{});
  }
  return *this;
}

near_buffers::~near_buffers() {
  if (base_ != nullptr) munmap(base_, len_);
}

}  // namespace jitunwind::detail
