// libbpf's bpf_program__attach_usdt on dynamic probes: it parses the notes' argument specs
// itself (all 12), applies the .stapsdt.base adjustment, converts addresses to file offsets
// through PT_LOAD segments and hands the kernel the semaphore's offset.
#include <jitunwind/usdt.h>

#include "full_probe.hpp"
#include "support/privileges.hpp"
#include "tracer_support.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <climits>
#include <cstring>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;
using namespace std::chrono_literals;

namespace {

struct record {
  uint64_t hits;
  int64_t arg_count;
  int64_t rc[12];
  long args[12];
  char strings[12][16];
};

struct bpf_deleter {
  void operator()(bpf_object* o) const { bpf_object__close(o); }
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};

void check_attach(object_location where) {
  full_probe f = make_full_probe("lb", where);

  std::unique_ptr<bpf_object, bpf_deleter> obj(
      bpf_object__open_file(USDT_TEST_BPF_OBJECT, nullptr));
  REQUIRE(obj != nullptr);
  REQUIRE(bpf_object__load(obj.get()) == 0);
  bpf_program* prog = bpf_object__find_program_by_name(obj.get(), "record_args");
  REQUIRE(prog != nullptr);
  const int map_fd = bpf_object__find_map_fd_by_name(obj.get(), "records");
  REQUIRE(map_fd >= 0);

  // A memfd object is attached for every process mapping it (pid -1): for a specific pid,
  // libbpf 1.1 resolves the path with realpath() to match /proc/PID/maps, which fails for
  // /proc/PID/fd/N -> "/memfd:... (deleted)". A file object works per pid.
  const int pid = where == object_location::memfd ? -1 : getpid();
  CHECK(!f.p.enabled());
  std::unique_ptr<bpf_link, bpf_deleter> link(bpf_program__attach_usdt(
      prog, pid, f.prov.object_path().c_str(), f.prov.name().c_str(), "all", nullptr));
  INFO("attach: " << std::strerror(errno));
  REQUIRE(link != nullptr);
  CHECK(f.p.enabled());  // the kernel incremented the semaphore (uprobe ref_ctr_offset)

  record r{};
  const uint32_t key = 0;
  const bool hit = wait_until(
      [&] {
        fire_full(f.p);
        return bpf_map_lookup_elem(map_fd, &key, &r) == 0 && r.hits > 0;
      },
      10s);
  REQUIRE(hit);
  CHECK(r.arg_count == 12);
  for (int i = 0; i < 12; ++i) CHECK(r.rc[i] == 0);
  CHECK(r.args[0] == -128);
  CHECK(r.args[1] == 255);
  CHECK(r.args[2] == -32768);
  CHECK(r.args[3] == 65535);
  CHECK(r.args[4] == INT32_MIN);
  CHECK(r.args[5] == static_cast<long>(UINT32_MAX));
  CHECK(r.args[6] == INT64_MIN);
  CHECK(static_cast<uint64_t>(r.args[7]) == UINT64_MAX);
  CHECK(static_cast<uintptr_t>(r.args[8]) == reinterpret_cast<uintptr_t>(&full_marker));
  CHECK(std::string(r.strings[9]) == "hello usdt");
  CHECK(r.args[10] == -7);
  CHECK(r.args[11] == INT64_MAX);

  link.reset();
  CHECK(wait_until([&] { return !f.p.enabled(); }, 10s));
  REQUIRE(f.prov.unload().ok());
}

}  // namespace

TEST_CASE("libbpf bpf_program__attach_usdt reads all 12 arguments and drives the semaphore") {
  if (!may_run_privileged("libbpf USDT attach")) return;
  SECTION("memfd") {
    check_attach(object_location::memfd);
  }
  SECTION("file") {
    check_attach(object_location::file);
  }
}
