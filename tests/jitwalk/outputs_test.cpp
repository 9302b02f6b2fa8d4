// Folded stacks, SVG flame graph (rendered by headless Chromium) and pprof (decoded by protoc
// against bpf/proto/profile.proto).
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <set>

#include "jitwalk/profile_data.hpp"
#include "png_check.hpp"
#include "support/privileges.hpp"
#include "support/process.hpp"

using namespace jitwalk;
namespace jt = jitunwind::test;

namespace {

profile_data sample_profile() {
  profile_data p;
  p.process_name = "toy";
  p.pid = 42;
  p.period_ns = 10101010;
  p.start_unix_ns = 1700000000000000000ull;
  p.duration_ns = 2000000000;
  auto fr = [&](const char* name, frame_kind k, uint64_t addr, const char* module = "") {
    profile_frame f;
    f.name = name;
    f.kind = k;
    f.address = addr;
    f.module = module;
    if (*module) {
      f.map_start = 0x400000;
      f.map_limit = 0x500000;
    }
    return p.intern(f);
  };
  const uint32_t main_ = fr("main", frame_kind::native, 0x401000, "/bin/toy");
  const uint32_t fib = fr("toy:fib", frame_kind::jit, 0x7f0000001000, "[jit]");
  const uint32_t fib2 = fr("toy:fib", frame_kind::jit, 0x7f0000001010, "[jit]");
  const uint32_t add = fr("toy:add;weird name", frame_kind::jit, 0x7f0000002000, "[jit]");
  const uint32_t sys = fr("do_syscall_64", frame_kind::kernel, 0xffffffff81000000);
  p.add("toy", {fib, main_}, 5);
  p.add("toy", {fib2, fib, main_}, 7);
  p.add("toy", {fib, fib, main_}, 1);  // same names as the one above: merged in folded output
  p.add("toy", {add, main_}, 3);
  p.add("toy", {sys, add, main_}, 2);
  return p;
}

}  // namespace

TEST_CASE("folded stacks: root first, merged by names, separators escaped") {
  const std::string text = folded_text(sample_profile());
  CHECK(text ==
        "toy;main;toy:add:weird name 3\n"
        "toy;main;toy:add:weird name;do_syscall_64_[k] 2\n"
        "toy;main;toy:fib 5\n"
        "toy;main;toy:fib;toy:fib 8\n");
}

namespace {

// A JIT leaf whose caller `main` was found by the frame-pointer fallback, and the same leaf
// reached by tables.
profile_data fp_profile() {
  profile_data p;
  p.process_name = "toy";
  p.pid = 42;
  p.period_ns = 1000;
  profile_frame leaf;
  leaf.name = "toy:leaf";
  leaf.kind = frame_kind::jit;
  leaf.address = 0x7f0000001000;
  profile_frame main_;
  main_.name = "main";
  main_.kind = frame_kind::native;
  main_.address = 0x401000;
  const uint32_t by_tables = p.intern(main_);
  main_.fp_found = true;
  const uint32_t by_fp = p.intern(main_);
  main_.fp_found = false;
  main_.sp_found = true;
  const uint32_t by_sp = p.intern(main_);
  const uint32_t l = p.intern(leaf);
  p.add("toy", {l, by_fp}, 2);
  p.add("toy", {l, by_tables}, 3);
  p.add("toy", {l, by_sp}, 1);
  return p;
}

}  // namespace

TEST_CASE(
    "frames found by the frame-pointer fallback or at SP are marked in folded, SVG and pprof") {
  const profile_data p = fp_profile();
  CHECK(folded_text(p) ==
        "toy;main;toy:leaf 3\ntoy;main_[fp];toy:leaf 2\ntoy;main_[sp];toy:leaf 1\n");
  const std::string svg = flamegraph_svg(p, {});
  CHECK_THAT(svg, Catch::Contains("<title>main_[fp] [native] found by the frame-pointer fallback"));
  CHECK_THAT(svg, Catch::Contains("<title>main_[sp] [native] found from the return address at "
                                  "the stack pointer"));
  CHECK_THAT(svg, Catch::Contains("<title>main [native] —"));
  if (!jt::tool_available("protoc")) return;
  jt::temp_dir dir;
  auto bytes = pprof_bytes(p, false);
  REQUIRE(jt::write_file(dir / "p.pb", std::string(bytes.begin(), bytes.end())));
  auto r = jt::run_shell("protoc --proto_path=" + jt::source_path("bpf/proto") +
                         " --decode=perftools.profiles.Profile profile.proto < " + (dir / "p.pb"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // The marked function shows the mark, its system name is the symbol; the sample says how
  // many of its frames were found so (a numeric label).
  CHECK_THAT(r.out, Catch::Contains("string_table: \"main_[fp]\""));
  CHECK_THAT(r.out, Catch::Contains("string_table: \"fp_frames\""));
  CHECK_THAT(r.out, Catch::Contains("string_table: \"main_[sp]\""));
  CHECK_THAT(r.out, Catch::Contains("string_table: \"sp_frames\""));
  CHECK_THAT(r.out, Catch::Contains("num: 1"));
}

TEST_CASE("pprof profile decodes with protoc against the profile.proto schema") {
  if (!jt::tool_available("protoc")) return;
  jt::temp_dir dir;
  const std::string raw = dir / "p.pb";
  auto bytes = pprof_bytes(sample_profile(), false);
  REQUIRE(jt::write_file(raw, std::string(bytes.begin(), bytes.end())));
  auto r = jt::run_shell("protoc --proto_path=" + jt::source_path("bpf/proto") +
                         " --decode=perftools.profiles.Profile profile.proto < " + raw);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string& d = r.out;
  CHECK_THAT(d, Catch::Contains("string_table: \"\""));
  CHECK_THAT(d, Catch::Contains("string_table: \"toy:fib\""));
  CHECK_THAT(d, Catch::Contains("string_table: \"cpu\""));
  CHECK_THAT(d, Catch::Contains("period: 10101010"));
  CHECK_THAT(d, Catch::Contains("value: 7\n  value: 70707070"));
  CHECK_THAT(d, Catch::Contains("address: 139637976731664"));  // 0x7f0000001010
  // The compressed file is what jitwalk writes; gzip must accept it and give the same bytes.
  const std::string gz = dir / "p.pb.gz";
  REQUIRE(write_pprof(sample_profile(), gz).ok());
  auto un = jt::run_shell("gzip -dc " + gz + " | cmp - " + raw);
  CHECK(un.exit_code == 0);
}

TEST_CASE("SVG flame graph is well-formed and renders in headless Chromium") {
  if (!jt::tool_available("chromium") || !jt::tool_available("python3")) return;
  jt::temp_dir dir;
  const std::string svg = dir / "f.svg", png = dir / "f.png";
  svg_options o;
  o.title = "test <profile> & more";
  REQUIRE(write_svg(sample_profile(), o, svg).ok());
  auto xml =
      jt::run({"python3", "-c", "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])", svg});
  INFO(xml.err);
  CHECK(xml.exit_code == 0);
  const std::string text = jt::read_file(svg);
  CHECK_THAT(text, Catch::Contains("toy:fib"));
  CHECK_THAT(text, Catch::Contains("<title>main [native]"));
  CHECK(text.find("http") == text.find("http://www.w3.org/2000/svg"));  // nothing external

  auto r = jt::run({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--screenshot=" + png, "--window-size=1200,300", "file://" + svg},
                   {}, std::chrono::seconds(90));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  jitwalk_test::image img;
  REQUIRE(jitwalk_test::decode_png(jt::read_file(png), img));
  CHECK(img.width == 1200);
  // The frames are drawn: many warm (native), green (JIT) and aqua (kernel) pixels.
  size_t warm = 0, green = 0, aqua = 0;
  for (size_t i = 0; i + 2 < img.rgb.size(); i += 3) {
    const int r8 = img.rgb[i], g8 = img.rgb[i + 1], b8 = img.rgb[i + 2];
    if (r8 > 200 && b8 < 90 && g8 < 215) ++warm;
    if (g8 > 160 && r8 < 120 && b8 < 100) ++green;
    if (b8 > 190 && g8 > 170 && r8 < 130) ++aqua;
  }
  CHECK(warm > 5000);
  CHECK(green > 5000);
  CHECK(aqua > 1000);
}
#endif
