// Harness of the real-unwinding test (see unwind_target.c). Reads the program's own .sframe
// from /proc/self/exe with our ELF reader, places it at its run-time address (PIE load bias from
// dl_iterate_phdr), catches the timer signal that interrupts `spin`, copies the interrupted
// registers and stack, and afterwards unwinds the copy and compares with the recorded chain.
// Prints both chains; exit status 0 when they are identical.
#include <jitunwind/sframe.h>

#include <jitunwind/toolkit/elf_reader.hpp>

#include <link.h>
#include <signal.h>
#include <sys/time.h>
#include <ucontext.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

extern "C" {
extern uintptr_t recorded[64];
extern int recorded_count;
extern volatile int spin_armed;
extern volatile int spin_done;
int spin(int);
int harness_setup(void);
int harness_check(void);
}

namespace {

using namespace jitunwind;

std::vector<uint8_t> sframe_bytes;
std::optional<sframe::table> sframe_table;
uint64_t stack_top = 0;

// Filled by the signal handler.
uint8_t stack_copy[4 << 20];
uint64_t copy_base = 0, copy_len = 0;
sframe::regs interrupted;
volatile sig_atomic_t captured = 0;

void on_timer(int, siginfo_t*, void* ctx) {
  if (!spin_armed || captured) return;
  const auto* uc = static_cast<const ucontext_t*>(ctx);
#if defined(__aarch64__)
  const uint64_t pc = uc->uc_mcontext.pc;
#else
  const uint64_t pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
#endif
  // Only a tick that lands inside `spin` is interesting (it may land in the store that arms).
  const auto hit = sframe_table->find(pc);  // no allocation: safe in a handler
  if (!hit || hit->function_start != reinterpret_cast<uint64_t>(&spin)) return;
  interrupted.pc = pc;
#if defined(__aarch64__)
  interrupted.sp = uc->uc_mcontext.sp;
  interrupted.fp = uc->uc_mcontext.regs[29];
  interrupted.lr = uc->uc_mcontext.regs[30];  // spin is a leaf: its return address is here
#else
  interrupted.sp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]);
  interrupted.fp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RBP]);
#endif
  copy_base = interrupted.sp;
  copy_len = stack_top - copy_base;
  if (copy_len > sizeof stack_copy) copy_len = sizeof stack_copy;
  std::memcpy(stack_copy, reinterpret_cast<const void*>(copy_base), copy_len);
  captured = 1;
  spin_done = 1;
}

bool read_copy(void*, uint64_t address, void* out, size_t len) {
  if (address < copy_base || address - copy_base > copy_len ||
      len > copy_len - (address - copy_base))
    return false;
  std::memcpy(out, stack_copy + (address - copy_base), len);
  return true;
}

int first_object(dl_phdr_info* info, size_t, void* data) {
  *static_cast<uint64_t*>(data) = info->dlpi_addr;  // the main program comes first
  return 1;
}

}  // namespace

extern "C" int harness_setup(void) {
  auto file = toolkit::read_whole_file("/proc/self/exe");
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.error().message().c_str());
    return 1;
  }
  auto img = toolkit::elf_image::parse(*file);
  if (!img.ok()) {
    std::fprintf(stderr, "%s\n", img.error().message().c_str());
    return 1;
  }
  const auto* sec = img->find_section(".sframe");
  if (sec == nullptr) {
    std::fprintf(stderr, "no .sframe section in /proc/self/exe\n");
    return 1;
  }
  auto data = img->section_data(*sec);
  if (!data.ok()) return 1;
  sframe_bytes.assign(data->begin(), data->end());
  uint64_t bias = 0;
  dl_iterate_phdr(first_object, &bias);
  auto t = sframe::table::create(sframe_bytes, bias + sec->addr);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.error().message().c_str());
    return 1;
  }
  sframe_table.emplace(std::move(*t));
  std::printf("sframe: version %u, %u functions, section at 0x%" PRIx64 " (bias 0x%" PRIx64 ")\n",
              sframe_table->info().version, sframe_table->info().num_fdes, bias + sec->addr, bias);

  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("[stack]") == std::string::npos) continue;
    stack_top = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
  }
  if (stack_top == 0) return 1;

  struct sigaction sa {};
  sa.sa_sigaction = on_timer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, nullptr);
  itimerval tv{};
  tv.it_interval.tv_usec = 1000;
  tv.it_value.tv_usec = 1000;
  setitimer(ITIMER_PROF, &tv, nullptr);
  return 0;
}

extern "C" int harness_check(void) {
  itimerval off{};
  setitimer(ITIMER_PROF, &off, nullptr);
  if (!captured) {
    std::printf("FAIL: no timer tick landed in spin\n");
    return 1;
  }
  sframe::unwinder u(native_abi);
  if (!u.add(&*sframe_table).ok()) return 1;
  const auto trace = u.unwind(interrupted, {read_copy, nullptr}, 64);

  std::vector<uint64_t> expect(recorded, recorded + recorded_count);
  std::reverse(expect.begin(), expect.end());
  std::printf("recorded:");
  for (uint64_t a : expect) std::printf(" %" PRIx64, a);
  std::printf("\nunwound: %" PRIx64 " |", trace.pcs.empty() ? 0 : trace.pcs[0]);
  for (size_t i = 1; i < trace.pcs.size(); ++i) std::printf(" %" PRIx64, trace.pcs[i]);
  std::printf("\nstop: %s\n", to_string(trace.reason));
  const std::vector<uint64_t> got(trace.pcs.begin() + (trace.pcs.empty() ? 0 : 1), trace.pcs.end());
  const bool same = got == expect;
  // The walk ends after main's return address, in libc, which has no .sframe here.
  const bool clean_stop = trace.reason == sframe::stop_reason::no_table;
  std::printf("%s\n", same && clean_stop ? "PASS" : "FAIL");
  return same && clean_stop ? 0 : 1;
}
