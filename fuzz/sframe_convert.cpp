// libFuzzer target: sframe::convert (what `jitunwind sframe convert` and the kernel publisher's
// v3 copies use) on any section. Whatever converts to v3 decodes to the same functions; whatever
// converts to v2 decodes to them too (a v3 function without rows as one outermost row), and
// converting that back to v3 is stable.
#include <jitunwind/sframe.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

using namespace jitunwind;
using namespace jitunwind::sframe;

namespace {

constexpr uint64_t in_address = 0x400000;
constexpr uint64_t out_address = 0x401000;  // a move the v2 reach always allows for the seeds

[[noreturn]] void broken_invariant() {
  std::abort();
}

std::vector<function_desc> sorted_functions(std::vector<function_desc> fs) {
  std::stable_sort(fs.begin(), fs.end(),
                   [](const auto& x, const auto& y) { return x.start < y.start; });
  return fs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto d = decode(bytes, in_address);
  for (uint8_t version : {version_3, version_2}) {
    encoder_options o;
    o.version = version;
    o.section_address = out_address;
    o.allow_flex = (size & 1) == 0;  // both settings
    auto out = convert(bytes, in_address, o);
    if (!d.ok()) {
      if (out.ok()) broken_invariant();  // nothing converts what does not decode
      continue;
    }
    if (!out.ok()) continue;  // refused: not expressible, out of reach, or overlapping input
    auto back = decode(*out, out_address);
    if (!back.ok() || back->info.version != version) broken_invariant();
    auto want = sorted_functions(d->functions);
    const bool from_v3 = d->info.version >= version_3;
    if (version == version_2 && from_v3)
      for (auto& f : want)
        if (f.rows.empty()) f.rows.push_back(outermost_row(0));
    if (version == version_3 && !from_v3)
      std::erase_if(want, [](const function_desc& f) { return f.rows.empty(); });
    if (version == version_2)
      for (auto& f : want) f.signal_frame = false;  // refused above if it was set
    if (back->functions != want) broken_invariant();
    if (!o.allow_flex)
      for (const auto& l : back->layout)
        if (l.fde_type != 0) broken_invariant();
    // And back to v3 again: the same functions.
    encoder_options v3;
    v3.section_address = in_address;
    auto again = convert(*out, out_address, v3);
    if (!again.ok()) {
      // Only a v2 function of more than 65535 rows cannot be v3.
      if (again.error().code() != errc::invalid_argument) broken_invariant();
      continue;
    }
    auto d3 = decode(*again, in_address);
    auto want3 = back->functions;
    if (version == version_2)
      std::erase_if(want3, [](const function_desc& f) { return f.rows.empty(); });
    if (!d3.ok() || d3->functions != want3) broken_invariant();
  }
  return 0;
}
