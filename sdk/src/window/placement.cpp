#include "window/placement.hpp"

#include "common/error.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace jitunwind::detail {

namespace {

constexpr uint64_t reach = uint64_t{1} << 31;
// User space ends below 2^47 on x86-64 with 4-level paging (the kernel keeps higher addresses
// for 5-level tables unless asked); the first 64 KiB are never mappable (vm.mmap_min_addr).
constexpr uint64_t lowest = uint64_t{1} << 16;
constexpr uint64_t highest = (uint64_t{1} << 47) - (uint64_t{1} << 12);

// Lower-case hex digits at `p` up to `stop`; false if there are none or another byte comes first.
bool parse_hex(const char*& p, char stop, uint64_t& out) {
  const char* start = p;
  out = 0;
  for (;; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9')
      out = out << 4 | static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      out = out << 4 | static_cast<uint64_t>(c - 'a' + 10);
    else
      break;
  }
  if (p == start || *p != stop || p - start > 16) return false;
  ++p;
  return true;
}

// "start-end " at the beginning of a maps line (sscanf costs ~15 times as much, and a window
// that places its buffers reads every line).
bool parse_range(const char* line, uint64_t& a, uint64_t& b) {
  return parse_hex(line, '-', a) && parse_hex(line, ' ', b);
}

// The mapped ranges of this process, sorted, from /proc/self/maps.
std::vector<std::pair<uint64_t, uint64_t>> mapped_ranges() {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uint64_t a = 0, b = 0;
    if (parse_range(line, a, b)) out.emplace_back(a, b);
    // A line longer than the buffer: skip its rest.
    while (std::strchr(line, '\n') == nullptr && std::fgets(line, sizeof line, f) != nullptr) {
    }
  }
  std::fclose(f);
  std::sort(out.begin(), out.end());
  return out;
}

struct candidate {
  uint64_t address = 0;
  uint64_t distance = UINT64_MAX;
};

}  // namespace

result<uint8_t*> map_within_reach(uint64_t text_start, uint64_t text_size, size_t len) {
  const uint64_t page = page_size();
  const uint64_t text_end = text_start + text_size;
  if (text_size >= reach || len >= reach - text_size)
    return make_error(errc::out_of_range,
                      "described window [0x%" PRIx64 ", 0x%" PRIx64
                      "): %zu bytes of SFrame and "
                      "the code cannot lie within 2 GiB of each other",
                      text_start, text_end, len);
  // Every start b of [b, b+len) that keeps text and buffers within 2 GiB of each other.
  const uint64_t lo =
      std::max(lowest, text_end > reach ? (text_end - reach + page) / page * page : lowest);
  const uint64_t hi = std::min(highest, text_start + reach - len);  // last start + 1
  uint64_t largest = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto maps = mapped_ranges();
    candidate best;
    largest = 0;
    uint64_t gap_start = lo;
    const auto consider = [&](uint64_t g0, uint64_t g1) {
      g0 = std::max(round_up(g0, page), lo);
      g1 = std::min(g1 / page * page, hi - 1 + len);
      if (g1 <= g0) return;
      largest = std::max(largest, g1 - g0);
      if (g1 - g0 < len) return;
      // The end of the gap nearest to the text.
      const uint64_t a = g0 >= text_end     ? g0
                         : g1 <= text_start ? g1 - len
                                            : std::max(g0, std::min(text_end, g1 - len));
      const uint64_t d = a >= text_start ? a - text_start : text_start - a;
      if (d < best.distance) best = {a, d};
    };
    for (const auto& [a, b] : maps) {
      if (b <= gap_start) continue;
      if (a > gap_start) consider(gap_start, a);
      gap_start = std::max(gap_start, b);
      if (gap_start >= hi + len) break;
    }
    consider(gap_start, hi + len);
    if (best.distance == UINT64_MAX) break;
    void* p = mmap(reinterpret_cast<void*>(best.address), len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) {
      if (errno == EEXIST) continue;  // another thread mapped it meanwhile: look again
      return make_error(errc::no_memory,
                        "described window [0x%" PRIx64 ", 0x%" PRIx64
                        "): mmap of %zu bytes of "
                        "SFrame at 0x%" PRIx64 " failed: %s",
                        text_start, text_end, len, best.address, std::strerror(errno));
    }
    if (reinterpret_cast<uint64_t>(p) == best.address) return static_cast<uint8_t*>(p);
    munmap(p, len);  // a kernel that took the address as a hint only
  }
  return make_error(errc::out_of_range,
                    "described window [0x%" PRIx64 ", 0x%" PRIx64
                    "): no room for %zu bytes of "
                    "SFrame within ±2 GiB of the code (largest free gap there: %" PRIu64 " bytes)",
                    text_start, text_end, len, largest);
}

sframe_space::~sframe_space() {
  for (const arena& a : arenas_)
    if (a.base != nullptr) munmap(a.base, a.size);
}

result<sframe_block> sframe_space::take(uint64_t text_start, uint64_t text_size, size_t each) {
  each = round_up(std::max<size_t>(each, 64), 64);
  const size_t length = 2 * each;
  const bool own = length > arena_size / 4;
  const auto hand_out = [&](uint32_t index, size_t offset) {
    arena& a = arenas_[index];
    ++a.live;
    return sframe_block{sframe_buffers(a.base + offset, each), index, offset, length};
  };
  if (own) {
    // A mapping a freed window of the same size left (idle: see give_back).
    const size_t size = round_up(length, page_size());
    for (uint32_t i = 0; i < arenas_.size(); ++i) {
      arena& a = arenas_[i];
      if (a.base == nullptr || !a.own || a.live != 0 || a.size != size ||
          !within_sframe_reach(text_start, text_size, reinterpret_cast<uint64_t>(a.base), a.size))
        continue;
      --idle_own_;
      return hand_out(i, 0);
    }
  } else {
    for (uint32_t i = 0; i < arenas_.size(); ++i) {
      arena& a = arenas_[i];
      if (a.base == nullptr || a.own ||
          !within_sframe_reach(text_start, text_size, reinterpret_cast<uint64_t>(a.base), a.size))
        continue;
      if (auto f = a.free_blocks.find(length); f != a.free_blocks.end() && !f->second.empty()) {
        const size_t offset = f->second.back();
        f->second.pop_back();
        return hand_out(i, offset);
      }
      if (a.size - a.bump >= length) {
        const size_t offset = a.bump;
        a.bump += length;
        return hand_out(i, offset);
      }
    }
  }
  const size_t size = own ? round_up(length, page_size()) : arena_size;
  auto base = map_within_reach(text_start, text_size, size);
  if (!base) return std::move(base).error();
  arena fresh;
  fresh.base = *base;
  fresh.size = size;
  fresh.bump = length;
  fresh.own = own;
  auto slot = std::find_if(arenas_.begin(), arenas_.end(),
                           [](const arena& a) { return a.base == nullptr; });
  if (slot == arenas_.end()) slot = arenas_.insert(arenas_.end(), arena{});
  *slot = std::move(fresh);
  return hand_out(static_cast<uint32_t>(slot - arenas_.begin()), 0);
}

void sframe_space::give_back(const sframe_block& b) {
  if (!b.valid() || b.arena >= arenas_.size()) return;
  arena& a = arenas_[b.arena];
  --a.live;
  if (a.own) {
    // The next window of this size takes the mapping as it is (no search of the address space
    // for room, no page faults); a few are kept, the rest unmapped.
    if (idle_own_ < max_idle_own) {
      ++idle_own_;
      return;
    }
    munmap(a.base, a.size);
    a = arena{};
    return;
  }
  a.free_blocks[b.length].push_back(b.offset);
}

size_t sframe_space::arenas() const noexcept {
  return static_cast<size_t>(std::count_if(arenas_.begin(), arenas_.end(),
                                           [](const arena& a) { return a.base != nullptr; }));
}

size_t sframe_space::mapped_bytes() const noexcept {
  size_t n = 0;
  for (const arena& a : arenas_) n += a.size;
  return n;
}

}  // namespace jitunwind::detail
