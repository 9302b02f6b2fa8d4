// preload-host: a host that registers JIT code's CFI with libgcc itself, the way a runtime
// without LLVM does, to check that libjitunwind_preload.so never breaks it: registrations from
// several threads at once, and fork() while other threads register. It knows nothing of
// jitunwind; its .eh_frame is written by hand (one CIE, one FDE per function, absolute
// addresses).
//
//   preload-host threads|fork
//
// Prints "preload-host: ok ..." and exits 0 when libgcc found every registered function while it
// was registered and every fork child finished; exits 1 with the reason otherwise. The test runs
// it under a timeout, so a deadlock shows as one.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern "C" void __register_frame(void*);
extern "C" void __deregister_frame(void*);
extern "C" const void* _Unwind_Find_FDE(const void* pc, void* bases);

namespace {

struct dwarf_eh_bases {
  void* tbase;
  void* dbase;
  void* func;
};

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// An .eh_frame for `count` functions of `size` bytes from `code`: CFA = rsp + 8, return address
// at CFA - 8 (a function that is all `ret`).
std::vector<uint8_t> eh_frame(uint64_t code, uint64_t size, int count) {
  std::vector<uint8_t> out;
  // CIE: version 1, "zR", code alignment 1, data alignment -8, RA column 16, pointers absolute
  // (DW_EH_PE_absptr); DW_CFA_def_cfa rsp 8, DW_CFA_offset r16 1 (CFA - 8); padded with nops.
  const uint8_t cie_body[] = {0,  0, 0,    0,    1, 'z', 'R',  0, 1, 0x78,
                              16, 1, 0x00, 0x0c, 7, 8,   0x90, 1, 0, 0};
  put32(out, sizeof cie_body);
  out.insert(out.end(), cie_body, cie_body + sizeof cie_body);
  for (int i = 0; i < count; ++i) {
    const size_t fde = out.size();
    put32(out, 4 + 8 + 8 + 1 + 3);               // length: CIE pointer, pc begin/range, aug, pad
    put32(out, static_cast<uint32_t>(fde + 4));  // back to the CIE at offset 0
    put64(out, code + i * size);
    put64(out, size);
    out.push_back(0);  // augmentation data length
    out.insert(out.end(), {0, 0, 0});
  }
  put32(out, 0);  // terminator
  return out;
}

struct jit_code {
  uint8_t* code = nullptr;
  std::vector<uint8_t> frames;
};

constexpr uint64_t fn_size = 64;
constexpr int fns = 4;

jit_code make_code() {
  jit_code j;
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return j;
  std::memset(p, 0xc3, 4096);  // ret
  mprotect(p, 4096, PROT_READ | PROT_EXEC);
  j.code = static_cast<uint8_t*>(p);
  j.frames = eh_frame(reinterpret_cast<uint64_t>(p), fn_size, fns);
  return j;
}

bool found(const jit_code& j) {
  dwarf_eh_bases b{};
  for (int i = 0; i < fns; ++i)
    if (_Unwind_Find_FDE(j.code + i * fn_size + 1, &b) == nullptr) return false;
  return true;
}

// Registers, checks libgcc finds the functions, deregisters; `rounds` times.
bool churn(jit_code& j, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    __register_frame(j.frames.data());
    const bool ok = found(j);
    __deregister_frame(j.frames.data());
    if (!ok) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "threads" && mode != "fork") {
    std::fprintf(stderr, "Usage: preload-host threads|fork\n");
    return 2;
  }
  constexpr int threads = 4, rounds = 200, forks = 40;
  std::vector<jit_code> code(threads);
  for (auto& c : code) {
    c = make_code();
    if (c.code == nullptr) return std::perror("mmap"), 1;
  }
  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  if (mode == "threads") {
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        if (!churn(code[t], rounds)) ++failures;
      });
    for (auto& w : workers) w.join();
    if (failures != 0) return std::fprintf(stderr, "preload-host: libgcc lost a registration\n"), 1;
    std::printf("preload-host: ok, %d threads x %d registrations\n", threads, rounds);
    return 0;
  }
  // fork: three threads keep registering while the main thread forks. A child does not
  // register: libgcc's own registration lock is not fork-safe (without any preload, this host's
  // children deadlocked in __register_frame when a thread held it at the fork), so only what the
  // child can do anyway is checked: run and exit. The parent registers again after the forks:
  // the preload's lock, held across each fork, must have been released.
  for (int t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      while (!stop.load())
        if (!churn(code[t], 1)) ++failures;
    });
  int bad_children = 0;
  for (int i = 0; i < forks; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return std::perror("fork"), 1;
    if (pid == 0) _exit(0);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++bad_children;
  }
  stop = true;
  for (auto& w : workers) w.join();
  if (!churn(code[0], 3)) ++failures;
  if (failures != 0 || bad_children != 0) {
    std::fprintf(stderr, "preload-host: %d lost registrations, %d failed children\n",
                 failures.load(), bad_children);
    return 1;
  }
  std::printf("preload-host: ok, %d forks while %d threads registered\n", forks, threads - 1);
  return 0;
}
