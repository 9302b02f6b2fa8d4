// libFuzzer target: the jitdump parser must never read out of bounds, crash or loop on any input,
// and every span it returns must lie inside the input.
#include "jitdump/jitdump_parser.hpp"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  jitunwind::detail::jitdump::parse_limits limits;
  limits.max_records = 100000;
  auto r = jitunwind::detail::jitdump::parse(std::span(data, size), limits);
  if (!r.ok()) return 0;
  const auto inside = [&](std::span<const uint8_t> s) {
    return s.empty() || (s.data() >= data && s.data() + s.size() <= data + size);
  };
  uint64_t end = r->header.total_size;
  for (const auto& rec : r->records) {
    if (!inside(rec.code) || !inside(rec.eh_frame) || !inside(rec.eh_frame_hdr) ||
        rec.file_offset != end || rec.total_size < 16)
      std::abort();
    end += rec.total_size;
  }
  if (end + r->truncated_tail != size) std::abort();
  return 0;
}
