// Re-encoding a section as another SFrame version (jitunwind sframe convert, the kernel
// publisher's v3 copies of v2 windows).
#include <jitunwind/sframe.h>

#include "common/error.hpp"

#include <vector>

namespace jitunwind::sframe {

using jitunwind::detail::make_error;

result<std::vector<uint8_t>> convert(std::span<const uint8_t> bytes, uint64_t section_address,
                                     const encoder_options& options) {
  auto d = decode(bytes, section_address);
  if (!d) return std::move(d).error();
  if (d->info.target == abi::s390x)
    return make_error(errc::unsupported,
                      "sframe: s390x sections are read as data only; they cannot be re-encoded");
  encoder_options o = options;
  o.target = d->info.target;
  o.strict = false;
  // A function without rows means "outermost frame" in v3 and nothing at all before: keep the
  // meaning, not the shape.
  const bool from_v3 = d->info.version >= version_3, to_v3 = o.version >= version_3;
  if (from_v3 && !to_v3) {
    for (function_desc& f : d->functions)
      if (f.rows.empty()) f.rows.push_back(outermost_row(0));
  } else if (!from_v3 && to_v3) {
    std::erase_if(d->functions, [](const function_desc& f) { return f.rows.empty(); });
  }
  return encode(o, d->functions);
}

}  // namespace jitunwind::sframe
