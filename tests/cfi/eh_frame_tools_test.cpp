// .eh_frame generated from function_desc rows, read back by llvm-dwarfdump-22, readelf and
// llvm-readobj-22: the rows they print must be the rows we described (the same rows SFrame gets).
#include <jitunwind/cfi.h>

#include "support/privileges.hpp"
#include "support/process.hpp"
#include "tool_rows.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace jitunwind;
using namespace jitunwind::test;

namespace {

function_desc must(result<function_desc> r) {
  INFO((r.ok() ? std::string() : r.error().message()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

// A collection of shapes a JIT emits, laid out one after the other from `base`.
std::vector<function_desc> amd64_shapes(uint64_t base) {
  std::vector<function_desc> fs;
  uint64_t at = base;
  auto next = [&](uint32_t size) {
    const uint64_t s = at;
    at += (size + 15) / 16 * 16;
    return s;
  };
  fs.push_back(must(recipes::leaf(abi::amd64, next(16), 16)));
  const recipes::epilogue eps[] = {{11, 12}, {21, 22}};
  fs.push_back(must(recipes::frame_pointer(abi::amd64, next(22), 22, 1, 4, eps)));
  fs.push_back(must(recipes::sp_frame(abi::amd64, next(40), 40, 4, 24, std::span(eps, 1))));
  fs.push_back(must(recipes::trampoline(abi::amd64, next(14), 14, 4, 8, 13)));
  {
    // Large frame (multi-byte ULEB CFA offset) and far rows (advance_loc1/2/4).
    frame_builder b(abi::amd64);
    b.push_frame_pointer(1, 4).stack_alloc(200, 4096).def_cfa(300, reg::sp, 0x12348);
    b.def_cfa(70000, reg::fp, 16).pop_frame_pointer(70001);
    fs.push_back(must(b.finish(next(70002), 70002)));
  }
  {
    // Thread entry: a frame-pointer prologue, then the outermost rule.
    frame_builder c(abi::amd64);
    c.push_frame_pointer(1, 4).undefined(8, reg::ra);
    fs.push_back(must(c.finish(next(12), 12)));
  }
  {
    // PCMASK: 8 trampolines of 16 bytes (sub rsp; call; add rsp; ret), 3 rows per block.
    function_desc f = must(recipes::trampoline(abi::amd64, next(16 * 8), 16, 4, 8, 13));
    f.size = 16 * 8;
    f.pcmask_rep = 16;
    fs.push_back(f);
  }
  {
    // PCMASK with a single row, and a size that is not a multiple of the block.
    function_desc f = must(recipes::leaf(abi::amd64, next(100), 100));
    f.pcmask_rep = 32;
    fs.push_back(f);
  }
  return fs;
}

void check_tool_rows(const std::vector<tool_fde>& got, const std::vector<function_desc>& fs,
                     abi target, const char* tool) {
  std::vector<tool_fde> want;
  for (const function_desc& f : fs)
    for (tool_fde& e : expected_fdes(target, f)) want.push_back(std::move(e));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(tool << " FDE " << i << " [0x" << std::hex << want[i].start << ", 0x" << want[i].end
              << ")\nwant:\n"
              << describe(want[i].rows) << "got:\n"
              << describe(got[i].rows));
    CHECK(got[i].start == want[i].start);
    CHECK(got[i].end == want[i].end);
    CHECK(got[i].rows == want[i].rows);
  }
}

struct encoded_object {
  cfi::sections sections;
  std::vector<function_desc> functions;  // sorted as encoded
};

}  // namespace

TEST_CASE("amd64 shapes: llvm-dwarfdump and readelf print the described rows") {
  if (!tool_available("llvm-dwarfdump-22") || !tool_available("readelf")) return;
  const uint64_t code = 0x7f0000401000, eh = 0x7f0000600000;
  std::vector<function_desc> fs = amd64_shapes(code);
  cfi::encoder_options opt;
  opt.eh_frame_address = eh;
  auto s = cfi::encode(opt, fs);
  REQUIRE(s.ok());
  CHECK(s->eh_frame.size() % 8 == 0);
  CHECK(s->eh_frame_hdr_address == eh + s->eh_frame.size());
  temp_dir dir;
  const std::string obj = dir / "shapes.o";
  write_unwind_object(obj, abi::amd64, code, fs.back().start + fs.back().size, eh, *s);
  check_tool_rows(dwarfdump_fdes(obj, abi::amd64), fs, abi::amd64, "llvm-dwarfdump");
  check_tool_rows(readelf_fdes(obj), fs, abi::amd64, "readelf");
}

TEST_CASE("absolute address encoding reads the same as PC-relative") {
  if (!tool_available("llvm-dwarfdump-22")) return;
  const uint64_t code = 0x401000;
  std::vector<function_desc> fs = amd64_shapes(code);
  cfi::encoder_options opt;
  opt.encoding = cfi::address_encoding::absolute;
  opt.eh_frame_address = 0x900000000;  // far away: absolute FDE addresses do not care
  opt.terminator = true;
  // ...but the header's fields are 32-bit relative: it cannot be built that far from the code.
  CHECK(cfi::encode(opt, fs).error().code() == errc::out_of_range);
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  for (const function_desc& f : fs) REQUIRE(enc->append(f).ok());
  cfi::sections s;
  s.eh_frame = enc->bytes();
  s.eh_frame_hdr_address = opt.eh_frame_address + s.eh_frame.size();
  temp_dir dir;
  const std::string obj = dir / "abs.o";
  write_unwind_object(obj, abi::amd64, code, fs.back().start + fs.back().size, opt.eh_frame_address,
                      s);
  check_tool_rows(dwarfdump_fdes(obj, abi::amd64), fs, abi::amd64, "llvm-dwarfdump");
}

TEST_CASE("aarch64 shapes: llvm-dwarfdump prints the described rows") {
  if (!tool_available("llvm-dwarfdump-22")) return;
  const uint64_t code = 0x10000, eh = 0x80000;
  std::vector<function_desc> fs;
  const recipes::epilogue eps[] = {{12, 16}, {28, 32}};
  fs.push_back(must(recipes::leaf(abi::aarch64_le, code, 16)));
  fs.push_back(must(recipes::frame_pointer(abi::aarch64_le, code + 0x100, 32, 4, 8, eps)));
  {
    frame_builder b(abi::aarch64_le);  // paciasp; stp; mov; ...; ldp; autiasp; ret
    b.negate_ra_state(4).push_frame_pointer(8, 12).pop_frame_pointer(24).negate_ra_state(28);
    fs.push_back(must(b.finish(code + 0x200, 32)));
  }
  {
    frame_builder b(abi::aarch64_le);
    b.undefined(0, reg::ra);
    fs.push_back(must(b.finish(code + 0x300, 8)));
  }
  cfi::encoder_options opt;
  opt.target = abi::aarch64_le;
  opt.eh_frame_address = eh;
  auto s = cfi::encode(opt, fs);
  REQUIRE(s.ok());
  temp_dir dir;
  const std::string obj = dir / "a64.o";
  write_unwind_object(obj, abi::aarch64_le, code, code + 0x308, eh, *s);
  check_tool_rows(dwarfdump_fdes(obj, abi::aarch64_le), fs, abi::aarch64_le, "llvm-dwarfdump");
}

TEST_CASE("random builder programs: llvm-dwarfdump rows equal the function_desc rows") {
  if (!tool_available("llvm-dwarfdump-22")) return;
  std::mt19937 rng(12345);
  std::vector<function_desc> fs;
  uint64_t at = 0x555500001000;
  for (int n = 0; n < 300; ++n) {
    frame_builder b(abi::amd64);
    uint32_t off = 0;
    auto step = [&] { return off += 1 + rng() % (rng() % 8 == 0 ? 400 : 12); };
    const bool fp = rng() % 2;
    if (fp) {
      const uint32_t after_push = step();
      b.push_frame_pointer(after_push, step());
    }
    int depth = 0;
    for (int k = rng() % 6; k > 0; --k) {
      switch (rng() % 4) {
        case 0:
          b.stack_alloc(step(), 8 * (1 + rng() % 64));
          break;
        case 1:
          b.remember_state();
          ++depth;
          break;
        case 2:
          if (depth > 0) {
            if (fp) b.pop_frame_pointer(step());
            b.restore_state(step());
            --depth;
          }
          break;
        default:
          if (!fp) b.adjust_cfa_offset(step(), 8);
          break;
      }
    }
    if (fp) b.pop_frame_pointer(step());
    const uint32_t size = step() + 1;
    auto f = b.finish(at, size);
    INFO("function " << n << ": " << (f.ok() ? "" : f.error().message()));
    REQUIRE(f.ok());
    fs.push_back(*f);
    at += size + rng() % 64;
  }
  cfi::encoder_options opt;
  opt.eh_frame_address = at + 0x100000;
  auto s = cfi::encode(opt, fs);
  REQUIRE(s.ok());
  temp_dir dir;
  const std::string obj = dir / "random.o";
  write_unwind_object(obj, abi::amd64, fs.front().start, at, opt.eh_frame_address, *s);
  check_tool_rows(dwarfdump_fdes(obj, abi::amd64), fs, abi::amd64, "llvm-dwarfdump");
}

TEST_CASE(".eh_frame_hdr table decoded by llvm-readobj is sorted and points at the FDEs") {
  if (!tool_available("llvm-readobj-22")) return;
  const uint64_t code = 0x7f1234500000, eh = 0x7f1234000000;
  std::vector<function_desc> fs = amd64_shapes(code);
  std::reverse(fs.begin(), fs.end());  // append order must not matter for the table
  cfi::encoder_options opt;
  opt.eh_frame_address = eh;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  for (const function_desc& f : fs) REQUIRE(enc->append(f).ok());
  cfi::sections s;
  s.eh_frame = enc->bytes();
  s.eh_frame_hdr_address = eh + 0x10000;
  auto hdr = enc->build_hdr(s.eh_frame_hdr_address);
  REQUIRE(hdr.ok());
  s.eh_frame_hdr = *hdr;
  CHECK(hdr->size() == cfi::eh_frame_hdr_size(enc->fde_count()));
  temp_dir dir;
  const std::string obj = dir / "hdr.o";
  write_unwind_object(obj, abi::amd64, code, code + 0x20000, eh, s);
  uint64_t eh_frame_ptr = 0;
  const std::vector<hdr_entry> entries = readobj_hdr_entries(obj, &eh_frame_ptr);
  CHECK(eh_frame_ptr == eh);
  std::vector<cfi::fde_info> want(enc->fdes().begin(), enc->fdes().end());
  std::sort(want.begin(), want.end(), [](auto& a, auto& b) { return a.start < b.start; });
  REQUIRE(entries.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(entries[i].initial_location == want[i].start);
    CHECK(entries[i].fde_address == eh + want[i].offset);
  }
}

TEST_CASE("relocate: tools read the same rows at the new address") {
  if (!tool_available("llvm-dwarfdump-22")) return;
  const uint64_t code = 0x7f0000401000;
  std::vector<function_desc> fs = amd64_shapes(code);
  cfi::encoder_options opt;
  opt.eh_frame_address = 0x7f0000000000;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  for (const function_desc& f : fs) REQUIRE(enc->append(f).ok());
  const std::vector<uint8_t> before = enc->bytes();
  const uint64_t moved = 0x7f0010000000;
  REQUIRE(enc->relocate(moved).ok());
  const std::vector<uint8_t> after = enc->bytes();
  REQUIRE(before.size() == after.size());
  CHECK(before != after);
  cfi::sections s;
  s.eh_frame = after;
  s.eh_frame_hdr_address = moved + after.size();
  s.eh_frame_hdr = enc->build_hdr(s.eh_frame_hdr_address).value();
  temp_dir dir;
  const std::string obj = dir / "moved.o";
  write_unwind_object(obj, abi::amd64, code, fs.back().start + fs.back().size, moved, s);
  check_tool_rows(dwarfdump_fdes(obj, abi::amd64), fs, abi::amd64, "llvm-dwarfdump");
}

TEST_CASE("pcmask_single_fde: one FDE whose rows repeat per block") {
  if (!tool_available("llvm-dwarfdump-22")) return;
  function_desc f = must(recipes::trampoline(abi::amd64, 0x400000, 16, 4, 8, 13));
  f.size = 16 * 5 + 6;  // a partial last block
  f.pcmask_rep = 16;
  cfi::encoder_options opt;
  opt.eh_frame_address = 0x500000;
  opt.pcmask_single_fde = true;
  auto s = cfi::encode(opt, std::span(&f, 1));
  REQUIRE(s.ok());
  temp_dir dir;
  const std::string obj = dir / "single.o";
  write_unwind_object(obj, abi::amd64, f.start, f.start + f.size, opt.eh_frame_address, *s);
  const std::vector<tool_fde> got = dwarfdump_fdes(obj, abi::amd64);
  REQUIRE(got.size() == 1);
  CHECK(got[0].start == f.start);
  CHECK(got[0].end == f.start + f.size);
  std::vector<frame_row> want;
  for (uint32_t base = 0; base < f.size; base += f.pcmask_rep)
    for (frame_row r : f.rows)
      if (base + r.pc_offset < f.size) {
        r.pc_offset += base;
        want.push_back(r);
      }
  INFO("want:\n" << describe(merged(want)) << "got:\n" << describe(got[0].rows));
  CHECK(got[0].rows == merged(want));
}
