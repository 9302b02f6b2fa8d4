// Differential tests against LLVM: an object assembled by `llvm-mc-22 --gsframe` from .cfi_*
// directives (tests/cli/data/cfi_amd64.s) is decoded by our `dump` exactly as
// `llvm-readobj-22 --sframe` decodes it; re-encoding our dump with `build --elf` gives an image
// llvm-readobj-22 reads without warnings, with the same rows and the same field widths.
#include "cli/cli_support.hpp"
#include "support/privileges.hpp"

#include <catch2/catch.hpp>

using namespace jitunwind::test;
using namespace jitunwind::test::cli;
using nlohmann::json;

namespace {

bool have_llvm() {
  return tool_available("llvm-mc-22") && tool_available("llvm-readobj-22");
}

std::string assemble(const temp_dir& dir) {
  const std::string obj = dir / "cfi_amd64.o";
  auto r = run({"llvm-mc-22", "-triple", "x86_64-linux-gnu", "-filetype=obj", "--gsframe",
                source_path("tests/cli/data/cfi_amd64.s"), "-o", obj});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return obj;
}

void compare(const sframe_dump& expect, const sframe_dump& actual, bool widths) {
  CHECK(actual.version == expect.version);
  CHECK(actual.abi == expect.abi);
  REQUIRE(actual.fdes.size() == expect.fdes.size());
  for (size_t i = 0; i < expect.fdes.size(); ++i) {
    INFO("function " << i << " at 0x" << std::hex << expect.fdes[i].start);
    CHECK(actual.fdes[i].start == expect.fdes[i].start);
    CHECK(actual.fdes[i].size == expect.fdes[i].size);
    CHECK(actual.fdes[i].rep_size == expect.fdes[i].rep_size);
    CHECK(actual.fdes[i].fres == expect.fdes[i].fres);
    if (widths) {
      CHECK(actual.fdes[i].fre_addr_bytes == expect.fdes[i].fre_addr_bytes);
      CHECK(actual.fdes[i].offset_bytes == expect.fdes[i].offset_bytes);
    }
  }
}

}  // namespace

TEST_CASE("llvm-mc object: our dump agrees with llvm-readobj-22 --sframe") {
  if (!have_llvm()) return;
  temp_dir dir;
  const std::string obj = assemble(dir);
  const sframe_dump llvm = llvm_readobj_sframe(obj);
  REQUIRE(llvm.fdes.size() == 7);  // every function of the source got an FDE
  // The shapes the source is meant to cover really are in LLVM's output.
  CHECK(llvm.fdes[4].fre_addr_bytes == 2);
  CHECK(llvm.fdes[5].fre_addr_bytes == 4);
  CHECK(llvm.fdes[5].offset_bytes == std::vector<unsigned>{1, 4, 1});

  const json ours_json = dump_json({obj});
  const sframe_dump ours = from_json(ours_json);
  CHECK(ours.flags == llvm.flags);
  compare(llvm, ours, false);
  // Names come from the object's symbol table.
  CHECK(ours_json["functions"][0]["name"] == "fp_frame");
  CHECK(ours_json["functions"][3]["name"] == "mid_epilogue");

  auto text = run_tool({"sframe", "dump", obj});
  INFO(text.out << text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(text.out.find("relocatable x86-64") != std::string::npos);
  CHECK(text.out.find("7 relocations applied") != std::string::npos);
  CHECK(text.out.find("Function 3 <mid_epilogue>: [0x26, 0x37) size 17, 6 rows") !=
        std::string::npos);
  CHECK(text.out.find("0x2a (+0x4)") != std::string::npos);

  auto check = run_tool({"sframe", "check", obj});
  CHECK(check.exit_code == 0);
  CHECK(check.out == obj + ": ok (7 functions, 25 rows, SFrame v2)\n");
}

TEST_CASE("llvm-mc rows re-encoded by build --elf: llvm-readobj-22 sees the same rows and widths") {
  if (!have_llvm()) return;
  temp_dir dir;
  const std::string obj = assemble(dir);
  sframe_dump llvm = llvm_readobj_sframe(obj);
  json rows = dump_json({obj});

  // fp_frame ends like compiler output: after `leave` the CFA is SP+8 but the FP rule still
  // says "saved at CFA-16", a slot that is now below the stack pointer. The frame model
  // (jitunwind::validate) refuses to encode such a row, and build says which one.
  const std::string all = dir / "all.json";
  REQUIRE(write_file(all, rows.dump(2)));
  auto refused = run_tool({"sframe", "build", "--input", all, "--elf", dir / "all.so"});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find(all + ": functions[0]: ") != std::string::npos);
  CHECK(refused.err.find("row 3 (offset 14): FP saved at CFA-16, below the stack pointer") !=
        std::string::npos);

  // Every other function is re-encoded exactly.
  rows["functions"].erase(0);
  llvm.fdes.erase(llvm.fdes.begin());
  const std::string input = dir / "rows.json";
  REQUIRE(write_file(input, rows.dump(2)));
  const std::string image = dir / "image.so";
  auto b = run_tool({"sframe", "build", "--input", input, "--elf", image});
  INFO(b.out << b.err);
  REQUIRE(b.exit_code == 0);

  const sframe_dump again = llvm_readobj_sframe(image);
  // Same FDE_FUNC_START_PCREL choice as LLVM, plus FDE_SORTED (LLVM leaves sorting to the
  // linker).
  CHECK(again.flags == (llvm.flags | 0x1));
  compare(llvm, again, true);
}
