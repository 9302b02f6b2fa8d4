// The binutils vectors (../shared/sframe-vectors) through the real tool: `sframe dump` prints
// exactly the rows binutils' objdump printed for every section of every version, says so for
// the vectors without a section, `sframe convert` takes every v1/v2 section to v3 and back to v2
// with the same rows, and llvm-readobj-22 accepts every v2 section we write (from the vectors'
// rows and from v3 sections converted down).
#include "support/sframe_vectors.hpp"
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#include <cstdio>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;
using nlohmann::json;

namespace {

std::string reg_name(jitunwind::abi a, uint8_t reg) {
  const auto regs = jitunwind::dwarf_registers(a);
  if (reg == regs.sp) return "sp";
  if (reg == regs.fp) return "fp";
  return "r" + std::to_string(reg);
}

std::string expr(const std::string& base, int32_t off, bool deref) {
  std::string s = base + (off < 0 ? "-" : "+") + std::to_string(off < 0 ? -int64_t(off) : off);
  return deref ? "*(" + s + ")" : s;
}

// The JSON row docs/sframe-json.md specifies for a row of the frame model.
json expected_json(jitunwind::abi a, const jitunwind::frame_row& r) {
  using namespace jitunwind;
  json j;
  j["pc"] = r.pc_offset;
  if (r.ra == ra_rule::undefined) {
    j["outermost"] = true;
    return j;
  }
  const std::string base = r.cfa == cfa_base::sp   ? "sp"
                           : r.cfa == cfa_base::fp ? "fp"
                                                   : reg_name(a, r.cfa_reg);
  j["cfa"] = expr(base, r.cfa_offset, r.cfa_deref);
  if (r.ra == ra_rule::saved && (a != abi::amd64 || r.ra_offset != -8)) j["ra"] = r.ra_offset;
  if (r.ra == ra_rule::register_value || r.ra == ra_rule::register_saved)
    j["ra"] = expr(reg_name(a, r.ra_reg), r.ra_offset, r.ra == ra_rule::register_saved);
  if (r.fp == fp_rule::saved) j["fp"] = r.fp_offset;
  if (r.fp == fp_rule::register_value || r.fp == fp_rule::register_saved)
    j["fp"] = expr(reg_name(a, r.fp_reg), r.fp_offset, r.fp == fp_rule::register_saved);
  if (r.ra_mangled) j["ra_mangled"] = true;
  return j;
}

std::vector<sframe_vector> vectors() {
  auto dir = sframe_vectors_dir();
  if (!dir) return {};
  return load_sframe_vectors(*dir);
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Functions and rows of a dump, without the section-level keys, ignoring functions without
// rows (v1/v2: they say nothing; dropped by a conversion to v3).
json rows_of(const json& dump) {
  json out = json::array();
  for (const auto& f : dump.at("functions"))
    if (!f.at("rows").empty()) out.push_back(f);
  return out;
}

}  // namespace

TEST_CASE("sframe dump prints the rows objdump printed, for every vector of every version") {
  const auto all = vectors();
  if (all.empty()) return;
  temp_dir dir;
  size_t rows = 0, sections = 0;
  for (const sframe_vector& v : all) {
    INFO(v.name);
    const std::string raw = dir / (v.name + ".sframe");
    REQUIRE(write_file(raw, std::string(v.content.begin(), v.content.end())));
    const auto oracle = parse_objdump_sframe(v.groundtruth);
    if (v.content.empty()) {
      auto r = run_tool({"sframe", "dump", "--raw", raw});
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.err, Catch::Contains("empty section (0 bytes): there is no SFrame data"));
      continue;
    }
    REQUIRE(oracle.has_value());
    const json d = dump_json({"--raw", "--address", hex(v.section_base), raw});
    CHECK(d.at("version") == oracle->version);
    const auto target = jitunwind::parse_abi(d.at("abi").get<std::string>()).value();
    REQUIRE(d.at("functions").size() == oracle->functions.size());
    for (size_t i = 0; i < oracle->functions.size(); ++i) {
      const auto& of = oracle->functions[i];
      const json& f = d["functions"][i];
      INFO("function " << i);
      CHECK(f.at("start") == of.pc);
      CHECK(f.at("size") == of.size);
      CHECK(f.value("signal", false) == of.signal);
      CHECK((f.value("pauth_key", "a") == "b") == of.pauth_b);
      REQUIRE(f.at("rows").size() == of.rows.size());
      for (size_t j = 0; j < of.rows.size(); ++j) {
        std::string why;
        auto want = oracle_to_row(target, of, of.rows[j], why);
        REQUIRE(want.has_value());
        CHECK(f["rows"][j] == expected_json(target, *want));
        ++rows;
      }
    }
    auto c = run_tool({"sframe", "check", "--raw", "--address", hex(v.section_base), raw});
    CHECK(c.exit_code == 0);
    CHECK_THAT(c.out, Catch::Contains("SFrame v" + std::to_string(oracle->version)));
    ++sections;
  }
  std::printf("sframe dump: %zu sections, %zu rows as objdump printed them\n", sections, rows);
}

TEST_CASE(
    "sframe convert: every v1/v2 vector to v3 and back to v2 keeps its rows, "
    "llvm-readobj-22 accepts every v2 we write") {
  const auto all = vectors();
  if (all.empty()) return;
  const bool llvm = tool_available("llvm-readobj-22");
  temp_dir dir;
  size_t converted = 0, read_by_llvm = 0, refused = 0;
  for (const sframe_vector& v : all) {
    if (v.content.empty()) continue;
    INFO(v.name);
    const std::string in = dir / (v.name + ".sframe");
    REQUIRE(write_file(in, std::string(v.content.begin(), v.content.end())));
    const std::string at = hex(v.section_base);
    const json original = dump_json({"--raw", "--address", at, in});
    const unsigned version = original.at("version").get<unsigned>();
    const std::string v3 = dir / (v.name + ".v3"), v2 = dir / (v.name + ".v2");
    const std::string elf = dir / (v.name + ".v2.so");
    if (version < 3) {
      auto a = run_tool({"sframe", "convert", "--in-raw", "--in-address", at, in,
                         "--sframe-version", "3", "--raw", v3});
      INFO(a.out << a.err);
      REQUIRE(a.exit_code == 0);
      const json as_v3 = dump_json({"--raw", "--address", at, v3});
      CHECK(as_v3.at("version") == 3);
      CHECK(rows_of(as_v3) == rows_of(original));
      auto b = run_tool({"sframe", "convert", "--in-raw", "--in-address", at, v3,
                         "--sframe-version", "2", "--raw", v2});
      INFO(b.out << b.err);
      REQUIRE(b.exit_code == 0);
      const json back = dump_json({"--raw", "--address", at, v2});
      CHECK(back.at("version") == 2);
      CHECK(rows_of(back) == rows_of(original));
      ++converted;
    }
    // Every section as v2 in an ELF image for llvm-readobj-22; a v3 section with rows v2 cannot
    // hold is refused, naming the function and row.
    auto e = run_tool({"sframe", "convert", "--in-raw", "--in-address", at, in, "--sframe-version",
                       "2", "--elf", elf});
    if (e.exit_code != 0) {
      INFO(e.err);
      CHECK(version == 3);
      const bool names_row = e.err.find(": row ") != std::string::npos &&
                             e.err.find("SFrame v2 cannot express it") != std::string::npos;
      const bool signal = e.err.find("SFrame v2 has no signal-frame bit") != std::string::npos;
      CHECK((names_row || signal));
      ++refused;
      continue;
    }
    if (rows_of(original).empty()) continue;  // an image needs a function
    if (!llvm) continue;
    const sframe_dump ro = llvm_readobj_sframe(elf);  // fails the test on a warning
    CHECK(ro.version == 2);
    const json ours = dump_json({elf});
    CHECK(ours.at("version") == 2);
    const sframe_dump want = from_json(ours);
    REQUIRE(ro.fdes.size() == want.fdes.size());
    for (size_t i = 0; i < want.fdes.size(); ++i) {
      CHECK(ro.fdes[i].start == want.fdes[i].start);
      CHECK(ro.fdes[i].fres == want.fdes[i].fres);
    }
    ++read_by_llvm;
  }
  std::printf(
      "sframe convert: %zu v1/v2 sections to v3 and back; %zu v2 images read by "
      "llvm-readobj-22; %zu v3 sections refused as v2 (FLEX rows, signal frames)\n",
      converted, read_by_llvm, refused);
  CHECK(converted > 50);
  if (llvm) CHECK(read_by_llvm > 60);
}
