#include "usdt/storage.hpp"

#include "common/error.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

namespace jitunwind::usdt::detail {

using jitunwind::detail::make_error;

namespace {

constexpr const char* file_prefix = "jitunwind-usdt-";

// Files to remove when the process exits normally. This is the one piece of process-wide
// mutable state of the module: `exit()` does not run the destructors of heap objects, and
// the issue asks that files be removed at exit. Each entry remembers the process that
// created it so that a forked child exiting does not remove its parent's files.
struct exit_cleanup {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> paths;  // (owner pid, absolute path)

  static exit_cleanup& instance() {
    static exit_cleanup* self = [] {
      auto* s = new exit_cleanup;  // never destroyed: used from an atexit handler
      std::atexit([] { exit_cleanup::instance().run(); });
      return s;
    }();
    return *self;
  }
  void add(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex);
    paths.emplace_back(getpid(), path);
  }
  void remove(const std::string& path) {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t i = 0; i < paths.size(); ++i)
      if (paths[i].second == path) {
        paths.erase(paths.begin() + static_cast<long>(i));
        return;
      }
  }
  void run() {
    std::lock_guard<std::mutex> lock(mutex);
    const int self = getpid();
    for (const auto& [pid, path] : paths)
      if (pid == self) unlink(path.c_str());
    paths.clear();
  }
};

error sys_error(errc code, const char* what, const std::string& path, int err) {
  return make_error(code, "usdt: %s %s: %s", what, path.c_str(), std::strerror(err));
}

errc errno_code(int err) {
  return err == EACCES || err == EPERM || err == EROFS ? errc::permission_denied : errc::io_error;
}

// A directory is private if it is ours and nobody else may write (or, for the directories we
// create ourselves, even read) it.
result<void> check_private_dir(int fd, const std::string& path, mode_t forbidden) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return sys_error(errc::io_error, "cannot stat", path, errno);
  if (!S_ISDIR(st.st_mode))
    return make_error(errc::permission_denied, "usdt: runtime directory %s is not a directory",
                      path.c_str());
  if (st.st_uid != geteuid())
    return make_error(errc::permission_denied,
                      "usdt: runtime directory %s is owned by uid %u, not by uid %u: refusing "
                      "to use it (someone else could replace the objects)",
                      path.c_str(), st.st_uid, geteuid());
  if ((st.st_mode & forbidden) != 0)
    return make_error(errc::permission_denied,
                      "usdt: runtime directory %s has mode %04o: refusing to use it (it must "
                      "not be %s by group or others)",
                      path.c_str(), st.st_mode & 07777,
                      (forbidden & 044) != 0 ? "accessible" : "writable");
  return ok_result();
}

result<runtime_dir> open_dir_nofollow(const std::string& path, mode_t forbidden) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR)
      return make_error(errc::permission_denied,
                        "usdt: runtime directory %s is a symbolic link or not a directory: "
                        "refusing to use it",
                        path.c_str());
    return sys_error(errno_code(err), "cannot open runtime directory", path, err);
  }
  if (auto r = check_private_dir(fd, path, forbidden); !r) {
    close(fd);
    return std::move(r).error();
  }
  return runtime_dir{fd, path};
}

// mkdir + open without following a planted link, then verify ownership and mode.
result<runtime_dir> make_private_dir(const std::string& path) {
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    return sys_error(errno_code(errno), "cannot create runtime directory", path, errno);
  return open_dir_nofollow(path, 077);
}

}  // namespace

unsigned long long process_start_time(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  int field = 2;
  while (*p != 0 && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  return field == 22 ? std::strtoull(p, nullptr, 10) : 0;
}

placed_object& placed_object::operator=(placed_object&& o) noexcept {
  if (this != &o) {
    remove();
    fd_ = std::exchange(o.fd_, -1);
    dir_fd_ = std::exchange(o.dir_fd_, -1);
    file_name_ = std::move(o.file_name_);
    tracer_path_ = std::move(o.tracer_path_);
    owner_pid_ = o.owner_pid_;
  }
  return *this;
}

std::string placed_object::fd_path() const {
  return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd_);
}

void placed_object::remove() noexcept {
  if (dir_fd_ >= 0) {
    // A forked child that inherited the object must not remove its parent's file.
    if (owner_pid_ == getpid() && !file_name_.empty()) {
      unlinkat(dir_fd_, file_name_.c_str(), 0);
      exit_cleanup::instance().remove(tracer_path_);
    }
    close(dir_fd_);
    dir_fd_ = -1;
  }
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
}

result<placed_object> placed_object::create_memfd(const std::string& provider) {
  const std::string name = "jitunwind-usdt:" + provider;
  // Kernels >= 6.3 want executability said explicitly (vm.memfd_noexec); older ones reject
  // the flag with EINVAL.
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    const int err = errno;
    if (err == EACCES)
      return make_error(errc::permission_denied,
                        "usdt: memfd_create(%s) refused an executable memfd (vm.memfd_noexec "
                        "is 2?): use object_location::file",
                        name.c_str());
    return sys_error(errc::io_error, "memfd_create", name, err);
  }
  placed_object p;
  p.fd_ = fd;
  p.owner_pid_ = getpid();
  p.tracer_path_ = p.fd_path();
  return p;
}

result<void> placed_object::seal() {
  if (is_file()) return ok_result();
  if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return sys_error(errc::io_error, "cannot seal", fd_path(), errno);
  return ok_result();
}

result<runtime_dir> open_runtime_dir(const provider_options& options) {
  if (!options.directory.empty()) {
    if (options.directory[0] != '/')
      return make_error(errc::invalid_argument, "usdt: runtime directory '%s' is not absolute",
                        options.directory.c_str());
    return open_dir_nofollow(options.directory, 022);
  }
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && xdg[0] == '/') {
    auto base = open_dir_nofollow(xdg, 022);
    if (base) {
      close(base->fd);
      auto dir = make_private_dir(std::string(xdg) + "/jitunwind");
      if (dir) return dir;
      options.log(log_level::warning, dir.error().message() + "; falling back to /tmp");
    } else {
      options.log(log_level::warning, "usdt: XDG_RUNTIME_DIR unusable: " + base.error().message() +
                                          "; falling back to /tmp");
    }
  }
  return make_private_dir("/tmp/jitunwind-" + std::to_string(geteuid()));
}

size_t remove_stale_files(int dir_fd) {
  const int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return 0;
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    close(dup_fd);
    return 0;
  }
  size_t removed = 0;
  const size_t prefix_len = std::strlen(file_prefix);
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix_len, file_prefix) != 0 || name.size() < 4 ||
        name.compare(name.size() - 3, 3, ".so") != 0)
      continue;
    // jitunwind-usdt-PROVIDER-PID-START-N.so; provider names contain no '-'.
    const std::string rest = name.substr(prefix_len, name.size() - prefix_len - 3);
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t i = 0; i <= rest.size(); ++i)
      if (i == rest.size() || rest[i] == '-') {
        parts.push_back(rest.substr(start, i - start));
        start = i + 1;
      }
    if (parts.size() != 4) continue;
    char* end = nullptr;
    const long pid = std::strtol(parts[1].c_str(), &end, 10);
    if (*end != 0 || pid <= 0) continue;
    const unsigned long long started = std::strtoull(parts[2].c_str(), &end, 10);
    if (*end != 0) continue;
    const unsigned long long now_started = process_start_time(static_cast<int>(pid));
    if (now_started != 0 && now_started == started) continue;  // still alive
    struct stat st {};
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    if (unlinkat(dir_fd, e->d_name, 0) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

result<placed_object> placed_object::create_file(const std::string& provider,
                                                 const provider_options& options) {
  auto dir = open_runtime_dir(options);
  if (!dir) return std::move(dir).error();
  placed_object p;
  p.dir_fd_ = dir->fd;
  p.owner_pid_ = getpid();
  if (size_t n = remove_stale_files(dir->fd); n > 0)
    options.log(log_level::info, "usdt: removed " + std::to_string(n) +
                                     " stale object(s) of dead processes from " + dir->path);

  const std::string stem = std::string(file_prefix) + provider + "-" + std::to_string(getpid()) +
                           "-" + std::to_string(process_start_time(getpid())) + "-";
  // Another provider of this process with the same name holds -1.so: take the next number.
  // Anything else already there (a symbolic link, someone else's file) is an error: it was
  // not created by us, and O_EXCL|O_NOFOLLOW guarantee we neither follow nor overwrite it.
  for (int n = 1; n <= 1000; ++n) {
    const std::string name = stem + std::to_string(n) + ".so";
    const std::string path = dir->path + "/" + name;
    const int fd =
        openat(dir->fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0500);
    if (fd >= 0) {
      p.fd_ = fd;
      p.file_name_ = name;
      p.tracer_path_ = path;
      exit_cleanup::instance().add(path);
      return p;
    }
    const int err = errno;
    if (err != EEXIST) return sys_error(errno_code(err), "cannot create", path, err);
    struct stat st {};
    if (fstatat(dir->fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_error(errc::io_error, "cannot stat", path, errno);
    if (S_ISLNK(st.st_mode))
      return make_error(errc::permission_denied,
                        "usdt: refusing to create %s: a symbolic link is already there "
                        "(planted?); nothing was written",
                        path.c_str());
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
      return make_error(errc::permission_denied,
                        "usdt: refusing to create %s: something not created by this process "
                        "is already there; nothing was written",
                        path.c_str());
  }
  return make_error(errc::limit_exceeded, "usdt: more than 1000 objects named %s* in %s",
                    stem.c_str(), dir->path.c_str());
}

}  // namespace jitunwind::usdt::detail
