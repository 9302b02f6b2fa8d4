#include <jitunwind/toolkit/output_file.hpp>

#include <jitunwind/toolkit/format.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace jitunwind::toolkit {

namespace {

// The directory part of `path` ("." for a bare name) and the last component.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// An open directory, closed on destruction.
struct dir_fd {
  int fd = -1;
  ~dir_fd() {
    if (fd >= 0) ::close(fd);
  }
};

// "SVG flame graph out.svg", or the path alone: how messages start.
std::string named(const char* what, const std::string& path) {
  return *what ? std::string(what) + " " + path : path;
}

// PATH may be replaced: absent, or a regular file. Opens its directory into `dir`.
result<std::string> prepare(const std::string& path, const char* what, dir_fd& dir) {
  auto [dir_path, base] = split_path(path);
  const std::string who = named(what, path);
  if (base.empty() || base == "." || base == "..")
    return make_error(errc::invalid_argument, "%s: not a file name", who.c_str());
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return make_error(errc::permission_denied,
                        "%s: is a symbolic link: outputs are never written through links (give "
                        "the file it points to, or remove the link)",
                        who.c_str());
    if (!S_ISREG(st.st_mode))
      return make_error(errc::io_error, "%s: %s, not a regular file", who.c_str(),
                        file_type_text(st.st_mode));
  } else if (errno != ENOENT) {
    return make_error(errc::io_error, "%s: cannot create: %s", who.c_str(), std::strerror(errno));
  }
  dir.fd = ::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd < 0)
    return make_error(errno == ENOENT ? errc::not_found : errc::io_error,
                      "%s: cannot create: directory %s: %s", who.c_str(), dir_path.c_str(),
                      std::strerror(errno));
  return base;
}

// Creates a new file beside the output: ".NAME.XXXXXXXX" (never an existing one, never through
// a link). Returns its descriptor and sets `name`.
result<int> create_temporary(int dir, const std::string& base, const std::string& path,
                             const char* what, std::string& name) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const unsigned tag = static_cast<unsigned>(ts.tv_nsec) ^
                         (static_cast<unsigned>(::getpid()) << 12) ^
                         (counter.fetch_add(1) * 2654435761u);
    name = format(".%s.%08x", base.c_str(), tag);
    const int fd =
        ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST)
      return make_error(
          errno == EACCES || errno == EPERM ? errc::permission_denied : errc::io_error,
          "%s: cannot create a file in its directory: %s", named(what, path).c_str(),
          std::strerror(errno));
  }
  return make_error(errc::io_error, "%s: cannot create: no free temporary name in its directory",
                    named(what, path).c_str());
}

// A new file beside PATH (which may be replaced): its descriptor, and into `dir`, `base`,
// `temporary` what renaming or removing it needs.
result<int> begin_output(const std::string& path, const char* what, dir_fd& dir, std::string& base,
                         std::string& temporary) {
  auto name = prepare(path, what, dir);
  if (!name) return std::move(name).error();
  base = std::move(*name);
  return create_temporary(dir.fd, base, path, what, temporary);
}

}  // namespace

result<void> replace_file(const std::string& path, std::span<const uint8_t> bytes,
                          const char* what) {
  dir_fd dir;
  std::string base, temporary;
  auto fd = begin_output(path, what, dir, base, temporary);
  if (!fd) return std::move(fd).error();
  size_t done = 0;
  int failed = 0;
  while (done < bytes.size() && failed == 0) {
    const ssize_t n = ::write(*fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno != EINTR) failed = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (::close(*fd) != 0 && failed == 0) failed = errno;
  if (failed == 0 && ::renameat(dir.fd, temporary.c_str(), dir.fd, base.c_str()) != 0)
    failed = errno;
  if (failed != 0) {
    ::unlinkat(dir.fd, temporary.c_str(), 0);
    return make_error(errc::io_error, "%s: cannot write: %s", named(what, path).c_str(),
                      std::strerror(failed));
  }
  return {};
}

result<void> replace_file(const std::string& path, std::string_view text, const char* what) {
  return replace_file(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, what);
}

result<void> check_output_path(const std::string& path, const char* what) {
  dir_fd dir;
  std::string base, temporary;
  auto fd = begin_output(path, what, dir, base, temporary);
  if (!fd) return std::move(fd).error();
  ::close(*fd);
  ::unlinkat(dir.fd, temporary.c_str(), 0);
  return {};
}

}  // namespace jitunwind::toolkit
