#include "jitwalk/common.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace jitwalk {

int g_verbosity = 1;

namespace {
void vprint(const char* prefix, const char* fmt, va_list ap) {
  std::string text = jitunwind::detail::vformat(fmt, ap);
  std::fprintf(stderr, "jitwalk: %s%s\n", prefix, text.c_str());
}
}  // namespace

void note(const char* fmt, ...) {
  if (g_verbosity < 1) return;
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

void detail(const char* fmt, ...) {
  if (g_verbosity < 2) return;
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("warning: ", fmt, ap);
  va_end(ap);
}

void report(const error& e) {
  std::fprintf(stderr, "jitwalk: error: %s\n", e.message().c_str());
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

output_precheck::~output_precheck() {
  for (const std::string& path : created_) ::unlink(path.c_str());
}

result<void> output_precheck::add(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    created_.push_back(path);
  } else if (errno == EEXIST) {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  }
  if (fd < 0)
    return make_error(errc::io_error, "cannot write %s: %s", path.c_str(), std::strerror(errno));
  ::close(fd);
  return {};
}

}  // namespace jitwalk
