// Options structs of the C API (docs/c-api.md, "Options structs"): every one has an `_init`
// and a leading struct_size; a zeroed struct is refused by every creator with a message naming
// the `_init`; NULL means the defaults; older (smaller) and newer (larger) callers' structs.
#include <jitunwind/jitunwind.h>
#include <jitunwind/trampolines.h>
#include <jitunwind/window.h>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace t = jitunwind::test;

namespace {

// A creator called with an options struct of `size` bytes whose contents are `bytes`; returns
// the status and destroys whatever was made.
struct creator {
  std::string options_type;  // the struct
  std::string function;      // the creator
  std::function<jitunwind_status(const void* options, jitunwind_error*)> create;
  // Fills a struct with its _init and whatever the creator needs besides (a described range).
  std::function<void(void*)> init;
  bool null_means_defaults = true;  // false: the struct carries what the creator needs
};

// Code the described-window creator describes.
unsigned char described_code[4096];

jitunwind_session* registry_only_session() {
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_session* s = nullptr;
  REQUIRE(jitunwind_session_create(&o, &s, nullptr) == JITUNWIND_OK);
  return s;
}

std::vector<creator> creators() {
  // Pools without a session of the caller's make one from the environment: registry only, so
  // that no test leaves files in /tmp.
  setenv("JITUNWIND_PUBLISH", "registry", 1);
  std::vector<creator> c;
  c.push_back({"jitunwind_session_options", "jitunwind_session_create",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_session* s = nullptr;
                 auto st = jitunwind_session_create(
                     static_cast<const jitunwind_session_options*>(o), &s, e);
                 jitunwind_session_destroy(s);
                 return st;
               },
               [](void* o) {
                 auto* so = static_cast<jitunwind_session_options*>(o);
                 jitunwind_session_options_init(so);
                 so->publishers = JITUNWIND_PUBLISH_REGISTRY;
               }});
  c.push_back({"jitunwind_owned_window_options", "jitunwind_session_create_owned_window",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_session* s = registry_only_session();
                 jitunwind_window* w = nullptr;
                 auto st = jitunwind_session_create_owned_window(
                     s, static_cast<const jitunwind_owned_window_options*>(o), &w, e);
                 jitunwind_session_destroy(s);
                 return st;
               },
               [](void* o) {
                 jitunwind_owned_window_options_init(
                     static_cast<jitunwind_owned_window_options*>(o));
               }});
  c.push_back({"jitunwind_described_window_options", "jitunwind_session_describe_window",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_session* s = registry_only_session();
                 jitunwind_window* w = nullptr;
                 auto st = jitunwind_session_describe_window(
                     s, static_cast<const jitunwind_described_window_options*>(o), &w, e);
                 jitunwind_session_destroy(s);
                 return st;
               },
               [](void* o) {
                 auto* d = static_cast<jitunwind_described_window_options*>(o);
                 jitunwind_described_window_options_init(d);
                 d->text_start = reinterpret_cast<uint64_t>(described_code);
                 d->text_size = sizeof described_code;
               },
               false});
  c.push_back({"jitunwind_sframe_encoder_options", "jitunwind_sframe_encoder_create",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_sframe_encoder* enc = nullptr;
                 auto st = jitunwind_sframe_encoder_create(
                     static_cast<const jitunwind_sframe_encoder_options*>(o), &enc, e);
                 jitunwind_sframe_encoder_destroy(enc);
                 return st;
               },
               [](void* o) {
                 jitunwind_sframe_encoder_options_init(
                     static_cast<jitunwind_sframe_encoder_options*>(o));
               }});
  c.push_back({"jitunwind_usdt_provider_options", "jitunwind_usdt_provider_create",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_usdt_provider* p = nullptr;
                 auto st = jitunwind_usdt_provider_create(
                     "zeroed", static_cast<const jitunwind_usdt_provider_options*>(o), &p, e);
                 jitunwind_usdt_provider_destroy(p);
                 return st;
               },
               [](void* o) {
                 jitunwind_usdt_provider_options_init(
                     static_cast<jitunwind_usdt_provider_options*>(o));
               }});
  c.push_back({"jitunwind_trampoline_pool_options", "jitunwind_trampoline_pool_create_in",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_session* s = registry_only_session();
                 jitunwind_trampoline_pool* p = nullptr;
                 auto st = jitunwind_trampoline_pool_create_in(
                     s, static_cast<const jitunwind_trampoline_pool_options*>(o), &p, e);
                 jitunwind_trampoline_pool_destroy(p);
                 jitunwind_session_destroy(s);
                 return st;
               },
               [](void* o) {
                 jitunwind_trampoline_pool_options_init(
                     static_cast<jitunwind_trampoline_pool_options*>(o));
               }});
  c.push_back({"jitunwind_trampoline_pool_options", "jitunwind_trampoline_pool_create",
               [](const void* o, jitunwind_error* e) {
                 jitunwind_trampoline_pool* p = nullptr;
                 auto st = jitunwind_trampoline_pool_create(
                     static_cast<const jitunwind_trampoline_pool_options*>(o), &p, e);
                 jitunwind_trampoline_pool_destroy(p);
                 return st;
               },
               [](void* o) {
                 jitunwind_trampoline_pool_options_init(
                     static_cast<jitunwind_trampoline_pool_options*>(o));
               }});
  return c;
}

// The options structs a public header declares (`} jitunwind_..._options;`).
std::set<std::string> declared_options_structs(std::string* all_headers) {
  std::set<std::string> names;
  const std::regex decl(R"(\}\s*(jitunwind_\w+_options)\s*;)");
  const auto include = t::source_path("sdk/include/jitunwind");
  const auto listing = t::run_shell("ls " + include + "/*.h " + include + "/c/*.h");
  std::string path;
  for (char ch : listing.out + "\n") {
    if (ch != '\n') {
      path += ch;
      continue;
    }
    if (path.empty()) continue;
    const std::string text = t::read_file(path);
    *all_headers += text;
    for (std::sregex_iterator it(text.begin(), text.end(), decl), end; it != end; ++it)
      names.insert((*it)[1]);
    path.clear();
  }
  return names;
}

// The caller's struct: `size` bytes, zero, with struct_size = `struct_size` (nothing else set).
std::vector<unsigned char> raw_options(size_t size, uint32_t struct_size) {
  std::vector<unsigned char> bytes(size, 0);
  std::memcpy(bytes.data(), &struct_size, sizeof struct_size);
  return bytes;
}

}  // namespace

TEST_CASE("capi options: every C options struct has an _init and a creator test here") {
  std::string headers;
  const auto declared = declared_options_structs(&headers);
  REQUIRE(declared.size() >= 6);
  std::set<std::string> tested;
  for (const auto& c : creators()) tested.insert(c.options_type);
  for (const auto& name : declared) {
    INFO(name);
    CHECK(std::regex_search(headers, std::regex("void " + name + R"(_init\(\s*)" + name + "\\* ")));
    CHECK(std::regex_search(
        headers, std::regex("typedef struct " + name + R"( \{\s*uint32_t struct_size;)")));
    CHECK(tested.count(name) == 1);
  }
}

TEST_CASE("capi options: a zeroed struct is refused by every creator, naming its _init") {
  for (const auto& c : creators()) {
    INFO(c.function);
    const auto zeroed = raw_options(512, 0);
    jitunwind_error err;
    CHECK(c.create(zeroed.data(), &err) == JITUNWIND_E_INVALID_ARGUMENT);
    CHECK(err.status == JITUNWIND_E_INVALID_ARGUMENT);
    CHECK_THAT(err.message, Catch::Contains(c.options_type + ".struct_size is 0") &&
                                Catch::Contains(c.options_type + "_init()"));
  }
}

TEST_CASE("capi options: NULL means the defaults for every creator") {
  for (const auto& c : creators()) {
    INFO(c.function);
    jitunwind_error err;
    if (c.null_means_defaults) {
      CHECK(c.create(nullptr, &err) == JITUNWIND_OK);
      INFO(err.message);
    } else {  // the struct holds what the creator cannot do without: refused, naming it
      CHECK(c.create(nullptr, &err) == JITUNWIND_E_INVALID_ARGUMENT);
      CHECK_THAT(err.message, Catch::StartsWith(c.function + ": "));
    }
  }
  // The default session's publishers write the perf map and jitdump in /tmp.
  for (const char* f : {"/tmp/perf-%d.map", "/tmp/jit-%d.dump"}) {
    char path[64];
    std::snprintf(path, sizeof path, f, static_cast<int>(getpid()));
    std::remove(path);
  }
}

TEST_CASE("capi options: _init gives the C++ defaults") {
  jitunwind_session_options s;
  std::memset(&s, 0xa5, sizeof s);
  jitunwind_session_options_init(&s);
  const jitunwind::session_options cxx;
  CHECK(s.struct_size == sizeof s);
  CHECK(s.abi == JITUNWIND_ABI_AMD64);
  CHECK(s.publishers == JITUNWIND_PUBLISH_DEFAULT);
  CHECK(s.publishers == cxx.publishers);
  CHECK(s.log_min_level == static_cast<int>(cxx.log.min_level));
  CHECK(s.perfmap_dir == nullptr);
  CHECK(s.log == nullptr);
  CHECK(s.perfmap_durability == static_cast<int>(cxx.perfmap_durability));
  CHECK(s.jitdump_durability == JITUNWIND_DURABILITY_BATCHED);
  CHECK(s.flush_bytes == cxx.flush_bytes);
  CHECK(s.flush_latency_ms == cxx.flush_latency.count());
  CHECK(s.flush_thread == 1);
  CHECK(s.address_reuse == JITUNWIND_ADDRESS_REUSE_AUTO);
  CHECK(s.sframe_version == cxx.sframe_version);
  CHECK(s.sframe_allow_flex == 1);
  CHECK(s.reserved == 0);

  jitunwind_owned_window_options ow;
  std::memset(&ow, 0xa5, sizeof ow);
  jitunwind_owned_window_options_init(&ow);
  const jitunwind::owned_window_options owc;
  CHECK(ow.struct_size == sizeof ow);
  CHECK(ow.code_capacity == owc.code_capacity);
  CHECK(ow.sframe_capacity == owc.sframe_capacity);
  CHECK(ow.layout == JITUNWIND_LAYOUT_PAGE_FLIP);

  jitunwind_described_window_options dw;
  std::memset(&dw, 0xa5, sizeof dw);
  jitunwind_described_window_options_init(&dw);
  CHECK(dw.struct_size == sizeof dw);
  CHECK(dw.reserved == 0);
  CHECK(dw.text_start == 0);
  CHECK(dw.text_size == 0);
  CHECK(dw.sframe_capacity == 0);

  jitunwind_sframe_encoder_options e;
  jitunwind_sframe_encoder_options_init(&e);
  CHECK(e.struct_size == sizeof e);
  CHECK(e.abi == JITUNWIND_ABI_AMD64);
  CHECK(e.pcrel == 1);
  CHECK(e.frame_pointer == -1);
  CHECK(e.strict == 1);
  CHECK(e.version == 3);
  CHECK(e.allow_flex == 1);

  jitunwind_usdt_provider_options u;
  jitunwind_usdt_provider_options_init(&u);
  CHECK(u.struct_size == sizeof u);
  CHECK(u.location == JITUNWIND_USDT_MEMFD);
  CHECK(u.log == nullptr);
  CHECK(u.log_min_level == 1);

  jitunwind_trampoline_pool_options p;
  jitunwind_trampoline_pool_options_init(&p);
  CHECK(p.struct_size == sizeof p);
  CHECK(p.stubs_per_window == jitunwind::trampoline_pool_options{}.stubs_per_window);
  CHECK(p.array_name == nullptr);
}

TEST_CASE("capi options: the session's SFrame version and FLEX policy reach the C++ session") {
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  o.sframe_version = 2;
  o.sframe_allow_flex = 0;
  o.perfmap_durability = JITUNWIND_DURABILITY_SYNC;
  o.flush_thread = 0;
  jitunwind_session* s = nullptr;
  jitunwind_error err;
  REQUIRE(jitunwind_session_create(&o, &s, &err) == JITUNWIND_OK);
  // The handle is the C++ session (window.cpp of the C API).
  const auto& cxx = reinterpret_cast<const jitunwind::session*>(s)->options();
  CHECK(cxx.sframe_version == 2);
  CHECK_FALSE(cxx.sframe_allow_flex);
  CHECK(cxx.perfmap_durability == jitunwind::durability::sync);
  CHECK(cxx.jitdump_durability == jitunwind::durability::batched);
  CHECK_FALSE(cxx.flush_thread);
  jitunwind_session_destroy(s);
  o.sframe_version = 4;
  CHECK(jitunwind_session_create(&o, &s, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::StartsWith("jitunwind_session_create: sframe_version 4"));
}

TEST_CASE("capi options: a caller built against a newer release (larger struct)") {
  for (const auto& c : creators()) {
    INFO(c.function);
    // Fill with the defaults of our size, then append unknown fields.
    std::vector<unsigned char> bigger(1024, 0);
    c.init(bigger.data());
    const uint32_t size = 256;
    std::memcpy(bigger.data(), &size, sizeof size);
    jitunwind_error err;
    // Unknown fields left 0: accepted (the caller did not use them).
    CHECK(c.create(bigger.data(), &err) == JITUNWIND_OK);
    // An unknown field set: refused, the library is too old for what the caller asks.
    bigger[200] = 1;
    CHECK(c.create(bigger.data(), &err) == JITUNWIND_E_UNSUPPORTED);
    CHECK_THAT(err.message, Catch::Contains("a newer jitunwind is needed"));
  }
}

TEST_CASE("capi options: a caller built against an older release (smaller struct)") {
  // Our struct_size below the first release's size: no release had it.
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.struct_size = 8;
  jitunwind_session* s = nullptr;
  jitunwind_error err;
  CHECK(jitunwind_session_create(&o, &s, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::Contains("no release had a struct smaller"));
  CHECK(s == nullptr);
}
