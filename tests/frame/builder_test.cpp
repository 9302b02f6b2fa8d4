#include <jitunwind/frame.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

frame_row row(uint32_t pc, cfa_base base, int32_t cfa, fp_rule fp = fp_rule::unchanged,
              int32_t fp_off = 0) {
  frame_row r;
  r.pc_offset = pc;
  r.cfa = base;
  r.cfa_offset = cfa;
  r.fp = fp;
  r.fp_offset = fp_off;
  return r;
}

}  // namespace

TEST_CASE("amd64 frame-pointer prologue with a mid-function epilogue") {
  // 0: push rbp (1)  1: mov rbp,rsp (3)  4: ... 10: pop rbp (1)  11: ret (1)  12: ... 20: leave;
  // ret
  frame_builder b(abi::amd64);
  b.push_frame_pointer(1, 4).remember_state().pop_frame_pointer(11).restore_state(12);
  b.pop_frame_pointer(21);
  auto f = b.finish(0x1000, 22);
  REQUIRE(f.ok());
  const std::vector<frame_row> expect = {
      row(0, cfa_base::sp, 8),
      row(1, cfa_base::sp, 16, fp_rule::saved, -16),
      row(4, cfa_base::fp, 16, fp_rule::saved, -16),
      row(11, cfa_base::sp, 8),
      row(12, cfa_base::fp, 16, fp_rule::saved, -16),
      row(21, cfa_base::sp, 8),
  };
  CHECK(f->rows == expect);
  CHECK(f->start == 0x1000);
  CHECK(f->size == 22);
}

TEST_CASE("recipes match the builder") {
  const recipes::epilogue eps[] = {{11, 12}, {21, 22}};
  auto r = recipes::frame_pointer(abi::amd64, 0x1000, 22, 1, 4, eps);
  REQUIRE(r.ok());
  frame_builder b(abi::amd64);
  b.push_frame_pointer(1, 4).remember_state().pop_frame_pointer(11).restore_state(12);
  b.remember_state().pop_frame_pointer(21);
  CHECK(r.value() == b.finish(0x1000, 22).value());

  auto sp = recipes::sp_frame(abi::amd64, 0, 30, 4, 24, std::span(eps, 1));
  REQUIRE(sp.ok());
  REQUIRE(sp->rows.size() == 4);
  CHECK(sp->rows[1] == row(4, cfa_base::sp, 32));
  CHECK(sp->rows[2] == row(11, cfa_base::sp, 8));
  CHECK(sp->rows[3] == row(12, cfa_base::sp, 32));

  auto leaf = recipes::leaf(abi::amd64, 0x2000, 5);
  REQUIRE(leaf.ok());
  CHECK(leaf->rows == std::vector<frame_row>{entry_row(abi::amd64)});

  auto t = recipes::trampoline(abi::amd64, 0, 16, 4, 8, 13);
  REQUIRE(t.ok());
  CHECK(t->rows.size() == 3);
  CHECK(t->rows[1] == row(4, cfa_base::sp, 16));
  CHECK(t->rows[2] == row(13, cfa_base::sp, 8));
}

TEST_CASE("frame_pointer recipe gives exactly what the builder gives, for any offsets") {
  // The recipe builds the usual AMD64 shape directly; every shape, usual or not, valid or not,
  // must come out as the directive sequence does (rows, or an error).
  uint64_t seed = 12345;
  const auto next = [&seed](uint32_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((seed >> 33) % n);
  };
  size_t direct = 0;
  // Reused across iterations, as a JIT would (it starts with rows of another shape).
  function_desc reused;
  reused.rows.assign(7, outermost_row(0));
  reused.pcmask_rep = 4;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t size = 1 + next(60);
    const uint32_t after_push = next(8), after_set_fp = after_push + next(5);
    std::vector<recipes::epilogue> eps(next(4));
    uint32_t at = after_set_fp;
    for (auto& e : eps) {
      e.after_pop = at + next(12) - (next(10) == 0 ? 3 : 0);
      e.after_ret = e.after_pop + next(3);
      at = e.after_ret + next(4);
    }
    for (abi a : {abi::amd64, abi::aarch64_le}) {
      frame_builder b(a);
      b.push_frame_pointer(after_push, after_set_fp);
      for (const auto& e : eps) {
        b.remember_state();
        b.pop_frame_pointer(e.after_pop);
        if (e.after_ret < size) b.restore_state(e.after_ret);
      }
      const auto expect = b.finish(0x7f0000001000, size);
      const auto got =
          recipes::frame_pointer(a, 0x7f0000001000, size, after_push, after_set_fp, eps);
      INFO(to_string(a) << " size " << size << " push " << after_push << " set_fp " << after_set_fp
                        << " epilogues " << eps.size());
      REQUIRE(got.ok() == expect.ok());
      // The overload that fills a reused desc: same rows or error, desc untouched on error.
      const function_desc before = reused;
      const auto filled =
          recipes::frame_pointer(reused, a, 0x7f0000001000, size, after_push, after_set_fp, eps);
      REQUIRE(filled.ok() == expect.ok());
      if (filled.ok()) {
        CHECK(reused == *expect);
      } else {
        CHECK(filled.error().message() == expect.error().message());
        CHECK(reused == before);
      }
      if (got.ok()) {
        CHECK(*got == *expect);
        // The shape the recipe builds directly (see builder.cpp).
        bool usual =
            a == abi::amd64 && 0 < after_push && after_push < after_set_fp && after_set_fp < size;
        uint32_t last = after_set_fp;
        for (const auto& e : eps) {
          usual &= last < e.after_pop && e.after_pop < e.after_ret && e.after_ret <= size;
          last = e.after_ret;
        }
        direct += usual;
      } else {
        CHECK(got.error().message() == expect.error().message());
      }
    }
  }
  CHECK(direct > 1000);  // the direct path was exercised, not just the fallback
}

TEST_CASE("frame_pointer recipe at the top of the address space matches the builder") {
  // The direct path does not call validate: the wrap check must still come out as the builder's.
  const recipes::epilogue ep{20, 22};
  for (uint64_t back : {0ull, 1ull, 21ull, 22ull, 23ull, 4096ull}) {
    const uint64_t start = std::numeric_limits<uint64_t>::max() - back;
    frame_builder b(abi::amd64);
    b.push_frame_pointer(1, 4).remember_state().pop_frame_pointer(20);
    const auto expect = b.finish(start, 22);
    const auto got = recipes::frame_pointer(abi::amd64, start, 22, 1, 4, std::span(&ep, 1));
    function_desc reused;
    const auto filled =
        recipes::frame_pointer(reused, abi::amd64, start, 22, 1, 4, std::span(&ep, 1));
    INFO("start 0x" << std::hex << start);
    REQUIRE(got.ok() == expect.ok());
    REQUIRE(filled.ok() == expect.ok());
    if (filled.ok()) CHECK(reused == *expect);
    if (got.ok())
      CHECK(*got == *expect);
    else
      CHECK(got.error().message() == expect.error().message());
  }
}

TEST_CASE("aarch64 frame record and leaf") {
  frame_builder b(abi::aarch64_le);
  b.push_frame_pointer(4, 8).pop_frame_pointer(20);
  auto f = b.finish(0x4000, 24);
  REQUIRE(f.ok());
  REQUIRE(f->rows.size() == 4);
  CHECK(f->rows[0].ra == ra_rule::in_register);
  CHECK(f->rows[0].cfa_offset == 0);
  CHECK(f->rows[1].cfa_offset == 16);
  CHECK(f->rows[1].ra == ra_rule::saved);
  CHECK(f->rows[1].ra_offset == -8);
  CHECK(f->rows[1].fp_offset == -16);
  CHECK(f->rows[2].cfa == cfa_base::fp);
  CHECK(f->rows[3] == [] {
    frame_row r = entry_row(abi::aarch64_le);
    r.pc_offset = 20;
    return r;
  }());

  frame_builder pac(abi::aarch64_le);
  pac.negate_ra_state(4).push_frame_pointer(8, 12);
  auto g = pac.finish(0, 16);
  REQUIRE(g.ok());
  CHECK(g->rows[1].ra_mangled);
  CHECK(g->rows[2].ra_mangled);
}

TEST_CASE("outermost frames are canonical") {
  frame_builder b(abi::amd64);
  b.undefined(0, reg::ra);
  auto f = b.finish(0, 8);
  REQUIRE(f.ok());
  REQUIRE(f->rows.size() == 1);
  CHECK(f->rows[0] == outermost_row(0));
}

TEST_CASE("rows at the function end are dropped, equal rows merged") {
  frame_builder b(abi::amd64);
  b.stack_alloc(4, 8).stack_free(9, 8).def_cfa_offset(10, 8).stack_alloc(12, 16);
  auto f = b.finish(0, 12);
  REQUIRE(f.ok());
  CHECK(f->rows.size() == 3);  // 0, 4, 9 (10 equals 9; 12 is the end)
}

TEST_CASE("invalid sequences are rejected with a message") {
  SECTION("offsets going backwards") {
    frame_builder b(abi::amd64);
    b.def_cfa_offset(8, 16).def_cfa_offset(4, 24);
    CHECK_FALSE(b.ok());
    auto f = b.finish(0, 16);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code() == errc::invalid_argument);
    CHECK_THAT(f.error().message(),
               Catch::Contains("directive #2") && Catch::Contains("must not decrease"));
  }
  SECTION("CFA offset not a multiple of 8 on amd64") {
    frame_builder b(abi::amd64);
    b.def_cfa_offset(1, 12);
    REQUIRE_FALSE(b.ok());
    CHECK_THAT(b.first_error()->message(), Catch::Contains("not a multiple of 8"));
  }
  SECTION("directive past the end") {
    frame_builder b(abi::amd64);
    b.stack_alloc(40, 8);
    auto f = b.finish(0x10, 20);
    REQUIRE_FALSE(f.ok());
    CHECK_THAT(f.error().message(), Catch::Contains("past the function end"));
  }
  SECTION("restore_state without remember_state") {
    frame_builder b(abi::amd64);
    b.restore_state(3);
    CHECK_THAT(b.first_error()->message(), Catch::Contains("no state was remembered"));
  }
  SECTION("RA not at CFA-8 on amd64: below SP is refused, above it is a v3 (FLEX) row") {
    frame_builder b(abi::amd64);
    b.offset(2, reg::ra, -16);
    CHECK_THAT(b.first_error()->message(), Catch::Contains("RA saved at CFA-16, below the stack"));
    frame_builder ok(abi::amd64);
    ok.stack_alloc(1, 16).offset(2, reg::ra, -16);
    REQUIRE(ok.ok());
    auto f = ok.finish(0x1000, 8);
    REQUIRE(f.ok());
    CHECK(!default_expressible(abi::amd64, f->rows.back()));
  }
  SECTION("FP in the RA slot") {
    frame_builder b(abi::amd64);
    b.offset(2, reg::fp, -8);
    CHECK_FALSE(b.ok());
  }
  SECTION("CFA below SP") {
    frame_builder b(abi::amd64);
    b.stack_free(1, 8);
    CHECK_FALSE(b.ok());
  }
  SECTION("pointer authentication on amd64") {
    frame_builder b(abi::amd64);
    b.negate_ra_state(0);
    CHECK_FALSE(b.ok());
  }
  SECTION("the first error sticks") {
    frame_builder b(abi::amd64);
    b.def_cfa(1, reg::ra, 8).def_cfa_offset(2, 16);
    CHECK_THAT(b.first_error()->message(), Catch::Contains("#1 def_cfa"));
    b.reset();
    CHECK(b.ok());
  }
}

TEST_CASE("validate checks hand-made descriptions") {
  function_desc f;
  f.start = 0x1000;
  f.size = 16;
  CHECK_FALSE(validate(abi::amd64, f).ok());  // no rows
  f.rows = {entry_row(abi::amd64)};
  CHECK(validate(abi::amd64, f).ok());
  f.rows.push_back(row(0, cfa_base::sp, 16));
  CHECK_THAT(validate(abi::amd64, f).error().message(), Catch::Contains("row 1"));
  f.rows.back().pc_offset = 16;
  CHECK_THAT(validate(abi::amd64, f).error().message(), Catch::Contains("past the"));
  f.rows.back().pc_offset = 4;
  f.pcmask_rep = 4;
  CHECK_FALSE(validate(abi::amd64, f).ok());  // row 1 at offset 4 >= rep 4
  f.pcmask_rep = 8;
  CHECK(validate(abi::amd64, f).ok());
  f.size = 0;
  CHECK_FALSE(validate(abi::amd64, f).ok());
  f.size = 16;
  f.start = ~uint64_t{0} - 4;
  CHECK(validate(abi::amd64, f).error().code() == errc::out_of_range);
}

TEST_CASE("abi names round-trip") {
  for (abi a : {abi::amd64, abi::aarch64_le, abi::aarch64_be}) {
    auto p = parse_abi(to_string(a));
    REQUIRE(p.ok());
    CHECK(p.value() == a);
  }
  CHECK_FALSE(parse_abi("x86").ok());
}

TEST_CASE("a register that is not sp, fp or ra fails the builder, naming the directive") {
  for (int bad : {3, 7, 255}) {
    frame_builder b(abi::amd64);
    b.push_frame_pointer(1, 4).offset(8, static_cast<reg>(bad), -24);
    auto f = b.finish(0x1000, 16);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code() == errc::invalid_argument);
    CHECK_THAT(f.error().message(), Catch::Contains("offset") &&
                                        Catch::Contains("unknown register " + std::to_string(bad)));
  }
}

namespace {

// One directive of the order-insensitivity property: a name for messages and how to apply it.
struct directive {
  const char* name;
  std::function<void(frame_builder&, uint32_t)> apply;
};

// Directives that change one part of a row each: the CFA, the caller's FP, or the RA. At one
// offset there is at most one of each part, so every order must give the same row.
std::vector<directive> cfa_directives() {
  return {
      {"def_cfa sp+16", [](frame_builder& b, uint32_t at) { b.def_cfa(at, reg::sp, 16); }},
      {"def_cfa fp+16", [](frame_builder& b, uint32_t at) { b.def_cfa(at, reg::fp, 16); }},
      {"def_cfa_offset 24", [](frame_builder& b, uint32_t at) { b.def_cfa_offset(at, 24); }},
      {"adjust_cfa_offset 8", [](frame_builder& b, uint32_t at) { b.adjust_cfa_offset(at, 8); }},
      {"adjust_cfa_offset -8", [](frame_builder& b, uint32_t at) { b.adjust_cfa_offset(at, -8); }},
      {"def_cfa_register fp",
       [](frame_builder& b, uint32_t at) { b.def_cfa_register(at, reg::fp); }},
      {"def_cfa_register sp",
       [](frame_builder& b, uint32_t at) { b.def_cfa_register(at, reg::sp); }},
      {"stack_alloc 8", [](frame_builder& b, uint32_t at) { b.stack_alloc(at, 8); }},
      {"stack_free 8", [](frame_builder& b, uint32_t at) { b.stack_free(at, 8); }},
  };
}

std::vector<directive> fp_directives() {
  return {
      {"offset fp -16", [](frame_builder& b, uint32_t at) { b.offset(at, reg::fp, -16); }},
      {"offset fp -24", [](frame_builder& b, uint32_t at) { b.offset(at, reg::fp, -24); }},
      {"restore fp", [](frame_builder& b, uint32_t at) { b.restore(at, reg::fp); }},
  };
}

std::vector<directive> ra_directives(abi a) {
  std::vector<directive> d = {
      {"restore ra", [](frame_builder& b, uint32_t at) { b.restore(at, reg::ra); }},
      {"undefined ra", [](frame_builder& b, uint32_t at) { b.undefined(at, reg::ra); }},
  };
  if (a != abi::amd64) {
    d.push_back({"offset ra -8", [](frame_builder& b, uint32_t at) { b.offset(at, reg::ra, -8); }});
    d.push_back({"negate_ra_state", [](frame_builder& b, uint32_t at) { b.negate_ra_state(at); }});
  }
  return d;
}

struct group {
  uint32_t at;
  std::vector<const directive*> parts;
};

std::string run(abi a, const std::vector<group>& groups, uint32_t size,
                std::vector<frame_row>& rows) {
  frame_builder b(a);
  for (const group& g : groups) {
    for (const directive* d : g.parts) d->apply(b, g.at);
  }
  auto f = b.finish(0x10000, size);
  if (!f) return f.error().message();
  rows = f->rows;
  return {};
}

}  // namespace

TEST_CASE("directives at one offset give the same rows in every order (property)") {
  uint64_t seed = 0x5eed;
  const auto next = [&seed](uint32_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>((seed >> 33) % n);
  };
  size_t valid = 0, invalid = 0, permutations = 0;
  for (abi a : {abi::amd64, abi::aarch64_le}) {
    const auto cfa = cfa_directives(), fp = fp_directives(), ra = ra_directives(a);
    for (int fn = 0; fn < 1500; ++fn) {
      std::vector<group> groups;
      uint32_t at = 0;
      const uint32_t n_groups = 1 + next(5);
      for (uint32_t g = 0; g < n_groups; ++g) {
        at += 1 + next(4);
        group gr{at, {}};
        if (next(4) != 0) gr.parts.push_back(&cfa[next(static_cast<uint32_t>(cfa.size()))]);
        if (next(2) != 0) gr.parts.push_back(&fp[next(static_cast<uint32_t>(fp.size()))]);
        if (next(6) == 0) gr.parts.push_back(&ra[next(static_cast<uint32_t>(ra.size()))]);
        if (gr.parts.empty()) gr.parts.push_back(&cfa[next(static_cast<uint32_t>(cfa.size()))]);
        groups.push_back(std::move(gr));
      }
      const uint32_t size = at + 1 + next(3);
      // Sorted parts are the reference order; every permutation of every group must agree.
      for (group& g : groups) std::sort(g.parts.begin(), g.parts.end());
      std::vector<frame_row> want;
      const std::string want_error = run(a, groups, size, want);
      (want_error.empty() ? valid : invalid) += 1;
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        std::vector<group> perm = groups;
        while (std::next_permutation(perm[gi].parts.begin(), perm[gi].parts.end())) {
          std::vector<frame_row> got;
          const std::string error = run(a, perm, size, got);
          ++permutations;
          INFO("abi " << to_string(a) << ", offset " << perm[gi].at
                      << ", want: " << (want_error.empty() ? "rows" : want_error)
                      << ", got: " << (error.empty() ? "rows" : error));
          REQUIRE(error.empty() == want_error.empty());
          if (error.empty()) {
            CHECK(got == want);
          } else {
            // The same row fails, whatever order named its directives.
            const auto tail = [](const std::string& m) {
              const size_t where = m.find(" at offset ");
              return where == std::string::npos ? m : m.substr(where);
            };
            CHECK(tail(error) == tail(want_error));
          }
        }
      }
    }
  }
  // Not vacuous: both outcomes occur, and many orders were compared.
  CHECK(valid > 500);
  CHECK(invalid > 100);
  CHECK(permutations > 2000);
}

TEST_CASE("pop rbp: stack_free and restore of the frame pointer in either order") {
  // push rbp (1); sub rsp, 16 (5) ... add rsp, 16 (20); pop rbp (21); ret (22)
  for (bool restore_first : {false, true}) {
    frame_builder b(abi::amd64);
    b.stack_alloc(1, 8).offset(1, reg::fp, -16).stack_alloc(5, 16).stack_free(20, 16);
    if (restore_first)
      b.restore(21, reg::fp).stack_free(21, 8);
    else
      b.stack_free(21, 8).restore(21, reg::fp);
    auto f = b.finish(0x1000, 22);
    INFO("restore first: " << restore_first);
    REQUIRE(f.ok());
    REQUIRE(f->rows.size() == 5);
    CHECK(f->rows[4] == row(21, cfa_base::sp, 8));
  }
}

TEST_CASE("every builder error names its directive") {
  const auto message = [](const std::function<void(frame_builder&)>& build, uint32_t size = 64) {
    frame_builder b(abi::amd64);
    build(b);
    auto f = b.finish(0x1000, size);
    REQUIRE_FALSE(f.ok());
    return f.error().message();
  };
  CHECK_THAT(message([](auto& b) { b.stack_free(1, 8); }), Catch::Contains("#1 stack_free"));
  CHECK_THAT(message([](auto& b) { b.def_cfa_offset(1, 12); }),
             Catch::Contains("#1 def_cfa_offset") && Catch::Contains("not a multiple of 8"));
  CHECK_THAT(message([](auto& b) { b.stack_alloc(1, 4); }), Catch::Contains("#1 stack_alloc"));
  CHECK_THAT(message([](auto& b) { b.adjust_cfa_offset(1, -8); }),
             Catch::Contains("#1 adjust_cfa_offset"));
  CHECK_THAT(message([](auto& b) { b.def_cfa(1, reg::fp, 0); }), Catch::Contains("#1 def_cfa"));
  CHECK_THAT(message([](auto& b) { b.def_cfa_register(1, reg::fp).def_cfa_offset(1, -8); }),
             Catch::Contains("#1 def_cfa_register, #2 def_cfa_offset"));
  CHECK_THAT(message([](auto& b) { b.offset(2, reg::fp, -8); }), Catch::Contains("#1 offset"));
  CHECK_THAT(message([](auto& b) { b.offset(2, reg::sp, -8); }), Catch::Contains("#1 offset"));
  CHECK_THAT(message([](auto& b) { b.restore(2, reg::sp); }), Catch::Contains("#1 restore"));
  CHECK_THAT(message([](auto& b) { b.undefined(2, reg::fp); }), Catch::Contains("#1 undefined"));
  CHECK_THAT(message([](auto& b) { b.negate_ra_state(2); }), Catch::Contains("#1 negate_ra_state"));
  CHECK_THAT(message([](auto& b) { b.restore_state(2); }), Catch::Contains("#1 restore_state"));
  CHECK_THAT(message([](auto& b) { b.stack_alloc(8, 8).pop_frame_pointer(4); }),
             Catch::Contains("#2 pop_frame_pointer"));
  CHECK_THAT(message([](auto& b) { b.def_cfa_register(1, reg::fp).push_frame_pointer(2, 5); }),
             Catch::Contains("#2 push_frame_pointer"));
  CHECK_THAT(message([](auto& b) { b.stack_free(1, std::numeric_limits<int32_t>::min()); }),
             Catch::Contains("#1 stack_free"));
  // A row that is invalid only once complete names every directive that made it.
  CHECK_THAT(
      message([](auto& b) { b.stack_free(1, 8).def_cfa_register(1, reg::sp).stack_alloc(4, 8); }),
      Catch::Contains("directives #1 stack_free, #2 def_cfa_register at offset 1"));
}

TEST_CASE("ok() sees the row as it stands, and a later directive at the same offset can fix it") {
  frame_builder b(abi::amd64);
  b.push_frame_pointer(1, 4).stack_free(4, 0).def_cfa(10, reg::sp, 16).stack_free(11, 8);
  CHECK_FALSE(b.ok());  // CFA = SP + 8 with FP saved at CFA - 16: not yet a valid row
  REQUIRE(b.first_error() != nullptr);
  CHECK_THAT(b.first_error()->message(), Catch::Contains("#5 stack_free at offset 11"));
  b.restore(11, reg::fp);
  CHECK(b.ok());
  CHECK(b.first_error() == nullptr);
  auto f = b.finish(0, 12);
  REQUIRE(f.ok());
  CHECK(f->rows.back() == row(11, cfa_base::sp, 8));
}
