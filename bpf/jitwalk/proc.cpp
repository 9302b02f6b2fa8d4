#include "jitwalk/proc.hpp"

#include <jitunwind/toolkit/guarded_file.hpp>
#include <jitunwind/toolkit/proc_stat.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <utility>

namespace jitwalk {

std::vector<mapping> parse_maps(const std::string& text) {
  std::vector<mapping> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    mapping m;
    char perms[8] = {};
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    unsigned major = 0, minor = 0;
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &offset,
                    &major, &minor, &inode, &consumed) < 7) {
      continue;
    }
    m.start = start;
    m.end = end;
    m.readable = perms[0] == 'r';
    m.writable = perms[1] == 'w';
    m.executable = perms[2] == 'x';
    m.offset = offset;
    m.dev = (uint64_t{major} << 20) | minor;
    m.inode = inode;
    if (consumed > 0 && static_cast<size_t>(consumed) <= line.size()) {
      m.path = line.substr(static_cast<size_t>(consumed));
      while (!m.path.empty() && (m.path.back() == ' ' || m.path.back() == '\n')) m.path.pop_back();
    }
    out.push_back(std::move(m));
  }
  return out;
}

result<std::vector<mapping>> read_maps(pid_t pid) {
  std::string path = format("/proc/%d/maps", pid);
  auto text = jitunwind::toolkit::read_proc_text(path);
  if (!text)
    return make_error(errc::not_found, "cannot read %s (process %d gone?)", path.c_str(), pid);
  return parse_maps(*text);
}

std::string map_files_path(pid_t pid, const mapping& m) {
  return format("/proc/%d/map_files/%llx-%llx", pid, static_cast<unsigned long long>(m.start),
                static_cast<unsigned long long>(m.end));
}

std::string read_comm(pid_t pid, pid_t tid) {
  // From stat, not comm: a name holding a newline is whole there (between '(' and the last ')').
  auto st = jitunwind::toolkit::read_proc_stat(pid, tid);
  if (!st || st->comm.empty()) return "?";
  return st->comm;
}

std::string read_exe(pid_t pid) {
  char buf[4096];
  std::string link = format("/proc/%d/exe", pid);
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

std::vector<pid_t> list_threads(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = opendir(format("/proc/%d/task", pid).c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
      out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  closedir(d);
  return out;
}

pid_t read_ns_pid(pid_t pid) {
  const std::string status = jitunwind::toolkit::proc_text_or_empty(format("/proc/%d/status", pid));
  const size_t at = status.find("\nNSpid:");
  if (at == std::string::npos) return pid;
  const size_t end = status.find('\n', at + 1);
  std::istringstream fields(status.substr(at + 8, end == std::string::npos ? end : end - at - 8));
  long v = 0, last = 0;
  while (fields >> v) last = v;
  return last > 0 && last <= (1l << 30) ? static_cast<pid_t>(last) : pid;
}

namespace {
std::string ns_link(const std::string& path) {
  char buf[64];
  const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}
}  // namespace

process_view::process_view(pid_t pid) : pid_(pid), ns_pid_(pid) {
  refresh();
}

process_view::process_view(process_view&& o) noexcept
    : pid_(o.pid_),
      ns_pid_(o.ns_pid_),
      root_fd_(std::exchange(o.root_fd_, -1)),
      other_mnt_(o.other_mnt_),
      mnt_ns_(std::move(o.mnt_ns_)) {}

process_view& process_view::operator=(process_view&& o) noexcept {
  if (this != &o) {
    if (root_fd_ >= 0) ::close(root_fd_);
    pid_ = o.pid_;
    ns_pid_ = o.ns_pid_;
    root_fd_ = std::exchange(o.root_fd_, -1);
    other_mnt_ = o.other_mnt_;
    mnt_ns_ = std::move(o.mnt_ns_);
  }
  return *this;
}

process_view::~process_view() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

bool process_view::refresh() {
  const std::string mnt = ns_link(format("/proc/%d/ns/mnt", pid_));
  if (mnt.empty()) return false;  // gone (or not ours to see): keep what we had
  struct stat now {};
  if (root_fd_ >= 0 && mnt == mnt_ns_) {
    // Same namespace: the root changes only with chroot/pivot_root.
    struct stat held {};
    if (::stat(format("/proc/%d/root/", pid_).c_str(), &now) == 0 &&
        ::fstat(root_fd_, &held) == 0 && now.st_dev == held.st_dev && now.st_ino == held.st_ino)
      return false;
  }
  const int fd = ::open(format("/proc/%d/root", pid_).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  if (root_fd_ >= 0) ::close(root_fd_);
  root_fd_ = fd;
  mnt_ns_ = mnt;
  other_mnt_ = mnt != ns_link("/proc/self/ns/mnt");
  ns_pid_ = read_ns_pid(pid_);
  return true;
}

std::string process_view::where() const {
  if (!other_mnt_ && !other_pid_ns()) return {};
  std::string out;
  if (other_mnt_) out = format("in the mount namespace of pid %d (%s)", pid_, mnt_ns_.c_str());
  if (other_pid_ns())
    out += format("%spid %d there", out.empty() ? "" : ", ", static_cast<int>(ns_pid_));
  return out;
}

bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  // A zombie still answers kill(); its maps are gone. Its name may hold ')' and newlines: the
  // state follows the last ')'.
  auto st = jitunwind::toolkit::read_proc_stat(pid);
  return st && st->state != 'Z';
}

result<child_process> child_process::spawn(const std::vector<std::string>& argv) {
  if (argv.empty()) return make_error(errc::invalid_argument, "no command given");
  int gate[2], err[2];
  if (pipe2(gate, O_CLOEXEC) != 0)
    return make_error(errc::io_error, "pipe: %s", std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    ::close(gate[0]);
    ::close(gate[1]);
    return make_error(errc::io_error, "pipe: %s", std::strerror(errno));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {gate[0], gate[1], err[0], err[1]}) ::close(fd);
    return make_error(errc::io_error, "fork: %s", std::strerror(e));
  }
  if (pid == 0) {
    // The command lives no longer than jitwalk (killed with SIGKILL: nothing else stops it or
    // would undo a --sync-tables stop). jitwalk forks from its main thread, which lives until
    // the end.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // jitwalk already went away
    ::close(gate[1]);
    ::close(err[0]);
    char go = 0;
    ssize_t n;
    do {
      n = read(gate[0], &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(127);  // jitwalk went away before releasing us
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    int e = errno;
    ssize_t ignored = write(err[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  ::close(gate[0]);
  ::close(err[1]);
  child_process c;
  c.pid_ = pid;
  c.gate_fd_ = gate[1];
  c.error_fd_ = err[0];
  c.command_ = argv[0];
  return c;
}

child_process::child_process(child_process&& o) noexcept
    : pid_(o.pid_),
      gate_fd_(o.gate_fd_),
      error_fd_(o.error_fd_),
      command_(std::move(o.command_)),
      exited_(o.exited_),
      exit_code_(o.exit_code_),
      term_signal_(o.term_signal_),
      sent_term_(o.sent_term_),
      cpu_s_(o.cpu_s_) {
  o.pid_ = -1;
  o.gate_fd_ = o.error_fd_ = -1;
}

child_process::~child_process() {
  if (gate_fd_ >= 0) ::close(gate_fd_);  // an unreleased child exits (read returns 0)
  if (error_fd_ >= 0) ::close(error_fd_);
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

result<void> child_process::release() {
  char go = 1;
  if (write(gate_fd_, &go, 1) != 1) {
    return make_error(errc::io_error, "cannot release process %d: %s", pid_, std::strerror(errno));
  }
  ::close(gate_fd_);
  gate_fd_ = -1;
  int e = 0;
  ssize_t n;
  do {
    n = read(error_fd_, &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  ::close(error_fd_);
  error_fd_ = -1;
  if (n == sizeof e) {
    wait();
    return make_error(e == ENOENT ? errc::not_found : errc::io_error, "cannot run %s: %s",
                      command_.c_str(), std::strerror(e));
  }
  return {};
}

void child_process::record(int status) {
  exited_ = true;
  // The shell's convention (128 + signal) for exit_code(); term_signal() keeps them apart.
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  term_signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? format("SIG%s", abbrev) : format("signal %d", sig);
}

std::string child_process::describe_end() const {
  if (!exited_) return "still running";
  if (term_signal_ == 0) {
    if (sent_term_ == 0) return format("exited with status %d", exit_code_);
    return format("exited with status %d after jitwalk's %s", exit_code_,
                  signal_name(sent_term_).c_str());
  }
  const std::string sig = signal_name(term_signal_);
  if (sent_term_ != 0 && term_signal_ == sent_term_) {
    if (term_signal_ == SIGKILL)
      return "ended by jitwalk (SIGKILL: still running after SIGINT and SIGTERM)";
    return format("ended by jitwalk (%s)", sig.c_str());
  }
  return format("killed by signal %d (%s)", term_signal_, sig.c_str());
}

static double cpu_of(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool child_process::poll_exit() {
  if (exited_) return true;
  int status = 0;
  rusage ru{};
  pid_t r = wait4(pid_, &status, WNOHANG, &ru);
  if (r == pid_ && (WIFEXITED(status) || WIFSIGNALED(status))) {
    record(status);
    cpu_s_ = cpu_of(ru);
  }
  return exited_;
}

int child_process::wait() {
  while (!exited_) {
    int status = 0;
    rusage ru{};
    pid_t r = wait4(pid_, &status, 0, &ru);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      exited_ = true;
      break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      record(status);
      cpu_s_ = cpu_of(ru);
    }
  }
  return exit_code_;
}

void child_process::signal(int sig) {
  if (!exited_ && pid_ > 0 && kill(pid_, sig) == 0 &&
      (sig == SIGINT || sig == SIGTERM || sig == SIGKILL))
    sent_term_ = sig;
}

}  // namespace jitwalk
