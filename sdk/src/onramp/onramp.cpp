// The on-ramp (jitunwind/onramp.h): an implicit default session and one described window per
// named range. The state below is the one process-wide object the on-ramp keeps; it is created
// on first use and never destroyed, because code named through it may run (and be profiled)
// until the process is gone.
#include <jitunwind/onramp.h>
#include <jitunwind/window.h>

#include "common/error.hpp"
#include "jitdump/jitdump_writer.hpp"
#include "onramp/onramp_impl.hpp"
#include "window/session_impl.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace jitunwind {

namespace {

struct onramp_state {
  std::mutex mutex;
  std::unique_ptr<session> owned;
  std::map<uint64_t, window*> windows;  // by code start: one function each
  // The default session's log: JITUNWIND_LOG's sink (from_env) and the one the runtime set
  // (set_default_session_log, jitunwind_default_session_log), either of which may be empty.
  std::mutex log_mutex;
  log_sink env_log;
  log_sink runtime_log;
};

onramp_state& state() {
  static onramp_state* const s = new onramp_state;  // leaked on purpose, see above
  return *s;
}

void forward_log(void* user, log_level level, std::string_view message) {
  auto* s = static_cast<onramp_state*>(user);
  std::lock_guard lock(s->log_mutex);
  s->env_log(level, message);
  s->runtime_log(level, message);
}

// With the state's mutex held.
result<session*> get_session(onramp_state& s) {
  if (s.owned) return s.owned.get();
  auto options = session_options::from_env();
  if (!options) return std::move(options).error();
  {
    std::lock_guard lock(s.log_mutex);
    s.env_log = options->log;
  }
  options->log = log_sink{forward_log, &s, log_level::debug};
  auto created = session::create(*options);
  if (!created) return std::move(created).error();
  s.owned = std::move(created).value();
  return s.owned.get();
}

const char* api(bool c_names, const char* name) {
  static thread_local std::string text;
  text = (c_names ? "jitunwind_" : "") + std::string(name);
  return text.c_str();
}

// describe_window's errors in the terms of the on-ramp's caller (`entry`), who never called it.
error in_terms_of(const std::string& entry, const error& e) {
  std::string_view m = e.message();
  constexpr std::string_view internal = "describe_window: ";
  if (m.substr(0, internal.size()) == internal) m.remove_prefix(internal.size());
  std::string text = entry + ": " + std::string(m);
  if (e.code() == errc::already_exists)
    text += " (code named before and not forgotten, or a window of the default session)";
  return error(e.code(), std::move(text));
}

}  // namespace

void set_default_session_log(log_sink sink) {
  onramp_state& s = state();
  std::lock_guard lock(s.log_mutex);
  s.runtime_log = sink;
}

result<size_t> perf_code_gap(abi target, const function_desc& f) {
  JITUNWIND_TRY(validate(target, f));
  auto u = detail::make_jitdump_unwinding(target, f.start, f.size, &f);
  if (!u) return std::move(u).error();
  // perf inject --jit maps [start, start + ALIGN_8(size) + mapped_size).
  const uint64_t aligned = (uint64_t{f.size} + 7) & ~uint64_t{7};
  return static_cast<size_t>(aligned - f.size + u->mapped_size);
}

namespace detail {

void onramp_use_c_names() {
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  if (auto sess = get_session(s))
    static_cast<session_impl*>(*sess)->use_c_names();
}

}  // namespace detail

result<session*> default_session() {
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  return get_session(s);
}

result<void> name_code(const void* code, size_t size, std::string_view name,
                       span<const frame_row> rows) {
  return detail::onramp_name_code(code, size, name, rows, false);
}

result<void> name_function(std::string_view name, const function_desc& f) {
  return detail::onramp_name_function(name, f, false);
}

result<void> forget_code(const void* code) {
  return detail::onramp_forget_code(code, false);
}

namespace detail {

namespace {

// name_code and name_function (`entry`, as the caller spelled it).
result<void> publish_named(const std::string& entry, std::string_view name,
                           const function_desc& f, bool c_names) {
  const uint64_t start = f.start;
  const size_t size = f.size;
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  JITUNWIND_TRY_ASSIGN(session * sess, get_session(s));
  if (c_names) static_cast<session_impl*>(sess)->use_c_names();
  // An empty row list is legal SFrame v3 (an outermost frame: unwinders stop there), which is
  // never what a runtime naming its code means: refuse it rather than cut every stack.
  if (f.rows.empty())
    return detail::make_error(errc::invalid_argument,
                              "%s: no rows for code at 0x%llx: give at least the entry "
                              "row (%s)",
                              entry.c_str(), static_cast<unsigned long long>(start),
                              c_names ? "jitunwind_frame_recipe_leaf, or "
                                        "jitunwind_frame_builder_finish of an empty builder"
                                      : "frame_builder(abi).finish(...) of an empty builder");
  if (s.windows.count(start) != 0)
    return detail::make_error(errc::already_exists,
                              "%s: code at 0x%llx is named already (%s it first)", entry.c_str(),
                              static_cast<unsigned long long>(start), api(c_names, "forget_code"));
  auto described = sess->describe_window({.text_start = start, .text_size = size});
  if (!described) return in_terms_of(entry, described.error());
  window* w = *described;
  auto published = [&]() -> result<void> {
    JITUNWIND_TRY(w->append(name, f));
    return w->publish();
  }();
  if (!published) {
    // Nothing of it was published: the window goes at once.
    (void)w->retire(std::chrono::milliseconds(0));
    (void)static_cast<session_impl*>(sess)->free_and_release(w);
    return published;
  }
  s.windows.emplace(start, w);
  return {};
}

}  // namespace

result<void> onramp_name_code(const void* code, size_t size, std::string_view name,
                              span<const frame_row> rows, bool c_names) {
  if (code == nullptr || size == 0 || size > UINT32_MAX)
    return detail::make_error(errc::invalid_argument,
                              "%s: code %p, size %zu: the code must be a non-empty range "
                              "of at most 4 GiB",
                              api(c_names, "name_code"), code, size);
  function_desc f;
  f.start = reinterpret_cast<uint64_t>(code);
  f.size = static_cast<uint32_t>(size);
  f.rows.assign(rows.begin(), rows.end());
  return publish_named(api(c_names, "name_code"), name, f, c_names);
}

result<void> onramp_name_function(std::string_view name, const function_desc& f, bool c_names) {
  if (f.start == 0 || f.size == 0)
    return detail::make_error(errc::invalid_argument,
                              "%s: code at 0x%llx, size %u: the code must be a non-empty range",
                              api(c_names, "name_function"),
                              static_cast<unsigned long long>(f.start), f.size);
  return publish_named(api(c_names, "name_function"), name, f, c_names);
}

result<void> onramp_forget_code(const void* code, bool c_names) {
  const auto start = reinterpret_cast<uint64_t>(code);
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.windows.find(start);
  if (it == s.windows.end())
    return detail::make_error(errc::not_found, "%s: no code named at 0x%llx",
                              api(c_names, "forget_code"), static_cast<unsigned long long>(start));
  // The caller says nothing runs it any more: no grace period. Only this window is freed
  // (session::poll would look at every live one).
  JITUNWIND_TRY(it->second->retire(std::chrono::milliseconds(0)));
  window* w = it->second;
  s.windows.erase(it);
  return static_cast<session_impl*>(s.owned.get())->free_and_release(w);
}

}  // namespace detail

}  // namespace jitunwind
