// libFuzzer target: the SFrame v3 decoder. The input is a section whose version byte is forced
// to 3, so that every mutation exercises v3 parsing (index entries, attribute records, FLEX
// words, signal frames, outermost functions) rather than being refused as another version.
// Invariants as in sframe_decode.cpp: check() agrees with decode(), a table answers like the
// decoded model, and what decodes re-encodes as v3 to the same functions.
#include <jitunwind/sframe.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

constexpr uint64_t section_address = 0x7f0000400000;

[[noreturn]] void broken_invariant() {
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() > 2) bytes[2] = version_3;
  auto d = decode(bytes, section_address);
  auto c = check(bytes, section_address);
  if (d.ok() != c.ok()) broken_invariant();
  if (!d.ok()) {
    if (d.error().message() != c.error().message()) broken_invariant();
    return 0;
  }
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
  if (d->info.target == abi::s390x) return 0;  // read as data only
  encoder_options o;
  o.target = d->info.target;
  o.section_address = section_address;
  o.pcrel = (d->info.flags & flag_fde_func_start_pcrel) != 0;
  o.strict = false;
  if (auto again = encode(o, d->functions); again.ok()) {
    auto d2 = decode(*again, section_address);
    if (!d2.ok()) broken_invariant();
    auto sorted = d->functions;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& x, const auto& y) { return x.start < y.start; });
    if (d2->functions != sorted) broken_invariant();
    // FLEX only where a row needs it.
    for (size_t i = 0; i < d2->functions.size(); ++i) {
      bool flex = false;
      for (const auto& r : d2->functions[i].rows) flex |= !default_expressible(o.target, r);
      if ((d2->layout[i].fde_type == 1) != flex) broken_invariant();
    }
  }
  return 0;
}
