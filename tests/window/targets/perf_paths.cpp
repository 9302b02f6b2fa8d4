// What perf sees of JIT code on each integration path (docs/integrating.md, "What perf sees"):
// code packed as the runtime or the SDK places it, and code at an address where other code
// was, through the one-call on-ramp (C API), a described window over the runtime's memory, an
// owned window (the SDK places the code) and, when built with asmjit, the asmjit glue.
//
//   main -> drive -> jit_f0 -> jit_f1 -> jit_f2 -> jit_f3 -> spin_a (packed, spaced)
//   main -> drive -> jit_g_a -> spin_a, then at the same address (where the path allows it)
//   main -> drive -> jit_g_b -> spin_b (reused)
//
// The JIT functions have no frame pointer (sub rsp, 8; a spin loop; call; add rsp, 8; ret)
// unless --fp. The program prints every function it names, "fn NAME 0xSTART SIZE from T", and
// every one it takes away, "gone 0xSTART at T", and "phase F0 F1 ... from T" when a chain of
// functions starts running (T: CLOCK_MONOTONIC seconds, as perf record -k 1 stamps samples), so
// a profile can be checked sample by sample (tests/support/perf_view.hpp).
//
// usage: perf_paths --path onecall|described|owned|asmjit --shape packed|spaced|reused
//                   [--ms N] [--fp]
//   packed   the runtime places functions back to back (16-byte aligned); owned/asmjit: the
//            SDK places them (window::allocate leaves what perf needs)
//   spaced   the runtime leaves jitunwind_perf_code_gap() bytes after each function
//   reused   jit_g_a runs, is taken away (forget_code, window retire), and jit_g_b goes to the same
//            address when the path lets the runtime choose (onecall, described); owned windows
//            put it where the session allows (address reuse off with the perf map or jitdump on)
//   --ms N   milliseconds of this thread's CPU time per phase (default 300)
#include <jitunwind/c/embed.h>
#include <jitunwind/frame.h>
#include <jitunwind/window.h>
#ifdef HAVE_ASMJIT
#include <asmjit/x86.h>
#include <jitunwind/asmjit.h>
#endif

#include "support/jit_program.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

using test::die;
using test::must;

uint64_t g_spin_iterations = 5000;

}  // namespace

// The counter lives on the stack, so that gcc gives these leaves a frame pointer (it omits it in
// a leaf that uses no stack, whatever the flags): perf -g then finds their JIT caller.
extern "C" __attribute__((noinline)) void spin_a() {
  for (volatile uint64_t i = 0; i < g_spin_iterations; i = i + 1) {
  }
}
extern "C" __attribute__((noinline)) void spin_b() {
  for (volatile uint64_t i = 0; i < g_spin_iterations; i = i + 1) {
  }
}

namespace {

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// One JIT function: [push rbp; mov rbp, rsp | sub rsp, 8]; mov ecx, N; l: dec ecx; jnz l;
// mov rax, callee; call rax; [pop rbp | add rsp, 8]; ret. Its rows in C++ and C form.
struct function_code {
  std::vector<uint8_t> bytes;
  function_desc rows;  // start 0
};

function_code emit(uint64_t callee, bool fp) {
  test::code_buf c;
  frame_builder b(abi::amd64);
  if (fp) {
    c.put({0x55});
    c.put({0x48, 0x89, 0xE5});
  } else {
    c.put({0x48, 0x83, 0xEC, 0x08});
  }
  const uint32_t after_prologue = c.at();
  c.put({0xB9});
  c.u32(4000);
  c.put({0xFF, 0xC9, 0x75, 0xFC});
  c.put({0x48, 0xB8});
  c.u64(callee);
  c.put({0xFF, 0xD0});
  if (fp) {
    c.put({0x5D});
    b.push_frame_pointer(1, after_prologue).pop_frame_pointer(c.at());
  } else {
    c.put({0x48, 0x83, 0xC4, 0x08});
    b.stack_alloc(after_prologue, 8).stack_free(c.at(), 8);
  }
  c.put({0xC3});
  function_code f;
  f.rows = must(b.finish(0, c.at()), "rows");
  f.bytes = std::move(c.b);
  return f;
}

std::vector<jitunwind_frame_row> c_rows(const function_desc& d) {
  std::vector<jitunwind_frame_row> out;
  for (const frame_row& r : d.rows) {
    jitunwind_frame_row c{};
    c.pc_offset = r.pc_offset;
    c.cfa_base = r.cfa == cfa_base::fp ? JITUNWIND_CFA_FP : JITUNWIND_CFA_SP;
    c.cfa_offset = r.cfa_offset;
    c.ra_rule = r.ra == ra_rule::saved ? JITUNWIND_RA_SAVED : JITUNWIND_RA_UNDEFINED;
    c.ra_offset = r.ra_offset;
    c.fp_rule = r.fp == fp_rule::saved ? JITUNWIND_FP_SAVED : JITUNWIND_FP_UNCHANGED;
    c.fp_offset = r.fp_offset;
    out.push_back(c);
  }
  return out;
}

size_t gap_after(const function_code& f) {
  const std::vector<jitunwind_frame_row> rows = c_rows(f.rows);
  size_t gap = 0;
  jitunwind_error e{};
  jitunwind_function c{};
  c.size = static_cast<uint32_t>(f.bytes.size());
  c.rows = rows.data();
  c.row_count = rows.size();
  if (jitunwind_perf_code_gap(JITUNWIND_ABI_AMD64, &c, &gap, &e) != JITUNWIND_OK)
    die(std::string("jitunwind_perf_code_gap: ") + e.message);
  return gap;
}

void announce(const std::string& name, uint64_t start, size_t size) {
  std::printf("fn %s 0x%llx %zu from %.9f\n", name.c_str(), static_cast<unsigned long long>(start),
              size, now());
  std::fflush(stdout);
}

void announce_phase(const std::vector<std::string>& chain) {
  std::string line = "phase";
  for (const std::string& n : chain) line += " " + n;
  std::printf("%s from %.9f\n", line.c_str(), now());
  std::fflush(stdout);
}

void announce_gone(uint64_t start) {
  std::printf("gone 0x%llx at %.9f\n", static_cast<unsigned long long>(start), now());
  std::fflush(stdout);
}

// The runtime's own memory (onecall, described): RW while written, then RX.
struct runtime_memory {
  uint8_t* base = nullptr;
  size_t size = 1 << 16;
  runtime_memory() {
    // Mapped executable from the start: perf record learns of executable mappings when they
    // are made (an mprotect to RX later announces nothing), and reads the perf map only for
    // code in an anonymous mapping it knows.
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) die("mmap");
    base = static_cast<uint8_t*>(m);
    writable();
    std::memset(base, 0xCC, size);
  }
  void writable() {
    if (::mprotect(base, size, PROT_READ | PROT_WRITE) != 0) die("mprotect RW");
  }
  void executable() {
    if (::mprotect(base, size, PROT_READ | PROT_EXEC) != 0) die("mprotect RX");
  }
};

using entry_fn = void (*)();

__attribute__((noinline)) void drive(entry_fn f, double ms) {
  const double until = thread_cpu_ms() + ms;
  while (thread_cpu_ms() < until) f();
  asm volatile("" ::: "memory");  // keeps drive a frame of its own
}

struct options {
  std::string path = "onecall", shape = "packed";
  double ms = 300;
  bool fp = false;
};

// The functions of one phase as the runtime lays them out: f0 calls f1, ..., the last calls
// `leaf`. Returns their start offsets in `code` (placement chosen by `spaced`).
struct layout {
  std::vector<function_code> fns;
  std::vector<size_t> offsets;
  size_t end = 0;
};

layout lay_out(uint64_t base, size_t count, uint64_t leaf, bool spaced, bool fp) {
  // Two passes: sizes do not depend on addresses (mov rax, imm64), so lay out, then emit
  // with the real callees.
  layout l;
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    function_code f = emit(0, fp);
    l.offsets.push_back(at);
    at += f.bytes.size();
    if (spaced) at += gap_after(f);
    at = (at + 15) & ~size_t{15};
  }
  l.end = at;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t callee = i + 1 < count ? base + l.offsets[i + 1] : leaf;
    l.fns.push_back(emit(callee, fp));
  }
  return l;
}

std::vector<std::string> names_of(const std::string& shape, size_t count, char phase) {
  std::vector<std::string> n;
  for (size_t i = 0; i < count; ++i)
    n.push_back(shape == "reused" ? std::string("jit_g_") + phase : "jit_f" + std::to_string(i));
  return n;
}

// onecall: jitunwind_name_code per function, jitunwind_forget_code to take it away.
void run_onecall(const options& o) {
  runtime_memory mem;
  const bool reused = o.shape == "reused";
  for (char phase : reused ? std::string("ab") : std::string("a")) {
    const uint64_t leaf = reinterpret_cast<uint64_t>(phase == 'a' ? spin_a : spin_b);
    const size_t count = reused ? 1 : 4;
    layout l = lay_out(reinterpret_cast<uint64_t>(mem.base), count, leaf, o.shape == "spaced",
                       o.fp);
    const auto names = names_of(o.shape, count, phase);
    mem.writable();
    for (size_t i = 0; i < count; ++i)
      std::memcpy(mem.base + l.offsets[i], l.fns[i].bytes.data(), l.fns[i].bytes.size());
    mem.executable();
    for (size_t i = 0; i < count; ++i) {
      const std::vector<jitunwind_frame_row> rows = c_rows(l.fns[i].rows);
      jitunwind_error e{};
      if (jitunwind_name_code(mem.base + l.offsets[i], l.fns[i].bytes.size(), names[i].c_str(),
                              rows.data(), rows.size(), &e) != JITUNWIND_OK)
        die(std::string("jitunwind_name_code: ") + e.message);
      announce(names[i], reinterpret_cast<uint64_t>(mem.base + l.offsets[i]), l.fns[i].bytes.size());
    }
    announce_phase(names);
    drive(reinterpret_cast<entry_fn>(mem.base), o.ms);
    for (size_t i = 0; i < count; ++i) {
      jitunwind_error e{};
      if (jitunwind_forget_code(mem.base + l.offsets[i], &e) != JITUNWIND_OK)
        die(std::string("jitunwind_forget_code: ") + e.message);
      announce_gone(reinterpret_cast<uint64_t>(mem.base + l.offsets[i]));
    }
  }
}

// described / owned / asmjit: a session from the environment and a window per phase.
void run_window(const options& o) {
  auto s = must(session::create(must(session_options::from_env(), "options")), "session");
  const bool reused = o.shape == "reused";
  runtime_memory mem;
  for (char phase : reused ? std::string("ab") : std::string("a")) {
    const uint64_t leaf = reinterpret_cast<uint64_t>(phase == 'a' ? spin_a : spin_b);
    const size_t count = reused ? 1 : 4;
    const auto names = names_of(o.shape, count, phase);
    window* w = nullptr;
    uint64_t entry = 0;
    if (o.path == "described") {
      const uint64_t base = reinterpret_cast<uint64_t>(mem.base);
      layout l = lay_out(base, count, leaf, o.shape == "spaced", o.fp);
      mem.writable();
      for (size_t i = 0; i < count; ++i)
        std::memcpy(mem.base + l.offsets[i], l.fns[i].bytes.data(), l.fns[i].bytes.size());
      mem.executable();
      w = must(s->describe_window({.text_start = base, .text_size = l.end}), "describe_window");
      for (size_t i = 0; i < count; ++i) {
        function_desc d = l.fns[i].rows;
        d.start = base + l.offsets[i];
        must(w->append(names[i], d), "append");
      }
      entry = base;
    } else {
      w = must(s->create_owned_window({.code_capacity = 1 << 16}), "owned window");
      // The SDK places the functions; the callees are known only once the next one is placed,
      // so the last is placed first.
      std::vector<uint64_t> starts(count);
      std::vector<window::code_space> spaces(count);
      std::vector<function_code> fns(count);
      for (size_t i = 0; i < count; ++i) {
        fns[i] = emit(0, o.fp);
        spaces[i] = must(w->allocate(fns[i].bytes.size()), "allocate");
        starts[i] = spaces[i].address;
      }
      for (size_t i = 0; i < count; ++i) {
        const uint64_t callee = i + 1 < count ? starts[i + 1] : leaf;
        fns[i] = emit(callee, o.fp);
        std::memcpy(spaces[i].writable.data(), fns[i].bytes.data(), fns[i].bytes.size());
        function_desc d = fns[i].rows;
        d.start = starts[i];
        must(w->append(names[i], d), "append");
      }
      entry = starts[0];
    }
    must(w->publish(), "publish");
    for (size_t i = 0; i < w->functions().size(); ++i)
      announce(w->functions()[i].name, w->functions()[i].start, w->functions()[i].size);
    announce_phase(names);
    drive(reinterpret_cast<entry_fn>(entry), o.ms);
    must(w->retire(std::chrono::milliseconds(0)), "retire");
    for (const auto& f : w->functions()) announce_gone(f.start);
    s->poll();
    must(s->release(w), "release");
  }
}

#ifdef HAVE_ASMJIT
// asmjit: each function assembled with a FuncFrame (no frame pointer unless --fp, one saved
// register), its prologue/epilogue and rows from the glue, placed with asmjit_glue::place.
// Placed last to first, so that each knows its callee's address.
void run_asmjit(const options& o) {
  namespace glue = jitunwind::asmjit_glue;
  auto s = must(session::create(must(session_options::from_env(), "options")), "session");
  const bool reused = o.shape == "reused";
  for (char phase : reused ? std::string("ab") : std::string("a")) {
    const uint64_t leaf = reinterpret_cast<uint64_t>(phase == 'a' ? spin_a : spin_b);
    const size_t count = reused ? 1 : 4;
    const auto names = names_of(o.shape, count, phase);
    window* w = must(s->create_owned_window({.code_capacity = 1 << 16}), "owned window");
    std::vector<uint64_t> starts(count);
    uint64_t callee = leaf;
    // Assembled first, placed in address order, then each function's callee (the next one, or
    // the native leaf) patched into its `mov rax, imm64`.
    std::vector<std::unique_ptr<asmjit::CodeHolder>> codes;
    std::vector<frame_builder> rows;
    for (size_t i = 0; i < count; ++i) {
      asmjit::FuncDetail func;
      func.init(asmjit::FuncSignatureT<void>(asmjit::CallConvId::kHost), asmjit::Environment::host());
      asmjit::FuncFrame frame;
      frame.init(func);
      if (o.fp) frame.setPreservedFP();
      frame.addDirtyRegs(asmjit::x86::rbx);
      frame.setLocalStackSize(8);
      frame.finalize();
      auto code = std::make_unique<asmjit::CodeHolder>();
      code->init(asmjit::Environment::host());
      asmjit::x86::Assembler a(code.get());
      frame_builder b(abi::amd64);
      must(glue::emit_prolog(a, frame, b), "emit_prolog");
      a.mov(asmjit::x86::ecx, 4000);
      asmjit::Label loop = a.newLabel();
      a.bind(loop);
      a.dec(asmjit::x86::ecx);
      a.jnz(loop);
      a.mov(asmjit::x86::rax, asmjit::Imm(int64_t{0x1122334455667788}));  // patched below
      a.call(asmjit::x86::rax);
      must(glue::emit_epilog(a, frame, b), "emit_epilog");
      codes.push_back(std::move(code));
      rows.push_back(std::move(b));
    }
    for (size_t i = 0; i < count; ++i) {
      function_desc f = must(glue::place(*w, names[i], *codes[i], rows[i]), "place");
      starts[i] = f.start;
    }
    // Callees: the imm64 of each function's mov rax.
    for (size_t i = 0; i < count; ++i) {
      callee = i + 1 < count ? starts[i + 1] : leaf;
      const std::vector<uint8_t> marker = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
      const auto fns = w->functions();
      auto* p = reinterpret_cast<const uint8_t*>(starts[i]);
      const uint8_t* at = std::search(p, p + fns[i].size, marker.begin(), marker.end());
      if (at == p + fns[i].size) die("asmjit: no callee immediate");
      uint8_t bytes[8];
      std::memcpy(bytes, &callee, 8);
      must(w->patch(reinterpret_cast<uint64_t>(at), std::span<const uint8_t>(bytes, 8)), "patch");
    }
    must(w->publish(), "publish");
    for (const auto& f : w->functions()) announce(f.name, f.start, f.size);
    announce_phase(names);
    drive(reinterpret_cast<entry_fn>(starts[0]), o.ms);
    must(w->retire(std::chrono::milliseconds(0)), "retire");
    for (const auto& f : w->functions()) announce_gone(f.start);
    s->poll();
    must(s->release(w), "release");
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--path") {
      o.path = value();
    } else if (a == "--shape") {
      o.shape = value();
    } else if (a == "--ms") {
      o.ms = std::stod(value());
    } else if (a == "--fp") {
      o.fp = true;
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: perf_paths --path onecall|described|owned|asmjit "
                  "--shape packed|spaced|reused [--ms N] [--fp]\n");
      return 0;
    } else {
      die("unknown argument " + a);
    }
  }
  std::printf("pid %d\n", static_cast<int>(::getpid()));
  if (o.path == "onecall")
    run_onecall(o);
  else if (o.path == "described" || o.path == "owned")
    run_window(o);
#ifdef HAVE_ASMJIT
  else if (o.path == "asmjit")
    run_asmjit(o);
#endif
  else
    die("unknown or unavailable path " + o.path);
  return 0;
}
