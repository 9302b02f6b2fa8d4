// The kernel SFrame series' registration checks (docs/kernel-registration.md, "Checklist"),
// tested through a fake syscall layer that plays the kernel: it reads the section and the
// process's mappings at the addresses passed, like the series' sframe_add_section(), and answers
// EINVAL naming the first failed check. It is written here from the checklist, independently
// of the SDK's own pre-check (kernel/registration_check.cpp), and every check is exercised on
// both: our windows pass both, and each violation is caught by both with the same check.
#include <catch2/catch.hpp>

#include <jitunwind/frame.h>
#include <jitunwind/sframe.h>
#include <jitunwind/window.h>

#include "kernel/kernel_backend.hpp"
#include "kernel/registration_check.hpp"
#include "window/backends.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail::kernel;
using jitunwind::detail::window_view;

namespace {

struct range {
  uint64_t lo, hi;
};

// The kernel, as far as registration goes (prctl PR_ADD_SFRAME 79 / PR_REMOVE_SFRAME 80 of the
// series' testing interface). Returns 0 or -EINVAL; `last_check` says which check refused.
class emulated_kernel final : public syscall_layer {
 public:
  int last_check = 0;
  int accepted = 0;
  struct registration {
    range sframe, text;
  };
  std::vector<registration> registered;

  long prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
             unsigned long a5) override {
    if (option == 80) {
      for (size_t i = 0; i < registered.size(); ++i)
        if (registered[i].sframe.lo == a2) {
          registered.erase(registered.begin() + static_cast<long>(i));
          return 0;
        }
      return -ENOENT;
    }
    if (option != 79) return -EINVAL;
    last_check = add(a2, a3, a4, a5);
    if (last_check != 0) return -EINVAL;
    registered.push_back({{a2, a3}, {a4, a5}});
    ++accepted;
    return 0;
  }
  long syscall2(long, unsigned long, unsigned long) override { return -ENOSYS; }

 private:
  static std::vector<std::pair<range, std::string>> vmas() {
    std::vector<std::pair<range, std::string>> out;
    std::ifstream in("/proc/self/maps");
    std::string line;
    while (std::getline(in, line)) {
      unsigned long long a, b;
      char perms[8] = {};
      if (std::sscanf(line.c_str(), "%llx-%llx %7s", &a, &b, perms) == 3)
        out.push_back({{a, b}, perms});
    }
    return out;
  }
  static const std::string* vma_of(const std::vector<std::pair<range, std::string>>& maps,
                                   uint64_t lo, uint64_t hi) {
    for (const auto& m : maps)
      if (m.first.lo <= lo && hi <= m.first.hi) return &m.second;
    return nullptr;
  }
  template <class T>
  static T rd(uint64_t address) {
    T v;
    std::memcpy(&v, reinterpret_cast<const void*>(address), sizeof v);
    return v;
  }

  int add(uint64_t s, uint64_t s_end, uint64_t t, uint64_t t_end) {
    if (!s || !s_end || !t || !t_end || s_end <= s || t_end <= t) return 1;
    const auto maps = vmas();
    const std::string* sv = vma_of(maps, s, s_end);
    if (!sv || (*sv)[0] != 'r') return 2;
    const std::string* tv = vma_of(maps, t, t_end);
    if (!tv || (*tv)[2] != 'x') return 3;
    for (const auto& r : registered)
      if (t < r.text.hi && r.text.lo < t_end) return 4;
    const uint64_t len = s_end - s;
    if (len < 28 || rd<uint16_t>(s) != 0xdee2 || rd<uint8_t>(s + 2) != 3) return 5;
    const uint8_t flags = rd<uint8_t>(s + 3);
    if (!(flags & 1)) return 6;
    if (!(flags & 4)) return 7;
    if (flags & ~5) return 8;
    if (rd<uint8_t>(s + 7) != 0) return 9;
    const uint32_t nfdes = rd<uint32_t>(s + 8), nfres = rd<uint32_t>(s + 12);
    const uint32_t frelen = rd<uint32_t>(s + 16), fdeoff = rd<uint32_t>(s + 20),
                   freoff = rd<uint32_t>(s + 24);
    if (!nfdes || !nfres) return 10;
    const uint64_t fdes = s + 28 + fdeoff, fdes_end = fdes + 16ull * nfdes;
    const uint64_t fres = s + 28 + freoff, fres_end = fres + frelen;
    if (fdes_end > s_end || fres_end > s_end || fdes_end < fdes || fres_end < fres ||
        (fdes < fres_end && fres < fdes_end))
      return 11;
    uint64_t prev = 0, total = 0;
    for (uint32_t i = 0; i < nfdes; ++i) {
      const uint64_t e = fdes + 16ull * i;
      const uint64_t start = e + rd<uint64_t>(e);
      const uint32_t size = rd<uint32_t>(e + 8);
      const uint64_t attr = fres + rd<uint32_t>(e + 12);
      if (i && start <= prev) return 12;
      prev = start;
      if (start < t || start + size > t_end) return 13;
      if (attr + 5 > fres_end) return 14;
      const uint16_t n = rd<uint16_t>(attr);
      const uint8_t info = rd<uint8_t>(attr + 2);
      if ((info & 15) > 2 || (rd<uint8_t>(attr + 3) & 31) > 1) return 14;
      const unsigned aw = 1u << (info & 15);
      uint64_t p = attr + 5;
      uint32_t last = 0;
      for (uint32_t j = 0; j < n; ++j) {
        if (p + aw + 1 > fres_end) return 14;
        const uint32_t off = aw == 1 ? rd<uint8_t>(p) : aw == 2 ? rd<uint16_t>(p) : rd<uint32_t>(p);
        const uint8_t fi = rd<uint8_t>(p + aw);
        if (((fi >> 5) & 3) == 3) return 14;
        p += aw + 1 + ((fi >> 1) & 15) * (1u << ((fi >> 5) & 3));
        if (p > fres_end) return 14;
        const uint32_t limit = (info & 0x10) ? rd<uint8_t>(attr + 4) : size;
        if ((j && off <= last) || off >= limit) return 15;
        last = off;
      }
      total += n;
    }
    return total == nfres ? 0 : 14;
  }
};

struct log_capture {
  std::vector<std::string> lines;
  static void fn(void* user, log_level, std::string_view m) {
    static_cast<log_capture*>(user)->lines.emplace_back(m);
  }
  log_sink sink() { return {&fn, this, log_level::debug}; }
};

// A session window with a few functions, published (no publisher needed to read it back).
struct published_window {
  std::unique_ptr<session> s;
  window* w = nullptr;
  uint64_t code_end = 0;

  explicit published_window(uint8_t version) {
    session_options o;
    o.publishers = 0;
    o.sframe_version = version;
    s = session::create(o).value();
    w = s->create_owned_window({}).value();
    for (int i = 0; i < 4; ++i) {
      auto space = w->allocate(64).value();
      std::memset(space.writable.data(), 0xc3, 64);
      const recipes::epilogue ep{60, 61};
      auto f = recipes::frame_pointer(abi::amd64, space.address, 61, 1, 4, std::span(&ep, 1));
      REQUIRE(w->append("f" + std::to_string(i), f.value()).ok());
      code_end = space.address + 61;
    }
    REQUIRE(w->publish().ok());
  }

  window_view view() const {
    window_view v;
    v.id = w->id();
    v.target = abi::amd64;
    v.text_start = w->text_start();
    v.text_size = w->text_size();
    v.sframe = w->published_sframe();
    v.sframe_address = reinterpret_cast<uint64_t>(v.sframe.data());
    v.code_end = code_end;
    return v;
  }
};

std::unique_ptr<jitunwind::detail::publisher_backend> kernel_publisher(emulated_kernel& k,
                                                                       log_capture& log) {
  session_options o;
  o.kernel_sframe = "prctl:79,80";
  o.log = log.sink();
  return jitunwind::detail::make_kernel_publisher(o, k).value();
}

}  // namespace

TEST_CASE("windows published through the kernel publisher pass the kernel series' checks") {
  for (uint8_t version : {sframe::version_3, sframe::version_2}) {
    INFO("session SFrame v" << int(version));
    published_window pw(version);
    emulated_kernel k;
    log_capture log;
    auto pub = kernel_publisher(k, log);
    const window_view v = pw.view();
    REQUIRE(v.sframe[2] == version);
    REQUIRE(pub->on_publish(v).ok());
    INFO((log.lines.empty() ? std::string() : log.lines.back()));
    CHECK(k.last_check == 0);
    REQUIRE(k.accepted == 1);
    REQUIRE(k.registered.size() == 1);
    // What the kernel got is v3, sorted and PC-relative, whatever the session writes (a v2
    // window is re-encoded as v3 for it), and describes the same functions.
    const uint64_t at = k.registered[0].sframe.lo;
    const auto* bytes = reinterpret_cast<const uint8_t*>(at);
    CHECK(bytes[2] == 3);
    CHECK(bytes[3] == (sframe::flag_fde_sorted | sframe::flag_fde_func_start_pcrel));
    CHECK((at == v.sframe_address) == (version == sframe::version_3));
    auto ours = sframe::decode(v.sframe, v.sframe_address);
    REQUIRE(ours.ok());
    auto theirs = sframe::decode(std::span(bytes, k.registered[0].sframe.hi - at), at);
    REQUIRE(theirs.ok());
    CHECK(theirs->functions == ours->functions);
    // Republishing replaces the registration; retiring removes it.
    REQUIRE(pub->on_publish(v).ok());
    CHECK(k.accepted == 2);
    CHECK(k.registered.size() == 1);
    REQUIRE(pub->on_retire(v).ok());
    CHECK(k.registered.empty());
  }
}

TEST_CASE("each registration check: the emulated kernel and our pre-check refuse alike") {
  published_window pw(sframe::version_3);
  const window_view v = pw.view();
  const std::vector<uint8_t> good(v.sframe.begin(), v.sframe.end());
  auto maps = read_own_mappings();
  REQUIRE(maps.ok());

  size_t tried = 0;
  // Each case: a section (a copy of the window's, mutated, in a page-aligned heap buffer of
  // its own), the text range, and registered ranges.
  for (int check = 1; check <= 15; ++check) {
    INFO("check " << check);
    std::vector<uint8_t> heap(good.size() + 64, 0);
    uint8_t* buf = heap.data();
    std::memcpy(buf, good.data(), good.size());
    uint64_t sframe = reinterpret_cast<uint64_t>(buf);
    uint64_t size = good.size();
    uint64_t text = v.text_start, text_size = v.code_end - v.text_start;
    // The copy lives at another address: fix the PC-relative starts of the index entries.
    const uint32_t nfdes = good[8];
    const int64_t moved = static_cast<int64_t>(v.sframe_address - sframe);
    for (uint32_t i = 0; i < nfdes; ++i) {
      int64_t start;
      std::memcpy(&start, buf + 28 + 16 * i, 8);
      start += moved;
      std::memcpy(buf + 28 + 16 * i, &start, 8);
    }
    std::vector<text_range> ours_registered;
    emulated_kernel k;
    switch (check) {
      case 1:
        text = 0;
        break;
      case 2:
        sframe = 0x1000;
        break;  // no mapping there (page 1 is never mapped)
      case 3:
        text = reinterpret_cast<uint64_t>(buf);
        text_size = 16;
        break;  // heap: not X
      case 4:
        k.registered.push_back({{0x10, 0x20}, {v.text_start + 8, v.text_start + 16}});
        ours_registered.push_back({v.text_start + 8, v.text_start + 16});
        break;
      case 5:
        buf[2] = 2;
        break;
      case 6:
        buf[3] &= ~1;
        break;
      case 7:
        buf[3] &= ~4;
        break;
      case 8:
        buf[3] |= 2;
        break;  // FRAME_POINTER: a v2 flag
      case 9:
        buf[7] = 8;
        break;
      case 10:
        std::memset(buf + 12, 0, 4);
        break;  // no FREs
      case 11:
        buf[16] = 0xff;
        buf[17] = 0xff;
        break;    // FRE length past the end
      case 12: {  // the first two functions swapped: starts no longer increasing
        std::vector<uint8_t> e0(buf + 28, buf + 44), e1(buf + 44, buf + 60);
        int64_t s0, s1;
        std::memcpy(&s0, e0.data(), 8);
        std::memcpy(&s1, e1.data(), 8);
        s0 -= 16;  // each start is relative to its own entry
        s1 += 16;
        std::memcpy(e0.data(), &s0, 8);
        std::memcpy(e1.data(), &s1, 8);
        std::memcpy(buf + 28, e1.data(), 16);
        std::memcpy(buf + 44, e0.data(), 16);
        break;
      }
      case 13:
        text_size = 32;
        break;    // the text ends inside the first function
      case 14: {  // the last function's attribute record moved past the FRE sub-section
        const uint32_t far = 0x10000;
        std::memcpy(buf + 28 + 16 * (nfdes - 1) + 12, &far, 4);
        break;
      }
      case 15: {  // the first function's second FRE starts at its first FRE's offset
        uint32_t attr;
        std::memcpy(&attr, buf + 28 + 12, 4);
        uint8_t* fres = buf + 28 + good[24] + attr + 5;
        fres[3] = fres[0];  // 1-byte start, info, 1 word: the second FRE is 3 bytes in
        break;
      }
    }
    const auto failed =
        check_registration(sframe, std::span(buf, size), text, text_size, *maps, ours_registered);
    REQUIRE(failed.has_value());
    INFO(failed->message);
    CHECK(static_cast<int>(failed->check) == check);
    CHECK(failed->message.rfind("check " + std::to_string(check) + " (", 0) == 0);
    // The kernel, called directly (our pre-check bypassed): EINVAL from the same check.
    auto b = kernel_backend::create("prctl:79,80", k).value();
    const kernel_window kw{sframe, size, text, text_size};
    if (check == 1) {
      CHECK(!b->register_window(kw).ok());  // refused by the backend itself, no call
      CHECK(k.accepted == 0);
    } else {
      auto r = b->register_window(kw);
      CHECK(!r.ok());
      CHECK(k.last_check == check);
    }
    ++tried;
  }
  CHECK(tried == 15);
  // And the unchanged copy passes both.
  std::vector<uint8_t> heap(good.begin(), good.end());
  const uint64_t at = reinterpret_cast<uint64_t>(heap.data());
  const int64_t moved = static_cast<int64_t>(v.sframe_address - at);
  for (uint32_t i = 0; i < good[8]; ++i) {
    int64_t start;
    std::memcpy(&start, heap.data() + 28 + 16 * i, 8);
    start += moved;
    std::memcpy(heap.data() + 28 + 16 * i, &start, 8);
  }
  CHECK(!check_registration(at, heap, v.text_start, v.code_end - v.text_start, *maps, {}));
  emulated_kernel k;
  auto b = kernel_backend::create("prctl:79,80", k).value();
  CHECK(b->register_window({at, heap.size(), v.text_start, v.code_end - v.text_start}).ok());
  CHECK(k.last_check == 0);
}

TEST_CASE("the kernel publisher does not call the kernel with a section it would refuse") {
  published_window pw(sframe::version_3);
  emulated_kernel k;
  log_capture log;
  auto pub = kernel_publisher(k, log);
  window_view v = pw.view();
  v.code_end = v.text_start + 32;    // a text range that ends inside the first function
  REQUIRE(pub->on_publish(v).ok());  // not an error for the session: the window is skipped
  CHECK(k.accepted == 0);
  CHECK(k.last_check == 0);  // no call reached the kernel
  REQUIRE(!log.lines.empty());
  CHECK(log.lines.back().find("not registered: the kernel's registration check 13 "
                              "(functions inside the text)") != std::string::npos);
}
