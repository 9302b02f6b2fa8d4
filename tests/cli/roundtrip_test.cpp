// dump(build(x)) == x through the real tool, for raw sections and ELF images, on AMD64
// (PCINC and PCMASK), AArch64 LE and BE, FRE widths of 1, 2 and 4 bytes and section-relative
// FDE starts; llvm-readobj-22 reads every ELF image we build without warnings and sees the
// same rows and the expected field widths.
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;
using nlohmann::json;

namespace {

// A JIT-style AMD64 window: FP frame with a mid-function epilogue, SP-only frame, leaf,
// PCMASK trampoline array, and an outermost entry stub.
const char* amd64_description = R"({
  "version": 2, "abi": "amd64",
  "functions": [
    {"name": "fp_frame", "start": 140737352040448, "size": 96, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 1, "cfa": "sp+16", "fp": -16},
      {"pc": 4, "cfa": "fp+16", "fp": -16}, {"pc": 33, "cfa": "sp+8"},
      {"pc": 34, "cfa": "fp+16", "fp": -16}, {"pc": 95, "cfa": "sp+8"}]},
    {"name": "sp_frame", "start": 140737352040544, "size": 48, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "sp+48"}, {"pc": 47, "cfa": "sp+8"}]},
    {"name": "leaf", "start": 140737352040592, "size": 16, "rows": [{"pc": 0, "cfa": "sp+8"}]},
    {"name": "trampolines", "start": 140737352040608, "size": 256, "pcmask_rep": 16, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "sp+16"}, {"pc": 13, "cfa": "sp+8"}]},
    {"name": "entry", "start": 140737352040864, "size": 32, "rows": [
      {"pc": 0, "outermost": true}]}
  ]})";

const char* aarch64_rows = R"(
    {"start": 4198400, "size": 64, "rows": [
      {"pc": 0, "cfa": "sp+0"},
      {"pc": 4, "cfa": "sp+0", "ra_mangled": true},
      {"pc": 8, "cfa": "sp+32", "ra": -24, "fp": -32, "ra_mangled": true},
      {"pc": 12, "cfa": "fp+32", "ra": -24, "fp": -32, "ra_mangled": true},
      {"pc": 52, "cfa": "sp+0", "ra_mangled": true},
      {"pc": 56, "cfa": "sp+0"}]},
    {"start": 4198464, "size": 8, "rows": [{"pc": 0, "cfa": "sp+0"}]},
    {"start": 4198472, "size": 40, "rows": [
      {"pc": 0, "cfa": "sp+0"}, {"pc": 4, "cfa": "sp+16", "ra": -8, "fp": -16},
      {"pc": 36, "cfa": "sp+0"}]}
  ]})";

std::string aarch64_description(const char* abi) {
  return std::string(R"({"version": 2, "abi": ")") + abi + R"(", "functions": [)" + aarch64_rows;
}

// Function sizes and offsets that need 2- and 4-byte FRE start addresses and offsets.
const char* large_description = R"({
  "abi": "amd64",
  "functions": [
    {"start": 4194304, "size": 200, "rows": [{"pc": 0, "cfa": "sp+8"}, {"pc": 7, "cfa": "sp+120"}]},
    {"start": 4194560, "size": 60000, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 300, "cfa": "sp+4104"}, {"pc": 59000, "cfa": "sp+8"}]},
    {"start": 4264960, "size": 5000000, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 1, "cfa": "sp+16", "fp": -16},
      {"pc": 4, "cfa": "fp+16", "fp": -16}, {"pc": 100000, "cfa": "sp+200008", "fp": -16},
      {"pc": 4999999, "cfa": "sp+8"}]}
  ]})";

struct built {
  temp_dir dir;
  std::string input, raw, elf;
};

/// Writes the description, builds a raw section at `address` and an ELF image.
void build_both(built& b, const std::string& description, uint64_t address,
                const std::vector<std::string>& extra = {}) {
  b.input = b.dir / "in.json";
  b.raw = b.dir / "out.sframe";
  b.elf = b.dir / "out.so";
  REQUIRE(write_file(b.input, description));
  std::vector<std::string> raw_args{"sframe", "build", "--input",   b.input,
                                    "--raw",  b.raw,   "--address", std::to_string(address)};
  raw_args.insert(raw_args.end(), extra.begin(), extra.end());
  auto r = run_tool(raw_args);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("wrote " + b.raw) != std::string::npos);
  std::vector<std::string> elf_args{"sframe", "build", "--input", b.input, "--elf", b.elf};
  elf_args.insert(elf_args.end(), extra.begin(), extra.end());
  auto e = run_tool(elf_args);
  INFO(e.out << e.err);
  REQUIRE(e.exit_code == 0);
}

void check_round_trip(const std::string& description, uint64_t address, unsigned expect_flags,
                      const std::vector<std::string>& extra = {}) {
  built b;
  build_both(b, description, address, extra);
  json input = json::parse(description);
  // The version written: --sframe-version, else the description's, else 3.
  unsigned version = input.value("version", 3u);
  for (size_t i = 0; i + 1 < extra.size(); ++i)
    if (extra[i] == "--sframe-version") version = static_cast<unsigned>(std::stoul(extra[i + 1]));
  input["version"] = version;

  const json from_raw = dump_json({"--raw", "--address", std::to_string(address), b.raw});
  CHECK(normalized(from_raw, false) == normalized(input, false));
  CHECK(from_raw.at("version") == version);
  CHECK(from_json(from_raw).flags == expect_flags);

  const json from_elf = dump_json({b.elf});
  CHECK(normalized(from_elf, true) == normalized(input, true));  // names come from .symtab
  CHECK(from_json(from_elf).flags == expect_flags);

  // dump output is itself a valid build input: build(dump(build(x))) is byte-identical.
  const std::string again = b.dir / "again.json";
  REQUIRE(write_file(again, from_raw.dump()));
  auto r = run_tool({"sframe", "build", "--input", again, "--raw", b.dir / "again.sframe",
                     "--address", std::to_string(address)});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(b.dir / "again.sframe") == read_file(b.raw));

  if (tool_available("readelf")) {
    // GNU readelf reports every inconsistency of headers, segments and symbols on stderr.
    auto re = run({"readelf", "-W", "-a", b.elf});
    CHECK(re.exit_code == 0);
    CHECK(re.err.empty());
    CHECK(re.out.find("GNU_SFRAME") != std::string::npos);
  }
  if (version != 2) return;  // LLVM 22 reads v2 only ("unsupported version number (3)")
  if (!tool_available("llvm-readobj-22")) return;
  const sframe_dump llvm = llvm_readobj_sframe(b.elf);
  const sframe_dump ours = from_json(input);
  CHECK(llvm.version == 2);
  CHECK(llvm.abi == ours.abi);
  CHECK(llvm.flags == expect_flags);
  REQUIRE(llvm.fdes.size() == ours.fdes.size());
  for (size_t i = 0; i < ours.fdes.size(); ++i) {
    INFO("function " << i);
    CHECK(llvm.fdes[i].start == ours.fdes[i].start);
    CHECK(llvm.fdes[i].size == ours.fdes[i].size);
    CHECK(llvm.fdes[i].rep_size == ours.fdes[i].rep_size);
    CHECK(llvm.fdes[i].fres == ours.fdes[i].fres);
  }
}

}  // namespace

TEST_CASE("round trip: amd64 JIT window with PCINC and PCMASK functions") {
  // Default: PC-relative FDE starts; FRAME_POINTER is not set because not every function
  // keeps a frame pointer.
  check_round_trip(amd64_description, 0x7ffff7fbf000, 0x1 | 0x4);
}

TEST_CASE("round trip: section-relative FDE starts") {
  check_round_trip(amd64_description, 0x7ffff7fbf000, 0x1, {"--section-relative"});
}

TEST_CASE("round trip: explicit flags in the description are honoured") {
  json doc = json::parse(amd64_description);
  doc["flags"] = {"FDE_SORTED", "FRAME_POINTER"};
  check_round_trip(doc.dump(), 0x7ffff7fbf000, 0x1 | 0x2);
}

TEST_CASE("round trip: aarch64 little endian, RA in LR, saved and signed") {
  check_round_trip(aarch64_description("aarch64-le"), 0x500000, 0x1 | 0x4);
  // The text form names where the RA is and whether it is signed.
  built b;
  build_both(b, aarch64_description("aarch64-le"), 0x500000);
  auto text = run_tool({"sframe", "dump", b.elf});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("(shared object aarch64)") != std::string::npos);
  CHECK(text.out.find("0x401000 (+0x0)            sp+0       lr               unchanged\n") !=
        std::string::npos);
  CHECK(text.out.find("0x401004 (+0x4)            sp+0       lr (signed)      unchanged\n") !=
        std::string::npos);
  CHECK(text.out.find("0x40100c (+0xc)            fp+32      cfa-24 (signed)  cfa-32\n") !=
        std::string::npos);
}

TEST_CASE("round trip: aarch64 big endian") {
  check_round_trip(aarch64_description("aarch64-be"), 0x500000, 0x1 | 0x4);
  // The same rows give byte-swapped multi-byte fields: the sections differ but decode equally.
  built le, be;
  build_both(le, aarch64_description("aarch64-le"), 0x500000);
  build_both(be, aarch64_description("aarch64-be"), 0x500000);
  const std::string le_bytes = read_file(le.raw), be_bytes = read_file(be.raw);
  REQUIRE(le_bytes.size() == be_bytes.size());
  CHECK(le_bytes != be_bytes);
  CHECK(static_cast<uint8_t>(le_bytes[0]) == 0xe2);  // magic 0xdee2, little endian
  CHECK(static_cast<uint8_t>(be_bytes[0]) == 0xde);
}

TEST_CASE("round trip: large functions use 2- and 4-byte FRE addresses and offsets") {
  check_round_trip(large_description, 0x400000 - 0x1000, 0x1 | 0x4);  // v3 (the default)
  check_round_trip(large_description, 0x400000 - 0x1000, 0x1 | 0x4, {"--sframe-version", "2"});
  if (!tool_available("llvm-readobj-22")) return;
  built b;
  build_both(b, large_description, 0, {"--sframe-version", "2"});
  const sframe_dump llvm = llvm_readobj_sframe(b.elf);
  REQUIRE(llvm.fdes.size() == 3);
  CHECK(llvm.fdes[0].fre_addr_bytes == 1);
  CHECK(llvm.fdes[1].fre_addr_bytes == 2);
  CHECK(llvm.fdes[2].fre_addr_bytes == 4);
  CHECK(llvm.fdes[0].offset_bytes == std::vector<unsigned>{1, 1});
  CHECK(llvm.fdes[1].offset_bytes == std::vector<unsigned>{1, 2, 1});
  CHECK(llvm.fdes[2].offset_bytes == std::vector<unsigned>{1, 1, 1, 4, 1});
  // .text of 5 MB is still zero-filled (below the 16 MiB SHT_NOBITS threshold).
  auto re = run({"readelf", "-SW", b.elf});
  CHECK(re.out.find(".text             PROGBITS") != std::string::npos);
}

TEST_CASE("build: hexadecimal strings for addresses and stdin input") {
  const std::string description = R"({"abi": "amd64", "functions": [
    {"start": "0x7f0000001000", "size": "0x20", "rows": [{"pc": 0, "cfa": "sp+8"}]}]})";
  temp_dir dir;
  auto r = run_tool(
      {"sframe", "build", "--input", "-", "--raw", dir / "s", "--address", "0x7f0000000000"},
      description);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const json out = dump_json({"--raw", "--address", "0x7f0000000000", dir / "s"});
  CHECK(out["functions"][0]["start"] == 0x7f0000001000ull);
  CHECK(out["functions"][0]["size"] == 0x20);
}

TEST_CASE("round trip: v3 rules, signal frames, B key and outermost functions") {
  // clang-format off
  // A DRAP prologue (FLEX), a signal trampoline, and an outermost function without rows.
  const char* amd64_v3 = R"j({"version": 3, "abi": "amd64", "functions": [
    {"start": 4198400, "size": 95, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 9, "cfa": "r10+0"},
      {"pc": 24, "cfa": "r10+0", "fp": "*(fp+0)"}, {"pc": 26, "cfa": "*(fp-8)", "fp": "*(fp+0)"},
      {"pc": 82, "cfa": "r10+0", "fp": "*(fp+0)"}, {"pc": 94, "cfa": "sp+8"}]},
    {"start": 4198496, "size": 16, "signal": true, "rows": [
      {"pc": 0, "cfa": "sp+8"}, {"pc": 4, "cfa": "sp+16", "ra": "r3+0"}]},
    {"start": 4198512, "size": 8, "rows": []}
  ]})j";
  const char* aarch64_v3 = R"j({"version": 3, "abi": "aarch64-le", "functions": [
    {"start": 4198400, "size": 32, "pauth_key": "b", "rows": [
      {"pc": 0, "cfa": "sp+0"}, {"pc": 4, "cfa": "sp+16", "fp": -16, "ra_mangled": true},
      {"pc": 8, "cfa": "sp+16", "ra": -8, "fp": -16, "ra_mangled": true}]}
  ]})j";
  // clang-format on
  check_round_trip(amd64_v3, 0x500000, 0x1 | 0x4);
  check_round_trip(aarch64_v3, 0x500000, 0x1 | 0x4);
  // v2 and --no-flex refuse what they cannot hold, naming the function and row.
  temp_dir dir;
  REQUIRE(write_file(dir / "v3.json", amd64_v3));
  auto r = run_tool(
      {"sframe", "build", "-i", dir / "v3.json", "--raw", dir / "o", "--sframe-version", "2"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("function at 0x401000: row 1 (offset 9): the CFA is based on "
                                    "a register other than SP and FP: SFrame v2 cannot express "
                                    "it (write version 3)"));
  r = run_tool({"sframe", "build", "-i", dir / "v3.json", "--raw", dir / "o", "--no-flex"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("function at 0x401000: row 1 (offset 9): the CFA is based on "
                                    "a register other than SP and FP: needs a flexible (FLEX) "
                                    "FDE"));
  auto c = run_tool({"sframe", "check", "--raw", "--address", "0x500000", dir / "o"});
  CHECK(c.exit_code == 1);  // nothing was written
}
