// A test JIT that recompiles its hot function again and again, the way a long-running runtime
// does, through the SDK's public session/window API: every version goes where the previous one
// was when the session allows it (window::reuse, or a new window on the freed window's memory),
// or to a fresh range when it never reuses addresses. Used by the perf, jitwalk and sub-page
// tests (tests/window/lifecycle_tools_test.cpp).
//
//   main -> drive -> work_v<k>_s<r> (JIT, no frame pointer) -> spin<r> (native), r = k % 3
//
// Which native spin function a version calls is part of its name, so a profile can tell a
// misnamed sample: a frame named work_v7_s1 whose callee is spin2 was named after other code.
// Versions also differ in frame size and instruction offsets, so rows of one version are wrong
// for the next.
//
// usage: recompile_jit [options]
//   --versions N            versions of the hot function (default 10), each run for --ms
//   --ms N                  milliseconds of this thread's CPU time per version (default 200)
//   --mode reuse|recycle    reuse: window::reuse of the same window; recycle: the window is freed
//                           and released, the next version goes into a new window (which gets
//                           the freed memory when the session recycles addresses)
//   --address-reuse auto|allowed|never   session_options::reuse (default: from the environment)
//   --layout page-flip|shared-alias|memfd-alias
//   --publish LIST          publishers (default: JITUNWIND_PUBLISH or the default set)
//   --checkpoint N          every N-th spin fires jwtest:checkpoint with the ground truth
//   --small N               instead: N functions of 48 bytes, each published on its own into
//                           one window, then run in turn for --ms milliseconds of CPU in total
//   --patch N               instead: a call site `site` calls work_v0 (-> spin0) N times; halfway
//                           window::patch redirects its call (rel32) to work_v1 (-> spin1); prints
//                           how often each spin ran. With --patch-wrong-rows the patch grows
//                           work_v0's frame instead, so that its rows are wrong from then on
#include <jitunwind/frame.h>
#include <jitunwind/window.h>

#include "support/jit_program.hpp"

#include <sys/sdt.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

uint64_t g_checkpoint_every = 0;
uint64_t g_spins = 0;
uint64_t g_spin_calls[3] = {0, 0, 0};
uint64_t g_truth[1];
uint64_t g_ra = 0;  // return address into the running version, for the ground truth

using test::code_buf;
using test::die;
using test::must;

}  // namespace

// The native callees. Each spins, and every --checkpoint-th call reports the ground truth: the
// one JIT return address on the stack (docs/ground-truth.md).
#define SPIN(n)                                                                  \
  extern "C" __attribute__((noinline)) void spin##n(uint64_t count) {            \
    ++g_spin_calls[n];                                                           \
    for (uint64_t i = 0; i < count; ++i) asm volatile("" : : "r"(i) : "memory"); \
    if (g_checkpoint_every != 0 && ++g_spins % g_checkpoint_every == 0) {        \
      g_truth[0] = g_ra;                                                         \
      int64_t tag = n + 1;                                                       \
      uint64_t count_truth = 1;                                                  \
      uint64_t* addrs = g_truth;                                                 \
      __asm__ volatile("" : "+r"(tag), "+r"(count_truth), "+r"(addrs));          \
      STAP_PROBE3(jwtest, checkpoint, tag, count_truth, addrs);                  \
    }                                                                            \
  }
SPIN(0)
SPIN(1)
SPIN(2)

namespace {

using spin_fn = void (*)(uint64_t);
const spin_fn g_spin_fns[3] = {spin0, spin1, spin2};

// Version k: [k%4 nops] sub rsp, F; spin in JIT code; mov edi, native spins; mov rax, spin<r>;
// call rax; add rsp, F; ret — with F = 8 + 16 * (k % 2) and r = k % 3. `size` pads with int3.
struct emitted {
  std::vector<uint8_t> code;
  function_desc frames;
  uint32_t ra_offset = 0;
  uint32_t sub_imm = 0, add_imm = 0;  // offsets of the frame size in `sub rsp` and `add rsp`
};

emitted emit_version(unsigned k, uint64_t address, uint32_t jit_spin, uint32_t native_spin,
                     uint32_t size = 0) {
  code_buf c;
  for (unsigned i = 0; i < k % 4; ++i) c.put({0x90});
  const uint8_t frame = static_cast<uint8_t>(8 + 16 * (k % 2));
  c.put({0x48, 0x83, 0xEC, frame});  // sub rsp, F
  const uint32_t after_sub = c.at();
  c.put({0xB9});  // mov ecx, jit_spin
  c.u32(jit_spin ? jit_spin : 1);
  c.put({0xFF, 0xC9, 0x75, 0xFC});  // l: dec ecx; jnz l
  c.put({0xBF});                    // mov edi, native_spin
  c.u32(native_spin);
  c.put({0x48, 0xB8});  // mov rax, spin<r>
  c.u64(reinterpret_cast<uint64_t>(g_spin_fns[k % 3]));
  c.put({0xFF, 0xD0});  // call rax
  const uint32_t ra = c.at();
  c.put({0x48, 0x83, 0xC4, frame});  // add rsp, F
  const uint32_t after_add = c.at();
  c.put({0xC3});
  while (c.at() < size) c.put({0xCC});
  frame_builder b(abi::amd64);
  b.stack_alloc(after_sub, frame).stack_free(after_add, frame);
  emitted e;
  e.frames = must(b.finish(address, c.at()), "rows");
  e.code = std::move(c.b);
  e.ra_offset = ra;
  e.sub_imm = after_sub - 1;
  e.add_imm = after_add - 1;
  return e;
}

// This thread's CPU time: runs last a fixed amount of work, however busy the machine (a
// profile then has about the same number of samples).
uint64_t cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

extern "C" __attribute__((noinline)) void drive(void (*fn)(), uint64_t until_cpu_ns) {
  unsigned n = 0;
  while ((++n & 15) != 0 || cpu_ns() < until_cpu_ns) fn();
}

code_layout parse_layout(const std::string& s) {
  if (s == "page-flip") return code_layout::page_flip;
  if (s == "shared-alias") return code_layout::shared_alias;
  if (s == "memfd-alias") return code_layout::memfd_alias;
  die("unknown layout " + s);
}

}  // namespace

// site: sub rsp, 8; nops; call rel32 (opcode at an offset = 3 mod 8, so that the displacement
// is the last 4 bytes of an aligned 8-byte word: one atomic store patches it); add rsp, 8; ret.
struct call_site {
  std::vector<uint8_t> code;
  function_desc frames;
  uint32_t displacement_offset = 0;
};

call_site emit_site(uint64_t address, uint64_t target) {
  code_buf c;
  c.put({0x48, 0x83, 0xEC, 0x08});  // sub rsp, 8
  while ((address + c.at()) % 8 != 3) c.put({0x90});
  c.put({0xE8});
  call_site site;
  site.displacement_offset = c.at();
  c.u32(static_cast<uint32_t>(target - (address + c.at() + 4)));
  c.put({0x48, 0x83, 0xC4, 0x08});  // add rsp, 8
  const uint32_t after_add = c.at();
  c.put({0xC3});
  frame_builder b(abi::amd64);
  b.stack_alloc(4, 8).stack_free(after_add, 8);
  site.frames = must(b.finish(address, c.at()), "site rows");
  site.code = std::move(c.b);
  return site;
}

// `wrong_rows`: instead of redirecting the call, grow work_v0's frame by 16 bytes (both `sub`
// and `add`): the code still works, but its published rows no longer match it (a checker must
// see mismatches).
int run_patch(session& s, const owned_window_options& wo, unsigned calls, bool wrong_rows) {
  window* w = must(s.create_owned_window(wo), "window");
  uint64_t targets[2];
  emitted first;
  for (unsigned k = 0; k < 2; ++k) {
    auto space = must(w->allocate(64), "allocate");
    emitted e = emit_version(k, space.address, 8, 8);  // short: the patch test single-steps it
    std::memcpy(space.writable.data(), e.code.data(), e.code.size());
    must(w->append("work_v" + std::to_string(k) + "_s" + std::to_string(k), e.frames), "append");
    targets[k] = space.address;
    if (k == 0) first = e;
  }
  auto space = must(w->allocate(64), "allocate");
  call_site site = emit_site(space.address, targets[0]);
  std::memcpy(space.writable.data(), site.code.data(), site.code.size());
  must(w->append("site", site.frames), "append");
  must(w->publish(), "publish");
  // A tracer that polls for published code (jitunwind unwind check on a machine whose debug
  // registers do not trap: it looks every 10 ms) sees it before the code runs.
  usleep(30000);
  auto fn = reinterpret_cast<void (*)()>(space.address);
  for (unsigned i = 0; i < calls; ++i) {
    if (i == calls / 2 && wrong_rows) {
      const uint8_t bigger[1] = {static_cast<uint8_t>(first.code[first.sub_imm] + 16)};
      must(w->patch(targets[0] + first.sub_imm, bigger), "patch");
      must(w->patch(targets[0] + first.add_imm, bigger), "patch");
    } else if (i == calls / 2) {
      const uint64_t at = space.address + site.displacement_offset;
      const auto rel = static_cast<uint32_t>(targets[1] - (at + 4));
      uint8_t bytes[4];
      std::memcpy(bytes, &rel, 4);
      must(w->patch(at, bytes), "patch");
    }
    fn();
  }
  std::printf("recompile_jit: patched call site: spin0 ran %llu times, spin1 %llu times\n",
              static_cast<unsigned long long>(g_spin_calls[0]),
              static_cast<unsigned long long>(g_spin_calls[1]));
  if (wrong_rows) return g_spin_calls[0] == calls ? 0 : 1;
  return g_spin_calls[0] == calls / 2 && g_spin_calls[1] == calls - calls / 2 ? 0 : 1;
}

int main(int argc, char** argv) {
  test::program_name = "recompile_jit";
  unsigned versions = 10, small = 0, patch_calls = 0;
  bool wrong_rows = false;
  unsigned ms = 200;
  std::string mode = "reuse";
  code_layout layout = code_layout::page_flip;
  auto options = must(session_options::from_env(), "environment");
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--versions") {
      versions = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--ms") {
      ms = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--mode") {
      mode = next();
      if (mode != "reuse" && mode != "recycle") die("unknown mode " + mode);
    } else if (a == "--address-reuse") {
      const std::string v = next();
      options.reuse = v == "never"     ? address_reuse::never
                      : v == "allowed" ? address_reuse::allowed
                                       : address_reuse::automatic;
    } else if (a == "--layout") {
      layout = parse_layout(next());
    } else if (a == "--publish") {
      options.publishers = must(parse_publishers(next()), "--publish");
    } else if (a == "--checkpoint") {
      g_checkpoint_every = std::stoull(next());
    } else if (a == "--small") {
      small = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--patch") {
      patch_calls = static_cast<unsigned>(std::stoul(next()));
    } else if (a == "--patch-wrong-rows") {
      wrong_rows = true;
    } else {
      die("unknown option " + a + " (see the comment at the top of recompile_jit.cpp)");
    }
  }
  auto s = must(session::create(options), "session");
  std::printf("recompile_jit: pid %d, address reuse %s\n", getpid(),
              s->recycles_addresses() ? "allowed" : "off");
  std::fflush(stdout);
  const owned_window_options wo{.code_capacity = 64 * 1024, .layout = layout};
  if (patch_calls != 0) return run_patch(*s, wo, patch_calls, wrong_rows);

  if (small != 0) {
    // Sub-page publishing: one function at a time, each published before the next is made.
    window* w = must(s->create_owned_window(wo), "window");
    std::vector<void (*)()> fns;
    for (unsigned i = 0; i < small; ++i) {
      auto space = must(w->allocate(48), "allocate");
      emitted e = emit_version(i, space.address, 2000, 100, 48);
      if (e.code.size() != 48) die("a small function is not 48 bytes");
      std::memcpy(space.writable.data(), e.code.data(), e.code.size());
      must(w->append("small_" + std::to_string(i) + "_s" + std::to_string(i % 3), e.frames),
           "append");
      must(w->publish(), "publish");
      fns.push_back(reinterpret_cast<void (*)()>(space.address));
    }
    const uint64_t first = reinterpret_cast<uint64_t>(fns.front());
    const uint64_t last = reinterpret_cast<uint64_t>(fns.back()) + 48;
    std::printf("recompile_jit: %u functions of 48 bytes in [0x%llx, 0x%llx): %llu bytes\n", small,
                static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
                static_cast<unsigned long long>(last - first));
    const uint64_t until = cpu_ns() + uint64_t{ms} * 1000000;
    while (cpu_ns() < until)
      for (auto fn : fns) drive(fn, 0);
    return 0;
  }

  window* w = nullptr;
  for (unsigned k = 0; k < versions; ++k) {
    if (w != nullptr) {
      // The previous version is not running (drive returned): retire it with no grace.
      const bool keep = mode == "reuse";
      must(w->retire(std::chrono::milliseconds(0), [keep](window&) { return keep; }), "retire");
      s->poll();
      // reuse: same window, same range. Otherwise (or when the session never reuses
      // addresses) the window was freed: its handle ends, a new window takes over.
      if (!keep || !w->reuse().ok()) {
        must(s->release(w), "release");
        w = nullptr;
      }
    }
    if (w == nullptr) w = must(s->create_owned_window(wo), "window");
    auto space = must(w->allocate(128), "allocate");
    emitted e = emit_version(k, space.address, 20000, 200000);
    std::memcpy(space.writable.data(), e.code.data(), e.code.size());
    const std::string name = "work_v" + std::to_string(k) + "_s" + std::to_string(k % 3);
    must(w->append(name, e.frames), "append");
    must(w->publish(), "publish");
    g_ra = space.address + e.ra_offset;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);  // perf record -k 1 times samples with this clock
    std::printf(
        "recompile_jit: %s at 0x%llx (window %llu, reuse %u, generation %llu) from %lld.%09ld\n",
        name.c_str(), static_cast<unsigned long long>(space.address),
        static_cast<unsigned long long>(w->id()), w->reuse_count(),
        static_cast<unsigned long long>(w->published_generation()),
        static_cast<long long>(now.tv_sec), now.tv_nsec);
    std::fflush(stdout);
    drive(reinterpret_cast<void (*)()>(space.address), cpu_ns() + uint64_t{ms} * 1000000);
  }
  return 0;
}
