// libFuzzer target: the SFrame v3 decoder. The input is a section whose version byte is forced
// to 3, so that every mutation exercises v3 parsing (index entries, attribute records, FLEX
// words, signal frames, outermost functions) rather than being refused as another version.
// Invariants as in sframe_decode.cpp: check() agrees with decode(), a table answers like the
// decoded model, and what decodes re-encodes as v3 to the same functions.
#include <jitunwind/sframe.h>

#include "sframe_invariants.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::sframe;
using namespace sframe_fuzz;

namespace {

constexpr uint64_t section_address = 0x7f0000400000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() > 2) bytes[2] = version_3;
  auto d = decode_agreeing(bytes, section_address);
  if (!d) return 0;
  if (d->info.version != version_3) broken_invariant();
  auto t = table::create(bytes, section_address);
  if (t.ok()) {
    for (const auto& f : d->functions) {
      for (uint64_t pc : {f.start, f.start + f.size / 2, f.start + f.size - 1}) {
        if (f.size == 0) continue;
        lookup_result r;
        if (!t->find(pc, r)) continue;  // a PC before the first row, or another function's
        if (r.function_start > pc || pc - r.function_start >= r.function_size) broken_invariant();
      }
    }
  }
  if (auto d2 = reencode_agreeing(*d, section_address)) {
    // FLEX only where a row needs it.
    for (size_t i = 0; i < d2->functions.size(); ++i) {
      bool flex = false;
      for (const auto& r : d2->functions[i].rows) flex |= !default_expressible(d->info.target, r);
      if ((d2->layout[i].fde_type == 1) != flex) broken_invariant();
    }
  }
  return 0;
}
