#include "cli/cli_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace jitunwind::test::cli {

namespace {

// Set before any test runs (static initialization), inherited by every process they start.
struct scratch_runtime_dir {
  temp_dir dir;
  scratch_runtime_dir() { setenv("JITUNWIND_DIR", dir.path().c_str(), 1); }
};
const scratch_runtime_dir scratch;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

/// The value after "Key: ".
std::string value_of(const std::string& line) {
  const auto colon = line.find(": ");
  return colon == std::string::npos ? std::string() : line.substr(colon + 2);
}

int64_t number(const std::string& text) {
  return std::stoll(text, nullptr, 0);
}

/// "Addr2 (0x1)" / "B4 (0x2)" → 2 / 4.
unsigned width_of(const std::string& v) {
  std::smatch m;
  static const std::regex re(R"([A-Za-z]+(\d) )");
  if (std::regex_search(v, m, re)) return static_cast<unsigned>(std::stoul(m[1]));
  return 0;
}

/// The number in "... (0xN)".
unsigned paren_number(const std::string& v) {
  const auto open = v.rfind("(0x");
  if (open == std::string::npos) return 0;
  return static_cast<unsigned>(std::stoul(v.substr(open + 1), nullptr, 16));
}

}  // namespace

std::string tool_path() {
#ifdef JITUNWIND_CLI_PATH
  return JITUNWIND_CLI_PATH;
#else
  FAIL("the jitunwind tool is not built (JITUNWIND_BUILD_TOOLS=OFF)");
  return {};
#endif
}

run_result run_tool(const std::vector<std::string>& args, const std::string& input) {
  std::vector<std::string> argv{tool_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  // Longer than any limit of the tool itself (unwind check stops at 60 s by default), so that the
  // tool ends first and says why.
  return run(argv, input, std::chrono::seconds(300));
}

sframe_dump llvm_readobj_sframe(const std::string& path) {
  auto r = run({"llvm-readobj-22", "--sframe", path});
  INFO("llvm-readobj-22 --sframe " << path << "\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.err.empty());  // no warnings
  sframe_dump d;
  bool in_fre = false, in_pc = false;
  std::istringstream in(r.out);
  for (std::string raw; std::getline(in, raw);) {
    const std::string line = trim(raw);
    if (starts_with(line, "Version:")) {
      d.version = paren_number(line);
    } else if (starts_with(line, "Flags [")) {
      d.flags = paren_number(line);
    } else if (starts_with(line, "ABI:")) {
      const unsigned id = paren_number(line);
      d.abi = id == 3 ? "amd64" : id == 2 ? "aarch64-le" : id == 1 ? "aarch64-be" : "?";
    } else if (starts_with(line, "FuncDescEntry [")) {
      d.fdes.emplace_back();
      in_fre = false;
    } else if (d.fdes.empty()) {
      continue;
    } else if (line == "PC {") {
      in_pc = true;
    } else if (in_pc && line == "}") {
      in_pc = false;
    } else if (starts_with(line, "Frame Row Entry {")) {
      d.fdes.back().fres.emplace_back();
      d.fdes.back().fres.back().outermost = true;  // until a CFA offset is seen
      d.fdes.back().offset_bytes.push_back(0);
      in_fre = true;
    } else if (!in_fre) {
      fde& f = d.fdes.back();
      if (starts_with(line, "PC: ") || (in_pc && starts_with(line, "Start Address:")))
        f.start = static_cast<uint64_t>(number(value_of(line)));
      else if (starts_with(line, "Size:"))
        f.size = static_cast<uint64_t>(number(value_of(line)));
      else if (starts_with(line, "FRE Type:"))
        f.fre_addr_bytes = width_of(value_of(line));
      else if (starts_with(line, "Repetitive block size:"))
        f.rep_size = static_cast<uint64_t>(number(value_of(line)));
    } else {
      fde& f = d.fdes.back();
      fre& e = f.fres.back();
      const std::string v = value_of(line);
      if (starts_with(line, "Start Address:"))
        e.pc = static_cast<uint64_t>(number(v));
      else if (starts_with(line, "Return Address Signed:"))
        e.ra_signed = v == "Yes";
      else if (starts_with(line, "Offset Size:"))
        f.offset_bytes.back() = width_of(v);
      else if (starts_with(line, "Base Register:"))
        e.cfa_base = starts_with(v, "SP") ? "sp" : starts_with(v, "FP") ? "fp" : v;
      else if (starts_with(line, "CFA Offset:")) {
        e.cfa_offset = number(v);
        e.outermost = false;
      } else if (starts_with(line, "RA Offset:"))
        e.ra_offset = number(v);
      else if (starts_with(line, "FP Offset:"))
        e.fp_offset = number(v);
    }
  }
  // llvm-readobj prints FRE start addresses as addresses (function start + offset) for PCINC
  // functions; our model keeps offsets.
  for (fde& f : d.fdes)
    if (f.rep_size == 0)
      for (fre& e : f.fres) e.pc -= f.start;
  // Outermost rows carry no offsets: the base register field is meaningless then.
  for (fde& f : d.fdes)
    for (fre& e : f.fres)
      if (e.outermost) e = fre{e.pc, true, {}, 0, std::nullopt, std::nullopt, false};
  return d;
}

sframe_dump from_json(const nlohmann::json& doc) {
  sframe_dump d;
  d.version = doc.value("version", 2u);
  d.abi = doc.at("abi").get<std::string>();
  for (const auto& f : doc.value("flags", nlohmann::json::array())) {
    const std::string name = f.get<std::string>();
    d.flags |= name == "FDE_SORTED"             ? 1
               : name == "FRAME_POINTER"        ? 2
               : name == "FDE_FUNC_START_PCREL" ? 4
                                                : 0;
  }
  for (const auto& fj : doc.at("functions")) {
    fde f;
    f.start = fj.at("start").get<uint64_t>();
    f.size = fj.at("size").get<uint64_t>();
    f.rep_size = fj.value("pcmask_rep", uint64_t{0});
    for (const auto& rj : fj.at("rows")) {
      fre e;
      e.pc = rj.at("pc").get<uint64_t>();
      if (rj.value("outermost", false)) {
        e.outermost = true;
      } else {
        const std::string cfa = rj.at("cfa").get<std::string>();
        e.cfa_base = cfa.substr(0, 2);
        // v3 CFA rules ("r10+0", "*(fp-8)") have no v2 form: base and offset stay as they are.
        if (e.cfa_base == "sp" || e.cfa_base == "fp") e.cfa_offset = std::stoll(cfa.substr(2));
        // (v3 register rules are strings; this structure is for v2 readers and leaves them out.)
        if (rj.contains("ra") && rj["ra"].is_number())
          e.ra_offset = rj["ra"].get<int64_t>();
        else if (!rj.contains("ra") && d.abi == "amd64")
          e.ra_offset = -8;
        if (rj.contains("fp") && rj["fp"].is_number()) e.fp_offset = rj["fp"].get<int64_t>();
        e.ra_signed = rj.value("ra_mangled", false);
      }
      f.fres.push_back(e);
    }
    d.fdes.push_back(std::move(f));
  }
  std::stable_sort(d.fdes.begin(), d.fdes.end(),
                   [](const fde& a, const fde& b) { return a.start < b.start; });
  return d;
}

nlohmann::json dump_json(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"sframe", "dump", "--format", "json"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_tool(argv);
  INFO("jitunwind sframe dump --format json ...\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.err.empty());
  return nlohmann::json::parse(r.out);
}

nlohmann::json normalized(nlohmann::json doc, bool keep_names) {
  nlohmann::json out;
  out["abi"] = doc.at("abi");
  auto functions = doc.at("functions");
  std::stable_sort(functions.begin(), functions.end(), [](const auto& a, const auto& b) {
    return a.at("start").template get<uint64_t>() < b.at("start").template get<uint64_t>();
  });
  if (!keep_names)
    for (auto& f : functions) f.erase("name");
  out["functions"] = functions;
  return out;
}

const std::string& runtime_dir() {
  return scratch.dir.path();
}

}  // namespace jitunwind::test::cli
