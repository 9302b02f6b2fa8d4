// The binutils vectors (../shared/sframe-vectors, see support/sframe_vectors.hpp) as oracle:
// every section made by binutils 2.40 (v1), 2.41-2.45 (v2) and 2.46 (v3) decodes to exactly the
// rows that binutils' own objdump printed, our v3 encoder reproduces gas 2.46's bytes, and the
// versions agree with each other where they can express the same rows.
#include <jitunwind/sframe.h>

#include "support/sframe_vectors.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <map>

using namespace jitunwind;
using namespace jitunwind::sframe;
using jitunwind::test::sframe_vector;

namespace {

std::string show(const frame_row& r) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "{pc %u cfa %d/r%u%s%+d ra %d/r%u%+d%s fp %d/r%u%+d}", r.pc_offset,
                static_cast<int>(r.cfa), r.cfa_reg, r.cfa_deref ? " deref" : "", r.cfa_offset,
                static_cast<int>(r.ra), r.ra_reg, r.ra_offset, r.ra_mangled ? " mangled" : "",
                static_cast<int>(r.fp), r.fp_reg, r.fp_offset);
  return buf;
}

std::vector<sframe_vector> vectors() {
  auto dir = jitunwind::test::sframe_vectors_dir();
  if (!dir) return {};
  return jitunwind::test::load_sframe_vectors(*dir);
}

// The encoder settings that reproduce a decoded section: its version, ABI, address and flags.
encoder_options options_for(const decoded_section& d, uint64_t base, uint8_t version) {
  encoder_options o;
  o.target = d.info.target;
  o.version = version;
  o.section_address = base;
  o.pcrel = (d.info.flags & flag_fde_func_start_pcrel) != 0;
  if (version == version_2) o.frame_pointer = (d.info.flags & flag_frame_pointer) != 0;
  o.strict = false;  // gas's rows, e.g. "FP saved" kept after the epilogue
  return o;
}

result<std::vector<uint8_t>> reencode(const decoded_section& d, uint64_t base, uint8_t version) {
  auto enc = encoder::create(options_for(d, base, version));
  if (!enc) return enc.error();
  for (const function_desc& f : d.functions)
    if (auto r = enc->append(f); !r) return r.error();
  return enc->bytes();
}

}  // namespace

TEST_CASE("every binutils SFrame vector decodes to the rows its objdump printed") {
  const auto all = vectors();
  if (all.empty()) return;
  size_t sections = 0, empty = 0, rows = 0;
  std::map<int, size_t> per_version;
  for (const sframe_vector& v : all) {
    INFO(v.name);
    const auto oracle = jitunwind::test::parse_objdump_sframe(v.groundtruth);
    if (v.content.empty()) {
      // gas emitted no section; objdump printed none, and we say so instead of decoding.
      CHECK(!oracle.has_value());
      auto d = decode(v.content, v.section_base);
      REQUIRE(!d.ok());
      CHECK(d.error().message() == "sframe: empty section (0 bytes): there is no SFrame data");
      ++empty;
      continue;
    }
    REQUIRE(oracle.has_value());
    auto d = decode(v.content, v.section_base);
    INFO((d.ok() ? std::string() : d.error().message()));
    REQUIRE(d.ok());
    REQUIRE(check(v.content, v.section_base).ok());
    CHECK(d->info.version == oracle->version);
    CHECK(d->info.num_fdes == oracle->num_fdes);
    CHECK(d->info.num_fres == oracle->num_fres);
    if (oracle->fixed_ra != 0) CHECK(d->info.cfa_fixed_ra_offset == oracle->fixed_ra);
    CHECK(((d->info.flags & flag_fde_sorted) != 0) ==
          (std::find(oracle->flags.begin(), oracle->flags.end(), "SFRAME_F_FDE_SORTED") !=
           oracle->flags.end()));
    REQUIRE(d->functions.size() == oracle->functions.size());
    for (size_t i = 0; i < d->functions.size(); ++i) {
      const function_desc& f = d->functions[i];
      const auto& of = oracle->functions[i];
      INFO("function " << i);
      CHECK(f.start == of.pc);
      CHECK(f.size == of.size);
      CHECK(f.signal_frame == of.signal);
      CHECK((d->layout[i].fde_type == 1) == of.flex);
      CHECK((f.pauth_key == 1) == of.pauth_b);
      CHECK((f.pcmask_rep != 0) == of.pcmask);
      REQUIRE(f.rows.size() == of.rows.size());
      for (size_t j = 0; j < f.rows.size(); ++j) {
        std::string why;
        auto want = jitunwind::test::oracle_to_row(d->info.target, of, of.rows[j], why);
        INFO("row " << j << " objdump: " << of.rows[j].cfa << " " << of.rows[j].fp << " "
                    << of.rows[j].ra << " " << why);
        REQUIRE(want.has_value());
        INFO("ours " << show(f.rows[j]) << " objdump's " << show(*want));
        CHECK(f.rows[j] == *want);
        ++rows;
      }
    }
    ++sections;
    ++per_version[d->info.version];
  }
  std::printf(
      "SFrame vectors: %zu sections (v1 %zu, v2 %zu, v3 %zu), %zu rows equal to objdump's; "
      "%zu without a section\n",
      sections, per_version[1], per_version[2], per_version[3], rows, empty);
  CHECK(per_version[3] > 0);
}

// ld 2.46 sorts a linked section's index entries by address but leaves each function's
// attribute record and FREs where the input objects put them, so the records are not in index
// order; our encoder writes them in index order. The same section with the records moved into
// index order (and the index's record offsets updated) is what we must produce exactly.
std::vector<uint8_t> records_in_index_order(const std::vector<uint8_t>& bytes,
                                            const decoded_section& d) {
  const size_t fre_base = 28 + d.info.fre_off;
  std::vector<uint8_t> out(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(fre_base));
  for (size_t i = 0; i < d.layout.size(); ++i) {
    const fde_layout& l = d.layout[i];
    const auto at = static_cast<uint32_t>(out.size() - fre_base);
    std::memcpy(out.data() + 28 + i * 16 + 12, &at, 4);  // x86-64 vectors: little-endian
    const auto from = bytes.begin() + static_cast<ptrdiff_t>(fre_base + l.attr_offset);
    out.insert(out.end(), from, from + 5 + l.fre_bytes);
  }
  return out;
}

TEST_CASE("our v3 encoder reproduces every binutils 2.46 section byte for byte") {
  const auto all = vectors();
  if (all.empty()) return;
  size_t exact = 0;
  std::vector<std::string> reordered;
  for (const sframe_vector& v : all) {
    if (v.content.empty() || v.content[2] != version_3) continue;
    INFO(v.name);
    auto d = decode(v.content, v.section_base);
    REQUIRE(d.ok());
    auto bytes = reencode(*d, v.section_base, version_3);
    INFO((bytes.ok() ? std::string() : bytes.error().message()));
    REQUIRE(bytes.ok());
    bool in_order = true;
    for (size_t i = 1; i < d->layout.size(); ++i)
      in_order &= d->layout[i].attr_offset > d->layout[i - 1].attr_offset;
    if (in_order) {
      CHECK(*bytes == v.content);
      ++exact;
    } else {
      CHECK(*bytes == records_in_index_order(v.content, *d));
      reordered.push_back(v.name);
    }
  }
  std::printf(
      "SFrame v3 vectors re-encoded byte for byte: %zu; equal once ld's record order is "
      "replaced by index order: %zu\n",
      exact, reordered.size());
  for (const auto& n : reordered) std::printf("  %s\n", n.c_str());
  // The only ones: the linked multi-object programs (docs/sframe.md, "Byte-exact").
  CHECK(reordered == std::vector<std::string>{"test-fp-x86_64-2.46", "test-x86_64-2.46"});
  CHECK(exact == 29);
}

// The same test program assembled by binutils 2.40 (v1), 2.41-2.45 (v2) and 2.46 (v3): every
// function that two versions both describe (same start: the programs link at the same
// addresses, or all shifted alike) has the same size and rows wherever the older version can
// express the newer one's rows. A newer ld describing more functions (ld 2.44 adds an FDE for
// .plt.got) is counted, not a disagreement.
TEST_CASE("the versions of one test program agree wherever they can express the same rows") {
  const auto all = vectors();
  if (all.empty()) return;
  std::map<std::string, std::vector<const sframe_vector*>> by_stem;
  for (const auto& v : all)
    if (!v.content.empty() && !v.binutils.empty()) by_stem[v.stem].push_back(&v);
  size_t pairs = 0, functions = 0, not_expressible = 0, only_one = 0;
  std::vector<std::string> differing;
  for (const auto& [stem, vs] : by_stem) {
    for (size_t a = 0; a + 1 < vs.size(); ++a) {
      const sframe_vector& older = *vs[a];
      const sframe_vector& newer = *vs[a + 1];
      auto da = decode(older.content, older.section_base);
      auto db = decode(newer.content, newer.section_base);
      REQUIRE(da.ok());
      REQUIRE(db.ok());
      INFO(older.name << " vs " << newer.name);
      ++pairs;
      std::map<uint64_t, const function_desc*> by_start;
      for (const auto& f : da->functions) by_start[f.start] = &f;
      // Usually linked at the same addresses; otherwise (AArch64 2.43 -> 2.44) the whole text
      // moved: match with the shift of the first functions.
      uint64_t shift = 0;
      bool any = false;
      for (const function_desc& fb : db->functions) any |= by_start.count(fb.start) != 0;
      if (!any && !da->functions.empty() && !db->functions.empty())
        shift = db->functions.front().start - da->functions.front().start;
      size_t common = 0;
      for (const function_desc& fb : db->functions) {
        auto it = by_start.find(fb.start - shift);
        if (it == by_start.end()) {
          ++only_one;
          continue;
        }
        ++common;
        const function_desc& fa = *it->second;
        bool expressible = !fb.signal_frame;
        for (const auto& r : fb.rows) expressible &= default_expressible(db->info.target, r);
        if (!expressible) {
          ++not_expressible;
          continue;
        }
        ++functions;
        if (!(fa.size == fb.size && fa.rows == fb.rows && fa.pcmask_rep == fb.pcmask_rep &&
              fa.pauth_key == fb.pauth_key))
          differing.push_back(older.name + " vs " + newer.name + ": function at " +
                              std::to_string(fb.start));
      }
      only_one += da->functions.size() - common;
      CHECK(common > 0);
    }
  }
  std::printf(
      "SFrame vectors across versions: %zu pairs, %zu functions equal, %zu described "
      "by one version only, %zu the older version cannot express\n",
      pairs, functions, only_one, not_expressible);
  for (const auto& d : differing) std::printf("  differs: %s\n", d.c_str());
  CHECK(pairs > 20);
  CHECK(differing == std::vector<std::string>{});
}
