// The perf map publisher's index of named ranges (the "reused address" warning): the same answers
// as a map start -> largest end, for the orders in which runtimes name code.
#include "perfmap/named_ranges.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <random>

using namespace jitunwind::detail;

namespace {

// The definition: the range with the largest start <= s if it reaches past s, else the next
// one if it begins before e; then [s, e) is recorded (the largest end per start).
class reference {
 public:
  std::optional<named_ranges::range> add(uint64_t s, uint64_t e) {
    std::optional<named_ranges::range> earlier;
    auto next = m_.upper_bound(s);
    if (next != m_.begin() && std::prev(next)->second > s) earlier = *std::prev(next);
    if (!earlier && next != m_.end() && next->first < e) earlier = *next;
    uint64_t& end = m_[s];
    end = std::max(end, e);
    return earlier;
  }

 private:
  std::map<uint64_t, uint64_t> m_;
};

// Windows of `per_window` functions of 80 bytes every 256, placed in `window_order`; every
// range checked against the reference.
void same_answers(const std::vector<uint64_t>& window_order, size_t per_window,
                  size_t& warnings, size_t& runs) {
  named_ranges index;
  reference ref;
  warnings = 0;
  for (uint64_t w : window_order) {
    for (size_t i = 0; i < per_window; ++i) {
      const uint64_t s = 0x10000000 + w * per_window * 256 + i * 256;
      const auto got = index.add(s, s + 80);
      const auto want = ref.add(s, s + 80);
      REQUIRE(got == want);
      warnings += got.has_value();
    }
  }
  runs = index.runs();
}

}  // namespace

TEST_CASE("named ranges: windows named upwards, downwards, interleaved and reused") {
  size_t warnings = 0, runs = 0;
  SECTION("upwards: one run, nothing reused") {
    same_answers({0, 1, 2, 3, 4, 5}, 100, warnings, runs);
    CHECK(warnings == 0);
    CHECK(runs == 1);
  }
  SECTION("downwards (mmap's order): one run per window, nothing reused") {
    same_answers({5, 4, 3, 2, 1, 0}, 100, warnings, runs);
    CHECK(warnings == 0);
    CHECK(runs == 6);
  }
  SECTION("a window between two named before: the run is split once") {
    same_answers({0, 2, 1}, 100, warnings, runs);
    CHECK(warnings == 0);
    CHECK(runs == 2);
  }
  SECTION("a range named again: every line of the reused window warns") {
    same_answers({0, 1, 2, 1, 0}, 50, warnings, runs);
    CHECK(warnings == 100);
  }
}

TEST_CASE("named ranges: random ranges give the reference's answers") {
  std::mt19937_64 rng(33);
  for (int round = 0; round < 20; ++round) {
    named_ranges index;
    reference ref;
    const uint64_t span = round % 2 == 0 ? 4096 : 1 << 20;
    for (int i = 0; i < 2000; ++i) {
      const uint64_t s = rng() % span;
      const uint64_t e = s + 1 + rng() % 64;
      REQUIRE(index.add(s, e) == ref.add(s, e));
    }
  }
}
