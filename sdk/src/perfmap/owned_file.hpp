// Private: opening the files perf reads (perf-PID.map, jit-PID.dump) in shared directories like
// /tmp without following planted symlinks, blocking on FIFOs or writing into someone else's file;
// and writing records so that a failure never leaves half a record behind.
#pragma once

#include <jitunwind/result.h>

#include <sys/uio.h>

#include <string>

namespace jitunwind::detail {

/// Opens (creating with mode 0644 if needed) `path` for writing — `O_APPEND` when `append`,
/// read-write otherwise (for mmap) — with `O_NOFOLLOW|O_CLOEXEC`, then checks it is a regular
/// file with one link owned by the effective user. `what` names the file in messages
/// ("perf map"). Errors: permission_denied (symlink, foreign owner, not a regular file, EACCES),
/// not_found (missing directory), io_error (anything else). Returns the descriptor.
result<int> open_owned_file(const std::string& path, bool append, const char* what);

/// Writes all of `iov` at the end of `fd` (a regular file this process alone appends to, under
/// the caller's lock). On a short write it continues; if the rest fails it truncates the file
/// back to where it was, so the file never ends in a partial record. `file_end` is the current
/// end of the file, updated on success.
result<void> append_whole(int fd, const iovec* iov, int iovcnt, off_t& file_end,
                          const std::string& path);

}  // namespace jitunwind::detail
