#include "tool_rows.hpp"

#include "gdbjit/elf_object.hpp"
#include "support/process.hpp"

#include <elf.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <sstream>

namespace jitunwind::test {

void write_unwind_object(const std::string& path, abi target, uint64_t text_start,
                         uint64_t text_end, uint64_t eh_frame_address,
                         const cfi::sections& sections) {
  detail::elf::object_writer w(detail::elf::machine_for(target), ET_REL);
  w.add_section(
      {".text", SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, text_start, 16, {}, text_end - text_start});
  w.add_section({".eh_frame", SHT_PROGBITS, SHF_ALLOC, eh_frame_address, 8, sections.eh_frame, 0});
  const uint16_t hdr = w.add_section({".eh_frame_hdr", SHT_PROGBITS, SHF_ALLOC,
                                      sections.eh_frame_hdr_address, 4, sections.eh_frame_hdr, 0});
  w.add_segment(PT_GNU_EH_FRAME, PF_R, hdr);
  const std::vector<uint8_t> bytes = w.write();
  REQUIRE(write_file(path, std::string(bytes.begin(), bytes.end())));
}

std::vector<frame_row> merged(const std::vector<frame_row>& rows) {
  std::vector<frame_row> out;
  for (const frame_row& r : rows) {
    if (!out.empty()) {
      frame_row same = r;
      same.pc_offset = out.back().pc_offset;
      if (same == out.back()) continue;
    }
    out.push_back(r);
  }
  return out;
}

std::string describe(const std::vector<frame_row>& rows) {
  std::ostringstream s;
  for (const frame_row& r : rows) {
    s << "  +" << r.pc_offset << ": ";
    if (r.ra == ra_rule::undefined) {
      s << "outermost\n";
      continue;
    }
    s << "CFA=" << (r.cfa == cfa_base::sp ? "SP" : "FP") << "+" << r.cfa_offset;
    if (r.ra == ra_rule::saved)
      s << " RA=[CFA" << r.ra_offset << "]";
    else
      s << " RA=reg";
    if (r.fp == fp_rule::saved) s << " FP=[CFA" << r.fp_offset << "]";
    if (r.ra_mangled) s << " signed";
    s << "\n";
  }
  return s.str();
}

namespace {

uint64_t hex(const std::string& s) {
  return std::stoull(s, nullptr, 16);
}

// "[CFA-16]" -> -16
bool parse_cfa_slot(const std::string& v, int32_t* off) {
  static const std::regex slot(R"(\[CFA([+-]\d+)\])");
  std::smatch m;
  if (!std::regex_match(v, m, slot)) return false;
  *off = std::stoi(m[1]);
  return true;
}

frame_row row_from_dwarfdump(abi target, uint32_t pc, const std::string& cfa_reg, int32_t cfa_off,
                             const std::string& regs) {
  const bool amd64 = target == abi::amd64;
  const std::string sp = amd64 ? "RSP" : "WSP", fp = amd64 ? "RBP" : "W29",
                    ra = amd64 ? "RIP" : "W30";
  frame_row r;
  r.pc_offset = pc;
  r.ra = amd64 ? ra_rule::undefined : ra_rule::in_register;  // absent RA: see below
  r.ra_offset = 0;
  if (cfa_reg == sp)
    r.cfa = cfa_base::sp;
  else if (cfa_reg == fp)
    r.cfa = cfa_base::fp;
  else
    FAIL("unexpected CFA register " << cfa_reg);
  r.cfa_offset = cfa_off;
  // "RBP=[CFA-16], RIP=[CFA-8]" or "RIP=undefined" or "reg34=1"
  std::stringstream ss(regs);
  std::string item;
  bool ra_seen = false;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    const auto eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    int32_t off = 0;
    if (name == ra) {
      ra_seen = true;
      if (value == "undefined") return outermost_row(pc);
      REQUIRE(parse_cfa_slot(value, &off));
      r.ra = ra_rule::saved;
      r.ra_offset = off;
    } else if (name == fp) {
      REQUIRE(parse_cfa_slot(value, &off));
      r.fp = fp_rule::saved;
      r.fp_offset = off;
    } else if (name == "reg34" && !amd64) {
      r.ra_mangled = value == "1";
    } else {
      FAIL("unexpected register rule " << item);
    }
  }
  if (amd64 && !ra_seen) FAIL("AMD64 row without a return address rule at +" << pc);
  return r;
}

}  // namespace

std::vector<tool_fde> dwarfdump_fdes(const std::string& object, abi target) {
  const run_result res = run({"llvm-dwarfdump-22", "--eh-frame", object});
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  std::vector<tool_fde> out;
  static const std::regex fde_line(
      R"(^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.\.([0-9a-f]+))");
  static const std::regex row_line(R"(^\s+0x([0-9a-f]+): CFA=([A-Z0-9a-z]+)([+-]\d+)?(: (.*))?$)");
  std::stringstream in(res.out);
  std::string line;
  bool in_fde = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, fde_line)) {
      out.push_back({hex(m[1]), hex(m[2]), {}});
      in_fde = true;
    } else if (line.find(" CIE") != std::string::npos && line.find("FDE") == std::string::npos) {
      in_fde = false;
    } else if (in_fde && std::regex_match(line, m, row_line)) {
      const uint64_t pc = hex(m[1]);
      REQUIRE(pc >= out.back().start);
      const int32_t off = m[3].matched ? std::stoi(m[3]) : 0;
      out.back().rows.push_back(row_from_dwarfdump(target,
                                                   static_cast<uint32_t>(pc - out.back().start),
                                                   m[2], off, m[5].matched ? m[5].str() : ""));
    }
  }
  for (tool_fde& f : out) f.rows = merged(f.rows);
  return out;
}

std::vector<tool_fde> readelf_fdes(const std::string& object) {
  const run_result res = run({"readelf", "--debug-dump=frames-interp", object});
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  std::vector<tool_fde> out;
  static const std::regex fde_line(R"(FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+))");
  static const std::regex row_line(R"(^([0-9a-f]{16}) (\S+)\s+(.*)$)");
  std::stringstream in(res.out);
  std::string line;
  std::vector<std::string> columns;
  bool in_fde = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, fde_line)) {
      out.push_back({hex(m[1]), hex(m[2]), {}});
      in_fde = true;
      columns.clear();
    } else if (line.find(" CIE ") != std::string::npos) {
      in_fde = false;
    } else if (in_fde && line.find("LOC") != std::string::npos) {
      std::stringstream hs(line);
      std::string c;
      columns.clear();
      while (hs >> c) columns.push_back(c);
    } else if (in_fde && std::regex_match(line, m, row_line)) {
      frame_row r;
      r.pc_offset = static_cast<uint32_t>(hex(m[1]) - out.back().start);
      static const std::regex cfa_rule(R"((rsp|rbp)\+(\d+))");
      std::smatch c;
      const std::string cfa = m[2];
      REQUIRE(std::regex_match(cfa, c, cfa_rule));
      r.cfa = c[1] == "rsp" ? cfa_base::sp : cfa_base::fp;
      r.cfa_offset = std::stoi(c[2]);
      std::stringstream vs(m[3].str());
      std::string v;
      for (size_t col = 2; vs >> v; ++col) {
        REQUIRE(col < columns.size());
        if (columns[col] == "rbp" && v != "u") {
          REQUIRE(v.rfind("c", 0) == 0);
          r.fp = fp_rule::saved;
          r.fp_offset = std::stoi(v.substr(1));
        } else if (columns[col] == "ra") {
          if (v == "u") {
            r = outermost_row(r.pc_offset);
            break;
          }
          r.ra_offset = std::stoi(v.substr(1));
        }
      }
      out.back().rows.push_back(r);
    }
  }
  for (tool_fde& f : out) {
    // readelf prints no table for an FDE without instructions: the CIE's rules hold.
    if (f.rows.empty()) f.rows.push_back(entry_row(abi::amd64));
    f.rows = merged(f.rows);
  }
  return out;
}

std::vector<hdr_entry> readobj_hdr_entries(const std::string& object, uint64_t* eh_frame_ptr) {
  const run_result res = run({"llvm-readobj-22", "--unwind", object});
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  std::vector<hdr_entry> out;
  static const std::regex ptr_line(R"(eh_frame_ptr: 0x([0-9a-f]+))");
  static const std::regex loc_line(R"(initial_location: 0x([0-9a-f]+))");
  static const std::regex addr_line(R"(^\s+address: 0x([0-9a-f]+))");
  std::stringstream in(res.out);
  std::string line;
  bool in_header = true;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find(".eh_frame section at") != std::string::npos) in_header = false;
    if (!in_header) continue;
    if (std::regex_search(line, m, ptr_line))
      *eh_frame_ptr = hex(m[1]);
    else if (std::regex_search(line, m, loc_line))
      out.push_back({hex(m[1]), 0});
    else if (std::regex_search(line, m, addr_line) && !out.empty())
      out.back().fde_address = hex(m[1]);
  }
  return out;
}

std::vector<tool_fde> expected_fdes(abi target, const function_desc& f) {
  (void)target;
  std::vector<tool_fde> out;
  if (f.pcmask_rep == 0 || f.rows.size() == 1) {
    out.push_back({f.start, f.start + f.size, merged(f.rows)});
    return out;
  }
  for (uint64_t at = 0; at < f.size; at += f.pcmask_rep) {
    const uint64_t block = std::min<uint64_t>(f.pcmask_rep, f.size - at);
    tool_fde e{f.start + at, f.start + at + block, {}};
    for (const frame_row& r : f.rows)
      if (r.pc_offset < block) e.rows.push_back(r);
    e.rows = merged(e.rows);
    out.push_back(e);
  }
  return out;
}

}  // namespace jitunwind::test
