#include "remote/target_memory.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace jitunwind::remote::detail {

using jitunwind::detail::make_error;

namespace {

// The same copy through /proc/PID/mem (one pread), for systems without process_vm_readv:
// qemu-user does not implement it (ENOSYS), nor do some seccomp profiles. The same ptrace
// access check applies.
result<void> read_proc_mem(pid_t pid, uint64_t address, void* out, size_t size) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/mem", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return make_error(errc::not_found, "pid %d: no such process", pid);
    return make_error(e == EACCES || e == EPERM ? errc::permission_denied : errc::io_error,
                      "pid %d: cannot open %s (process_vm_readv is not available): %s", pid,
                      path, std::strerror(e));
  }
  const ssize_t n = address > static_cast<uint64_t>(INT64_MAX)
                        ? (errno = EIO, -1)
                        : ::pread(fd, out, size, static_cast<off_t>(address));
  const int e = errno;
  ::close(fd);
  if (n == static_cast<ssize_t>(size)) return ok_result();
  if (n >= 0 || e == EIO || e == EFAULT) {
    return make_error(errc::out_of_range, "pid %d: 0x%llx (+%zu bytes) is not mapped (%s)", pid,
                      static_cast<unsigned long long>(address), size, path);
  }
  return make_error(errc::io_error, "pid %d: reading %zu bytes at 0x%llx from %s: %s", pid, size,
                    static_cast<unsigned long long>(address), path, std::strerror(e));
}

}  // namespace

result<void> process_memory::read(uint64_t address, void* out, size_t size) const {
  if (size == 0) return ok_result();
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return ok_result();
  if (n >= 0) {
    return make_error(errc::out_of_range, "pid %d: only %zd of %zu bytes at 0x%llx are readable",
                      pid_, n, size, static_cast<unsigned long long>(address));
  }
  const int e = errno;
  switch (e) {
    case ESRCH:
      return make_error(errc::not_found, "pid %d: no such process", pid_);
    case EPERM:
    case EACCES:
      return make_error(errc::permission_denied,
                        "pid %d: not allowed to read its memory (needs the same user and a "
                        "ptrace_scope that allows it, or CAP_SYS_PTRACE): %s",
                        pid_, std::strerror(e));
    case EFAULT:
      return make_error(errc::out_of_range, "pid %d: 0x%llx (+%zu bytes) is not mapped", pid_,
                        static_cast<unsigned long long>(address), size);
    case ENOSYS:
      return read_proc_mem(pid_, address, out, size);
    case ENOMEM:
      return make_error(errc::no_memory, "pid %d: process_vm_readv of %zu bytes: %s", pid_, size,
                        std::strerror(e));
    default:
      return make_error(errc::io_error, "pid %d: process_vm_readv of %zu bytes at 0x%llx: %s", pid_,
                        size, static_cast<unsigned long long>(address), std::strerror(e));
  }
}

}  // namespace jitunwind::remote::detail
