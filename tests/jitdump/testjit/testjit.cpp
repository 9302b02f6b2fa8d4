// A tiny JIT for the publisher tests: hand-assembled x86-64 functions in anonymous memory
// (written, then mprotect'ed read+execute), described with frame_builder recipes and published
// with the perf map, jitdump and GDB JIT components directly.
//
//   main -> jit_outer -> jit_inner -> native_work / native_breakpoint
//
// Both JIT functions spin a little themselves so that samples land in JIT code. With --fp they
// keep frame pointers (push rbp; mov rbp, rsp), otherwise they only move rsp.
#include <jitunwind/frame.h>
#include <jitunwind/window.h>

#include "gdbjit/gdbjit.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/flusher.hpp"
#include "perfmap/perfmap_writer.hpp"
#include "support/jit_program.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail;

extern "C" __attribute__((noinline)) void native_breakpoint(uint64_t n);

// Not a leaf (it calls native_breakpoint), so it gets a frame pointer like any compiled caller.
extern "C" __attribute__((noinline)) void native_work(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) asm volatile("" : : "r"(i) : "memory");
  native_breakpoint(n);
}

extern "C" __attribute__((noinline)) void native_breakpoint(uint64_t n) {
  asm volatile("" : : "r"(n) : "memory");
}

namespace {

using test::die;
using test::must;

struct code_buffer {
  std::vector<uint8_t> bytes;
  void put(std::initializer_list<uint8_t> b) { bytes.insert(bytes.end(), b); }
  void imm64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  uint32_t at() const { return static_cast<uint32_t>(bytes.size()); }
};

struct jit_function {
  std::string name;
  uint64_t start = 0;
  std::vector<uint8_t> code;
  function_desc frame;
};

// spin `spin` times, then call `callee` (rdi passes through), then return.
jit_function assemble(const char* name, uint64_t start, bool fp, uint64_t spin, uint64_t callee,
                      int32_t frame_bytes) {
  code_buffer c;
  uint32_t after_alloc = 0;
  if (fp) {
    c.put({0x55});              // push rbp
    c.put({0x48, 0x89, 0xe5});  // mov rbp, rsp
    after_alloc = c.at();
  } else {
    c.put({0x48, 0x83, 0xec, static_cast<uint8_t>(frame_bytes)});  // sub rsp, frame_bytes
    after_alloc = c.at();
  }
  c.put({0x48, 0xb9});  // mov rcx, spin
  c.imm64(spin);
  const uint32_t loop = c.at();
  c.put({0x48, 0xff, 0xc9});                                 // dec rcx
  c.put({0x75, static_cast<uint8_t>(loop - (c.at() + 2))});  // jne loop
  c.put({0x48, 0xb8});                                       // mov rax, callee
  c.imm64(callee);
  c.put({0xff, 0xd0});  // call rax
  uint32_t after_pop = 0;
  if (fp) {
    c.put({0x5d});  // pop rbp
  } else {
    c.put({0x48, 0x83, 0xc4, static_cast<uint8_t>(frame_bytes)});  // add rsp, frame_bytes
  }
  after_pop = c.at();
  c.put({0xc3});  // ret
  jit_function f;
  f.name = name;
  f.start = start;
  f.code = c.bytes;
  const recipes::epilogue ep{after_pop, c.at()};
  f.frame = fp ? must(recipes::frame_pointer(abi::amd64, start, c.at(), 1, after_alloc,
                                             std::span(&ep, 1)),
                      "rows")
               : must(recipes::sp_frame(abi::amd64, start, c.at(), after_alloc, frame_bytes,
                                        std::span(&ep, 1)),
                      "rows");
  return f;
}

struct options {
  bool fp = false;
  bool gdb = false;
  bool breakpoint = false;
  bool unregister_before_call = false;
  bool publish_each = false;
  bool unwinding_info = true;
  std::string perfmap_dir;
  std::string jitdump_dir;
  double seconds = 1.0;
  int stress_threads = 0;
  int kill_after_ms = 0;
  // Writer stress (not --session): first wait until the threads wrote this many functions, so
  // a loaded machine gets as much publishing before the kill as an idle one.
  uint64_t kill_after_functions = 0;
  int stress_pause_us = 0;
  int batch = 1;
  bool session = false;
  durability mode = durability::sync;  // --session: the session's default unless given
  bool mode_given = false;
  int flush_ms = 10;
  bool flush_thread = true;
  std::string progress;
};

void usage() {
  std::puts(
      "usage: testjit [--fp] [--perfmap DIR] [--jitdump DIR] [--gdb] [--seconds S]\n"
      "               [--breakpoint] [--unregister] [--stress THREADS --kill-after-ms MS]\n"
      "Runs main -> jit_outer -> jit_inner -> native code, publishing the JIT functions.\n"
      "  --fp           JIT code keeps frame pointers (default: rsp-only frames)\n"
      "  --perfmap DIR  write DIR/perf-PID.map\n"
      "  --jitdump DIR  write DIR/jit-PID.dump with unwinding info\n"
      "  --no-unwind    no CODE_UNWINDING_INFO records / no .eh_frame for gdb\n"
      "  --gdb          register the functions through the GDB JIT interface\n"
      "  --breakpoint   call native_breakpoint() once through the JIT code, then exit\n"
      "  --unregister   (with --gdb) unregister before calling\n"
      "  --stress N     N threads publish fake functions until SIGKILL after --kill-after-ms\n"
      "                 (after --kill-after-functions F written functions, when given)\n"
      "  --stress-pause-us US  pause between two publications of a stress thread\n"
      "  --batch N      (with --stress) publish N functions at a time: perfmap_writer::add_batch\n"
      "                and jitdump_writer::write_batch, or one window publish per N appends\n"
      "  --session      publish through jitunwind::session and an owned window (the public\n"
      "                API) instead of the publisher components\n"
      "  --publish-each (with --session) one window publish per function\n"
      "  --durability sync|batched  when perf map lines and jitdump records reach the files\n"
      "                (default: sync for the components, the session's default with --session)\n"
      "  --flush-ms MS  batched: latency bound (default 10)\n"
      "  --no-flush-thread  batched: no background flusher\n"
      "  --progress FILE  (with --stress) FILE holds one 64-bit count per thread, shared with\n"
      "                whoever reads it after the kill: functions whose publication returned");
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--help") {
      usage();
      std::exit(0);
    } else if (a == "--fp") {
      o.fp = true;
    } else if (a == "--session") {
      o.session = true;
    } else if (a == "--gdb") {
      o.gdb = true;
    } else if (a == "--breakpoint") {
      o.breakpoint = true;
    } else if (a == "--unregister") {
      o.unregister_before_call = true;
    } else if (a == "--publish-each") {
      o.publish_each = true;
    } else if (a == "--no-unwind") {
      o.unwinding_info = false;
    } else if (a == "--perfmap") {
      o.perfmap_dir = next();
    } else if (a == "--jitdump") {
      o.jitdump_dir = next();
    } else if (a == "--seconds") {
      o.seconds = std::atof(next().c_str());
    } else if (a == "--stress") {
      o.stress_threads = std::atoi(next().c_str());
    } else if (a == "--kill-after-ms") {
      o.kill_after_ms = std::atoi(next().c_str());
    } else if (a == "--kill-after-functions") {
      o.kill_after_functions = std::strtoull(next().c_str(), nullptr, 10);
    } else if (a == "--stress-pause-us") {
      o.stress_pause_us = std::atoi(next().c_str());
    } else if (a == "--batch") {
      o.batch = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--durability") {
      o.mode = must(parse_durability(next()), "--durability");
      o.mode_given = true;
    } else if (a == "--flush-ms") {
      o.flush_ms = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--no-flush-thread") {
      o.flush_thread = false;
    } else if (a == "--progress") {
      o.progress = next();
    } else {
      die("unknown argument " + a + " (see --help)");
    }
  }
  return o;
}

// --progress: one counter per stress thread in a shared mapping of a file, so the counts survive
// SIGKILL (they are in the page cache). Counter t is stored after thread t's publication of its
// first N functions returned.
std::atomic<uint64_t>* progress_counters(const options& o) {
  if (o.progress.empty()) return nullptr;
  const size_t bytes = sizeof(uint64_t) * static_cast<size_t>(std::max(1, o.stress_threads));
  const int fd = ::open(o.progress.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) die("cannot create " + o.progress);
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) die("cannot map " + o.progress);
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  return static_cast<std::atomic<uint64_t>*>(m);
}

file_policy policy_for(const options& o, flusher* background) {
  file_policy p;
  p.mode = o.mode;
  p.latency_ns = static_cast<uint64_t>(o.flush_ms) * 1000000u;
  p.background = o.mode == durability::batched && o.flush_thread ? background : nullptr;
  return p;
}

// Many threads publish many small fake functions as fast as they can; the process then kills
// itself with SIGKILL in the middle of it.
[[noreturn]] void stress_session(const options& o);

[[noreturn]] void stress(const options& o) {
  if (o.session) stress_session(o);
  std::atomic<uint64_t>* progress = progress_counters(o);
  static flusher background;  // started by the first buffered record (batched only)
  std::unique_ptr<perfmap_writer> map;
  std::unique_ptr<jitdump_writer> dump;
  if (!o.perfmap_dir.empty()) {
    perfmap_options po{o.perfmap_dir, 0, policy_for(o, &background)};
    map = must(perfmap_writer::create(po), "perf map");
  }
  if (!o.jitdump_dir.empty()) {
    jitdump_options jo;
    jo.dir = o.jitdump_dir;
    jo.policy = policy_for(o, &background);
    dump = must(jitdump_writer::create(jo), "jitdump");
  }
  // Real code bytes (a trampoline shape) at fake, non-overlapping addresses far from anything.
  static const uint8_t tramp[16] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0,    0,    0,
                                    0,    0x48, 0x83, 0xc4, 0x08, 0xc3, 0x90, 0x90};
  std::atomic<bool> go{true};
  std::atomic<uint64_t> written{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.stress_threads; ++t) {
    threads.emplace_back([&, t] {
      const size_t batch = static_cast<size_t>(o.batch);
      std::vector<std::string> names(batch);
      std::vector<function_desc> rows(batch);
      std::vector<perfmap_entry> lines(batch);
      std::vector<jitdump_entry> loads(batch);
      for (uint64_t i = 0; go.load(std::memory_order_relaxed); ++i) {
        const uint64_t addr = 0x100000000000ull + (static_cast<uint64_t>(t) << 32) + i * 256;
        char name[96];
        std::snprintf(name, sizeof name, "stress_t%d_fn%llu_with_a_longer_name_%s", t,
                      static_cast<unsigned long long>(i), (i % 3) ? "a" : "bb\ncc");
        const size_t k = i % batch;
        names[k] = name;
        rows[k] = must(recipes::trampoline(abi::amd64, addr, 16, 4, 8, 14), "rows");
        if (batch == 1) {
          if (map) must(map->add(addr, 16, name), "perf map add");
          if (dump) {
            jitdump_load l{name, addr, tramp, &rows[k]};
            (void)must(dump->load(l), "jitdump load");
          }
        } else if (k == batch - 1) {
          for (size_t j = 0; j < batch; ++j) {
            lines[j] = {rows[j].start, 16, names[j]};
            loads[j] = {};
            loads[j].load = {names[j], rows[j].start, tramp, &rows[j]};
          }
          if (map) must(map->add_batch(lines), "perf map add_batch");
          if (dump) must(dump->write_batch(loads), "jitdump write_batch");
        }
        if (k == batch - 1) written.fetch_add(batch, std::memory_order_relaxed);
        if (progress != nullptr && k == batch - 1)
          progress[t].store(i + 1, std::memory_order_release);
        if (o.stress_pause_us > 0)
          std::this_thread::sleep_for(std::chrono::microseconds(o.stress_pause_us));
      }
    });
  }
  while (written.load(std::memory_order_relaxed) < o.kill_after_functions)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(o.kill_after_ms));
  std::printf("killing myself\n");
  std::fflush(stdout);
  ::kill(::getpid(), SIGKILL);
  for (;;) pause();
}

session_options session_options_for(const options& o) {
  session_options so;
  so.publishers = publisher::registry | publisher::usdt_events;
  if (o.mode_given) so.perfmap_durability = so.jitdump_durability = o.mode;
  so.flush_latency = std::chrono::milliseconds(o.flush_ms);
  so.flush_thread = o.flush_thread;
  if (!o.perfmap_dir.empty()) {
    so.publishers |= static_cast<uint32_t>(publisher::perfmap);
    so.perfmap_dir = o.perfmap_dir;
  }
  if (!o.jitdump_dir.empty()) {
    so.publishers |= static_cast<uint32_t>(publisher::jitdump);
    so.jitdump_dir = o.jitdump_dir;
  }
  if (o.gdb) so.publishers |= static_cast<uint32_t>(publisher::gdb);
  so.log.fn = [](void*, log_level level, std::string_view m) {
    std::fprintf(stderr, "testjit: [%s] %.*s\n", to_string(level), static_cast<int>(m.size()),
                 m.data());
  };
  so.log.min_level = log_level::warning;
  return so;
}

void check_publishers(const session& s) {
  for (const publisher_status& st : s.status()) {
    if (st.state == publisher_state::failed || st.state == publisher_state::unsupported)
      die(std::string("publisher ") + to_string(st.which) + ": " + st.message);
  }
}

// Like stress(), through the public API: each thread has its own window and publishes one small
// function at a time.
[[noreturn]] void stress_session(const options& o) {
  std::atomic<uint64_t>* progress = progress_counters(o);
  auto s = must(session::create(session_options_for(o)), "session");
  static const uint8_t tramp[16] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0,    0,    0,
                                    0,    0x48, 0x83, 0xc4, 0x08, 0xc3, 0x90, 0x90};
  std::atomic<bool> go{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.stress_threads; ++t) {
    threads.emplace_back([&, t] {
      window* w = must(
          s->create_owned_window({.code_capacity = 64 << 20, .layout = code_layout::memfd_alias}),
          "window");
      for (uint64_t i = 0; go.load(std::memory_order_relaxed); ++i) {
        auto space = must(w->allocate(16), "allocate");
        std::memcpy(space.writable.data(), tramp, sizeof tramp);
        char name[96];
        std::snprintf(name, sizeof name, "stress_t%d_fn%llu_with_a_longer_name", t,
                      static_cast<unsigned long long>(i));
        must(w->append(name,
                       must(recipes::trampoline(abi::amd64, space.address, 16, 4, 8, 14), "rows")),
             "append");
        if ((i + 1) % static_cast<uint64_t>(o.batch) == 0) {
          must(w->publish(), "publish");
          if (progress != nullptr) progress[t].store(i + 1, std::memory_order_release);
        }
        if (o.stress_pause_us > 0)
          std::this_thread::sleep_for(std::chrono::microseconds(o.stress_pause_us));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(o.kill_after_ms));
  check_publishers(*s);
  std::printf("killing myself\n");
  std::fflush(stdout);
  ::kill(::getpid(), SIGKILL);
  for (;;) pause();
}

// main -> jit_outer -> jit_inner through an owned window of a session.
std::vector<jit_function> publish_with_session(const options& o, std::unique_ptr<session>& s,
                                               window*& w) {
  s = must(session::create(session_options_for(o)), "session");
  w = must(s->create_owned_window({.code_capacity = 1 << 16}), "window");
  const uint64_t callee =
      reinterpret_cast<uint64_t>(o.breakpoint ? &native_breakpoint : &native_work);
  // Sizes do not depend on addresses (absolute 64-bit immediates): assemble once to learn them.
  const size_t outer_size = assemble("jit_outer", 0, o.fp, 200000, 0, 24).code.size();
  const size_t inner_size = assemble("jit_inner", 0, o.fp, 400000, 0, 8).code.size();
  const auto outer_space = must(w->allocate(outer_size), "allocate");
  const auto inner_space = must(w->allocate(inner_size), "allocate");
  std::vector<jit_function> fs;
  fs.push_back(assemble("jit_outer", outer_space.address, o.fp, 200000, inner_space.address, 24));
  fs.push_back(assemble("jit_inner", inner_space.address, o.fp, 400000, callee, 8));
  std::memcpy(outer_space.writable.data(), fs[0].code.data(), fs[0].code.size());
  std::memcpy(inner_space.writable.data(), fs[1].code.data(), fs[1].code.size());
  for (const jit_function& f : fs) {
    must(w->append(f.name, f.frame), "append");
    if (o.publish_each) must(w->publish(), "publish");
  }
  must(w->publish(), "publish");
  check_publishers(*s);
  if (o.unregister_before_call) must(w->retire(std::chrono::milliseconds(0)), "retire");
  return fs;
}

}  // namespace

int main(int argc, char** argv) {
  test::program_name = "testjit";
  const options o = parse(argc, argv);
  if (o.stress_threads > 0) stress(o);
  std::unique_ptr<session> s;
  window* w = nullptr;
  if (o.session) {
    const std::vector<jit_function> fs = publish_with_session(o, s, w);
    std::printf("pid %d\n", static_cast<int>(::getpid()));
    for (const jit_function& f : fs)
      std::printf("%s 0x%llx %zu\n", f.name.c_str(), static_cast<unsigned long long>(f.start),
                  f.code.size());
    std::fflush(stdout);
    auto outer = reinterpret_cast<void (*)(uint64_t)>(fs[0].start);
    if (o.breakpoint) {
      outer(1);
      return 0;
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
    while (std::chrono::steady_clock::now() < deadline) outer(200000);
    return 0;
  }

  const long page = ::sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<uint8_t*>(
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) die("mmap failed");
  const auto base = reinterpret_cast<uint64_t>(mem);
  // 256 bytes apart: jitdump's injected objects extend past the code by the unwinding data
  // (ALIGN_8(size) + mapped_size) and must not overlap the next function.
  const uint64_t inner_at = base + 256, outer_at = base;
  const uint64_t callee =
      reinterpret_cast<uint64_t>(o.breakpoint ? &native_breakpoint : &native_work);
  std::vector<jit_function> fs;
  fs.push_back(assemble("jit_outer", outer_at, o.fp, 200000, inner_at, 24));
  fs.push_back(assemble("jit_inner", inner_at, o.fp, 400000, callee, 8));
  for (const jit_function& f : fs)
    std::memcpy(reinterpret_cast<void*>(f.start), f.code.data(), f.code.size());
  if (::mprotect(mem, page, PROT_READ | PROT_EXEC) != 0) die("mprotect failed");

  std::unique_ptr<perfmap_writer> map;
  std::unique_ptr<jitdump_writer> dump;
  std::unique_ptr<gdbjit::registrar> gdb;
  gdbjit::registration_id gdb_id = 0;
  if (!o.perfmap_dir.empty()) {
    map = must(perfmap_writer::create({o.perfmap_dir, 0}), "perf map");
    for (const jit_function& f : fs) must(map->add(f.start, f.code.size(), f.name), "perf map add");
  }
  if (!o.jitdump_dir.empty()) {
    jitdump_options jo;
    jo.dir = o.jitdump_dir;
    jo.unwinding_info = o.unwinding_info;
    dump = must(jitdump_writer::create(jo), "jitdump");
    for (const jit_function& f : fs)
      (void)must(dump->load({f.name, f.start, f.code, &f.frame}), "jitdump load");
  }
  if (o.gdb) {
    gdb = must(gdbjit::registrar::create({}), "gdb registrar");
    std::vector<gdbjit::function_symbol> syms;
    for (const jit_function& f : fs)
      syms.push_back({f.name, f.start, f.code.size(), o.unwinding_info ? &f.frame : nullptr});
    gdb_id = must(gdb->add(syms), "gdb register");
    if (o.unregister_before_call) must(gdb->remove(gdb_id), "gdb unregister");
  }
  std::printf("pid %d\n", static_cast<int>(::getpid()));
  for (const jit_function& f : fs)
    std::printf("%s 0x%llx %zu\n", f.name.c_str(), static_cast<unsigned long long>(f.start),
                f.code.size());
  std::fflush(stdout);

  auto outer = reinterpret_cast<void (*)(uint64_t)>(outer_at);
  if (o.breakpoint) {
    outer(1);
    return 0;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
  uint64_t calls = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    outer(200000);
    ++calls;
  }
  std::printf("calls %llu\n", static_cast<unsigned long long>(calls));
  return 0;
}
