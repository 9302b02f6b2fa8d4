// bpftrace 0.17 (bcc 0.26) attaching to dynamic probes, by path and with -p, in both modes.
// The test process is the traced process: it fires while bpftrace runs in the background.
#include <jitunwind/usdt.h>

#include "full_probe.hpp"
#include "support/privileges.hpp"
#include "tracer_support.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <climits>
#include <map>
#include <sstream>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;
using namespace std::chrono_literals;

namespace {

bool bpftrace_ready() {
  if (!may_run_privileged("bpftrace") || !tool_available("bpftrace")) return false;
  std::string why;
  if (!ensure_tracefs(&why)) {
    FAIL(why);
    return false;
  }
  return true;
}

// Fires `fire` every millisecond until bpftrace has finished (it exits after its first event),
// checking the semaphore protocol on the way: disabled before, enabled while attached,
// disabled again after bpftrace detached.
template <class Fire>
run_result trace_while_firing(const probe& p, std::vector<std::string> argv, Fire fire) {
  CHECK(!p.enabled());
  background_run tracer(std::move(argv), 60s);
  const bool attached = wait_until([&] { return p.enabled() || tracer.done(); }, 60s);
  CHECK(attached);
  CHECK(p.enabled());
  // The kernel increments the semaphore when it registers the uprobe, a moment before the
  // tracer has its program attached: keep firing until the tracer has seen an event.
  while (!tracer.done()) {
    fire();
    std::this_thread::sleep_for(1ms);
  }
  const run_result& r = tracer.wait();
  CHECK(wait_until([&] { return !p.enabled(); }, 10s));
  return r;
}

// bpftrace 0.17 names only arg0..arg5 on x86-64 (its semantic analyser caps argN at the
// register arguments, for every probe type). Arguments 6..11 are read from the stack slots
// the note names: N@8(%rsp), N@16(%rsp), ...
std::string full_script(const std::string& target, const std::string& provider_name) {
  std::ostringstream s;
  s << "usdt:" << target << ":" << provider_name << ":all { "
    << "printf(\"R %d %u %d %u %d %u\\n\", arg0, arg1, arg2, arg3, arg4, arg5); "
    << "printf(\"S %lld %llu %llx %s %d %lld\\n\", *(int64*)(reg(\"sp\") + 8), "
    << "*(uint64*)(reg(\"sp\") + 16), *(uint64*)(reg(\"sp\") + 24), "
    << "str(*(uint64*)(reg(\"sp\") + 32)), *(int32*)(reg(\"sp\") + 40), "
    << "*(int64*)(reg(\"sp\") + 48)); exit(); }";
  return s.str();
}

void check_full_output(const run_result& r) {
  INFO("bpftrace stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("R -128 255 -32768 65535 -2147483648 4294967295\n") != std::string::npos);
  std::ostringstream s;
  s << "S -9223372036854775808 18446744073709551615 " << std::hex
    << reinterpret_cast<uintptr_t>(&full_marker) << std::dec << " " << full_text_arg
    << " -7 9223372036854775807\n";
  CHECK(r.out.find(s.str()) != std::string::npos);
}

}  // namespace

TEST_CASE("bpftrace -p PID receives every argument exactly (memfd)") {
  if (!bpftrace_ready()) return;
  full_probe f = make_full_probe("bt", object_location::memfd);
  auto r = trace_while_firing(f.p, bpftrace_command(full_script("*", f.prov.name()), getpid()),
                              [&] { fire_full(f.p); });
  check_full_output(r);
}

TEST_CASE("bpftrace by path receives every argument exactly (memfd via /proc/PID/fd/N)") {
  if (!bpftrace_ready()) return;
  full_probe f = make_full_probe("bt", object_location::memfd);
  auto r =
      trace_while_firing(f.p, bpftrace_command(full_script(f.prov.object_path(), f.prov.name())),
                         [&] { fire_full(f.p); });
  check_full_output(r);
}

TEST_CASE("bpftrace by path and with -p receives every argument exactly (file mode)") {
  if (!bpftrace_ready()) return;
  full_probe f = make_full_probe("bt", object_location::file);
  auto by_path =
      trace_while_firing(f.p, bpftrace_command(full_script(f.prov.object_path(), f.prov.name())),
                         [&] { fire_full(f.p); });
  check_full_output(by_path);
  auto by_pid = trace_while_firing(f.p, bpftrace_command(full_script("*", f.prov.name()), getpid()),
                                   [&] { fire_full(f.p); });
  check_full_output(by_pid);
}

TEST_CASE("bpftrace sees probes with 0 to 12 arguments") {
  if (!bpftrace_ready()) return;
  auto prov = provider::create(unique_provider("counts"));
  REQUIRE(prov.ok());
  std::vector<probe> probes;
  for (size_t n = 0; n <= max_args; ++n)
    probes.push_back(
        prov->add_probe("p" + std::to_string(n), std::vector<arg_type>(n, arg_type::i64)).value());
  REQUIRE(prov->load().ok());
  // Each probe prints its argument count's worth of values once (arg k = -(100 n + k)); the
  // script exits when all 13 have been seen.
  std::ostringstream script;
  for (size_t n = 0; n <= max_args; ++n) {
    script << "usdt:*:" << prov->name() << ":p" << n << " /@seen" << n << " == 0/ { @seen" << n
           << " = 1; printf(\"p" << n;
    for (size_t k = 0; k < n; ++k) script << " %lld";
    script << "\\n\"";
    for (size_t k = 0; k < n; ++k) {
      if (k < 6)
        script << ", arg" << k;
      else
        script << ", *(int64*)(reg(\"sp\") + " << 8 * (k - 5) << ")";
    }
    script << "); @total = @total + 1; if (@total == 13) { exit(); } } ";
  }
  script << "END { clear(@total); ";
  for (size_t n = 0; n <= max_args; ++n) script << "clear(@seen" << n << "); ";
  script << "}";
  auto fire_all = [&] {
    for (size_t n = 0; n <= max_args; ++n) {
      std::vector<uint64_t> v(n);
      for (size_t k = 0; k < n; ++k)
        v[k] = static_cast<uint64_t>(-static_cast<int64_t>(100 * n + k));
      probes[n].fire_slots(v.data(), n);
    }
  };
  auto r = trace_while_firing(probes[12], bpftrace_command(script.str(), getpid()), fire_all);
  INFO(r.out << r.err);
  for (size_t n = 0; n <= max_args; ++n) {
    std::string line = "p" + std::to_string(n);
    for (size_t k = 0; k < n; ++k) line += " " + std::to_string(-static_cast<int64_t>(100 * n + k));
    CHECK(r.out.find(line + "\n") != std::string::npos);
  }
}

TEST_CASE("unload and reload while bpftrace is attached: no crash, the old probes go away") {
  if (!bpftrace_ready()) return;
  const std::string name = unique_provider("reload");
  auto prov = provider::create(name);
  REQUIRE(prov.ok());
  auto old_probe = prov->add_probe("old", {arg_type::i32});
  REQUIRE(old_probe.ok());
  REQUIRE(prov->load().ok());

  // bpftrace prints every event and stays attached until a probe of another provider, which
  // stays loaded, tells it to end (a timer would start before the probes are attached).
  const std::string control_name = unique_provider("reload_ctl");
  auto control = provider::create(control_name);
  REQUIRE(control.ok());
  auto stop = control->add_probe("stop", {arg_type::i32});
  REQUIRE(stop.ok());
  REQUIRE(control->load().ok());
  background_run tracer(bpftrace_command("usdt:*:" + name +
                                             ":old { printf(\"old %d\\n\", arg0); } "
                                             "usdt:*:" +
                                             control_name + ":stop { exit(); }",
                                         getpid()),
                        60s);
  REQUIRE(wait_until([&] { return stop->enabled() || tracer.done(); }, 60s));
  REQUIRE(wait_until([&] { return old_probe->enabled() || tracer.done(); }, 60s));
  // Fire for ~300 ms so that bpftrace's program is attached and sees events.
  for (int i = 0; i < 150; ++i) {
    old_probe->fire(i);
    std::this_thread::sleep_for(2ms);
  }
  REQUIRE(!tracer.done());
  // Unload while attached, fire the stale handle, reload a different probe set.
  REQUIRE(prov->unload().ok());
  old_probe->fire(-1);  // inert
  CHECK(!old_probe->enabled());
  REQUIRE(prov->remove_probe("old").ok());
  auto fresh = prov->add_probe("fresh", {arg_type::u64});
  REQUIRE(fresh.ok());
  REQUIRE(prov->load().ok());
  for (int i = 0; i < 100; ++i) fresh->fire(uint64_t{42});
  CHECK(!fresh->enabled());  // bpftrace's uprobe is on the old object's inode

  // A fresh bpftrace lists what the process has now: the new probe, not the old one.
  auto listing =
      run({"bpftrace", "-l", "usdt:*:" + name + ":*", "-p", std::to_string(getpid())}, {}, 60s);
  INFO(listing.out << listing.err);
  CHECK(listing.out.find(name + ":fresh") != std::string::npos);
  CHECK(listing.out.find(name + ":old") == std::string::npos);
  REQUIRE(prov->unload().ok());
  CHECK(wait_until(
      [&] {
        stop->fire(0);
        return tracer.done();
      },
      60s));
  const run_result& r = tracer.wait();
  INFO(r.out << r.err);
  // It saw old events (the last ones at least) and never the stale fire (-1).
  CHECK(r.out.find("old 149\n") != std::string::npos);
  CHECK(r.out.find("old -1\n") == std::string::npos);
}

namespace {

// Two loaded providers named alike, each with probe "ev (i32)": separate objects, semaphores
// and memfds, one provider:probe name.
struct twins {
  provider a, b;
  probe pa, pb;
};

twins make_twins(const std::string& name) {
  auto a = provider::create(name);
  auto b = provider::create(name);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto pa = a->add_probe("ev", {arg_type::i32});
  auto pb = b->add_probe("ev", {arg_type::i32});
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  REQUIRE(a->load().ok());
  REQUIRE(b->load().ok());
  REQUIRE(a->object_path() != b->object_path());
  return {std::move(*a), std::move(*b), *pa, *pb};
}

}  // namespace

TEST_CASE("two providers with the same name: bpftrace by path reaches each of them") {
  if (!bpftrace_ready()) return;
  const std::string name = unique_provider("twin");
  twins t = make_twins(name);
  // One probe per object, each named by the path of its memfd; the script ends once it has seen
  // an event of each.
  const std::string script =
      "usdt:" + t.a.object_path() + ":" + name + ":ev /@a == 0/ { @a = 1; printf(\"saw %d\\n\", " +
      "arg0); if (@b == 1) { exit(); } } usdt:" + t.b.object_path() + ":" + name +
      ":ev /@b == 0/ { @b = 1; printf(\"saw %d\\n\", arg0); if (@a == 1) { exit(); } } " +
      "END { clear(@a); clear(@b); }";
  background_run tracer(bpftrace_command(script), 60s);
  CHECK(wait_until([&] { return (t.pa.enabled() && t.pb.enabled()) || tracer.done(); }, 60s));
  CHECK(t.pa.enabled());
  CHECK(t.pb.enabled());
  while (!tracer.done()) {
    t.pa.fire(int32_t{1});
    t.pb.fire(int32_t{2});
    std::this_thread::sleep_for(1ms);
  }
  const run_result& r = tracer.wait();
  INFO("bpftrace stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("saw 1\n") != std::string::npos);
  CHECK(r.out.find("saw 2\n") != std::string::npos);
  CHECK(wait_until([&] { return !t.pa.enabled() && !t.pb.enabled(); }, 10s));
}

TEST_CASE("two providers with the same name: bpftrace 0.17 -p reaches only one of them") {
  // What docs/usdt.md says about `bpftrace -p`, checked: bcc merges the objects' probes into one
  // probe (same provider and name) whose path is the first object's, and bpftrace 0.17 attaches
  // every site of that probe to that one file. So one object is traced, twice over (each of its
  // events is reported twice), and the other not at all. Names do not matter: bcc reaches a
  // memfd through /proc/PID/fd/N. If a newer bpftrace reaches both, update docs/usdt.md.
  if (!bpftrace_ready()) return;
  const std::string name = unique_provider("twin");
  twins t = make_twins(name);
  background_run tracer(bpftrace_command("usdt:*:" + name +
                                             ":ev { printf(\"v %d\\n\", arg0); @n = @n + 1; "
                                             "if (@n >= 400) { exit(); } } END { clear(@n); }",
                                         getpid()),
                        60s);
  CHECK(wait_until([&] { return t.pa.enabled() || t.pb.enabled() || tracer.done(); }, 60s));
  // a fires odd values, b even ones: every value tells which object fired it.
  bool a_enabled = false, b_enabled = false;
  for (int32_t i = 0; !tracer.done(); ++i) {
    a_enabled = a_enabled || t.pa.enabled();
    b_enabled = b_enabled || t.pb.enabled();
    t.pa.fire(int32_t{2 * i + 1});
    t.pb.fire(int32_t{2 * i});
    std::this_thread::sleep_for(1ms);
  }
  const run_result& r = tracer.wait();
  INFO("bpftrace stdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.exit_code == 0);
  // Only one semaphore was ever raised (the kernel raises the one of the file it attached to).
  CHECK(a_enabled != b_enabled);
  std::map<int, int> times;
  std::istringstream lines(r.out);
  std::string word;
  int value = 0;
  while (lines >> word) {
    if (word == "v" && lines >> value) ++times[value];
  }
  REQUIRE(!times.empty());
  int odd = 0, even = 0, twice = 0;
  for (const auto& [v, n] : times) {
    (v % 2 != 0 ? odd : even) += n;
    if (n == 2) ++twice;
  }
  CHECK((odd == 0) != (even == 0));
  CHECK((odd != 0) == a_enabled);
  CHECK(twice > 0);
}
