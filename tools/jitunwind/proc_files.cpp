#include "proc_files.hpp"

#include "cli.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace jitunwind::cli {

namespace {

// Whether thread `tid` has not ended. "PID (comm) S ...": the state follows the last ')' (the
// command name may contain one).
bool task_alive(pid_t tid) {
  std::ifstream stat("/proc/" + std::to_string(tid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

}  // namespace

long status_field(pid_t pid, std::string_view field, long otherwise) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field)) return std::atol(line.c_str() + field.size());
  return otherwise;
}

pid_t process_of(pid_t tid) {
  return static_cast<pid_t>(status_field(tid, "Tgid:", tid));
}

pid_t live_task(pid_t tgid, pid_t preferred) {
  if (preferred > 0 && process_of(preferred) == tgid && task_alive(preferred)) return preferred;
  if (task_alive(tgid)) return tgid;
  DIR* d = ::opendir(("/proc/" + std::to_string(tgid) + "/task").c_str());
  if (d == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = ::readdir(d)) {
    const pid_t tid = static_cast<pid_t>(std::atol(e->d_name));
    if (tid > 0 && task_alive(tid)) {
      found = tid;
      break;
    }
  }
  ::closedir(d);
  return found;
}

bool process_running(pid_t tgid) {
  return live_task(tgid, 0) != 0;
}

std::string perf_map_path(pid_t tgid, pid_t task) {
  const std::string proc = "/proc/" + std::to_string(task > 0 ? task : tgid);
  std::string dir = "/tmp";
  std::ifstream environ(proc + "/environ", std::ios::binary);
  constexpr std::string_view key = "JITUNWIND_DIR=";
  for (std::string var; std::getline(environ, var, '\0');)
    if (var.starts_with(key) && var.size() > key.size()) dir = var.substr(key.size());
  // "NSpid:\t4242\t7": the last one is the pid in the process's own namespace.
  pid_t own = tgid;
  std::ifstream status("/proc/" + std::to_string(tgid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("NSpid:")) continue;
    const size_t last = line.find_last_of(" \t");
    if (last != std::string::npos) own = static_cast<pid_t>(std::atol(line.c_str() + last + 1));
  }
  const std::string name = "/perf-" + std::to_string(own) + ".map";
  if (own > 0 && own != tgid) return proc + "/root" + dir + name;
  return dir + name;
}

result<void> check_perf_map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return error(errc::io_error, "perf map " + path + ": " + std::strerror(e));
  }
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return error(errc::io_error, "perf map " + path + ": not a regular file");
  return {};
}

void perf_map_names::update() {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return;
  }
  if (st.st_dev != device_ || st.st_ino != inode_ || static_cast<uint64_t>(st.st_size) < offset_) {
    // Another file (a new process with the same pid rewrote it), or the same one truncated.
    device_ = st.st_dev;
    inode_ = st.st_ino;
    offset_ = 0;
    tail_.clear();
    skipping_ = false;
    names_.clear();
  }
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    offset_ += static_cast<uint64_t>(n);
    consume(buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

void perf_map_names::consume(const char* p, size_t n) {
  while (n > 0) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', n));
    const size_t take = nl != nullptr ? static_cast<size_t>(nl - p) : n;
    if (!skipping_) {
      if (tail_.size() + take > max_line) {
        skipping_ = true;
        tail_.clear();
      } else {
        tail_.append(p, take);
      }
    }
    if (nl == nullptr) return;
    if (!skipping_) parse_line(tail_);
    tail_.clear();
    skipping_ = false;
    p = nl + 1;
    n -= take + 1;
  }
}

void perf_map_names::parse_line(std::string_view line) {
  std::istringstream fields{std::string(line)};
  std::string start, len;
  if (!(fields >> start >> len)) return;
  std::string name;
  std::getline(fields >> std::ws, name);
  if (auto a = parse_u64("0x" + start)) names_[*a] = name;
}

std::string perf_map_names::name_or_address(uint64_t start) const {
  auto it = names_.find(start);
  return it == names_.end() ? hex_text(start) : "'" + it->second + "'";
}

}  // namespace jitunwind::cli
