// File mode: private runtime directory, race-free creation, removal on unload/exit, stale
// files of dead processes, and refusal of unsafe directories and planted links.
#include <jitunwind/usdt.h>

#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;

namespace {

bool exists_nofollow(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

provider file_provider(const std::string& name, const std::string& dir) {
  provider_options o;
  o.location = object_location::file;
  o.directory = dir;
  auto p = provider::create(name, o);
  REQUIRE(p.ok());
  REQUIRE(p->add_probe("evt", {arg_type::i32}).ok());
  return std::move(*p);
}

unsigned long long start_time_of_self() {
  const std::string stat = read_file("/proc/self/stat");
  const size_t paren = stat.rfind(')');
  size_t pos = paren + 2;
  for (int field = 3; field < 22; ++field) pos = stat.find(' ', pos) + 1;
  return std::strtoull(stat.c_str() + pos, nullptr, 10);
}

// A pid that certainly belongs to no process now: a child that has exited and been reaped.
int dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

}  // namespace

TEST_CASE("file mode: a private file that names process and provider, removed on unload") {
  temp_dir dir;
  chmod(dir.path().c_str(), 0700);
  provider p = file_provider("filemode", dir.path());
  REQUIRE(p.load().ok());
  const std::string path = p.object_path();
  const std::string expected_prefix = dir.path() + "/jitunwind-usdt-filemode-" +
                                      std::to_string(getpid()) + "-" +
                                      std::to_string(start_time_of_self()) + "-1.so";
  CHECK(path == expected_prefix);
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0500);
  CHECK(st.st_uid == geteuid());
  CHECK(read_file("/proc/self/maps").find(path) != std::string::npos);

  // A second provider with the same name in the same process takes the next number.
  provider twin = file_provider("filemode", dir.path());
  REQUIRE(twin.load().ok());
  CHECK(twin.object_path().substr(twin.object_path().size() - 5) == "-2.so");

  REQUIRE(p.unload().ok());
  CHECK(!exists_nofollow(path));
  CHECK(read_file("/proc/self/maps").find(path) == std::string::npos);
  REQUIRE(twin.unload().ok());
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("file mode: the default runtime directory is $XDG_RUNTIME_DIR/jitunwind, mode 0700") {
  temp_dir xdg;
  chmod(xdg.path().c_str(), 0700);
  const char* old = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("XDG_RUNTIME_DIR", xdg.path().c_str(), 1);
  provider_options o;
  o.location = object_location::file;
  auto p = provider::create("xdgmode", o);
  REQUIRE(p.ok());
  REQUIRE(p->add_probe("e", {}).ok());
  auto r = p->load();
  if (old != nullptr)
    setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
  else
    unsetenv("XDG_RUNTIME_DIR");
  REQUIRE(r.ok());
  CHECK(p->object_path().rfind(xdg.path() + "/jitunwind/jitunwind-usdt-xdgmode-", 0) == 0);
  struct stat st {};
  REQUIRE(stat((xdg.path() + "/jitunwind").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(p->unload().ok());
}

TEST_CASE("file mode: a planted symbolic link is refused, nothing loaded or overwritten") {
  temp_dir dir;
  chmod(dir.path().c_str(), 0700);
  provider p = file_provider("planted", dir.path());
  auto probe_handle = p.find_probe("evt");
  REQUIRE(probe_handle.ok());
  REQUIRE(p.load().ok());
  const std::string path = p.object_path();
  REQUIRE(p.unload().ok());

  const std::string victim = dir / "victim";
  REQUIRE(write_file(victim, "precious"));
  REQUIRE(symlink(victim.c_str(), path.c_str()) == 0);
  auto r = p.load();
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::permission_denied);
  CHECK(r.error().message().find("symbolic link") != std::string::npos);
  CHECK(r.error().message().find(path) != std::string::npos);
  CHECK(!p.loaded());
  CHECK(!probe_handle->loaded());
  CHECK(read_file(victim) == "precious");
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));  // left alone
}

TEST_CASE("file mode: unsafe runtime directories are refused") {
  temp_dir dir;
  // Writable by others.
  const std::string open_dir = dir / "open";
  REQUIRE(mkdir(open_dir.c_str(), 0777) == 0);
  chmod(open_dir.c_str(), 0777);
  provider a = file_provider("unsafe", open_dir);
  auto r = a.load();
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::permission_denied);
  CHECK(r.error().message().find("mode 0777") != std::string::npos);
  CHECK(std::filesystem::is_empty(open_dir));

  // A symbolic link to a directory.
  const std::string real = dir / "real";
  REQUIRE(mkdir(real.c_str(), 0700) == 0);
  const std::string link = dir / "link";
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  provider b = file_provider("unsafe", link);
  r = b.load();
  REQUIRE(!r.ok());
  CHECK(r.error().message().find("symbolic link") != std::string::npos);
  CHECK(std::filesystem::is_empty(real));

  // Relative paths are rejected up front.
  provider c = file_provider("unsafe", "relative/dir");
  CHECK(c.load().error().code() == errc::invalid_argument);

  if (!may_run_privileged("chown to another user")) return;
  const std::string foreign = dir / "foreign";
  REQUIRE(mkdir(foreign.c_str(), 0700) == 0);
  REQUIRE(chown(foreign.c_str(), 65534, 65534) == 0);
  provider d = file_provider("unsafe", foreign);
  r = d.load();
  REQUIRE(!r.ok());
  CHECK(r.error().message().find("owned by uid 65534") != std::string::npos);
}

TEST_CASE("file mode: an unwritable runtime directory gives a clear error") {
  if (!may_run_privileged("mounting a read-only tmpfs")) return;
  temp_dir dir;
  const std::string ro = dir / "ro";
  REQUIRE(mkdir(ro.c_str(), 0700) == 0);
  REQUIRE(mount("tmpfs", ro.c_str(), "tmpfs", MS_RDONLY, "mode=0700") == 0);
  provider p = file_provider("readonly", ro);
  auto r = p.load();
  umount(ro.c_str());
  REQUIRE(!r.ok());
  CHECK(r.error().code() == errc::permission_denied);
  CHECK(r.error().message().find("cannot create " + ro + "/jitunwind-usdt-readonly-") !=
        std::string::npos);
  CHECK(r.error().message().find("Read-only file system") != std::string::npos);
  CHECK(!p.loaded());
}

TEST_CASE("file mode: files of dead processes are removed on the next load, live ones kept") {
  temp_dir dir;
  chmod(dir.path().c_str(), 0700);
  const std::string dead = dir / ("jitunwind-usdt-old-" + std::to_string(dead_pid()) + "-5-1.so");
  // Our pid with another start time: a previous process that had our pid.
  const std::string reused = dir / ("jitunwind-usdt-old-" + std::to_string(getpid()) + "-" +
                                    std::to_string(start_time_of_self() + 1) + "-1.so");
  // Ours (this process, right start time): alive, kept.
  const std::string alive = dir / ("jitunwind-usdt-other-" + std::to_string(getpid()) + "-" +
                                   std::to_string(start_time_of_self()) + "-9.so");
  const std::string unrelated = dir / "notes.txt";
  for (const auto& f : {dead, reused, alive, unrelated}) REQUIRE(write_file(f, "x"));
  std::vector<std::string> logged;
  provider_options o;
  o.location = object_location::file;
  o.directory = dir.path();
  o.log.fn = [](void* user, log_level, std::string_view m) {
    static_cast<std::vector<std::string>*>(user)->emplace_back(m);
  };
  o.log.user = &logged;
  auto p = provider::create("cleaner", o);
  REQUIRE(p.ok());
  REQUIRE(p->add_probe("e", {}).ok());
  REQUIRE(p->load().ok());
  CHECK(!exists_nofollow(dead));
  CHECK(!exists_nofollow(reused));
  CHECK(exists_nofollow(alive));
  CHECK(exists_nofollow(unrelated));
  REQUIRE(!logged.empty());
  CHECK(logged[0].find("removed 2 stale") != std::string::npos);
}

TEST_CASE("file mode: exit() removes the file, a killed process leaves it for the next load") {
  temp_dir dir;
  chmod(dir.path().c_str(), 0700);
  auto child_loads = [&](bool kill_self) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t child = fork();
    if (child == 0) {
      close(fds[0]);
      provider_options o;
      o.location = object_location::file;
      o.directory = dir.path();
      auto p = provider::create("exiting", o);
      if (!p || !p->add_probe("e", {}).ok() || !p->load().ok()) _exit(3);
      // Leak the provider on purpose: exit() does not destroy heap objects.
      auto* leaked = new provider(std::move(*p));
      const std::string path = leaked->object_path();
      (void)!write(fds[1], path.data(), path.size());
      close(fds[1]);
      if (kill_self) raise(SIGKILL);
      std::exit(0);
    }
    close(fds[1]);
    char buf[4096];
    std::string path;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) path.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    return path;
  };
  const std::string exited = child_loads(false);
  REQUIRE(!exited.empty());
  CHECK(!exists_nofollow(exited));

  const std::string killed = child_loads(true);
  REQUIRE(!killed.empty());
  CHECK(exists_nofollow(killed));  // nothing runs on SIGKILL
  provider p = file_provider("later", dir.path());
  REQUIRE(p.load().ok());
  CHECK(!exists_nofollow(killed));
}
