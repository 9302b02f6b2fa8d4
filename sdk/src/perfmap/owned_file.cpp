#include "perfmap/owned_file.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace jitunwind::detail {

result<int> open_owned_file(const std::string& path, bool append, const char* what) {
  // O_NONBLOCK: opening a planted FIFO for writing must fail (ENXIO) instead of blocking.
  const int flags =
      (append ? (O_WRONLY | O_APPEND) : O_RDWR) | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int e = errno;
    switch (e) {
      case ELOOP:
        return make_error(errc::permission_denied,
                          "%s %s is a symbolic link; refusing to follow it (someone may have "
                          "planted it)",
                          what, path.c_str());
      case ENXIO:
      case EISDIR:
        return make_error(errc::permission_denied, "%s %s exists and is not a regular file", what,
                          path.c_str());
      case EACCES:
      case EPERM:
      case EROFS:
        return make_error(errc::permission_denied, "%s %s: cannot open for writing: %s", what,
                          path.c_str(), std::strerror(e));
      // ENOENT also comes from a directory that exists but cannot hold new files (/proc).
      case ENOENT:
        return make_error(errc::not_found,
                          "%s %s: cannot create it: %s (a missing directory, or one where no "
                          "files can be created)",
                          what, path.c_str(), std::strerror(e));
      case ENOTDIR:
        return make_error(errc::not_found,
                          "%s %s: cannot create it: a part of its directory is "
                          "not a directory",
                          what, path.c_str());
      default:
        return make_error(errc::io_error, "%s %s: open failed: %s", what, path.c_str(),
                          std::strerror(e));
    }
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(errc::io_error, "%s %s: fstat failed: %s", what, path.c_str(),
                      std::strerror(e));
  }
  const auto refuse = [&](error err) -> result<int> {
    ::close(fd);
    return err;
  };
  if (!S_ISREG(st.st_mode))
    return refuse(make_error(errc::permission_denied, "%s %s exists and is not a regular file",
                             what, path.c_str()));
  if (st.st_uid != ::geteuid())
    return refuse(make_error(errc::permission_denied,
                             "%s %s is owned by uid %u, not by this process (euid %u); refusing "
                             "to write into it (perf would ignore it too)",
                             what, path.c_str(), static_cast<unsigned>(st.st_uid),
                             static_cast<unsigned>(::geteuid())));
  if (st.st_nlink != 1)
    return refuse(make_error(errc::permission_denied,
                             "%s %s has %lu hard links; refusing to write into a shared inode",
                             what, path.c_str(), static_cast<unsigned long>(st.st_nlink)));
  if (::fcntl(fd, F_SETFL, flags & ~(O_NONBLOCK | O_CREAT | O_NOFOLLOW | O_CLOEXEC)) != 0) {
    const int e = errno;
    return refuse(make_error(errc::io_error, "%s %s: fcntl failed: %s", what, path.c_str(),
                             std::strerror(e)));
  }
  return fd;
}

result<void> append_whole(int fd, const iovec* iov, int iovcnt, off_t& file_end,
                          const std::string& path) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  // Fast path: one writev does it (regular files write everything unless the disk is full or
  // a signal arrives).
  ssize_t n = ::writev(fd, iov, iovcnt);
  if (n >= 0 && static_cast<size_t>(n) == total) {
    file_end += static_cast<off_t>(total);
    return {};
  }
  std::vector<iovec> rest(iov, iov + iovcnt);
  size_t first = 0;
  size_t done = 0;
  bool have_result = true;  // `n` holds the result of the first attempt
  while (done < total) {
    if (!have_result) n = ::writev(fd, rest.data() + first, static_cast<int>(rest.size() - first));
    have_result = false;
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      const int e = n < 0 ? errno : ENOSPC;  // a 0-byte write of a non-empty buffer: no progress
      if (done > 0) {
        // Cut the partial record off: a reader must see whole records or none.
        if (::ftruncate(fd, file_end) == 0) ::lseek(fd, file_end, SEEK_SET);
      }
      return make_error(errc::io_error, "%s: write of %zu bytes failed after %zu: %s", path.c_str(),
                        total, done, std::strerror(e));
    }
    done += static_cast<size_t>(n);
    auto left = static_cast<size_t>(n);
    while (first < rest.size() && left >= rest[first].iov_len) {
      left -= rest[first].iov_len;
      ++first;
    }
    if (left > 0) {
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + left;
      rest[first].iov_len -= left;
    }
  }
  file_end += static_cast<off_t>(total);
  return {};
}

}  // namespace jitunwind::detail
