// C API, sframe section: encoder, check/decode, table, unwinding.
#include <jitunwind/jitunwind.h>
#include <jitunwind/sframe.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"

#include "common/error.hpp"

#include <cstdlib>
#include <span>

using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

struct jitunwind_sframe_encoder {
  sframe::encoder encoder;
};

struct jitunwind_sframe_table {
  sframe::table table;
};

namespace {

jitunwind_sframe_info to_c(const sframe::section_info& i) {
  jitunwind_sframe_info c{};
  c.version = i.version;
  c.flags = i.flags;
  c.abi = static_cast<uint8_t>(i.target);
  c.cfa_fixed_fp_offset = i.cfa_fixed_fp_offset;
  c.cfa_fixed_ra_offset = i.cfa_fixed_ra_offset;
  c.aux_header_len = i.aux_header_len;
  c.num_fdes = i.num_fdes;
  c.num_fres = i.num_fres;
  c.fre_len = i.fre_len;
  c.fde_off = i.fde_off;
  c.fre_off = i.fre_off;
  return c;
}

std::span<const uint8_t> as_span(const void* bytes, size_t size) {
  return {static_cast<const uint8_t*>(bytes), size};
}

// Fills caller- or library-owned arrays from a decoded section (capacities already checked).
void fill(const sframe::decoded_section& d, jitunwind_function* functions,
          jitunwind_frame_row* rows) {
  size_t next = 0;
  for (size_t i = 0; i < d.functions.size(); ++i) {
    const auto& f = d.functions[i];
    jitunwind_function& c = functions[i];
    c = {};
    c.start = f.start;
    c.size = f.size;
    c.pcmask_rep = f.pcmask_rep;
    c.rows = rows + next;
    c.row_count = f.rows.size();
    c.flags = f.signal_frame ? JITUNWIND_FUNCTION_SIGNAL_FRAME : 0;
    c.pauth_key = f.pauth_key;
    for (const auto& r : f.rows) {
      if (capi::has_register_rules(r)) c.flags |= JITUNWIND_FUNCTION_REGISTER_RULES;
      rows[next++] = capi::to_c(r);
    }
  }
  for (const auto& nc : d.nonconforming)
    functions[nc.index].flags |= JITUNWIND_FUNCTION_NONCONFORMING;
}

struct c_reader {
  jitunwind_read_memory_fn fn;
  void* user;
  static bool read(void* self, uint64_t address, void* out, size_t len) {
    auto* r = static_cast<c_reader*>(self);
    return r->fn != nullptr && r->fn(r->user, address, out, len) != 0;
  }
};

size_t round_up(size_t n) {
  return (n + 7) & ~size_t{7};
}

int step(jitunwind_abi abi, const jitunwind_frame_row* row, const jitunwind_regs* callee, int innermost, jitunwind_read_memory_fn read, void* user,
         jitunwind_regs* caller, jitunwind_stop_reason* reason) {
  auto stop = [&](sframe::stop_reason r) {
    if (reason != nullptr) *reason = static_cast<jitunwind_stop_reason>(r);
    return 0;
  };
  if (row == nullptr || callee == nullptr || !capi::known_abi(abi))
    return stop(sframe::stop_reason::bad_rule);
  const auto r = capi::from_c(*row);
  if (!r) return stop(sframe::stop_reason::bad_rule);
  c_reader cr{read, user};
  const sframe::regs in{callee->pc, callee->sp, callee->fp, callee->lr};
  const auto s = sframe::step(static_cast<jitunwind::abi>(abi), *r, in, innermost != 0,
                              {&c_reader::read, &cr});
  if (!s.ok) return stop(s.reason);
  if (caller != nullptr) *caller = {s.caller.pc, s.caller.sp, s.caller.fp, s.caller.lr};
  return 1;
}

}  // namespace

extern "C" {

void jitunwind_sframe_encoder_options_init(jitunwind_sframe_encoder_options* o) {
  if (o == nullptr) return;
  const sframe::encoder_options defaults;
  *o = {};
  o->struct_size = sizeof *o;
  o->abi = static_cast<jitunwind_abi>(defaults.target);
  o->section_address = defaults.section_address;
  o->pcrel = defaults.pcrel ? 1 : 0;
  o->frame_pointer = defaults.frame_pointer ? (*defaults.frame_pointer ? 1 : 0) : -1;
  o->strict = defaults.strict ? 1 : 0;
  o->version = defaults.version;
  o->allow_flex = defaults.allow_flex ? 1 : 0;
}

jitunwind_status jitunwind_sframe_encoder_create(const jitunwind_sframe_encoder_options* options,
                                                 jitunwind_sframe_encoder** out,
                                                 jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_sframe_encoder_create: out is NULL");
    *out = nullptr;
    jitunwind_sframe_encoder_options c;
    if (auto st = capi::read_options(options, c, jitunwind_sframe_encoder_options_init,
                                     "jitunwind_sframe_encoder_options", error);
        st != JITUNWIND_OK)
      return st;
    sframe::encoder_options o;
    o.target = static_cast<abi>(capi::raw_value(c.abi));
    o.section_address = c.section_address;
    o.pcrel = c.pcrel != 0;
    if (c.frame_pointer >= 0) o.frame_pointer = c.frame_pointer != 0;
    o.strict = c.strict != 0;
    if (c.version < 0 || c.version > 255)
      return fail(error, errc::invalid_argument,
                  "jitunwind_sframe_encoder_create: version must be 2 or 3");
    o.version = static_cast<uint8_t>(c.version);
    o.allow_flex = c.allow_flex != 0;
    auto enc = sframe::encoder::create(o);
    if (!enc) return fail(error, enc.error());
    *out = new jitunwind_sframe_encoder{std::move(*enc)};
    return succeed(error);
  });
}

void jitunwind_sframe_encoder_destroy(jitunwind_sframe_encoder* encoder) {
  delete encoder;
}

jitunwind_status jitunwind_sframe_encoder_append(jitunwind_sframe_encoder* encoder,
                                                 const jitunwind_function* function,
                                                 jitunwind_error* error) {
  return guard(error, [&] {
    if (encoder == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_sframe_encoder_append: encoder is NULL");
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, "jitunwind_sframe_encoder_append", error, status);
    if (!f) return status;
    auto r = encoder->encoder.append(*f);
    return r ? succeed(error) : fail(error, r.error());
  });
}

size_t jitunwind_sframe_encoder_size(const jitunwind_sframe_encoder* encoder) {
  return encoder != nullptr ? encoder->encoder.size() : 0;
}

size_t jitunwind_sframe_encoder_function_count(const jitunwind_sframe_encoder* encoder) {
  return encoder != nullptr ? encoder->encoder.function_count() : 0;
}

jitunwind_status jitunwind_sframe_encoder_write(const jitunwind_sframe_encoder* encoder, void* out,
                                                size_t capacity, jitunwind_error* error) {
  return guard(error, [&] {
    if (encoder == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "encoder or out is NULL");
    auto r = encoder->encoder.write({static_cast<uint8_t*>(out), capacity});
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_sframe_encoder_relocate(jitunwind_sframe_encoder* encoder,
                                                   uint64_t new_section_address,
                                                   jitunwind_error* error) {
  return guard(error, [&] {
    if (encoder == nullptr) return fail(error, errc::invalid_argument, "encoder is NULL");
    auto r = encoder->encoder.relocate(new_section_address);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_sframe_check(const void* bytes, size_t size, uint64_t section_address,
                                        jitunwind_sframe_info* info, jitunwind_error* error) {
  return guard(error, [&] {
    if (bytes == nullptr && size > 0) return fail(error, errc::invalid_argument, "bytes is NULL");
    auto r = sframe::check(as_span(bytes, size), section_address);
    if (!r) return fail(error, r.error());
    if (info != nullptr) *info = to_c(*r);
    return succeed(error);
  });
}

jitunwind_status jitunwind_sframe_decode(const void* bytes, size_t size, uint64_t section_address,
                                         jitunwind_sframe_decoded** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
    *out = nullptr;
    if (bytes == nullptr && size > 0) return fail(error, errc::invalid_argument, "bytes is NULL");
    auto d = sframe::decode(as_span(bytes, size), section_address);
    if (!d) return fail(error, d.error());
    // One block: the struct, the functions, the rows.
    const size_t fn_off = round_up(sizeof(jitunwind_sframe_decoded));
    const size_t row_off = fn_off + round_up(d->functions.size() * sizeof(jitunwind_function));
    const size_t total = row_off + d->info.num_fres * sizeof(jitunwind_frame_row);
    auto* block = static_cast<uint8_t*>(std::malloc(total));
    if (block == nullptr) return fail(error, errc::no_memory, "out of memory");
    auto* dec = reinterpret_cast<jitunwind_sframe_decoded*>(block);
    dec->info = to_c(d->info);
    dec->functions = reinterpret_cast<jitunwind_function*>(block + fn_off);
    dec->rows = reinterpret_cast<jitunwind_frame_row*>(block + row_off);
    fill(*d, dec->functions, dec->rows);
    *out = dec;
    return succeed(error);
  });
}

void jitunwind_sframe_decoded_free(jitunwind_sframe_decoded* decoded) {
  std::free(decoded);
}

jitunwind_status jitunwind_sframe_decode_into(const void* bytes, size_t size,
                                              uint64_t section_address, jitunwind_sframe_info* info,
                                              jitunwind_function* functions,
                                              size_t function_capacity, jitunwind_frame_row* rows,
                                              size_t row_capacity, jitunwind_error* error) {
  return guard(error, [&] {
    if (bytes == nullptr && size > 0)
      return fail(error, errc::invalid_argument, "jitunwind_sframe_decode_into: bytes is NULL");
    auto d = sframe::decode(as_span(bytes, size), section_address);
    if (!d) return fail(error, d.error());
    if (info != nullptr) *info = to_c(d->info);
    if (function_capacity < d->functions.size() || row_capacity < d->info.num_fres ||
        (functions == nullptr && !d->functions.empty()) ||
        (rows == nullptr && d->info.num_fres > 0))
      return fail(error, jitunwind::detail::make_error(
                             errc::limit_exceeded,
                             "jitunwind_sframe_decode_into: the section has %zu functions and %u "
                             "rows; the arrays hold %zu and %zu",
                             d->functions.size(), d->info.num_fres, function_capacity,
                             row_capacity));
    fill(*d, functions, rows);
    return succeed(error);
  });
}

jitunwind_status jitunwind_sframe_table_create(const void* bytes, size_t size,
                                               uint64_t section_address,
                                               jitunwind_sframe_table** out,
                                               jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
    *out = nullptr;
    if (bytes == nullptr && size > 0) return fail(error, errc::invalid_argument, "bytes is NULL");
    auto t = sframe::table::create(as_span(bytes, size), section_address);
    if (!t) return fail(error, t.error());
    *out = new jitunwind_sframe_table{std::move(*t)};
    return succeed(error);
  });
}

void jitunwind_sframe_table_destroy(jitunwind_sframe_table* table) {
  delete table;
}

void jitunwind_sframe_table_info(const jitunwind_sframe_table* table, jitunwind_sframe_info* out) {
  if (table != nullptr && out != nullptr) *out = to_c(table->table.info());
}

int jitunwind_sframe_table_find(const jitunwind_sframe_table* table, uint64_t pc,
                                jitunwind_sframe_lookup* out) {
  if (table == nullptr) return 0;
  auto r = table->table.find(pc);
  if (!r) return 0;
  if (out != nullptr) {
    *out = {};
    out->function_index = r->function_index;
    out->function_start = r->function_start;
    out->function_size = r->function_size;
    out->row = capi::to_c(r->row);
  }
  return 1;
}

const char* jitunwind_stop_reason_string(jitunwind_stop_reason reason) {
  return sframe::to_string(static_cast<sframe::stop_reason>(reason));
}

int jitunwind_sframe_step(jitunwind_abi abi, const jitunwind_frame_row* row,
                          const jitunwind_regs* callee, int innermost,
                          jitunwind_read_memory_fn read, void* user, jitunwind_regs* caller,
                          jitunwind_stop_reason* reason) {
  return step(abi, row, callee, innermost, read, user, caller, reason);
}

size_t jitunwind_sframe_unwind(jitunwind_abi abi, const jitunwind_sframe_table* const* tables,
                               size_t table_count, const jitunwind_regs* start,
                               jitunwind_read_memory_fn read, void* user, uint64_t* pcs,
                               size_t max_pcs, jitunwind_stop_reason* reason) {
  try {
    if (start == nullptr || (pcs == nullptr && max_pcs > 0) || !capi::known_abi(abi)) {
      if (reason != nullptr) *reason = JITUNWIND_STOP_BAD_RULE;
      return 0;
    }
    sframe::unwinder u(static_cast<jitunwind::abi>(abi));
    for (size_t i = 0; i < table_count; ++i)
      if (tables != nullptr && tables[i] != nullptr) (void)u.add(&tables[i]->table);
    c_reader cr{read, user};
    const auto t =
        u.unwind({start->pc, start->sp, start->fp, start->lr}, {&c_reader::read, &cr}, max_pcs);
    for (size_t i = 0; i < t.pcs.size(); ++i) pcs[i] = t.pcs[i];
    if (reason != nullptr) *reason = static_cast<jitunwind_stop_reason>(t.reason);
    return t.pcs.size();
  } catch (...) {
    if (reason != nullptr) *reason = JITUNWIND_STOP_DEPTH_LIMIT;
    return 0;
  }
}

}  // extern "C"
