// SFrame v1 as binutils 2.40 emits it (`gcc -O2 -Wa,--gsframe`): our dump decodes it, says
// version 1, and shows the rows `objdump --sframe` shows; function starts match the symbols.
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;
using nlohmann::json;

namespace {

const char* source = R"(
extern int ext(int);
int leafy(int x) { return x * 3 + 1; }
int caller(int x) {
  int a[64];
  for (int i = 0; i < 64; ++i) a[i] = ext(i + x);
  return a[x & 63] + ext(a[3]);
}
int fp_user(int n) {
  char* p = __builtin_alloca(n);
  p[0] = 1;
  return ext(p[n / 2]);
}
)";

struct objdump_row {
  uint64_t pc;
  std::string cfa, fp;
  bool operator==(const objdump_row&) const = default;
};
struct objdump_function {
  uint64_t size;
  std::vector<objdump_row> rows;
};

/// Parses binutils 2.40 `objdump --sframe` (for a .o, `pc` is 0: relocations are not applied,
/// so STARTPC values are offsets in the function).
std::vector<objdump_function> objdump_sframe(const std::string& path, std::string& version) {
  auto r = run({"objdump", "--sframe", path});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<objdump_function> out;
  static const std::regex func(R"(func idx \[\d+\]: pc = 0x([0-9a-f]+), size = (\d+) bytes)");
  static const std::regex row(R"(^\s+([0-9a-f]{16})\s+(\S+)\s+(\S+)\s+(\S+)\s*$)");
  static const std::regex ver(R"(Version: (\S+))");
  std::istringstream in(r.out);
  uint64_t pc = 0;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, ver)) version = m[1];
    if (std::regex_search(line, m, func)) {
      pc = std::stoull(m[1], nullptr, 16);
      out.push_back({std::stoull(m[2]), {}});
    } else if (!out.empty() && std::regex_match(line, m, row)) {
      out.back().rows.push_back({std::stoull(m[1], nullptr, 16) - pc, m[2], m[3]});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("gcc -Wa,--gsframe (SFrame v1): dump works, says version 1, agrees with objdump") {
  if (!tool_available("gcc") || !tool_available("objdump")) return;
  temp_dir dir;
  REQUIRE(write_file(dir / "v1.c", source));
  const std::string obj = dir / "v1.o";
  auto cc = run({"gcc", "-O2", "-Wa,--gsframe", "-c", dir / "v1.c", "-o", obj});
  INFO(cc.out << cc.err);
  REQUIRE(cc.exit_code == 0);

  std::string objdump_version;
  const auto expect = objdump_sframe(obj, objdump_version);
  if (objdump_version != "SFRAME_VERSION_1") {
    WARN("binutils emits " << objdump_version << ", not v1; this test targets binutils 2.40");
  }
  REQUIRE(expect.size() == 3);

  auto text = run_tool({"sframe", "dump", obj});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  if (objdump_version == "SFRAME_VERSION_1")
    CHECK(text.out.find("Version:                 1\n") != std::string::npos);

  const json doc = dump_json({obj});
  if (objdump_version == "SFRAME_VERSION_1") CHECK(doc["version"] == 1);
  CHECK(doc["abi"] == "amd64");
  const auto& functions = doc["functions"];
  REQUIRE(functions.size() == expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    INFO("function " << i);
    // The relocated start equals the function's symbol: dump attaches the name only then.
    CHECK(functions[i].contains("name"));
    CHECK(functions[i]["size"] == expect[i].size);
    std::vector<objdump_row> ours;
    for (const auto& r : functions[i]["rows"]) {
      const std::string fp = r.contains("fp") ? "c" + std::to_string(r["fp"].get<int>()) : "u";
      ours.push_back({r["pc"].get<uint64_t>(), r["cfa"].get<std::string>(), fp});
    }
    CHECK(ours == expect[i].rows);
  }
  CHECK(functions[0]["name"] == "leafy");
  CHECK(functions[1]["name"] == "caller");
  CHECK(functions[2]["name"] == "fp_user");

  auto check = run_tool({"sframe", "check", obj});
  CHECK(check.exit_code == 0);
  CHECK(check.out.find(": ok (3 functions, ") != std::string::npos);
}
