#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

extern char** environ;

namespace jitunwind::test {

namespace {

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

run_result run(const std::vector<std::string>& argv, const std::string& input,
               std::chrono::milliseconds timeout) {
  run_result r;
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
      pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = "pipe failed";
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group, so a timeout kills the whole tree (perf record spawns children).
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);

  std::vector<char*> args;
  // A cross build's programs run under its emulator (JITUNWIND_TEST_EMULATOR, which the build
  // sets from CMAKE_CROSSCOMPILING_EMULATOR): the programs of this build tree, not host tools.
  std::vector<std::string> emulator;
  if (const char* e = std::getenv("JITUNWIND_TEST_EMULATOR");
      e != nullptr && *e != '\0' && !argv.empty() &&
      argv[0].rfind(std::string(JITUNWIND_BINARY_DIR) + "/", 0) == 0) {
    std::istringstream words(e);
    for (std::string w; words >> w;) emulator.push_back(w);
  }
  for (const auto& a : emulator) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const auto started = std::chrono::steady_clock::now();
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    r.err = "cannot start " + argv[0] + ": " + std::strerror(rc);
    r.exit_code = 127;
    return r;
  }

  set_nonblocking(in_pipe[1]);
  set_nonblocking(out_pipe[0]);
  set_nonblocking(err_pipe[0]);
  size_t written = 0;
  if (input.empty()) {
    close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int open_outputs = 2;
  char buf[65536];
  while (open_outputs > 0) {
    pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {in_pipe[1], POLLOUT, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    int n =
        poll(fds, in_pipe[1] >= 0 ? 3 : 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fds[i].fd);
        (i == 0 ? out_pipe[0] : err_pipe[0]) = -1;
        --open_outputs;
      }
    }
    if (in_pipe[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = write(in_pipe[1], input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN) written = input.size();
      if (written == input.size()) {
        close(in_pipe[1]);
        in_pipe[1] = -1;
      }
    }
  }
  for (int fd : {in_pipe[1], out_pipe[0], err_pipe[0]})
    if (fd >= 0) close(fd);
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.max_rss_kib = usage.ru_maxrss;
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.exit_code = 128 + WTERMSIG(status);
  return r;
}

run_result run_shell(const std::string& command, std::chrono::milliseconds timeout) {
  return run({"/bin/sh", "-c", command}, {}, timeout);
}

temp_dir::temp_dir() {
  char tmpl[] = "/tmp/jitunwind-test-XXXXXX";
  const char* p = mkdtemp(tmpl);
  path_ = p ? p : "/tmp";
}

temp_dir::~temp_dir() {
  if (path_ != "/tmp") {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(out);
}

std::string source_path(const std::string& relative) {
  return std::string(JITUNWIND_SOURCE_DIR) + "/" + relative;
}

std::string binary_path(const std::string& relative) {
  return std::string(JITUNWIND_BINARY_DIR) + "/" + relative;
}

int printed_pid(const std::string& out) {
  std::smatch m;
  static const std::regex pid_line(R"(pid (\d+))");
  return std::regex_search(out, m, pid_line) ? std::stoi(m[1]) : -1;
}

}  // namespace jitunwind::test
