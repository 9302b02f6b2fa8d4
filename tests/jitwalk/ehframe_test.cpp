// .eh_frame -> walker rows, checked FDE by FDE against binutils' own interpretation
// (`readelf --debug-dump=frames-interp`) of real objects.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <map>
#include <sstream>

#include "jitwalk/ehframe.hpp"
#include "jitwalk/elf_file.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

using namespace jitwalk;
namespace jt = jitunwind::test;

namespace {

struct expected_row {
  uint64_t pc;
  unwind_row row;
};

// Parses readelf's interpreted tables: FDE header lines, then "LOC CFA <regs...> ra" rows.
// FDEs without rows inherit their CIE's initial row.
std::map<uint64_t, std::pair<uint64_t, std::vector<expected_row>>> readelf_rows(
    const std::string& text) {
  std::map<uint64_t, std::pair<uint64_t, std::vector<expected_row>>> out;  // start -> (end, rows)
  std::map<std::string, unwind_row> cie_rows;  // CIE offset -> initial row
  std::istringstream in(text);
  std::string line, cie_off, cur_cie;
  uint64_t fde_start = 0, fde_end = 0;
  bool in_fde = false, in_cie = false;
  std::vector<std::string> cols;
  std::vector<expected_row>* rows = nullptr;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> w;
    for (std::string t; ls >> t;) {
      // "r9 (r9)": a register rule is printed as two words; keep it one cell.
      if (!w.empty() && t.size() > 2 && t.front() == '(' && t.back() == ')') {
        w.back() += " " + t;
      } else {
        w.push_back(t);
      }
    }
    if (w.empty()) continue;
    if (w.size() >= 4 && w[3] == "CIE") {
      in_cie = true;
      in_fde = false;
      cie_off = w[0];
      continue;
    }
    if (w.size() >= 6 && w[3] == "FDE") {
      in_fde = true;
      in_cie = false;
      cur_cie = w[4].substr(4);  // cie=XXXXXXXX
      unsigned long long a = 0, b = 0;
      std::sscanf(w[5].c_str(), "pc=%llx..%llx", &a, &b);
      fde_start = a;
      fde_end = b;
      auto& e = out[fde_start];
      e.first = fde_end;
      rows = &e.second;
      // Until rows appear, the CIE's initial rule holds.
      if (cie_rows.count(cur_cie)) rows->push_back({fde_start, cie_rows[cur_cie]});
      continue;
    }
    if (w[0] == "LOC") {
      cols = w;
      continue;
    }
    if (!(in_cie || in_fde) || cols.empty() || w.size() != cols.size() || w[0].size() != 16 ||
        line.find("ZERO terminator") != std::string::npos) {
      continue;
    }
    unwind_row r;
    r.kind = rule::gap;
    const std::string& cfa = w[1];
    std::string ra = "c-8", rbp = "u";
    for (size_t i = 2; i < cols.size(); ++i) {
      if (cols[i] == "ra") ra = w[i];
      if (cols[i] == "rbp") rbp = w[i];
    }
    bool cfa_ok = false;
    if (cfa.rfind("rsp+", 0) == 0) {
      r.kind = rule::cfa_sp;
      r.cfa_off = std::stoi(cfa.substr(4));
      cfa_ok = true;
    } else if (cfa.rfind("rbp+", 0) == 0) {
      r.kind = rule::cfa_fp;
      r.cfa_off = std::stoi(cfa.substr(4));
      cfa_ok = true;
    }
    if (ra == "u") {
      r = unwind_row{0, rule::outermost, 0, false, 0};
    } else if (!cfa_ok || ra != "c-8") {
      r = unwind_row{0, rule::gap, 0, false, 0};
    } else if (rbp.rfind("c-", 0) == 0) {
      r.fp_saved = true;
      r.fp_off = -std::stoi(rbp.substr(2));
    } else if (rbp != "u") {
      r = unwind_row{0, rule::gap, 0, false, 0};
    }
    unsigned long long loc = std::stoull(w[0], nullptr, 16);
    if (in_cie) {
      cie_rows[cie_off] = r;
    } else if (rows != nullptr) {
      if (!rows->empty() && rows->back().pc == loc) rows->pop_back();
      rows->push_back({loc, r});
    }
  }
  return out;
}

const unwind_row* row_at(const unwind_function& f, uint64_t pc) {
  const unwind_row* best = nullptr;
  for (const auto& r : f.rows) {
    if (f.start + r.pc_off <= pc) best = &r;
  }
  return best;
}

bool same(const unwind_row& a, const unwind_row& b) {
  return a.kind == b.kind &&
         (a.kind != rule::cfa_sp && a.kind != rule::cfa_fp
              ? true
              : a.cfa_off == b.cfa_off && a.fp_saved == b.fp_saved && a.fp_off == b.fp_off);
}

void compare_with_readelf(const std::string& path, size_t min_rows) {
  auto obj = elf_file::open(path);
  REQUIRE(obj.ok());
  uint64_t vaddr = 0;
  auto sec = obj.value()->section(".eh_frame", &vaddr);
  REQUIRE(!sec.empty());
  auto parsed = parse_eh_frame(sec.span(), vaddr);
  REQUIRE(parsed.ok());
  INFO(path << ": " << parsed->fdes << " FDEs, " << parsed->skipped << " skipped");
  for (const auto& p : parsed->problems) WARN(p);
  CHECK(parsed->skipped == 0);

  auto rd = jt::run({"readelf", "--debug-dump=frames-interp", path});
  // readelf 2.40 exits 1 on libc without saying why; the dump itself is complete.
  REQUIRE(rd.out.find("Contents of the .eh_frame section") != std::string::npos);
  auto expected = readelf_rows(rd.out);
  REQUIRE(expected.size() > 0);
  std::map<uint64_t, const unwind_function*> ours;
  for (const auto& f : parsed->functions) ours[f.start] = &f;

  size_t compared = 0, mismatched = 0;
  std::ostringstream first;  // the first few mismatches, for the failure message
  auto describe = [&](uint64_t pc, const unwind_row* r, const unwind_row& want) {
    if (mismatched > 6) return;
    first << std::hex << "at 0x" << pc << std::dec << ": readelf kind " << int(want.kind) << " cfa "
          << want.cfa_off << " fp " << want.fp_saved << "/" << want.fp_off << "; ours "
          << (r ? int(r->kind) : -1) << " cfa " << (r ? r->cfa_off : 0) << " fp "
          << (r ? r->fp_saved : 0) << "/" << (r ? r->fp_off : 0) << "\n";
  };
  for (const auto& [start, e] : expected) {
    auto it = ours.find(start);
    if (it == ours.end()) {
      ++mismatched;
      if (mismatched <= 6) first << "no function at 0x" << std::hex << start << std::dec << "\n";
      continue;
    }
    const unwind_function& f = *it->second;
    // A lazy PLT's FDE is split: its rows before the CFA expression, then a PCMASK function
    // for the entries (checked on its own in "the lazy PLT's ..."); readelf prints "exp" there.
    uint64_t end = e.first;
    if (auto p = ours.find(f.start + f.size); f.start + f.size < e.first && p != ours.end() &&
                                              p->second->pcmask_rep == 16 &&
                                              p->second->start + p->second->size == e.first) {
      end = f.start + f.size;
    }
    CHECK(f.start + f.size == end);
    for (const auto& er : e.second) {
      if (er.pc >= end) continue;
      const unwind_row* r = row_at(f, er.pc);
      ++compared;
      if (r == nullptr || !same(*r, er.row)) {
        ++mismatched;
        describe(er.pc, r, er.row);
      }
    }
    // And every row of ours must be one readelf knows (nothing invented between its rows).
    for (const auto& r : f.rows) {
      const expected_row* best = nullptr;
      for (const auto& er : e.second) {
        if (er.pc <= f.start + r.pc_off) best = &er;
      }
      ++compared;
      if (best == nullptr || !same(best->row, r)) {
        ++mismatched;
        if (best) describe(f.start + r.pc_off, &r, best->row);
      }
    }
  }
  INFO(compared << " rows compared; first mismatches:\n" << first.str());
  CHECK(compared >= min_rows);
  CHECK(mismatched == 0);
}

}  // namespace

TEST_CASE("eh_frame rows of libc match readelf's interpretation") {
  if (!jt::tool_available("readelf")) return;
  compare_with_readelf("/lib/x86_64-linux-gnu/libc.so.6", 10000);
}

TEST_CASE("eh_frame rows of libstdc++ and of a test program match readelf's interpretation") {
  if (!jt::tool_available("readelf")) return;
  compare_with_readelf("/lib/x86_64-linux-gnu/libstdc++.so.6", 10000);
  compare_with_readelf(jt::binary_path("tests/jitwalk/jitwalk_native_target"), 20);
}

TEST_CASE("the lazy PLT's CFA expression becomes a PCMASK function of 16-byte entries") {
  const std::string path = jt::binary_path("tests/jitwalk/jitwalk_symbols_target");
  auto obj = elf_file::open(path);
  REQUIRE(obj.ok());
  uint64_t vaddr = 0;
  auto sec = obj.value()->section(".eh_frame", &vaddr);
  const auto* plt = obj.value()->image().find_section(".plt");
  REQUIRE(plt != nullptr);
  auto parsed = parse_eh_frame(sec.span(), vaddr);
  REQUIRE(parsed.ok());
  const unwind_function* plt0 = nullptr;
  const unwind_function* entries = nullptr;
  for (const auto& f : parsed->functions) {
    if (f.start == plt->addr) plt0 = &f;
    if (f.start == plt->addr + 16) entries = &f;
  }
  // PLT0 pushes twice: CFA = rsp + 16, then rsp + 24 (the linker's rows, unchanged).
  REQUIRE(plt0 != nullptr);
  CHECK(plt0->size == 16);
  CHECK(plt0->pcmask_rep == 0);
  REQUIRE(plt0->rows.size() == 2);
  CHECK(plt0->rows[0].cfa_off == 16);
  CHECK(plt0->rows[1].cfa_off == 24);
  // Each entry: `jmp *GOT` with CFA = rsp + 8, `push n` at 6, `jmp PLT0` at 11 (rsp + 16).
  REQUIRE(entries != nullptr);
  CHECK(entries->pcmask_rep == 16);
  CHECK(entries->start + entries->size == plt->addr + plt->size);
  REQUIRE(entries->rows.size() == 2);
  CHECK(entries->rows[0].pc_off == 0);
  CHECK(entries->rows[0].kind == rule::cfa_sp);
  CHECK(entries->rows[0].cfa_off == 8);
  CHECK(entries->rows[1].pc_off == 11);
  CHECK(entries->rows[1].kind == rule::cfa_sp);
  CHECK(entries->rows[1].cfa_off == 16);
}

TEST_CASE("hostile eh_frame input is rejected without reading out of bounds") {
  // A CIE, then an FDE whose length runs past the section, then garbage instructions.
  std::vector<uint8_t> s = {0x14, 0, 0,    0,    0, 0,    0,    0, 1, 'z',  'R',
                            0,    1, 0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,
                            0,    0, 0xff, 0xff, 0, 0,    0x1c, 0, 0, 0};
  auto r = parse_eh_frame(s, 0x1000);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("runs past the section"));
  // Unknown CFA opcode inside an otherwise valid FDE.
  std::vector<uint8_t> t = {0x14, 0,    0,    0, 0,    0,    0, 0, 1,    'z', 'R', 0,
                            1,    0x78, 0x10, 1, 0x1b, 0x0c, 7, 8, 0x90, 1,   0,   0,
                            0x14, 0,    0,    0, 0x1c, 0,    0, 0, 0,    0,   0,   0,
                            0x10, 0,    0,    0, 0,    0x3f, 0, 0, 0,    0,   0,   0};
  auto u = parse_eh_frame(t, 0x1000);
  REQUIRE(u.ok());
  CHECK(u->skipped == 1);
  CHECK_THAT(u->problems.front(), Catch::Contains("unknown CFA instruction 0x3f"));
  // Truncation at every length never crashes and never yields a function past the input.
  for (size_t n = 0; n < t.size(); ++n) {
    auto v = parse_eh_frame(std::span<const uint8_t>(t.data(), n), 0x1000);
    if (v) CHECK(v->functions.size() <= 1);
  }
}
#endif
