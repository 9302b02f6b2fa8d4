// Proof that the default configuration never issues an unknown prctl option or system call: a
// forked child installs a seccomp filter that kills the process on any system call outside a
// small allowlist (and on every prctl: the SDK's default path uses none), then drives the
// kernel backend, the registry and the USDT events the way a session does. Positive controls
// show the filter really kills a configured (explicit) interface.
#include <catch2/catch.hpp>

#include "kernel/kernel_backend.hpp"
#include "registry/registry_writer.hpp"
#include "usdt_events/events.hpp"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::detail;

namespace {

// What the default publishing path may do: memory management, futexes, identity, time, exit.
const std::vector<long> allowed_syscalls = {
    SYS_read,      SYS_write,       SYS_close,        SYS_fstat,          SYS_newfstatat,
    SYS_lseek,     SYS_mmap,        SYS_munmap,       SYS_mprotect,       SYS_mremap,
    SYS_brk,       SYS_madvise,     SYS_rt_sigaction, SYS_rt_sigprocmask, SYS_rt_sigreturn,
    SYS_futex,     SYS_getpid,      SYS_gettid,       SYS_clock_gettime,  SYS_clock_nanosleep,
    SYS_nanosleep, SYS_sched_yield, SYS_getrandom,    SYS_exit,           SYS_exit_group,
};
// prctl options the SDK is expected to use by default: none.
const std::vector<unsigned> allowed_prctl_options = {};

bool install_filter() {
  std::vector<sock_filter> prog;
  auto stmt = [&](uint16_t code, uint32_t k) { prog.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
    prog.push_back(BPF_JUMP(code, k, jt, jf));
  };
  const uint32_t kill = SECCOMP_RET_KILL_PROCESS, allow = SECCOMP_RET_ALLOW;
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  stmt(BPF_RET | BPF_K, kill);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  // prctl: allowed options only.
  jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0,
       static_cast<uint8_t>(allowed_prctl_options.size() + 2));
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0]));
  for (unsigned option : allowed_prctl_options) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, option, 0, 1);
    stmt(BPF_RET | BPF_K, allow);
  }
  stmt(BPF_RET | BPF_K, kill);
  for (long nr : allowed_syscalls) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    stmt(BPF_RET | BPF_K, allow);
  }
  stmt(BPF_RET | BPF_K, kill);
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0;
}

// Runs `body` in a forked child under the filter; returns the wait status.
template <class F>
int run_filtered(F&& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!install_filter()) _exit(90);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// What a session does with the kernel backend, the registry and the events, with the kernel
// interface taken from `spec` (empty: the default, i.e. the environment, which is unset here).
int session_like(const char* spec) {
  static uint8_t sframe[128];
  static uint8_t text[256];
  auto backend =
      kernel::kernel_backend::create(kernel::configured_interface(spec), kernel::real_syscalls());
  if (!backend) return 10;
  const kernel::kernel_window kw{reinterpret_cast<uint64_t>(sframe), sizeof sframe,
                                 reinterpret_cast<uint64_t>(text), sizeof text};
  registry_window rw;
  rw.window_id = 1;
  rw.text_start = kw.text_start;
  rw.text_size = kw.text_size;
  rw.sframe_address = kw.sframe_address;
  rw.sframe_size = kw.sframe_size;
  for (int round = 0; round < 3; ++round) {
    auto pub = registry().add(rw);
    if (!pub) return 11;
    usdt_events::window_publish(rw.window_id, pub->generation, rw.text_start, rw.text_size,
                                rw.sframe_address, rw.sframe_size);
    usdt_events::code_add(rw.text_start, 16, "f", rw.window_id);
    (void)(*backend)->register_window(kw);
    if (!registry().retire(pub->slot)) return 12;
    usdt_events::window_retire(rw.window_id, pub->generation);
    (void)(*backend)->unregister_window(kw);
    if (!registry().release(pub->slot)) return 13;
    usdt_events::window_free(rw.window_id, pub->generation);
  }
  (void)(*backend)->status_message();
  return 0;
}

}  // namespace

TEST_CASE("default configuration issues no prctl and no unexpected system call") {
  unsetenv("JITUNWIND_KERNEL_SFRAME");
  const int status = run_filtered([] { return session_like(""); });
  INFO("wait status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  // "off" spelled out, and an empty environment variable, behave the same.
  setenv("JITUNWIND_KERNEL_SFRAME", "", 1);
  const int empty_env = run_filtered([] { return session_like(""); });
  unsetenv("JITUNWIND_KERNEL_SFRAME");
  CHECK((WIFEXITED(empty_env) && WEXITSTATUS(empty_env) == 0));
  const int off = run_filtered([] { return session_like("off"); });
  CHECK((WIFEXITED(off) && WEXITSTATUS(off) == 0));
}

TEST_CASE("positive controls: the filter kills an explicitly configured interface") {
  for (const char* spec : {"prctl:79,80", "prctl-legacy:74,75", "syscall:1000,1001"}) {
    INFO(spec);
    const int status = run_filtered([spec] { return session_like(spec); });
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGSYS);
  }
  // Configured through the environment, too.
  setenv("JITUNWIND_KERNEL_SFRAME", "prctl:79,80", 1);
  const int from_env = run_filtered([] { return session_like(""); });
  unsetenv("JITUNWIND_KERNEL_SFRAME");
  REQUIRE(WIFSIGNALED(from_env));
  CHECK(WTERMSIG(from_env) == SIGSYS);
}
