#include "perfmap/perfmap_writer.hpp"

#include "common/error.hpp"
#include "common/names.hpp"
#include "perfmap/owned_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace jitunwind::detail {

std::string sanitize_symbol_name(std::string_view name) {
  std::string out(name.size(), '\0');
  copy_sanitized(out.data(), name);
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

namespace {

// Lower-case hex without leading zeros ("0" for 0), at `out`; returns the end.
// Two digits per step (one table load per byte): every line has two numbers.
char* put_hex(char* out, uint64_t v) {
  static constexpr auto pairs = [] {
    std::array<char, 512> t{};
    const char digits[] = "0123456789abcdef";
    for (int b = 0; b < 256; ++b) {
      t[2 * b] = digits[b >> 4];
      t[2 * b + 1] = digits[b & 0xf];
    }
    return t;
  }();
  static const char digits[] = "0123456789abcdef";
  const int nibbles = v == 0 ? 1 : (67 - __builtin_clzll(v)) / 4;
  int i = nibbles;
  for (; i >= 2; i -= 2, v >>= 8) std::memcpy(out + i - 2, &pairs[2 * (v & 0xff)], 2);
  if (i == 1) out[0] = digits[v & 0xf];
  return out + nibbles;
}

}  // namespace

result<void> perfmap_writer::check(const perfmap_entry& e) const {
  if (e.size == 0)
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has size 0",
                      path_.c_str(), e.start);
  if (e.start > UINT64_MAX - e.size)
    return make_error(errc::out_of_range,
                      "perf map %s: symbol at 0x%" PRIx64 " size 0x%" PRIx64
                      " wraps the address space",
                      path_.c_str(), e.start, e.size);
  if (e.name.empty())
    return make_error(errc::invalid_argument, "perf map %s: symbol at 0x%" PRIx64 " has no name",
                      path_.c_str(), e.start);
  if (e.name.size() > perfmap_max_name)
    return make_error(errc::invalid_argument,
                      "perf map %s: name of symbol at 0x%" PRIx64 " is %zu bytes (limit %zu)",
                      path_.c_str(), e.start, e.name.size(), perfmap_max_name);
  return {};
}

result<void> perfmap_writer::add(uint64_t start, uint64_t size, std::string_view name) {
  const perfmap_entry e{start, size, name};
  return add_batch(std::span(&e, 1));
}

result<void> perfmap_writer::add_batch(std::span<const perfmap_entry> entries) {
  size_t bytes = 0;
  for (const perfmap_entry& e : entries) {
    if (auto r = check(e); !r) return r;
    bytes += 16 + 1 + 16 + 1 + e.name.size() + 1;  // at most
  }
  if (entries.empty()) return {};
  std::lock_guard lock(mu_);
  if (buffer_.size() < bytes) buffer_.resize(bytes);
  char* p = buffer_.data();
  for (const perfmap_entry& e : entries) {
    p = put_hex(p, e.start);
    *p++ = ' ';
    p = put_hex(p, e.size);
    *p++ = ' ';
    if (e.clean)
      std::memcpy(p, e.name.data(), e.name.size());
    else
      copy_sanitized(p, e.name);
    p += e.name.size();
    *p++ = '\n';
  }
  iovec iov{buffer_.data(), static_cast<size_t>(p - buffer_.data())};
  auto r = append_whole(fd_, &iov, 1, end_, path_);
  if (buffer_.size() > (size_t{1} << 20)) buffer_ = {};  // one huge batch: do not keep it
  return r;
}

}  // namespace jitunwind::detail
