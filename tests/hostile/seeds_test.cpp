// The seeds of fuzz/elf_reader.cpp (fuzz/corpus/elf_reader/) are small versions of the hostile
// objects of these tests: this test keeps them so. JITUNWIND_WRITE_FUZZ_SEEDS=1 writes them.
#include "support/hostile_elf.hpp"
#include "support/process.hpp"

#include <jitunwind/frame.h>
#include <jitunwind/sframe.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

using namespace jitunwind;
using namespace jitunwind::test;
using namespace jitunwind::test::hostile;

namespace {

std::map<std::string, std::vector<uint8_t>> seeds() {
  const std::vector<function_desc> leaf = {recipes::leaf(abi::amd64, 0x1000, 16).value()};
  sframe::encoder_options o;
  o.section_address = 0x1000;
  const std::vector<uint8_t> sframe = sframe::encode(o, leaf).value();
  std::map<std::string, std::vector<uint8_t>> out;
  out["shared-section-names"] = shared_section_names(200, 1000);
  out["symbol-tables"] = many_symbol_tables({40, 30, sframe, 5});
  const std::vector<uint8_t> spin = {0xB9, 0x40, 0x0D, 0x03, 0x00, 0xFF, 0xC9, 0x75, 0xFC, 0xC3};
  auto whole = truncatable(spin, 60);
  out["truncatable"] = whole;
  // The same object cut as the target cuts it: its tables and section headers gone.
  out["truncated"] = std::vector<uint8_t>(whole.begin(), whole.begin() + truncatable_keep);
  return out;
}

}  // namespace

TEST_CASE("the ELF reader's fuzz seeds are the hostile shapes of these tests") {
  const std::string dir = source_path("fuzz/corpus/elf_reader");
  const bool write = std::getenv("JITUNWIND_WRITE_FUZZ_SEEDS") != nullptr;
  for (const auto& [name, bytes] : seeds()) {
    INFO(name);
    const std::string path = dir + "/" + name;
    const std::string text(bytes.begin(), bytes.end());
    if (write) REQUIRE(write_file(path, text));
    const bool same = read_file(path) == text;  // (not printed: binary)
    CHECK(same);
  }
}
