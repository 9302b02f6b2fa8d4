#include "support/sframe_vectors.hpp"

#include "support/privileges.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace jitunwind::test {

namespace fs = std::filesystem;

std::optional<std::string> sframe_vectors_dir() {
  std::string dir;
  if (const char* env = std::getenv("JITUNWIND_SFRAME_VECTORS"); env != nullptr && *env) {
    dir = env;
  } else {
    dir = std::string(JITUNWIND_SOURCE_DIR) + "/../shared/sframe-vectors";
  }
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    skip_or_fail("the SFrame test vectors are not at " + dir +
                 " (set JITUNWIND_SFRAME_VECTORS to their directory)");
    return std::nullopt;
  }
  return fs::canonical(dir, ec).string();
}

std::vector<sframe_vector> load_sframe_vectors(const std::string& dir) {
  std::vector<sframe_vector> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  static const std::regex versioned(R"((.*)-(2\.4[0-9])$)");
  for (const auto& p : files) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    INFO(p.string());
    REQUIRE(!j.is_discarded());
    sframe_vector v;
    v.name = p.stem().string();
    std::smatch m;
    if (std::regex_match(v.name, m, versioned)) {
      v.stem = m[1];
      v.binutils = m[2];
    } else {
      v.stem = v.name;
    }
    v.section_base = j.at("section_base").get<uint64_t>();
    for (const auto& b : j.at("content")) v.content.push_back(b.get<uint8_t>());
    v.groundtruth = j.at("groundtruth").get<std::string>();
    out.push_back(std::move(v));
  }
  return out;
}

namespace {

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

}  // namespace

std::optional<oracle_section> parse_objdump_sframe(const std::string& text) {
  if (text.find("Contents of the SFrame section") == std::string::npos) return std::nullopt;
  oracle_section sec;
  std::istringstream in(text);
  std::string line;
  static const std::regex func_re(
      R"re(func idx \[(\d+)\]: pc = 0x([0-9a-f]+), size = (\d+) bytes(, attr = "([SF]*)")?(, pauth = B key)?)re");
  static const std::regex row_re(R"(([0-9a-f]{16})\s+(.*))");
  oracle_function* cur = nullptr;
  bool in_flags = false;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    std::smatch m;
    if (t.rfind("Version: SFRAME_VERSION_", 0) == 0) {
      sec.version = std::stoi(t.substr(24));
    } else if (t.rfind("Flags:", 0) == 0 || (in_flags && t.rfind("SFRAME_F_", 0) == 0)) {
      std::string rest = t.rfind("Flags:", 0) == 0 ? trim(t.substr(6)) : t;
      in_flags = !rest.empty() && rest.back() == ',';
      if (in_flags) rest.pop_back();
      if (!rest.empty() && rest != "NONE") sec.flags.push_back(rest);
      continue;
    } else if (t.rfind("CFA fixed RA offset:", 0) == 0) {
      sec.fixed_ra = std::stoi(t.substr(20));
    } else if (t.rfind("Num FDEs:", 0) == 0) {
      sec.num_fdes = static_cast<uint32_t>(std::stoul(t.substr(9)));
    } else if (t.rfind("Num FREs:", 0) == 0) {
      sec.num_fres = static_cast<uint32_t>(std::stoul(t.substr(9)));
    } else if (std::regex_match(t, m, func_re)) {
      oracle_function f;
      f.pc = std::stoull(m[2], nullptr, 16);
      f.size = static_cast<uint32_t>(std::stoul(m[3]));
      const std::string attr = m[5];
      f.signal = attr.find('S') != std::string::npos;
      f.flex = attr.find('F') != std::string::npos;
      f.pauth_b = m[6].matched;
      sec.functions.push_back(f);
      cur = &sec.functions.back();
    } else if (t.rfind("STARTPC", 0) == 0) {
      REQUIRE(cur != nullptr);
      cur->pcmask = t.rfind("STARTPC[m]", 0) == 0;
    } else if (cur != nullptr && std::regex_match(t, m, row_re)) {
      oracle_row r;
      r.pc = std::stoull(m[1], nullptr, 16);
      std::istringstream cols(m[2].str());
      std::string a, b, c;
      cols >> a >> b >> c;
      if (a == "RA" && b == "undefined") {
        r.undefined = true;
      } else {
        INFO(line);
        REQUIRE(!c.empty());
        r.cfa = a;
        r.fp = b;
        r.ra = c;
      }
      cur->rows.push_back(r);
    }
    in_flags = false;
  }
  return sec;
}

namespace {

// "sp", "fp" or "rN" -> DWARF number.
std::optional<uint8_t> register_number(abi a, const std::string& name) {
  const dwarf_regs regs = dwarf_registers(a);
  if (name == "sp") return regs.sp;
  if (name == "fp") return regs.fp;
  if (name.size() > 1 && name[0] == 'r' &&
      std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int n = std::stoi(name.substr(1));
    if (n <= 255) return static_cast<uint8_t>(n);
  }
  return std::nullopt;
}

// "X+N" / "X-N" / "(X+N)" -> register, offset, deref.
struct reg_expr {
  uint8_t reg = 0;
  int32_t offset = 0;
  bool deref = false;
};

std::optional<reg_expr> parse_reg_expr(abi a, std::string s) {
  reg_expr e;
  if (s.size() > 2 && s.front() == '(' && s.back() == ')') {
    e.deref = true;
    s = s.substr(1, s.size() - 2);
  }
  const size_t op = s.find_first_of("+-");
  if (op == std::string::npos || op == 0) return std::nullopt;
  auto reg = register_number(a, s.substr(0, op));
  if (!reg) return std::nullopt;
  e.reg = *reg;
  e.offset = std::stoi(s.substr(op));
  return e;
}

}  // namespace

std::optional<frame_row> oracle_to_row(abi a, const oracle_function& f, const oracle_row& o,
                                       std::string& why) {
  const uint32_t pc_offset = static_cast<uint32_t>(f.pcmask ? o.pc : o.pc - f.pc);
  if (o.undefined) return outermost_row(pc_offset);
  const dwarf_regs regs = dwarf_registers(a);
  const bool amd64 = a == abi::amd64;
  frame_row r;
  r.pc_offset = pc_offset;
  auto cfa = parse_reg_expr(a, o.cfa);
  if (!cfa) {
    why = "CFA column '" + o.cfa + "'";
    return std::nullopt;
  }
  r.cfa = cfa->reg == regs.sp ? cfa_base::sp : cfa->reg == regs.fp ? cfa_base::fp : cfa_base::reg;
  r.cfa_reg = r.cfa == cfa_base::reg ? cfa->reg : 0;
  r.cfa_deref = cfa->deref;
  r.cfa_offset = cfa->offset;

  std::string ra = o.ra;
  if (ra.size() > 3 && ra.compare(ra.size() - 3, 3, "[s]") == 0) {
    r.ra_mangled = true;
    ra.resize(ra.size() - 3);
  }
  if (ra == "f" || ra == "U" || ra == "u") {
    // "f": the header's fixed offset; "U": FLEX padding; "u" (AMD64 in binutils 2.40, which
    // printed no "f"; AArch64: not tracked, i.e. still in the link register).
    r.ra = amd64 ? ra_rule::saved : ra_rule::in_register;
    r.ra_offset = amd64 ? -8 : 0;
  } else if (ra.size() > 1 && ra[0] == 'c' && (ra[1] == '+' || ra[1] == '-')) {
    r.ra = ra_rule::saved;
    r.ra_offset = std::stoi(ra.substr(1));
  } else if (auto e = parse_reg_expr(a, ra)) {
    if (!e->deref && e->offset == 0 && !amd64 && e->reg == regs.ra) {
      r.ra = ra_rule::in_register;
      r.ra_offset = 0;
    } else {
      r.ra = e->deref ? ra_rule::register_saved : ra_rule::register_value;
      r.ra_reg = e->reg;
      r.ra_offset = e->offset;
    }
  } else {
    why = "RA column '" + o.ra + "'";
    return std::nullopt;
  }

  const std::string& fp = o.fp;
  if (fp == "u" || fp == "U") {
    r.fp = fp_rule::unchanged;
  } else if (fp.size() > 1 && fp[0] == 'c' && (fp[1] == '+' || fp[1] == '-')) {
    r.fp = fp_rule::saved;
    r.fp_offset = std::stoi(fp.substr(1));
  } else if (auto e = parse_reg_expr(a, fp)) {
    if (!e->deref && e->offset == 0 && e->reg == regs.fp) {
      r.fp = fp_rule::unchanged;
    } else {
      r.fp = e->deref ? fp_rule::register_saved : fp_rule::register_value;
      r.fp_reg = e->reg;
      r.fp_offset = e->offset;
    }
  } else {
    why = "FP column '" + o.fp + "'";
    return std::nullopt;
  }
  return r;
}

}  // namespace jitunwind::test
