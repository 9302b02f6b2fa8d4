// The name rule every publisher applies (common/names.hpp): the block-wise scan must agree with
// the byte-wise rule for every length, position and byte value, including the overlapping last
// block and names that end right at a page boundary.
#include <jitunwind/toolkit/names.hpp>

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <string>

using namespace jitunwind::toolkit;

TEST_CASE("the control-byte scan agrees with the byte rule at every length and position") {
  for (size_t len = 0; len <= 70; ++len) {
    std::string name(len, 'a');
    CHECK_FALSE(has_control_bytes(name));
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        name[at] = static_cast<char>(b);
        const bool expected = is_control_byte(static_cast<unsigned char>(b));
        if (has_control_bytes(name) != expected) {
          FAIL_CHECK("length " << len << ", byte 0x" << std::hex << b << std::dec << " at " << at
                               << ": scan says " << !expected);
        }
      }
      name[at] = 'a';
    }
  }
}

TEST_CASE("copy_sanitized replaces exactly the control bytes") {
  const std::string in = std::string("js:f\n") + '\x7f' + "\xc3\xa9" + '\x1f' + " (a.js:1)\t";
  std::string out(in.size(), '\0');
  copy_sanitized(out.data(), in);
  CHECK(out == "js:f??\xc3\xa9? (a.js:1)?");
}

TEST_CASE("the scan reads no byte past the name (it ends at an unmapped page)") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  REQUIRE(mprotect(p + page, page, PROT_NONE) == 0);
  for (size_t len = 0; len <= 40; ++len) {
    char* name = p + page - len;
    std::memset(name, 'x', len);
    CHECK_FALSE(has_control_bytes(std::string_view(name, len)));
    CHECK_FALSE(has_control_bytes_by_words(std::string_view(name, len)));
    if (len > 0) {
      name[len - 1] = '\n';
      CHECK(has_control_bytes(std::string_view(name, len)));
      CHECK(has_control_bytes_by_words(std::string_view(name, len)));
    }
  }
  munmap(p, 2 * page);
}
