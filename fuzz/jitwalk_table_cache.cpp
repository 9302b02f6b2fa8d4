// jitwalk's native table cache files (table_cache.hpp) on arbitrary bytes: decoded with a key
// taken from the bytes themselves (so the header checks are passed often), and rows built from
// the bytes encoded with a valid checksum, then truncated or with one byte flipped (so the row
// checks behind the checksum are reached too). Nothing may crash; what decodes must be valid.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "jitwalk/table_cache.hpp"

using namespace jitwalk;

namespace {

void check_decoded(std::span<const uint8_t> bytes, const table_cache_key& key) {
  auto t = decode_cached_table(bytes, key, 0x1000);
  if (!t) return;
  if (t->rows.rows.empty() || t->rows.start >= t->rows.end) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  table_cache_key key;
  key.build_id = "0123456789abcdef";
  key.converter = "fedcba9876543210";
  std::memcpy(&key.lo, data, 4);
  key.hi = key.lo + (uint64_t{1} << 20);
  key.policy = 3;
  check_decoded({data, size}, key);

  // Rows from the bytes, encoded validly, then damaged at a chosen place.
  native_table t;
  const size_t n = (size - 8) / sizeof(jw_row);
  t.rows.rows.resize(n);
  if (n) std::memcpy(t.rows.rows.data(), data + 8, n * sizeof(jw_row));
  t.rows.start = key.lo + 0x10;
  t.rows.end = key.lo + 0x10 + (data[4] | (data[5] << 8)) + 1;
  const std::string enc = encode_cached_table(key, t, 0);
  std::string damaged = enc;
  const size_t at = (data[6] | (data[7] << 8)) % (damaged.size() + 1);
  if (data[6] & 1) {
    damaged.resize(at);
  } else if (at < damaged.size()) {
    damaged[at] = static_cast<char>(damaged[at] ^ data[7]);
  }
  for (const std::string* s : {&enc, static_cast<const std::string*>(&damaged)}) {
    check_decoded({reinterpret_cast<const uint8_t*>(s->data()), s->size()}, key);
  }
  return 0;
}
