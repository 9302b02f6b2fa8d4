// The encoder reuses the instructions of the previous plain function when the next one has the
// same rows (and skips re-validating them). These tests check that this shortcut changes
// neither the bytes nor any error.
#include <jitunwind/cfi.h>

#include "sframe/gen.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

using namespace jitunwind;

namespace {

// FDE `i`'s bytes (length field included).
std::vector<uint8_t> fde_bytes(const cfi::encoder& e, size_t i) {
  const std::vector<uint8_t> all = e.bytes();
  const size_t at = e.fdes()[i].offset;
  uint32_t length = 0;
  std::memcpy(&length, all.data() + at, 4);
  return {all.begin() + static_cast<ptrdiff_t>(at),
          all.begin() + static_cast<ptrdiff_t>(at + 4 + length)};
}

}  // namespace

TEST_CASE("functions sharing their rows get the FDEs they get when encoded alone") {
  for (abi a : {abi::amd64, abi::aarch64_le}) {
    for (auto enc_kind : {cfi::address_encoding::pcrel_sdata4, cfi::address_encoding::absolute}) {
      test::frame_gen g(a, 99 + static_cast<int>(a));
      cfi::encoder_options o;
      o.target = a;
      o.encoding = enc_kind;
      o.eh_frame_address = 0x7f0000000000ull;
      std::vector<function_desc> fs;
      uint64_t at = 0x7f0000100000ull;
      for (int t = 0; t < 40; ++t) {
        function_desc tmpl = g.function(0);
        if (tmpl.size > 100000) continue;  // keep PCMASK expansions small
        const int run = static_cast<int>(g.pick(1, 5));
        for (int k = 0; k < run; ++k) {
          function_desc f = tmpl;
          f.start = at;
          if (f.pcmask_rep == 0 && k % 2 == 1) f.size += g.pick(0, 300);  // same rows, longer
          fs.push_back(f);
          at += f.size + g.pick(0, 64);
        }
      }
      auto all = cfi::encoder::create(o);
      REQUIRE(all.ok());
      for (const auto& f : fs) REQUIRE(all->append(f).ok());
      size_t fde = 0;
      for (size_t i = 0; i < fs.size(); ++i) {
        // A fresh encoder placed so that its first FDE lands where function i's FDE is.
        const size_t first = fde;
        cfi::encoder_options alone_o = o;
        auto probe = cfi::encoder::create(o);
        REQUIRE(probe.ok());
        const size_t cie = probe->size();
        alone_o.eh_frame_address = o.eh_frame_address + all->fdes()[first].offset - cie;
        auto alone = cfi::encoder::create(alone_o);
        REQUIRE(alone.ok());
        REQUIRE(alone->append(fs[i]).ok());
        INFO(to_string(a) << " function " << i << " rep " << fs[i].pcmask_rep);
        for (size_t k = 0; k < alone->fde_count(); ++k, ++fde) {
          auto got = fde_bytes(*all, fde);
          auto want = fde_bytes(*alone, k);
          REQUIRE(got.size() == want.size());
          // Bytes 4..7 point back to the CIE: they differ by the FDE's offset.
          std::fill(got.begin() + 4, got.begin() + 8, 0);
          std::fill(want.begin() + 4, want.begin() + 8, 0);
          CHECK(got == want);
        }
      }
      CHECK(fde == all->fde_count());
    }
  }
}

TEST_CASE("a function shaped like the previous one still gets every error") {
  cfi::encoder_options o;
  o.eh_frame_address = 0x7f0000000000ull;
  const recipes::epilogue ep{20, 22};
  auto first = recipes::frame_pointer(abi::amd64, 0x7f0000001000ull, 22, 1, 4, std::span(&ep, 1));
  REQUIRE(first.ok());
  auto enc = cfi::encoder::create(o);
  REQUIRE(enc.ok());
  REQUIRE(enc->append(*first).ok());
  const auto before = enc->bytes();
  const auto expect_error = [&](const function_desc& f, const char* what) {
    INFO(what);
    auto fresh = cfi::encoder::create(o);
    REQUIRE(fresh.ok());
    auto want = fresh->append(f);
    REQUIRE_FALSE(want.ok());
    auto got = enc->append(f);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().message() == want.error().message());
    CHECK(enc->bytes() == before);
  };
  function_desc f = *first;
  f.start = 0x7f0000002000ull;
  f.size = 20;  // the epilogue's row (offset 20) is now past the end
  expect_error(f, "row past the end");
  f.size = 0;
  expect_error(f, "size 0");
  f = *first;
  f.start = std::numeric_limits<uint64_t>::max() - 10;
  expect_error(f, "wraps");
  f = *first;
  f.start = 0x900000000000ull;  // out of the PC-relative reach (the message names the FDE's
                                // address, which depends on what came before)
  {
    auto got = enc->append(f);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code() == errc::out_of_range);
    CHECK_THAT(got.error().message(), Catch::Contains("0x900000000000 is more than 2 GiB away"));
    CHECK(enc->bytes() == before);
  }
  // The same shape is still encoded afterwards, and clear() keeps it usable.
  f = *first;
  f.start = 0x7f0000003000ull;
  REQUIRE(enc->append(f).ok());
  CHECK(enc->fde_count() == 2);
  enc->clear(o.eh_frame_address);
  REQUIRE(enc->append(*first).ok());
  CHECK(enc->bytes().size() == before.size());
  CHECK(enc->bytes() == before);
}
