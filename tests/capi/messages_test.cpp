// Error messages in the caller's language (docs/c-api.md, "Conventions"): what a C caller reads
// names the C API (jitunwind_name_code, JITUNWIND_CFA_SP), never a C++ spelling
// (frame_builder(abi).finish(...), cfa_base::sp) or an internal step it did not call
// (describe_window under name_code); C++ callers get their own names.
#include <jitunwind/jitunwind.h>
#include <jitunwind/onramp.h>

#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstdlib>
#include <regex>
#include <string>

namespace {

// No C++ scope operator, no call syntax, no C++-only name.
void check_c_terms(const std::string& message) {
  INFO(message);
  CHECK_FALSE(std::regex_search(message, std::regex(R"(\w::\w|\w\(\)|\(\.\.\.\))")));
  CHECK_FALSE(std::regex_search(message, std::regex(R"((^|[^_\w])(describe_window|name_code|)"
                                                    R"(forget_code|name_range|retire_function)\b)")));
}

struct page {
  unsigned char* p = static_cast<unsigned char*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ~page() { munmap(p, 4096); }
};

jitunwind_frame_row entry_row() {
  jitunwind_frame_row r{};
  r.cfa_base = JITUNWIND_CFA_SP;
  r.cfa_offset = 8;
  r.ra_offset = -8;
  return r;
}

}  // namespace

TEST_CASE("capi messages: the on-ramp's errors name the C functions") {
  setenv("JITUNWIND_PUBLISH", "registry", 1);
  page code;
  REQUIRE(code.p != MAP_FAILED);
  jitunwind_error err{};
  // No rows: the hint names the C builder.
  CHECK(jitunwind_name_code(code.p, 64, "c:none", nullptr, 0, &err) ==
        JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::StartsWith("jitunwind_name_code: no rows") &&
                              Catch::Contains("jitunwind_frame_builder_finish"));
  check_c_terms(err.message);

  // Overlapping code named before: in the on-ramp's terms, not describe_window's.
  const jitunwind_frame_row row = entry_row();
  REQUIRE(jitunwind_name_code(code.p, 64, "c:first", &row, 1, &err) == JITUNWIND_OK);
  CHECK(jitunwind_name_code(code.p + 32, 64, "c:overlap", &row, 1, &err) ==
        JITUNWIND_E_ALREADY_EXISTS);
  CHECK_THAT(err.message, Catch::StartsWith("jitunwind_name_code: ") &&
                              Catch::Contains("overlaps") && Catch::Contains("named before"));
  check_c_terms(err.message);
  CHECK(jitunwind_name_code(code.p, 64, "c:again", &row, 1, &err) == JITUNWIND_E_ALREADY_EXISTS);
  CHECK_THAT(err.message, Catch::Contains("jitunwind_forget_code it first"));
  check_c_terms(err.message);

  // The same from C++: C++ names.
  const jitunwind::frame_row cxx_row = jitunwind::entry_row(jitunwind::abi::amd64);
  auto r = jitunwind::name_code(code.p + 32, 64, "cxx:overlap", jitunwind::span(&cxx_row, 1));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::StartsWith("name_code: ") &&
                                      !Catch::Contains("describe_window"));
  REQUIRE(jitunwind_forget_code(code.p, &err) == JITUNWIND_OK);
  CHECK(jitunwind_forget_code(code.p, &err) == JITUNWIND_E_NOT_FOUND);
  CHECK_THAT(err.message, Catch::StartsWith("jitunwind_forget_code: "));
  check_c_terms(err.message);
}

TEST_CASE("capi messages: window and row errors name the C functions and constants") {
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  o.address_reuse = JITUNWIND_ADDRESS_REUSE_NEVER;
  jitunwind_session* s = nullptr;
  jitunwind_error err{};
  REQUIRE(jitunwind_session_create(&o, &s, &err) == JITUNWIND_OK);
  page code;
  jitunwind_described_window_options d;
  jitunwind_described_window_options_init(&d);
  d.text_start = reinterpret_cast<uint64_t>(code.p);
  d.text_size = 4096;
  jitunwind_window* w = nullptr;
  REQUIRE(jitunwind_session_describe_window(s, &d, &w, &err) == JITUNWIND_OK);

  uint64_t address = 0;
  void* writable = nullptr;
  CHECK(jitunwind_window_allocate(w, 16, 16, &address, &writable, &err) ==
        JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::Contains("jitunwind_window_allocate"));
  check_c_terms(err.message);

  CHECK(jitunwind_window_retire_function(w, d.text_start, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::Contains("jitunwind_window_retire_function"));
  check_c_terms(err.message);

  // CFA from register 7 (rsp) through JITUNWIND_CFA_REG: the C constant to use instead.
  jitunwind_frame_row row = entry_row();
  row.cfa_base = JITUNWIND_CFA_REG;
  row.cfa_reg = 7;
  jitunwind_function f{};
  f.start = d.text_start;
  f.size = 16;
  f.rows = &row;
  f.row_count = 1;
  CHECK(jitunwind_frame_validate(JITUNWIND_ABI_AMD64, &f, &err) == JITUNWIND_E_INVALID_ARGUMENT);
  CHECK_THAT(err.message, Catch::Contains("JITUNWIND_CFA_SP"));
  check_c_terms(err.message);

  REQUIRE(jitunwind_window_retire(w, 0, nullptr, nullptr, &err) == JITUNWIND_OK);
  CHECK(jitunwind_window_reuse(w, &err) == JITUNWIND_E_BAD_STATE);
  CHECK_THAT(err.message, Catch::Contains("jitunwind_session_options.address_reuse"));
  check_c_terms(err.message);
  jitunwind_session_destroy(s);
}
