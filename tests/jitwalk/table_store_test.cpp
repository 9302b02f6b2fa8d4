// The double-buffered range index and the row slot allocator, driven on plain memory; lookups
// use the same search the BPF program does.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include "jitwalk/table_store.hpp"

using namespace jitwalk;

namespace {

struct fake_maps {
  std::vector<jw_row> rows;
  std::vector<jw_range> ranges = std::vector<jw_range>(2 * JW_RANGE_CAP);
  jw_ctl ctl{};
  explicit fake_maps(size_t nrows) : rows(nrows) {}
  table_views views() {
    table_views v;
    v.rows = rows;
    v.ranges = ranges;
    v.ctl = &ctl;
    return v;
  }
  // Lookups in address space `asid` (the walker's tagged search key).
  const jw_row* lookup_in(uint32_t asid, uint64_t pc, const jw_range** r = nullptr) const {
    return lookup(asid_key(asid, pc), r);
  }

  // walker.bpf.c's find_range + find_row, transcribed.
  const jw_row* lookup(uint64_t pc, const jw_range** range_out = nullptr) const {
    const uint32_t active = ctl.active & 1, n = ctl.nranges[active];
    const jw_range* base = ranges.data() + (active ? JW_RANGE_CAP : 0);
    uint32_t lo = 0, hi = n;
    for (int i = 0; i < JW_RANGE_SEARCH_STEPS && lo < hi; ++i) {
      uint32_t mid = lo + (hi - lo) / 2;
      if (base[mid].start <= pc)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo == 0) return nullptr;
    const jw_range& r = base[lo - 1];
    if (pc < r.start || pc >= r.end) return nullptr;
    if (range_out) *range_out = &r;
    const uint32_t off = static_cast<uint32_t>(pc - r.start);
    lo = 0;
    hi = r.row_count;
    for (int i = 0; i < JW_ROW_SEARCH_STEPS && lo < hi; ++i) {
      uint32_t mid = lo + (hi - lo) / 2;
      if (rows[r.row_first + mid].pc_off <= off)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo ? &rows[r.row_first + lo - 1] : nullptr;
  }
};

range_rows make(uint64_t start, uint64_t end, std::vector<int32_t> cfa_offs) {
  range_rows r;
  r.start = start;
  r.end = end;
  uint32_t step = static_cast<uint32_t>((end - start) / cfa_offs.size());
  for (size_t i = 0; i < cfa_offs.size(); ++i) {
    jw_row row{};
    row.pc_off = static_cast<uint32_t>(i) * step;
    row.kind = JW_ROW_CFA_SP;
    row.cfa_off = cfa_offs[i];
    r.rows.push_back(row);
  }
  return r;
}

range_info info(const char* label, uint64_t window = 0) {
  range_info i;
  i.label = label;
  i.window_id = window;
  i.source = window ? table_source::jit : table_source::sframe;
  return i;
}

}  // namespace

TEST_CASE("ranges become visible at commit, in the inactive half, sorted") {
  fake_maps m(64);
  table_store t(m.views());
  auto a = t.add(make(0x3000, 0x3100, {8, 16}), info("a"));
  auto b = t.add(make(0x1000, 0x1100, {8, 24, 8}), info("b"));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(m.lookup(0x1000) == nullptr);  // not committed
  REQUIRE(t.commit().ok());
  CHECK(m.ctl.active == 1);
  CHECK(m.ctl.nranges[1] == 2);
  CHECK(m.ranges[JW_RANGE_CAP].start == 0x1000);
  CHECK(m.lookup(0x1000)->cfa_off == 8);
  CHECK(m.lookup(0x1060)->cfa_off == 24);
  CHECK(m.lookup(0x10ff)->cfa_off == 8);
  CHECK(m.lookup(0x1100) == nullptr);
  CHECK(m.lookup(0x3090)->cfa_off == 16);
  CHECK(m.lookup(0x2000) == nullptr);
  const jw_range* r = nullptr;
  m.lookup(0x3000, &r);
  REQUIRE(r != nullptr);
  CHECK(r->uid == a.value());
}

TEST_CASE("rows of a removed range are reused only after no half references them") {
  fake_maps m(8);
  table_store t(m.views());
  auto a = t.add(make(0x1000, 0x1400, {8, 16, 24, 32}), info("a"));
  REQUIRE(t.commit().ok());  // half 1 = {a} in slots 0..3
  const uint64_t seq0 = m.ctl.seq[0], seq1 = m.ctl.seq[1];
  t.remove(a.value());
  auto c = t.add(make(0x5000, 0x5400, {40, 48, 56, 64}), info("c"));
  REQUIRE(t.commit().ok());  // half 0 = {c}; half 1 still points at a's slots
  CHECK(m.ctl.active == 0);
  CHECK(m.ctl.seq[0] == seq0 + 1);  // the rewritten half was invalidated first
  const jw_range* rc = nullptr;
  REQUIRE(m.lookup(0x5000, &rc) != nullptr);
  CHECK(rc->row_first == 4);  // not a's slots: a walk on half 1 may still read them
  CHECK(m.rows[0].cfa_off == 8);
  // A walk that read half 1 before the flip still finds a's rows intact.
  m.ctl.active = 1;
  CHECK(m.lookup(0x1100)->cfa_off == 16);
  m.ctl.active = 0;
  // Now a's slots are free: the next commit rewrites half 1 (bumping its sequence) first.
  t.remove(c.value());
  auto d = t.add(make(0x7000, 0x7400, {72, 80, 88, 96}), info("d"));
  REQUIRE(d.ok());
  REQUIRE(t.commit().ok());
  CHECK(m.ctl.seq[1] == seq1 + 1);
  const jw_range* rd = nullptr;
  REQUIRE(m.lookup(0x7000, &rd) != nullptr);
  CHECK(rd->row_first == 0);
  CHECK(m.lookup(0x5000) == nullptr);
  CHECK(m.lookup(0x1000) == nullptr);
}

TEST_CASE("the newest description of an address range wins") {
  fake_maps m(32);
  table_store t(m.views());
  auto old_gen = t.add(make(0x1000, 0x2000, {8}), info("window 1 gen 1", 1));
  REQUIRE(t.commit().ok());
  auto new_gen = t.add(make(0x1000, 0x2000, {16}), info("window 1 gen 2", 1));
  REQUIRE(t.commit().ok());
  CHECK(t.info(old_gen.value()) == nullptr);
  CHECK(t.info(new_gen.value()) != nullptr);
  CHECK(m.lookup(0x1800)->cfa_off == 16);
  CHECK(m.ctl.nranges[m.ctl.active] == 1);
}

TEST_CASE("a full row table is reported and nothing partial is published") {
  fake_maps m(4);
  table_store t(m.views());
  REQUIRE(t.add(make(0x1000, 0x1300, {8, 16, 24}), info("fits")).ok());
  REQUIRE(t.add(make(0x2000, 0x2300, {8, 16, 24}), info("too much")).ok());
  auto r = t.commit();
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("too much"));
  CHECK(m.lookup(0x1000) != nullptr);
  CHECK(m.lookup(0x2000) == nullptr);
  CHECK(t.stats().ranges == 1);
}

TEST_CASE("one object's rows are placed once and shared by the processes mapping it") {
  fake_maps m(16);
  table_store t(m.views());
  // Three processes (address spaces) map the same object part at different addresses.
  range_info a = info("/usr/bin/node");
  a.shared_rows = "node part 1";
  a.asid = 0;
  REQUIRE(t.add(make(0x1000, 0x1400, {8, 16, 24, 32}), a).ok());
  range_info b = a, c = a;
  b.asid = 1;
  c.asid = 2;
  CHECK(t.has_shared("node part 1"));
  auto rb = t.add_shared(0x7000, 0x7400, b);
  auto rc = t.add_shared(0x9000, 0x9400, c);
  REQUIRE(rb.ok());
  REQUIRE(rc.ok());
  CHECK_FALSE(t.add_shared(0x9000, 0x9400,
                           [] {
                             range_info x = info("other");
                             x.shared_rows = "not loaded";
                             return x;
                           }())
                  .ok());
  REQUIRE(t.commit().ok());
  CHECK(t.stats().rows_used == 4);  // one copy, three ranges
  CHECK(t.stats().shared_ranges == 2);
  CHECK(t.stats().shared_rows_saved == 8);
  const jw_range *r0 = nullptr, *r2 = nullptr;
  REQUIRE(m.lookup_in(0, 0x1100, &r0) != nullptr);
  REQUIRE(m.lookup_in(2, 0x9100, &r2) != nullptr);
  CHECK(r0->row_first == r2->row_first);
  CHECK(m.lookup_in(2, 0x9100)->cfa_off == 16);
  CHECK(m.lookup_in(1, 0x1100) == nullptr);  // its own addresses only
  // The rows stay while one range uses them; then their slots are freed and reused.
  t.remove(rb.value());
  t.remove_if([](const range_info& i) { return i.asid == 0; });
  REQUIRE(t.commit().ok());
  CHECK(m.lookup_in(2, 0x93ff)->cfa_off == 32);
  CHECK(t.has_shared("node part 1"));
  t.remove(rc.value());
  CHECK_FALSE(t.has_shared("node part 1"));
  REQUIRE(t.commit().ok());
  REQUIRE(t.add(make(0x2000, 0x2c00, std::vector<int32_t>(12, 8)), info("after")).ok());
  REQUIRE(t.commit().ok());  // 12 + 4 would not fit in 16 slots had the shared rows stayed
  CHECK(m.lookup(0x2b00) != nullptr);
}

TEST_CASE("a full row array grows, keeping every row at its index") {
  fake_maps m(8);
  table_views v = m.views();
  size_t grown_to = 0;
  v.grow = [&](size_t n) -> jitunwind::result<std::span<jw_row>> {
    grown_to = n;
    m.rows.resize(n);  // a copy at the same indexes, as bpf_session::grow_rows makes
    return std::span<jw_row>(m.rows);
  };
  table_store t(v);
  REQUIRE(t.add(make(0x1000, 0x1600, {8, 16, 24, 32, 40, 48}), info("first")).ok());
  REQUIRE(t.commit().ok());
  REQUIRE(t.add(make(0x3000, 0x3a00, std::vector<int32_t>(10, 56)), info("second")).ok());
  REQUIRE(t.commit().ok());
  CHECK(grown_to == 18);  // twice the size, or the size plus the rows wanted if more (8 + 10)
  CHECK(t.stats().grown == 1);
  CHECK(t.stats().rows_capacity == 18);
  CHECK(m.lookup(0x1500)->cfa_off == 48);
  CHECK(m.lookup(0x3900)->cfa_off == 56);
  // A range larger than the array: grown by what it needs.
  REQUIRE(t.add(make(0x8000, 0x8000 + 40 * 16, std::vector<int32_t>(40, 64)), info("big")).ok());
  REQUIRE(t.commit().ok());
  CHECK(grown_to == 18 + 40);
  CHECK(m.lookup(0x8100)->cfa_off == 64);
  // An array that cannot grow says why.
  v.grow = [](size_t) -> jitunwind::result<std::span<jw_row>> {
    return jitunwind::error(jitunwind::errc::io_error, "no memory for it");
  };
  fake_maps small(4);
  table_views sv = small.views();
  sv.grow = v.grow;
  table_store fixed(sv);
  REQUIRE(fixed.add(make(0x1000, 0x1600, {8, 16, 24, 32, 40, 48}), info("six")).ok());
  auto r = fixed.commit();
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("six") && Catch::Contains("no memory for it"));
}

TEST_CASE("many ranges: every lookup agrees with a linear search") {
  fake_maps m(1 << 16);
  table_store t(m.views());
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (uint64_t i = 0; i < 3000; ++i) {
    uint64_t s = 0x100000 + i * 0x300 + (i % 7) * 16;
    spans.emplace_back(s, s + 0x100 + (i % 5) * 0x40);
    REQUIRE(
        t.add(make(s, spans.back().second, {8, static_cast<int32_t>(16 + 8 * (i % 9))}), info("r"))
            .ok());
  }
  REQUIRE(t.commit().ok());
  for (uint64_t pc = 0x100000 - 0x100; pc < 0x100000 + 3000 * 0x300 + 0x400; pc += 37) {
    bool inside = false;
    for (const auto& [s, e] : spans) inside |= pc >= s && pc < e;
    CHECK((m.lookup(pc) != nullptr) == inside);
  }
}
#endif
