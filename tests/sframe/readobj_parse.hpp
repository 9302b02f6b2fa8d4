// Test helper: parses `llvm-readobj-22 --sframe` output (LLVM's own SFrame reader) into plain
// structs, so tests can compare it field by field with our decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace jitunwind::test {

struct readobj_fre {
  uint64_t start = 0;  ///< absolute (function start + FRE offset)
  bool ra_signed = false;
  int offset_size_code = -1;
  int base_reg = -1;  ///< 0 = FP, 1 = SP
  int64_t cfa = 0;
  std::optional<int64_t> ra, fp;
};

struct readobj_fde {
  uint64_t start = 0;  ///< "PC" (linked) or "Start Address" under "PC {" (relocatable)
  std::string symbol;  ///< relocation symbol for .o files
  uint64_t size = 0, fre_offset = 0, num_fres = 0;
  int fre_type = -1, fde_type = -1;
  uint64_t info_raw = 0, rep_size = 0;
  std::vector<readobj_fre> fres;
};

struct readobj_sframe {
  int64_t version = -1, flags = -1, abi = -1, fixed_fp = 0, fixed_ra = 0;
  uint64_t num_fdes = 0, num_fres = 0, fre_len = 0, fde_off = 0, fre_off = 0;
  std::vector<readobj_fde> fdes;
  std::vector<std::string> warnings;
};

namespace readobj_detail {

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// "V2 (0x2)" -> 2; "0x1A" -> 26; "-8" -> -8; "Addr1 (0x0)" -> 0.
inline int64_t number(const std::string& v) {
  const auto open = v.rfind("(0x");
  if (open != std::string::npos) return std::stoll(v.substr(open + 1), nullptr, 16);
  if (v.rfind("0x", 0) == 0 || v.rfind("0X", 0) == 0) return std::stoll(v, nullptr, 16);
  return std::stoll(v, nullptr, 10);
}

}  // namespace readobj_detail

inline readobj_sframe parse_readobj_sframe(const std::string& text) {
  using namespace readobj_detail;
  readobj_sframe out;
  enum { header, fde, fre } where = header;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("warning:") != std::string::npos) out.warnings.push_back(line);
    const std::string t = trim(line);
    if (t.rfind("FuncDescEntry [", 0) == 0) {
      out.fdes.emplace_back();
      where = fde;
      continue;
    }
    if (t == "Frame Row Entry {") {
      out.fdes.back().fres.emplace_back();
      where = fre;
      continue;
    }
    if (t.rfind("Flags [", 0) == 0) {
      out.flags = number(t);
      continue;
    }
    const auto colon = t.find(": ");
    if (colon == std::string::npos) continue;
    const std::string key = t.substr(0, colon), value = t.substr(colon + 2);
    if (where == header) {
      if (key == "Version")
        out.version = number(value);
      else if (key == "ABI")
        out.abi = number(value);
      else if (key.rfind("CFA fixed FP offset", 0) == 0)
        out.fixed_fp = number(value);
      else if (key.rfind("CFA fixed RA offset", 0) == 0)
        out.fixed_ra = number(value);
      else if (key == "Num FDEs")
        out.num_fdes = number(value);
      else if (key == "Num FREs")
        out.num_fres = number(value);
      else if (key == "FRE subsection length")
        out.fre_len = number(value);
      else if (key == "FDE subsection offset")
        out.fde_off = number(value);
      else if (key == "FRE subsection offset")
        out.fre_off = number(value);
    } else if (where == fde) {
      auto& f = out.fdes.back();
      if (key == "PC" || key == "Start Address")
        f.start = number(value);
      else if (key == "Symbol Name")
        f.symbol = value;
      else if (key == "Size")
        f.size = number(value);
      else if (key == "Start FRE Offset")
        f.fre_offset = number(value);
      else if (key == "Num FREs")
        f.num_fres = number(value);
      else if (key == "FRE Type")
        f.fre_type = static_cast<int>(number(value));
      else if (key == "FDE Type")
        f.fde_type = static_cast<int>(number(value));
      else if (key == "Raw")
        f.info_raw = number(value);
      else if (key.rfind("Repetitive block size", 0) == 0)
        f.rep_size = number(value);
    } else {
      auto& r = out.fdes.back().fres.back();
      if (key == "Start Address")
        r.start = number(value);
      else if (key == "Return Address Signed")
        r.ra_signed = value == "Yes";
      else if (key == "Offset Size")
        r.offset_size_code = static_cast<int>(number(value));
      else if (key == "Base Register")
        r.base_reg = static_cast<int>(number(value));
      else if (key == "CFA Offset")
        r.cfa = number(value);
      else if (key == "RA Offset")
        r.ra = number(value);
      else if (key == "FP Offset")
        r.fp = number(value);
    }
  }
  return out;
}

}  // namespace jitunwind::test
