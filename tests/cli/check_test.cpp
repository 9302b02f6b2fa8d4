// `jitunwind sframe check` (and dump's errors) on valid files, truncated and corrupted
// sections, random corruption, non-ELF files and ELF files without .sframe.
#include "cli/cli_support.hpp"
#include <jitunwind/toolkit/elf_reader.hpp>
#include <jitunwind/toolkit/elf_writer.hpp>

#include <elf.h>
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;

namespace {

const char* description = R"({"abi": "amd64", "functions": [
  {"name": "f", "start": 4198400, "size": 64, "rows": [
    {"pc": 0, "cfa": "sp+8"}, {"pc": 1, "cfa": "sp+16", "fp": -16},
    {"pc": 4, "cfa": "fp+16", "fp": -16}, {"pc": 63, "cfa": "sp+8"}]},
  {"name": "g", "start": 4198464, "size": 32, "rows": [
    {"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "sp+32"}, {"pc": 31, "cfa": "sp+8"}]},
  {"name": "t", "start": 4198496, "size": 64, "pcmask_rep": 16, "rows": [
    {"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "sp+16"}, {"pc": 13, "cfa": "sp+8"}]}]})";

struct fixture {
  temp_dir dir;
  std::string raw = dir / "good.sframe";
  std::string elf = dir / "good.so";
  std::string section;  // the raw bytes

  fixture() {
    REQUIRE(write_file(dir / "in.json", description));
    auto r = run_tool({"sframe", "build", "-i", dir / "in.json", "--raw", raw});
    REQUIRE(r.exit_code == 0);
    auto e = run_tool({"sframe", "build", "-i", dir / "in.json", "--elf", elf});
    REQUIRE(e.exit_code == 0);
    section = read_file(raw);
    REQUIRE(section.size() > 28);
  }

  /// Runs check on a modified copy of the raw section; returns the result.
  run_result check_raw(const std::string& bytes, const std::string& name = "bad.sframe") {
    const std::string path = dir / name;
    REQUIRE(write_file(path, bytes));
    return run_tool({"sframe", "check", "--raw", path});
  }
};

/// A failed check: exit 1, one line `PATH: <message>` that says something.
void expect_problem(const run_result& r, const std::string& path, const std::string& needle = {}) {
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.rfind(path + ": ", 0) == 0);
  CHECK(r.out.find(": ok (") == std::string::npos);
  CHECK(r.out.size() > path.size() + 10);
  if (!needle.empty()) CHECK(r.out.find(needle) != std::string::npos);
}

void put32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}

}  // namespace

TEST_CASE("check: valid raw sections and ELF images") {
  fixture f;
  auto r = run_tool({"sframe", "check", f.elf, f.elf});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == f.elf + ": ok (3 functions, 10 rows, SFrame v3, 0 FLEX)\n" + f.elf +
                     ": ok (3 functions, 10 rows, SFrame v3, 0 FLEX)\n");
  auto raw = run_tool({"sframe", "check", "--raw", f.raw});
  CHECK(raw.exit_code == 0);
  CHECK(raw.out == f.raw + ": ok (3 functions, 10 rows, SFrame v3, 0 FLEX)\n");
}

TEST_CASE("check: truncated sections fail with a message, never a crash") {
  fixture f;
  for (size_t len : {size_t{0}, size_t{1}, size_t{3}, size_t{8}, size_t{27}, size_t{28}, size_t{40},
                     f.section.size() - 1}) {
    INFO("truncated to " << len << " of " << f.section.size() << " bytes");
    const std::string name = "cut" + std::to_string(len) + ".sframe";
    expect_problem(f.check_raw(f.section.substr(0, len), name), f.dir / name);
  }
}

TEST_CASE("check: corrupted header fields are reported") {
  fixture f;
  std::string bad_magic = f.section;
  bad_magic[0] = 0x00;
  expect_problem(f.check_raw(bad_magic), f.dir / "bad.sframe", "magic");

  std::string many_fdes = f.section;
  put32(many_fdes, 8, 100000);  // num_fdes
  expect_problem(f.check_raw(many_fdes), f.dir / "bad.sframe");

  std::string fre_off = f.section;
  put32(fre_off, 24, 0x7fffffff);  // FRE sub-section offset
  expect_problem(f.check_raw(fre_off), f.dir / "bad.sframe");

  std::string version = f.section;
  version[2] = 9;
  expect_problem(f.check_raw(version), f.dir / "bad.sframe");

  std::string abi = f.section;
  abi[4] = 7;
  expect_problem(f.check_raw(abi), f.dir / "bad.sframe");
}

TEST_CASE("check: random corruption gives ok or a clean error") {
  fixture f;
  std::mt19937 rng(12345);
  int failures = 0;
  for (int i = 0; i < 150; ++i) {
    std::string bytes = f.section;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xff);
    const auto r = f.check_raw(bytes);
    INFO("iteration " << i << ": " << r.out << r.err);
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));  // no crash, no abort
    if (r.exit_code == 1) {
      ++failures;
      CHECK(r.out.rfind(f.dir / "bad.sframe: ", 0) == 0);
    }
    // dump must agree with check on the same bytes.
    const auto d = run_tool({"sframe", "dump", "--raw", f.dir / "bad.sframe"});
    CHECK(d.exit_code == r.exit_code);
  }
  CHECK(failures > 0);  // the corruption really hits checked fields
}

TEST_CASE("check: an ELF image cut inside .sframe") {
  fixture f;
  const std::string image = read_file(f.elf);
  auto img = jitunwind::toolkit::elf_image::parse(
      std::span(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  REQUIRE(img.ok());
  const auto* sec = img->find_section(".sframe");
  REQUIRE(sec);
  const std::string path = f.dir / "cut.so";
  REQUIRE(write_file(path, image.substr(0, sec->offset + 10)));
  expect_problem(run_tool({"sframe", "check", path}), path);
}

TEST_CASE("check and dump: a file that is not ELF") {
  fixture f;
  const std::string path = f.dir / "notes.txt";
  REQUIRE(write_file(path, "hello, this is text\n"));
  expect_problem(run_tool({"sframe", "check", path}), path, "not an ELF file");
  auto d = run_tool({"sframe", "dump", path});
  CHECK(d.exit_code == 1);
  CHECK(d.err.find(path + ": not an ELF file") != std::string::npos);
  CHECK(d.out.empty());
}

TEST_CASE("check: missing file and an ELF without .sframe, one bad file fails the run") {
  fixture f;
  const std::string missing = f.dir / "missing.o";
  expect_problem(run_tool({"sframe", "check", missing}), missing, "No such file");

  if (!tool_available("llvm-mc-22")) return;
  const std::string obj = f.dir / "plain.o";
  auto as = run({"llvm-mc-22", "-triple", "x86_64-linux-gnu", "-filetype=obj",
                 source_path("tests/cli/data/cfi_amd64.s"), "-o", obj});
  REQUIRE(as.exit_code == 0);
  expect_problem(run_tool({"sframe", "check", obj}), obj, "no section .sframe");

  auto mixed = run_tool({"sframe", "check", f.elf, obj});
  CHECK(mixed.exit_code == 1);
  CHECK(mixed.out.find(f.elf + ": ok (") == 0);
  CHECK(mixed.out.find(obj + ": no section .sframe") != std::string::npos);
}

TEST_CASE("check --section reads another section name") {
  fixture f;
  auto r = run_tool({"sframe", "check", "--section", ".text", f.elf});
  // .text is zero-filled: not an SFrame section.
  expect_problem(r, f.elf);
  auto none = run_tool({"sframe", "check", "--section", ".nothere", f.elf});
  expect_problem(none, f.elf, "no section .nothere");
}

TEST_CASE("dump and check find .sframe through PT_GNU_SFRAME when section headers are stripped") {
  if (!tool_available("llvm-objcopy-22")) return;
  fixture f;
  const std::string stripped = f.dir / "stripped.so";
  auto s = run({"llvm-objcopy-22", "--strip-sections", f.elf, stripped});
  REQUIRE(s.exit_code == 0);
  auto r = run_tool({"sframe", "check", stripped});
  CHECK(r.exit_code == 0);
  CHECK(r.out == stripped + ": ok (3 functions, 10 rows, SFrame v3, 0 FLEX)\n");
  auto d = run_tool({"sframe", "dump", stripped});
  CHECK(d.exit_code == 0);
  CHECK(d.out.find("SFrame PT_GNU_SFRAME at 0x402000") != std::string::npos);
  CHECK(normalized(dump_json({stripped}), false) ==
        normalized(nlohmann::json::parse(description), false));
}

TEST_CASE("dump --format json survives symbol names that are not UTF-8") {
  // Symbol names end up in JSON strings, which nlohmann refuses to serialize when they are not
  // UTF-8 unless told to replace the bad bytes.
  fixture f;
  jitunwind::toolkit::elf_writer w({});
  jitunwind::toolkit::elf_writer::section text;
  text.name = ".text";
  text.flags = SHF_ALLOC | SHF_EXECINSTR;
  text.address = 0x401000;
  text.data.assign(0xa0, 0);
  w.add_section(text);
  jitunwind::toolkit::elf_writer::section sf;
  sf.name = ".sframe";
  sf.flags = SHF_ALLOC;
  sf.address = 0x402000;
  sf.align = 8;
  sf.data.assign(f.section.begin(), f.section.end());
  w.add_section(sf);
  w.add_symbol({"bad\xff\xfename", ".text", 0x401000, 64});
  w.add_segment({PT_LOAD, PF_R | PF_X, {".text"}, 0});
  w.add_segment({PT_LOAD, PF_R, {".sframe"}, 0});
  auto image = w.write();
  REQUIRE(image.ok());
  const std::string path = f.dir / "names.so";
  REQUIRE(write_file(path, std::string(image->begin(), image->end())));
  // The raw section was encoded for address 0, so it is read at that address.
  const auto doc = dump_json({"--address", "0", path});
  CHECK(doc["functions"][0]["name"] == "bad\xef\xbf\xbd\xef\xbf\xbdname");  // U+FFFD twice
}
