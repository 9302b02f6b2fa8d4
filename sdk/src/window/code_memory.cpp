#include "window/code_memory.hpp"

#include "common/error.hpp"

#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

size_t round_up(size_t v, size_t align) noexcept {
  return (v + align - 1) / align * align;
}

bool within_sframe_reach(uint64_t text_start, uint64_t text_size, uint64_t sframe_start,
                         uint64_t sframe_size) noexcept {
  const uint64_t lo = text_start < sframe_start ? text_start : sframe_start;
  const uint64_t text_end = text_start + text_size;
  const uint64_t sframe_end = sframe_start + sframe_size;
  const uint64_t hi = text_end > sframe_end ? text_end : sframe_end;
  return hi - lo < (uint64_t{1} << 31);
}

result<owned_memory> owned_memory::create(size_t code_capacity, size_t sframe_capacity,
                                          code_layout layout) {
  const size_t page = page_size();
  if (code_capacity == 0)
    return make_error(errc::invalid_argument, "owned window: code capacity is 0");
  if (code_capacity > (size_t{1} << 30) || sframe_capacity > (size_t{1} << 28))
    return make_error(errc::invalid_argument,
                      "owned window: code capacity %zu / SFrame capacity %zu too large (max 1 GiB "
                      "of code, 256 MiB of SFrame per window)",
                      code_capacity, sframe_capacity);
  if (layout != code_layout::page_flip && layout != code_layout::memfd_alias &&
      layout != code_layout::shared_alias)
    return make_error(errc::invalid_argument, "owned window: unknown code layout %d",
                      static_cast<int>(layout));
  owned_memory m;
  m.layout_ = layout;
  m.code_capacity_ = round_up(code_capacity, page);
  const size_t each = round_up(sframe_capacity, page);
  m.reservation_ = m.code_capacity_ + 2 * each;
  void* base =
      mmap(nullptr, m.reservation_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return make_error(errc::no_memory, "owned window: mmap of %zu bytes failed: %s", m.reservation_,
                      std::strerror(errno));
  m.exec_ = static_cast<uint8_t*>(base);
  m.sframe_ = sframe_buffers(m.exec_ + m.code_capacity_, each);
  if (layout == code_layout::memfd_alias) {
    m.memfd_ = memfd_create("jitunwind-code", MFD_CLOEXEC);
    if (m.memfd_ < 0 || ftruncate(m.memfd_, static_cast<off_t>(m.code_capacity_)) != 0)
      return make_error(errc::io_error, "owned window: memfd for the code alias failed: %s",
                        std::strerror(errno));
    // The executable view replaces the start of the reservation, keeping SFrame within reach.
    void* rx =
        mmap(m.exec_, m.code_capacity_, PROT_READ | PROT_EXEC, MAP_SHARED | MAP_FIXED, m.memfd_, 0);
    void* rw = mmap(nullptr, m.code_capacity_, PROT_READ | PROT_WRITE, MAP_SHARED, m.memfd_, 0);
    if (rx == MAP_FAILED || rw == MAP_FAILED)
      return make_error(errc::no_memory, "owned window: memfd code alias failed: %s",
                        std::strerror(errno));
    m.write_alias_ = static_cast<uint8_t*>(rw);
  } else if (layout == code_layout::shared_alias) {
    // Shared anonymous memory is a shmem object without a name: /proc/PID/maps shows it as
    // "/dev/zero (deleted)", which perf counts as anonymous (its perf map applies). mremap
    // with old size 0 maps the same pages a second time: the RW alias.
    void* code = mmap(m.exec_, m.code_capacity_, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (code == MAP_FAILED)
      return make_error(errc::no_memory, "owned window: shared code mapping failed: %s",
                        std::strerror(errno));
    void* rw = mremap(m.exec_, 0, m.code_capacity_, MREMAP_MAYMOVE);
    if (rw == MAP_FAILED)
      return make_error(errc::no_memory, "owned window: mremap for the code alias failed: %s",
                        std::strerror(errno));
    m.write_alias_ = static_cast<uint8_t*>(rw);
    if (mprotect(m.exec_, m.code_capacity_, PROT_READ | PROT_EXEC) != 0)
      return make_error(errc::io_error, "owned window: mprotect RX of the code view failed: %s",
                        std::strerror(errno));
    // A forked child shares these pages: without the alias it can run the code but never
    // write into the parent's windows (its copy of the session would allocate the same bytes).
    (void)madvise(m.write_alias_, m.code_capacity_, MADV_DONTFORK);
  }
  return m;
}

owned_memory::owned_memory(owned_memory&& o) noexcept {
  *this = std::move(o);
}

owned_memory& owned_memory::operator=(owned_memory&& o) noexcept {
  if (this != &o) {
    release();
    exec_ = std::exchange(o.exec_, nullptr);
    reservation_ = std::exchange(o.reservation_, 0);
    code_capacity_ = std::exchange(o.code_capacity_, 0);
    write_alias_ = std::exchange(o.write_alias_, nullptr);
    memfd_ = std::exchange(o.memfd_, -1);
    layout_ = o.layout_;
    sframe_ = std::exchange(o.sframe_, sframe_buffers{});
  }
  return *this;
}

owned_memory::~owned_memory() {
  release();
}

void owned_memory::release() noexcept {
  if (write_alias_ != nullptr) munmap(write_alias_, code_capacity_);
  if (exec_ != nullptr) munmap(exec_, reservation_);
  if (memfd_ >= 0) close(memfd_);
  exec_ = nullptr;
  write_alias_ = nullptr;
  memfd_ = -1;
}

namespace {

// An inaccessible mapping without memory (replacing whatever was there): the range stays taken,
// so the kernel never hands it out again. (The kernel may keep page-table pages under it when
// neighbouring mappings share them: measured in docs/performance.md.)
bool reserve_range(void* at, size_t len) noexcept {
  return mmap(at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) !=
         MAP_FAILED;
}

}  // namespace

void owned_memory::release_reserving() noexcept {
  // The whole reservation, SFrame buffers included: reserved ranges then border each other and
  // merge into few mappings (holes between them would cost one mapping each, and a process has
  // at most vm.max_map_count).
  if (exec_ != nullptr && !reserve_range(exec_, reservation_)) {
    release();  // nothing else to do: the range may then be reused
    return;
  }
  if (write_alias_ != nullptr) munmap(write_alias_, code_capacity_);
  if (memfd_ >= 0) close(memfd_);
  exec_ = nullptr;
  write_alias_ = nullptr;
  memfd_ = -1;
}

result<void> owned_memory::move_away() {
  if (exec_ == nullptr || aliased())
    return make_error(errc::unsupported, "owned window: only page_flip memory moves");
#ifdef MREMAP_DONTUNMAP
  // After wipe() the reservation is one RW mapping again. MREMAP_DONTUNMAP (Linux 5.7) moves
  // the pages and their page table entries and leaves the old range mapped and empty, so no
  // other thread's mmap can take it in between; it is then made inaccessible for good.
  void* moved = mremap(exec_, reservation_, reservation_, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
  if (moved == MAP_FAILED)
    return make_error(errc::unsupported, "owned window: mremap(MREMAP_DONTUNMAP) failed: %s",
                      std::strerror(errno));
  uint8_t* old = exec_;
  exec_ = static_cast<uint8_t*>(moved);
  sframe_ = sframe_buffers(exec_ + code_capacity_, sframe_.capacity());
  // Replaced rather than only made PROT_NONE: one kind of reservation everywhere, and like
  // reservations merge (see release_reserving).
  if (!reserve_range(old, reservation_))
    (void)mprotect(old, reservation_, PROT_NONE);  // still taken, still empty
  return {};
#else
  return make_error(errc::unsupported, "owned window: MREMAP_DONTUNMAP unknown at build time");
#endif
}

uint8_t* owned_memory::writable_for(uint64_t address) const noexcept {
  const size_t offset = address - code_address();
  return (write_alias_ != nullptr ? write_alias_ : exec_) + offset;
}

namespace {

// AArch64 does not keep instruction fetch coherent with data writes: code written through any
// view must be cleaned from the data cache and invalidated in the instruction cache before it
// runs (the builtin does both for a range; both views map the same pages). x86-64 needs nothing.
void sync_instruction_cache([[maybe_unused]] uint8_t* written, [[maybe_unused]] uint8_t* exec,
                            [[maybe_unused]] size_t len) noexcept {
#if defined(__aarch64__)
  if (written != exec) __builtin___clear_cache(reinterpret_cast<char*>(written),
                                               reinterpret_cast<char*>(written + len));
  __builtin___clear_cache(reinterpret_cast<char*>(exec), reinterpret_cast<char*>(exec + len));
#endif
}

// What wiped code is filled with, so that a stale jump into it traps: int3 on x86-64, UDF #0
// (the all-zero word) on AArch64.
#if defined(__aarch64__)
constexpr int trap_fill = 0x00;
#else
constexpr int trap_fill = 0xcc;
#endif

}  // namespace

result<void> owned_memory::make_executable(size_t offset, size_t len) {
  if (len == 0) return {};
  if (offset > code_capacity_ || len > code_capacity_ - offset)
    return make_error(errc::out_of_range, "owned window: range %zu+%zu past capacity %zu", offset,
                      len, code_capacity_);
  if (aliased()) {
    sync_instruction_cache(write_alias_ + offset, exec_ + offset, len);
    return {};
  }
  const size_t page = page_size();
  const size_t begin = offset / page * page;
  const size_t end = round_up(offset + len, page);
  if (end > code_capacity_)
    return make_error(errc::out_of_range, "owned window: range %zu+%zu past capacity %zu", offset,
                      len, code_capacity_);
  if (mprotect(exec_ + begin, end - begin, PROT_READ | PROT_EXEC) != 0)
    return make_error(errc::io_error, "owned window: mprotect RX of %zu bytes at %p failed: %s",
                      end - begin, static_cast<void*>(exec_ + begin), std::strerror(errno));
  sync_instruction_cache(exec_ + offset, exec_ + offset, len);
  return {};
}

result<void> owned_memory::patch(size_t offset, std::span<const uint8_t> bytes, bool published) {
  if (bytes.empty() || offset > code_capacity_ || bytes.size() > code_capacity_ - offset)
    return make_error(errc::out_of_range, "owned window: patch %zu+%zu past capacity %zu", offset,
                      bytes.size(), code_capacity_);
  if (aliased()) {
    uint8_t* dst = write_alias_ + offset;
    const size_t word = offset & ~size_t{7};
    if (bytes.size() <= 8 && word == ((offset + bytes.size() - 1) & ~size_t{7})) {
      // One store of the whole aligned word: a thread fetching these bytes sees all old or all
      // new ones. The other bytes of the word are ours (a window has one writer at a time).
      auto* w = reinterpret_cast<uint64_t*>(write_alias_ + word);
      uint64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
      std::memcpy(reinterpret_cast<uint8_t*>(&v) + (offset - word), bytes.data(), bytes.size());
      __atomic_store_n(w, v, __ATOMIC_RELEASE);
    } else {
      std::memcpy(dst, bytes.data(), bytes.size());
    }
  } else if (!published) {
    std::memcpy(exec_ + offset, bytes.data(), bytes.size());  // still RW, not executable yet
  } else {
    const size_t page = page_size();
    const size_t begin = offset / page * page;
    const size_t end = round_up(offset + bytes.size(), page);
    if (mprotect(exec_ + begin, end - begin, PROT_READ | PROT_WRITE) != 0)
      return make_error(errc::io_error, "owned window: mprotect RW for a patch failed: %s",
                        std::strerror(errno));
    std::memcpy(exec_ + offset, bytes.data(), bytes.size());
    if (mprotect(exec_ + begin, end - begin, PROT_READ | PROT_EXEC) != 0)
      return make_error(errc::io_error,
                        "owned window: mprotect RX after a patch failed (%zu bytes at %p left "
                        "not executable): %s",
                        end - begin, static_cast<void*>(exec_ + begin), std::strerror(errno));
  }
  if (aliased() || published)
    sync_instruction_cache(writable_for(code_address() + offset), exec_ + offset, bytes.size());
  (void)sync_all_cores();
  return {};
}

bool sync_all_cores() noexcept {
  static const bool registered =
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
  return registered &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
}

result<void> owned_memory::wipe(size_t used) {
  used = std::min(used, code_capacity_);
  if (aliased()) {
    std::memset(write_alias_, trap_fill, used);  // stale jumps trap
    return {};
  }
  // Whole range writable and not executable first (never both), then overwrite the old code.
  // Fresh zero pages (mmap MAP_FIXED) would do the same, but every page would fault again.
  if (mprotect(exec_, code_capacity_, PROT_READ | PROT_WRITE) != 0)
    return make_error(errc::io_error,
                      "owned window: making %zu bytes writable for reuse failed: %s",
                      code_capacity_, std::strerror(errno));
  std::memset(exec_, trap_fill, used);
  return {};
}

}  // namespace jitunwind::detail
