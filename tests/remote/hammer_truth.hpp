// Ground truth shared by the registry hammer's writer (tests/remote/hammer_test.cpp) and its
// out-of-process reader (helpers/hammer_reader.cpp). Each window's "SFrame" is a buffer that
// starts with this record, written by the writer before the entry points to it and re-marked
// (retired / stale) only after the entry changed. Entries also carry redundant fields: in every
// published state text_size and sframe_size are functions of (window_id, text_start), so a torn
// entry is caught even without reading the buffer.
#pragma once

#include <cstdint>

namespace jitunwind::test::hammer {

inline constexpr uint64_t id_base = uint64_t{1} << 32;    // hammer windows: id_base + n
inline constexpr uint64_t magic = 0x48414d4d45525452ull;  // "HAMMERTR"
inline constexpr uint64_t marker_live = 1, marker_retired = 2, marker_stale = 3;
inline constexpr uint64_t buffer_size = 256;

inline uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 32);
}
inline uint64_t text_size_for(uint64_t id, uint64_t text) {
  return 0x1000 + mix(id, text) % 0x1000;
}
inline uint64_t sframe_size_for(uint64_t id, uint64_t text) {
  return 64 + (mix(text, id) % (buffer_size - 64 + 1));
}

struct truth {
  uint64_t magic;
  uint64_t marker;
  uint64_t window_id;
  uint64_t text_start;
  uint64_t text_size;
  uint64_t sframe_size;
  uint64_t version;
  uint64_t checksum;
};
static_assert(sizeof(truth) == 64);

inline uint64_t checksum_of(const truth& t) {
  return mix(mix(mix(t.window_id, t.text_start), mix(t.text_size, t.sframe_size)), t.version);
}

}  // namespace jitunwind::test::hammer
