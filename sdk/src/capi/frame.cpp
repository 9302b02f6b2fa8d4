// C API, frame section: the frame builder and validate.
#include <jitunwind/frame.h>
#include <jitunwind/jitunwind.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"

#include <vector>

using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

struct jitunwind_frame_builder {
  frame_builder builder;
  // What the last finish or recipe handed out.
  std::vector<jitunwind_frame_row> finished;
  std::vector<jitunwind_saved_register> finished_saved;
};

namespace {

// The builder's sticky state as a status (the message comes with finish).
jitunwind_status state(const jitunwind_frame_builder* b) {
  if (b == nullptr) return JITUNWIND_E_INVALID_ARGUMENT;
  if (const error* e = b->builder.first_error())
    return static_cast<jitunwind_status>(-static_cast<int>(e->code()));
  return JITUNWIND_OK;
}

template <class F>
jitunwind_status directive(jitunwind_frame_builder* b, F&& apply) {
  if (b == nullptr) return JITUNWIND_E_INVALID_ARGUMENT;
  try {
    apply(b->builder);
  } catch (const std::bad_alloc&) {
    return JITUNWIND_E_NO_MEMORY;
  }
  return state(b);
}

// Stores a finished function's rows and saved registers in the builder (they stay valid until
// its next finish, recipe, reset or destroy) and describes them in `out`.
jitunwind_status hand_out(jitunwind_frame_builder* b, result<function_desc> f,
                          jitunwind_function* out, jitunwind_error* error) {
  if (!f) return fail(error, f.error());
  capi::to_c(*f, b->finished, b->finished_saved, *out);
  return succeed(error);
}

// The recipes with epilogues: arguments checked, the epilogues in C++ form, the rows of
// `recipe(abi, epilogues)` handed out.
template <class F>
jitunwind_status with_epilogues(jitunwind_frame_builder* storage,
                                const jitunwind_epilogue* epilogues, size_t count,
                                jitunwind_function* out, jitunwind_error* error, F&& recipe) {
  return guard(error, [&] {
    if (storage == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "recipe: storage or out is NULL");
    if (epilogues == nullptr && count > 0)
      return fail(error, errc::invalid_argument,
                  "recipe: epilogues is NULL but epilogue_count > 0");
    std::vector<recipes::epilogue> e;
    for (size_t i = 0; i < count; ++i)
      e.push_back({epilogues[i].after_pop, epilogues[i].after_ret});
    return hand_out(storage, recipe(storage->builder.target(), e), out, error);
  });
}

}  // namespace

extern "C" {

jitunwind_status jitunwind_frame_validate(jitunwind_abi abi, const jitunwind_function* function,
                                          jitunwind_error* error) {
  return guard(error, [&] {
    if (!capi::known_abi(abi))
      return fail(error, errc::invalid_argument, "jitunwind_frame_validate: unknown ABI");
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, "jitunwind_frame_validate", error, status);
    if (!f) return status;
    auto r = validate(static_cast<jitunwind::abi>(abi), *f);
    return r ? succeed(error) : fail(error, r.error());
  });
}

jitunwind_status jitunwind_frame_builder_create(jitunwind_abi abi, jitunwind_frame_builder** out,
                                                jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr)
      return fail(error, errc::invalid_argument, "jitunwind_frame_builder_create: out is NULL");
    *out = nullptr;
    if (!capi::known_abi(abi))
      return fail(error, errc::invalid_argument, "jitunwind_frame_builder_create: unknown ABI");
    *out = new jitunwind_frame_builder{
        frame_builder(static_cast<jitunwind::abi>(capi::raw_value(abi))), {}, {}};
    return succeed(error);
  });
}

void jitunwind_frame_builder_destroy(jitunwind_frame_builder* builder) {
  delete builder;
}

void jitunwind_frame_builder_reset(jitunwind_frame_builder* builder) {
  if (builder != nullptr) builder->builder.reset();
}

jitunwind_status jitunwind_frame_def_cfa(jitunwind_frame_builder* b, uint32_t at,
                                         jitunwind_reg base, int32_t offset) {
  return directive(b, [&](frame_builder& fb) { fb.def_cfa(at, capi::to_reg(base), offset); });
}

jitunwind_status jitunwind_frame_def_cfa_offset(jitunwind_frame_builder* b, uint32_t at,
                                                int32_t offset) {
  return directive(b, [&](frame_builder& fb) { fb.def_cfa_offset(at, offset); });
}

jitunwind_status jitunwind_frame_adjust_cfa_offset(jitunwind_frame_builder* b, uint32_t at,
                                                   int32_t delta) {
  return directive(b, [&](frame_builder& fb) { fb.adjust_cfa_offset(at, delta); });
}

jitunwind_status jitunwind_frame_def_cfa_register(jitunwind_frame_builder* b, uint32_t at,
                                                  jitunwind_reg base) {
  return directive(b, [&](frame_builder& fb) { fb.def_cfa_register(at, capi::to_reg(base)); });
}

jitunwind_status jitunwind_frame_offset(jitunwind_frame_builder* b, uint32_t at, jitunwind_reg r,
                                        int32_t cfa_relative) {
  return directive(b, [&](frame_builder& fb) { fb.offset(at, capi::to_reg(r), cfa_relative); });
}

jitunwind_status jitunwind_frame_restore(jitunwind_frame_builder* b, uint32_t at, jitunwind_reg r) {
  return directive(b, [&](frame_builder& fb) { fb.restore(at, capi::to_reg(r)); });
}

jitunwind_status jitunwind_frame_undefined(jitunwind_frame_builder* b, uint32_t at,
                                           jitunwind_reg r) {
  return directive(b, [&](frame_builder& fb) { fb.undefined(at, capi::to_reg(r)); });
}

jitunwind_status jitunwind_frame_negate_ra_state(jitunwind_frame_builder* b, uint32_t at) {
  return directive(b, [&](frame_builder& fb) { fb.negate_ra_state(at); });
}

jitunwind_status jitunwind_frame_save_register(jitunwind_frame_builder* b, uint32_t at,
                                               uint16_t dwarf_reg, int32_t cfa_relative) {
  return directive(b, [&](frame_builder& fb) { fb.save_register(at, dwarf_reg, cfa_relative); });
}

jitunwind_status jitunwind_frame_restore_register(jitunwind_frame_builder* b, uint32_t at,
                                                  uint16_t dwarf_reg) {
  return directive(b, [&](frame_builder& fb) { fb.restore_register(at, dwarf_reg); });
}

jitunwind_status jitunwind_frame_remember_state(jitunwind_frame_builder* b) {
  return directive(b, [&](frame_builder& fb) { fb.remember_state(); });
}

jitunwind_status jitunwind_frame_restore_state(jitunwind_frame_builder* b, uint32_t at) {
  return directive(b, [&](frame_builder& fb) { fb.restore_state(at); });
}

jitunwind_status jitunwind_frame_push_frame_pointer(jitunwind_frame_builder* b, uint32_t after_push,
                                                    uint32_t after_set_fp) {
  return directive(b, [&](frame_builder& fb) { fb.push_frame_pointer(after_push, after_set_fp); });
}

jitunwind_status jitunwind_frame_pop_frame_pointer(jitunwind_frame_builder* b, uint32_t after_pop) {
  return directive(b, [&](frame_builder& fb) { fb.pop_frame_pointer(after_pop); });
}

jitunwind_status jitunwind_frame_stack_alloc(jitunwind_frame_builder* b, uint32_t at,
                                             int32_t bytes) {
  return directive(b, [&](frame_builder& fb) { fb.stack_alloc(at, bytes); });
}

jitunwind_status jitunwind_frame_stack_free(jitunwind_frame_builder* b, uint32_t at,
                                            int32_t bytes) {
  return directive(b, [&](frame_builder& fb) { fb.stack_free(at, bytes); });
}

jitunwind_status jitunwind_frame_builder_finish(jitunwind_frame_builder* builder, uint64_t start,
                                                uint32_t size, jitunwind_function* out,
                                                jitunwind_error* error) {
  return guard(error, [&] {
    if (builder == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument,
                  "jitunwind_frame_builder_finish: builder or out is NULL");
    return hand_out(builder, builder->builder.finish(start, size), out, error);
  });
}

jitunwind_status jitunwind_frame_recipe_leaf(jitunwind_frame_builder* storage, uint64_t start,
                                             uint32_t size, jitunwind_function* out,
                                             jitunwind_error* error) {
  return guard(error, [&] {
    if (storage == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "recipe: storage or out is NULL");
    return hand_out(storage, recipes::leaf(storage->builder.target(), start, size), out, error);
  });
}

jitunwind_status jitunwind_frame_recipe_frame_pointer(
    jitunwind_frame_builder* storage, uint64_t start, uint32_t size, uint32_t after_push,
    uint32_t after_set_fp, const jitunwind_epilogue* epilogues, size_t epilogue_count,
    jitunwind_function* out, jitunwind_error* error) {
  return with_epilogues(
      storage, epilogues, epilogue_count, out, error, [&](abi a, span<const recipes::epilogue> e) {
        return recipes::frame_pointer(a, start, size, after_push, after_set_fp, e);
      });
}

jitunwind_status jitunwind_frame_recipe_sp_frame(jitunwind_frame_builder* storage, uint64_t start,
                                                 uint32_t size, uint32_t after_alloc,
                                                 int32_t frame_bytes,
                                                 const jitunwind_epilogue* epilogues,
                                                 size_t epilogue_count, jitunwind_function* out,
                                                 jitunwind_error* error) {
  return with_epilogues(storage, epilogues, epilogue_count, out, error,
                        [&](abi a, span<const recipes::epilogue> e) {
                          return recipes::sp_frame(a, start, size, after_alloc, frame_bytes, e);
                        });
}

jitunwind_status jitunwind_frame_recipe_trampoline(jitunwind_frame_builder* storage, uint64_t start,
                                                   uint32_t size, uint32_t after_alloc,
                                                   int32_t frame_bytes, uint32_t after_free,
                                                   jitunwind_function* out,
                                                   jitunwind_error* error) {
  return guard(error, [&] {
    if (storage == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "recipe: storage or out is NULL");
    return hand_out(storage,
                    recipes::trampoline(storage->builder.target(), start, size, after_alloc,
                                        frame_bytes, after_free),
                    out, error);
  });
}

}  // extern "C"
