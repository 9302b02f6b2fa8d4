#include "remote/target_memory.hpp"

#include "common/error.hpp"

#include <sys/uio.h>
#include <cerrno>
#include <cstring>

namespace jitunwind::remote::detail {

using jitunwind::detail::make_error;

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
    case ENOMEM:
      return make_error(errc::no_memory, "pid %d: process_vm_readv of %zu bytes: %s", pid_, size,
                        std::strerror(e));
    default:
      return make_error(errc::io_error, "pid %d: process_vm_readv of %zu bytes at 0x%llx: %s", pid_,
                        size, static_cast<unsigned long long>(address), std::strerror(e));
  }
}

}  // namespace jitunwind::remote::detail
