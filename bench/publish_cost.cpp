// What publishing one JIT-compiled function costs through the SDK's real path — describing its
// frame rows, `window::append`, `window::publish` on a `jitunwind::session` — with each
// publisher alone, with "perf map + SFrame + registry", and with all default publishers, at 1, 8
// and 64 functions per publish; next to compiling the same function with asmjit in the same run.
//
//   build/bench/bench_publish_cost                      (5 repetitions, medians)
//   build/bench/bench_publish_cost --benchmark_filter=BM_publish/default
//   build/bench/bench_publish_cost --no-callgrind        (no instruction counts: faster)
//
// The ratios divide by baselines measured in processes of their own (`--baseline assembler|
// compiler`, started before the benchmarks): in a shared process a baseline moved with what ran
// before it. Beside the CPU times, the tables give callgrind's user-space instruction counts of
// the same configurations (`--profile`, run under valgrind at the end when it is installed):
// exact and repeatable where times on a shared machine are not.
//
// Baselines (per function, into the same kind of memory):
//   BM_asmjit/assembler  x86::Assembler: a 26-instruction function (frame-pointer prologue,
//                        two callee-saved pushes, a loop, a call to a runtime helper, epilogue),
//                        resolved, relocated to its address (`relocateToBase`) and copied there.
//   BM_asmjit/compiler   the same function through x86::Compiler (virtual registers, register
//                        allocation, prologue/epilogue insertion), then relocated and copied.
// Measured:
//   BM_describe          building the rows with recipes::frame_pointer into a new desc
//   BM_describe/reuse    the same into one reused desc (the overload; part of every row below)
//   BM_publish/<publishers>/<functions per publish>
//                        rows + append + (publish every N functions) in windows the runtime owns
//                        (session::describe_window, 1024 functions per window; a full window is
//                        published, retired and freed, and a new one described — all timed).
//   BM_publish_dual/...  the same with memfd_alias owned windows (no protection changes)
//   BM_publish_owned/... the same in windows the SDK owns (allocate + copy, W^X: each publish
//                        makes the new code executable with mprotect).
//   .../<mode>           the file publishers' durability (docs/publishers.md#durability): sync
//                        (written before publish returns), batched (one write per 64 KiB or
//                        10 ms, the flusher thread on), batched-nothread (no flusher thread).
// Floors, measured in the same run (the "overhead over the floor"):
//   BM_floor/file/<perfmap|jitdump>/<N>/<mode>
//                        one `write` of the same bytes per batch, prepared ahead: under sync a
//                        batch is one publish (N functions' lines or records), under batched one
//                        flush (64 KiB); bytes per function are those the publishers wrote in
//                        this run (BM_publish/default/64).
//   BM_latency/...       publish one function, then wait until the perf map has grown: how long
//                        a record waits under batched when nothing else is published.
// The publishers write into a temporary directory (removed at exit). The kernel publisher is not
// measured: this kernel has no SFrame registration.
//
// Time is CPU time of the whole process (user + system of every thread, so the flusher
// thread's writes count): on a shared 2-core machine wall time is mostly waiting. The kernel's
// later write-back of the perf map and jitdump pages to disk runs in kernel threads and is not
// counted. Each benchmark reports the median of its repetitions; the tables at the end divide by
// the medians of the baselines and floors, and the last one lists the targets.
#include <jitunwind/frame.h>
#include <jitunwind/window.h>

#include "growing_file.hpp"

#include <asmjit/x86.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace jitunwind;

namespace {

// ---- the function a JIT compiles ----

// Offsets the frame rows refer to.
struct emitted_shape {
  uint32_t size = 0;
  uint32_t after_push = 0;    // after `push rbp`
  uint32_t after_set_fp = 0;  // after `mov rbp, rsp`
  uint32_t after_pop = 0;     // after `pop rbp` (the `ret` follows)
};

// int64 f(int64* p, int64 n, int64 k): for (i = 0; i < n; ++i) p[i] = p[i] * 3 + k;
//                                      return helper(i) + i;
// `helper` is an absolute address: asmjit records a relocation that relocateToBase resolves.
emitted_shape emit_assembler(asmjit::x86::Assembler& a, uint64_t helper) {
  using namespace asmjit;
  emitted_shape s;
  asmjit::Label loop = a.newLabel(), done = a.newLabel();
  a.push(x86::rbp);
  s.after_push = static_cast<uint32_t>(a.offset());
  a.mov(x86::rbp, x86::rsp);
  s.after_set_fp = static_cast<uint32_t>(a.offset());
  a.push(x86::rbx);
  a.push(x86::r12);
  a.sub(x86::rsp, 16);
  a.mov(x86::rbx, x86::rdi);
  a.mov(x86::r12, x86::rsi);
  a.xor_(x86::eax, x86::eax);
  a.bind(loop);
  a.cmp(x86::rax, x86::r12);
  a.jge(done);
  a.mov(x86::rcx, x86::qword_ptr(x86::rbx, x86::rax, 3));
  a.imul(x86::rcx, x86::rcx, 3);
  a.add(x86::rcx, x86::rdx);
  a.mov(x86::qword_ptr(x86::rbx, x86::rax, 3), x86::rcx);
  a.inc(x86::rax);
  a.jmp(loop);
  a.bind(done);
  a.mov(x86::qword_ptr(x86::rsp), x86::rax);
  a.mov(x86::rdi, x86::rax);
  a.call(imm(helper));
  a.add(x86::rax, x86::qword_ptr(x86::rsp));
  a.add(x86::rsp, 16);
  a.pop(x86::r12);
  a.pop(x86::rbx);
  a.pop(x86::rbp);
  s.after_pop = static_cast<uint32_t>(a.offset());
  a.ret();
  s.size = static_cast<uint32_t>(a.offset());
  return s;
}

// Assembles the function for `base` and copies it there. Returns its size.
size_t assemble_at(uint64_t base, uint8_t* out, size_t cap, emitted_shape* shape = nullptr) {
  using namespace asmjit;
  CodeHolder code;
  code.init(Environment::host(), base);
  x86::Assembler a(&code);
  const emitted_shape s = emit_assembler(a, base + 0x10000);
  code.flatten();
  code.resolveUnresolvedLinks();
  if (code.relocateToBase(base) != kErrorOk) std::abort();
  const size_t size = code.codeSize();
  if (size > cap || size != s.size) std::abort();
  code.copyFlattenedData(out, size, CopySectionFlags::kPadSectionBuffer);
  if (shape != nullptr) *shape = s;
  return size;
}

size_t assemble_only(uint64_t base, uint8_t* out, size_t cap) {
  return assemble_at(base, out, cap);
}

// The same function through the Compiler (register allocation and frame insertion included).
size_t compile_at(uint64_t base, uint8_t* out, size_t cap) {
  using namespace asmjit;
  CodeHolder code;
  code.init(Environment::host(), base);
  x86::Compiler cc(&code);
  FuncNode* fn = cc.addFunc(FuncSignatureT<int64_t, int64_t*, int64_t, int64_t>(CallConvId::kHost));
  fn->frame().setPreservedFP();
  x86::Gp p = cc.newIntPtr("p"), n = cc.newInt64("n"), k = cc.newInt64("k");
  x86::Gp i = cc.newInt64("i"), t = cc.newInt64("t"), r = cc.newInt64("r");
  x86::Mem spill = cc.newStack(8, 8);
  fn->setArg(0, p);
  fn->setArg(1, n);
  fn->setArg(2, k);
  asmjit::Label loop = cc.newLabel(), done = cc.newLabel();
  cc.xor_(i, i);
  cc.bind(loop);
  cc.cmp(i, n);
  cc.jge(done);
  cc.mov(t, x86::qword_ptr(p, i, 3));
  cc.imul(t, t, 3);
  cc.add(t, k);
  cc.mov(x86::qword_ptr(p, i, 3), t);
  cc.inc(i);
  cc.jmp(loop);
  cc.bind(done);
  cc.mov(spill, i);
  InvokeNode* call = nullptr;
  cc.invoke(&call, base + 0x10000, FuncSignatureT<int64_t, int64_t>(CallConvId::kHost));
  call->setArg(0, i);
  call->setRet(0, r);
  cc.add(r, spill);
  cc.ret(r);
  cc.endFunc();
  if (cc.finalize() != kErrorOk) std::abort();
  code.flatten();
  code.resolveUnresolvedLinks();
  if (code.relocateToBase(base) != kErrorOk) std::abort();
  const size_t size = code.codeSize();
  if (size > cap) std::abort();
  code.copyFlattenedData(out, size, CopySectionFlags::kPadSectionBuffer);
  return size;
}

// ---- runtime-owned code memory ----

constexpr size_t slot_bytes = 256;  // function (~80 bytes) + room for jitdump's mapped range
constexpr size_t functions_per_window = 1024;
constexpr size_t window_bytes = slot_bytes * functions_per_window;
constexpr size_t region_windows = 64;

// One mapping, pre-filled with the function at every slot (jitdump copies the code bytes from
// there; the code is never run, so the helper's relative address need not match each slot).
struct code_region {
  uint8_t* base = nullptr;
  size_t bytes = region_windows * window_bytes;
  emitted_shape shape;
  uint8_t code[128];
  code_region() {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<uint8_t*>(p);
    assemble_at(reinterpret_cast<uint64_t>(base), code, sizeof code, &shape);
    for (size_t off = 0; off < bytes; off += slot_bytes) std::memcpy(base + off, code, shape.size);
  }
};

const code_region& region() {
  static const code_region r;
  return r;
}

// Names as a JIT would give them (longer than std::string's small buffer).
const std::vector<std::string>& names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < functions_per_window; ++i)
      v.push_back("js:Module.function_" + std::to_string(i) +
                  " (script.js:" + std::to_string(10 + i) + ")");
    return v;
  }();
  return n;
}

function_desc describe(uint64_t start, const emitted_shape& s) {
  const recipes::epilogue ep{s.after_pop, s.size};
  auto f = recipes::frame_pointer(abi::amd64, start, s.size, s.after_push, s.after_set_fp,
                                  std::span(&ep, 1));
  if (!f) std::abort();
  return std::move(*f);
}

// What a JIT describing function after function does: one desc reused (recipes::frame_pointer's
// overload that fills it), so describing allocates nothing once warm.
void describe_into(function_desc& f, uint64_t start, const emitted_shape& s) {
  const recipes::epilogue ep{s.after_pop, s.size};
  if (!recipes::frame_pointer(f, abi::amd64, start, s.size, s.after_push, s.after_set_fp,
                              std::span(&ep, 1)))
    std::abort();
}

// ---- scratch directory for the publishers' files ----

const std::string& scratch_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/jitunwind-publish-cost-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    return std::string(tmpl);
  }();
  return dir;
}

void clear_scratch() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir(), ec))
    std::filesystem::remove_all(e.path(), ec);
}

struct publisher_config {
  const char* name;
  publisher_set set;
};

const publisher_config configs[] = {
    {"none", 0},
    {"registry", static_cast<publisher_set>(publisher::registry)},
    {"usdt-events", static_cast<publisher_set>(publisher::usdt_events)},
    {"perfmap", static_cast<publisher_set>(publisher::perfmap)},
    {"jitdump", static_cast<publisher_set>(publisher::jitdump)},
    {"gdb", static_cast<publisher_set>(publisher::gdb)},
    {"perfmap+registry", publisher::perfmap | publisher::registry},
    {"default", default_publishers},
    // Every publisher that needs no configuration (the default set before issue 33).
    {"all", publisher::registry | publisher::usdt_events | publisher::perfmap |
                publisher::jitdump | publisher::gdb},
};

const int batches[] = {1, 8, 64};

// The file publishers' durability.
struct mode_config {
  const char* name;
  durability mode;
  bool thread;
};
const mode_config modes[] = {{"sync", durability::sync, true},
                             {"batched", durability::batched, true},
                             {"batched-nothread", durability::batched, false}};

bool writes_files(publisher_set set) {
  return contains(set, publisher::perfmap) || contains(set, publisher::jitdump);
}

// Bytes per function the perf map and the jitdump grew by in the last BM_publish run that wrote
// them (the floors write as many); defaults until a run has measured them.
double perfmap_bytes_per_fn = 64, jitdump_bytes_per_fn = 330;

uintmax_t scratch_bytes(const char* prefix) {
  uintmax_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(scratch_dir(), ec))
    if (e.path().filename().string().starts_with(prefix)) n += e.file_size(ec);
  return n;
}

std::unique_ptr<session> make_session(benchmark::State& state, publisher_set set,
                                      const mode_config& mode = modes[0]) {
  session_options o;
  o.publishers = set;
  o.perfmap_dir = scratch_dir();
  o.jitdump_dir = scratch_dir();
  o.perfmap_durability = o.jitdump_durability = mode.mode;
  o.flush_thread = mode.thread;
  auto s = session::create(o);
  if (!s) {
    state.SkipWithError(s.error().message().c_str());
    return nullptr;
  }
  return std::move(*s);
}

// A requested publisher that failed would make the row look cheap: refuse to report it.
bool all_active(benchmark::State& state, const session& s) {
  for (const publisher_status& st : s.status()) {
    if (st.state == publisher_state::disabled || st.state == publisher_state::active) continue;
    state.SkipWithError(
        (std::string(to_string(st.which)) + " " + to_string(st.state) + ": " + st.message).c_str());
    return false;
  }
  return true;
}

enum class memory_kind {
  described,   // the runtime's memory (session::describe_window)
  owned,       // owned windows, W^X by mprotect
  owned_dual,  // owned windows, W^X by a second (writable) mapping of a memfd
};

// The runtime's side of publication: describe each function's rows, append it, publish every
// `batch` functions; full windows are published, retired, freed and replaced.
class publish_loop {
 public:
  publish_loop(std::unique_ptr<session> s, int batch, memory_kind kind)
      : s_(std::move(s)), batch_(batch), owned_(kind != memory_kind::described), kind_(kind) {}
  ~publish_loop() { finish_window(); }

  // One function.
  void add() {
    const code_region& r = region();
    uint64_t start = 0;
    if (owned_) {
      result<window::code_space> space = error(errc::bad_state, "no window");
      if (w_ != nullptr && in_window_ < functions_per_window) space = w_->allocate(r.shape.size);
      if (!space) {
        next_window();
        space = w_->allocate(r.shape.size);
        if (!space) std::abort();
      }
      // The runtime's copy of its code (a few ns).
      std::memcpy(space->writable.data(), r.code, r.shape.size);
      start = space->address;
    } else {
      if (w_ == nullptr || in_window_ == functions_per_window) next_window();
      start = w_->text_start() + in_window_ * slot_bytes;
      // The runtime has just written its code there (so it is in the cache when jitdump copies
      // it); BM_copy measures this copy alone and the table subtracts it.
      std::memcpy(reinterpret_cast<uint8_t*>(start), r.code, r.shape.size);
    }
    describe_into(desc_, start, r.shape);
    if (!w_->append(names()[in_window_], desc_)) std::abort();
    ++in_window_;
    if (++pending_ == batch_) {
      if (!w_->publish()) std::abort();
      pending_ = 0;
    }
  }

  void finish_window() {
    if (w_ == nullptr) return;
    if (!w_->publish() || !w_->retire(std::chrono::milliseconds(0))) std::abort();
    s_->poll();  // grace 0: frees it now
    w_ = nullptr;
  }

  session& sess() { return *s_; }

 private:
  void next_window() {
    finish_window();
    result<window*> created = error(errc::bad_state, "no window");
    if (owned_) {
      owned_window_options o;
      o.code_capacity = size_t{1} << 20;
      o.layout =
          kind_ == memory_kind::owned_dual ? code_layout::memfd_alias : code_layout::page_flip;
      created = s_->create_owned_window(o);
    } else {
      described_window_options o;
      o.text_start = reinterpret_cast<uint64_t>(region().base) + next_window_ * window_bytes;
      o.text_size = window_bytes;
      created = s_->describe_window(o);
      next_window_ = (next_window_ + 1) % region_windows;
    }
    if (!created) std::abort();
    w_ = *created;
    in_window_ = 0;
    pending_ = 0;
  }

  std::unique_ptr<session> s_;
  const int batch_;
  const bool owned_;
  const memory_kind kind_;
  window* w_ = nullptr;
  function_desc desc_;
  size_t next_window_ = 0, in_window_ = 0;
  int pending_ = 0;
};

void BM_publish(benchmark::State& state, publisher_set set, int batch, memory_kind owned,
                const mode_config& mode) {
  {
    auto s = make_session(state, set, mode);
    if (!s) return;
    publish_loop loop(std::move(s), batch, owned);
    for (auto _ : state) loop.add();
    loop.finish_window();
    if (!all_active(state, loop.sess())) return;
  }  // the session's end writes what is still buffered
  const double n = static_cast<double>(state.iterations());
  if (contains(set, publisher::perfmap) && n > 10000) {
    perfmap_bytes_per_fn = static_cast<double>(scratch_bytes("perf-")) / n;
    state.counters["perfmap_bytes_per_fn"] = perfmap_bytes_per_fn;
  }
  if (contains(set, publisher::jitdump) && n > 10000) {
    jitdump_bytes_per_fn = static_cast<double>(scratch_bytes("jit-")) / n;
    state.counters["jitdump_bytes_per_fn"] = jitdump_bytes_per_fn;
  }
  clear_scratch();
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("ratio_to=BM_asmjit/assembler");
}

// The floor of a file publisher: one write of the same bytes per batch, prepared ahead (sync: a
// publish of `batch` functions; batched: a flush of 64 KiB). Items are functions.
void BM_floor_file(benchmark::State& state, bool jitdump, int batch, const mode_config& mode) {
  const double per_fn = jitdump ? jitdump_bytes_per_fn : perfmap_bytes_per_fn;
  const size_t functions = mode.mode == durability::sync
                               ? static_cast<size_t>(batch)
                               : static_cast<size_t>(std::ceil(
                                     static_cast<double>(session_options{}.flush_bytes) / per_fn));
  const std::vector<char> bytes(static_cast<size_t>(per_fn * static_cast<double>(functions)), 'x');
  growing_file file(scratch_dir() + "/floor");
  for (auto _ : state) {
    if (::write(file.fd(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      std::abort();
    file.grew(state, bytes.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * functions));
}

// How long a published function waits before it is in the perf map when nothing else is
// published (wall time): the flusher thread writes it. `after_idle`: 150 ms without publishing
// before each publish, so the thread has ended (flusher::linger) and a new one starts.
void BM_latency(benchmark::State& state, bool after_idle) {
  auto s = make_session(state, publisher::perfmap | publisher::registry, modes[1]);
  if (!s) return;
  const code_region& r = region();
  described_window_options o;
  o.text_start = reinterpret_cast<uint64_t>(r.base);
  o.text_size = window_bytes;
  window* w = s->describe_window(o).value();
  const std::string map = scratch_dir() + "/perf-" + std::to_string(::getpid()) + ".map";
  function_desc desc;
  std::vector<double> waits;
  size_t slot = 0;
  for (auto _ : state) {
    if (after_idle) std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const uintmax_t before = std::filesystem::exists(map) ? std::filesystem::file_size(map) : 0;
    describe_into(desc, o.text_start + slot * slot_bytes, r.shape);
    if (!w->append(names()[slot], desc) || !w->publish()) std::abort();
    const auto t0 = std::chrono::steady_clock::now();
    while (std::filesystem::file_size(map) == before) std::this_thread::yield();
    const double wait =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(wait);
    waits.push_back(wait * 1e3);
    if (++slot == functions_per_window) std::abort();
  }
  std::sort(waits.begin(), waits.end());
  state.counters[after_idle ? "idle_median_ms" : "median_ms"] = waits[waits.size() / 2];
  state.counters[after_idle ? "idle_max_ms" : "max_ms"] = waits.back();
  s.reset();
  clear_scratch();
}

// Baselines: compile into the same region, slot after slot.
template <size_t (*Compile)(uint64_t, uint8_t*, size_t)>
void BM_asmjit(benchmark::State& state) {
  const code_region& r = region();
  size_t slot = 0;
  const size_t slots = r.bytes / slot_bytes;
  for (auto _ : state) {
    uint8_t* at = r.base + slot * slot_bytes;
    benchmark::DoNotOptimize(Compile(reinterpret_cast<uint64_t>(at), at, slot_bytes));
    slot = (slot + 1) % slots;
  }
  state.SetItemsProcessed(state.iterations());
}

// The runtime's copy of its code into place, as the publish loops do it (subtracted there).
void BM_copy(benchmark::State& state) {
  const code_region& r = region();
  size_t slot = 0;
  const size_t slots = r.bytes / slot_bytes;
  for (auto _ : state) {
    std::memcpy(r.base + slot * slot_bytes, r.code, r.shape.size);
    benchmark::ClobberMemory();
    slot = (slot + 1) % slots;
  }
  state.SetItemsProcessed(state.iterations());
}

// The floors of the file publishers: a system call that does nothing, and appending a perf map
// line (64 bytes) or a page (4096 bytes) to a file in the same directory with one `write`.
void BM_floor_syscall(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(::syscall(SYS_getppid));
  state.SetItemsProcessed(state.iterations());
}

void BM_floor_write(benchmark::State& state) {
  const std::string path = scratch_dir() + "/floor";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  const std::vector<char> bytes(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) {
    if (::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) std::abort();
  }
  ::close(fd);
  ::unlink(path.c_str());
  state.SetItemsProcessed(state.iterations());
}

// Describes one function per iteration at successive slots of the code region.
template <class Describe>
void describe_each_slot(benchmark::State& state, Describe&& describe_at) {
  const code_region& r = region();
  uint64_t start = reinterpret_cast<uint64_t>(r.base);
  for (auto _ : state) {
    describe_at(start, r.shape);
    start += slot_bytes;
    if (start >= reinterpret_cast<uint64_t>(r.base) + r.bytes)
      start = reinterpret_cast<uint64_t>(r.base);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("ratio_to=BM_asmjit/assembler");
}

void BM_describe_reuse(benchmark::State& state) {
  function_desc f;
  describe_each_slot(state, [&](uint64_t start, const auto& shape) {
    describe_into(f, start, shape);
    benchmark::DoNotOptimize(f);
  });
}

void BM_describe(benchmark::State& state) {
  describe_each_slot(state, [](uint64_t start, const auto& shape) {
    function_desc f = describe(start, shape);
    benchmark::DoNotOptimize(f);
  });
}

// ---- baselines in processes of their own, and instruction counts ----

// The asmjit baselines run in a fresh process each (this program with `--baseline`): whatever
// the benchmarks before did to this process (its heap, threads, mappings, caches) cannot move
// them. Median of 5 repetitions of at least 0.2 s of process CPU time each.
double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int baseline_main(const char* which) {
  const bool compiler = std::strcmp(which, "compiler") == 0;
  if (!compiler && std::strcmp(which, "assembler") != 0) return 2;
  const code_region& r = region();
  const size_t slots = r.bytes / slot_bytes;
  size_t slot = 0;
  const auto one = [&] {
    uint8_t* at = r.base + slot * slot_bytes;
    const auto base = reinterpret_cast<uint64_t>(at);
    benchmark::DoNotOptimize(compiler ? compile_at(base, at, slot_bytes)
                                      : assemble_at(base, at, slot_bytes));
    slot = (slot + 1) % slots;
  };
  for (int i = 0; i < 1000; ++i) one();  // warm up
  std::vector<double> ns;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = cpu_seconds();
    long n = 0;
    double t = t0;
    while (t - t0 < 0.2) {
      for (int i = 0; i < 64; ++i) one();
      n += 64;
      t = cpu_seconds();
    }
    ns.push_back((t - t0) * 1e9 / static_cast<double>(n));
  }
  std::sort(ns.begin(), ns.end());
  std::printf("%.1f\n", ns[2]);
  return 0;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The first number a command printed, or 0.
double command_number(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return 0;
  double v = 0;
  if (std::fscanf(p, "%lf", &v) != 1) v = 0;
  ::pclose(p);
  return v;
}

double baseline_in_own_process(const char* which) {
  return command_number(self_path() + " --baseline " + which);
}

// User-space instructions per function of `--profile ARGS` under callgrind (exact and
// repeatable, unlike times on a shared machine), or 0 without valgrind. glibc copies and fills
// blocks of 2 KiB and more with `rep movsb`/`rep stosb`, which callgrind counts once per byte:
// the tunables make it use its vector loops, whose count follows their time.
bool valgrind_present() {
  static const bool present = std::system("valgrind --version >/dev/null 2>&1") == 0;
  return present;
}

double callgrind_per_function(const std::string& profile_args, long n, const char* toggle) {
  if (!valgrind_present()) return 0;
  const std::string out = scratch_dir() + "/callgrind.out";
  const std::string command =
      "GLIBC_TUNABLES=glibc.cpu.x86_rep_movsb_threshold=0x7fffffffffffffff:"
      "glibc.cpu.x86_rep_stosb_threshold=0x7fffffffffffffff valgrind --tool=callgrind "
      "--toggle-collect='" +
      std::string(toggle) + "' --callgrind-out-file=" + out + " " + self_path() + " --profile " +
      profile_args + " >/dev/null 2>&1 && sed -n 's/^summary: //p; s/^totals: //p' " + out +
      " | head -1";
  const double total = command_number(command);
  std::filesystem::remove(out);
  return total / static_cast<double>(n);
}

constexpr long callgrind_functions = 20000;

double callgrind_publish(const char* config, int batch) {
  return callgrind_per_function(std::string(config) + " " + std::to_string(batch) + " " +
                                    std::to_string(callgrind_functions) + " described batched",
                                callgrind_functions, "*run_profile*");
}

double callgrind_baseline(const char* which) {
  return callgrind_per_function(std::string("asmjit-") + which + " 0 5000", 5000,
                                "*run_asmjit_profile*");
}

struct baselines {
  double assembler = 0, compiler = 0;                    // ns, own processes
  double assembler_instr = 0, compiler_instr = 0;        // callgrind
  bool callgrind = true;
};
baselines own;

// ---- report ----

// Keeps CPU ns per function of each benchmark (the median with repetitions) and prints the
// ratio table after Google Benchmark's own.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (!median && r.run_type != Run::RT_Iteration) continue;
      if (r.run_type == Run::RT_Iteration && r.repetitions > 1) continue;  // aggregates follow
      for (const char* c : {"median_ms", "max_ms", "idle_median_ms", "idle_max_ms"})
        if (const auto l = r.counters.find(c); l != r.counters.end()) latency_[c] = l->second.value;
      const auto it = r.counters.find("items_per_second");
      if (it == r.counters.end() || it->second.value <= 0) continue;
      // items_per_second is computed from CPU time (no UseRealTime). Keyed by the registered
      // name and arguments, without "/process_time" and the like.
      const std::string& args = r.run_name.args;
      ns_[r.run_name.function_name + (args.empty() ? "" : "/" + args)] = 1e9 / it->second.value;
    }
  }

  void print_table() {
    print_cost_table();
    print_floor_table();
    print_instructions();
    print_targets();
  }

  double assembler_ns() const { return own.assembler > 0 ? own.assembler : get("BM_asmjit/assembler"); }
  double compiler_ns() const { return own.compiler > 0 ? own.compiler : get("BM_asmjit/compiler"); }

  // Callgrind's user-space instructions per function for the sets measured at 1 and 64
  // functions per publish (batched), beside their times.
  void print_instructions() {
    if (!own.callgrind || !valgrind_present() || compiler_ns() <= 0) return;
    own.assembler_instr = callgrind_baseline("assembler");
    own.compiler_instr = callgrind_baseline("compiler");
    if (own.compiler_instr <= 0) return;
    std::printf(
        "\nInstructions per function (callgrind, --profile SET N %ld described batched; asmjit "
        "Assembler %.0f, Compiler %.0f) beside the CPU times above, as %% of the Compiler\n\n"
        "| publishers | 1 fn/publish ns | %% | instr | %% | 64 fn/publish ns | %% | instr | %% | "
        "1 vs 64: time | instr |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        callgrind_functions, own.assembler_instr, own.compiler_instr);
    for (const publisher_config& c : configs) {
      const double t1 = sdk_ns("BM_publish", c.name, 1, "batched");
      const double t64 = sdk_ns("BM_publish", c.name, 64, "batched");
      if (t1 <= 0 || t64 <= 0) continue;
      const double i1 = callgrind_publish(c.name, 1), i64 = callgrind_publish(c.name, 64);
      instr_[std::string(c.name) + "/1"] = i1;
      instr_[std::string(c.name) + "/64"] = i64;
      std::printf("| %s | %.0f | %.1f | %.0f | %.2f | %.0f | %.1f | %.0f | %.2f | %.2f | %.2f |\n",
                  c.name, t1, 100 * t1 / compiler_ns(), i1, 100 * i1 / own.compiler_instr, t64,
                  100 * t64 / compiler_ns(), i64, 100 * i64 / own.compiler_instr, t1 / t64,
                  i64 > 0 ? i1 / i64 : 0);
    }
  }

  void print_cost_table() const {
    const double assembler = assembler_ns();
    const double compiler = compiler_ns();
    const double copy = get("BM_copy");
    if (assembler <= 0 || compiler <= 0) return;
    std::printf(
        "\nbaselines, each in a process of its own (--baseline; CPU time, median of 5): asmjit "
        "Assembler %.0f ns, Compiler %.0f ns per function (in this process, after what ran "
        "before: %.0f / %.0f ns)\n",
        own.assembler, own.compiler, get("BM_asmjit/assembler"), get("BM_asmjit/compiler"));
    std::printf(
        "\nper function, CPU time, medians: asmjit Assembler %.0f ns, asmjit Compiler %.0f ns;\n"
        "describing the rows with a recipe %.0f ns, into a reused desc %.0f ns (part of every "
        "row below); the runtime's copy of the code %.0f ns (subtracted below)\n"
        "floors here: a system call that does nothing %.0f ns, appending 64 bytes to a file with "
        "one write %.0f ns, 4096 bytes %.0f ns\n",
        assembler, compiler, get("BM_describe"), get("BM_describe/reuse"), copy,
        get("BM_floor/syscall"), get("BM_floor/write/64"), get("BM_floor/write/4096"));
    for (const char* family : {"BM_publish", "BM_publish_owned", "BM_publish_dual"}) {
      std::printf(
          "\n%s: what the SDK adds per function, and that as a share of assembling "
          "(Assembler) / compiling (Compiler) the function\n\n| publishers | durability |",
          family);
      for (int b : batches) std::printf(" %d fn/publish | %% Asm | %% Comp |", b);
      std::printf("\n|---|---|");
      for (size_t i = 0; i < std::size(batches); ++i) std::printf("---:|---:|---:|");
      std::printf("\n");
      for (const publisher_config& c : configs) {
        for (const mode_config& m : modes) {
          std::string line = "| " + std::string(c.name) + " | " + m.name + " |";
          bool any = false;
          for (int b : batches) {
            const double v = sdk_ns(family, c.name, b, m.name);
            char cell[96];
            if (v > 0) {
              any = true;
              std::snprintf(cell, sizeof cell, " %.0f ns | %.1f | %.2f |", v, 100 * v / assembler,
                            100 * v / compiler);
            } else {
              std::snprintf(cell, sizeof cell, " - | - | - |");
            }
            line += cell;
          }
          if (any) std::printf("%s\n", line.c_str());
        }
      }
    }
  }

  // Each file publisher's share (its row minus "none") against the floor of its files.
  void print_floor_table() const {
    std::printf(
        "\nFile publishers over their floor (one write of the same bytes per batch, prepared "
        "ahead; %.0f bytes per perf map line, %.0f per function in the jitdump): the "
        "publisher's share = its row minus \"none\", same mode and batch\n\n"
        "| publisher | durability | fn/publish | share ns | floor ns | ratio |\n"
        "|---|---|---:|---:|---:|---:|\n",
        perfmap_bytes_per_fn, jitdump_bytes_per_fn);
    for (const char* p : {"perfmap", "jitdump"}) {
      for (const mode_config& m : modes) {
        if (!m.thread) continue;
        for (int b : batches) {
          const auto [share, floor] = share_and_floor(p, b, m.name);
          if (floor <= 0) continue;
          std::printf("| %s | %s | %d | %.0f | %.0f | %.2f |\n", p, m.name, b, share, floor,
                      share / floor);
        }
      }
    }
  }

  // The targets, each next to what it is measured against in this run.
  void print_targets() const {
    const double compiler = compiler_ns();
    const auto pct = [&](double ns) { return 100 * ns / compiler; };
    const auto ipct = [&](const char* key) {
      const auto it = instr_.find(key);
      return it == instr_.end() || own.compiler_instr <= 0 ? -1.0
                                                           : 100 * it->second / own.compiler_instr;
    };
    const auto instr = [&](const char* key) {
      const auto it = instr_.find(key);
      return it == instr_.end() ? 0.0 : it->second;
    };
    const double def1 = sdk_ns("BM_publish", "default", 1, "batched");
    const double def64 = sdk_ns("BM_publish", "default", 64, "batched");
    const double pmr1 = sdk_ns("BM_publish", "perfmap+registry", 1, "batched");
    const double none1 = sdk_ns("BM_publish", "none", 1, "batched");
    if (compiler <= 0 || def1 <= 0) return;
    std::printf(
        "\nTargets (asmjit Compiler %.0f ns and %.0f instructions per function, measured in "
        "processes of their own)\n\n"
        "| target | time | instructions | met (time / instructions) |\n|---|---|---|---|\n",
        compiler, own.compiler_instr);
    const auto met = [](double v, double bound) { return v < 0 ? "-" : v <= bound ? "yes" : "no"; };
    std::printf("| default publishers, 1 fn/publish, batched <= 5 %% | %.0f ns = %.1f %% | %.0f = "
                "%.2f %% | %s / %s |\n",
                def1, pct(def1), instr("default/1"), ipct("default/1"), met(pct(def1), 5),
                met(ipct("default/1"), 5));
    std::printf("| perf map + SFrame + registry, 1 fn/publish, batched <= 2 %% | %.0f ns = %.1f %% "
                "| %.0f = %.2f %% | %s / %s |\n",
                pmr1, pct(pmr1), instr("perfmap+registry/1"), ipct("perfmap+registry/1"),
                met(pct(pmr1), 2), met(ipct("perfmap+registry/1"), 2));
    const double i1 = instr("default/1"), i64 = instr("default/64");
    std::printf("| default, 1 vs 64 fn/publish <= 1.5x | %.2fx (%.0f / %.0f ns) | %.2fx | %s / %s "
                "|\n",
                def1 / def64, def1, def64, i64 > 0 ? i1 / i64 : 0, met(def1 / def64, 1.5),
                i64 > 0 ? met(i1 / i64, 1.5) : "-");
    std::printf("| (the windows' own path: none, 1 fn/publish) | %.0f ns = %.1f %% | %.0f = %.2f "
                "%% | |\n",
                none1, pct(none1), instr("none/1"), ipct("none/1"));
    for (const char* p : {"perfmap", "jitdump"}) {
      double worst = 0;
      for (const mode_config& m : modes) {
        if (!m.thread) continue;
        for (int b : batches) {
          const auto [share, floor] = share_and_floor(p, b, m.name);
          if (floor > 0) worst = std::max(worst, share / floor);
        }
      }
      std::printf(
          "| %s: share <= 1.3x its write floor, every batch, both modes (issue 20) | worst "
          "%.2fx (the floor table) | | %s |\n",
          p, worst, worst <= 1.3 ? "yes" : "no");
    }
    if (latency_.count("median_ms") != 0 && latency_.count("idle_median_ms") != 0)
      std::printf(
          "| latency bound 10 ms when nothing else is published (flusher thread) | median %.1f "
          "ms, max %.1f ms of 30; after 150 ms idle (a new thread): %.1f / %.1f ms | | %s |\n",
          latency_.at("median_ms"), latency_.at("max_ms"), latency_.at("idle_median_ms"),
          latency_.at("idle_max_ms"),
          latency_.at("median_ms") <= 11 && latency_.at("idle_median_ms") <= 11 ? "yes (medians)"
                                                                                : "no");
  }

  // A file publisher's share (its row minus "none") and the floor of its writes.
  std::pair<double, double> share_and_floor(const char* publisher, int batch,
                                            const char* mode) const {
    return {
        sdk_ns("BM_publish", publisher, batch, mode) - sdk_ns("BM_publish", "none", batch, mode),
        get(std::string("BM_floor/file/") + publisher + "/" + std::to_string(batch) + "/" + mode)};
  }

  double sdk_ns(const char* family, const char* config, int batch, const char* mode) const {
    const double v =
        get(std::string(family) + "/" + config + "/" + std::to_string(batch) + "/" + mode);
    return v > 0 ? v - get("BM_copy") : 0;
  }

 private:
  static std::string pad(std::string s, size_t n) {
    if (s.size() < n) s.append(n - s.size(), ' ');
    return s;
  }
  double get(const std::string& name) const {
    const auto it = ns_.find(name);
    return it == ns_.end() ? 0 : it->second;
  }
  std::map<std::string, double> ns_;
  std::map<std::string, double> latency_;  // BM_latency's counters
  std::map<std::string, double> instr_;    // "SET/BATCH": callgrind instructions per function
};

void register_all() {
  // Process CPU time everywhere (single-threaded baselines: the same as the thread's).
  benchmark::RegisterBenchmark("BM_asmjit/assembler", [](benchmark::State& s) {
    BM_asmjit<assemble_only>(s);
  })->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_asmjit/compiler", [](benchmark::State& s) {
    BM_asmjit<compile_at>(s);
  })->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_copy", BM_copy)->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_floor/syscall", BM_floor_syscall)->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_floor/write", BM_floor_write)
      ->Arg(64)
      ->Arg(4096)
      ->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_describe", BM_describe)->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark("BM_describe/reuse", BM_describe_reuse)->MeasureProcessCPUTime();
  // Process CPU time: the flusher thread's writes are part of the cost.
  for (const publisher_config& c : configs)
    for (int b : batches)
      for (const mode_config& m : modes) {
        // Without file publishers the mode changes nothing (sync and batched rows show the
        // noise); the thread only matters for the sets the targets name.
        if (!m.thread && c.set != default_publishers &&
            c.set != (publisher::perfmap | publisher::registry))
          continue;
        benchmark::RegisterBenchmark(
            ("BM_publish/" + std::string(c.name) + "/" + std::to_string(b) + "/" + m.name).c_str(),
            [set = c.set, b, &m](benchmark::State& s) {
              BM_publish(s, set, b, memory_kind::described, m);
            })
            ->MeasureProcessCPUTime();
      }
  for (const publisher_config& c : configs) {
    if (c.set != 0 && c.set != default_publishers) continue;
    for (const auto& [family, kind] : {std::pair{"BM_publish_owned", memory_kind::owned},
                                       std::pair{"BM_publish_dual", memory_kind::owned_dual}})
      for (int b : batches)
        for (const mode_config& m : modes) {
          if (!m.thread || (c.set == 0 && m.mode != durability::sync)) continue;
          benchmark::RegisterBenchmark(
              (std::string(family) + "/" + c.name + "/" + std::to_string(b) + "/" + m.name).c_str(),
              [set = c.set, b, kind = kind, &m](benchmark::State& s) {
                BM_publish(s, set, b, kind, m);
              })
              ->MeasureProcessCPUTime();
        }
  }
  // After the publish benchmarks, which measure the bytes per function the floors write.
  for (const bool jitdump : {false, true})
    for (int b : batches)
      for (const mode_config& m : modes) {
        if (!m.thread) continue;
        benchmark::RegisterBenchmark(
            (std::string("BM_floor/file/") + (jitdump ? "jitdump" : "perfmap") + "/" +
             std::to_string(b) + "/" + m.name)
                .c_str(),
            [jitdump, b, &m](benchmark::State& s) { BM_floor_file(s, jitdump, b, m); })
            ->MeasureProcessCPUTime();
      }
  for (const bool idle : {false, true})
    benchmark::RegisterBenchmark(idle ? "BM_latency/batched/after-idle" : "BM_latency/batched",
                                 [idle](benchmark::State& s) { BM_latency(s, idle); })
        ->UseManualTime()
        ->Iterations(30)
        ->Repetitions(1)
        ->Unit(benchmark::kMillisecond);
}

// --profile PUBLISHERS BATCH N [described|owned|dual] [sync|batched]: publishes N functions and
// nothing else (file publishers batched unless told), for profilers:
//   valgrind --tool=callgrind --toggle-collect='*run_profile*' \
//       build/bench/bench_publish_cost --profile default 64 20000
// (instructions per function = Ir / N; the session's setup and the files' removal are outside).
// --profile asmjit-assembler|asmjit-compiler 0 N: the baselines (toggle '*run_asmjit_profile*').
__attribute__((noinline)) void run_profile(publish_loop& loop, long n) {
  for (long i = 0; i < n; ++i) loop.add();
  loop.finish_window();
}

__attribute__((noinline)) void run_asmjit_profile(bool compiler, long n) {
  const code_region& r = region();
  for (long i = 0; i < n; ++i) {
    uint8_t* at = r.base + static_cast<size_t>(i) % (r.bytes / slot_bytes) * slot_bytes;
    const auto base = reinterpret_cast<uint64_t>(at);
    if (compiler)
      compile_at(base, at, slot_bytes);
    else
      assemble_at(base, at, slot_bytes);
  }
}

int profile(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: %s --profile PUBLISHERS BATCH N [described|owned|dual] [sync|batched]\n",
                 argv[0]);
    return 2;
  }
  if (std::strncmp(argv[2], "asmjit-", 7) == 0) {
    const bool compiler = std::strcmp(argv[2], "asmjit-compiler") == 0;
    const long n = std::atol(argv[4]);
    region();
    run_asmjit_profile(compiler, n);
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir(), ec);
    return 0;
  }
  const publisher_config* c = nullptr;
  for (const publisher_config& k : configs)
    if (std::strcmp(k.name, argv[2]) == 0) c = &k;
  if (c == nullptr) {
    std::fprintf(stderr, "unknown publisher set '%s'\n", argv[2]);
    return 2;
  }
  region();
  names();
  session_options o;
  o.publishers = c->set;
  o.perfmap_dir = scratch_dir();
  o.jitdump_dir = scratch_dir();
  if (argc > 6) {
    auto mode = parse_durability(argv[6]);
    if (!mode) {
      std::fprintf(stderr, "%s\n", mode.error().message().c_str());
      return 2;
    }
    o.perfmap_durability = o.jitdump_durability = *mode;
  }
  auto s = session::create(o);
  if (!s) return 1;
  {
    const std::string kind = argc > 5 ? argv[5] : "";
    publish_loop loop(std::move(*s), std::atoi(argv[3]),
                      kind == "owned"  ? memory_kind::owned
                      : kind == "dual" ? memory_kind::owned_dual
                                       : memory_kind::described);
    run_profile(loop, std::atol(argv[4]));
  }
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) return profile(argc, argv);
  if (argc > 2 && std::strcmp(argv[1], "--baseline") == 0) return baseline_main(argv[2]);
  // Defaults: 5 repetitions of at least 0.2 s each, medians only (overridable).
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-callgrind") == 0)
      own.callgrind = false;
    else
      args.push_back(argv[i]);
  }
  bool has_reps = false, has_time = false;
  for (int i = 1; i < argc; ++i) {
    has_reps |= std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0;
    has_time |= std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  }
  std::string reps = "--benchmark_repetitions=5", time = "--benchmark_min_time=0.2",
              only = "--benchmark_report_aggregates_only=true";
  if (!has_reps) {
    args.push_back(reps.data());
    args.push_back(only.data());
  }
  if (!has_time) args.push_back(time.data());
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  register_all();
  // --benchmark_format=json|csv (bench/run.sh): Google Benchmark's own output only.
  bool console = true;
  for (int i = 1; i < argc; ++i)
    console &= std::strncmp(argv[i], "--benchmark_format=", 19) != 0 ||
               std::strcmp(argv[i], "--benchmark_format=console") == 0;
  if (console) {
    own.assembler = baseline_in_own_process("assembler");
    own.compiler = baseline_in_own_process("compiler");
    ratio_reporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.print_table();
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(scratch_dir(), ec);
  return 0;
}
