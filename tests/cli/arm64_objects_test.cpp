// `jitunwind sframe build --from-eh-frame` on AArch64 objects against gas's own SFrame: the
// objects are compiled by aarch64-linux-gnu-gcc with -Wa,--gsframe (binutils 2.40 writes SFrame
// v1 for AArch64), so each carries the assembler's .sframe next to its .eh_frame. The section
// the CLI builds from the .eh_frame must have, function by function, gas's rows (CFA, RA and FP
// offsets, signed return addresses) and pointer-authentication key, and leave out only
// functions gas left out too. llvm-readobj-22 reads what the CLI wrote (an independent reader).
//
// The corpus: random C programs from csmith (JITUNWIND_CSMITH_PROGRAMS, default 2) and the
// repository's hand-written shapes, at -O0/-O2/-O3, with and without frame pointers, and with
// return-address signing (-mbranch-protection=pac-ret, key A and B).
//
// The cross compiler comes from scripts/install-deps.sh arm64 (the arm64 stage runs this test
// with JITUNWIND_REQUIRE_ARM64=1, under which a missing compiler fails it; elsewhere it skips).
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

namespace t = jitunwind::test;
namespace tc = jitunwind::test::cli;
using nlohmann::json;

namespace {

bool cross_tools_missing() {
  for (const char* tool : {"aarch64-linux-gnu-gcc", "csmith", "llvm-readobj-22"}) {
    if (t::tool_available(tool)) continue;
    const char* required = std::getenv("JITUNWIND_REQUIRE_ARM64");
    if (required != nullptr && std::string(required) == "1")
      FAIL(tool << " is missing and JITUNWIND_REQUIRE_ARM64=1 (scripts/install-deps.sh arm64)");
    WARN("SKIPPED: " << tool << " is missing (scripts/install-deps.sh arm64 installs it)");
    return true;
  }
  return false;
}

void build(const std::string& cmd) {
  auto r = t::run_shell(cmd + " 2>&1");
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
}

// Functions of a JSON dump by start address.
std::map<uint64_t, json> by_start(const json& doc) {
  std::map<uint64_t, json> out;
  for (const json& f : doc["functions"]) out.emplace(f["start"].get<uint64_t>(), f);
  return out;
}

// Rows as a comparable list, consecutive equal rules merged (a reader cannot tell them apart).
json rows_of(const json& f) {
  json out = json::array();
  for (json r : f["rows"]) {
    const uint64_t pc = r["pc"].get<uint64_t>();
    r.erase("pc");
    if (!out.empty() && out.back()["rules"] == r) continue;
    out.push_back({{"pc", pc}, {"rules", r}});
  }
  return out;
}

struct tally {
  size_t objects = 0, functions = 0, rows = 0, signed_rows = 0, key_b = 0, left_out = 0;
};

void compare(const std::string& obj, tally& n) {
  INFO(obj);
  const std::string out = obj + ".sframe.so";
  const auto r = tc::run_tool(
      {"sframe", "build", "--from-eh-frame", obj, "--elf", out, "--sframe-version", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const json gas = tc::dump_json({"--format", "json", obj});
  const json ours = tc::dump_json({"--format", "json", out});
  CHECK(gas["abi"] == "aarch64-le");
  CHECK(ours["abi"] == "aarch64-le");
  auto theirs = by_start(gas);
  for (const auto& [start, f] : by_start(ours)) {
    INFO("function at 0x" << std::hex << start);
    auto it = theirs.find(start);
    REQUIRE(it != theirs.end());  // we converted it: gas did too
    CHECK(it->second["size"] == f["size"]);
    CHECK(it->second.value("pauth_key", "a") == f.value("pauth_key", "a"));
    const json a = rows_of(f), b = rows_of(it->second);
    CHECK(a == b);
    ++n.functions;
    n.rows += a.size();
    for (const json& row : a) n.signed_rows += row["rules"].value("ra_mangled", false) ? 1 : 0;
    n.key_b += f.value("pauth_key", "a") == "b" ? 1 : 0;
    theirs.erase(it);
  }
  // What gas has and we do not: each must be reported as left out, with a reason.
  for (const auto& [start, f] : theirs) {
    char where[32];
    std::snprintf(where, sizeof where, "[0x%llx, +0x", static_cast<unsigned long long>(start));
    INFO("gas has a function at 0x" << std::hex << start << " that the CLI did not convert");
    CHECK(r.out.find(std::string("left out: ") + where) != std::string::npos);
    ++n.left_out;
  }
  // An independent reader of what the CLI wrote sees the same rows.
  const tc::sframe_dump llvm = tc::llvm_readobj_sframe(out);
  const tc::sframe_dump mine = tc::from_json(ours);
  CHECK(llvm.abi == "aarch64-le");
  REQUIRE(llvm.fdes.size() == mine.fdes.size());
  for (size_t i = 0; i < llvm.fdes.size(); ++i) {
    INFO("llvm-readobj-22: function at 0x" << std::hex << llvm.fdes[i].start);
    CHECK(llvm.fdes[i].start == mine.fdes[i].start);
    CHECK(llvm.fdes[i].fres == mine.fdes[i].fres);
  }
  ++n.objects;
}

}  // namespace

TEST_CASE("arm64 objects: sframe build --from-eh-frame writes gas 2.40's --gsframe rows") {
  if (cross_tools_missing()) return;
  int programs = 2;
  if (const char* e = std::getenv("JITUNWIND_CSMITH_PROGRAMS")) programs = std::atoi(e);
  t::temp_dir dir;
  const char* variants[] = {"-O0",
                            "-O2",
                            "-O3",
                            "-O2 -fomit-frame-pointer",
                            "-O0 -fno-omit-frame-pointer",
                            "-O2 -mbranch-protection=pac-ret",
                            "-O2 -mbranch-protection=pac-ret+leaf+b-key"};
  // Every function in .text: with main in .text.startup or cold parts in .text.unlikely, the
  // layout `sframe dump` gives an object's sections and the one `sframe build --elf` gives the
  // functions differ by section alignment, and the starts would not pair up.
  const std::string one_text_section = "-fno-reorder-functions -fno-reorder-blocks-and-partition";
  std::vector<std::string> sources;
  for (int seed = 1; seed <= programs; ++seed) {
    const std::string src = dir / ("p" + std::to_string(seed) + ".c");
    build("csmith --seed " + std::to_string(seed) + " --max-funcs 12 -o " + src);
    sources.push_back(src);
  }
  for (const char* own :
       {"tests/sframe/programs/shapes.c", "tests/sframe/programs/unwind_target.c"})
    sources.push_back(t::source_path(own));
  tally n;
  for (size_t s = 0; s < sources.size(); ++s) {
    // Every compilation of this source, two at a time.
    std::string jobs;
    std::vector<std::string> objects;
    for (size_t k = 0; k < std::size(variants); ++k) {
      const std::string obj = dir / ("s" + std::to_string(s) + "-" + std::to_string(k) + ".o");
      jobs += "aarch64-linux-gnu-gcc -c -w -I/usr/include/csmith " + std::string(variants[k]) +
              " " + one_text_section + " -Wa,--gsframe " + sources[s] + " -o " + obj + "\n";
      objects.push_back(obj);
    }
    build("printf '" + jobs + "' | xargs -P2 -I{} sh -c '{}'");
    for (size_t k = 0; k < objects.size(); ++k) {
      INFO(sources[s] << " " << variants[k]);
      compare(objects[k], n);
    }
  }
  std::printf(
      "arm64 objects: %zu objects, %zu functions (%zu rows, %zu with a signed return address, "
      "%zu functions with key B) equal to gas's; %zu left out by us only\n",
      n.objects, n.functions, n.rows, n.signed_rows, n.key_b, n.left_out);
  CHECK(n.functions > 100 * static_cast<size_t>(programs) / 2);
  CHECK(n.signed_rows > 0);
  CHECK(n.key_b > 0);
}
