// The GDB JIT registrar without gdb: the in-memory objects (read by readelf / llvm-dwarfdump),
// the descriptor list, and which descriptor is chosen.
#include "gdbjit/gdbjit.hpp"

#include "../cfi/tool_rows.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <regex>

using namespace jitunwind;
using namespace jitunwind::detail;
using namespace jitunwind::test;

extern "C" gdbjit::jit_descriptor __jit_debug_descriptor;

namespace {

std::vector<gdbjit::jit_code_entry*> list_of(const gdbjit::jit_descriptor& d) {
  std::vector<gdbjit::jit_code_entry*> out;
  for (auto* e = d.first_entry; e != nullptr; e = e->next_entry) {
    REQUIRE((e->next_entry == nullptr || e->next_entry->prev_entry == e));
    out.push_back(e);
    REQUIRE(out.size() < 10000);
  }
  if (!out.empty()) CHECK(out.front()->prev_entry == nullptr);
  return out;
}

function_desc fp_rows(uint64_t start) {
  const recipes::epilogue ep[] = {{21, 22}};
  return recipes::frame_pointer(abi::amd64, start, 22, 1, 4, ep).value();
}

}  // namespace

TEST_CASE("the object: NOBITS .text at the code, symbols, non-ALLOC .eh_frame with our rows") {
  if (!tool_available("readelf") || !tool_available("llvm-dwarfdump-22")) return;
  const uint64_t a = 0x7f0000010000, b = 0x7f0000010100;
  const function_desc fa = fp_rows(a);
  const function_desc fb = recipes::leaf(abi::amd64, b, 16).value();
  const gdbjit::function_symbol syms[] = {
      {"jit_b\n", b, 16, &fb}, {"jit_a", a, 22, &fa}, {"no_rows", b + 0x40, 8, nullptr}};
  auto obj = gdbjit::build_object(abi::amd64, syms);
  REQUIRE(obj.ok());
  temp_dir dir;
  const std::string path = dir / "obj.o";
  REQUIRE(write_file(path, std::string(obj->begin(), obj->end())));

  const run_result sections = run({"readelf", "-SW", path});
  REQUIRE(sections.exit_code == 0);
  static const std::regex text_re(R"(\.text\s+NOBITS\s+00007f0000010000 [0-9a-f]+ 000148 00\s+AX)");
  static const std::regex eh_re(R"(\.eh_frame\s+PROGBITS\s+0+ [0-9a-f]+ [0-9a-f]+ 00\s+0\s)");
  INFO(sections.out);
  CHECK(std::regex_search(sections.out, text_re));
  CHECK(std::regex_search(sections.out, eh_re));  // no flags: not SHF_ALLOC

  const run_result symbols = run({"readelf", "-sW", path});
  REQUIRE(symbols.exit_code == 0);
  INFO(symbols.out);
  // ET_REL: values are offsets into .text (which starts at 0x7f0000010000).
  CHECK(std::regex_search(symbols.out,
                          std::regex(R"(0000000000000000\s+22 FUNC\s+GLOBAL DEFAULT\s+1 jit_a)")));
  CHECK(std::regex_search(
      symbols.out, std::regex(R"(0000000000000100\s+16 FUNC\s+GLOBAL DEFAULT\s+1 jit_b\?)")));
  CHECK(std::regex_search(symbols.out,
                          std::regex(R"(0000000000000140\s+8 FUNC\s+GLOBAL DEFAULT\s+1 no_rows)")));

  const std::vector<tool_fde> fdes = dwarfdump_fdes(path, abi::amd64);
  REQUIRE(fdes.size() == 2);  // no FDE for the function without rows
  CHECK(fdes[0].start == a);
  CHECK(fdes[0].rows == merged(fa.rows));
  CHECK(fdes[1].start == b);
  CHECK(fdes[1].rows == merged(fb.rows));
}

TEST_CASE("bad batches are rejected") {
  const function_desc f = fp_rows(0x1000);
  const gdbjit::function_symbol empty_name[] = {{"", 0x1000, 22, nullptr}};
  CHECK(gdbjit::build_object(abi::amd64, empty_name).error().code() == errc::invalid_argument);
  const gdbjit::function_symbol zero[] = {{"z", 0x1000, 0, nullptr}};
  CHECK(gdbjit::build_object(abi::amd64, zero).error().code() == errc::invalid_argument);
  const gdbjit::function_symbol mismatch[] = {{"m", 0x1004, 22, &f}};
  auto r = gdbjit::build_object(abi::amd64, mismatch);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("0x1000") && Catch::Contains("0x1004"));
  CHECK(gdbjit::build_object(abi::amd64, {}).error().code() == errc::invalid_argument);
  CHECK(gdbjit::build_object(abi::aarch64_be, zero).error().code() == errc::unsupported);
}

TEST_CASE("registrations keep the descriptor list complete and unlink in O(1) from anywhere") {
  auto r = gdbjit::registrar::create({});
  REQUIRE(r.ok());
  gdbjit::registrar& reg = **r;
  // In this statically linked test nothing else defines the symbols: ours is the global one.
  CHECK(reg.descriptor().policy == gdbjit::descriptor_policy::own);
  CHECK(reg.descriptor().used == &__jit_debug_descriptor);
  CHECK(reg.descriptor().first == reg.descriptor().ours);
  CHECK(reg.descriptor().first_object.empty());  // the test program itself
  CHECK(__jit_debug_descriptor.version == 1);
  const size_t before = list_of(__jit_debug_descriptor).size();

  std::vector<gdbjit::registration_id> ids;
  std::vector<function_desc> rows;
  for (int i = 0; i < 5; ++i) rows.push_back(fp_rows(0x10000 + 0x100 * i));
  for (int i = 0; i < 5; ++i) {
    const gdbjit::function_symbol s{"f" + std::to_string(i), rows[i].start, 22, &rows[i]};
    auto id = reg.add(std::span(&s, 1));
    REQUIRE(id.ok());
    ids.push_back(*id);
    CHECK(__jit_debug_descriptor.action_flag == gdbjit::jit_noaction);
    CHECK(__jit_debug_descriptor.relevant_entry == nullptr);
  }
  CHECK(reg.live_registrations() == 5);
  auto entries = list_of(__jit_debug_descriptor);
  REQUIRE(entries.size() == before + 5);
  for (auto* e : entries) {
    REQUIRE(e->symfile_size > 64);
    CHECK(std::memcmp(e->symfile_addr,
                      "\x7f"
                      "ELF",
                      4) == 0);
  }
  REQUIRE(reg.remove(ids[2]).ok());  // middle
  REQUIRE(reg.remove(ids[4]).ok());  // head (newest first)
  REQUIRE(reg.remove(ids[0]).ok());  // tail
  CHECK(list_of(__jit_debug_descriptor).size() == before + 2);
  auto again = reg.remove(ids[2]);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == errc::not_found);
  r = gdbjit::registrar::create({});  // destroys the first registrar: unlinks the rest
  REQUIRE(r.ok());
  CHECK(list_of(__jit_debug_descriptor).size() == before);
}

TEST_CASE("descriptor inspection in a static link where only ours exists") {
  const gdbjit::descriptor_info d = gdbjit::inspect_descriptors();
  CHECK(d.ours == d.first);
  CHECK(d.ours == &__jit_debug_descriptor);
  CHECK(d.first_register_code != 0);
  // `policy own` is always possible here; `shared` uses the same descriptor.
  gdbjit::registrar_options o;
  o.policy = gdbjit::descriptor_policy::shared;
  auto shared = gdbjit::registrar::create(o);
  REQUIRE(shared.ok());
  CHECK((*shared)->descriptor().used == &__jit_debug_descriptor);
  o.policy = gdbjit::descriptor_policy::own;
  CHECK(gdbjit::registrar::create(o).ok());
}
