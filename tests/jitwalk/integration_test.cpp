// jitwalk end to end (root: BPF, perf events, uprobes): profiles and verifications of the test
// targets built next to this file. Each test starts its own target through jitwalk.
#include <catch2/catch.hpp>

#ifndef JITWALK_TESTS_DISABLED
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "jitwalk_support.hpp"
#include "support/help_options.hpp"

namespace jt = jitunwind::test;
using namespace jitwalk_test;

namespace {

std::string jit_target() {
  return jt::binary_path("tests/jitwalk/jitwalk_jit_target");
}
std::string native_target() {
  return jt::binary_path("tests/jitwalk/jitwalk_native_target");
}

// jitwalk verify on the JIT target started with `target_args`.
nlohmann::json verify_jit_target(const std::vector<std::string>& target_args, jt::run_result* out,
                                 const std::vector<std::string>& options = {}) {
  std::vector<std::string> command = {jit_target()};
  command.insert(command.end(), target_args.begin(), target_args.end());
  return verify(command, out, options);
}

}  // namespace

TEST_CASE("every subcommand has --help, bad arguments are named") {
  for (const char* cmd : {"profile", "verify"}) {
    auto r = jt::run({jitwalk(), cmd, "--help"});
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains(std::string("Usage: jitwalk ") + cmd));
  }
  auto top = jt::run({jitwalk(), "--help"});
  CHECK(top.exit_code == 0);
  CHECK_THAT(top.out, Catch::Contains("profile") && Catch::Contains("verify"));
  auto bad = jt::run({jitwalk(), "profile", "-F", "fast", "-p", "1"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("-F") && Catch::Contains("fast"));
  auto none = jt::run({jitwalk(), "verify"});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("no command"));
}

TEST_CASE("docs/jitwalk.md lists every option --help shows, in every spelling") {
  const std::string doc = jt::read_file(std::string(JITUNWIND_SOURCE_DIR) + "/docs/jitwalk.md");
  REQUIRE(!doc.empty());
  for (const char* cmd : {"profile", "verify"}) {
    auto r = jt::run({jitwalk(), cmd, "--help"});
    const auto options = jt::help_options(r.out);
    CHECK(options.size() >= 10);
    for (const std::string& o : options) {
      INFO(cmd << " " << o);
      CHECK(doc.find("`" + o) != std::string::npos);
    }
  }
  // The old spellings and their --no- twins all parse (a bad -F after them is what fails).
  for (const char* flag : {"--sync-tables", "--no-sync-tables", "--no-jit", "--jit",
                           "--no-table-cache", "--cut-marker", "--no-children", "--kernel=off"}) {
    auto r = jt::run({jitwalk(), "profile", flag, "-F", "0", "--", "true"});
    INFO(flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("-F: 0 is less than 1"));
  }
  auto units = jt::run({jitwalk(), "profile", "-d", "500ms", "--grace", "1.5", "--max-memory",
                        "2G", "-F", "1kHz", "--max-depth", "1025", "--", "true"});
  CHECK(units.exit_code == 2);
  CHECK_THAT(units.err, Catch::Contains("--max-depth: 1025 is more than 1024"));
}

TEST_CASE("bad outputs and table lists are refused before the command starts") {
  jt::temp_dir dir;
  const std::string marker = dir / "ran";
  // The command would leave `marker` behind if it ran.
  const std::vector<std::string> command = {"--", "touch", marker};
  auto tables = jt::run({jitwalk(), "verify", "--native-tables", "xsframey", "--", "true"});
  CHECK(tables.exit_code == 2);
  CHECK_THAT(tables.err, Catch::Contains("--native-tables: 'xsframey'"));
  auto freq = jt::run({jitwalk(), "profile", "-F", "100000", "--", "true"});
  CHECK(freq.exit_code == 2);
  if (!jt::may_run_privileged("jitwalk profile")) return;
  std::vector<std::string> args = {jitwalk(), "profile", "--folded", dir / "missing/x.folded"};
  args.insert(args.end(), command.begin(), command.end());
  auto out = jt::run(args);
  CHECK(out.exit_code == 1);
  CHECK_THAT(out.err, Catch::Contains(dir / "missing/x.folded" + ": cannot create: directory") &&
                          Catch::Contains("No such file or directory"));
  CHECK(jt::read_file(marker).empty());
  CHECK(::access(marker.c_str(), F_OK) != 0);
}

TEST_CASE(
    "a closed output pipe or a hangup stops the run like Ctrl-C: files written, command "
    "stopped") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // `| head -1` closes the pipe after the first progress line (printed after 2 s); the command
  // would spin until -d 4 ends it.
  const std::string sh = "'" + jitwalk() + "' profile -d 4 --folded '" + dir / "p.folded" +
                         "' -- '" + native_target() + "' 100 2>&1 | head -1";
  auto r = jt::run_shell(sh, std::chrono::seconds(60));
  CHECK(r.exit_code == 0);
  CHECK_THAT(jt::read_file(dir / "p.folded"), Catch::Contains("native_leaf"));
  CHECK(jt::run({"pgrep", "-f", native_target() + " 100"}).exit_code != 0);  // none left
}

TEST_CASE("profile: a missing PID is named, and no empty output is left behind") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  const std::string existing = dir / "kept.svg";
  { std::ofstream(existing) << "an earlier flame graph"; }
  auto r = jt::run({jitwalk(), "profile", "-p", "999999999", "-d", "1", "--folded",
                    dir / "new.folded", "--svg", existing});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("999999999"));
  CHECK(::access((dir / "new.folded").c_str(), F_OK) != 0);    // created for the check, removed
  CHECK(jt::read_file(existing) == "an earlier flame graph");  // neither truncated nor removed
  auto v = jt::run({jitwalk(), "verify", "--json", dir / "v.json", "--", "/nonexistent/runtime"});
  CHECK(v.exit_code == 1);
  CHECK(::access((dir / "v.json").c_str(), F_OK) != 0);
}

namespace {

// Profiles a native target with only .sframe tables loaded; every sample in its loop must show
// the whole chain from main (main's frame itself is described only by the .sframe section).
void profile_native(const std::string& program, const char* version) {
  jt::temp_dir dir;
  auto r = jt::run({jitwalk(), "profile", "-F", "499", "--folded", dir / "f.txt", "--native-tables",
                    "sframe", "--", program, "2"},
                   {}, std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  const uint64_t n = total(folded);
  REQUIRE(n > 200);
  uint64_t chain = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.find(";main;spin;native_top;native_middle;native_leaf") != std::string::npos)
      chain += count;
  }
  INFO(jt::read_file(dir / "f.txt"));
  CHECK(chain * 10 >= n * 9);
  CHECK_THAT(r.err, Catch::Contains("unwound to the root"));
  CHECK_THAT(r.err, Catch::Contains(std::string("1 with .sframe: ") + version));
}

}  // namespace

TEST_CASE("profile: a native program without frame pointers unwinds to main through .sframe v1") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  profile_native(native_target(), "1 v1, 0 v2, 0 v3");
}

TEST_CASE("profile: the same program with an LLVM-made .sframe v2") {
#ifndef JITWALK_HAVE_SFRAME_V2_TARGET
  if (!jt::tool_available("llvm-mc-22")) return;
#else
  if (!jt::may_run_privileged("jitwalk profile")) return;
  if (jt::tool_available("llvm-readobj-22")) {
    auto ro = jt::run({"llvm-readobj-22", "--sframe", native_target() + "_v2"});
    REQUIRE(ro.exit_code == 0);
    CHECK_THAT(ro.out, Catch::Contains("Version: V2"));
  }
  profile_native(native_target() + "_v2", "0 v1, 1 v2, 0 v3");
#endif
}

TEST_CASE("profile: the same program with its .sframe converted to v3") {
#ifndef JITWALK_HAVE_SFRAME_V3_TARGET
  jt::skip_or_fail("jitwalk_native_target_v3 was not built (needs objcopy and the jitunwind CLI)");
#else
  if (!jt::may_run_privileged("jitwalk profile")) return;
  // `jitunwind sframe convert` made the section from gas's v1 one (tests/jitwalk/CMakeLists.txt).
  auto d = jt::run(
      {jt::binary_path("tools/jitunwind/jitunwind"), "sframe", "check", native_target() + "_v3"});
  REQUIRE(d.exit_code == 0);
  CHECK_THAT(d.out, Catch::Contains("SFrame v3"));
  profile_native(native_target() + "_v3", "0 v1, 0 v2, 1 v3");
#endif
}

TEST_CASE("profile: threads, per-thread roots and kernel stacks") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // Three threads: their samples arrive through the inherited per-thread events.
  auto r = jt::run({jitwalk(), "profile", "-F", "299", "--per-thread", "--folded", dir / "t.txt",
                    "--", native_target(), "2", "3"},
                   {}, std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto folded = parse_folded(jt::read_file(dir / "t.txt"));
  std::set<std::string> roots;
  uint64_t from_thread = 0, n = total(folded);
  for (const auto& [stack, count] : folded) {
    roots.insert(stack.substr(0, stack.find(';')));
    if (stack.find("start_thread;native_thread;spin") != std::string::npos ||
        stack.find(";native_thread;native_top;native_middle;native_leaf") != std::string::npos) {
      from_thread += count;
    }
  }
  INFO(jt::read_file(dir / "t.txt").substr(0, 3000));
  CHECK(roots.size() >= 3);     // "jitwalk_native_/TID" per thread
  CHECK(from_thread * 2 >= n);  // two of the three threads start in native_thread

  // Kernel stacks: a program that lives in write(2).
  auto k = jt::run({jitwalk(), "profile", "-F", "499", "--kernel", "--folded", dir / "k.txt", "-d",
                    "2", "--", "dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=100000000"},
                   {}, std::chrono::seconds(120));
  INFO(k.err);
  REQUIRE(k.exit_code == 0);
  auto kf = parse_folded(jt::read_file(dir / "k.txt"));
  // How much of dd's time the kernel takes depends on the machine (here 60 %, 24 % on the CI
  // machine under load), so the checks are on the shape of the stacks, not on a share of time:
  // kernel frames sit on top of the user stack of the system call that entered the kernel, and
  // never interleave with user frames.
  uint64_t with_kernel = 0, in_syscall = 0, interleaved = 0;
  for (const auto& [stack, count] : kf) {
    auto first_k = stack.find("_[k]");
    if (first_k == std::string::npos) continue;
    with_kernel += count;
    auto user_end = stack.rfind(';', first_k);
    auto user = stack.substr(0, user_end == std::string::npos ? 0 : user_end);
    auto last_user = user.substr(user.rfind(';') + 1);
    if (last_user.ends_with("write") || last_user.ends_with("read")) {  // write, __GI___libc_read
      in_syscall += count;
    }
    // After the first kernel frame every frame is a kernel frame.
    for (std::size_t at = stack.find(';', first_k); at != std::string::npos;
         at = stack.find(';', at + 1)) {
      auto next = stack.find(';', at + 1);
      auto frame =
          stack.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
      if (!frame.ends_with("_[k]")) {
        interleaved += count;
        break;
      }
    }
  }
  INFO(jt::read_file(dir / "k.txt").substr(0, 3000));
  INFO("samples " << total(kf) << ", with kernel frames " << with_kernel
                  << ", of them in read/write " << in_syscall << ", interleaved " << interleaved);
  CHECK(with_kernel >= 20);  // ~1000 samples of a program that lives in read(2)/write(2)
  CHECK(interleaved == 0);
  CHECK(in_syscall * 10 >= with_kernel * 9);  // the rest: page faults and exit
}

TEST_CASE("profile: attaching to a running JIT process with -p") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // The target runs on its own; jitwalk finds its registry, windows and perf map after the fact
  // (attached once the perf map names both published functions). It runs for longer than the
  // profile however loaded the machine is, and is ended after it; its perf map goes with it.
  auto r = jt::run_shell(
      jit_target() + " deep --seconds 60 --depth 25 --no-checkpoint & pid=$!; map=/tmp/perf-$pid.map; "
                     "for i in $(seq 600); do [ \"$(wc -l 2>/dev/null < $map)\" = 2 ] && break; "
                     "sleep 0.05; done; " +
          jitwalk() + " profile -p $pid -d 2 -F 499 --folded " + dir / "p.txt" +
          "; rc=$?; kill $pid; wait $pid; rm -f $map; exit $rc",
      std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // How many samples 2 s bring depends on the CPU the target gets (tens on a busy machine):
  // every one of them is judged. A stack in the JIT code is the whole chain, named, from
  // _start (down to the native helper the deepest call makes; a sample may also land in
  // jit:entry itself, between its calls); no stack is cut or has an
  // unnamed frame.
  static const std::regex jit_chain(
      R"(^[^;]+;_start;__libc_start_main;__libc_start_call_main;main;jit:entry(;jit:rec)*(;jw_helper)?$)");
  auto folded = parse_folded(jt::read_file(dir / "p.txt"));
  uint64_t jit = 0, wrong = 0, n = total(folded);
  std::string wrong_example;
  for (const auto& [stack, count] : folded) {
    const bool in_jit = stack.find("jit:") != std::string::npos;
    if (in_jit) jit += count;
    if ((in_jit && !std::regex_match(stack, jit_chain)) || stack.find("[cut") != std::string::npos ||
        stack.find("[unknown") != std::string::npos) {
      wrong += count;
      if (wrong_example.empty()) wrong_example = stack;
    }
  }
  INFO(jt::read_file(dir / "p.txt").substr(0, 3000));
  INFO(wrong << " of " << n << " samples wrong, e.g. " << wrong_example);
  REQUIRE(n >= 10);
  CHECK(jit * 2 >= n);  // it spends its time in the JIT code
  CHECK(wrong == 0);
  CHECK_THAT(r.err, Catch::Contains("2 loaded"));
}

TEST_CASE("profile: the JIT target's stacks, SVG in Chromium, pprof through protoc") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  auto r = jt::run({jitwalk(), "profile", "-F", "499", "--folded", dir / "f.txt", "--svg",
                    dir / "f.svg", "--pprof", dir / "p.pb.gz", "--", jit_target(), "deep",
                    "--seconds", "2", "--depth", "30", "--no-checkpoint"},
                   {}, std::chrono::seconds(120));
  remove_tmp_files_of(r);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  const uint64_t n = total(folded);
  REQUIRE(n > 200);
  std::string chain = ";main;jit:entry";
  for (int i = 0; i <= 30; ++i) chain += ";jit:rec";
  uint64_t full = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.find(chain) != std::string::npos && stack.rfind("_start", 40) != std::string::npos) {
      full += count;
    }
  }
  INFO(jt::read_file(dir / "f.txt").substr(0, 4000));
  CHECK(full * 10 >= n * 8);  // startup samples and the exit path are the rest

  if (jt::tool_available("protoc")) {
    const std::string pprof = decode_pprof(dir / "p.pb.gz");
    CHECK_THAT(pprof, Catch::Contains("string_table: \"jit:rec\""));
    CHECK_THAT(pprof, Catch::Contains("string_table: \"main\""));
  }
  if (jt::tool_available("chromium")) {
    // the tower of JIT frames
    CHECK(green_pixels(dir / "f.svg", dir / "f.png", "1200,900") > 50000);
  }
}

TEST_CASE("profile: JIT code published a moment ago is cut, never walked to the root by a guess") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  // Every 20 calls (about a millisecond) the "rec" window is rewritten and published again, and
  // its code keeps no frame pointer while RBP still holds main's: a frame-pointer step from it
  // lands in main's caller, skipping every JIT frame and main (`--no-jit` shows it: 99.8 % "to
  // the root" as __libc_start_call_main_[fp];jit:rec). Tables load asynchronously, so many
  // samples land in code whose rows are not loaded yet.
  auto r = jt::run({jitwalk(), "profile", "-v", "-F", "499", "--folded", dir / "f.txt", "--",
                    "env", "JITUNWIND_DIR=" + dir.path(), jit_target(), "recycle", "--frameless",
                    "--recycle-every", "20", "--depth", "8", "--spin", "20000", "--no-checkpoint",
                    "--seconds", "1.5"},
                   {}, std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  INFO(jt::read_file(dir / "f.txt").substr(0, 4000));
  uint64_t in_jit = 0, complete = 0, pending = 0, skipped_to_root = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.find("jit:") == std::string::npos) continue;
    in_jit += count;
    const bool cut = stack.find("[cut:") != std::string::npos;
    if (stack.find("[cut: JIT code published a moment ago") != std::string::npos) pending += count;
    if (stack.find(";main;jit:entry;jit:rec") != std::string::npos && !cut) complete += count;
    // Reaching the root without main and the entry: the frames between were skipped.
    if (!cut && stack.find(";main;jit:entry") == std::string::npos) skipped_to_root += count;
  }
  REQUIRE(in_jit > 100);
  CHECK(skipped_to_root == 0);
  CHECK(pending > 0);   // the case arose (rows follow a publication by milliseconds)
  CHECK(complete > 0);  // and rows that did arrive unwind the whole chain
  CHECK_THAT(r.err, Catch::Contains("to the root, every step by tables"));
  CHECK_THAT(r.err, Catch::Contains("at JIT code whose rows were not loaded yet"));
}

TEST_CASE("profile: frames found by the frame-pointer fallback end in _[fp] (folded, pprof)") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  auto r = jt::run({jitwalk(),
                    "profile",
                    "-v",
                    "--unwinder",
                    "fp",
                    "-F",
                    "499",
                    "--folded",
                    dir / "f.txt",
                    "--pprof",
                    dir / "p.pb.gz",
                    "--",
                    "env",
                    "JITUNWIND_DIR=" + dir.path(),
                    jit_target(),
                    "deep",
                    "--fp",
                    "--seconds",
                    "1",
                    "--depth",
                    "5",
                    "--no-checkpoint"},
                   {}, std::chrono::seconds(120));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  INFO(jt::read_file(dir / "f.txt").substr(0, 3000));
  const uint64_t n = total(folded);
  REQUIRE(n > 100);
  // Every caller of the leaf was found by a frame-pointer step: main, and the JIT entry and
  // five recursion levels (unnamed here: `--unwinder fp` reads no registry, and the perf map is
  // in the test's directory, where jitwalk does not look).
  uint64_t marked = 0;
  for (const auto& [stack, count] : folded) {
    size_t fp_frames = 0;
    for (size_t at = 0; (at = stack.find("_[fp];", at)) != std::string::npos; ++at) ++fp_frames;
    if (stack.find(";main_[fp];") != std::string::npos && fp_frames >= 7) marked += count;
  }
  CHECK(marked * 10 >= n * 8);  // start-up and exit are the rest
  CHECK_THAT(r.err, Catch::Contains("to the root, with frame-pointer steps"));
  if (jt::tool_available("protoc")) {
    const std::string pprof = decode_pprof(dir / "p.pb.gz");
    CHECK_THAT(pprof, Catch::Contains("string_table: \"main_[fp]\""));
    CHECK_THAT(pprof, Catch::Contains("string_table: \"main\""));  // its system name
    CHECK_THAT(pprof, Catch::Contains("string_table: \"fp_frames\""));
  }
}

TEST_CASE("verify: deep JIT recursion without frame pointers matches exactly") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify_jit_target({"deep", "--depth", "300", "--iterations", "200"}, &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(j["checkpoints"] == 200);
  CHECK(j["exact"] == 200);
  CHECK(j["complete"] == 200);
  CHECK(j["max_truth"].get<int>() >= 100);
  // The kernel's frame-pointer walk on the same events never gets past the first JIT frame.
  CHECK(j["fp_exact"] == 0);
  CHECK(j["fp_found_frames"].get<int>() <= 200);
  CHECK(j["max_truth"].get<int>() == 302);  // deeper than the profile default of 127 frames
  CHECK(j["stale_uses"] == 0);
  CHECK_THAT(r.out, Catch::Contains("result: PASS"));
}

TEST_CASE("verify: a stack-realigning (DRAP) JIT function walked with SFrame v3 flexible rows") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  // f's body rows: CFA = *(rbp - 8), the caller's rbp at *(rbp + 0) (JW_ROW_CFA_DEREF,
  // JW_ROW_FP_AT_FP); every f frame at a checkpoint is in its body.
  auto j = verify_jit_target({"deep", "--drap", "--depth", "100", "--iterations", "100"}, &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(j["checkpoints"] == 100);
  CHECK(j["exact"] == 100);
  CHECK(j["max_truth"].get<int>() == 102);
  CHECK(j["failed_steps"] ==
        nlohmann::json{{"jit", 0}, {"sframe", 0}, {"eh_frame", 0}, {"fp_fallback", 0}});
  CHECK(j["stale_uses"] == 0);
  CHECK(j["wrong_walks"] == 0);
  CHECK_THAT(r.out, Catch::Contains("result: PASS"));
}

TEST_CASE("verify: a JIT row the BPF walker cannot follow ends the walk, counted, never wrong") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  // The helper's caller f is at a call whose row says CFA = r10 + 0: the walk names that one
  // JIT frame (the helper's return address into f) and stops there with its reason.
  auto j = verify_jit_target(
      {"deep", "--drap", "--drap-register-call", "--depth", "20", "--iterations", "50"}, &r,
      {"--min-match", "0"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(j["checkpoints"] == 50);
  CHECK(j["exact"] == 0);
  CHECK(j["found_frames"] == 50);
  CHECK(j["wrong_walks"] == 0);
  CHECK(j["walk_stops"] == nlohmann::json{{"unsupported_rule", 50}});
  // Each walk tried one JIT-table step it could not make: counted as tried and failed.
  CHECK(j["failed_steps"]["jit"] == 50);
  CHECK_THAT(r.out, Catch::Contains("walks ended by: 50 unwind rule the walker cannot follow"));
}

TEST_CASE("verify: windows retired, freed and reused while sampling") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify_jit_target(
      {"recycle", "--depth", "100", "--iterations", "300", "--recycle-every", "3"}, &r);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(j["exact"] == j["checkpoints"]);
  CHECK(j["checkpoints"] == 300);
  CHECK(j["windows_freed"].get<int>() >= 90);
  CHECK(j["stale_uses"] == 0);
}

TEST_CASE("verify: BPF window states of gone windows are pruned without stale rows") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify_jit_target(
      {"recycle", "--depth", "50", "--iterations", "200", "--recycle-every", "2", "--new-ids"}, &r,
      {"--window-state-limit", "1"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(j["exact"] == j["checkpoints"]);
  CHECK(j["stale_uses"] == 0);
  CHECK(j["window_states_pruned"].get<int>() > 0);
}

TEST_CASE("verify fails when the walk and the ground truth disagree") {
  if (!jt::may_run_privileged("jitwalk verify")) return;
  jt::run_result r;
  auto j = verify_jit_target({"deep", "--depth", "20", "--iterations", "50", "--lie"}, &r,
                             {"--show", "1"});
  CHECK(r.exit_code == 1);
  CHECK(j["checkpoints"] == 50);
  CHECK(j["exact"] == 45);
  CHECK_THAT(r.out, Catch::Contains("MISMATCH") && Catch::Contains("result: FAIL"));
  // ... and passes with a threshold the lies stay under.
  auto k = verify_jit_target({"deep", "--depth", "20", "--iterations", "50", "--lie"}, &r,
                             {"--min-match", "90"});
  CHECK(r.exit_code == 0);
}

TEST_CASE("hostile windows are rejected by id, the walker stays within its bounds") {
  if (!jt::may_run_privileged("jitwalk profile")) return;
  jt::temp_dir dir;
  auto r = jt::run({jitwalk(), "profile", "-F", "499", "--folded", dir / "f.txt", "--",
                    jit_target(), "hostile", "--seconds", "2", "--depth", "20"},
                   {}, std::chrono::seconds(120));
  remove_tmp_files_of(r);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("window 10 (") && Catch::Contains("FDE sub-section"));
  CHECK_THAT(r.err,
             Catch::Contains("window 11 (") && Catch::Contains("past the end of the function"));
  CHECK_THAT(r.err, Catch::Contains("window 12 (") && Catch::Contains("outside the covered text"));
  CHECK_THAT(r.err, Catch::Contains("window 13 (") && Catch::Contains("above the limit"));
  CHECK_THAT(r.err, Catch::Contains("4 rejected"));
  auto folded = parse_folded(jt::read_file(dir / "f.txt"));
  uint64_t looped = 0, good = 0;
  for (const auto& [stack, count] : folded) {
    if (stack.find("[cut: stack did not move up];jit:loop_outer;jit:loop_inner") !=
        std::string::npos) {
      looped += count;
    }
    if (stack.find(";main;jit:entry;jit:rec") != std::string::npos) good += count;
  }
  INFO(jt::read_file(dir / "f.txt").substr(0, 3000));
  CHECK(looped > 50);  // the self-referencing frames stop the walk cleanly
  CHECK(good > 50);    // the good window kept being unwound meanwhile
}
#endif
