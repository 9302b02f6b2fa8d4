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

// The C callback and its user pointer travel in a heap block: sinks are plain values copied
// into the session, so the block lives as long as the session (freed by session_destroy).
struct c_log {
  jitunwind_log_fn fn;
  void* user;
};

void call_c_log(void* u, log_level level, std::string_view m) {
  auto* c = static_cast<c_log*>(u);
  c->fn(c->user, static_cast<int>(level), m.data(), m.size());
}

log_sink c_sink(jitunwind_log_fn fn, void* user, int min_level) {
  log_sink sink;
  if (fn == nullptr) return sink;
  sink.user = new c_log{fn, user};
  sink.fn = call_c_log;
  sink.min_level = static_cast<log_level>(std::clamp(min_level, 0, 3));
  return sink;
}

jitunwind_status make_session(const session_options& o, jitunwind_session** out,
                              jitunwind_error* error) {
  auto s = session::create(o);
  if (!s) return fail(error, s.error());
  *out = reinterpret_cast<jitunwind_session*>(std::move(s).value().release());
  return succeed(error);
}

// append and name_range (and their _v3, `v3` true: the v3 rules with `regs`): a named function
// from C, checked and converted, applied by `apply`.
template <class F>
jitunwind_status with_function(jitunwind_window* w, const char* name,
                               const jitunwind_function* function, const jitunwind_frame_regs* regs,
                               bool v3, jitunwind_error* error, F&& apply) {
  return guard(error, [&] {
    if (w == nullptr || name == nullptr)
      return fail(error, errc::invalid_argument, "window or name is NULL");
    jitunwind_status status = JITUNWIND_OK;
    auto f = capi::from_c(function, error, status, regs, v3);
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
}

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
      return fail(error, errc::invalid_argument, "unknown ABI");
    if (target != 0) o.target = static_cast<abi>(target);
    o.publishers = c.publishers;
    if (c.perfmap_dir != nullptr) o.perfmap_dir = c.perfmap_dir;
    if (c.jitdump_dir != nullptr) o.jitdump_dir = c.jitdump_dir;
    if (c.kernel_sframe != nullptr) o.kernel_sframe = c.kernel_sframe;
    const int reuse = capi::raw_value(c.address_reuse);
    if (reuse < 0 || reuse > 2)
      return fail(error, errc::invalid_argument,
                  ("unknown address_reuse " + std::to_string(reuse)).c_str());
    o.reuse = static_cast<address_reuse>(reuse);
    // Raw values first: an out-of-range enum must not be loaded as the enum type (UB).
    for (const auto& [raw, to] :
         {std::pair{capi::raw_value(c.perfmap_durability), &o.perfmap_durability},
          std::pair{capi::raw_value(c.jitdump_durability), &o.jitdump_durability}}) {
      if (raw < 0 || raw > JITUNWIND_DURABILITY_BATCHED)
        return fail(error, errc::invalid_argument, "unknown durability");
      if (raw != JITUNWIND_DURABILITY_DEFAULT)
        *to = raw == JITUNWIND_DURABILITY_SYNC ? durability::sync : durability::batched;
    }
    if (c.flush_bytes != 0) o.flush_bytes = c.flush_bytes;
    if (c.flush_latency_ms != 0) o.flush_latency = std::chrono::milliseconds(c.flush_latency_ms);
    o.flush_thread = c.no_flush_thread == 0;
    o.log = c_sink(c.log, c.log_user, c.log_min_level);
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
    if (log != nullptr) o->log = c_sink(log, log_user, 1);  // else JITUNWIND_LOG's, if set
    return make_session(*o, out, error);
  });
}

void jitunwind_session_destroy(jitunwind_session* s) {
  if (s == nullptr) return;
  // Only a sink from c_sink owns its block (JITUNWIND_LOG's sink carries a descriptor).
  const log_sink& log = S(s)->options().log;
  void* log_block = log.fn == call_c_log ? log.user : nullptr;
  delete S(s);
  delete static_cast<c_log*>(log_block);
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

jitunwind_status jitunwind_session_create_owned_window(jitunwind_session* s, size_t code_capacity,
                                                       size_t sframe_capacity, int layout,
                                                       jitunwind_window** out,
                                                       jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "session or out is NULL");
    if (layout < 0 || layout > 2)
      return fail(error, errc::invalid_argument,
                  ("unknown code layout " + std::to_string(layout)).c_str());
    auto w = S(s)->create_owned_window({.code_capacity = code_capacity,
                                        .sframe_capacity = sframe_capacity,
                                        .layout = static_cast<code_layout>(layout)});
    if (!w) return fail(error, w.error());
    *out = reinterpret_cast<jitunwind_window*>(*w);
    return succeed(error);
  });
}

jitunwind_status jitunwind_session_describe_window(jitunwind_session* s, uint64_t text_start,
                                                   size_t text_size, size_t sframe_capacity,
                                                   jitunwind_window** out, jitunwind_error* error) {
  return guard(error, [&] {
    if (s == nullptr || out == nullptr)
      return fail(error, errc::invalid_argument, "session or out is NULL");
    auto w = S(s)->describe_window(
        {.text_start = text_start, .text_size = text_size, .sframe_capacity = sframe_capacity});
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

jitunwind_status jitunwind_window_append_v3(jitunwind_window* w, const char* name,
                                            const jitunwind_function* function,
                                            const jitunwind_frame_regs* regs, uint64_t moved_from,
                                            jitunwind_error* error) {
  return with_function(
      w, name, function, regs, true, error,
      [&](window& win, const function_desc& f) { return win.append(name, f, moved_from); });
}

jitunwind_status jitunwind_window_append(jitunwind_window* w, const char* name,
                                         const jitunwind_function* function, uint64_t moved_from,
                                         jitunwind_error* error) {
  return with_function(
      w, name, function, nullptr, false, error,
      [&](window& win, const function_desc& f) { return win.append(name, f, moved_from); });
}

jitunwind_status jitunwind_window_name_range_v3(jitunwind_window* w, const char* name,
                                                const jitunwind_function* function,
                                                const jitunwind_frame_regs* regs,
                                                jitunwind_error* error) {
  return with_function(
      w, name, function, regs, true, error,
      [&](window& win, const function_desc& f) { return win.name_range(name, f); });
}

jitunwind_status jitunwind_window_name_range(jitunwind_window* w, const char* name,
                                             const jitunwind_function* function,
                                             jitunwind_error* error) {
  return with_function(
      w, name, function, nullptr, false, error,
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
