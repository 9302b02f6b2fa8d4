// The perf map writer: line format, sanitizing, errors, file safety, concurrency.
#include "perfmap/perfmap_writer.hpp"

#include "support/perf_map_text.hpp"
#include "support/process.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

using namespace jitunwind;
using namespace jitunwind::detail;
using namespace jitunwind::test;

namespace {

constexpr uid_t nobody = 65534;

// The lines of a map, checking the writer's page rule (support/perf_map_text.hpp).
std::vector<std::string> lines_of(const std::string& text) {
  perf_map_text t = parse_perf_map_text(text);
  INFO(t.problem);
  CHECK(t.problem.empty());
  return std::move(t.lines);
}

mode_t current_umask() {
  const mode_t m = ::umask(0);
  ::umask(m);
  return m;
}

std::unique_ptr<perfmap_writer> must_create(const std::string& dir, pid_t pid = 4242) {
  auto w = perfmap_writer::create({dir, pid});
  INFO((w.ok() ? std::string() : w.error().message()));
  REQUIRE(w.ok());
  return std::move(*w);
}

}  // namespace

TEST_CASE("lines are START SIZE name in lower-case hex without 0x") {
  temp_dir dir;
  auto w = must_create(dir.path());
  CHECK(w->path() == dir / "perf-4242.map");
  REQUIRE(w->add(0x7F00DEADBEEF, 0x2A, "jit::add(int, int)").ok());
  REQUIRE(w->add(0x1000, 1, "x").ok());
  const std::string text = read_file(w->path());
  CHECK(text == "7f00deadbeef 2a jit::add(int, int)\n1000 1 x\n");
  struct stat st {};
  REQUIRE(::stat(w->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0644 & ~current_umask()));
}

TEST_CASE("existing map of ours is appended to, not truncated") {
  temp_dir dir;
  REQUIRE(write_file(dir / "perf-4242.map", "1000 10 old\n"));
  auto w = must_create(dir.path());
  REQUIRE(w->add(0x2000, 0x10, "new").ok());
  CHECK(read_file(w->path()) == "1000 10 old\n2000 10 new\n");
}

TEST_CASE("control characters in names become '?', other bytes stay") {
  temp_dir dir;
  auto w = must_create(dir.path());
  const std::string evil = std::string("a\nb\tc\rd\x1b[31me\x7f") + '\0' + "f \xc3\xa9";
  REQUIRE(w->add(0x1000, 8, evil).ok());
  CHECK(read_file(w->path()) == "1000 8 a?b?c?d?[31me??f \xc3\xa9\n");
  CHECK(sanitize_symbol_name("ok name") == "ok name");
}

TEST_CASE("bad arguments are rejected and nothing is written") {
  temp_dir dir;
  auto w = must_create(dir.path());
  auto r = w->add(0x1000, 0, "zero");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK_THAT(r.error().message(), Catch::Contains("size 0") && Catch::Contains("0x1000"));
  CHECK(w->add(0x1000, 4, "").error().code() == errc::invalid_argument);
  CHECK(w->add(~0ull - 2, 4, "wrap").error().code() == errc::out_of_range);
  CHECK(w->add(0x1000, 4, std::string(perfmap_max_name + 1, 'n')).error().code() ==
        errc::invalid_argument);
  CHECK(w->add(0x1000, 4, std::string(perfmap_max_name, 'n')).ok());
  CHECK(lines_of(read_file(w->path())).size() == 1);
}

TEST_CASE("a batch is the same lines as one add per entry, and is all or nothing") {
  temp_dir one_by_one, batched;
  auto a = must_create(one_by_one.path());
  auto b = must_create(batched.path());
  std::vector<std::string> names;
  std::vector<perfmap_entry> entries;
  for (uint64_t i = 0; i < 300; ++i) {
    names.push_back("js:f" + std::to_string(i) + (i % 7 == 0 ? "\t\x7f" : "") +
                    std::string(i % 50, 'n'));
  }
  const uint64_t starts[] = {0, 1, 0xf, 0x10, 0xffffffff, 0x7f00deadbeef, 0x8000000000000000ull};
  for (size_t i = 0; i < names.size(); ++i) {
    const uint64_t start = i < std::size(starts) ? starts[i] : 0x100000000ull + i * 0x40;
    const uint64_t size = i == 0 ? 1 : (i == 1 ? 0x7fffffffffffffffull : 0x10 + i);
    entries.push_back({start, size, names[i]});
    REQUIRE(a->add(start, size, names[i]).ok());
  }
  REQUIRE(b->add_batch(entries).ok());
  CHECK(read_file(b->path()) == read_file(a->path()));
  CHECK(lines_of(read_file(b->path())).size() == names.size());
  CHECK(lines_of(read_file(b->path()))[3] == "10 13 js:f3nnn");

  // A bad entry anywhere: nothing of the batch is written.
  const std::string before = read_file(b->path());
  for (const perfmap_entry bad : {perfmap_entry{0x1000, 0, "zero"}, perfmap_entry{0x1000, 4, ""},
                                  perfmap_entry{~0ull - 2, 4, "wrap"}}) {
    auto with_bad = entries;
    with_bad.insert(with_bad.begin() + 150, bad);
    CHECK_FALSE(b->add_batch(with_bad).ok());
  }
  CHECK(b->add_batch({}).ok());
  CHECK(read_file(b->path()) == before);
}

TEST_CASE("entries marked clean are copied as they are, the same lines for clean names") {
  temp_dir scanned, copied;
  auto a = must_create(scanned.path());
  auto b = must_create(copied.path());
  std::vector<std::string> names;
  for (int i = 0; i < 100; ++i)
    names.push_back("js:Module.function_" + std::to_string(i) +
                    " (\xc3\xa9:" + std::string(static_cast<size_t>(i % 13), 'x') + ")");
  std::vector<perfmap_entry> plain, clean;
  for (size_t i = 0; i < names.size(); ++i) {
    plain.push_back({0x7f0000001000 + i * 0x40, 0x30 + i, names[i]});
    clean.push_back({0x7f0000001000 + i * 0x40, 0x30 + i, names[i], /*clean=*/true});
  }
  REQUIRE(a->add_batch(plain).ok());
  REQUIRE(b->add_batch(clean).ok());
  CHECK(read_file(b->path()) == read_file(a->path()));
  CHECK(lines_of(read_file(b->path())).size() == names.size());
  // The flag skips only the scan, never the argument checks.
  CHECK_FALSE(b->add_batch(std::vector<perfmap_entry>{{0x1000, 0, "zero", true}}).ok());
}

TEST_CASE("unsafe files are refused with clear errors and left untouched") {
  temp_dir dir;
  const std::string map = dir / "perf-4242.map";

  SECTION("planted symlink") {
    const std::string target = dir / "victim";
    REQUIRE(write_file(target, "precious\n"));
    REQUIRE(::symlink(target.c_str(), map.c_str()) == 0);
    auto w = perfmap_writer::create({dir.path(), 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK_THAT(w.error().message(), Catch::Contains("symbolic link") && Catch::Contains(map));
    CHECK(read_file(target) == "precious\n");
  }
  SECTION("file owned by another user") {
    REQUIRE(write_file(map, "1000 10 theirs\n"));
    if (::geteuid() != 0) return;  // only root can make a file someone else's
    REQUIRE(::chown(map.c_str(), nobody, nobody) == 0);
    auto w = perfmap_writer::create({dir.path(), 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK_THAT(w.error().message(), Catch::Contains("owned by uid 65534"));
    CHECK(read_file(map) == "1000 10 theirs\n");
  }
  SECTION("a FIFO (must not block)") {
    REQUIRE(::mkfifo(map.c_str(), 0644) == 0);
    auto w = perfmap_writer::create({dir.path(), 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK_THAT(w.error().message(), Catch::Contains("not a regular file"));
  }
  SECTION("a directory") {
    REQUIRE(::mkdir(map.c_str(), 0755) == 0);
    auto w = perfmap_writer::create({dir.path(), 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
  }
  SECTION("a second hard link") {
    const std::string other = dir / "other";
    REQUIRE(write_file(other, ""));
    REQUIRE(::link(other.c_str(), map.c_str()) == 0);
    auto w = perfmap_writer::create({dir.path(), 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK_THAT(w.error().message(), Catch::Contains("hard links"));
  }
  SECTION("missing directory") {
    auto w = perfmap_writer::create({dir / "nope", 4242});
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::not_found);
    CHECK_THAT(w.error().message(), Catch::Contains(dir / "nope"));
  }
  SECTION("unwritable directory") {
    if (::geteuid() != 0) return;  // needs a second identity: root drops to nobody in a child
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(fds[0]);
      if (::setgid(nobody) != 0 || ::setuid(nobody) != 0) ::_exit(3);
      auto w = perfmap_writer::create({dir.path(), 4242});
      const std::string msg =
          w.ok() ? "created"
                 : std::string(to_string(w.error().code())) + ": " + w.error().message();
      (void)!::write(fds[1], msg.data(), msg.size());
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
      msg.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    CHECK_THAT(msg, Catch::StartsWith("permission_denied") && Catch::Contains("perf-4242.map"));
    CHECK(::access(map.c_str(), F_OK) != 0);
  }
}

TEST_CASE("concurrent writers never interleave lines") {
  temp_dir dir;
  auto w = must_create(dir.path());
  constexpr int threads = 8, per_thread = 2000;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};  // Catch2 assertions are not thread-safe: count, check after
  for (int t = 0; t < threads; ++t) {
    // Odd threads write batches of 1 to 37 lines.
    ts.emplace_back([&, t] {
      std::vector<std::string> names;
      std::vector<perfmap_entry> batch;
      for (int i = 0; i < per_thread; ++i) {
        names.push_back("thread_" + std::to_string(t) + "_function_" + std::to_string(i) +
                        std::string(static_cast<size_t>(i % 97), 'x'));
        const uint64_t start = (static_cast<uint64_t>(t) << 32) | static_cast<uint64_t>(i) << 8;
        if (t % 2 == 0) {
          if (!w->add(start, 0x40 + i, names.back()).ok()) ++failures;
          continue;
        }
        batch.push_back({start, static_cast<uint64_t>(0x40 + i), {}});
        if (batch.size() == static_cast<size_t>(1 + i % 37) || i == per_thread - 1) {
          for (size_t k = 0; k < batch.size(); ++k)
            batch[k].name = names[names.size() - batch.size() + k];
          if (!w->add_batch(batch).ok()) ++failures;
          batch.clear();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  REQUIRE(failures == 0);
  const std::vector<std::string> lines = lines_of(read_file(w->path()));
  REQUIRE(lines.size() == threads * per_thread);
  static const std::regex line_re(R"(^([0-9a-f]+) ([0-9a-f]+) thread_(\d+)_function_(\d+)(x*)$)");
  std::vector<std::vector<bool>> seen(threads, std::vector<bool>(per_thread, false));
  for (const std::string& l : lines) {
    std::smatch m;
    INFO(l);
    REQUIRE(std::regex_match(l, m, line_re));
    const int t = std::stoi(m[3]), i = std::stoi(m[4]);
    CHECK(std::stoull(m[1], nullptr, 16) ==
          ((static_cast<uint64_t>(t) << 32) | static_cast<uint64_t>(i) << 8));
    CHECK(std::stoull(m[2], nullptr, 16) == static_cast<uint64_t>(0x40 + i));
    CHECK(static_cast<size_t>(m[5].length()) == static_cast<size_t>(i % 97));
    seen[t][i] = true;
  }
  for (auto& v : seen) CHECK(std::count(v.begin(), v.end(), true) == per_thread);
}
