// The jitdump writer: records as our parser and the real tools read them.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"
#include "jitdump/jitdump_writer.hpp"

#include "../cfi/tool_rows.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>

using namespace jitunwind;
using namespace jitunwind::detail;
using namespace jitunwind::test;
namespace jd = jitunwind::detail::jitdump;

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

std::unique_ptr<jitdump_writer> must_create(const std::string& dir, pid_t pid = 4242) {
  jitdump_options o;
  o.dir = dir;
  o.pid = pid;
  auto w = jitdump_writer::create(o);
  INFO((w.ok() ? std::string() : w.error().message()));
  REQUIRE(w.ok());
  return std::move(*w);
}

jd::parsed_dump must_parse(const std::string& bytes) {
  auto d = jd::parse(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  INFO((d.ok() ? std::string() : d.error().message()));
  REQUIRE(d.ok());
  return std::move(*d);
}

std::vector<uint8_t> fake_code(size_t n, uint8_t seed) {
  std::vector<uint8_t> c(n);
  for (size_t i = 0; i < n; ++i) c[i] = static_cast<uint8_t>(seed + i * 7);
  return c;
}

}  // namespace

TEST_CASE("header, UNWINDING_INFO before LOAD, CLOSE: parsed back exactly") {
  temp_dir dir;
  const uint64_t before = now_ns();
  auto w = must_create(dir.path());
  CHECK(w->path() == dir / "jit-4242.dump");
  const uint64_t a = 0x7f0000001000, b = 0x7f0000002000;
  const std::vector<uint8_t> code_a = fake_code(22, 1), code_b = fake_code(40, 9);
  const recipes::epilogue ep[] = {{21, 22}};
  const function_desc fa = recipes::frame_pointer(abi::amd64, a, 22, 1, 4, ep).value();
  REQUIRE(w->load({"jit_a", a, code_a, &fa}).value() == 0);
  REQUIRE(w->load({"jit\nb", b, code_b, nullptr}).value() == 1);
  REQUIRE(w->close().ok());
  CHECK(w->close().error().code() == errc::bad_state);
  CHECK(w->load({"late", a, code_a, nullptr}).error().code() == errc::bad_state);

  // The parsed records point into the file's bytes: keep them.
  const std::string file_bytes = read_file(w->path());
  const jd::parsed_dump d = must_parse(file_bytes);
  CHECK(d.header.pid == 4242);
  CHECK(d.header.elf_mach == 62);  // EM_X86_64
  CHECK(d.header.flags == 0);
  CHECK(d.header.total_size == 40);
  CHECK(d.header.timestamp >= before);
  CHECK(d.header.timestamp <= now_ns());
  CHECK(d.truncated_tail == 0);
  REQUIRE(d.records.size() == 4);
  CHECK(d.records[0].id == jd::code_unwinding_info);
  CHECK(d.records[1].id == jd::code_load);
  CHECK(d.records[2].id == jd::code_load);
  CHECK(d.records[3].id == jd::code_close);
  uint64_t last = d.header.timestamp;
  for (const auto& r : d.records) {
    CHECK(r.timestamp >= last);
    last = r.timestamp;
    if (r.id != jd::code_load) CHECK(r.total_size % 8 == 0);  // LOAD ends with the code
  }
  const auto& la = d.records[1];
  CHECK(la.name == "jit_a");
  CHECK(la.code_addr == a);
  CHECK(la.vma == a);
  CHECK(la.code_index == 0);
  CHECK(la.pid == 4242);
  CHECK(la.tid == static_cast<uint32_t>(gettid()));
  CHECK(std::vector<uint8_t>(la.code.begin(), la.code.end()) == code_a);
  CHECK(d.records[2].name == "jit?b");
  CHECK(d.records[2].code_index == 1);
  CHECK(std::vector<uint8_t>(d.records[2].code.begin(), d.records[2].code.end()) == code_b);

  const auto& u = d.records[0];
  CHECK(u.eh_frame_hdr_size == cfi::eh_frame_hdr_size(1));
  CHECK(u.unwinding_size == u.eh_frame.size() + u.eh_frame_hdr.size());
  CHECK(u.mapped_size >= u.unwinding_size);
  CHECK(u.mapped_size % 16 == 0);
}

TEST_CASE("loads with names marked clean are the same records") {
  // clean_name only skips the control-byte scan (the caller checked the name): the records
  // must be byte for byte those of the same loads without the flag (timestamps aside).
  temp_dir scanned_dir, copied_dir;
  auto scanned = must_create(scanned_dir.path());
  auto copied = must_create(copied_dir.path());
  const recipes::epilogue ep[] = {{21, 22}};
  std::vector<std::string> names;
  std::vector<function_desc> rows;
  std::vector<std::vector<uint8_t>> code;
  for (int i = 0; i < 20; ++i) {
    const uint64_t at = 0x7f0000001000 + 0x100 * static_cast<uint64_t>(i);
    names.push_back("js:Module.function_" + std::to_string(i) +
                    " (\xc3\xa9.js:" + std::string(static_cast<size_t>(i), 'x') + ")");
    rows.push_back(recipes::frame_pointer(abi::amd64, at, 22, 1, 4, ep).value());
    code.push_back(fake_code(22, static_cast<uint8_t>(i)));
  }
  std::vector<jitdump_entry> plain(names.size()), clean(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    plain[i].load = {names[i], rows[i].start, code[i], i % 4 == 3 ? nullptr : &rows[i]};
    clean[i].load = plain[i].load;
    clean[i].load.clean_name = true;
  }
  REQUIRE(scanned->write_batch(plain).ok());
  REQUIRE(copied->write_batch(clean).ok());
  REQUIRE(scanned->close().ok());
  REQUIRE(copied->close().ok());
  const std::string a_bytes = read_file(scanned->path()), b_bytes = read_file(copied->path());
  const jd::parsed_dump a = must_parse(a_bytes), b = must_parse(b_bytes);
  REQUIRE(a.records.size() == b.records.size());
  size_t loads = 0;
  for (size_t i = 0; i < a.records.size(); ++i) {
    INFO("record " << i);
    CHECK(a.records[i].id == b.records[i].id);
    CHECK(a.records[i].total_size == b.records[i].total_size);
    CHECK(a.records[i].name == b.records[i].name);
    CHECK(a.records[i].code_addr == b.records[i].code_addr);
    if (a.records[i].id == jd::code_load) {
      CHECK(b.records[i].name == names[loads]);
      ++loads;
    }
  }
  CHECK(loads == names.size());
}

TEST_CASE("unwinding data read where perf inject places it: right after the code") {
  if (!tool_available("llvm-dwarfdump-22") || !tool_available("llvm-readobj-22")) return;
  temp_dir dir;
  auto w = must_create(dir.path());
  const uint64_t code = 0x7f12340000a0;
  const std::vector<uint8_t> bytes = fake_code(37, 3);  // not a multiple of 8
  const recipes::epilogue ep[] = {{20, 21}, {36, 37}};
  const function_desc f = recipes::sp_frame(abi::amd64, code, 37, 4, 40, ep).value();
  REQUIRE(w->load({"f", code, bytes, &f}).ok());
  // A PCMASK trampoline array becomes one FDE with the rows repeated per block.
  function_desc tramp = recipes::trampoline(abi::amd64, code + 0x100, 16, 4, 8, 13).value();
  tramp.size = 16 * 6;
  tramp.pcmask_rep = 16;
  const std::vector<uint8_t> tramp_bytes = fake_code(16 * 6, 5);
  REQUIRE(w->load({"trampolines", code + 0x100, tramp_bytes, &tramp}).ok());
  REQUIRE(w->close().ok());
  // The parsed records point into the file's bytes: keep them.
  const std::string file_bytes = read_file(w->path());
  const jd::parsed_dump d = must_parse(file_bytes);
  REQUIRE(d.records.size() == 5);

  struct expectation {
    const jd::parsed_record* unwinding;
    const function_desc* f;
    uint64_t code_size;
  };
  for (const expectation& e :
       {expectation{&d.records[0], &f, 37}, expectation{&d.records[2], &tramp, 16 * 6}}) {
    const uint64_t eh_at = e.f->start + jd::align8(e.code_size);
    cfi::sections s;
    s.eh_frame.assign(e.unwinding->eh_frame.begin(), e.unwinding->eh_frame.end());
    s.eh_frame_hdr.assign(e.unwinding->eh_frame_hdr.begin(), e.unwinding->eh_frame_hdr.end());
    s.eh_frame_hdr_address = eh_at + s.eh_frame.size();
    const std::string obj = dir / "unwind.o";
    write_unwind_object(obj, abi::amd64, e.f->start, e.f->start + e.code_size, eh_at, s);
    const std::vector<tool_fde> fdes = dwarfdump_fdes(obj, abi::amd64);
    REQUIRE(fdes.size() == 1);
    CHECK(fdes[0].start == e.f->start);
    CHECK(fdes[0].end == e.f->start + e.f->size);
    std::vector<frame_row> want;
    const uint32_t rep = e.f->pcmask_rep ? e.f->pcmask_rep : e.f->size;
    for (uint32_t base = 0; base < e.f->size; base += rep)
      for (frame_row r : e.f->rows) {
        r.pc_offset += base;
        want.push_back(r);
      }
    INFO("want:\n" << describe(merged(want)) << "got:\n" << describe(fdes[0].rows));
    CHECK(fdes[0].rows == merged(want));
    uint64_t eh_frame_ptr = 0;
    const std::vector<hdr_entry> table = readobj_hdr_entries(obj, &eh_frame_ptr);
    CHECK(eh_frame_ptr == eh_at);
    REQUIRE(table.size() == 1);
    CHECK(table[0].initial_location == e.f->start);
    CHECK(table[0].fde_address == eh_at + 24);  // the FDE follows the 24-byte CIE
  }
}

TEST_CASE("MOVE: unwinding info first, and a later LOAD without rows resets it") {
  temp_dir dir;
  auto w = must_create(dir.path());
  const std::vector<uint8_t> code = fake_code(16, 2);
  const function_desc at_old = recipes::leaf(abi::amd64, 0x10000, 16).value();
  const function_desc at_new = recipes::leaf(abi::amd64, 0x20000, 16).value();
  const uint64_t index = w->load({"f", 0x10000, code, &at_old}).value();
  REQUIRE(w->move(index, 0x10000, 0x20000, 16, &at_new).ok());
  REQUIRE(w->load({"g", 0x30000, code, nullptr}).ok());
  REQUIRE(w->load({"h", 0x40000, code, nullptr}).ok());
  CHECK(w->move(99, 0x1, 0x2, 16).error().code() == errc::invalid_argument);
  CHECK(w->move(index, 0x1, 0x2, 0).error().code() == errc::invalid_argument);
  REQUIRE(w->close().ok());
  // The parsed records point into the file's bytes: keep them.
  const std::string file_bytes = read_file(w->path());
  const jd::parsed_dump d = must_parse(file_bytes);
  std::vector<uint32_t> ids;
  for (const auto& r : d.records) ids.push_back(r.id);
  CHECK(ids == std::vector<uint32_t>{
                   jd::code_unwinding_info, jd::code_load, jd::code_unwinding_info, jd::code_move,
                   jd::code_unwinding_info, jd::code_load, jd::code_load, jd::code_close});
  const auto& mv = d.records[3];
  CHECK(mv.code_index == index);
  CHECK(mv.code_addr == 0x10000);
  CHECK(mv.new_code_addr == 0x20000);
  CHECK(mv.code_size == 16);
  CHECK(d.records[2].mapped_size > 0);
  // The reset: no FDE (just the 24-byte CIE), an empty table and nothing mapped.
  CHECK(d.records[4].mapped_size == 0);
  CHECK(d.records[4].eh_frame.size() == 24);
  CHECK(d.records[4].eh_frame_hdr_size == cfi::eh_frame_hdr_size(0));
}

TEST_CASE("bad loads are rejected without writing anything") {
  temp_dir dir;
  auto w = must_create(dir.path());
  const std::vector<uint8_t> code = fake_code(16, 2);
  const function_desc f = recipes::leaf(abi::amd64, 0x10000, 16).value();
  CHECK(w->load({"f", 0x10000, {}, nullptr}).error().code() == errc::invalid_argument);
  CHECK(w->load({"", 0x10000, code, nullptr}).error().code() == errc::invalid_argument);
  auto wrong = w->load({"f", 0x10010, code, &f});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code() == errc::invalid_argument);
  CHECK_THAT(wrong.error().message(), Catch::Contains("0x10000") && Catch::Contains("0x10010"));
  const std::vector<uint8_t> short_code = fake_code(8, 2);
  CHECK(w->load({"f", 0x10000, short_code, &f}).error().code() == errc::invalid_argument);
  CHECK(w->records_written() == 0);
  struct stat st {};
  REQUIRE(::stat(w->path().c_str(), &st) == 0);
  CHECK(st.st_size == 40);
}

TEST_CASE("the dump stays mapped read+exec while the writer lives (perf record needs it)") {
  temp_dir dir;
  auto w = must_create(dir.path(), ::getpid());
  auto mapped = [&] {
    const std::string maps = read_file("/proc/self/maps");
    const size_t at = maps.find(w->path());
    if (at == std::string::npos) return std::string();
    const size_t line = maps.rfind('\n', at);
    return maps.substr(line + 1, at - line - 1);
  };
  const std::string line = mapped();
  REQUIRE_FALSE(line.empty());
  CHECK_THAT(line, Catch::Contains(" r-xp "));
  REQUIRE(w->close().ok());
  CHECK(mapped().empty());
}

TEST_CASE("JITDUMPDIR chooses the directory when none is given") {
  temp_dir dir;
  const char* old = std::getenv("JITDUMPDIR");
  const std::string saved = old ? old : "";
  ::setenv("JITDUMPDIR", dir.path().c_str(), 1);
  jitdump_options o;
  o.pid = 4243;
  auto w = jitdump_writer::create(o);
  if (old)
    ::setenv("JITDUMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("JITDUMPDIR");
  REQUIRE(w.ok());
  CHECK((*w)->path() == dir / "jit-4243.dump");
}

TEST_CASE("a directory mounted noexec: unsupported, and no dump file left behind") {
  if (!jitunwind::test::may_run_privileged("mounting a noexec tmpfs")) return;
  temp_dir dir;
  const auto mounted = jitunwind::test::run(
      {"mount", "-t", "tmpfs", "-o", "noexec,size=1m", "jitunwind-test", dir.path()});
  REQUIRE(mounted.exit_code == 0);
  jitdump_options o;
  o.dir = dir.path();
  o.pid = 4244;
  auto w = jitdump_writer::create(o);
  const bool left = ::access((dir / "jit-4244.dump").c_str(), F_OK) == 0;
  CHECK(jitunwind::test::run({"umount", dir.path()}).exit_code == 0);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code() == errc::unsupported);
  CHECK_THAT(w.error().message(), Catch::Contains("noexec"));
  CHECK_FALSE(left);
}

TEST_CASE("unsafe dump paths are refused and left untouched") {
  temp_dir dir;
  const std::string dump = dir / "jit-4242.dump";
  jitdump_options o;
  o.dir = dir.path();
  o.pid = 4242;
  SECTION("planted symlink") {
    const std::string target = dir / "victim";
    REQUIRE(write_file(target, "precious"));
    REQUIRE(::symlink(target.c_str(), dump.c_str()) == 0);
    auto w = jitdump_writer::create(o);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK_THAT(w.error().message(), Catch::Contains("symbolic link"));
    CHECK(read_file(target) == "precious");
  }
  SECTION("foreign owner") {
    REQUIRE(write_file(dump, "theirs"));
    if (::geteuid() != 0) return;
    REQUIRE(::chown(dump.c_str(), 65534, 65534) == 0);
    auto w = jitdump_writer::create(o);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
    CHECK(read_file(dump) == "theirs");
  }
  SECTION("FIFO") {
    REQUIRE(::mkfifo(dump.c_str(), 0644) == 0);
    auto w = jitdump_writer::create(o);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::permission_denied);
  }
  SECTION("missing directory") {
    o.dir = dir / "missing";
    auto w = jitdump_writer::create(o);
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code() == errc::not_found);
  }
  SECTION("a stale dump of ours is truncated") {
    REQUIRE(write_file(dump, std::string(1000, 'x')));
    auto w = jitdump_writer::create(o);
    REQUIRE(w.ok());
    struct stat st {};
    REQUIRE(::stat(dump.c_str(), &st) == 0);
    CHECK(st.st_size == 40);
  }
}

TEST_CASE("concurrent loads: every record whole, indices unique, pairs adjacent") {
  temp_dir dir;
  auto w = must_create(dir.path());
  constexpr int threads = 4, per_thread = 500;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};  // Catch2 assertions are not thread-safe: count, check after
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const std::vector<uint8_t> code =
          fake_code(16 + static_cast<size_t>(t), static_cast<uint8_t>(t));
      for (int i = 0; i < per_thread; ++i) {
        const uint64_t addr = 0x100000000ull * (t + 1) + static_cast<uint64_t>(i) * 64;
        const function_desc f = recipes::leaf(abi::amd64, addr, 16).value();
        if (!w->load({"t" + std::to_string(t) + "_" + std::to_string(i), addr, code, &f}).ok())
          ++failures;
      }
    });
  }
  for (auto& t : ts) t.join();
  REQUIRE(failures == 0);
  REQUIRE(w->close().ok());
  // The parsed records point into the file's bytes: keep them.
  const std::string file_bytes = read_file(w->path());
  const jd::parsed_dump d = must_parse(file_bytes);
  REQUIRE(d.records.size() == 2 * threads * per_thread + 1);
  std::set<uint64_t> indices;
  for (size_t i = 0; i + 1 < d.records.size(); i += 2) {
    REQUIRE(d.records[i].id == jd::code_unwinding_info);
    REQUIRE(d.records[i + 1].id == jd::code_load);
    indices.insert(d.records[i + 1].code_index);
    CHECK(d.records[i + 1].code.size() == 16 + static_cast<size_t>(d.records[i + 1].name[1] - '0'));
  }
  CHECK(indices.size() == threads * per_thread);
  CHECK(*indices.rbegin() == threads * per_thread - 1);
}

TEST_CASE("a load inside the previous load's injected range is reported") {
  temp_dir dir;
  std::vector<std::string> messages;
  jitdump_options o;
  o.dir = dir.path();
  o.pid = 4242;
  o.log.fn = [](void* user, log_level level, std::string_view m) {
    if (level == log_level::warning) static_cast<std::vector<std::string>*>(user)->emplace_back(m);
  };
  o.log.user = &messages;
  auto w = jitdump_writer::create(o);
  REQUIRE(w.ok());
  const std::vector<uint8_t> code = fake_code(16, 1);
  const function_desc a = recipes::leaf(abi::amd64, 0x10000, 16).value();
  const function_desc b = recipes::leaf(abi::amd64, 0x10010, 16).value();
  const function_desc c = recipes::leaf(abi::amd64, 0x20000, 16).value();
  auto u = make_jitdump_unwinding(abi::amd64, 0x10000, 16, &a);
  REQUIRE(u.ok());
  CHECK(u->mapped_size > 0);
  REQUIRE((*w)->load({"a", 0x10000, code, &a}).ok());
  CHECK(messages.empty());
  REQUIRE((*w)->load({"b", 0x10010, code, &b}).ok());  // inside [0x10000, 0x10010 + mapped)
  REQUIRE(messages.size() == 1);
  // The writer names the API as {api:NAME}; the session puts it in the caller's language.
  CHECK_THAT(messages[0], Catch::Contains("'b' at 0x10010") &&
                              Catch::Contains("code index 0 at 0x10000 (16 bytes)") &&
                              Catch::Contains("{api:perf_code_gap}()"));
  REQUIRE((*w)->load({"c", 0x20000, code, &c}).ok());  // far away: fine
  CHECK(messages.size() == 1);
}

TEST_CASE("unique_build_ids salts the dumped copy of the code, not the original") {
  temp_dir dir;
  jitdump_options o;
  o.dir = dir.path();
  o.pid = 4242;
  o.unique_build_ids = true;
  auto w = jitdump_writer::create(o);
  REQUIRE(w.ok());
  const std::vector<uint8_t> code = fake_code(20, 1);
  const std::vector<uint8_t> copy = code;
  REQUIRE((*w)->load({"f", 0x10000, code, nullptr}).ok());
  REQUIRE((*w)->load({"g", 0x10000, code, nullptr}).ok());  // same bytes, same address
  REQUIRE((*w)->close().ok());
  CHECK(code == copy);
  // The parsed records point into the file's bytes: keep them.
  const std::string file_bytes = read_file((*w)->path());
  const jd::parsed_dump d = must_parse(file_bytes);
  REQUIRE(d.records.size() == 3);
  const std::vector<uint8_t> a(d.records[0].code.begin(), d.records[0].code.end());
  const std::vector<uint8_t> b(d.records[1].code.begin(), d.records[1].code.end());
  REQUIRE(a.size() == code.size());
  CHECK(std::equal(a.begin(), a.end() - 8, code.begin()));  // only the last 8 bytes differ
  CHECK(a != code);
  CHECK(a != b);
}
