#include "kernel/registration_check.hpp"

#include "common/error.hpp"

#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

namespace jitunwind::detail::kernel {

namespace {

using ull = unsigned long long;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;  // the kernel reads its own byte order; a foreign-endian magic fails check 5
}

std::optional<registration_failure> fail(registration_check c, std::string detail) {
  return registration_failure{
      c, format("check %u (%s): %s", static_cast<unsigned>(c), to_string(c), detail.c_str())};
}

const vma* containing(std::span<const vma> maps, uint64_t start, uint64_t end) {
  for (const vma& m : maps)
    if (m.start <= start && end <= m.end) return &m;
  return nullptr;
}

}  // namespace

const char* to_string(registration_check c) noexcept {
  switch (c) {
    case registration_check::nonzero:
      return "non-zero addresses";
    case registration_check::sframe_mapping:
      return "section in one mapping";
    case registration_check::text_mapping:
      return "text in one executable mapping";
    case registration_check::text_overlap:
      return "no overlap with a registered text";
    case registration_check::header:
      return "magic and version 3";
    case registration_check::sorted:
      return "FDE_SORTED";
    case registration_check::pcrel:
      return "FDE_FUNC_START_PCREL";
    case registration_check::flags:
      return "no undefined flags";
    case registration_check::aux_header:
      return "no auxiliary header";
    case registration_check::counts:
      return "at least one FDE and one FRE";
    case registration_check::subsections:
      return "sub-sections in bounds";
    case registration_check::fde_order:
      return "FDE starts strictly increasing";
    case registration_check::fde_in_text:
      return "functions inside the text";
    case registration_check::fre_bounds:
      return "FREs inside the FRE sub-section";
    case registration_check::fre_order:
      return "FRE starts strictly increasing";
  }
  return "unknown";
}

result<std::vector<vma>> read_own_mappings() {
  std::ifstream in("/proc/self/maps");
  if (!in) return make_error(errc::io_error, "kernel checks: cannot read /proc/self/maps");
  std::vector<vma> out;
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long a = 0, b = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %4s", &a, &b, perms) != 3) continue;
    out.push_back({a, b, perms[0] == 'r', perms[2] == 'x'});
  }
  return out;
}

std::optional<registration_failure> check_registration(uint64_t sframe_address,
                                                       std::span<const uint8_t> section,
                                                       uint64_t text_start, uint64_t text_size,
                                                       std::span<const vma> mappings,
                                                       std::span<const text_range> registered) {
  using c = registration_check;
  const uint64_t size = section.size();
  const uint64_t text_end = text_start + text_size;
  if (sframe_address == 0 || size == 0 || text_start == 0 || text_size == 0 ||
      sframe_address + size < sframe_address || text_end < text_start)
    return fail(c::nonzero, format("section 0x%llx+0x%llx, text 0x%llx+0x%llx", ull(sframe_address),
                                   ull(size), ull(text_start), ull(text_size)));
  const vma* sm = containing(mappings, sframe_address, sframe_address + size);
  if (sm == nullptr || !sm->readable)
    return fail(c::sframe_mapping, format("[0x%llx, 0x%llx) is not inside one readable mapping",
                                          ull(sframe_address), ull(sframe_address + size)));
  const vma* tm = containing(mappings, text_start, text_end);
  if (tm == nullptr || !tm->executable)
    return fail(c::text_mapping, format("[0x%llx, 0x%llx) is not inside one executable mapping",
                                        ull(text_start), ull(text_end)));
  for (const text_range& r : registered)
    if (text_start < r.end && r.start < text_end)
      return fail(c::text_overlap,
                  format("[0x%llx, 0x%llx) overlaps the registered [0x%llx, 0x%llx)",
                         ull(text_start), ull(text_end), ull(r.start), ull(r.end)));

  const uint8_t* b = section.data();
  constexpr uint64_t header = 28;
  if (size < header || load<uint16_t>(b) != 0xdee2 || b[2] != 3)
    return fail(c::header, size < header
                               ? format("%llu bytes, less than a header", ull(size))
                               : format("magic bytes %02x %02x, version %u", b[0], b[1], b[2]));
  const uint8_t flags = b[3];
  if ((flags & 0x1) == 0) return fail(c::sorted, format("flags 0x%02x lack 0x01", flags));
  if ((flags & 0x4) == 0) return fail(c::pcrel, format("flags 0x%02x lack 0x04", flags));
  if (flags & ~0x5)
    return fail(c::flags, format("flags 0x%02x have bits 0x%02x", flags, flags & ~0x5));
  if (b[7] != 0) return fail(c::aux_header, format("auxiliary header of %u bytes", b[7]));
  const uint32_t num_fdes = load<uint32_t>(b + 8), num_fres = load<uint32_t>(b + 12);
  const uint32_t fre_len = load<uint32_t>(b + 16), fde_off = load<uint32_t>(b + 20);
  const uint32_t fre_off = load<uint32_t>(b + 24);
  if (num_fdes == 0 || num_fres == 0)
    return fail(c::counts, format("%u FDEs, %u FREs", num_fdes, num_fres));
  const uint64_t body = size - header;
  const uint64_t fde_bytes = uint64_t{num_fdes} * 16;
  if (fde_off > body || fde_bytes > body - fde_off || fre_off > body || fre_len > body - fre_off ||
      (fde_off < uint64_t{fre_off} + fre_len && fre_off < fde_off + fde_bytes))
    return fail(c::subsections,
                format("%u index entries at %u, %u FRE bytes at %u, %llu bytes after the header",
                       num_fdes, fde_off, fre_len, fre_off, ull(body)));

  const uint8_t* fres = b + header + fre_off;
  uint64_t prev_start = 0, fre_total = 0;
  for (uint32_t i = 0; i < num_fdes; ++i) {
    const uint64_t at = header + fde_off + uint64_t{i} * 16;
    const uint64_t start = sframe_address + at + load<uint64_t>(b + at);
    const uint32_t fsize = load<uint32_t>(b + at + 8);
    const uint32_t attr = load<uint32_t>(b + at + 12);
    if (i > 0 && start <= prev_start)
      return fail(c::fde_order, format("function %u at 0x%llx does not come after 0x%llx", i,
                                       ull(start), ull(prev_start)));
    prev_start = start;
    if (start < text_start || start + fsize > text_end || start + fsize < start)
      return fail(c::fde_in_text, format("function %u [0x%llx, +%u) is outside the text "
                                         "[0x%llx, 0x%llx)",
                                         i, ull(start), fsize, ull(text_start), ull(text_end)));
    if (uint64_t{attr} + 5 > fre_len)
      return fail(c::fre_bounds,
                  format("function %u: attribute record at %u past %u bytes", i, attr, fre_len));
    const uint16_t n = load<uint16_t>(fres + attr);
    const uint8_t info = fres[attr + 2], type = fres[attr + 3] & 0x1f;
    const unsigned aw = (info & 0xf) == 0 ? 1 : (info & 0xf) == 1 ? 2 : (info & 0xf) == 2 ? 4 : 0;
    if (aw == 0 || type > 1)
      return fail(c::fre_bounds,
                  format("function %u: FRE type %u, FDE type %u", i, info & 0xf, type));
    const uint32_t rep = fres[attr + 4];
    const uint32_t limit = (info & 0x10) ? rep : fsize;
    uint64_t pos = uint64_t{attr} + 5;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < n; ++j) {
      if (pos + aw + 1 > fre_len)
        return fail(c::fre_bounds,
                    format("function %u: FRE %u at %llu past %u bytes", i, j, ull(pos), fre_len));
      uint32_t fre_start = fres[pos];
      if (aw == 2) fre_start = load<uint16_t>(fres + pos);
      if (aw == 4) fre_start = load<uint32_t>(fres + pos);
      const uint8_t fi = fres[pos + aw];
      const unsigned ws = ((fi >> 5) & 3) == 0 ? 1 : ((fi >> 5) & 3) == 1 ? 2 : 4;
      const uint64_t len = aw + 1 + uint64_t{(fi >> 1) & 0xfu} * ws;
      if (((fi >> 5) & 3) == 3 || pos + len > fre_len)
        return fail(c::fre_bounds,
                    format("function %u: FRE %u (info 0x%02x) past %u bytes", i, j, fi, fre_len));
      if ((j > 0 && fre_start <= prev) || fre_start >= limit)
        return fail(c::fre_order, format("function %u: FRE %u starts at %u (previous %u, "
                                         "function or block of %u bytes)",
                                         i, j, fre_start, prev, limit));
      prev = fre_start;
      pos += len;
    }
    fre_total += n;
  }
  if (fre_total != num_fres)
    return fail(c::fre_bounds, format("the functions have %llu FREs, the header says %u",
                                      ull(fre_total), num_fres));
  return std::nullopt;
}

}  // namespace jitunwind::detail::kernel
