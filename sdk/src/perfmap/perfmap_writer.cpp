#include "perfmap/perfmap_writer.hpp"

#include "common/error.hpp"
#include "perfmap/owned_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace jitunwind::detail {

std::string sanitize_symbol_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

result<std::unique_ptr<perfmap_writer>> perfmap_writer::create(const perfmap_options& options) {
  if (options.dir.empty())
    return make_error(errc::invalid_argument, "perf map: directory is empty");
  const pid_t pid = options.pid != 0 ? options.pid : ::getpid();
  std::string path = options.dir + "/perf-" + std::to_string(pid) + ".map";
  auto fd = open_owned_file(path, /*append=*/true, "perf map");
  if (!fd) return std::move(fd).error();
  struct stat st {};
  if (::fstat(*fd, &st) != 0) {
    const int e = errno;
    ::close(*fd);
    return make_error(errc::io_error, "perf map %s: fstat failed: %s", path.c_str(),
                      std::strerror(e));
  }
  return std::unique_ptr<perfmap_writer>(new perfmap_writer(*fd, std::move(path), st.st_size));
}

perfmap_writer::~perfmap_writer() {
  if (fd_ >= 0) ::close(fd_);
}

result<void> perfmap_writer::add(uint64_t start, uint64_t size, std::string_view name) {
  if (size == 0)
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has size 0",
                      path_.c_str(), start);
  if (start > UINT64_MAX - size)
    return make_error(errc::out_of_range,
                      "perf map %s: symbol at 0x%" PRIx64 " size 0x%" PRIx64
                      " wraps the address space",
                      path_.c_str(), start, size);
  if (name.empty())
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has no name",
                      path_.c_str(), start);
  if (name.size() > perfmap_max_name)
    return make_error(errc::invalid_argument,
                      "perf map %s: name of symbol at 0x%" PRIx64 " is %zu bytes (limit %zu)",
                      path_.c_str(), start, name.size(), perfmap_max_name);
  char prefix[48];
  const int n = std::snprintf(prefix, sizeof prefix, "%" PRIx64 " %" PRIx64 " ", start, size);
  std::string line;
  line.reserve(static_cast<size_t>(n) + name.size() + 1);
  line.append(prefix, static_cast<size_t>(n));
  const size_t name_at = line.size();
  line.append(name);
  for (size_t i = name_at; i < line.size(); ++i) {
    const auto u = static_cast<unsigned char>(line[i]);
    if (u < 0x20 || u == 0x7f) line[i] = '?';
  }
  line.push_back('\n');
  iovec iov{line.data(), line.size()};
  std::lock_guard lock(mu_);
  return append_whole(fd_, &iov, 1, end_, path_);
}

}  // namespace jitunwind::detail
