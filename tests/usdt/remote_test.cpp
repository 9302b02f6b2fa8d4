// usdt::find_providers reading another process's dynamic providers.
#include <jitunwind/usdt.h>

#include "support/privileges.hpp"
#include "tracer_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;

namespace {

// Writes the whole line; a child has no other way to report.
void send_line(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

// The child of the collision test: loads memfd provider `name`, then puts, at an fd number below
// the memfd's, a file of a fresh tmpfs (another device) whose inode number is the memfd's. It
// reports "ok FD", "skip: WHY" or "fail: WHY" on `report` and stays alive until `go` closes.
[[noreturn]] void collision_child(const std::string& name, const std::string& mount_point,
                                  int report, int go) {
  const auto fail = [&](const std::string& why) {
    send_line(report, "fail: " + why);
    _exit(1);
  };
  const auto fail_sys = [&](const std::string& what) {
    const int err = errno;
    fail(what + ": " + std::strerror(err));
  };
  // A private mount namespace: the tmpfs is invisible outside and goes away with the child.
  if (unshare(CLONE_NEWNS) != 0) fail_sys("unshare(CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail_sys("make / private");
  if (mount("jitunwind-test", mount_point.c_str(), "tmpfs", 0, "mode=0700") != 0)
    fail_sys("mount tmpfs on " + mount_point);
  // Taken before the provider loads, so its number is below the memfd's: /proc/PID/fd lists
  // fds in ascending order, and the old lookup took the first fd with the right inode number.
  const int low_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (low_fd < 0) fail_sys("open /dev/null");

  auto prov = provider::create(name);
  if (!prov) fail("provider: " + prov.error().message());
  auto p = prov->add_probe("ev", {arg_type::i32});
  if (!p) fail("probe: " + p.error().message());
  if (auto r = prov->load(); !r) fail("load: " + r.error().message());
  const std::string path = prov->object_path();
  const int memfd = std::atoi(path.substr(path.rfind('/') + 1).c_str());
  struct stat mem {};
  if (fstat(memfd, &mem) != 0) fail_sys("fstat memfd");
  if (memfd <= low_fd)
    fail("the memfd (fd " + std::to_string(memfd) + ") is not above fd " + std::to_string(low_fd));

  // A fresh tmpfs numbers its inodes 1, 2, 3, ... and never reuses a number: create and drop
  // unnamed files until one has the memfd's number.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const int fd = open(mount_point.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) fail_sys("O_TMPFILE in " + mount_point);
    struct stat st {};
    if (fstat(fd, &st) != 0) fail_sys("fstat tmpfile");
    if (st.st_dev == mem.st_dev) fail("the tmpfs is on the memfd's device");
    if (st.st_ino == mem.st_ino) {
      if (dup2(fd, low_fd) != low_fd) fail_sys("dup2");
      close(fd);
      break;
    }
    close(fd);
    if (st.st_ino > mem.st_ino || std::chrono::steady_clock::now() > deadline) {
      send_line(report, "skip: the memfd's inode number " + std::to_string(mem.st_ino) +
                            " cannot be reached in a fresh tmpfs (at " + std::to_string(st.st_ino) +
                            ")");
      _exit(0);
    }
  }
  send_line(report, "ok " + path.substr(path.rfind('/') + 1));
  read_line(go);  // returns at EOF, when the parent is done
  _exit(0);
}

}  // namespace

TEST_CASE("find_providers opens a memfd object through the fd with its device and inode") {
  // The object of a /memfd: mapping is opened through the fd that keeps it alive. Another file of
  // the process with the same inode number on another device, at a lower fd, was taken instead:
  // its contents are no ELF object, so the provider was reported unreadable and left out.
  if (!may_run_privileged("mounting a private tmpfs")) return;
  temp_dir mount_point;
  const std::string name = unique_provider("collide");
  int report[2], go[2];
  REQUIRE(pipe2(report, O_CLOEXEC) == 0);
  REQUIRE(pipe2(go, O_CLOEXEC) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(report[0]);
    close(go[1]);
    collision_child(name, mount_point.path(), report[1], go[0]);
  }
  close(report[1]);
  close(go[0]);
  // Lets the child go and reaps it however the checks below end (a failed REQUIRE throws).
  struct release_child {
    pid_t pid;
    int go;
    int status = -1;
    ~release_child() { finish(); }
    void finish() {
      if (go < 0) return;
      close(go);
      go = -1;
      waitpid(pid, &status, 0);
    }
  } release{child, go[1]};
  const std::string status = read_line(report[0]);
  close(report[0]);
  INFO("child: " << status);
  if (status.rfind("skip: ", 0) == 0) {
    WARN("SKIPPED: " << status.substr(6));
    return;
  }
  REQUIRE(status.rfind("ok ", 0) == 0);
  const std::string fd_path = "/proc/" + std::to_string(child) + "/fd/" + status.substr(3);
  std::vector<std::string> warnings;
  auto found = find_providers(child, &warnings);
  REQUIRE(found.ok());
  std::string all_warnings;
  for (const auto& w : warnings) all_warnings += w + "\n";
  INFO("warnings:\n" << all_warnings);
  CHECK(warnings.empty());
  REQUIRE(found->size() == 1);
  const remote_object& o = found->front();
  CHECK(o.mapping == "/memfd:jitunwind-usdt:" + name + " (deleted)");
  CHECK(o.access_path == fd_path);
  REQUIRE(o.probes.size() == 1);
  CHECK(o.probes[0].note.provider == name);
  CHECK(o.probes[0].note.name == "ev");
  release.finish();
  CHECK(WIFEXITED(release.status));
  CHECK(WEXITSTATUS(release.status) == 0);
}
