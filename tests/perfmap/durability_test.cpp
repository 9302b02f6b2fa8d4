// Durability of the file publishers' writers (perfmap/record_file.hpp): sync against batched,
// what makes a batched writer write, the flusher thread, fork and exit.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "perfmap/flusher.hpp"
#include "perfmap/perfmap_writer.hpp"

#include "support/eventually.hpp"
#include "support/perf_map_text.hpp"
#include "support/process.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

using namespace jitunwind;
using namespace jitunwind::detail;
using namespace jitunwind::test;
namespace jd = jitunwind::detail::jitdump;

namespace {

constexpr uint64_t ms = 1000000;

file_policy batched(uint64_t latency_ms = 60000, flusher* background = nullptr,
                    size_t bytes = size_t{1} << 20) {
  file_policy p;
  p.mode = durability::batched;
  p.flush_bytes = bytes;
  p.latency_ns = latency_ms * ms;
  p.background = background;
  return p;
}

std::unique_ptr<perfmap_writer> map_writer(const std::string& dir, const file_policy& p,
                                           pid_t pid = 4242) {
  auto w = perfmap_writer::create({dir, pid, p});
  INFO((w.ok() ? std::string() : w.error().message()));
  REQUIRE(w.ok());
  return std::move(*w);
}

std::unique_ptr<jitdump_writer> dump_writer(const std::string& dir, const file_policy& p,
                                            pid_t pid = 4242) {
  jitdump_options o;
  o.dir = dir;
  o.pid = pid;
  o.policy = p;
  auto w = jitdump_writer::create(o);
  INFO((w.ok() ? std::string() : w.error().message()));
  REQUIRE(w.ok());
  return std::move(*w);
}

jd::parsed_dump parse_dump(const std::string& bytes) {
  auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  INFO((d.ok() ? std::string() : d.error().message()));
  REQUIRE(d.ok());
  return std::move(*d);
}

std::vector<std::string> map_lines(const std::string& path) {
  perf_map_text t = parse_perf_map_text(read_file(path));
  INFO(t.problem);
  CHECK(t.problem.empty());
  return std::move(t.lines);
}

size_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

const uint8_t code[16] = {0x48, 0x83, 0xec, 0x08, 0xe8, 0,    0,    0,
                          0,    0x48, 0x83, 0xc4, 0x08, 0xc3, 0x90, 0x90};

jitdump_load load_at(uint64_t addr, const char* name) {
  return {name, addr, std::span<const uint8_t>(code, sizeof code), nullptr};
}

// Runs `child` in a forked process and returns its exit status (-1: killed).
template <class F>
int in_child(F&& child) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    child();
    std::exit(0);  // a normal exit: the exit handlers run
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("batched perf map: nothing in the file until flushed, then the same lines as sync") {
  temp_dir dir;
  auto b = map_writer(dir.path(), batched(), 1);
  auto s = map_writer(dir.path(), file_policy{}, 2);
  for (int i = 0; i < 300; ++i) {
    const std::string name = "js:f" + std::to_string(i) + std::string(i % 61, 'n');
    REQUIRE(b->add(0x10000 + 0x100 * i, 0x40, name).ok());
    REQUIRE(s->add(0x10000 + 0x100 * i, 0x40, name).ok());
  }
  CHECK(file_size(b->path()) == 0);
  CHECK(file_size(s->path()) > 4096);
  REQUIRE(b->flush().ok());
  // Byte for byte: the padding before page boundaries depends only on the offsets.
  CHECK(read_file(b->path()) == read_file(s->path()));
  CHECK(map_lines(b->path()).size() == 300);
  REQUIRE(b->flush().ok());  // nothing left: no second copy
  CHECK(read_file(b->path()) == read_file(s->path()));
}

TEST_CASE("batched: the buffer is written once it holds flush_bytes") {
  temp_dir dir;
  auto w = map_writer(dir.path(), batched(60000, nullptr, 4096));
  size_t added = 0;
  while (file_size(w->path()) == 0) {
    REQUIRE(added < 1000);
    REQUIRE(w->add(0x10000 + 0x100 * added, 0x40, "a_function_name_of_some_length").ok());
    ++added;
  }
  // Everything added so far went out with that write: whole lines, at least flush_bytes.
  CHECK(file_size(w->path()) >= 4096);
  CHECK(map_lines(w->path()).size() == added);
}

TEST_CASE("batched without a flusher: the bound is checked by later appends and flush_if_due") {
  temp_dir dir;
  auto w = map_writer(dir.path(), batched(1));
  REQUIRE(w->add(0x1000, 0x10, "first").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(file_size(w->path()) == 0);  // no thread: nobody looked
  REQUIRE(w->add(0x2000, 0x10, "second").ok());
  CHECK(map_lines(w->path()) == std::vector<std::string>{"1000 10 first", "2000 10 second"});

  auto late = map_writer(dir.path(), batched(60000), 4343);
  REQUIRE(late->add(0x3000, 0x10, "third").ok());
  REQUIRE(late->flush_if_due(monotonic_ns()).ok());
  CHECK(file_size(late->path()) == 0);
  REQUIRE(late->flush_if_due(monotonic_ns() + 61000 * ms).ok());
  CHECK(map_lines(late->path()) == std::vector<std::string>{"3000 10 third"});
}

TEST_CASE("the flusher writes what waits the bound while nobody appends, then ends until needed") {
  temp_dir dir;
  flusher f;
  CHECK_FALSE(f.running());  // started by the first buffered record, not before
  auto w = map_writer(dir.path(), batched(20, &f));
  auto d = dump_writer(dir.path(), batched(20, &f));
  CHECK_FALSE(f.running());
  REQUIRE(w->add(0x1000, 0x10, "published_once").ok());
  REQUIRE(d->load(load_at(0x1000, "published_once")).ok());
  CHECK(f.running());
  CHECK(eventually([&] { return file_size(w->path()) != 0; }));
  CHECK(map_lines(w->path()) == std::vector<std::string>{"1000 10 published_once"});
  CHECK(eventually([&] { return parse_dump(read_file(d->path())).records.size() == 1; }));
  CHECK(f.flushes() >= 1);

  // Nothing buffered for a while: the thread ends (the process is single-threaded again).
  CHECK(eventually([&] { return !f.running(); }));
  CHECK(f.starts() == 1);
  // The next record starts another one.
  REQUIRE(w->add(0x2000, 0x10, "later").ok());
  CHECK(f.running());
  CHECK(f.starts() == 2);
  CHECK(eventually([&] { return map_lines(w->path()).size() == 2; }));
}

TEST_CASE("batched jitdump: records keep the time of the call, close writes them, CLOSE last") {
  temp_dir dir;
  auto w = dump_writer(dir.path(), batched());
  const uint64_t before = monotonic_ns();
  REQUIRE(w->load(load_at(0x1000, "f")).ok());
  const uint64_t after = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(parse_dump(read_file(w->path())).records.empty());  // the header only
  CHECK(w->records_written() == 1);
  const uint64_t flushed = monotonic_ns();
  REQUIRE(w->load(load_at(0x2000, "g")).ok());
  REQUIRE(w->close().ok());
  const jd::parsed_dump dump = parse_dump(read_file(w->path()));
  REQUIRE(dump.records.size() == 3);
  CHECK(dump.records[0].id == jd::code_load);
  CHECK(dump.records[0].name == "f");
  CHECK(dump.records[0].timestamp >= before);
  CHECK(dump.records[0].timestamp <= after);
  CHECK(dump.records[1].timestamp >= flushed);
  CHECK(dump.records[2].id == jd::code_close);
  CHECK(dump.truncated_tail == 0);
}

TEST_CASE("a forked child writes nothing into its parent's files, in either mode") {
  temp_dir dir;
  const durability mode = GENERATE(durability::sync, durability::batched);
  INFO(to_string(mode));
  flusher f;
  file_policy p = mode == durability::batched ? batched(60000, &f) : file_policy{};
  auto map = map_writer(dir.path(), p);
  auto dump = dump_writer(dir.path(), p);
  for (int i = 0; i < 10; ++i) {
    const std::string name = "parent_" + std::to_string(i);
    REQUIRE(map->add(0x1000 + 0x100 * i, 0x10, name).ok());
    REQUIRE(dump->load(load_at(0x1000 + 0x100 * i, name.c_str())).ok());
  }
  const std::string map_before = read_file(map->path());
  const std::string dump_before = read_file(dump->path());
  const int status = in_child([&] {
    // Every call refuses before touching a lock; then a normal exit, whose handlers must not
    // write the inherited buffers either; the writers are destroyed on the way (close).
    auto add = map->add(0x9000, 0x10, "child");
    if (add.ok() || add.error().code() != errc::bad_state ||
        add.error().message().find("fork") == std::string::npos)
      std::_Exit(10);
    if (dump->load(load_at(0x9000, "child")).ok()) std::_Exit(11);
    if (map->flush().ok() || dump->flush().ok()) std::_Exit(12);
    if (!dump->close().ok()) std::_Exit(13);
    map.reset();
  });
  CHECK(status == 0);
  CHECK(read_file(map->path()) == map_before);
  CHECK(read_file(dump->path()) == dump_before);
  REQUIRE(map->flush().ok());
  REQUIRE(dump->close().ok());
  const std::vector<std::string> lines = map_lines(map->path());
  REQUIRE(lines.size() == 10);
  for (int i = 0; i < 10; ++i) CHECK(lines[i].ends_with(" parent_" + std::to_string(i)));
  const jd::parsed_dump d = parse_dump(read_file(dump->path()));
  REQUIRE(d.records.size() == 11);  // 10 loads, once each, and the parent's CODE_CLOSE
  CHECK(d.records.back().id == jd::code_close);
}

TEST_CASE("normal exit writes what is buffered, _exit does not") {
  temp_dir dir;
  // Writers the child creates for itself (it owns them), never destroyed: only the exit
  // handler can write their buffers.
  const auto publish = [&](pid_t name_pid) {
    flusher* f = new flusher;  // leaked on purpose, like the writers
    auto* map = map_writer(dir.path(), batched(60000, f), name_pid).release();
    auto* dump = dump_writer(dir.path(), batched(60000, f), name_pid).release();
    if (!map->add(0x1000, 0x10, "at_exit").ok()) std::_Exit(20);
    if (!dump->load(load_at(0x1000, "at_exit")).ok()) std::_Exit(21);
  };
  CHECK(in_child([&] { publish(5001); }) == 0);
  CHECK(map_lines(dir / "perf-5001.map") == std::vector<std::string>{"1000 10 at_exit"});
  CHECK(parse_dump(read_file(dir / "jit-5001.dump")).records.size() == 1);
  CHECK(in_child([&] {
          publish(5002);
          std::_Exit(0);
        }) == 0);
  CHECK(file_size(dir / "perf-5002.map") == 0);
  CHECK(parse_dump(read_file(dir / "jit-5002.dump")).records.empty());
}
