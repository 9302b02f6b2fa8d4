// jitwalk's .eh_frame reader on arbitrary bytes: parse, then lay the functions out as the BPF
// walker's rows. Nothing may read out of bounds, loop forever or produce rows past a function.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "jitwalk/ehframe.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t vaddr = 0;
  for (int i = 0; i < 8; ++i) vaddr |= uint64_t{data[i]} << (8 * i);
  vaddr &= 0x0000fffffffff000ull;
  auto r = jitwalk::parse_eh_frame({data + 8, size - 8}, vaddr);
  if (!r) return 0;
  for (const auto& f : r->functions) {
    for (const auto& row : f.rows) {
      if (row.pc_off >= f.size) std::abort();
    }
  }
  auto rows = jitwalk::flatten(r->functions, 0);
  if (rows) {
    for (size_t i = 1; i < rows->rows.size(); ++i) {
      if (rows->rows[i].pc_off <= rows->rows[i - 1].pc_off) std::abort();
    }
  }
  return 0;
}
