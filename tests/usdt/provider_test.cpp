// Declaring, validating, loading and unloading providers; the generated object as the
// binutils, elfutils and LLVM readers see it.
#include <jitunwind/jitunwind.h>
#include <jitunwind/usdt.h>

#include "support/privileges.hpp"
#include "support/process.hpp"
#include "tracer_support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

using namespace jitunwind;
using namespace jitunwind::usdt;
using namespace jitunwind::test;

namespace {

const std::vector<arg_type> all_types = {arg_type::i8,     arg_type::u8,  arg_type::i16,
                                         arg_type::u16,    arg_type::i32, arg_type::u32,
                                         arg_type::i64,    arg_type::u64, arg_type::pointer,
                                         arg_type::string, arg_type::i32, arg_type::i64};

std::string copy_object(const provider& p, const temp_dir& dir, const std::string& name) {
  const std::string out = dir / name;
  REQUIRE(write_file(out, read_file(p.object_path())));
  return out;
}

}  // namespace

TEST_CASE("argument strings name the SysV registers, then the caller's stack slots") {
  auto s = argument_string(all_types);
  REQUIRE(s.ok());
  CHECK(*s ==
        "-1@%dil 1@%sil -2@%dx 2@%cx -4@%r8d 4@%r9d "
        "-8@8(%rsp) 8@16(%rsp) 8@24(%rsp) 8@32(%rsp) -4@40(%rsp) -8@48(%rsp)");
  CHECK(argument_string({}).value().empty());
  const std::vector<arg_type> regs = {arg_type::u64, arg_type::i16, arg_type::u32,
                                      arg_type::i8,  arg_type::u16, arg_type::i64};
  CHECK(argument_string(regs).value() == "8@%rdi -2@%si 4@%edx -1@%cl 2@%r8w -8@%r9");
}

TEST_CASE("names, argument lists and states are validated with clear errors") {
  CHECK(provider::create("").error().code() == errc::invalid_argument);
  auto bad = provider::create("my-provider");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message().find("'-' at position 2") != std::string::npos);
  CHECK(!provider::create("9lives").ok());
  auto reserved = provider::create("jitunwind");  // the SDK's own static events
  REQUIRE_FALSE(reserved.ok());
  CHECK_THAT(reserved.error().message(), Catch::Contains("reserved"));
  CHECK(!provider::create(std::string(max_provider_name + 1, 'a')).ok());
  CHECK(provider::create(std::string(max_provider_name, 'a')).ok());
  CHECK(provider::create("p", {object_location::memfd, "/tmp", {}}).error().code() ==
        errc::invalid_argument);

  auto p = provider::create("valid_provider");
  REQUIRE(p.ok());
  CHECK(p->add_probe("bad name", {}).error().code() == errc::invalid_argument);
  CHECK(p->add_probe("caf\xc3\xa9", {}).error().message().find("0xc3") != std::string::npos);
  CHECK(p->add_probe(std::string(max_probe_name + 1, 'x'), {}).error().code() ==
        errc::invalid_argument);
  std::vector<arg_type> thirteen(13, arg_type::i32);
  auto too_many = p->add_probe("many", thirteen);
  REQUIRE(!too_many.ok());
  CHECK(too_many.error().code() == errc::limit_exceeded);
  CHECK(too_many.error().message().find("13 arguments") != std::string::npos);
  auto dbl = p->add_probe("dbl", {arg_type::i32, arg_type::f64});
  REQUIRE(!dbl.ok());
  CHECK(dbl.error().code() == errc::unsupported);
  CHECK(dbl.error().message().find("argument 1: f64") != std::string::npos);
  CHECK(p->add_probe("odd", {static_cast<arg_type>(200)}).error().code() == errc::invalid_argument);
  CHECK(p->probes().empty());  // nothing declared by a failed call

  CHECK(p->load().error().code() == errc::bad_state);  // no probes
  REQUIRE(p->add_probe("once", {arg_type::i32}).ok());
  CHECK(p->add_probe("once", {}).error().code() == errc::already_exists);
  CHECK(p->remove_probe("never").error().code() == errc::not_found);
  REQUIRE(p->load().ok());
  CHECK(p->load().error().code() == errc::bad_state);
  CHECK(p->add_probe("late", {}).error().code() == errc::bad_state);
  CHECK(p->remove_probe("once").error().code() == errc::bad_state);
  REQUIRE(p->unload().ok());
  CHECK(p->unload().ok());  // idempotent

  CHECK(parse_arg_type("ptr") == arg_type::pointer);
  CHECK(parse_arg_type("string") == arg_type::string);
  CHECK(!parse_arg_type("i128").has_value());
  CHECK(std::string(to_string(arg_type::u16)) == "u16");
}

TEST_CASE("a loaded memfd object is a valid shared object for readelf, elfutils and LLVM") {
  if (!tool_available("readelf") || !tool_available("eu-elflint") ||
      !tool_available("llvm-readobj-22") || !tool_available("objcopy"))
    return;
  auto p = provider::create("objtest");
  REQUIRE(p.ok());
  auto a = p->add_probe("entry", {arg_type::i32, arg_type::string});
  auto b = p->add_probe("all", all_types);
  auto c = p->add_probe("none", {});
  REQUIRE((a.ok() && b.ok() && c.ok()));
  REQUIRE(p->load().ok());
  CHECK(p->object_path() == "/proc/" + std::to_string(getpid()) + "/fd/" +
                                p->object_path().substr(p->object_path().rfind('/') + 1));
  // /proc/PID/maps shows the memfd, which is how tracers find it with -p.
  const std::string maps = read_file("/proc/self/maps");
  CHECK(maps.find("/memfd:jitunwind-usdt:objtest (deleted)") != std::string::npos);

  temp_dir dir;
  const std::string so = copy_object(*p, dir, "obj.so");

  auto notes = run({"readelf", "-n", so});
  REQUIRE(notes.exit_code == 0);
  CHECK(notes.err.empty());
  CHECK(notes.out.find("NT_STAPSDT") != std::string::npos);
  CHECK(notes.out.find("Provider: objtest") != std::string::npos);
  CHECK(notes.out.find("Arguments: -4@%edi 8@%rsi") != std::string::npos);
  CHECK(notes.out.find("Arguments: " + b->arg_string()) != std::string::npos);
  CHECK(notes.out.find("NT_GNU_BUILD_ID") != std::string::npos);

  auto sections = run({"readelf", "-W", "-S", "-l", so});
  REQUIRE(sections.exit_code == 0);
  CHECK(sections.err.empty());
  // .probes: writable, allocated; .stapsdt.base allocated.
  CHECK(sections.out.find(".probes           PROGBITS") != std::string::npos);
  CHECK(sections.out.find(".stapsdt.base") != std::string::npos);

  // elfutils 0.188 flags every stapsdt note as an unknown note type, also in objects that gcc
  // builds from <sys/sdt.h>; everything else must be clean.
  auto lint = run({"eu-elflint", so});
  std::string other_complaints;
  for (size_t pos = 0; pos < lint.out.size();) {
    const size_t nl = lint.out.find('\n', pos);
    const std::string line = lint.out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? lint.out.size() : nl + 1;
    if (line.find("unknown object file note type 3 with owner name 'stapsdt'") == std::string::npos)
      other_complaints += line + "\n";
  }
  CHECK(other_complaints.empty());
  CHECK(lint.out.find("unknown object file note type 3") != std::string::npos);
  const std::string stripped = dir / "stripped.so";
  REQUIRE(run({"objcopy", "--remove-section=.note.stapsdt", so, stripped}).exit_code == 0);
  auto lint2 = run({"eu-elflint", stripped});
  INFO(lint2.out);
  CHECK(lint2.exit_code == 0);
  CHECK(lint2.out == "No errors\n");

  auto llvm = run({"llvm-readobj-22", "--notes", so});
  REQUIRE(llvm.exit_code == 0);
  CHECK(llvm.err.empty());
  CHECK(llvm.out.find("Owner: stapsdt") != std::string::npos);

  // Our own decoder agrees with what we wrote, and the addresses are consistent: each probe
  // site lies in the executable segment, each semaphore in .probes, the base in
  // .stapsdt.base, and link-time addresses equal file offsets.
  auto decoded = read_sdt_notes(
      std::span(reinterpret_cast<const uint8_t*>(read_file(so).data()), read_file(so).size()));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->size() == 3);
  const std::string image = read_file(so);
  for (const auto& n : *decoded) {
    CHECK(n.provider == "objtest");
    REQUIRE(n.pc < image.size());
    CHECK(static_cast<uint8_t>(image[n.pc]) == 0x90);      // nop: the probe site
    CHECK(static_cast<uint8_t>(image[n.pc + 1]) == 0xc3);  // ret
    CHECK(n.semaphore != 0);
    CHECK(n.base != 0);
  }
  CHECK((*decoded)[1].args == b->arg_string());
  // In the process, the handle's semaphore is the note's address plus the load address.
  CHECK(reinterpret_cast<uintptr_t>(b->semaphore_address()) ==
        p->load_address() + (*decoded)[1].semaphore);
  CHECK(reinterpret_cast<uintptr_t>(b->site_address()) == p->load_address() + (*decoded)[1].pc);
}

TEST_CASE("a provider's first probes get consecutive semaphores from an aligned word on") {
  auto p = provider::create("semalayout");
  REQUIRE(p.ok());
  std::vector<probe> probes;
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    auto r = p->add_probe(name, {arg_type::i64});
    REQUIRE(r.ok());
    probes.push_back(*r);
  }
  const auto address = [](const probe& q) {
    return reinterpret_cast<uintptr_t>(q.semaphore_address());
  };
  CHECK(address(probes[0]) % 8 == 0);
  for (size_t i = 1; i < probes.size(); ++i)
    CHECK(address(probes[i]) == address(probes[0]) + 2 * i);
  // The layout is the same once loaded (the addresses are fixed from add_probe on).
  REQUIRE(p->load().ok());
  for (size_t i = 1; i < probes.size(); ++i)
    CHECK(address(probes[i]) == address(probes[0]) + 2 * i);
}

TEST_CASE("probes fire without a tracer, and are inert after unload and destruction") {
  auto p = provider::create("lifecycle");
  REQUIRE(p.ok());
  auto a = p->add_probe("a", {arg_type::i64});
  REQUIRE(a.ok());
  probe inert;
  CHECK(!inert.enabled());
  inert.fire();  // no-op
  CHECK(!a->loaded());
  a->fire(int64_t{1});  // not loaded yet: no-op
  REQUIRE(p->load().ok());
  CHECK(a->loaded());
  CHECK(!a->enabled());
  a->fire(int64_t{-1});
  const uint64_t slots[] = {7};
  a->fire_slots(slots, 1);
  const std::string path = p->object_path();
  REQUIRE(p->unload().ok());
  CHECK(p->object_path().empty());
  CHECK(!a->loaded());
  CHECK(!a->enabled());
  const volatile uint16_t* sem = a->semaphore_address();
  REQUIRE(sem != nullptr);
  CHECK(*sem == 0);     // still mapped: zero pages
  a->fire(int64_t{2});  // documented no-op, never a crash
  CHECK(read_file("/proc/self/maps").find("jitunwind-usdt:lifecycle") == std::string::npos);

  // Reload with a different probe set: the surviving handle is live again, and its semaphore
  // did not move (code that embedded the address keeps working).
  REQUIRE(p->add_probe("b", {arg_type::string}).ok());
  REQUIRE(p->load().ok());
  CHECK(a->loaded());
  CHECK(a->semaphore_address() == sem);
  a->fire(int64_t{3});
  {
    provider moved = std::move(*p);
    CHECK(moved.loaded());
  }  // destroyed: unloaded
  CHECK(!a->loaded());
  a->fire(int64_t{4});
  CHECK(!a->enabled());
  CHECK(*sem == 0);  // the handle keeps the provider's address range mapped
}

TEST_CASE("the semaphore the kernel increments is the one the handle reads") {
  // What a tracer's uprobe reference counter does: increment the u16 at the note's semaphore
  // address in the process. Emulated here through /proc/self/mem, which writes into the
  // private file mapping the same way the kernel's counter update does.
  auto p = provider::create("semtest");
  REQUIRE(p.ok());
  auto a = p->add_probe("a", {});
  auto b = p->add_probe("b", {arg_type::u32});
  REQUIRE((a.ok() && b.ok()));
  REQUIRE(p->load().ok());
  const std::string image = read_file(p->object_path());
  auto notes =
      read_sdt_notes(std::span(reinterpret_cast<const uint8_t*>(image.data()), image.size()));
  REQUIRE(notes.ok());
  REQUIRE(notes->size() == 2);
  const uintptr_t sem_b = p->load_address() + (*notes)[1].semaphore;
  CHECK(reinterpret_cast<uintptr_t>(b->semaphore_address()) == sem_b);
  const uint16_t one = 1;
  int fd = open("/proc/self/mem", O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(pwrite(fd, &one, sizeof one, static_cast<off_t>(sem_b)) == sizeof one);
  CHECK(b->enabled());
  CHECK(!a->enabled());
  REQUIRE(p->unload().ok());
  CHECK(!b->enabled());  // the counter lived in the object's pages, now replaced
  REQUIRE(p->load().ok());
  CHECK(!b->enabled());  // a fresh object starts with zero semaphores
  close(fd);
}

TEST_CASE("unload while other threads fire and check: they fire or return, never crash") {
  auto p = provider::create("racer");
  REQUIRE(p.ok());
  std::vector<probe> probes;
  for (int i = 0; i < 64; ++i) {
    auto pr = p->add_probe("p" + std::to_string(i), {arg_type::u64, arg_type::u64});
    REQUIRE(pr.ok());
    probes.push_back(*pr);
  }
  for (int round = 0; round < 20; ++round) {
    REQUIRE(p->load().ok());
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> calls{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
      threads.emplace_back([&, t] {
        uint64_t k = static_cast<uint64_t>(t);
        while (!stop.load(std::memory_order_relaxed)) {
          const probe& pr = probes[k++ % probes.size()];
          if (!pr.enabled()) pr.fire(k, uint64_t{42});
          calls.fetch_add(1, std::memory_order_relaxed);
        }
      });
    while (calls.load() < 1000) std::this_thread::yield();
    REQUIRE(p->unload().ok());  // while both threads keep firing
    const uint64_t after = calls.load();
    while (calls.load() < after + 1000) std::this_thread::yield();
    stop = true;
    for (auto& t : threads) t.join();
  }
  for (const auto& pr : probes) CHECK(!pr.loaded());
}

TEST_CASE("a removed probe's semaphore is reused only once no handle of it is left") {
  auto p = provider::create("reuse");
  REQUIRE(p.ok());
  auto a = p->add_probe("a", {});
  REQUIRE(a.ok());
  const volatile uint16_t* sem_a = a->semaphore_address();
  {
    auto gone = p->add_probe("gone", {});
    REQUIRE(gone.ok());
  }  // no handle of "gone" is left once it is removed
  const volatile uint16_t* sem_gone = p->find_probe("gone")->semaphore_address();
  REQUIRE(p->remove_probe("gone").ok());
  auto kept = p->add_probe("kept", {});
  REQUIRE(kept.ok());
  CHECK(kept->semaphore_address() == sem_gone);  // reused
  const probe old_kept = *kept;
  REQUIRE(p->remove_probe("kept").ok());
  auto fresh = p->add_probe("fresh", {});
  REQUIRE(fresh.ok());
  // old_kept is alive: its semaphore must stay its own (never another probe's counter).
  CHECK(fresh->semaphore_address() != old_kept.semaphore_address());
  CHECK(fresh->semaphore_address() != sem_a);
  REQUIRE(p->load().ok());
  CHECK(!old_kept.loaded());
  CHECK(!old_kept.enabled());
  CHECK(fresh->loaded());
}

TEST_CASE("several providers load at once, and firing is thread-safe") {
  std::vector<provider> providers;
  std::vector<probe> probes;
  for (int i = 0; i < 4; ++i) {
    auto p =
        provider::create("multi" + std::to_string(i),
                         {i % 2 == 0 ? object_location::memfd : object_location::file, {}, {}});
    REQUIRE(p.ok());
    auto pr = p->add_probe("tick", {arg_type::u32, arg_type::pointer});
    REQUIRE(pr.ok());
    REQUIRE(p->load().ok());
    probes.push_back(*pr);
    providers.push_back(std::move(*p));
  }
  std::atomic<uint64_t> fired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t k = 0; k < 20000; ++k) {
        const probe& pr = probes[(k + static_cast<uint32_t>(t)) % probes.size()];
        if (pr.enabled()) continue;  // nobody traces here
        pr.fire(k, &fired);
        fired.fetch_add(1, std::memory_order_relaxed);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(fired.load() == 80000);
  for (auto& p : providers) CHECK(p.unload().ok());
}

TEST_CASE("the C API declares, loads, fires and unloads") {
  jitunwind_error err{};
  jitunwind_usdt_provider* p = nullptr;
  REQUIRE(jitunwind_usdt_provider_create("capi", nullptr, &p, &err) == JITUNWIND_OK);
  const jitunwind_usdt_arg_type types[] = {JITUNWIND_USDT_I32, JITUNWIND_USDT_STR};
  jitunwind_usdt_probe* pr = nullptr;
  REQUIRE(jitunwind_usdt_provider_add_probe(p, "event", types, 2, &pr, &err) == JITUNWIND_OK);
  const jitunwind_usdt_arg_type dbl[] = {JITUNWIND_USDT_F64};
  CHECK(jitunwind_usdt_provider_add_probe(p, "d", dbl, 1, nullptr, &err) ==
        JITUNWIND_E_UNSUPPORTED);
  CHECK(std::string(err.message).find("f64") != std::string::npos);
  CHECK(jitunwind_usdt_provider_add_probe(p, "bad-name", types, 2, nullptr, &err) ==
        JITUNWIND_E_INVALID_ARGUMENT);
  // A huge count is refused by its size, before anything is built for it.
  CHECK(jitunwind_usdt_provider_add_probe(p, "many", types, SIZE_MAX, nullptr, &err) ==
        JITUNWIND_E_LIMIT_EXCEEDED);
  CHECK(std::string(err.message).find("arguments (tracers address at most 12") !=
        std::string::npos);
  CHECK(std::string(jitunwind_usdt_provider_object_path(p)).empty());
  REQUIRE(jitunwind_usdt_provider_load(p, &err) == JITUNWIND_OK);
  CHECK(std::string(jitunwind_usdt_provider_object_path(p)).find("/proc/") == 0);
  CHECK(jitunwind_usdt_probe_enabled(pr) == 0);
  REQUIRE(jitunwind_usdt_probe_semaphore(pr) != nullptr);
  CHECK(*jitunwind_usdt_probe_semaphore(pr) == 0);
  JITUNWIND_USDT_FIRE(pr, static_cast<uint64_t>(-5), (uint64_t)(uintptr_t) "text");
  jitunwind_usdt_probe* found = nullptr;
  REQUIRE(jitunwind_usdt_provider_find_probe(p, "event", &found, &err) == JITUNWIND_OK);
  CHECK(jitunwind_usdt_probe_semaphore(found) == jitunwind_usdt_probe_semaphore(pr));
  const volatile uint16_t* sem = jitunwind_usdt_probe_semaphore(pr);
  REQUIRE(jitunwind_usdt_provider_unload(p, &err) == JITUNWIND_OK);
  CHECK(jitunwind_usdt_probe_semaphore(pr) == sem);  // stable, and reads 0 while unloaded
  CHECK(*sem == 0);
  jitunwind_usdt_provider_destroy(p);
  JITUNWIND_USDT_FIRE(pr, 1, 2);  // inert, no crash
  CHECK(*sem == 0);               // the handle keeps the address range mapped
  jitunwind_usdt_probe_destroy(found);
  jitunwind_usdt_probe_destroy(pr);
}
