// Two JITs, several GDB JIT descriptors in one process (see shim.cpp):
//   main -> llvm_like_fn -> shim_fn -> shared_fn -> native_breakpoint
// - llvm_like_fn is registered by this program's own JIT interface code (strong
//   __jit_debug_descriptor / __jit_debug_register_code defined below, like a program with LLVM's
//   ORC JIT linked in);
// - shim_fn by jitunwind's registrar inside libtwojit_shim.so, which defines its own pair too;
// - shared_fn by jitunwind's registrar linked statically into this program (its weak
//   definitions lost to the strong ones below).
// gdb reads only the first definer's descriptor (this program's), so with policy automatic
// both registrars must join that list (shared).
#include <jitunwind/frame.h>

#include "gdbjit/gdbjit.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail;

extern "C" {
gdbjit::jit_descriptor __jit_debug_descriptor = {1, 0, nullptr, nullptr};
__attribute__((noinline, used)) void __jit_debug_register_code() noexcept {
  asm volatile("" ::: "memory");
}
int shim_register(const char* name, uint64_t start, uint64_t size, const function_desc* frame,
                  char* report, size_t report_len);
__attribute__((noinline)) void native_breakpoint() {
  asm volatile("" ::: "memory");
}
}

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "twojit: %s\n", what);
  std::exit(2);
}

// sub rsp, 8; mov rax, callee; call rax; add rsp, 8; ret — and its rows.
std::vector<uint8_t> call_through(uint64_t callee) {
  std::vector<uint8_t> c = {0x48, 0x83, 0xec, 0x08, 0x48, 0xb8};
  for (int i = 0; i < 8; ++i) c.push_back(static_cast<uint8_t>(callee >> (8 * i)));
  c.insert(c.end(), {0xff, 0xd0, 0x48, 0x83, 0xc4, 0x08, 0xc3});
  return c;
}

function_desc rows_at(uint64_t start) {
  const recipes::epilogue ep{20, 21};
  auto f = recipes::sp_frame(abi::amd64, start, 21, 4, 8, std::span(&ep, 1));
  if (!f) die(f.error().message().c_str());
  return *f;
}

// What an LLVM-style JIT does with its own descriptor.
void llvm_like_register(const std::vector<uint8_t>& object) {
  auto* e = new gdbjit::jit_code_entry{};
  e->symfile_addr = reinterpret_cast<const char*>(object.data());
  e->symfile_size = object.size();
  e->next_entry = __jit_debug_descriptor.first_entry;
  if (e->next_entry) e->next_entry->prev_entry = e;
  __jit_debug_descriptor.first_entry = e;
  __jit_debug_descriptor.relevant_entry = e;
  __jit_debug_descriptor.action_flag = gdbjit::jit_register;
  __jit_debug_register_code();
}

}  // namespace

int main() {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<uint8_t*>(
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) die("mmap");
  const auto base = reinterpret_cast<uint64_t>(mem);
  const uint64_t llvm_like = base, shim = base + 64, shared = base + 128;
  const auto a = call_through(shim), b = call_through(shared),
             c = call_through(reinterpret_cast<uint64_t>(&native_breakpoint));
  std::memcpy(mem, a.data(), a.size());
  std::memcpy(mem + 64, b.data(), b.size());
  std::memcpy(mem + 128, c.data(), c.size());
  if (::mprotect(mem, page, PROT_READ | PROT_EXEC) != 0) die("mprotect");
  const function_desc fa = rows_at(llvm_like), fb = rows_at(shim), fc = rows_at(shared);

  const gdbjit::function_symbol sa{"llvm_like_fn", llvm_like, a.size(), &fa};
  auto object = gdbjit::build_object(abi::amd64, std::span(&sa, 1));
  if (!object) die(object.error().message().c_str());
  static std::vector<uint8_t> keep = std::move(*object);
  llvm_like_register(keep);

  char report[256];
  if (shim_register("shim_fn", shim, b.size(), &fb, report, sizeof report) != 0) die(report);
  std::printf("shim %s\n", report);

  auto reg = gdbjit::registrar::create({});
  if (!reg) die(reg.error().message().c_str());
  const gdbjit::descriptor_info& d = (*reg)->descriptor();
  std::printf("exe policy=%s first=%s\n",
              d.policy == gdbjit::descriptor_policy::own ? "own" : "shared",
              d.first == d.ours        ? "ours"
              : d.first_object.empty() ? "main"
                                       : "other");
  const gdbjit::function_symbol sc{"shared_fn", shared, c.size(), &fc};
  if (!(*reg)->add(std::span(&sc, 1))) die("shared registration");
  std::fflush(stdout);

  reinterpret_cast<void (*)()>(llvm_like)();
  return 0;
}
