// A small JIT for jitwalk's tests: emits x86-64 functions into anonymous executable windows,
// describes them with the SDK's frame model and SFrame encoder, publishes them through a
// registry it builds by hand (docs/registry-abi.md) and the SDK's jitunwind:* USDT events, and
// exposes ground truth at a `jwtest:checkpoint` probe (docs/ground-truth.md).
//
// JIT code (no frame pointers unless --fp; RBP is used as a scratch register and restored):
//   g(depth)  window "entry":  push rbp; mov rbp, rdi; mov rax, f; call rax; pop rbp; ret
//   f(n)      window "rec":    push rbp; mov rbp, rdi; sub rsp, 16; [pad nops]
//                              n ? f(n - 1) : (spin; call helper); add rsp, 16; pop rbp; ret
// Ground truth at the checkpoint (innermost first): RA of f's helper call, then n times the RA
// of f's recursive call, then the RA of g's call.
//
// usage: jit_target MODE [options]
//   deep                   repeat g(depth) with a checkpoint at the bottom
//   recycle                like deep, and every --recycle-every calls the "rec" window is retired,
//                          freed and rewritten in place with another layout (new generation)
//   hostile                also publishes windows with corrupt SFrame (bad counts, a row past
//                          the function end, an FDE outside the window, an unreadable section)
//                          and runs a function whose frame records point to themselves
//   exec PROGRAM [ARG...]  initializes its registry, publishes nothing and execs PROGRAM (a
//                          tracer must then look for the new image's registries)
//   exec-later MS PROGRAM [ARG...]  the same, MS milliseconds after initializing the registry
// options: --depth N (100) --iterations N (200) --spin N (20000) --recycle-every N (10)
//          --fp (keep frame pointers) --no-checkpoint --seconds S (run for S seconds of this
//          thread's CPU time instead: a fixed-rate profile gets as many samples on a loaded
//          machine)
//          --lie (every 10th checkpoint claims one JIT frame too many: verify must fail)
//          --forget-epilogue (without --fp: rows miss the epilogues' `add rsp, 16`)
//          --zero-locals (each frame's local slots hold 0)
//          --new-ids (recycle: the reused memory gets a new window id each time)
//          --jit-thread (all of it on a second thread, which starts once the main thread has
//          left by pthread_exit)
//          --jit-worker (all of it on a second thread, which the main thread joins)
//          --raise-sigtrap (raises and handles SIGTRAP before publishing and after the first
//          call; exit status 4 unless both arrived)
//          --pthread-exit (after all of it, the main thread leaves by pthread_exit and a second
//          thread ends the process once it is gone)
//          --drap (f realigns its stack the way GCC's DRAP prologues do: its body's rows are
//          SFrame v3 flexible ones, CFA = *(rbp - 8) and the caller's rbp at *(rbp + 0); the
//          prologue and epilogue rows name r10, which the BPF walker cannot follow)
//          --drap-register-call (with --drap: f's base case loads r10 = CFA before it calls the
//          helper, and the call's row says CFA = r10 + 0: the walk must end there, counted as a
//          rule it cannot follow, after the one JIT frame it can name)
//          hostile shapes of what a profiled process controls (targets/hostile.hpp, tests in
//          tests/hostile): --comm NAME, --perf-map-kind fifo|zero-link|sparse, --map-elf
//          KIND:PATH (shared-names, symbol-tables, truncate), --bad-slots, --many-windows N
//          --window-sframe-size BYTES, --churn (rewrites its perf map, replaces and truncates
//          its mapped objects, churns its registry, with bad slots coming and going)
#include <jitunwind/frame.h>
#include <jitunwind/registry_abi.h>
#include <jitunwind/sframe.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hostile.hpp"
#include "support/jit_program.hpp"
#include "usdt_events/events.hpp"

using namespace jitunwind;
namespace ev = jitunwind::detail::usdt_events;

// ---------------------------------------------------------------------------------------------
// The registry, built by hand from the documented ABI (the SDK's writer is not used on purpose:
// this process also publishes things the writer would never produce).

extern "C" {
__attribute__((visibility("default"), used)) jitunwind_registry_header jitunwind_registry;
}

namespace {

uint32_t kSlots = 64;  // more with --many-windows
jitunwind_registry_entry* g_entries = nullptr;
uint64_t g_next_generation = 1;

void registry_init() {
  void* p = mmap(nullptr, size_t{kSlots} * sizeof(jitunwind_registry_entry), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  g_entries = static_cast<jitunwind_registry_entry*>(p);
  jitunwind_registry_header& h = jitunwind_registry;
  std::memcpy(h.magic, JITUNWIND_REGISTRY_MAGIC, 8);
  h.version = JITUNWIND_REGISTRY_VERSION;
  h.header_size = sizeof(jitunwind_registry_header);
  h.entry_size = sizeof(jitunwind_registry_entry);
  h.capacity = kSlots;
  h.writer_pid = static_cast<uint64_t>(getpid());
  __atomic_store_n(&h.entries, reinterpret_cast<uint64_t>(g_entries), __ATOMIC_RELEASE);
}

// Writes a slot with the seqlock protocol; returns the generation.
uint64_t registry_write(uint32_t slot, uint64_t id, uint32_t state, uint64_t text,
                        uint64_t text_size, uint64_t sframe, uint64_t sframe_size,
                        uint64_t generation = 0) {
  jitunwind_registry_entry& e = g_entries[slot];
  uint64_t seq = __atomic_load_n(&e.seq, __ATOMIC_RELAXED);
  __atomic_store_n(&e.seq, seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  if (generation == 0 && state == JITUNWIND_WINDOW_LIVE) generation = g_next_generation++;
  e.window_id = id;
  e.generation = generation;
  e.text_start = text;
  e.text_size = text_size;
  e.sframe_addr = sframe;
  e.sframe_size = sframe_size;
  e.state = state;
  e.abi = 3;
  __atomic_store_n(&e.seq, seq + 2, __ATOMIC_RELEASE);
  uint64_t high = __atomic_load_n(&jitunwind_registry.slot_count, __ATOMIC_RELAXED);
  if (slot + 1 > high) __atomic_store_n(&jitunwind_registry.slot_count, slot + 1, __ATOMIC_RELEASE);
  __atomic_fetch_add(&jitunwind_registry.change_count, 1, __ATOMIC_RELEASE);
  return generation;
}

// ---------------------------------------------------------------------------------------------
// Windows: 64 KiB mappings, code in the first half, SFrame in the second (within +-2 GiB).

constexpr size_t kWindowSize = 64 * 1024, kCodeSize = 32 * 1024;

struct window {
  uint64_t id;
  uint32_t slot;
  uint8_t* base;
  uint64_t generation = 0;
};

window make_window(uint64_t id, uint32_t slot) {
  void* p = mmap(nullptr, kWindowSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();
  return {id, slot, static_cast<uint8_t*>(p)};
}

struct emitted_function {
  std::string name;
  function_desc frames;
};

FILE* g_perfmap = nullptr;

// Copies code, publishes rows (possibly corrupted by `patch`) and names.
void publish(window& w, const std::vector<uint8_t>& code, const std::vector<emitted_function>& fns,
             void (*patch)(std::vector<uint8_t>&, const window&) = nullptr,
             uint64_t sframe_size_override = 0) {
  mprotect(w.base, kCodeSize, PROT_READ | PROT_WRITE);
  std::memcpy(w.base, code.data(), code.size());
  mprotect(w.base, kCodeSize, PROT_READ | PROT_EXEC);
  const uint64_t sframe_addr = reinterpret_cast<uint64_t>(w.base) + kCodeSize;
  sframe::encoder_options eo;
  eo.section_address = sframe_addr;
  std::vector<function_desc> descs;
  for (const auto& f : fns) descs.push_back(f.frames);
  auto bytes = sframe::encode(eo, descs);
  if (!bytes) {
    std::fprintf(stderr, "jit_target: encode: %s\n", bytes.error().message().c_str());
    std::exit(3);
  }
  if (patch != nullptr) patch(bytes.value(), w);
  std::memcpy(w.base + kCodeSize, bytes->data(), bytes->size());
  const uint64_t text = reinterpret_cast<uint64_t>(w.base);
  const uint64_t sframe_size = sframe_size_override ? sframe_size_override : bytes->size();
  w.generation = registry_write(w.slot, w.id, JITUNWIND_WINDOW_LIVE, text, code.size(), sframe_addr,
                                sframe_size);
  for (const auto& f : fns) {
    ev::code_add(f.frames.start, f.frames.size, f.name.c_str(), w.id, w.generation);
    if (g_perfmap != nullptr) {
      std::fprintf(g_perfmap, "%llx %x %s\n", static_cast<unsigned long long>(f.frames.start),
                   f.frames.size, f.name.c_str());
      std::fflush(g_perfmap);
    }
  }
  ev::window_publish(w.id, w.generation, text, code.size(), sframe_addr, sframe_size);
}

// The SDK's order: retire (code may still be on stacks), grace period, free (slot released),
// then the memory may be reused.
void retire_and_free(window& w) {
  const jitunwind_registry_entry& e = g_entries[w.slot];
  registry_write(w.slot, w.id, JITUNWIND_WINDOW_RETIRED, e.text_start, e.text_size, e.sframe_addr,
                 e.sframe_size, w.generation);
  ev::window_retire(w.id, w.generation);
  ev::window_free(w.id, w.generation);
  registry_write(w.slot, 0, JITUNWIND_WINDOW_FREE, 0, 0, 0, 0, 0);
}

// ---------------------------------------------------------------------------------------------
// Code generation.

using jitunwind::test::code_buf;

bool g_fp = false;
uint32_t g_spin = 20000;

struct layout {
  uint64_t f = 0, g = 0;
  uint64_t ra_f_rec = 0, ra_f_base = 0, ra_g = 0;
};
layout g_layout;

extern "C" void jw_helper();

// push rbp; mov rbp, (rsp | rdi)
void prologue(code_buf& c) {
  c.put({0x55});
  if (g_fp) {
    c.put({0x48, 0x89, 0xE5});
  } else {
    c.put({0x48, 0x89, 0xFD});  // RBP as a scratch register: no frame-pointer chain
  }
}

// --forget-epilogue: the rows miss the epilogue's `add rsp` (a classic description bug: for the
// one instruction before `pop rbp` the CFA is 16 bytes off). Call-site checks cannot see it;
// `jitunwind unwind check` must.
bool g_forget_epilogue = false;
// --zero-locals: each frame's two local slots hold 0 (with --forget-epilogue, the slot the wrong
// row reads the return address from is then known: what a checker reports must not depend on it).
bool g_zero_locals = false;
// --drap: f is a stack-realigning function (see gen_rec_drap).
bool g_drap = false;
// --drap-register-call: see gen_rec_drap.
bool g_drap_register_call = false;
// --raise-sigtrap: the program's own SIGTRAPs (a tracer must pass them on, not take them).
bool g_raise_sigtrap = false;
std::atomic<int> g_sigtraps{0};

function_desc fn_rows(uint64_t start, uint32_t size, uint32_t after_alloc, int32_t extra,
                      const std::vector<std::pair<uint32_t, uint32_t>>& epilogues) {
  // push rbp (1) [+ mov rbp (4)] + sub rsp, extra (after_alloc); epilogues: {after add, after pop}
  frame_builder b(abi::amd64);
  b.stack_alloc(1, 8).offset(1, reg::fp, -16);
  if (g_fp) b.def_cfa(4, reg::fp, 16);
  if (extra) b.stack_alloc(after_alloc, extra);
  for (size_t i = 0; i < epilogues.size(); ++i) {
    const bool last = i + 1 == epilogues.size();
    if (!last) b.remember_state();
    if (!g_fp && extra && !g_forget_epilogue) b.stack_free(epilogues[i].first, extra);
    b.restore(epilogues[i].second, reg::fp);  // after pop rbp
    if (g_fp) {
      b.def_cfa(epilogues[i].second, reg::sp, 8);
    } else {
      b.stack_free(epilogues[i].second, 8);
    }
    if (!last) b.restore_state(epilogues[i].second + 1);  // after ret: the body's rules again
  }
  auto f = b.finish(start, size);
  if (!f) {
    std::fprintf(stderr, "jit_target: rows: %s\n", f.error().message().c_str());
    std::exit(3);
  }
  return f.value();
}

std::vector<emitted_function> gen_rec_drap(window& w, unsigned pad, std::vector<uint8_t>& out);

// f's recursion after `pad` nops: n ? f(n - 1) : base. Returns where the jz's displacement
// byte is (emit_spin patches it) and the recursive call's return offset.
struct rec_step {
  uint32_t jz, ra;
};
rec_step emit_rec_step(code_buf& c, unsigned pad) {
  for (unsigned i = 0; i < pad; ++i) c.put({0x90});
  c.put({0x48, 0x85, 0xFF});  // test rdi, rdi
  c.put({0x74, 0x00});        // jz base (patched)
  const uint32_t jz = c.at() - 1;
  c.put({0x48, 0xFF, 0xCF});  // dec rdi
  c.put({0xE8});              // call f
  c.u32(static_cast<uint32_t>(0 - (c.at() + 4)));
  return {jz, c.at()};
}

// f's base case starts here (the jz of emit_rec_step jumps to it): a spin loop.
void emit_spin(code_buf& c, uint32_t jz) {
  c.b[jz] = static_cast<uint8_t>(c.at() - (jz + 1));
  c.put({0xB9});  // mov ecx, spin
  c.u32(g_spin ? g_spin : 1);
  c.put({0xFF, 0xC9, 0x75, 0xFC});  // l: dec ecx; jnz l
}

// The call of the checkpoint helper; returns its return offset.
uint32_t emit_helper_call(code_buf& c) {
  c.put({0x48, 0xB8});  // mov rax, helper
  c.u64(reinterpret_cast<uint64_t>(&jw_helper));
  c.put({0xFF, 0xD0});  // call rax
  return c.at();
}

// f(n) into window `w`, `pad` nops after the prologue (recycling changes the layout).
std::vector<emitted_function> gen_rec(window& w, unsigned pad, std::vector<uint8_t>& out) {
  if (g_drap) return gen_rec_drap(w, pad, out);
  code_buf c;
  const uint64_t base = reinterpret_cast<uint64_t>(w.base);
  prologue(c);                      // 0..4
  c.put({0x48, 0x83, 0xEC, 0x10});  // sub rsp, 16 -> 8
  if (g_zero_locals) {
    c.put({0x48, 0x31, 0xC0});              // xor rax, rax
    c.put({0x48, 0x89, 0x04, 0x24});        // mov [rsp], rax
    c.put({0x48, 0x89, 0x44, 0x24, 0x08});  // mov [rsp + 8], rax
  }
  const auto [jz, ra_rec] = emit_rec_step(c, pad);
  c.put({0x48, 0x83, 0xC4, 0x10});  // add rsp, 16
  const uint32_t ep1_add = c.at();
  c.put({0x5D});  // pop rbp
  const uint32_t ep1_pop = c.at();
  c.put({0xC3});  // ret
  emit_spin(c, jz);
  const uint32_t ra_base = emit_helper_call(c);
  c.put({0x48, 0x83, 0xC4, 0x10});  // add rsp, 16
  const uint32_t ep2_add = c.at();
  c.put({0x5D});
  const uint32_t ep2_pop = c.at();
  c.put({0xC3});
  out = c.b;
  g_layout.f = base;
  g_layout.ra_f_rec = base + ra_rec;
  g_layout.ra_f_base = base + ra_base;
  return {{"jit:rec", fn_rows(base, c.at(), 8, 16, {{ep1_add, ep1_pop}, {ep2_add, ep2_pop}})}};
}

// --drap: f(n) with a stack-realigning prologue in the shape GCC gives functions that need
// more alignment than the ABI's (DRAP, "dynamic realign argument pointer"):
//    0 lea r10, [rsp + 8]    r10 = CFA                     CFA = r10 + 0
//    5 and rsp, -16
//    9 push qword [r10 - 8]  a copy of the return address
//   13 push rbp                                            rbp saved at *(rsp + 0)
//   14 mov rbp, rsp                                        rbp saved at *(rbp + 0)
//   17 push r10              [rbp - 8] = CFA               CFA = *(rbp - 8)
//   19 sub rsp, 8            (the call below sees a 16-byte aligned stack)
//      body: n ? f(n - 1) : (spin; call helper)
//      mov r10, [rbp - 8]                                  CFA = r10 + 0
//      leave                                               rbp restored
//      lea rsp, [r10 - 8]                                  CFA = rsp + 8
//      ret
// Only the body's rows can be followed by a walker that carries SP, FP and IP: the calls are
// in the body, so every frame below a checkpoint is walked with CFA = *(rbp - 8) and the
// caller's rbp from *(rbp + 0). g keeps its SP-based CFA (without --fp), so a walker that took
// rbp + 16 for f's CFA would hand g an SP 16 bytes off and miss g's return address.
std::vector<emitted_function> gen_rec_drap(window& w, unsigned pad, std::vector<uint8_t>& out) {
  const auto regs = dwarf_registers(abi::amd64);
  constexpr uint8_t r10 = 10;
  code_buf c;
  const uint64_t base = reinterpret_cast<uint64_t>(w.base);
  c.put({0x4C, 0x8D, 0x54, 0x24, 0x08});  // lea r10, [rsp + 8]
  const uint32_t after_lea = c.at();
  c.put({0x48, 0x83, 0xE4, 0xF0});  // and rsp, -16
  c.put({0x41, 0xFF, 0x72, 0xF8});  // push qword [r10 - 8]
  c.put({0x55});                    // push rbp
  const uint32_t after_push_rbp = c.at();
  c.put({0x48, 0x89, 0xE5});  // mov rbp, rsp
  const uint32_t after_mov_rbp = c.at();
  c.put({0x41, 0x52});  // push r10
  const uint32_t after_push_r10 = c.at();
  c.put({0x48, 0x83, 0xEC, 0x08});  // sub rsp, 8
  const auto [jz, ra_rec] = emit_rec_step(c, pad);
  std::vector<std::array<uint32_t, 4>> epilogues;  // {after mov r10, after leave, after lea, end}
  auto epilogue = [&] {
    std::array<uint32_t, 4> e{};
    c.put({0x4C, 0x8B, 0x55, 0xF8});  // mov r10, [rbp - 8]
    e[0] = c.at();
    c.put({0xC9});  // leave
    e[1] = c.at();
    c.put({0x49, 0x8D, 0x62, 0xF8});  // lea rsp, [r10 - 8]
    e[2] = c.at();
    c.put({0xC3});  // ret
    e[3] = c.at();
    epilogues.push_back(e);
  };
  epilogue();
  emit_spin(c, jz);
  uint32_t r10_loaded = 0;
  if (g_drap_register_call) {
    // The call's row names r10 (true when the call executes: r10 = CFA). r10 is not
    // callee-saved, so no unwinder can trust it in the helper's caller: the BPF walker must
    // stop at this frame rather than guess.
    c.put({0x4C, 0x8B, 0x55, 0xF8});  // mov r10, [rbp - 8]
    r10_loaded = c.at();
  }
  const uint32_t ra_base = emit_helper_call(c);
  epilogue();
  out = c.b;
  g_layout.f = base;
  g_layout.ra_f_rec = base + ra_rec;
  g_layout.ra_f_base = base + ra_base;

  // The rows, written out: frame_builder speaks the directives SFrame v2 can hold.
  auto row = [](uint32_t at) {
    frame_row r = entry_row(abi::amd64);
    r.pc_offset = at;
    return r;
  };
  auto cfa_r10 = [&](frame_row r) {
    r.cfa = cfa_base::reg;
    r.cfa_reg = r10;
    r.cfa_offset = 0;
    return r;
  };
  auto fp_at = [](frame_row r, uint8_t dwarf_reg) {
    r.fp = fp_rule::register_saved;
    r.fp_reg = dwarf_reg;
    r.fp_offset = 0;
    return r;
  };
  frame_row body = fp_at(row(after_push_r10), regs.fp);
  body.cfa = cfa_base::fp;
  body.cfa_deref = true;
  body.cfa_offset = -8;
  function_desc f;
  f.start = base;
  f.size = c.at();
  f.rows = {row(0), cfa_r10(row(after_lea)), fp_at(cfa_r10(row(after_push_rbp)), regs.sp),
            fp_at(cfa_r10(row(after_mov_rbp)), regs.fp), body};
  for (const auto& e : epilogues) {
    f.rows.push_back(fp_at(cfa_r10(row(e[0])), regs.fp));
    f.rows.push_back(cfa_r10(row(e[1])));
    f.rows.push_back(row(e[2]));
    if (e[3] < f.size) {
      frame_row again = body;
      again.pc_offset = e[3];
      f.rows.push_back(again);
    }
  }
  if (r10_loaded != 0) {
    frame_row again = body;
    again.pc_offset = ra_base;
    f.rows.push_back(fp_at(cfa_r10(row(r10_loaded)), regs.fp));
    f.rows.push_back(again);
    std::sort(f.rows.begin(), f.rows.end(),
              [](const frame_row& a, const frame_row& b) { return a.pc_offset < b.pc_offset; });
  }
  if (auto ok = validate(abi::amd64, f); !ok) {
    std::fprintf(stderr, "jit_target: drap rows: %s\n", ok.error().message().c_str());
    std::exit(3);
  }
  return {{"jit:rec", f}};
}

std::vector<emitted_function> gen_entry(window& w, std::vector<uint8_t>& out) {
  code_buf c;
  const uint64_t base = reinterpret_cast<uint64_t>(w.base);
  prologue(c);          // 0..4
  c.put({0x48, 0xB8});  // mov rax, f
  c.u64(g_layout.f);
  c.put({0xFF, 0xD0});  // call rax
  const uint32_t ra = c.at();
  c.put({0x5D});  // pop rbp
  const uint32_t pop = c.at();
  c.put({0xC3});
  out = c.b;
  g_layout.g = base;
  g_layout.ra_g = base + ra;
  return {{"jit:entry", fn_rows(base, c.at(), 4, 0, {{pop, pop}})}};
}

// ---------------------------------------------------------------------------------------------
// Ground truth.

// --seconds counts this thread's CPU time (see the usage above).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

uint64_t g_truth[512];
uint64_t g_truth_count = 0;
unsigned g_depth = 100;
bool g_checkpoint = true;
bool g_lie = false;
bool g_new_ids = false;
unsigned long g_checkpoints = 0;
int64_t g_tag = 1;

extern "C" __attribute__((noinline)) void jw_helper() {
  if (!g_checkpoint) return;
  uint64_t n = 0;
  g_truth[n++] = g_layout.ra_f_base;
  for (unsigned i = 0; i < g_depth && n < 511; ++i) g_truth[n++] = g_layout.ra_f_rec;
  g_truth[n++] = g_layout.ra_g;
  if (g_lie && ++g_checkpoints % 10 == 0) g_truth[n++] = g_layout.ra_f_rec;
  g_truth_count = n;
  uint64_t* addrs = g_truth;
  int64_t tag = g_tag;
  // Keep every argument in a register: libbpf 1.1 cannot read `symbol(%rip)` USDT operands.
  __asm__ volatile("" : "+r"(tag), "+r"(n), "+r"(addrs));
  STAP_PROBE3(jwtest, checkpoint, tag, n, addrs);
  __asm__ volatile("" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Hostile windows.

void patch_bad_counts(std::vector<uint8_t>& s, const window&) {
  // Header: num_fdes (u32) at offset 8 of the header (the same in v2 and v3).
  const uint32_t fdes = 1000;
  std::memcpy(s.data() + 8, &fdes, 4);
}

void patch_row_past_end(std::vector<uint8_t>& s, const window& w) {
  auto d = sframe::decode(s, reinterpret_cast<uint64_t>(w.base) + kCodeSize);
  if (!d) std::abort();
  // The second FRE of the first (only) FDE: 1-byte start address after the 3 bytes of FRE 0
  // (the layout says where its FREs are: in v3 after the function's attribute record).
  const size_t fres = 28 + d->info.fre_off + d->layout[0].fre_offset;
  s[fres + 3] = 0xF0;  // start offset 240 >= function size
}

void hostile_loop_fn(window& w) {
  // outer: push rbp; mov rbp, rsp; mov rax, inner; call rax; pop rbp; ret
  // inner: push rbp; mov rbp, rsp; mov rax, [rbp]; mov [rbp], rbp; spin; mov [rbp], rax;
  //        pop rbp; ret        -- its saved-FP slot points to itself while it spins
  code_buf c;
  const uint64_t base = reinterpret_cast<uint64_t>(w.base);
  c.put({0x55, 0x48, 0x89, 0xE5});  // outer
  c.put({0x48, 0xB8});
  const uint32_t inner_imm = c.at();
  c.u64(0);
  c.put({0xFF, 0xD0, 0x5D, 0xC3});
  const uint32_t outer_size = c.at();
  const uint32_t inner = c.at();
  c.put({0x55, 0x48, 0x89, 0xE5});  // push rbp; mov rbp, rsp
  c.put({0x48, 0x8B, 0x45, 0x00});  // mov rax, [rbp]
  c.put({0x48, 0x89, 0x6D, 0x00});  // mov [rbp], rbp
  c.put({0xB9});
  c.u32(20000000);
  c.put({0xFF, 0xC9, 0x75, 0xFC});  // spin
  c.put({0x48, 0x89, 0x45, 0x00});  // mov [rbp], rax
  c.put({0x5D, 0xC3});
  const uint32_t inner_size = c.at() - inner;
  const uint64_t inner_addr = base + inner;
  std::memcpy(c.b.data() + inner_imm, &inner_addr, 8);
  auto rows = [&](uint64_t start, uint32_t size) {
    frame_builder b(abi::amd64);
    b.push_frame_pointer(1, 4).pop_frame_pointer(size - 1);
    return b.finish(start, size).value();
  };
  publish(w, c.b,
          {{"jit:loop_outer", rows(base, outer_size)},
           {"jit:loop_inner", rows(inner_addr, inner_size)}});
}

}  // namespace

// Inlined: profiles of the test JIT show its code called from main (the tests look for
// ";main;jit:entry").
[[gnu::always_inline]] inline int run(const std::string& mode, unsigned iterations,
                                      unsigned recycle_every, double seconds);

// Until the main thread is a zombie (state Z in /proc; 10 s at most).
void wait_for_main_thread_end() {
  const std::string stat = "/proc/self/task/" + std::to_string(getpid()) + "/stat";
  for (int i = 0; i < 10000; ++i) {
    char buf[512] = {};
    if (FILE* f = std::fopen(stat.c_str(), "r")) {
      const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
      std::fclose(f);
      const char* close = std::strrchr(buf, ')');
      if (n > 0 && close != nullptr && close[1] == ' ' && close[2] == 'Z') return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

hostile_target::options g_hostile;
hostile_target::shapes g_shapes;

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "deep";
  unsigned iterations = 200, recycle_every = 10;
  double seconds = 0;
  bool jit_thread = false, jit_worker = false, pthread_exit_after = false;
  if ((mode == "exec" && argc > 2) || (mode == "exec-later" && argc > 3)) {
    registry_init();
    const int first = mode == "exec" ? 2 : 3;
    if (mode == "exec-later") usleep(static_cast<useconds_t>(std::atoi(argv[2])) * 1000);
    execv(argv[first], argv + first);
    std::perror("jit_target: exec");
    return 127;
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--depth")
      g_depth = static_cast<unsigned>(std::atoi(next()));
    else if (a == "--iterations")
      iterations = static_cast<unsigned>(std::atoi(next()));
    else if (a == "--spin")
      g_spin = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--recycle-every")
      recycle_every = static_cast<unsigned>(std::atoi(next()));
    else if (a == "--seconds")
      seconds = std::atof(next());
    else if (a == "--fp")
      g_fp = true;
    else if (a == "--no-checkpoint")
      g_checkpoint = false;
    else if (a == "--new-ids")
      g_new_ids = true;
    else if (a == "--forget-epilogue")
      g_forget_epilogue = true;
    else if (a == "--zero-locals")
      g_zero_locals = true;
    else if (a == "--lie")
      g_lie = true;
    else if (a == "--jit-thread")
      jit_thread = true;
    else if (a == "--jit-worker")
      jit_worker = true;
    else if (a == "--pthread-exit")
      pthread_exit_after = true;
    else if (a == "--raise-sigtrap")
      g_raise_sigtrap = true;
    else if (a == "--drap")
      g_drap = true;
    else if (a == "--drap-register-call")
      g_drap_register_call = true;
    else if (hostile_target::parse_option(a, next, g_hostile))
      continue;
    else {
      std::fprintf(stderr, "jit_target: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (g_depth > 500) g_depth = 500;
  kSlots = std::max<uint32_t>(kSlots, 16 + hostile_target::extra_slots(g_hostile));
  // A main thread that leaves by pthread_exit stays a zombie, not reported to a tracer, until
  // the last thread ends: the process goes on (and ends) on another thread.
  // The second thread starts only once the main thread is a zombie (not while a tracer holds
  // it at its exit): which thread acts first is then not a matter of timing.
  if (jit_thread) {
    std::thread([=] {
      wait_for_main_thread_end();
      std::exit(run(mode, iterations, recycle_every, seconds));
    }).detach();
    pthread_exit(nullptr);
  }
  if (jit_worker) {
    int worker_rc = 0;
    std::thread([&] { worker_rc = run(mode, iterations, recycle_every, seconds); }).join();
    return worker_rc;
  }
  const int rc = run(mode, iterations, recycle_every, seconds);
  if (pthread_exit_after) {
    std::thread([rc] {
      wait_for_main_thread_end();
      cpu_set_t cpus;
      const int n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : -1;
      std::printf("jit_target: the last thread (on %d CPUs) ends the process\n", n);
      std::exit(rc);
    }).detach();
    pthread_exit(nullptr);
  }
  return rc;
}

[[gnu::always_inline]] inline int run(const std::string& mode, unsigned iterations,
                                      unsigned recycle_every, double seconds) {
  if (g_raise_sigtrap) {
    signal(SIGTRAP, [](int) { ++g_sigtraps; });
    raise(SIGTRAP);  // before anything is published
  }
  registry_init();
  // Like the SDK's sessions: JITUNWIND_DIR moves the perf map (tests keep /tmp clean with it).
  const char* dir = std::getenv("JITUNWIND_DIR");
  const std::string perf_map_path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") +
                                    "/perf-" + std::to_string(getpid()) + ".map";
  // A hostile perf map (or a churned one) is the shapes' business.
  if (g_hostile.perf_map_kind.empty() && !g_hostile.churn)
    g_perfmap = std::fopen(perf_map_path.c_str(), "w");

  window rec = make_window(1, 0), entry = make_window(2, 1);
  std::vector<uint8_t> code;
  unsigned pad = 0;
  auto fns = gen_rec(rec, pad, code);
  publish(rec, code, fns);
  fns = gen_entry(entry, code);
  publish(entry, code, fns);
  if (g_hostile.any()) {
    hostile_target::registry_access access;
    access.write = [](uint32_t slot, uint64_t id, uint32_t state, uint64_t text, uint64_t text_size,
                      uint64_t sframe, uint64_t sframe_size) {
      return registry_write(slot, id, state, text, text_size, sframe, sframe_size);
    };
    access.entries = g_entries;
    access.header = &jitunwind_registry;
    access.text = reinterpret_cast<uint64_t>(rec.base);
    access.text_size = 64;
    g_shapes.start(g_hostile, std::move(access), perf_map_path);
  }

  if (mode == "hostile") {
    window bad_counts = make_window(10, 2), past_end = make_window(11, 3),
           outside = make_window(12, 4), unreadable = make_window(13, 5), loop = make_window(14, 6);
    fns = gen_rec(bad_counts, 0, code);
    publish(bad_counts, code, fns, patch_bad_counts);
    {
      // Two rows; the second one patched past the function's end.
      code_buf c;
      c.put({0x48, 0x83, 0xEC, 0x08, 0x48, 0x83, 0xC4, 0x08, 0xC3});
      frame_builder b(abi::amd64);
      b.stack_alloc(4, 8).stack_free(8, 8);
      publish(past_end, c.b,
              {{"jit:past_end", b.finish(reinterpret_cast<uint64_t>(past_end.base), 9).value()}},
              patch_row_past_end);
    }
    {
      // An FDE for a function outside the window's text: valid SFrame, wrong window.
      code_buf c;
      c.put({0xC3});
      auto leaf =
          recipes::leaf(abi::amd64, reinterpret_cast<uint64_t>(outside.base) + 4096, 16).value();
      publish(outside, c.b, {{"jit:outside", leaf}});
    }
    {
      code_buf c;
      c.put({0xC3});
      auto leaf = recipes::leaf(abi::amd64, reinterpret_cast<uint64_t>(unreadable.base), 1).value();
      publish(unreadable, c.b, {{"jit:unreadable", leaf}}, nullptr, uint64_t{1} << 40);
    }
    // Good code keeps running with checkpoints, then the self-referencing frames spin.
    g_layout = {};
    fns = gen_rec(rec, 0, code);
    publish(rec, code, fns);
    hostile_loop_fn(loop);
    // Half of the time in good code (with checkpoints), half in the self-referencing frames.
    const double t0 = thread_cpu_seconds();
    auto elapsed = [&] { return thread_cpu_seconds() - t0; };
    unsigned long good = 0, looped = 0;
    for (unsigned i = 0; seconds > 0 ? i % 256 != 0 || elapsed() < seconds / 2 : i < iterations;
         ++i, ++good) {
      reinterpret_cast<void (*)(uint64_t)>(entry.base)(g_depth);
    }
    const double half = elapsed();
    do {
      reinterpret_cast<void (*)()>(loop.base)();
      ++looped;
    } while (seconds > 0 ? elapsed() < seconds : elapsed() < 2 * half);
    std::printf("jit_target: hostile done (%lu good calls, %lu looping calls)\n", good, looped);
    return 0;
  }

  using entry_fn = void (*)(uint64_t);
  const double start = thread_cpu_seconds();
  unsigned long calls = 0;
  for (unsigned i = 0;; ++i) {
    if (seconds > 0) {
      // The CPU clock is a system call: read once per 256 calls, not to show up in profiles.
      if (i % 256 == 0 && thread_cpu_seconds() - start >= seconds) break;
    } else if (i >= iterations) {
      break;
    }
    if (mode == "recycle" && i > 0 && recycle_every && i % recycle_every == 0) {
      retire_and_free(rec);
      if (g_new_ids) rec.id = 1000 + i;  // the reused memory becomes a new window
      pad = (pad + 1) % 7;
      fns = gen_rec(rec, pad, code);
      publish(rec, code, fns);
      g_tag = 1 + pad;
    }
    reinterpret_cast<entry_fn>(entry.base)(g_depth);
    g_shapes.tick();
    ++calls;
    if (g_raise_sigtrap && calls == 1) raise(SIGTRAP);  // between calls of JIT code
  }
  std::printf("jit_target: %lu calls of depth %u\n", calls, g_depth);
  if (g_raise_sigtrap) {
    std::printf("jit_target: %d SIGTRAPs handled\n", g_sigtraps.load());
    if (g_sigtraps != 2) return 4;
  }
  if (g_perfmap) std::fclose(g_perfmap);
  return 0;
}
