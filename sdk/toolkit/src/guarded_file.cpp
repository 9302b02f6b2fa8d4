#include <jitunwind/toolkit/guarded_file.hpp>

#include <jitunwind/toolkit/format.hpp>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace jitunwind::toolkit {

namespace {

using ull = unsigned long long;

// Read in steps of this much while the size is not known (/proc files, growing files).
constexpr size_t read_step = 64 * 1024;

// "perf map /tmp/perf-1.map" or, without a `what`, the path alone: how messages start.
std::string named(const open_rules& rules, const std::string& path) {
  return *rules.what ? std::string(rules.what) + " " + path : path;
}

error open_error(const std::string& path, const open_rules& rules, int e) {
  const std::string who = named(rules, path);
  if (e == ELOOP && rules.no_follow)
    return make_error(errc::permission_denied,
                      "%s: is a symbolic link: not followed (the path is another process's "
                      "choice)",
                      who.c_str());
  const errc code = e == ENOENT                 ? errc::not_found
                    : e == EACCES || e == EPERM ? errc::permission_denied
                                                : errc::io_error;
  return make_error(code, "%s: cannot open: %s", who.c_str(), std::strerror(e));
}

}  // namespace

const char* file_type_text(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFIFO:
      return "is a FIFO";
    case S_IFDIR:
      return "is a directory";
    case S_IFCHR:
      return "is a character device";
    case S_IFBLK:
      return "is a block device";
    case S_IFSOCK:
      return "is a socket";
    case S_IFLNK:
      return "is a symbolic link";
    case S_IFREG:
      return "is a regular file";
  }
  return "is not a regular file";
}

result<guarded_file> guarded_file::open(const std::string& path, const open_rules& rules) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (rules.no_follow) flags |= O_NOFOLLOW;
  int fd = -1;
  if (rules.root_fd >= 0) {
    open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    fd = static_cast<int>(::syscall(SYS_openat2, rules.root_fd, path.c_str(), &how, sizeof how));
  } else {
    fd = ::open(path.c_str(), flags);
  }
  if (fd < 0) return open_error(path, rules, errno);
  guarded_file f;
  f.fd_ = fd;  // closed by f's destructor on every error below
  f.path_ = path;
  f.max_bytes_ = rules.max_bytes;
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(errc::io_error, "%s: fstat: %s", named(rules, path).c_str(),
                      std::strerror(errno));
  const std::string who = named(rules, path);
  if (!S_ISREG(st.st_mode))
    return make_error(errc::io_error, "%s: %s, not a regular file", who.c_str(),
                      file_type_text(st.st_mode));
  if (rules.owner && st.st_uid != *rules.owner)
    return make_error(errc::permission_denied, "%s: belongs to user %u, not to user %u: not read",
                      who.c_str(), static_cast<unsigned>(st.st_uid),
                      static_cast<unsigned>(*rules.owner));
  if (static_cast<uint64_t>(st.st_size) > rules.max_bytes)
    return make_error(errc::limit_exceeded, "%s: %s, more than the limit of %s", who.c_str(),
                      size_text(static_cast<uint64_t>(st.st_size)).c_str(),
                      size_text(rules.max_bytes).c_str());
  f.size_ = static_cast<uint64_t>(st.st_size);
  f.device_ = st.st_dev;
  f.inode_ = st.st_ino;
  return f;
}

guarded_file::guarded_file(guarded_file&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      size_(o.size_),
      device_(o.device_),
      inode_(o.inode_),
      max_bytes_(o.max_bytes_) {}

guarded_file& guarded_file::operator=(guarded_file&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    device_ = o.device_;
    inode_ = o.inode_;
    max_bytes_ = o.max_bytes_;
  }
  return *this;
}

guarded_file::~guarded_file() {
  if (fd_ >= 0) ::close(fd_);
}

result<size_t> guarded_file::read_some(uint64_t offset, void* out, size_t n) const {
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return make_error(e == ESRCH ? errc::not_found : errc::io_error, "%s: cannot read: %s",
                        path_.c_str(), std::strerror(e));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

result<void> guarded_file::read_at(uint64_t offset, void* out, size_t n) const {
  auto got = read_some(offset, out, n);
  if (!got) return std::move(got).error();
  if (*got != n) {
    struct stat st {};
    const long long now = ::fstat(fd_, &st) == 0 ? static_cast<long long>(st.st_size) : -1;
    return make_error(errc::io_error,
                      "%s: changed while it was read: %zu bytes at offset 0x%llx wanted, the file "
                      "now has %lld bytes (it had %llu when opened)",
                      path_.c_str(), n, static_cast<ull>(offset), now, static_cast<ull>(size_));
  }
  return {};
}

result<charged_bytes> guarded_file::read_range(uint64_t offset, uint64_t n, memory_budget* budget,
                                               std::string_view what) const {
  if (n > max_bytes_)
    return make_error(errc::limit_exceeded, "%.*s: %s, more than the limit of %s",
                      static_cast<int>(what.size()), what.data(), size_text(n).c_str(),
                      size_text(max_bytes_).c_str());
  charged_bytes out;
  auto charge = budget_charge::take(budget, n, what);
  if (!charge) return std::move(charge).error();
  out.charge = std::move(*charge);
  out.bytes.resize(static_cast<size_t>(n));
  if (auto r = read_at(offset, out.bytes.data(), out.bytes.size()); !r) return std::move(r).error();
  return out;
}

result<charged_bytes> guarded_file::read_all(memory_budget* budget) const {
  charged_bytes out;
  const std::string what = "file " + path_;
  for (;;) {
    const size_t at = out.bytes.size();
    if (at >= max_bytes_) {
      // One byte more tells a file of exactly max_bytes from a longer one.
      char probe;
      auto more = read_some(at, &probe, 1);
      if (!more) return std::move(more).error();
      if (*more == 0) break;
      return make_error(errc::limit_exceeded, "%s: more than the limit of %s, not read further",
                        path_.c_str(), size_text(max_bytes_).c_str());
    }
    const size_t step = static_cast<size_t>(std::min<uint64_t>(read_step, max_bytes_ - at));
    if (auto r = out.charge.grow(budget, step, what); !r) return std::move(r).error();
    out.bytes.resize(at + step);
    auto got = read_some(at, out.bytes.data() + at, step);
    if (!got) return std::move(got).error();
    out.bytes.resize(at + *got);
    if (*got < step) break;
  }
  // What was charged for the last step beyond the data is given back.
  out.charge.shrink_to(out.bytes.size());
  out.bytes.shrink_to_fit();
  return out;
}

result<std::vector<uint8_t>> read_guarded_file(const std::string& path, const open_rules& rules) {
  auto f = guarded_file::open(path, rules);
  if (!f) return std::move(f).error();
  auto bytes = f->read_all();
  if (!bytes) return std::move(bytes).error();
  return std::move(bytes->bytes);
}

result<std::string> read_proc_text(const std::string& path, uint64_t max_bytes) {
  open_rules rules;
  rules.no_follow = false;
  rules.max_bytes = max_bytes;
  auto bytes = read_guarded_file(path, rules);
  if (!bytes) return std::move(bytes).error();
  return std::string(bytes->begin(), bytes->end());
}

std::string proc_text_or_empty(const std::string& path) {
  auto text = read_proc_text(path);
  return text ? std::move(*text) : std::string();
}

}  // namespace jitunwind::toolkit
