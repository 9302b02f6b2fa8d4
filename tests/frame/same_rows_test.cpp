// detail::same_rows (the encoders' shape-cache comparison) agrees with operator== for row lists
// that differ in any single field, or in length.
#include <jitunwind/frame.h>

#include "frame/row_rules.hpp"

#include <catch2/catch.hpp>

#include <functional>

using namespace jitunwind;

TEST_CASE("same_rows agrees with operator== on every field") {
  const recipes::epilogue ep{20, 22};
  const function_desc f =
      recipes::frame_pointer(abi::amd64, 0x1000, 30, 1, 4, std::span(&ep, 1)).value();
  const std::vector<frame_row>& base = f.rows;
  CHECK(detail::same_rows(base, base));
  std::vector<frame_row> shorter(base.begin(), base.end() - 1);
  CHECK_FALSE(detail::same_rows(base, shorter));
  CHECK(detail::same_rows({}, {}));
  const std::function<void(frame_row&)> mutations[] = {
      [](frame_row& r) { r.pc_offset ^= 1u << 31; },
      [](frame_row& r) { r.cfa = r.cfa == cfa_base::sp ? cfa_base::fp : cfa_base::sp; },
      [](frame_row& r) { r.cfa_offset += 8; },
      [](frame_row& r) { r.cfa_offset ^= 1 << 30; },
      [](frame_row& r) { r.ra = ra_rule::in_register; },
      [](frame_row& r) { r.ra_offset -= 8; },
      [](frame_row& r) { r.fp = r.fp == fp_rule::saved ? fp_rule::unchanged : fp_rule::saved; },
      [](frame_row& r) { r.fp_offset -= 8; },
      [](frame_row& r) { r.ra_mangled = !r.ra_mangled; },
  };
  for (size_t i = 0; i < base.size(); ++i) {
    for (size_t m = 0; m < std::size(mutations); ++m) {
      std::vector<frame_row> other = base;
      mutations[m](other[i]);
      INFO("row " << i << " mutation " << m);
      REQUIRE(other != base);
      CHECK_FALSE(detail::same_rows(base, other));
      CHECK_FALSE(detail::same_rows(other, base));
    }
  }
}
