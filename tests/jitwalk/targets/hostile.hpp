// The hostile side of jitwalk's test JIT: what a profiled process can do to the tools that read
// it (tests/hostile drives these against jitwalk and `jitunwind windows`). Included by
// jit_target.cpp, which owns the registry and the good JIT code; this part only adds shapes:
//   --comm NAME               a command name of its choice (newlines, parentheses)
//   --perf-map-kind K         its perf map is a FIFO (fifo), a link to /dev/zero (zero-link) or
//                             a 20 GiB sparse file (sparse) instead of a file of names
//   --map-elf KIND:PATH       writes a hostile ELF object (support/hostile_elf.hpp) to PATH and
//                             maps it executable: shared-names, symbol-tables, truncate (its
//                             code runs in the loop; once another process opens the file, its
//                             size flips between cut and whole for 2 s, then it stays cut to its
//                             first two pages: a reader that scans a mapping of it at once meets
//                             the cut), or truncate-later (the same code, cut once, 100 ms after
//                             the open: a reader that maps it and reads its tables later does)
//   --bad-slots               a registry entry stuck in the middle of an update (odd counter)
//                             and one with state 9, beside the good windows
//   --many-windows N          N more live windows, all pointing at one untouched, never written
//   --window-sframe-size B    region of B bytes (default 4096) as their SFrame section
//   --churn                   keeps rewriting and replacing its perf map, replacing and
//                             truncating its mapped objects, and flipping bad slots (the soak)
#pragma once

#include <jitunwind/registry_abi.h>

#include "support/hostile_elf.hpp"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace hostile_target {

namespace hx = jitunwind::test::hostile;

struct options {
  std::string comm;
  std::string perf_map_kind;
  std::vector<std::pair<std::string, std::string>> elfs;  // kind, path
  bool bad_slots = false;
  uint64_t many_windows = 0;
  uint64_t window_sframe_size = 4096;
  bool churn = false;
  bool any() const {
    return !comm.empty() || !perf_map_kind.empty() || !elfs.empty() || bad_slots ||
           many_windows != 0 || churn;
  }
};

/// Consumes option `a` (with `next()` for its value) if it is one of the above.
inline bool parse_option(const std::string& a, const std::function<const char*()>& next,
                         options& o) {
  if (a == "--comm") {
    o.comm = next();
  } else if (a == "--perf-map-kind") {
    o.perf_map_kind = next();
  } else if (a == "--map-elf") {
    const std::string v = next();
    const size_t colon = v.find(':');
    if (colon == std::string::npos) return false;
    o.elfs.emplace_back(v.substr(0, colon), v.substr(colon + 1));
  } else if (a == "--bad-slots") {
    o.bad_slots = true;
  } else if (a == "--many-windows") {
    o.many_windows = std::strtoull(next(), nullptr, 10);
  } else if (a == "--window-sframe-size") {
    o.window_sframe_size = std::strtoull(next(), nullptr, 10);
  } else if (a == "--churn") {
    o.churn = true;
  } else {
    return false;
  }
  return true;
}

/// Registry slots the shapes need beyond the good windows' (which use the first 16): two for
/// the bad slots, then the many windows.
inline uint32_t extra_slots(const options& o) {
  return 2 + static_cast<uint32_t>(o.many_windows);
}

/// What the shapes need of jit_target's registry.
struct registry_access {
  /// registry_write(slot, id, state, text, text_size, sframe, sframe_size) of jit_target.
  std::function<uint64_t(uint32_t, uint64_t, uint32_t, uint64_t, uint64_t, uint64_t, uint64_t)>
      write;
  jitunwind_registry_entry* entries = nullptr;
  jitunwind_registry_header* header = nullptr;
  uint32_t first_slot = 16;          ///< slots from here on are the shapes'
  uint64_t text = 0, text_size = 0;  ///< a real code range to name in bogus entries
};

// spin(): mov ecx, 200000; 1: dec ecx; jnz 1b; ret
inline std::vector<uint8_t> spin_code() {
  return {0xB9, 0x40, 0x0D, 0x03, 0x00, 0xFF, 0xC9, 0x75, 0xFC, 0xC3};
}

inline bool write_whole(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// Maps a whole file read+execute; null on failure.
inline void* map_exec(const std::string& path, size_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  ::fstat(fd, &st);
  void* p =
      ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  if (size != nullptr) *size = static_cast<size_t>(st.st_size);
  return p;
}

class shapes {
 public:
  /// Sets up every shape of `o`; `perf_map` is where the process's perf map belongs.
  void start(const options& o, registry_access r, const std::string& perf_map) {
    o_ = o;
    r_ = std::move(r);
    perf_map_ = perf_map;
    if (!o.comm.empty()) ::prctl(PR_SET_NAME, o.comm.c_str(), 0, 0, 0);
    if (!o.perf_map_kind.empty()) plant_perf_map(o.perf_map_kind);
    for (const auto& [kind, path] : o.elfs) map_elf(kind, path);
    if (o.bad_slots) bad_slots(0);
    if (o.many_windows != 0) many_windows();
    std::fprintf(stderr, "jit_target: hostile shapes ready\n");
  }

  /// Called between calls of the good JIT code: runs the mapped object's code, and churns.
  void tick() {
    if (spin_ != nullptr) reinterpret_cast<void (*)()>(spin_)();
    if (!o_.churn) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_churn_) return;
    next_churn_ = now + std::chrono::milliseconds(20);
    ++round_;
    churn_perf_map();
    if (round_ % 5 == 0) churn_object();
    bad_slots(round_);
  }

 private:
  void plant_perf_map(const std::string& kind) {
    ::unlink(perf_map_.c_str());
    if (kind == "fifo") {
      ::mkfifo(perf_map_.c_str(), 0600);
    } else if (kind == "zero-link") {
      if (::symlink("/dev/zero", perf_map_.c_str()) != 0) std::perror("symlink");
    } else if (kind == "sparse") {
      const int fd = ::open(perf_map_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        if (::ftruncate(fd, off_t{20} << 30) != 0) std::perror("ftruncate");
        ::close(fd);
      }
    }
  }

  void map_elf(const std::string& kind, const std::string& path) {
    std::vector<uint8_t> bytes;
    if (kind == "shared-names") {
      bytes = hx::shared_section_names(40000, 1 << 20);
    } else if (kind == "symbol-tables") {
      hx::symbol_tables_options so;
      so.dynsym_tables = 1000;
      bytes = hx::many_symbol_tables(so);
    } else if (kind == "truncate" || kind == "truncate-later") {
      bytes = hx::truncatable(spin_code(), 500000);
    } else {
      std::fprintf(stderr, "jit_target: unknown --map-elf kind %s\n", kind.c_str());
      std::exit(2);
    }
    if (!write_whole(path, bytes)) {
      std::perror(path.c_str());
      std::exit(2);
    }
    void* m = map_exec(path, nullptr);
    if (m == nullptr) {
      std::perror("mmap");
      std::exit(2);
    }
    if (kind != "truncate" && kind != "truncate-later") return;
    spin_ = static_cast<uint8_t*>(m) + hx::truncatable_text_offset;
    const bool flip = kind == "truncate";
    // Cut the file as soon as another process opens it (its view then ends mid-table). For
    // two seconds the size flips between cut and whole (the tail then reads as zeros), so that
    // a reader that mapped the file meets the cut whenever it touches the tail, however the
    // two processes are scheduled; then it stays cut.
    const off_t whole = static_cast<off_t>(bytes.size());
    // Watched before "hostile shapes ready" is printed, not in the thread: a thread that starts
    // late (a busy machine) would miss an open that came first, and never cut the file.
    const int in = ::inotify_init1(IN_CLOEXEC);
    ::inotify_add_watch(in, path.c_str(), IN_OPEN);
    std::thread([path, whole, flip, in] {
      char buf[4096];
      if (::read(in, buf, sizeof buf) <= 0) return;
      if (!flip) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(flip ? 2 : 0);
      while (std::chrono::steady_clock::now() < end) {
        (void)!::truncate(path.c_str(), hx::truncatable_keep);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        (void)!::truncate(path.c_str(), whole);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (::truncate(path.c_str(), hx::truncatable_keep) == 0)
        std::fprintf(stderr, "jit_target: %s truncated after another process opened it\n",
                     path.c_str());
      ::close(in);
    }).detach();
  }

  // Slot first_slot: stuck mid-update (odd counter) or not; first_slot + 1: state 9 or free.
  void bad_slots(unsigned round) {
    const uint32_t stuck = r_.first_slot, bogus = r_.first_slot + 1;
    jitunwind_registry_entry& e = r_.entries[stuck];
    if (round % 2 == 0) {
      r_.write(stuck, 900, JITUNWIND_WINDOW_LIVE, r_.text, r_.text_size, 0, 0);
      __atomic_store_n(&e.seq, __atomic_load_n(&e.seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
      r_.write(bogus, 901, JITUNWIND_WINDOW_LIVE, r_.text, r_.text_size, 0, 0);
      jitunwind_registry_entry& b = r_.entries[bogus];
      const uint64_t seq = __atomic_load_n(&b.seq, __ATOMIC_RELAXED);
      __atomic_store_n(&b.seq, seq + 1, __ATOMIC_RELAXED);
      b.state = 9;
      __atomic_store_n(&b.seq, seq + 2, __ATOMIC_RELEASE);
    } else {
      // Settled and freed again (a reader must drop them from its skipped list).
      __atomic_store_n(&e.seq, __atomic_load_n(&e.seq, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
      r_.write(stuck, 0, JITUNWIND_WINDOW_FREE, 0, 0, 0, 0);
      r_.write(bogus, 0, JITUNWIND_WINDOW_FREE, 0, 0, 0, 0);
    }
    __atomic_fetch_add(&r_.header->change_count, 1, __ATOMIC_RELEASE);
  }

  void many_windows() {
    // Reserved, never written: it costs this process nothing, a reader that copies it for each
    // window pays for all of them.
    void* region = ::mmap(nullptr, o_.window_sframe_size, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) {
      std::perror("mmap");
      std::exit(2);
    }
    const uint32_t first = r_.first_slot + 2;
    for (uint64_t i = 0; i < o_.many_windows; ++i)
      r_.write(static_cast<uint32_t>(first + i), 1000 + i, JITUNWIND_WINDOW_LIVE, r_.text,
               r_.text_size, reinterpret_cast<uint64_t>(region), o_.window_sframe_size);
  }

  // Rewritten in place (truncated, then new lines) or replaced by a new file, in turns; some
  // rounds leave a line without its newline.
  void churn_perf_map() {
    std::string text;
    for (int i = 0; i < 50; ++i) {
      char line[96];
      std::snprintf(line, sizeof line, "%x %x churn_%u_%d\n", 0x100000 + i * 0x40, 0x40, round_, i);
      text += line;
    }
    if (round_ % 3 == 1) text += "dead 10 cut_line_without_newline";
    if (round_ % 2 == 0) {
      const int fd = ::open(perf_map_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return;
      (void)!::write(fd, text.data(), text.size());
      ::close(fd);
    } else {
      const std::string next = perf_map_ + ".new";
      const int fd = ::open(next.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return;
      (void)!::write(fd, text.data(), text.size());
      ::close(fd);
      ::rename(next.c_str(), perf_map_.c_str());
    }
  }

  // A new object replaces the old one: mapped, its code run from now on; the old one is
  // truncated under whoever still reads it, unmapped and removed.
  void churn_object() {
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    char path[96];
    std::snprintf(path, sizeof path, "%s/jit_target-churn-%d-%u.so", dir.c_str(), ::getpid(),
                  round_);
    if (!write_whole(path, hx::truncatable(spin_code(), 2000))) return;
    size_t size = 0;
    void* m = map_exec(path, &size);
    if (m == nullptr) return;
    uint8_t* old_map = old_map_;
    const size_t old_size = old_size_;
    const std::string old_path = old_path_;
    spin_ = static_cast<uint8_t*>(m) + hx::truncatable_text_offset;
    old_map_ = static_cast<uint8_t*>(m);
    old_size_ = size;
    old_path_ = path;
    if (old_map != nullptr) {
      ::truncate(old_path.c_str(), hx::truncatable_keep);
      ::munmap(old_map, old_size);
      ::unlink(old_path.c_str());
    }
  }

 public:
  ~shapes() {
    if (!old_path_.empty()) ::unlink(old_path_.c_str());
  }

 private:
  options o_;
  registry_access r_;
  std::string perf_map_;
  uint8_t* spin_ = nullptr;
  uint8_t* old_map_ = nullptr;
  size_t old_size_ = 0;
  std::string old_path_;
  unsigned round_ = 0;
  std::chrono::steady_clock::time_point next_churn_{};
};

}  // namespace hostile_target
