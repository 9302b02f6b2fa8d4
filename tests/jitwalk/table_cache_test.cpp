// The build-ID cache of converted native tables: a second get is served from the file, equal to
// a fresh conversion at any load bias; corrupted, truncated or foreign files and an unsafe
// directory are refused, never used.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <sys/stat.h>

#include "jitwalk/table_cache.hpp"
#include "support/process.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace jitwalk;

namespace {

struct object_part {
  std::shared_ptr<elf_file> obj;
  uint64_t lo = 0, hi = 0;
};

// jitwalk's own executable: built here with a build ID and .eh_frame.
object_part jitwalk_text() {
  auto obj = elf_file::open(jitunwind::test::binary_path("bpf/jitwalk"));
  REQUIRE(obj.ok());
  const auto* text = obj.value()->image().find_section(".text");
  REQUIRE(text != nullptr);
  REQUIRE(!obj.value()->build_id().empty());
  return {obj.value(), text->addr, text->addr + text->size};
}

std::string only_file(const std::string& dir) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    REQUIRE(found.empty());
    found = e.path().string();
  }
  REQUIRE(!found.empty());
  return found;
}

}  // namespace

TEST_CASE("a cached native table equals a fresh conversion, at any load bias") {
  jitunwind::test::temp_dir tmp;
  const object_part p = jitwalk_text();
  const native_policy policy;
  table_cache cache(tmp.path() + "/cache");
  REQUIRE(cache.enabled());
  for (uint64_t bias : {uint64_t{0}, uint64_t{0x7f0000000000}}) {
    auto fresh = build_native_table(*p.obj, bias, p.lo + bias, p.hi + bias, policy);
    REQUIRE(fresh.ok());
    auto build = [&] { return build_native_table(*p.obj, bias, p.lo + bias, p.hi + bias, policy); };
    bool from_cache = true;
    auto got = cache.get(*p.obj, bias, p.lo + bias, p.hi + bias, policy, build, &from_cache);
    REQUIRE(got.ok());
    CHECK(from_cache == (bias != 0));  // the first get converts and stores
    CHECK(got->rows.start == fresh->rows.start);
    CHECK(got->rows.end == fresh->rows.end);
    CHECK(got->eh_frame_functions == fresh->eh_frame_functions);
    REQUIRE(got->rows.rows.size() == fresh->rows.rows.size());
    CHECK(std::memcmp(got->rows.rows.data(), fresh->rows.rows.data(),
                      fresh->rows.rows.size() * sizeof(jw_row)) == 0);
  }
  CHECK(cache.stats().written == 1);
  CHECK(cache.stats().hits == 1);
}

TEST_CASE("corrupted, truncated and foreign cache files are refused and rewritten") {
  jitunwind::test::temp_dir tmp;
  const object_part p = jitwalk_text();
  const native_policy policy;
  const std::string dir = tmp.path() + "/cache";
  table_cache cache(dir);
  auto build = [&] { return build_native_table(*p.obj, 0, p.lo, p.hi, policy); };
  REQUIRE(cache.get(*p.obj, 0, p.lo, p.hi, policy, build).ok());
  const std::string file = only_file(dir);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const table_cache_key key = cache_key_of(*p.obj, 0, p.lo, p.hi, policy);
  auto span = [](const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  REQUIRE(decode_cached_table(span(bytes), key, 0).ok());

  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x40;  // a row
  CHECK(!decode_cached_table(span(flipped), key, 0).ok());
  CHECK(!decode_cached_table(span(bytes.substr(0, bytes.size() - 16)), key, 0).ok());
  CHECK(!decode_cached_table(span(bytes.substr(0, 40)), key, 0).ok());
  table_cache_key other = key;
  other.build_id[0] = other.build_id[0] == 'a' ? 'b' : 'a';
  CHECK(!decode_cached_table(span(bytes), other, 0).ok());
  other = key;
  other.converter += "0";  // another jitwalk build
  CHECK(!decode_cached_table(span(bytes), other, 0).ok());
  other = key;
  other.eh_frame_size += 8;
  CHECK(!decode_cached_table(span(bytes), other, 0).ok());
  other = key;
  other.hi += 0x1000;
  CHECK(!decode_cached_table(span(bytes), other, 0).ok());

  // On disk: the corrupted file is rebuilt (same rows as before), then served again.
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << flipped;
  }
  bool from_cache = true;
  auto again = cache.get(*p.obj, 0, p.lo, p.hi, policy, build, &from_cache);
  REQUIRE(again.ok());
  CHECK(!from_cache);
  CHECK(cache.stats().rejected == 1);
  auto third = cache.get(*p.obj, 0, p.lo, p.hi, policy, build, &from_cache);
  REQUIRE(third.ok());
  CHECK(from_cache);
}

TEST_CASE("a cache directory others can write is not used") {
  jitunwind::test::temp_dir tmp;
  const std::string dir = tmp.path() + "/shared";
  REQUIRE(mkdir(dir.c_str(), 0700) == 0);
  REQUIRE(chmod(dir.c_str(), 0777) == 0);
  table_cache cache(dir);
  CHECK(!cache.enabled());
  CHECK(cache.problem().find("writable by others") != std::string::npos);
  CHECK(!table_cache(tmp.path() + "/missing/deeper/cache").enabled());
}
#endif
