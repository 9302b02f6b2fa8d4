// A JIT window as jitwalk loads it from another process: SFrame bytes decoded, every function
// checked against the AMD64 rules, then laid out strictly inside the window's text. Whatever
// the bytes, either an error or rows that stay inside the window and are sorted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "jitwalk/native_tables.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t section = 0x7f0000100000ull;
  const uint64_t text = section - 0x10000 + (uint64_t{data[0]} << 8);
  const uint64_t text_size = 1 + (uint64_t{data[1]} << 8 | data[2]);
  auto fns = jitwalk::sframe_functions({data + 3, size - 3}, section, jitwalk::table_source::jit,
                                       nullptr, true);
  if (!fns) return 0;
  jitwalk::flatten_limits lim;
  lim.lo = text;
  lim.hi = text + text_size;
  lim.strict = true;
  auto rows = jitwalk::flatten(std::move(fns.value()), 0, lim);
  if (!rows) return 0;
  if (rows->start < lim.lo || rows->end > lim.hi) std::abort();
  for (size_t i = 1; i < rows->rows.size(); ++i) {
    if (rows->rows[i].pc_off <= rows->rows[i - 1].pc_off) std::abort();
  }
  return 0;
}
