#include "unwind_check.h"

#include "runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace toylang {

using namespace jitunwind;

struct unwind_checker::native_table {
  std::string object;
  sframe::table table;
};

namespace {

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

// State shared with the SIGTRAP handler (one check at a time).
struct trap_state {
  const sframe::unwinder* unwinder = nullptr;
  sframe::memory_reader reader;
  size_t max_frames = 0;
  sframe::unwinder::trace trace;
  bool fired = false;
};
trap_state trap;

void on_sigtrap(int, siginfo_t*, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  sframe::regs r;
#if defined(__aarch64__)
  r.pc = uc->uc_mcontext.pc;
  r.sp = uc->uc_mcontext.sp;
  r.fp = uc->uc_mcontext.regs[29];
  r.lr = uc->uc_mcontext.regs[30];
  uc->uc_mcontext.pc += 4;  // brk reports its own address: resume after it
#else
  r.pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
  r.sp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]);
  r.fp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RBP]);
#endif
  if (trap.unwinder != nullptr) trap.trace = trap.unwinder->unwind(r, trap.reader, trap.max_frames);
  trap.fired = true;
}

// The sampled "instruction": a trap inside an ordinary function of this (SFrame-described)
// file, so the walk starts exactly like a profiler's sample in native code.
__attribute__((noinline)) void trap_here() {
#if defined(__aarch64__)
  asm volatile("brk #0" ::: "memory");
#else
  asm volatile("int3" ::: "memory");
#endif
}

struct stack_bounds {
  uint64_t low, high;
};

bool read_stack(void* user, uint64_t address, void* out, size_t len) {
  const auto* b = static_cast<const stack_bounds*>(user);
  if (address < b->low || address > b->high || b->high - address < len) return false;
  std::memcpy(out, reinterpret_cast<const void*>(address), len);
  return true;
}

}  // namespace

std::unique_ptr<unwind_checker> unwind_checker::create(std::string& error) {
  std::unique_ptr<unwind_checker> c(new unwind_checker);
  struct collect {
    unwind_checker* self;
    std::string errors;
  } ctx{c.get(), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* user) -> int {
        auto& found = *static_cast<collect*>(user);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_GNU_SFRAME) continue;
          const uint64_t address = info->dlpi_addr + ph.p_vaddr;
          const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(address),
                                               ph.p_memsz);
          const std::string name = info->dlpi_name[0] ? info->dlpi_name : "(executable)";
          auto t = sframe::table::create(bytes, address);
          if (!t) {
            found.errors += name + ": " + t.error().message() + "; ";
            continue;
          }
          found.self->natives_.push_back(
              std::make_unique<native_table>(native_table{name, std::move(*t)}));
        }
        return 0;
      },
      &ctx);
  bool have_executable = false;
  for (const auto& n : c->natives_) have_executable |= n->object == "(executable)";
  if (!have_executable) {
    error = "the executable has no usable .sframe section (built without as --gsframe?)";
    if (!ctx.errors.empty()) error += ": " + ctx.errors;
    return nullptr;
  }
  pthread_attr_t attr;
  void* base = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0 ||
      pthread_attr_getstack(&attr, &base, &size) != 0) {
    error = "cannot determine the stack bounds of the current thread";
    return nullptr;
  }
  pthread_attr_destroy(&attr);
  c->stack_low_ = reinterpret_cast<uint64_t>(base);
  c->stack_high_ = c->stack_low_ + size;

  struct sigaction sa = {};
  sa.sa_sigaction = &on_sigtrap;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTRAP, &sa, nullptr) != 0) {
    error = std::string("sigaction(SIGTRAP): ") + std::strerror(errno);
    return nullptr;
  }
  return c;
}

unwind_checker::~unwind_checker() {
  signal(SIGTRAP, SIG_DFL);
}

std::string unwind_checker::symbol(uint64_t address) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(address), &info) == 0 || info.dli_sname == nullptr) return "?";
  return info.dli_sname;
}

unwind_outcome unwind_checker::check(std::span<const uint64_t> truth,
                                     std::span<const jit_sframe> sections) {
  const std::optional<sframe::regs> interrupted = start_;
  start_.reset();
  unwind_outcome out;
  sframe::unwinder unwinder(native_abi);
  std::vector<sframe::table> jit_tables;
  jit_tables.reserve(sections.size());
  for (const jit_sframe& s : sections) {
    auto t = sframe::table::create(s.bytes, s.section_address);
    if (!t) {
      out.message = "JIT SFrame section at 0x" + std::to_string(s.section_address) +
                    " rejected: " + t.error().message();
      ++checks_;
      return out;
    }
    jit_tables.push_back(std::move(*t));
  }
  for (const auto& t : jit_tables) (void)unwinder.add(&t);
  for (const auto& n : natives_) (void)unwinder.add(&n->table);

  stack_bounds bounds{stack_low_, stack_high_};
  trap.unwinder = &unwinder;
  trap.reader = {&read_stack, &bounds};
  // Interpreters have several native frames per JIT frame (eval, call, trampoline).
  trap.max_frames = 8 * truth.size() + 128;
  trap.fired = false;
  if (interrupted) {
    ++interrupted_;
    trap.trace = unwinder.unwind(*interrupted, trap.reader, trap.max_frames);
    trap.fired = true;
  } else {
    trap_here();
  }
  trap.unwinder = nullptr;
  ++checks_;
  if (!trap.fired) {
    out.message = "SIGTRAP was not delivered to the checker (another handler or a debugger?)";
    return out;
  }
  out.pcs = std::move(trap.trace.pcs);
  out.reason = trap.trace.reason;
  auto in_jit = [&](uint64_t pc) {
    for (const jit_sframe& s : sections) {
      if (pc >= s.text_start && pc < s.text_end) return true;
    }
    return false;
  };
  for (size_t i = 1; i < out.pcs.size(); ++i) {
    if (in_jit(out.pcs[i])) out.jit_pcs.push_back(out.pcs[i]);
  }
  out.exact = std::equal(out.jit_pcs.begin(), out.jit_pcs.end(), truth.begin(), truth.end());
  for (size_t i = 1; i < out.pcs.size() && !out.complete; ++i) {
    out.complete = symbol(out.pcs[i]) == "main";
  }
  if (!out.exact) {
    out.message = "unwound " + std::to_string(out.jit_pcs.size()) + " JIT frames, expected " +
                  std::to_string(truth.size());
    for (size_t i = 0; i < std::max(out.jit_pcs.size(), truth.size()); ++i) {
      const uint64_t got = i < out.jit_pcs.size() ? out.jit_pcs[i] : 0;
      const uint64_t want = i < truth.size() ? truth[i] : 0;
      if (got != want) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "; first difference at %zu: 0x%llx vs 0x%llx", i,
                      static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
        out.message += buf;
        break;
      }
    }
  } else if (!out.complete) {
    out.message = std::string("walk stopped (") + sframe::to_string(out.reason) +
                  ") before main, at " + symbol(out.pcs.back());
  }
  exact_ += out.exact ? 1 : 0;
  complete_ += out.complete ? 1 : 0;
  return out;
}

std::string unwind_checker::summary() const {
  std::string s = "verify-unwind: " + std::to_string(checks_) + " checkpoints, " +
                  std::to_string(exact_) + " exact, " + std::to_string(complete_) + " complete";
  if (interrupted_ != 0) s += ", " + std::to_string(interrupted_) + " from a trap in JIT code";
  return s;
}

}  // namespace toylang
