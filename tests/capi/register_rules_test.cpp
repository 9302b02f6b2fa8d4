// Register rules (SFrame v3 flexible FDEs) through the C API: rows naming registers built,
// validated, encoded, decoded, looked up and stepped from C calls only, and the binutils 2.46
// vectors' flexible FDEs read through the C decoder against objdump's text.
#include <jitunwind/jitunwind.h>

#include "support/sframe_vectors.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

extern "C" int capi_c_register_rules_name_code(char* msg, size_t len);

namespace {

constexpr uint8_t rbx = 3, rbp = 6, r10 = 10;

// A stack-realigning (DRAP) function as gcc emits it for `-mstackrealign`, described from C:
//   0: lea r10, [rsp+8]      4: and rsp, -16        8: push [r10-8]
//  12: push rbp              13: mov rbp, rsp       16: push r10   (body)
//  40: RA moved to rbx (a sequence that clobbers the stack slot)    48: end
// The builder gives the entry row; the rows with register rules are written by hand.
struct flex_function {
  std::vector<jitunwind_frame_row> rows;
  jitunwind_function function{};
};

flex_function drap_function(uint64_t start) {
  flex_function f;
  jitunwind_frame_builder* b = nullptr;
  REQUIRE(jitunwind_frame_builder_create(JITUNWIND_ABI_AMD64, &b, nullptr) == JITUNWIND_OK);
  jitunwind_function entry{};
  REQUIRE(jitunwind_frame_builder_finish(b, start, 48, &entry, nullptr) == JITUNWIND_OK);
  REQUIRE(entry.row_count == 1);
  f.rows.push_back(entry.rows[0]);
  jitunwind_frame_builder_destroy(b);

  jitunwind_frame_row r = f.rows[0];
  auto keep = [&] { f.rows.push_back(r); };
  // CFA = r10 + 0 once rsp is realigned.
  r.pc_offset = 4;
  r.cfa_base = JITUNWIND_CFA_REG;
  r.cfa_offset = 0;
  r.cfa_reg = r10;
  keep();
  // CFA = *(rbp - 8) (r10 pushed below the saved rbp), the caller's rbp at *(rbp + 0).
  r.pc_offset = 16;
  r.cfa_base = JITUNWIND_CFA_FP;
  r.cfa_offset = -8;
  r.fp_rule = JITUNWIND_FP_REGISTER_SAVED;
  r.fp_offset = 0;
  r.cfa_reg = 0;
  r.cfa_deref = 1;
  r.fp_reg = rbp;
  keep();
  // The return address kept in rbx.
  r.pc_offset = 40;
  r.ra_rule = JITUNWIND_RA_REGISTER_VALUE;
  r.ra_offset = 0;
  r.ra_reg = rbx;
  keep();

  f.function.start = start;
  f.function.size = 48;
  f.function.rows = f.rows.data();
  f.function.row_count = f.rows.size();
  return f;
}

std::vector<uint8_t> encode(const jitunwind_function& f, uint64_t section, int version, jitunwind_error& err,
                            jitunwind_status& st) {
  jitunwind_sframe_encoder_options o;
  jitunwind_sframe_encoder_options_init(&o);
  o.section_address = section;
  o.version = version;
  jitunwind_sframe_encoder* enc = nullptr;
  REQUIRE(jitunwind_sframe_encoder_create(&o, &enc, &err) == JITUNWIND_OK);
  std::vector<uint8_t> out;
  st = jitunwind_sframe_encoder_append(enc, &f, &err);
  if (st == JITUNWIND_OK) {
    out.resize(jitunwind_sframe_encoder_size(enc));
    REQUIRE(jitunwind_sframe_encoder_write(enc, out.data(), out.size(), &err) == JITUNWIND_OK);
  }
  jitunwind_sframe_encoder_destroy(enc);
  return out;
}

void check_row(const jitunwind_frame_row& got, const jitunwind_frame_row& want) {
  CHECK(got.pc_offset == want.pc_offset);
  CHECK(int(got.cfa_base) == int(want.cfa_base));
  CHECK(int(got.ra_rule) == int(want.ra_rule));
  CHECK(int(got.fp_rule) == int(want.fp_rule));
  CHECK(int(got.ra_mangled) == int(want.ra_mangled));
  CHECK(got.cfa_offset == want.cfa_offset);
  CHECK(got.ra_offset == want.ra_offset);
  CHECK(got.fp_offset == want.fp_offset);
  CHECK(int(got.cfa_reg) == int(want.cfa_reg));
  CHECK(int(got.cfa_deref) == int(want.cfa_deref));
  CHECK(int(got.ra_reg) == int(want.ra_reg));
  CHECK(int(got.fp_reg) == int(want.fp_reg));
  CHECK(got.reserved[0] == 0);
  CHECK(got.reserved[1] == 0);
}

// A little stack for jitunwind_sframe_step.
struct memory {
  uint64_t base;
  std::vector<uint64_t> words;
  static int read(void* user, uint64_t address, void* out, size_t len) {
    auto* m = static_cast<memory*>(user);
    if (address < m->base || address + len > m->base + m->words.size() * 8) return 0;
    std::memcpy(out, reinterpret_cast<const uint8_t*>(m->words.data()) + (address - m->base), len);
    return 1;
  }
};

}  // namespace

TEST_CASE(
    "capi register rules: a DRAP function round-trips through the C encoder and decoder") {
  const uint64_t section = 0x10000, start = 0x20000;
  flex_function f = drap_function(start);
  jitunwind_error err{};
  CHECK(jitunwind_frame_validate(JITUNWIND_ABI_AMD64, &f.function, &err) == JITUNWIND_OK);
  INFO(err.message);
  // A reserved field set (by a caller of a later release) is refused, not ignored.
  f.rows[2].reserved[1] = 1;
  CHECK(jitunwind_frame_validate(JITUNWIND_ABI_AMD64, &f.function, &err) ==
        JITUNWIND_E_INVALID_ARGUMENT);
  CHECK(std::string(err.message).find("jitunwind_frame_validate: row 2") == 0);
  f.rows[2].reserved[1] = 0;

  jitunwind_status st{};
  const auto bytes = encode(f.function, section, 3, err, st);
  REQUIRE(st == JITUNWIND_OK);

  // Library-owned decode.
  jitunwind_sframe_decoded* d = nullptr;
  REQUIRE(jitunwind_sframe_decode(bytes.data(), bytes.size(), section, &d, &err) == JITUNWIND_OK);
  REQUIRE(d->info.num_fdes == 1);
  REQUIRE(d->functions[0].row_count == f.rows.size());
  CHECK(d->functions[0].start == start);
  CHECK((d->functions[0].flags & JITUNWIND_FUNCTION_REGISTER_RULES) != 0);
  for (size_t i = 0; i < f.rows.size(); ++i) {
    INFO("decoded row " << i);
    check_row(d->functions[0].rows[i], f.rows[i]);
  }
  jitunwind_sframe_decoded_free(d);

  // Caller-owned decode.
  jitunwind_function fn{};
  std::vector<jitunwind_frame_row> rows(f.rows.size());
  REQUIRE(jitunwind_sframe_decode_into(bytes.data(), bytes.size(), section, nullptr, &fn, 1,
                                       rows.data(), rows.size(), &err) == JITUNWIND_OK);
  for (size_t i = 0; i < f.rows.size(); ++i) {
    INFO("decode_into row " << i);
    check_row(rows[i], f.rows[i]);
  }

  // Lookup: the row at start + 20 is the CFA = *(rbp - 8) one.
  jitunwind_sframe_table* t = nullptr;
  REQUIRE(jitunwind_sframe_table_create(bytes.data(), bytes.size(), section, &t, &err) ==
          JITUNWIND_OK);
  jitunwind_sframe_lookup l{};
  REQUIRE(jitunwind_sframe_table_find(t, start + 20, &l) == 1);
  check_row(l.row, f.rows[2]);
  jitunwind_sframe_table_destroy(t);

  // Stepping that row reads the CFA from memory: CFA = *(rbp - 8) = 0x8040, RA at CFA - 8,
  // caller's rbp at *(rbp + 0). Without cfa_deref the CFA would be rbp - 8.
  memory m{0x8000, std::vector<uint64_t>(16, 0)};
  const uint64_t fp = 0x8010;
  m.words[(fp - 8 - m.base) / 8] = 0x8040;
  m.words[(fp - m.base) / 8] = 0x8070;
  m.words[(0x8040 - 8 - m.base) / 8] = 0x4242;
  const jitunwind_regs callee{start + 20, 0x8000, fp, 0};
  jitunwind_regs caller{};
  jitunwind_stop_reason why{};
  REQUIRE(jitunwind_sframe_step(JITUNWIND_ABI_AMD64, &l.row, &callee, 1, &memory::read, &m,
                               &caller, &why) == 1);
  CHECK(caller.pc == 0x4242);
  CHECK(caller.sp == 0x8040);
  CHECK(caller.fp == 0x8070);
  // The RA-in-rbx row needs a register jitunwind_regs does not have.
  CHECK(jitunwind_sframe_step(JITUNWIND_ABI_AMD64, &f.rows[3], &callee, 1, &memory::read, &m,
                              &caller, &why) == 0);
  CHECK(why == JITUNWIND_STOP_UNSUPPORTED_RULE);
}

TEST_CASE("capi register rules: the SFrame v2 encoder refuses them, naming the row") {
  flex_function f = drap_function(0x20000);
  jitunwind_error err{};
  jitunwind_status st{};
  const auto bytes = encode(f.function, 0x10000, 2, err, st);
  CHECK(bytes.empty());
  CHECK(st == JITUNWIND_E_INVALID_ARGUMENT);
  const std::string msg = err.message;
  INFO(msg);
  CHECK(msg.find("row 1") != std::string::npos);
  CHECK(msg.find("SFrame v2 cannot express it") != std::string::npos);
  // Without the rows with register rules the same encoder takes the function.
  f.function.row_count = 1;
  (void)encode(f.function, 0x10000, 2, err, st);
  CHECK(st == JITUNWIND_OK);
}

TEST_CASE("capi register rules: a window publishes a function with register rules") {
  jitunwind_session_options o;
  jitunwind_session_options_init(&o);
  o.publishers = JITUNWIND_PUBLISH_REGISTRY;
  jitunwind_session* s = nullptr;
  jitunwind_error err{};
  REQUIRE(jitunwind_session_create(&o, &s, &err) == JITUNWIND_OK);
  static unsigned char code[4096];
  const auto text = reinterpret_cast<uint64_t>(code);
  jitunwind_window* w = nullptr;
  jitunwind_described_window_options wo;
  jitunwind_described_window_options_init(&wo);
  wo.text_start = text;
  wo.text_size = sizeof code;
  REQUIRE(jitunwind_session_describe_window(s, &wo, &w, &err) == JITUNWIND_OK);
  flex_function f = drap_function(text);
  REQUIRE(jitunwind_window_append(w, "drap", &f.function, 0, &err) == JITUNWIND_OK);
  REQUIRE(jitunwind_window_publish(w, &err) == JITUNWIND_OK);
  size_t size = 0;
  const uint8_t* sframe = jitunwind_window_published_sframe(w, &size);
  REQUIRE(sframe != nullptr);
  jitunwind_sframe_decoded* d = nullptr;
  REQUIRE(jitunwind_sframe_decode(sframe, size, reinterpret_cast<uint64_t>(sframe), &d, &err) ==
          JITUNWIND_OK);
  REQUIRE(d->info.num_fdes == 1);
  REQUIRE(d->functions[0].row_count == f.rows.size());
  for (size_t i = 0; i < f.rows.size(); ++i) {
    INFO("published row " << i);
    check_row(d->functions[0].rows[i], f.rows[i]);
  }
  jitunwind_sframe_decoded_free(d);
  jitunwind_session_destroy(s);
}

TEST_CASE(
    "capi register rules: the binutils 2.46 vectors' flexible FDEs decode with their registers") {
  const auto dir = jitunwind::test::sframe_vectors_dir();
  if (!dir) return;
  size_t flex_functions = 0, register_rows = 0;
  for (const auto& v : jitunwind::test::load_sframe_vectors(*dir)) {
    if (v.binutils != "2.46" || v.content.empty()) continue;
    INFO(v.name);
    const auto oracle = jitunwind::test::parse_objdump_sframe(v.groundtruth);
    REQUIRE(oracle.has_value());
    jitunwind_error err{};
    jitunwind_sframe_decoded* d = nullptr;
    REQUIRE(jitunwind_sframe_decode(v.content.data(), v.content.size(), v.section_base, &d, &err) ==
            JITUNWIND_OK);
    REQUIRE(d->info.num_fdes == oracle->functions.size());
    for (size_t i = 0; i < oracle->functions.size(); ++i) {
      const auto& of = oracle->functions[i];
      if (!of.flex) continue;
      ++flex_functions;
      const jitunwind_function& cf = d->functions[i];
      INFO("function " << i);
      REQUIRE(cf.row_count == of.rows.size());
      bool v3 = false;
      for (size_t j = 0; j < cf.row_count; ++j) {
        std::string why;
        const auto want = jitunwind::test::oracle_to_row(static_cast<jitunwind::abi>(d->info.abi),
                                                         of, of.rows[j], why);
        INFO("row " << j << " objdump: " << of.rows[j].cfa << " " << of.rows[j].fp << " "
                    << of.rows[j].ra << " " << why);
        REQUIRE(want.has_value());
        const jitunwind_frame_row& g = cf.rows[j];
        CHECK(cf.rows[j].pc_offset == want->pc_offset);
        CHECK(int(cf.rows[j].cfa_base) == int(want->cfa));
        CHECK(int(cf.rows[j].ra_rule) == int(want->ra));
        CHECK(int(cf.rows[j].fp_rule) == int(want->fp));
        CHECK(cf.rows[j].cfa_offset == want->cfa_offset);
        CHECK(cf.rows[j].ra_offset == want->ra_offset);
        CHECK(cf.rows[j].fp_offset == want->fp_offset);
        CHECK(int(g.cfa_reg) == int(want->cfa_reg));
        CHECK((g.cfa_deref != 0) == want->cfa_deref);
        CHECK(int(g.ra_reg) == int(want->ra_reg));
        CHECK(int(g.fp_reg) == int(want->fp_reg));
        if (g.cfa_reg != 0 || g.ra_reg != 0 || g.fp_reg != 0 || g.cfa_deref != 0) {
          ++register_rows;
          v3 = true;
        }
      }
      CHECK(((cf.flags & JITUNWIND_FUNCTION_REGISTER_RULES) != 0) == v3);
    }
    jitunwind_sframe_decoded_free(d);
  }
  std::printf("binutils 2.46 vectors: %zu flexible functions, %zu rows with register rules\n",
              flex_functions, register_rows);
  CHECK(flex_functions > 0);
  CHECK(register_rows > 0);
}

TEST_CASE(
    "capi register rules: C11 names a DRAP function with jitunwind_name_code, the registry's "
    "SFrame carries its registers") {
  char msg[512];
  const int rc = capi_c_register_rules_name_code(msg, sizeof msg);
  INFO(msg);
  CHECK(rc == 0);
  // jitunwind_name_code's default session writes this process's perf map in /tmp.
  std::remove(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str());
}
