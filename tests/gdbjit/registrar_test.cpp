// The GDB JIT registrar without gdb: the in-memory objects (read by readelf / llvm-dwarfdump),
// the descriptor list, and which descriptor is chosen.
#include "gdbjit/gdbjit.hpp"

#include <jitunwind/cfi.h>

#include "gdbjit/elf_object.hpp"
#include "perfmap/perfmap_writer.hpp"

#include "../cfi/tool_rows.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
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

namespace {

// The object as a generic ELF writer lays it out (the original implementation): build_object
// writes it in one pass and must give the same bytes.
std::vector<uint8_t> reference_object(abi target, std::span<const gdbjit::function_symbol> fs) {
  uint64_t lo = UINT64_MAX, hi = 0;
  std::vector<const gdbjit::function_symbol*> order;
  for (const auto& f : fs) {
    lo = std::min(lo, f.start);
    hi = std::max(hi, f.start + f.size);
    order.push_back(&f);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->start < b->start; });
  cfi::encoder_options o;
  o.target = target;
  o.encoding = cfi::address_encoding::absolute;
  auto enc = cfi::encoder::create(o).value();
  for (const auto* f : order)
    if (f->frame != nullptr) REQUIRE(enc.append(*f->frame).ok());
  const std::vector<uint8_t> eh_frame = enc.bytes();
  elf::object_writer w(elf::machine_for(target), 1 /* ET_REL */);
  const uint16_t text = w.add_section({".text", 8 /* SHT_NOBITS */, 2 | 4, lo, 16, {}, hi - lo});
  w.add_section({".eh_frame", 1 /* SHT_PROGBITS */, 0, 0, 8, eh_frame, 0});
  for (const auto* f : order)
    w.add_symbol({sanitize_symbol_name(f->name), f->start - lo, f->size, text, true, true});
  return w.write();
}

}  // namespace

TEST_CASE("objects are byte for byte what a generic ELF writer produces") {
  for (abi a : {abi::amd64, abi::aarch64_le}) {
    std::vector<function_desc> rows;
    std::vector<std::string> names;
    for (int i = 0; i < 40; ++i) {
      const uint64_t start = 0x7f0000100000 + 0x100 * i;
      rows.push_back(a == abi::amd64 ? fp_rows(start) : recipes::leaf(a, start, 22).value());
      names.push_back("jit::f" + std::to_string(i) + (i % 9 == 0 ? "\n\x7f" : "") +
                      std::string(static_cast<size_t>(i), 'n'));
    }
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{40}}) {
      std::vector<gdbjit::function_symbol> batch;
      for (size_t i = 0; i < count; ++i)
        batch.push_back(
            {names[i], rows[i].start, 22 + (i % 3) * 8, i % 5 == 3 ? nullptr : &rows[i]});
      INFO(to_string(a) << " batch of " << count);
      auto fast = gdbjit::build_object(a, batch);
      REQUIRE(fast.ok());
      CHECK(*fast == reference_object(a, batch));
      // Names marked clean (checked by the caller) are copied unscanned: same object.
      auto marked = batch;
      for (auto& f : marked)
        f.clean_name = std::none_of(f.name.begin(), f.name.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
        });
      auto copied = gdbjit::build_object(a, marked);
      REQUIRE(copied.ok());
      CHECK(*copied == *fast);
      std::reverse(batch.begin(), batch.end());  // unsorted input: sorted the same way
      auto reversed = gdbjit::build_object(a, batch);
      REQUIRE(reversed.ok());
      CHECK(*reversed == reference_object(a, batch));
      CHECK(*reversed == *fast);
    }
  }
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
    const std::string name = "f" + std::to_string(i);  // function_symbol only views it
    const gdbjit::function_symbol s{name, rows[i].start, 22, &rows[i]};
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

namespace {

// What readelf and llvm-dwarfdump read from an object: its symbols (absolute address, size,
// name) and FDEs.
struct object_contents {
  std::vector<std::string> symbols;
  std::vector<tool_fde> fdes;
};

object_contents read_object(const uint8_t* bytes, size_t size) {
  temp_dir dir;
  const std::string path = dir / "obj.o";
  REQUIRE(write_file(path, std::string(reinterpret_cast<const char*>(bytes), size)));
  const run_result sections = run({"readelf", "-SW", path});
  REQUIRE(sections.exit_code == 0);
  std::smatch m;
  const std::regex text_re(R"(\.text\s+NOBITS\s+([0-9a-f]+) )");
  REQUIRE(std::regex_search(sections.out, m, text_re));
  const uint64_t text = std::stoull(m[1], nullptr, 16);
  const run_result symbols = run({"readelf", "-sW", path});
  REQUIRE(symbols.exit_code == 0);
  object_contents out;
  static const std::regex sym_re(R"(:\s+([0-9a-f]+)\s+(\d+) FUNC\s+GLOBAL DEFAULT\s+1 (\S+))");
  for (auto it = std::sregex_iterator(symbols.out.begin(), symbols.out.end(), sym_re);
       it != std::sregex_iterator(); ++it)
    out.symbols.push_back(std::to_string(text + std::stoull((*it)[1], nullptr, 16)) + " " +
                          (*it)[2].str() + " " + (*it)[3].str());
  std::sort(out.symbols.begin(), out.symbols.end());
  out.fdes = dwarfdump_fdes(path, abi::amd64);
  return out;
}

object_contents read_entry(const gdbjit::jit_code_entry* e) {
  return read_object(reinterpret_cast<const uint8_t*>(e->symfile_addr), e->symfile_size);
}

}  // namespace

TEST_CASE("growing objects: functions added publish by publish read like one object built at once") {
  if (!tool_available("readelf") || !tool_available("llvm-dwarfdump-22")) return;
  auto r = gdbjit::registrar::create({});
  REQUIRE(r.ok());
  gdbjit::registrar& reg = **r;
  const size_t before = list_of(__jit_debug_descriptor).size();
  // 70 functions (several times the first object's room: it is copied into a larger one), one
  // or three per append, every third without rows, names of growing length.
  constexpr int count = 70;
  std::vector<function_desc> rows;
  std::vector<std::string> names;
  std::vector<gdbjit::function_symbol> all;
  for (int i = 0; i < count; ++i) {
    const uint64_t start = 0x7f0000100000 + 0x40 * static_cast<uint64_t>(i);
    rows.push_back(i % 2 == 0 ? fp_rows(start) : recipes::leaf(abi::amd64, start, 22).value());
    names.push_back("jit_" + std::string(static_cast<size_t>(i % 40), 'x') + std::to_string(i));
  }
  for (int i = 0; i < count; ++i)
    all.push_back({names[i], rows[i].start, 22, i % 3 == 2 ? nullptr : &rows[i], true});
  gdbjit::registration_id id = 0;
  size_t copies = 0;
  for (int i = 0; i < count;) {
    const int n = i % 4 == 0 ? 3 : 1;
    auto added = reg.append(id, std::span(all).subspan(static_cast<size_t>(i),
                                                        static_cast<size_t>(std::min(n, count - i))));
    REQUIRE(added.ok());
    CHECK((id == 0 || added->id == id || added->replaced));  // no debugger attached here
    copies += added->replaced ? 1 : 0;
    id = added->id;
    i += n;
    // One object for the window, whatever happened to it.
    REQUIRE(list_of(__jit_debug_descriptor).size() == before + 1);
  }
  CHECK(copies >= 1);
  auto built = gdbjit::build_object(abi::amd64, all);
  REQUIRE(built.ok());
  const object_contents want = read_object(built->data(), built->size());
  const object_contents got = read_entry(list_of(__jit_debug_descriptor).front());
  CHECK(got.symbols.size() == count);
  CHECK(got.symbols == want.symbols);
  REQUIRE(got.fdes.size() == want.fdes.size());
  for (size_t i = 0; i < want.fdes.size(); ++i) {
    CHECK(got.fdes[i].start == want.fdes[i].start);
    CHECK(got.fdes[i].rows == want.fdes[i].rows);
  }

  // A function taken out: the copy holds the rest (no trace of its name), the original is gone.
  auto rest = reg.remove_function(id, all[5].start);
  REQUIRE(rest.ok());
  REQUIRE(*rest != 0);
  CHECK(reg.remove_function(*rest, all[5].start).error().code() == errc::not_found);
  auto entries = list_of(__jit_debug_descriptor);
  REQUIRE(entries.size() == before + 1);
  const std::string_view bytes(entries.front()->symfile_addr, entries.front()->symfile_size);
  CHECK(bytes.find(names[5] + '\0') == std::string_view::npos);
  CHECK(bytes.find(names[6] + '\0') != std::string_view::npos);
  std::vector<gdbjit::function_symbol> kept = all;
  kept.erase(kept.begin() + 5);
  const object_contents want_kept = read_object(gdbjit::build_object(abi::amd64, kept)->data(),
                                                gdbjit::build_object(abi::amd64, kept)->size());
  const object_contents got_kept = read_entry(entries.front());
  CHECK(got_kept.symbols == want_kept.symbols);
  REQUIRE(got_kept.fdes.size() == want_kept.fdes.size());
  for (size_t i = 0; i < want_kept.fdes.size(); ++i)
    CHECK(got_kept.fdes[i].rows == want_kept.fdes[i].rows);
  // Functions before the object's first address go into a copy rebased to them.
  const function_desc early = fp_rows(0x7f00000f0000);
  const gdbjit::function_symbol e{"jit_early", early.start, 22, &early};
  auto added = reg.append(*rest, std::span(&e, 1));
  REQUIRE(added.ok());
  CHECK(added->replaced);
  CHECK(read_entry(list_of(__jit_debug_descriptor).front()).symbols.size() == count);
  REQUIRE(reg.remove(added->id).ok());
  CHECK(list_of(__jit_debug_descriptor).size() == before);
  CHECK(reg.append(added->id, std::span(&e, 1)).error().code() == errc::not_found);
}
