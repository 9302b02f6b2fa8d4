// C API of the window module: jitunwind_session is a jitunwind::session, jitunwind_window a
// jitunwind::window (both opaque to C).
#include <jitunwind/jitunwind.h>
#include <jitunwind/window.h>

#include "capi/common.hpp"
#include "capi/frame_convert.hpp"

#include <algorithm>
#include <cstring>
#include <string>

using namespace jitunwind;
using jitunwind::capi::fail;
using jitunwind::capi::guard;
using jitunwind::capi::succeed;

namespace {

session* S(jitunwind_session* s) {
  return reinterpret_cast<session*>(s);
}
const session* S(const jitunwind_session* s) {
  return reinterpret_cast<const session*>(s);
}
window* W(jitunwind_window* w) {
  return reinterpret_cast<window*>(w);
}
const window* W(const jitunwind_window* w) {
  return reinterpret_cast<const window*>(w);
}

jitunwind_status make_session(const session_options& o, jitunwind_session** out,
                              jitunwind_error* error) {
  auto s = session::create(o);
  if (!s) {
    capi::delete_c_sink(o.log);  // no session took it
    return fail(error, s.error());
  }
  *out = reinterpret_cast<jitunwind_session*>(std::move(s).value().release());
  return succeed(error);
}

// append and name_range: a named function from C, checked and converted, applied by `apply`.
template <class F>
jitunwind_status with_function(jitunwind_window* w, const char* name,
                               const jitunwind_function* function, const char* what,
                               jitunwind_error* error, F&& apply) {
  return guard(error, [&] {
    if (w == nullptr || name == nullptr)
      return fail(error, errc::invalid_argument,
                  (std::string(what) + ": window or name is NULL").c_str());
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, what, error, status);
    if (!f) return status;
    if (auto r = apply(*W(w), *f); !r) return fail(error, r.error());
    return succeed(error);
  });
}

}  // namespace

extern "C" {

void jitunwind_session_options_init(jitunwind_session_options* options) {
  if (options == nullptr) return;
  const session_options defaults;
  *options = {};
  options->struct_size = sizeof *options;
  options->abi = static_cast<jitunwind_abi>(defaults.target);
  options->publishers = defaults.publishers;
  options->log_min_level = static_cast<int>(defaults.log.min_level);
  options->perfmap_durability = static_cast<jitunwind_durability>(defaults.perfmap_durability);
  options->jitdump_durability = static_cast<jitunwind_durability>(defaults.jitdump_durability);
  options->flush_bytes = defaults.flush_bytes;
  options->flush_latency_ms = static_cast<uint32_t>(defaults.flush_latency.count());
  options->flush_thread = defaults.flush_thread ? 1 : 0;
  options->address_reuse = static_cast<jitunwind_address_reuse>(defaults.reuse);
  options->sframe_version = defaults.sframe_version;
  options->sframe_allow_flex = defaults.sframe_allow_flex ? 1 : 0;
}

static_assert(JITUNWIND_DURABILITY_SYNC == static_cast<int>(durability::sync) &&
              JITUNWIND_DURABILITY_BATCHED == static_cast<int>(durability::batched));

jitunwind_status jitunwind_session_create(const jitunwind_session_options* options,
                                          jitunwind_session** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
    *out = nullptr;
    jitunwind_session_options c;
    if (auto st = capi::read_options(options, c, jitunwind_session_options_init,
                                     "jitunwind_session_options", error);
        st != JITUNWIND_OK)
      return st;
    session_options o;
    const int target = capi::raw_value(c.abi);
    if (target != 0 && !capi::known_abi(c.abi))
      return fail(error, errc::invalid_argument, "jitunwind_session_create: unknown ABI");
    if (target != 0) o.target = static_cast<abi>(target);
    o.publishers = c.publishers;
    if (c.perfmap_dir != nullptr) o.perfmap_dir = c.perfmap_dir;
    if (c.jitdump_dir != nullptr) o.jitdump_dir = c.jitdump_dir;
    if (c.kernel_sframe != nullptr) o.kernel_sframe = c.kernel_sframe;
    const int reuse = capi::raw_value(c.address_reuse);
    if (reuse < 0 || reuse > 2)
      return fail(error, errc::invalid_argument,
                  ("jitunwind_session_create: unknown address_reuse " + std::to_string(reuse))
                      .c_str());
    o.reuse = static_cast<address_reuse>(reuse);
    // Raw values first: an out-of-range enum must not be loaded as the enum type (UB).
    for (const auto& [raw, to] :
         {std::pair{capi::raw_value(c.perfmap_durability), &o.perfmap_durability},
          std::pair{capi::raw_value(c.jitdump_durability), &o.jitdump_durability}}) {
      if (raw != JITUNWIND_DURABILITY_SYNC && raw != JITUNWIND_DURABILITY_BATCHED)
        return fail(error, errc::invalid_argument,
                    ("jitunwind_session_create: unknown durability " + std::to_string(raw) +
                     " (JITUNWIND_DURABILITY_SYNC or _BATCHED)")
                        .c_str());
      *to = static_cast<durability>(raw);
    }
    if (c.flush_bytes != 0) o.flush_bytes = c.flush_bytes;
    if (c.flush_latency_ms != 0) o.flush_latency = std::chrono::milliseconds(c.flush_latency_ms);
    o.flush_thread = c.flush_thread != 0;
    if (c.sframe_version != 2 && c.sframe_version != 3)
      return fail(error, errc::invalid_argument,
                  ("jitunwind_session_create: sframe_version " + std::to_string(c.sframe_version) +
                   " (2 or 3)")
                      .c_str());
    o.sframe_version = static_cast<uint8_t>(c.sframe_version);
    o.sframe_allow_flex = c.sframe_allow_flex != 0;
    o.log = capi::c_sink(c.log, c.log_user, c.log_min_level);
    return make_session(o, out, error);
  });
}

jitunwind_status jitunwind_session_create_from_env(jitunwind_log_fn log, void* log_user,
                                                   jitunwind_session** out,
                                                   jitunwind_error* error) {
  return guard(error, [&] {
    if (out == nullptr) return fail(error, errc::invalid_argument, "out is NULL");
    *out = nullptr;
    auto o = session_options::from_env();
    if (!o) return fail(error, o.error());
    if (log != nullptr) o->log = capi::c_sink(log, log_user, 1);  // else JITUNWIND_LOG's, if set
    return make_session(*o, out, error);
  });
}

void jitunwind_session_destroy(jitunwind_session* s) {
  if (s == nullptr) return;
  // Only a sink from capi::c_sink owns its block (JITUNWIND_LOG's sink carries a descriptor).
  const log_sink sink = S(s)->options().log;
  delete S(s);
  capi::delete_c_sink(sink);
}

jitunwind_publisher_state jitunwind_session_publisher_state(const jitunwind_session* s,
                                                            uint32_t which, char* message,
                                                            size_t message_size) {
  if (message != nullptr && message_size > 0) message[0] = '\0';
  if (s == nullptr) return JITUNWIND_PUBLISHER_DISABLED;
  for (const publisher_status& st : S(s)->status()) {
    if (static_cast<uint32_t>(st.which) != which) continue;
    if (message != nullptr && message_size > 0) {
      const size_t n = std::min(st.message.size(), message_size - 1);
      std::memcpy(message, st.message.data(), n);
      message[n] = '\0';
    }
    return static_cast<jitunwind_publisher_state>(st.state);
  }
  return JITUNWIND_PUBLISHER_DISABLED;
}

size_t jitunwind_session_poll(jitunwind_session* s) {
  return s == nullptr ? 0 : S(s)->poll();
}

jitunwind_status jitunwind_session_release(jitunwind_session* s, jitunwind_window* w,
                                           jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr || w == nullptr)
      return fail(error, errc::invalid_argument, "session or window is NULL");
    if (auto r = S(s)->release(W(w)); !r) return fail(error, r.error());
    return succeed(error);
  });
}

int jitunwind_session_recycles_addresses(const jitunwind_session* s) {
  return s != nullptr && S(s)->recycles_addresses() ? 1 : 0;
}

jitunwind_status jitunwind_session_flush(jitunwind_session* s, jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr) return fail(error, errc::invalid_argument, "session is NULL");
    if (auto r = S(s)->flush(); !r) return fail(error, r.error());
    return succeed(error);
  });
}

void jitunwind_owned_window_options_init(jitunwind_owned_window_options* options) {
  if (options == nullptr) return;
  const owned_window_options defaults;
  *options = {};
  options->struct_size = sizeof *options;
  options->layout = static_cast<jitunwind_code_layout>(defaults.layout);
  options->code_capacity = defaults.code_capacity;
  options->sframe_capacity = defaults.sframe_capacity;
}

void jitunwind_described_window_options_init(jitunwind_described_window_options* options) {
  if (options == nullptr) return;
  const described_window_options defaults;
  *options = {};
  options->struct_size = sizeof *options;
  options->text_start = defaults.text_start;
  options->text_size = defaults.text_size;
  options->sframe_capacity = defaults.sframe_capacity;
}

jitunwind_status jitunwind_session_create_owned_window(jitunwind_session* s,
                                                       const jitunwind_owned_window_options* options,
                                                       jitunwind_window** out,
                                                       jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument,
                  "jitunwind_session_create_owned_window: session or out is NULL");
    *out = nullptr;
    jitunwind_owned_window_options c;
    if (auto st = capi::read_options(options, c, jitunwind_owned_window_options_init,
                                     "jitunwind_owned_window_options", error);
        st != JITUNWIND_OK)
      return st;
    const int layout = capi::raw_value(c.layout);
    if (layout < 0 || layout > 2)
      return fail(error, errc::invalid_argument,
                  ("jitunwind_session_create_owned_window: unknown code layout " +
                   std::to_string(layout))
                      .c_str());
    auto w = S(s)->create_owned_window({.code_capacity = c.code_capacity,
                                        .sframe_capacity = c.sframe_capacity,
                                        .layout = static_cast<code_layout>(layout)});
    if (!w) return fail(error, w.error());
    *out = reinterpret_cast<jitunwind_window*>(*w);
    return succeed(error);
  });
}

jitunwind_status jitunwind_session_describe_window(
    jitunwind_session* s, const jitunwind_described_window_options* options,
    jitunwind_window** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr || out == nullptr || options == nullptr)
      return fail(error, errc::invalid_argument,
                  "jitunwind_session_describe_window: session, options or out is NULL (the "
                  "options hold the range)");
    *out = nullptr;
    jitunwind_described_window_options c;
    if (auto st = capi::read_options(options, c, jitunwind_described_window_options_init,
                                     "jitunwind_described_window_options", error);
        st != JITUNWIND_OK)
      return st;
    if (c.reserved != 0)
      return fail(error, errc::invalid_argument,
                  "jitunwind_session_describe_window: options.reserved is not 0");
    auto w = S(s)->describe_window({.text_start = c.text_start,
                                    .text_size = c.text_size,
                                    .sframe_capacity = c.sframe_capacity});
    if (!w) return fail(error, w.error());
    *out = reinterpret_cast<jitunwind_window*>(*w);
    return succeed(error);
  });
}

uint64_t jitunwind_window_id(const jitunwind_window* w) {
  return w ? W(w)->id() : 0;
}
uint32_t jitunwind_window_reuse_count(const jitunwind_window* w) {
  return w ? W(w)->reuse_count() : 0;
}
uint64_t jitunwind_window_published_generation(const jitunwind_window* w) {
  return w ? W(w)->published_generation() : 0;
}
jitunwind_window_state jitunwind_window_get_state(const jitunwind_window* w) {
  return w ? static_cast<jitunwind_window_state>(W(w)->state()) : JITUNWIND_WINDOW_FREED;
}
uint64_t jitunwind_window_text_start(const jitunwind_window* w) {
  return w ? W(w)->text_start() : 0;
}
size_t jitunwind_window_text_size(const jitunwind_window* w) {
  return w ? W(w)->text_size() : 0;
}
int jitunwind_window_is_owned(const jitunwind_window* w) {
  return w && W(w)->owned() ? 1 : 0;
}

size_t jitunwind_window_functions(const jitunwind_window* w, jitunwind_function_visitor visit,
                                  void* user) {
  if (w == nullptr || visit == nullptr) return 0;
  size_t visited = 0;
  for (const auto& f : W(w)->functions()) {
    ++visited;
    if (visit(user, f.name.c_str(), f.start, f.size) != 0) break;
  }
  return visited;
}

const uint8_t* jitunwind_window_published_sframe(const jitunwind_window* w, size_t* size) {
  const auto bytes = w ? W(w)->published_sframe() : span<const uint8_t>{};
  if (size != nullptr) *size = bytes.size();
  return bytes.empty() ? nullptr : bytes.data();
}

jitunwind_status jitunwind_window_allocate(jitunwind_window* w, size_t size, size_t alignment,
                                           uint64_t* address, void** writable,
                                           jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr || address == nullptr || writable == nullptr)
      return fail(error, errc::invalid_argument, "window, address or writable is NULL");
    auto space = W(w)->allocate(size, alignment == 0 ? 16 : alignment);
    if (!space) return fail(error, space.error());
    *address = space->address;
    *writable = space->writable.data();
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_append(jitunwind_window* w, const char* name,
                                         const jitunwind_function* function, uint64_t moved_from,
                                         jitunwind_error* error) {
  return with_function(
      w, name, function, "jitunwind_window_append", error,
      [&](window& win, const function_desc& f) { return win.append(name, f, moved_from); });
}

jitunwind_status jitunwind_window_name_range(jitunwind_window* w, const char* name,
                                             const jitunwind_function* function,
                                             jitunwind_error* error) {
  return with_function(
      w, name, function, "jitunwind_window_name_range", error,
      [&](window& win, const function_desc& f) { return win.name_range(name, f); });
}

jitunwind_status jitunwind_window_publish(jitunwind_window* w, jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr) return fail(error, errc::invalid_argument, "window is NULL");
    if (auto r = W(w)->publish(); !r) return fail(error, r.error());
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_seal(jitunwind_window* w, jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr) return fail(error, errc::invalid_argument, "window is NULL");
    if (auto r = W(w)->seal(); !r) return fail(error, r.error());
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_retire(jitunwind_window* w, uint32_t grace_ms,
                                         int (*on_grace_over)(void*, jitunwind_window*), void* user,
                                         jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr) return fail(error, errc::invalid_argument, "window is NULL");
    std::function<bool(window&)> cb;
    if (on_grace_over != nullptr) {
      cb = [on_grace_over, user](window& win) {
        return on_grace_over(user, reinterpret_cast<jitunwind_window*>(&win)) != 0;
      };
    }
    if (auto r = W(w)->retire(std::chrono::milliseconds(grace_ms), std::move(cb)); !r)
      return fail(error, r.error());
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_reuse(jitunwind_window* w, jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr) return fail(error, errc::invalid_argument, "window is NULL");
    if (auto r = W(w)->reuse(); !r) return fail(error, r.error());
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_patch(jitunwind_window* w, uint64_t address, const void* bytes,
                                        size_t size, jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr || (bytes == nullptr && size != 0))
      return fail(error, errc::invalid_argument, "window or bytes is NULL");
    const auto* b = static_cast<const uint8_t*>(bytes);
    if (auto r = W(w)->patch(address, std::span<const uint8_t>(b, size)); !r)
      return fail(error, r.error());
    return succeed(error);
  });
}

jitunwind_status jitunwind_window_retire_function(jitunwind_window* w, uint64_t start,
                                                  jitunwind_error* error) {
  return guard(error, [&] {
    if (w == nullptr) return fail(error, errc::invalid_argument, "window is NULL");
    if (auto r = W(w)->retire_function(start); !r) return fail(error, r.error());
    return succeed(error);
  });
}

}  // extern "C"
