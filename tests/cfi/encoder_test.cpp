// Encoder behaviour that needs no external tool: errors, limits, layout invariants.
#include <jitunwind/cfi.h>

#include <catch2/catch.hpp>

using namespace jitunwind;

namespace {

function_desc leaf_at(uint64_t start, uint32_t size) {
  return recipes::leaf(abi::amd64, start, size).value();
}

}  // namespace

TEST_CASE("encoder rejects what it cannot encode, with clear errors") {
  cfi::encoder_options opt;
  opt.target = abi::aarch64_be;
  auto be = cfi::encoder::create(opt);
  REQUIRE_FALSE(be.ok());
  CHECK(be.error().code() == errc::unsupported);
  CHECK_THAT(be.error().message(), Catch::Contains("big-endian"));

  opt.target = static_cast<abi>(9);
  CHECK(cfi::encoder::create(opt).error().code() == errc::invalid_argument);

  opt.target = abi::amd64;
  opt.eh_frame_address = 0x1000;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  const size_t cie_only = enc->size();

  // Invalid rows are rejected through validate(); nothing is appended.
  function_desc bad = leaf_at(0x2000, 16);
  bad.rows[0].cfa_offset = 12;
  auto r = enc->append(bad);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::invalid_argument);
  CHECK_THAT(r.error().message(), Catch::Contains("multiple of 8"));
  CHECK(enc->size() == cie_only);

  // A PC-relative start 4 GiB away does not fit.
  auto far = enc->append(leaf_at(0x100002000, 16));
  REQUIRE_FALSE(far.ok());
  CHECK(far.error().code() == errc::out_of_range);
  CHECK_THAT(far.error().message(), Catch::Contains("0x100002000"));
  CHECK(enc->size() == cie_only);
  CHECK(enc->fde_count() == 0);
}

TEST_CASE("SFrame v3 rules: those naming registers are refused by name, an RA offset is not") {
  cfi::encoder_options opt;
  opt.eh_frame_address = 0x1000;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  const size_t cie_only = enc->size();
  function_desc drap = leaf_at(0x2000, 16);
  frame_row r = drap.rows[0];
  r.pc_offset = 4;
  r.cfa = cfa_base::reg;  // CFA = r10 + 0
  r.cfa_reg = 10;
  r.cfa_offset = 0;
  drap.rows.push_back(r);
  auto refused = enc->append(drap);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == errc::unsupported);
  CHECK_THAT(refused.error().message(), Catch::Contains("row 1 (offset 4) uses an SFrame v3 rule"));
  CHECK(enc->size() == cie_only);
  // RA saved at CFA-16 (a v3 FLEX row in SFrame) is an ordinary DW_CFA_offset here.
  function_desc ra16 = leaf_at(0x3000, 16);
  frame_row s = ra16.rows[0];
  s.pc_offset = 4;
  s.cfa_offset = 24;
  s.ra_offset = -16;
  ra16.rows.push_back(s);
  CHECK(enc->append(ra16).ok());
}

TEST_CASE("overlapping functions cannot get a header table") {
  cfi::encoder_options opt;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  REQUIRE(enc->append(leaf_at(0x1000, 32)).ok());
  REQUIRE(enc->append(leaf_at(0x1010, 32)).ok());
  auto hdr = enc->build_hdr(0x2000);
  REQUIRE_FALSE(hdr.ok());
  CHECK(hdr.error().code() == errc::invalid_argument);
  CHECK_THAT(hdr.error().message(), Catch::Contains("overlap"));
}

TEST_CASE("PCMASK expansion respects the FDE limit and rolls back") {
  cfi::encoder_options opt;
  opt.max_fdes_per_function = 4;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  function_desc tramp = recipes::trampoline(abi::amd64, 0x1000, 16, 4, 8, 13).value();
  tramp.pcmask_rep = 16;
  tramp.size = 16 * 4;
  REQUIRE(enc->append(tramp).ok());
  CHECK(enc->fde_count() == 4);
  const size_t before = enc->size();
  tramp.start = 0x2000;
  tramp.size = 16 * 5;
  auto r = enc->append(tramp);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::limit_exceeded);
  CHECK(enc->size() == before);
  CHECK(enc->fde_count() == 4);
}

TEST_CASE("layout: CIE then 8-byte aligned FDEs, optional terminator, hdr size") {
  cfi::encoder_options opt;
  opt.eh_frame_address = 0x10000;
  opt.terminator = true;
  auto enc = cfi::encoder::create(opt);
  REQUIRE(enc.ok());
  REQUIRE(enc->append(leaf_at(0x1000, 16)).ok());
  REQUIRE(enc->append(leaf_at(0x1010, 16)).ok());
  const std::vector<uint8_t> b = enc->bytes();
  CHECK(b.size() == enc->size());
  CHECK((b.size() - 4) % 8 == 0);
  CHECK(std::vector<uint8_t>(b.end() - 4, b.end()) == std::vector<uint8_t>(4, 0));
  REQUIRE(enc->fdes().size() == 2);
  CHECK(enc->fdes()[0].offset % 8 == 0);
  CHECK(enc->fdes()[1].offset % 8 == 0);
  auto hdr = enc->build_hdr(0x20000);
  REQUIRE(hdr.ok());
  CHECK(hdr->size() == cfi::eh_frame_hdr_size(2));
  auto far = enc->build_hdr(0x900000000);
  REQUIRE_FALSE(far.ok());
  CHECK(far.error().code() == errc::out_of_range);
}
