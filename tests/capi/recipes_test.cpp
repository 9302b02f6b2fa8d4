#include <catch2/catch.hpp>

#include <jitunwind/c/embed.h>
#include <jitunwind/frame.h>

#include <vector>

extern "C" int capi_c_recipes(jitunwind_frame_row out[4][16], size_t counts[4]);

using namespace jitunwind;

TEST_CASE("capi recipes: the C recipes give the C++ recipes' rows") {
  jitunwind_frame_row rows[4][16] = {};
  size_t counts[4] = {};
  REQUIRE(capi_c_recipes(rows, counts) == 0);
  const std::vector<recipes::epilogue> one{{29, 30}};
  const result<function_desc> expected[4] = {
      recipes::leaf(abi::amd64, 0x1000, 32),
      recipes::frame_pointer(abi::amd64, 0x1000, 32, 1, 4, one),
      recipes::sp_frame(abi::amd64, 0x1000, 32, 4, 24, one),
      recipes::trampoline(abi::amd64, 0x1000, 32, 4, 8, 29),
  };
  for (int i = 0; i < 4; ++i) {
    INFO("recipe " << i);
    REQUIRE(expected[i].ok());
    REQUIRE(counts[i] == expected[i]->rows.size());
    for (size_t r = 0; r < counts[i]; ++r) {
      const frame_row& e = expected[i]->rows[r];
      CHECK(rows[i][r].pc_offset == e.pc_offset);
      CHECK(rows[i][r].cfa_base == static_cast<uint8_t>(e.cfa));
      CHECK(rows[i][r].cfa_offset == e.cfa_offset);
      CHECK(rows[i][r].ra_rule == static_cast<uint8_t>(e.ra));
      CHECK(rows[i][r].fp_rule == static_cast<uint8_t>(e.fp));
      CHECK(rows[i][r].fp_offset == e.fp_offset);
    }
  }
}
