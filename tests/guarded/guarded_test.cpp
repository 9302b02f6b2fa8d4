// The guarded reading layer (sdk/src/guarded/): how every reader of another process's data opens
// files, bounds what it holds, creates outputs, parses /proc and prints names. Each rule is
// tested on the shape a hostile process would use against it.
#include <jitunwind/toolkit/budget.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>
#include <jitunwind/toolkit/output_file.hpp>
#include <jitunwind/toolkit/proc_stat.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

using namespace jitunwind;
using namespace jitunwind::toolkit;
namespace jt = jitunwind::test;

namespace {

open_rules target_rules(uint64_t max = 1 << 20) {
  open_rules r;
  r.what = "perf map";
  r.no_follow = true;
  r.max_bytes = max;
  return r;
}

}  // namespace

TEST_CASE("guarded open: a FIFO is refused at once, not waited on") {
  jt::temp_dir dir;
  const std::string fifo = dir / "perf-1.map";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto f = guarded_file::open(fifo, target_rules());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code() == errc::io_error);
  CHECK(f.error().message() == "perf map " + fifo + ": is a FIFO, not a regular file");
}

TEST_CASE("guarded open: a link the other process planted is not followed") {
  jt::temp_dir dir;
  const std::string link = dir / "perf-2.map";
  REQUIRE(::symlink("/dev/zero", link.c_str()) == 0);
  auto f = guarded_file::open(link, target_rules());
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code() == errc::permission_denied);
  CHECK_THAT(f.error().message(),
             Catch::Contains("perf map " + link + ": is a symbolic link: not followed"));
  // A path the reader built itself (a /proc link) is followed on request; /dev/zero is still
  // no regular file.
  open_rules follow = target_rules();
  follow.no_follow = false;
  auto g = guarded_file::open(link, follow);
  REQUIRE_FALSE(g.ok());
  CHECK_THAT(g.error().message(), Catch::Contains("is a character device"));
}

TEST_CASE("guarded open: size caps, owner, directories") {
  jt::temp_dir dir;
  const std::string big = dir / "big";
  {
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t{20} << 30) == 0);  // 20 GiB, sparse: costs nothing
    ::close(fd);
  }
  auto f = guarded_file::open(big, target_rules(1 << 20));
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code() == errc::limit_exceeded);
  CHECK_THAT(f.error().message(), Catch::Contains("20 GiB") && Catch::Contains("1 MiB"));

  REQUIRE(jt::write_file(dir / "small", "1000 10 f\n"));
  open_rules owned = target_rules();
  owned.owner = ::geteuid() + 1;
  auto o = guarded_file::open(dir / "small", owned);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().code() == errc::permission_denied);
  owned.owner = ::geteuid();
  CHECK(guarded_file::open(dir / "small", owned).ok());

  auto d = guarded_file::open(dir.path(), target_rules());
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.error().message(), Catch::Contains("is a directory"));
  auto missing = guarded_file::open(dir / "none", target_rules());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == errc::not_found);
}

TEST_CASE("guarded read: a file truncated while it is read is an error, never SIGBUS") {
  jt::temp_dir dir;
  const std::string path = dir / "object";
  REQUIRE(jt::write_file(path, std::string(1 << 16, 'x')));
  auto f = guarded_file::open(path, target_rules());
  REQUIRE(f.ok());
  REQUIRE(::truncate(path.c_str(), 100) == 0);
  char buf[4096];
  auto r = f->read_at(8192, buf, sizeof buf);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::io_error);
  CHECK_THAT(r.error().message(),
             Catch::Contains("changed while it was read") && Catch::Contains("now has 100 bytes"));
  CHECK(f->read_at(0, buf, 100).ok());
}

TEST_CASE("guarded read_all: /proc files (size 0) are read whole, growing files are capped") {
  auto maps = read_proc_text("/proc/self/maps");
  REQUIRE(maps.ok());
  CHECK(maps->find("[stack]") != std::string::npos);
  jt::temp_dir dir;
  REQUIRE(jt::write_file(dir / "f", std::string(3000, 'a')));
  open_rules rules = target_rules(4096);
  auto f = guarded_file::open(dir / "f", rules);
  REQUIRE(f.ok());
  // It grows past the cap after the open.
  REQUIRE(jt::write_file(dir / "f", std::string(5000, 'b')));
  auto all = f->read_all();
  REQUIRE_FALSE(all.ok());
  CHECK(all.error().code() == errc::limit_exceeded);
}

TEST_CASE("memory budget: charges are given back, the limit says what and how to raise it") {
  memory_budget budget(1 << 20, "raise it with --max-memory");
  {
    auto a = budget_charge::take(&budget, 600 << 10, "section .symtab of libx.so");
    REQUIRE(a.ok());
    CHECK(budget.used() == 600u << 10);
    auto b = budget_charge::take(&budget, 600 << 10, "the SFrame of window 3");
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().code() == errc::limit_exceeded);
    CHECK(b.error().message() ==
          "memory budget of 1 MiB reached: the SFrame of window 3 needs 600 KiB, 600 KiB of the "
          "target's data are held (raise it with --max-memory)");
    a->shrink_to(100);
    CHECK(budget.used() == 100);
  }
  CHECK(budget.used() == 0);
  CHECK(budget.peak() == 600u << 10);
  CHECK(budget.refusals() == 1);
  // Reads charge while their buffer lives.
  jt::temp_dir dir;
  REQUIRE(jt::write_file(dir / "f", std::string(70000, 'z')));
  auto f = guarded_file::open(dir / "f", target_rules());
  REQUIRE(f.ok());
  {
    auto bytes = f->read_all(&budget);
    REQUIRE(bytes.ok());
    CHECK(bytes->bytes.size() == 70000);
    CHECK(budget.used() == 70000);
  }
  CHECK(budget.used() == 0);
  memory_budget tiny(1000);
  auto refused = f->read_range(0, 5000, &tiny, "section .text");
  REQUIRE_FALSE(refused.ok());
  CHECK(tiny.used() == 0);
}

TEST_CASE("outputs: never through a planted link, FIFO or device, replaced whole") {
  jt::temp_dir dir;
  const std::string victim = dir / "victim";
  REQUIRE(jt::write_file(victim, "precious"));
  const std::string link = dir / "out.svg";
  REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
  auto r = replace_file(link, std::string_view("<svg/>"), "SVG flame graph");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::permission_denied);
  CHECK_THAT(r.error().message(), Catch::Contains("symbolic link"));
  CHECK_FALSE(check_output_path(link).ok());
  CHECK(jt::read_file(victim) == "precious");

  const std::string fifo = dir / "out.folded";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto f = replace_file(fifo, std::string_view("a 1\n"));
  REQUIRE_FALSE(f.ok());
  CHECK_THAT(f.error().message(), Catch::Contains("is a FIFO"));

  // A hard link to someone's file: the name gets a new file, the other name keeps its bytes.
  const std::string hard = dir / "out.pb.gz";
  REQUIRE(::link(victim.c_str(), hard.c_str()) == 0);
  REQUIRE(replace_file(hard, std::string_view("new")).ok());
  CHECK(jt::read_file(hard) == "new");
  CHECK(jt::read_file(victim) == "precious");

  // check_output_path creates nothing; a new output appears whole, with the usual mode.
  const std::string fresh = dir / "fresh.txt";
  REQUIRE(check_output_path(fresh).ok());
  struct stat st {};
  CHECK(::lstat(fresh.c_str(), &st) != 0);
  const mode_t mask = ::umask(022);
  REQUIRE(replace_file(fresh, std::string_view("hello")).ok());
  ::umask(mask);
  REQUIRE(::lstat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(jt::read_file(fresh) == "hello");
  auto missing_dir = replace_file(dir / "no/such/out", std::string_view("x"));
  REQUIRE_FALSE(missing_dir.ok());
  CHECK_THAT(missing_dir.error().message(), Catch::Contains("no/such"));
  // Nothing but the outputs is left in the directory (no temporary files).
  auto ls = jt::run_shell("ls -A " + dir.path());
  CHECK(ls.out == "fresh.txt\nout.folded\nout.pb.gz\nout.svg\nvictim\n");
}

TEST_CASE("/proc/PID/stat: the command name ends at the last ')'") {
  auto s = parse_proc_stat("42 (a) b\n) c) S 1 42 42 0 -1 4194560 0 0");
  REQUIRE(s.has_value());
  CHECK(s->pid == 42);
  CHECK(s->comm == "a) b\n) c");
  CHECK(s->state == 'S');
  CHECK(s->ppid == 1);
  CHECK_FALSE(s->kernel_thread());
  CHECK_FALSE(parse_proc_stat("42 (unterminated S 1").has_value());
  auto k = parse_proc_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0");
  REQUIRE(k.has_value());
  CHECK(k->kernel_thread());

  // A live process whose name holds a newline and parentheses.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_NAME, "x) Z\n(y", 0, 0, 0);
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  auto live = read_proc_stat(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  REQUIRE(live.ok());
  CHECK(live->comm == "x) Z\n(y");
  CHECK_FALSE(live->ended());
  CHECK(read_proc_stat(child).error().code() == errc::not_found);
}

TEST_CASE("terminal text: controls, C1 controls and non-UTF-8 bytes become visible") {
  CHECK(terminal_text("plain name::f<int>") == "plain name::f<int>");
  CHECK(terminal_text("a\x1b]0;pwned\x07z") == "a\\x1b]0;pwned\\x07z");
  CHECK(terminal_text("line\nnext\ttab") == "line\\nnext\\ttab");
  CHECK(terminal_text("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 kept
  CHECK(terminal_text("csi\xc2\x9b"
                      "31m") == "csi\\xc2\\x9b31m");  // U+009B
  CHECK(terminal_text("bad\xff\xc3") == "bad\\xff\\xc3");
  CHECK(terminal_text(std::string_view("nul\0x", 5)) == "nul\\x00x");
  CHECK(terminal_text("del\x7f") == "del\\x7f");
  const std::string digits(5000, '9');
  CHECK(shortened(digits) == std::string(40, '9') + "... (5000 bytes)");
  CHECK(shortened("12") == "12");
}
