// jitunwind/asmjit.h: rows for asmjit's FuncFrame prologues/epilogues checked against the real
// machine, and one-call placement into a window.
//
// Oracle: every generated function is placed and published in an owned window and run under
// the x86 trap flag (in-process single-stepping, SIGTRAP after every instruction). At each
// instruction boundary inside the function the handler evaluates the function's rows on the
// live registers: the CFA must give the real return address (into the driver), the saved rbp
// and the callee-saved registers the rows name must hold the caller's values (the driver loads
// a marker into each before the call; the body clobbers every register the frame saves).
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#ifdef HAVE_ASMJIT

#include <jitunwind/asmjit.h>
#include <jitunwind/window.h>

#include <signal.h>
#include <ucontext.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace jitunwind;
namespace aj = ::asmjit;
namespace x86 = ::asmjit::x86;

extern "C" __attribute__((noinline)) void glue_test_native_callee() {
  asm volatile("" ::: "memory");
}

// Callee-saved GP registers of System V x86-64 (the order shapes pick them in) with their
// DWARF numbers and the marker the driver puts in them.
const x86::Gp saved_order[6] = {x86::rbx, x86::r12, x86::r13, x86::r14, x86::r15, x86::rbp};
constexpr uint64_t marker_base = 0x5a5a000000000000ull;
uint64_t marker(uint32_t asmjit_id) {
  return marker_base + asmjit_id;
}

// ---- the single-step oracle (async-signal-safe: fixed arrays, no allocation) ----

struct step_record {
  uint32_t offset;
  uint32_t failures;  // bits of failure
};
enum failure : uint32_t {
  cfa_outside_stack = 1,
  wrong_return_address = 2,
  wrong_saved_fp = 4,
  wrong_fp_register = 8,
  wrong_saved_register = 16,
  wrong_register = 32,
  unexpected_rule = 64,
};

struct oracle_state {
  uint64_t start = 0;
  uint32_t size = 0;
  uint64_t return_address = 0;
  const function_desc* desc = nullptr;
  step_record steps[4096];
  size_t count = 0;
  bool overflow = false;
};
oracle_state oracle;

bool on_stack(uint64_t address, uint64_t rsp) {
  return address >= rsp && address < rsp + (64u << 10) && address % 8 == 0;
}

// Reads stack words of JIT frames (and, for deliberately wrong rows, of their callers): not
// instrumented, like any conservative stack reader.
__attribute__((no_sanitize_address)) uint32_t check_rows(uint32_t offset, const greg_t* g) {
  const function_desc& d = *oracle.desc;
  const frame_row* row = &d.rows.front();
  for (const frame_row& r : d.rows) {
    if (r.pc_offset <= offset) row = &r;
  }
  const auto rsp = static_cast<uint64_t>(g[REG_RSP]);
  const auto rbp = static_cast<uint64_t>(g[REG_RBP]);
  if (row->cfa_deref || row->cfa == cfa_base::reg || row->ra != ra_rule::saved) {
    return unexpected_rule;
  }
  const uint64_t cfa = (row->cfa == cfa_base::sp ? rsp : rbp) + row->cfa_offset;
  auto at = [&](int32_t off, uint64_t& out) {
    const uint64_t a = cfa + off;
    if (!on_stack(a, rsp)) return false;
    out = *reinterpret_cast<const uint64_t*>(a);
    return true;
  };
  uint32_t f = 0;
  uint64_t v = 0;
  if (!at(row->ra_offset, v)) return cfa_outside_stack;
  if (v != oracle.return_address) f |= wrong_return_address;
  if (row->fp == fp_rule::saved) {
    if (!at(row->fp_offset, v) || v != marker(x86::Gp::kIdBp)) f |= wrong_saved_fp;
  } else if (row->fp == fp_rule::unchanged) {
    if (rbp != marker(x86::Gp::kIdBp)) f |= wrong_fp_register;
  } else {
    f |= unexpected_rule;
  }
  const struct {
    uint32_t id;
    uint16_t dwarf;
    int greg;
  } regs[5] = {{x86::Gp::kIdBx, 3, REG_RBX},
               {12, 12, REG_R12},
               {13, 13, REG_R13},
               {14, 14, REG_R14},
               {15, 15, REG_R15}};
  for (const auto& r : regs) {
    const saved_register* rule = nullptr;
    for (const saved_register& s : d.saved_registers) {
      if (s.dwarf_reg == r.dwarf && s.pc_offset <= offset) rule = &s;
    }
    if (rule == nullptr || rule->rule == saved_rule::unchanged) {
      if (static_cast<uint64_t>(g[r.greg]) != marker(r.id)) f |= wrong_register;
    } else if (rule->rule == saved_rule::at_cfa) {
      if (!at(rule->cfa_offset, v) || v != marker(r.id)) f |= wrong_saved_register;
    } else {
      f |= unexpected_rule;
    }
  }
  return f;
}

void on_trap(int, siginfo_t*, void* context) {
  const greg_t* g = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  const auto rip = static_cast<uint64_t>(g[REG_RIP]);
  if (rip < oracle.start || rip - oracle.start >= oracle.size) return;  // the driver, the callee
  if (oracle.count == std::size(oracle.steps)) {
    oracle.overflow = true;
    return;
  }
  const auto offset = static_cast<uint32_t>(rip - oracle.start);
  oracle.steps[oracle.count++] = {offset, check_rows(offset, g)};
}

// ---- functions under test ----

struct shape {
  bool preserved_fp = false;
  uint32_t saved = 0;  // how many of saved_order are dirty
  uint32_t local = 0;  // local stack bytes
  bool calls = false;
  uint32_t local_alignment = 0;  // > 16: dynamic alignment

  std::string text() const {
    return std::string(preserved_fp ? "fp" : "nofp") + " saved=" + std::to_string(saved) +
           " local=" + std::to_string(local) + (calls ? " calls" : "") +
           (local_alignment ? " align=" + std::to_string(local_alignment) : "");
  }
};

aj::FuncFrame make_frame(const shape& s) {
  aj::FuncDetail func;
  REQUIRE(func.init(aj::FuncSignatureT<void, uint64_t>(aj::CallConvId::kHost),
                    aj::Environment::host()) == aj::kErrorOk);
  aj::FuncFrame frame;
  REQUIRE(frame.init(func) == aj::kErrorOk);
  if (s.preserved_fp) frame.setPreservedFP();
  for (uint32_t i = 0; i < s.saved; ++i) frame.addDirtyRegs(saved_order[i]);
  frame.setLocalStackSize(s.local);
  if (s.local_alignment) frame.setLocalStackAlignment(s.local_alignment);
  if (s.calls) frame.setFuncCalls();
  REQUIRE(frame.finalize() == aj::kErrorOk);
  return frame;
}

// Clobbers what the frame saved, touches the locals, maybe calls.
void body(x86::Assembler& a, const shape& s, uint64_t salt) {
  for (uint32_t i = 0; i < s.saved; ++i) {
    if (s.preserved_fp && saved_order[i] == x86::rbp) continue;  // the frame pointer
    a.mov(saved_order[i], salt + i);
  }
  if (s.local >= 8) a.mov(x86::qword_ptr(x86::rsp), x86::rax);
  if (s.calls) {
    a.mov(x86::rax, reinterpret_cast<uint64_t>(&glue_test_native_callee));
    a.call(x86::rax);
  }
}

struct session_fixture {
  std::unique_ptr<session> s;
  window* w = nullptr;
  session_fixture(size_t capacity = 1 << 20) {
    session_options o;
    o.publishers = 0;  // the window alone
    auto created = session::create(o);
    REQUIRE(created.ok());
    s = std::move(*created);
    owned_window_options wo;
    wo.code_capacity = capacity;
    auto opened = s->create_owned_window(wo);
    REQUIRE(opened.ok());
    w = *opened;
  }
};

struct placed {
  function_desc desc;
  std::vector<uint32_t> epilogue_starts;
};

// A function of shape `s` with two epilogues (rdi == 0: the first, else the second).
placed place_function(window& w, const shape& s, const std::string& name) {
  const aj::FuncFrame frame = make_frame(s);
  aj::CodeHolder code;
  code.init(aj::Environment::host());
  x86::Assembler a(&code);
  frame_builder rows;
  placed p;
  auto pro = asmjit_glue::emit_prolog(a, frame, rows);
  INFO(s.text());
  REQUIRE(pro.ok());
  aj::Label second = a.newLabel();
  a.test(x86::rdi, x86::rdi);
  a.jnz(second);
  body(a, s, 0x1000);
  p.epilogue_starts.push_back(static_cast<uint32_t>(a.offset()));
  REQUIRE(asmjit_glue::emit_epilog(a, frame, rows).ok());
  a.bind(second);
  body(a, s, 0x2000);
  p.epilogue_starts.push_back(static_cast<uint32_t>(a.offset()));
  REQUIRE(asmjit_glue::emit_epilog(a, frame, rows).ok());
  auto desc = asmjit_glue::place(w, name, code, rows);
  if (!desc) FAIL(desc.error().message());
  p.desc = std::move(*desc);
  return p;
}

// The driver: loads the markers into the callee-saved registers, sets the trap flag, calls
// rdi(rsi), clears the trap flag; its own prologue and rows come from the glue too.
using driver_fn = void (*)(uint64_t target, uint64_t arg);
struct driver {
  driver_fn fn = nullptr;
  uint64_t return_address = 0;
};

driver place_driver(window& w) {
  aj::FuncDetail func;
  REQUIRE(func.init(aj::FuncSignatureT<void, uint64_t, uint64_t>(aj::CallConvId::kHost),
                    aj::Environment::host()) == aj::kErrorOk);
  aj::FuncFrame frame;
  REQUIRE(frame.init(func) == aj::kErrorOk);
  for (const x86::Gp& r : saved_order) frame.addDirtyRegs(r);
  frame.setFuncCalls();
  REQUIRE(frame.finalize() == aj::kErrorOk);
  aj::CodeHolder code;
  code.init(aj::Environment::host());
  x86::Assembler a(&code);
  frame_builder rows;
  REQUIRE(asmjit_glue::emit_prolog(a, frame, rows).ok());
  a.mov(x86::rax, x86::rdi);
  a.mov(x86::rdi, x86::rsi);
  for (const x86::Gp& r : saved_order) a.mov(r, marker(r.id()));
  a.pushfq();
  a.or_(x86::qword_ptr(x86::rsp), 0x100);  // TF
  a.popfq();
  a.call(x86::rax);
  const auto after_call = static_cast<uint32_t>(a.offset());
  a.pushfq();
  a.and_(x86::qword_ptr(x86::rsp), ~0x100);
  a.popfq();
  REQUIRE(asmjit_glue::emit_epilog(a, frame, rows).ok());
  auto desc = asmjit_glue::place(w, "glue_test_driver", code, rows);
  if (!desc) FAIL(desc.error().message());
  return {reinterpret_cast<driver_fn>(desc->start), desc->start + after_call};
}

struct trap_handler {
  struct sigaction old {};
  trap_handler() {
    struct sigaction sa {};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    REQUIRE(sigaction(SIGTRAP, &sa, &old) == 0);
  }
  ~trap_handler() { sigaction(SIGTRAP, &old, nullptr); }
};

// Steps `f` once per path; returns the offsets visited; every step's failures go to Catch.
std::set<uint32_t> step_through(const driver& d, const function_desc& f, const std::string& what,
                                size_t* failed_steps = nullptr) {
  std::set<uint32_t> visited;
  size_t failed = 0;
  for (uint64_t path = 0; path < 2; ++path) {
    oracle.start = f.start;
    oracle.size = f.size;
    oracle.return_address = d.return_address;
    oracle.desc = &f;
    oracle.count = 0;
    oracle.overflow = false;
    d.fn(f.start, path);
    REQUIRE_FALSE(oracle.overflow);
    for (size_t i = 0; i < oracle.count; ++i) {
      visited.insert(oracle.steps[i].offset);
      if (oracle.steps[i].failures == 0) continue;
      ++failed;
      if (failed_steps == nullptr) {
        FAIL_CHECK(what << ": path " << path << ", offset " << oracle.steps[i].offset
                        << ": failures 0x" << std::hex << oracle.steps[i].failures);
      }
    }
  }
  if (failed_steps != nullptr) *failed_steps = failed;
  return visited;
}

}  // namespace

TEST_CASE("asmjit glue: prologue/epilogue rows match the machine at every instruction") {
  session_fixture fx;
  const driver d = place_driver(*fx.w);
  std::vector<std::pair<shape, placed>> functions;
  int n = 0;
  for (bool fp : {false, true}) {
    for (uint32_t saved = 0; saved <= 6; ++saved) {
      for (uint32_t local : {0u, 8u, 64u, 4096u}) {
        for (bool calls : {false, true}) {
          const shape s{fp, saved, local, calls};
          functions.push_back({s, place_function(*fx.w, s, "f" + std::to_string(n++))});
        }
      }
    }
  }
  // Dynamic stack alignment (needs the frame pointer).
  for (uint32_t saved : {0u, 3u}) {
    const shape s{true, saved, 64, true, 64};
    functions.push_back({s, place_function(*fx.w, s, "f" + std::to_string(n++))});
  }
  REQUIRE(fx.w->publish().ok());
  trap_handler h;
  for (const auto& [s, p] : functions) {
    INFO(s.text());
    const std::set<uint32_t> visited = step_through(d, p.desc, s.text());
    // Every row was exercised: each starts at an instruction the machine executed.
    for (const frame_row& r : p.desc.rows) CHECK(visited.count(r.pc_offset) == 1);
    // Saved registers are described (for the .eh_frame publishers) once pushed.
    const uint32_t pushed = s.preserved_fp && s.saved == 6 ? 5 : s.saved;
    size_t saves = 0;
    for (const saved_register& r : p.desc.saved_registers) saves += r.rule == saved_rule::at_cfa;
    const bool rbp_as_gp = !s.preserved_fp && s.saved == 6;
    // Saved in the prologue and again where the first epilogue's restore_state resumes the body.
    CHECK(saves == 2 * (pushed - (rbp_as_gp ? 1 : 0)));
  }
}

TEST_CASE("asmjit glue: the oracle catches wrong rows") {
  session_fixture fx;
  const driver d = place_driver(*fx.w);
  const shape s{false, 2, 64, true};
  placed p = place_function(*fx.w, s, "victim");
  REQUIRE(fx.w->publish().ok());
  trap_handler h;
  size_t failed = 0;
  step_through(d, p.desc, s.text(), &failed);
  REQUIRE(failed == 0);
  // A CFA off by 8 after the stack adjustment; then a forgotten saved register.
  function_desc wrong_cfa = p.desc;
  for (frame_row& r : wrong_cfa.rows) {
    if (r.cfa_offset > 32) r.cfa_offset -= 8;
  }
  step_through(d, wrong_cfa, s.text(), &failed);
  CHECK(failed > 0);
  function_desc forgot = p.desc;
  forgot.saved_registers.erase(forgot.saved_registers.begin());
  step_through(d, forgot, s.text(), &failed);
  CHECK(failed > 0);
}

TEST_CASE("asmjit glue: rows equal the frame_builder ones at each instruction boundary") {
  session_fixture fx;
  // push rbp (1) ; mov rbp, rsp (3) ; push rbx (1) ; sub rsp, N (4) ... mov rsp/lea ; pop rbx ;
  // pop rbp ; ret — built by hand with frame_builder at the encodings' offsets.
  SECTION("frame pointer and rbx") {
    const shape s{true, 1, 64, false};
    placed p = place_function(*fx.w, s, "fp_rbx");
    frame_builder b;
    b.push_frame_pointer(1, 4).stack_alloc(5, 8).save_register(5, 3, -24).stack_alloc(9, 64);
    for (uint32_t e : p.epilogue_starts) {
      // lea rsp, [rbp - 8] (4 bytes), pop rbx, pop rbp, ret
      b.remember_state();
      b.stack_free(e + 5, 8).restore_register(e + 5, 3).pop_frame_pointer(e + 6);
      b.restore_state(e + 7);
    }
    auto expected = b.finish(p.desc.start, p.desc.size);
    REQUIRE(expected.ok());
    CHECK(p.desc == *expected);
  }
  SECTION("recipes: frame pointer only") {
    const shape s{true, 0, 0, false};
    placed p = place_function(*fx.w, s, "fp_only");
    // push rbp; mov rbp, rsp ... mov rsp, rbp (3); pop rbp; ret
    std::vector<recipes::epilogue> eps;
    for (uint32_t e : p.epilogue_starts) eps.push_back({e + 4, e + 5});
    auto expected = recipes::frame_pointer(abi::amd64, p.desc.start, p.desc.size, 1, 4,
                                           span<const recipes::epilogue>(eps.data(), eps.size()));
    REQUIRE(expected.ok());
    CHECK(p.desc == *expected);
  }
  SECTION("recipes: SP frame") {
    const shape s{false, 0, 64, false};
    placed p = place_function(*fx.w, s, "sp_only");
    const auto frame_bytes = static_cast<int32_t>(make_frame(s).stackAdjustment());
    // sub rsp, N (4) ... add rsp, N (4); ret
    std::vector<recipes::epilogue> eps;
    for (uint32_t e : p.epilogue_starts) eps.push_back({e + 4, e + 5});
    auto expected = recipes::sp_frame(abi::amd64, p.desc.start, p.desc.size, 4, frame_bytes,
                                      span<const recipes::epilogue>(eps.data(), eps.size()));
    REQUIRE(expected.ok());
    CHECK(p.desc == *expected);
  }
}

TEST_CASE("asmjit glue: frames that rows cannot describe are refused, the builder untouched") {
  aj::CodeHolder code;
  code.init(aj::Environment::host());
  x86::Assembler a(&code);
  frame_builder rows;
  const aj::FuncFrame realigned = make_frame({false, 2, 64, true, 64});
  auto r = asmjit_glue::emit_prolog(a, realigned, rows);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::unsupported);
  CHECK_THAT(r.error().message(), Catch::Contains("dynamic stack alignment"));
  CHECK(a.offset() == 0);  // refused before anything was emitted
  CHECK(rows.current() == entry_row(abi::amd64));
}

TEST_CASE("asmjit glue: placement publishes in one call, asmjit errors are named") {
  SECTION("placed, appended, published, callable") {
    session_fixture fx;
    aj::CodeHolder code;
    code.init(aj::Environment::host());
    x86::Assembler a(&code);
    a.mov(x86::eax, 42);
    a.ret();
    auto f = asmjit_glue::place(*fx.w, "answer", code, frame_builder{});
    REQUIRE(f.ok());
    REQUIRE(fx.w->publish().ok());
    const auto fns = fx.w->functions();
    REQUIRE(fns.size() == 1);
    CHECK(fns[0].name == "answer");
    CHECK(fns[0].start == f->start);
    CHECK(fns[0].size == 6);
    CHECK(reinterpret_cast<int (*)()>(f->start)() == 42);
    CHECK_FALSE(fx.w->published_sframe().empty());
  }
  SECTION("a label used but never bound") {
    session_fixture fx;
    aj::CodeHolder code;
    code.init(aj::Environment::host());
    x86::Assembler a(&code);
    a.jmp(a.newLabel());
    a.ret();
    auto f = asmjit_glue::place(*fx.w, "dangling", code, frame_builder{});
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code() == errc::invalid_argument);
    CHECK_THAT(f.error().message(), Catch::Contains("'dangling'"));
    CHECK_THAT(f.error().message(), Catch::Contains("never bound"));
    CHECK(fx.w->functions().empty());
  }
  SECTION("the window is too small") {
    session_fixture fx(4096);
    aj::CodeHolder code;
    code.init(aj::Environment::host());
    x86::Assembler a(&code);
    for (int i = 0; i < 5000; ++i) a.nop();
    a.ret();
    auto f = asmjit_glue::place(*fx.w, "huge", code, frame_builder{});
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code() == errc::limit_exceeded);
    CHECK_THAT(f.error().message(), Catch::Contains("'huge'"));
  }
  SECTION("an asmjit error string comes back") {
    aj::CodeHolder code;
    std::vector<uint8_t> out(16);
    // Never initialized: asmjit refuses to relocate it.
    auto f = asmjit_glue::copy_code(code, 0x1000, span<uint8_t>(out.data(), out.size()),
                                    "uninitialized");
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error().message(), Catch::Contains("'uninitialized'"));
    CHECK_THAT(f.error().message(), Catch::Contains("asmjit: "));
  }
}

#else

TEST_CASE("asmjit glue: asmjit not installed") {
  (void)jitunwind::test::skip_or_fail("asmjit's development files not found: the glue is untested");
}

#endif
