// `jitunwind usdt fire/list` with bpftrace, and perf recording dynamic probes in both modes.
#include <jitunwind/usdt.h>

#include "support/privileges.hpp"
#include "tracer_support.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <sstream>
#include <utility>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;
using namespace std::chrono_literals;

namespace {

std::string cli() {
  return binary_path("tools/jitunwind/jitunwind");
}

bool tracing_ready(const char* tool) {
  if (!may_run_privileged(tool) || !tool_available(tool)) return false;
  std::string why;
  if (!ensure_tracefs(&why)) FAIL(why);
  return true;
}

// Records `event` in this process with perf while firing `p`, returns `perf script` output.
std::string perf_record_while_firing(const probe& p, const std::string& event,
                                     const temp_dir& dir) {
  const std::string data = dir / "perf.data";
  background_run rec({"perf", "record", "-q", "-e", event, "-p", std::to_string(getpid()), "-o",
                      data, "--", "sleep", "3"},
                     60s);
  // perf passes the semaphore offset to the kernel (uprobe ref_ctr_offset) like bpftrace.
  CHECK(wait_until([&] { return p.enabled() || rec.done(); }, 30s));
  CHECK(p.enabled());
  while (!rec.done()) {
    p.fire(int32_t{-5}, UINT64_MAX, int16_t{-2});
    std::this_thread::sleep_for(2ms);
  }
  const run_result& r = rec.wait();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(wait_until([&] { return !p.enabled(); }, 10s));
  auto script = run({"perf", "script", "-i", data}, {}, 60s);
  INFO(script.err);
  CHECK(script.exit_code == 0);
  return script.out;
}

// perf script (libtraceevent) prints the kernel's s16 field 0xfffe as 65534; the kernel
// fetched -2 from the probe site's %dx either way (the bits are what the test checks).
bool has_expected_args(const std::string& out) {
  return out.find("arg1=-5 arg2=18446744073709551615 arg3=-2\n") != std::string::npos ||
         out.find("arg1=-5 arg2=18446744073709551615 arg3=65534\n") != std::string::npos;
}

provider make_provider(const std::string& name, object_location where, probe* out) {
  provider_options o;
  o.location = where;
  auto prov = provider::create(name, o);
  REQUIRE(prov.ok());
  auto p = prov->add_probe("evt", {arg_type::i32, arg_type::u64, arg_type::i16});
  REQUIRE(p.ok());
  REQUIRE(prov->load().ok());
  *out = *p;
  return std::move(*prov);
}

}  // namespace

TEST_CASE("jitunwind usdt fire: bpftrace -p receives the values given on the command line") {
  if (!tracing_ready("bpftrace")) return;
  temp_dir dir;
  const std::string out = dir / "fire.out";
  const std::string prov = unique_provider("clifire");
  std::ostringstream script;
  script << "'" << cli() << "' usdt fire --provider " << prov
         << " --probe ev --args i32:-5,str:hi,u64:18446744073709551615,i8:-128 --wait-attach "
            "--timeout-s 60 --count 400 --interval-ms 5 > '"
         << out << "' & "
         << "for i in $(seq 1 3000); do grep -q '^pid:' '" << out
         << "' && break; sleep 0.01; done; "
         << "pid=$(sed -n 's/^pid: //p' '" << out << "'); "
         << "bpftrace -p $pid -e 'usdt:*:" << prov
         << ":ev { printf(\"got %d %s %llu %d\\n\", arg0, str(arg1), arg2, arg3); exit(); }'; "
         << "wait $!; echo \"fire exit $?\"; cat '" << out << "'";
  auto r = run_shell(script.str(), 120s);
  INFO(r.out << r.err);
  CHECK(r.out.find("got -5 hi 18446744073709551615 -128\n") != std::string::npos);
  CHECK(r.out.find("fire exit 0") != std::string::npos);
  CHECK(r.out.find("enabled: yes") != std::string::npos);
  CHECK(r.out.find("fired: 400") != std::string::npos);
  CHECK(r.out.find("arguments: -4@%edi 8@%rsi 8@%rdx -1@%cl") != std::string::npos);
}

TEST_CASE("jitunwind usdt fire: bad values and names are refused with clear messages") {
  auto r = run({cli(), "usdt", "fire", "--provider", "p", "--probe", "x", "--args", "u8:256"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("value '256' for u8: out of range") != std::string::npos);
  r = run({cli(), "usdt", "fire", "--provider", "p", "--probe", "x", "--args", "f64:1.5"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("f64 is not supported") != std::string::npos);
  r = run({cli(), "usdt", "fire", "--provider", "bad-name", "--probe", "x"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("'-' at position 3") != std::string::npos);
  r = run({cli(), "usdt", "list", "-p", "999999999"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("no process 999999999") != std::string::npos);
  r = run({cli(), "usdt", "list", "-p", "12ab"});
  CHECK(r.exit_code == 2);
  r = run({cli(), "usdt", "fire", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("--wait-attach") != std::string::npos);
}

TEST_CASE("jitunwind usdt fire: a value past 64 bits is out of range, naming the range") {
  // strtoull's overflow was reported like text that is no number at all ("not a number").
  const std::string u64_range = "out of range (0 to 18446744073709551615)";
  const std::string i64_range = "out of range (-9223372036854775808 to 9223372036854775807)";
  const std::pair<std::string, std::string> cases[] = {
      {"u64:18446744073709551616",
       "argument 0: value '18446744073709551616' for u64: " + u64_range},
      {"i32:1,u64:0x10000000000000000",
       "argument 1: value '0x10000000000000000' for u64: " + u64_range},
      {"ptr:99999999999999999999",
       "argument 0: value '99999999999999999999' for u64: " + u64_range},
      {"i64:9223372036854775808", "argument 0: value '9223372036854775808' for i64: " + i64_range},
      {"i64:-99999999999999999999", "value '-99999999999999999999' for i64: " + i64_range},
      {"u8:99999999999999999999", "value '99999999999999999999' for u8: out of range (0 to 255)"},
      {"i8:-129", "value '-129' for i8: out of range (-128 to 127)"},
      {"u64:-99999999999999999999", "for u64: negative value for an unsigned type"},
  };
  for (const auto& [args, message] : cases) {
    auto r = run({cli(), "usdt", "fire", "--provider", "p", "--probe", "x", "--args", args});
    INFO(args << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
  // Options too: past 64 bits is more than the limit, as any other value above it.
  auto r = run({cli(), "usdt", "fire", "--provider", "p", "--probe", "x", "--count",
                "18446744073709551616"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--count: 18446744073709551616 is more than 18446744073709551615") !=
        std::string::npos);
}

TEST_CASE("jitunwind usdt list shows providers, probes and whether each is enabled") {
  if (!tracing_ready("bpftrace")) return;
  probe p;
  const std::string name = unique_provider("listed");
  provider prov = make_provider(name, object_location::memfd, &p);
  auto listing = run({cli(), "usdt", "list", "-p", std::to_string(getpid())});
  INFO(listing.out << listing.err);
  CHECK(listing.exit_code == 0);
  CHECK(listing.out.find("/memfd:jitunwind-usdt:" + name) != std::string::npos);
  CHECK(listing.out.find(name + ":evt  disabled  [-4@%edi 8@%rsi -2@%dx]") != std::string::npos);

  // bpftrace stays attached until the probe fires (a timer would start before the probe is
  // attached, and a slow attach could use it up before the listing).
  background_run tracer(bpftrace_command("usdt:*:" + name + ":evt { exit(); }", getpid()), 60s);
  REQUIRE(wait_until([&] { return p.enabled() || tracer.done(); }, 60s));
  listing = run({cli(), "usdt", "list", "-p", std::to_string(getpid())});
  INFO(listing.out << listing.err);
  CHECK(listing.out.find(name + ":evt  enabled (semaphore 1)") != std::string::npos);
  CHECK(wait_until(
      [&] {
        p.fire(int32_t{-5}, UINT64_MAX, int16_t{-2});
        return tracer.done();
      },
      60s));
  tracer.wait();
}

TEST_CASE("perf records dynamic probes: buildid-cache + perf probe (file mode)") {
  if (!tracing_ready("perf")) return;
  uprobe_events_lock events;
  temp_dir dir;
  probe p;
  const std::string name = unique_provider("pf");
  provider prov = make_provider(name, object_location::file, &p);
  const std::string env = "PERF_BUILDID_DIR='" + dir.path() + "/buildid' ";
  auto add = run_shell(env + "perf buildid-cache --add '" + prov.object_path() + "' 2>&1");
  INFO(add.out);
  REQUIRE(add.exit_code == 0);
  const std::string event = "sdt_" + name + ":evt";
  auto def = run_shell(env + "perf probe " + event + " 2>&1");
  INFO(def.out);
  REQUIRE(def.exit_code == 0);
  const std::string out = perf_record_while_firing(p, event, dir);
  run_shell(env + "perf probe -d '" + event + "' 2>&1");
  INFO(out.substr(0, 2000));
  CHECK(out.find(event + ":") != std::string::npos);
  CHECK(has_expected_args(out));
}

TEST_CASE(
    "perf records dynamic probes defined from `jitunwind usdt list --uprobe-events` (memfd)") {
  if (!tracing_ready("perf")) return;
  uprobe_events_lock events;
  temp_dir dir;
  probe p;
  const std::string name = unique_provider("pm");
  provider prov = make_provider(name, object_location::memfd, &p);
  auto lines = run({cli(), "usdt", "list", "-p", std::to_string(getpid()), "--uprobe-events"});
  INFO(lines.out << lines.err);
  REQUIRE(lines.exit_code == 0);
  CHECK(lines.out.find("p:sdt_" + name + "/evt " + prov.object_path() + ":0x") == 0);
  CHECK(lines.out.find("arg1=%di:s32 arg2=%si:u64 arg3=%dx:s16") != std::string::npos);
  REQUIRE(write_file(dir / "events", lines.out));
  auto defined =
      run_shell("cat '" + dir / "events" + "' >> /sys/kernel/tracing/uprobe_events 2>&1");
  INFO(defined.out);
  REQUIRE(defined.exit_code == 0);
  const std::string event = "sdt_" + name + ":evt";
  const std::string out = perf_record_while_firing(p, event, dir);
  run_shell("echo '-:sdt_" + name + "/evt' >> /sys/kernel/tracing/uprobe_events");
  INFO(out.substr(0, 2000));
  CHECK(has_expected_args(out));
}
