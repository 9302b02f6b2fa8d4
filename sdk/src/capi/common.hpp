// Private helpers shared by the C API implementations (sdk/src/capi/<module>.cpp).
#pragma once

#include <jitunwind/jitunwind.h>
#include <jitunwind/log.h>
#include <jitunwind/result.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>

namespace jitunwind::capi {

/// Fills `out` (if not null) from `e`, its message in the C caller's terms (`in_c_terms`), and
/// returns the matching status.
jitunwind_status fail(jitunwind_error* out, const error& e) noexcept;
/// A message of the C++ SDK as a C caller reads it: the C++ names it uses (`name_code`,
/// `cfa_base::sp`, `frame_builder(abi).finish(...)`) replaced by the C API's
/// (`jitunwind_name_code`, `JITUNWIND_CFA_SP`, `jitunwind_frame_builder_finish`).
std::string in_c_terms(std::string_view message);
jitunwind_status fail(jitunwind_error* out, errc code, const char* message) noexcept;
/// Clears `out` (if not null) and returns JITUNWIND_OK.
jitunwind_status succeed(jitunwind_error* out) noexcept;

/// Runs `body` (returning jitunwind_status) and turns an escaping exception (only bad_alloc can
/// escape the SDK) into JITUNWIND_E_NO_MEMORY: nothing crosses the C boundary.
template <class F>
jitunwind_status guard(jitunwind_error* out, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(out, errc::no_memory, "out of memory");
  } catch (...) {
    return fail(out, errc::bad_state, "unexpected internal exception");
  }
}

/// A C log callback as a C++ log sink. The callback and its user pointer live in a heap block
/// (`sink.user`, a `c_log`) that the owner of the sink deletes with `delete_c_sink` when the
/// sink is no longer used (`delete_c_sink` leaves sinks c_sink did not make alone). No
/// callback: an empty sink, no block.
struct c_log {
  jitunwind_log_fn fn;
  void* user;
};
log_sink c_sink(jitunwind_log_fn fn, void* user, int min_level);
void delete_c_sink(const log_sink& sink) noexcept;

/// The byte-level part of read_options (one copy for every struct type).
jitunwind_status read_options_bytes(const void* in, uint32_t in_size, void* out, size_t size,
                                    size_t min_size, const char* type, const char* init,
                                    jitunwind_error* error);

/// Checks what every options struct of the C API shares (docs/c-api.md, "Options structs"):
/// `struct_size` first, and no padding anywhere, so that any size a release ever had ends on a
/// field (a caller's struct_size never cuts a field) and unused bytes are always the caller's 0.
template <class S>
constexpr bool options_struct =
    std::is_same_v<decltype(S::struct_size), uint32_t>&& offsetof(S, struct_size) == 0 &&
    std::has_unique_object_representations_v<S>;

/// Reads a caller's options struct into `out`, first filled with the defaults by `init` (the
/// struct's `_init`, named `<type>_init`). NULL: the defaults. struct_size 0 (zeroed or never
/// initialised): refused, naming the `_init` function. Below `min_size` (no release had so small
/// a struct): refused. Up to ours: the caller's fields, our defaults for those it does not have
/// (built against an older release). Larger (built against a newer release): allowed when the
/// fields we do not know are all 0.
template <class S>
jitunwind_status read_options(const S* in, S& out, void (*init)(S*), const char* type,
                              jitunwind_error* error, size_t min_size = sizeof(S)) {
  static_assert(options_struct<S>, "C options structs: uint32_t struct_size first, no padding");
  init(&out);
  if (in == nullptr) return succeed(error);
  const std::string init_name = std::string(type) + "_init";
  return read_options_bytes(in, in->struct_size, &out, sizeof(S), min_size, type, init_name.c_str(),
                            error);
}

}  // namespace jitunwind::capi
