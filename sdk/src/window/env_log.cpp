// JITUNWIND_LOG: a log sink chosen by the environment, for runtimes that install none (the
// on-ramp, the preload library, a C program): what a publisher warns about (perf losing a
// function's unwinding data, a perf map naming two codes at one address) reaches the person
// running the program without a line of code.
#include "window/env_log.hpp"

#include "common/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace jitunwind::detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One descriptor per destination for the life of the process: sinks are plain values copied
// into sessions that may outlive any object we could own, so the descriptors are never closed.
struct destinations {
  std::mutex mutex;
  std::vector<std::pair<std::string, int>> open;  // path ("" = stderr) -> fd
};

destinations& all() {
  static destinations* const d = new destinations;  // leaked on purpose, see above
  return *d;
}

result<int> descriptor_for(const std::string& path) {
  if (path.empty()) return STDERR_FILENO;
  destinations& d = all();
  std::lock_guard lock(d.mutex);
  for (const auto& [p, fd] : d.open)
    if (p == path) return fd;
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return make_error(errc::io_error, "JITUNWIND_LOG: cannot open '%s' for appending: %s",
                      path.c_str(), std::strerror(errno));
  d.open.emplace_back(path, fd);
  return fd;
}

// "jitunwind[PID] warning: MESSAGE\n", one write (lines of concurrent threads never mix).
void write_line(void* user, log_level level, std::string_view message) {
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(user));
  std::string line = format("jitunwind[%d] %s: ", static_cast<int>(::getpid()), to_string(level));
  line.append(message);
  line.push_back('\n');
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report that reporting failed
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

result<log_sink> log_sink_from_env() {
  log_sink sink;
  const char* where = std::getenv("JITUNWIND_LOG");
  const char* level = std::getenv("JITUNWIND_LOG_LEVEL");
  if (where == nullptr || *where == '\0') return sink;
  const std::string_view w = trim(where);
  if (w == "off" || w == "none") return sink;
  std::string path;
  if (w == "stderr") {
    path.clear();
  } else if (w.substr(0, 5) == "file:" && w.size() > 5) {
    path = std::string(w.substr(5));
  } else {
    return make_error(errc::invalid_argument,
                      "JITUNWIND_LOG: '%s' is not stderr, file:PATH or off", where);
  }
  sink.min_level = log_level::warning;
  if (level != nullptr && *level != '\0') {
    const std::string_view l = trim(level);
    bool known = false;
    for (const log_level candidate :
         {log_level::debug, log_level::info, log_level::warning, log_level::error}) {
      if (l == to_string(candidate)) {
        sink.min_level = candidate;
        known = true;
      }
    }
    if (!known)
      return make_error(errc::invalid_argument,
                        "JITUNWIND_LOG_LEVEL: '%s' is not debug, info, warning or error", level);
  }
  auto fd = descriptor_for(path);
  if (!fd) return std::move(fd).error();
  sink.fn = write_line;
  sink.user = reinterpret_cast<void*>(static_cast<intptr_t>(*fd));
  return sink;
}

}  // namespace jitunwind::detail
