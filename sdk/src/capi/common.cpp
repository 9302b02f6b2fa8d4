#include <jitunwind/jitunwind.h>
#include <jitunwind/result.h>

#include "capi/common.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <string_view>
#include <utility>
#include <cstring>

extern "C" const char* jitunwind_status_string(jitunwind_status status) {
  return jitunwind::to_string(static_cast<jitunwind::errc>(-static_cast<int>(status)));
}

extern "C" int jitunwind_version(void) {
  return JITUNWIND_VERSION;
}

extern "C" const char* jitunwind_version_string(void) {
  return JITUNWIND_VERSION_STRING;
}

namespace jitunwind::capi {

namespace {

// The C++ spellings the SDK's messages use and what a C caller knows them as (docs/c-api.md,
// "Conventions"; tests/capi/messages_test.cpp provokes each message from C). Replaced where
// they stand as a whole name, longest first where one contains another.
constexpr std::pair<std::string_view, std::string_view> c_terms[] = {
    {"frame_builder(abi).finish(...)", "jitunwind_frame_builder_finish"},
    {"name_code", "jitunwind_name_code"},
    {"name_function", "jitunwind_name_function"},
    {"forget_code", "jitunwind_forget_code"},
    {"describe_window", "jitunwind_session_describe_window"},
    {"allocate()", "jitunwind_window_allocate"},
    {"name_range", "jitunwind_window_name_range"},
    {"retire_function", "jitunwind_window_retire_function"},
    {"session_options::reuse", "jitunwind_session_options.address_reuse"},
    {"flush_latency", "flush_latency_ms"},
    {"cfa_base::sp", "JITUNWIND_CFA_SP"},
    {"cfa_base::fp", "JITUNWIND_CFA_FP"},
    {"fp_rule::unchanged", "JITUNWIND_FP_UNCHANGED"},
    {"allow_flex = false", "allow_flex = 0"},
    {"object_location::file", "JITUNWIND_USDT_FILE"},
    {"unload()", "jitunwind_usdt_provider_unload"},
};

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string in_c_terms(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 32);
  size_t i = 0;
  while (i < message.size()) {
    bool replaced = false;
    if (i == 0 || !name_char(message[i - 1])) {
      for (const auto& [cxx, c] : c_terms) {
        if (message.substr(i, cxx.size()) != cxx) continue;
        const size_t end = i + cxx.size();
        if (name_char(cxx.back()) && end < message.size() && name_char(message[end])) continue;
        out += c;
        i = end;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += message[i++];
  }
  return out;
}

jitunwind_status fail(jitunwind_error* out, const error& e) noexcept {
  const auto status = static_cast<jitunwind_status>(-static_cast<int>(e.code()));
  if (out != nullptr) {
    out->status = status;
    std::string m;
    try {
      m = in_c_terms(e.message());
    } catch (...) {  // no memory for the translation: the message as it is
      m.clear();
    }
    const std::string& text = m.empty() ? e.message() : m;
    const size_t n = std::min(text.size(), sizeof(out->message) - 1);
    std::memcpy(out->message, text.data(), n);
    out->message[n] = '\0';
  }
  return status;
}

namespace {

void call_c_log(void* u, log_level level, std::string_view m) {
  auto* c = static_cast<c_log*>(u);
  c->fn(c->user, static_cast<int>(level), m.data(), m.size());
}

}  // namespace

log_sink c_sink(jitunwind_log_fn fn, void* user, int min_level) {
  log_sink sink;
  if (fn == nullptr) return sink;
  sink.user = new c_log{fn, user};
  sink.fn = call_c_log;
  sink.min_level = static_cast<log_level>(std::clamp(min_level, 0, 3));
  return sink;
}

void delete_c_sink(const log_sink& sink) noexcept {
  if (sink.fn == call_c_log) delete static_cast<c_log*>(sink.user);  // only c_sink's blocks
}

jitunwind_status fail(jitunwind_error* out, errc code, const char* message) noexcept {
  const auto status = static_cast<jitunwind_status>(-static_cast<int>(code));
  if (out != nullptr) {
    out->status = status;
    std::strncpy(out->message, message, sizeof(out->message) - 1);
    out->message[sizeof(out->message) - 1] = '\0';
  }
  return status;
}

jitunwind_status succeed(jitunwind_error* out) noexcept {
  if (out != nullptr) {
    out->status = JITUNWIND_OK;
    out->message[0] = '\0';
  }
  return JITUNWIND_OK;
}

jitunwind_status read_options_bytes(const void* in, uint32_t in_size, void* out, size_t size,
                                    size_t min_size, const char* type, const char* init,
                                    jitunwind_error* error) {
  if (in_size == 0)
    return fail(error, detail::make_error(errc::invalid_argument,
                                          "%s.struct_size is 0 (a zeroed or uninitialised "
                                          "struct): fill it with %s() first, or pass NULL for "
                                          "the defaults",
                                          type, init));
  if (in_size < min_size)
    return fail(error, detail::make_error(errc::invalid_argument,
                                          "%s.struct_size is %u: no release had a struct smaller "
                                          "than %zu bytes (use %s())",
                                          type, in_size, min_size, init));
  const auto* bytes = static_cast<const unsigned char*>(in);
  if (in_size > size &&
      std::any_of(bytes + size, bytes + in_size, [](unsigned char b) { return b != 0; }))
    return fail(error,
                detail::make_error(errc::unsupported,
                                   "%s: the caller's struct (%u bytes) sets fields this library "
                                   "(%s, %zu bytes) does not know: a newer jitunwind is needed",
                                   type, in_size, JITUNWIND_VERSION_STRING, size));
  std::memcpy(out, in, std::min<size_t>(in_size, size));
  const auto ours = static_cast<uint32_t>(size);  // what `out` is now: a struct of our size
  std::memcpy(out, &ours, sizeof ours);
  return succeed(error);
}

}  // namespace jitunwind::capi
