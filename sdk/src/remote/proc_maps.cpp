#include "remote/proc_maps.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace jitunwind::remote::detail {

using jitunwind::detail::make_error;

std::vector<map_line> parse_maps(std::string_view text) {
  std::vector<map_line> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    map_line m;
    char perms[8] = {}, dev[16] = {};
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %15s %" SCNu64 " %n",
                    &m.start, &m.end, perms, &m.offset, dev, &m.inode, &path_at) < 6) {
      continue;
    }
    m.perms = perms;
    m.device = dev;
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
    out.push_back(std::move(m));
  }
  return out;
}

result<std::vector<map_line>> read_maps(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/maps", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return make_error(errc::not_found, "pid %d: no such process", pid);
    if (e == EACCES || e == EPERM) {
      return make_error(errc::permission_denied, "pid %d: cannot read %s: %s", pid, path,
                        std::strerror(e));
    }
    return make_error(errc::io_error, "pid %d: cannot open %s: %s", pid, path, std::strerror(e));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      if (e == ESRCH) return make_error(errc::not_found, "pid %d: no such process", pid);
      return make_error(e == EACCES || e == EPERM ? errc::permission_denied : errc::io_error,
                        "pid %d: reading %s: %s", pid, path, std::strerror(e));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return parse_maps(text);
}

}  // namespace jitunwind::remote::detail
