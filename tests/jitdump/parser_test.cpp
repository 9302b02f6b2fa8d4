// The jitdump parser on hand-made hostile input, and on what the writer produces.
#include "jitdump/jitdump_format.hpp"
#include "jitdump/jitdump_parser.hpp"

#include <catch2/catch.hpp>

#include <cstring>

using namespace jitunwind;
namespace jd = jitunwind::detail::jitdump;

TEST_CASE("parser rejects a file without a jitdump header") {
  std::vector<uint8_t> small(10, 0);
  CHECK(jd::parse(small).error().code() == errc::malformed);
}
