// The on-ramp (jitunwind/onramp.h): an implicit default session and one described window per
// named range. The state below is the one process-wide object the on-ramp keeps; it is created
// on first use and never destroyed, because code named through it may run (and be profiled)
// until the process is gone.
#include <jitunwind/onramp.h>
#include <jitunwind/window.h>

#include "common/error.hpp"

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
};

onramp_state& state() {
  static onramp_state* const s = new onramp_state;  // leaked on purpose, see above
  return *s;
}

// With the state's mutex held.
result<session*> get_session(onramp_state& s) {
  if (s.owned) return s.owned.get();
  auto options = session_options::from_env();
  if (!options) return std::move(options).error();
  auto created = session::create(*options);
  if (!created) return std::move(created).error();
  s.owned = std::move(created).value();
  return s.owned.get();
}

// describe_window's errors in the terms of the on-ramp's caller (`api`), who never called it.
error in_terms_of(const char* api, const error& e) {
  std::string_view m = e.message();
  constexpr std::string_view internal = "describe_window: ";
  if (m.substr(0, internal.size()) == internal) m.remove_prefix(internal.size());
  std::string text = std::string(api) + ": " + std::string(m);
  if (e.code() == errc::already_exists)
    text += " (code named before and not forgotten, or a window of the default session)";
  return error(e.code(), std::move(text));
}

}  // namespace

result<session*> default_session() {
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  return get_session(s);
}

namespace {
result<void> publish_named(const char* api, std::string_view name, const function_desc& f);
}  // namespace

result<void> name_code(const void* code, size_t size, std::string_view name,
                       span<const frame_row> rows) {
  if (code == nullptr || size == 0 || size > UINT32_MAX)
    return detail::make_error(errc::invalid_argument,
                              "name_code: code %p, size %zu: the code must be a non-empty range "
                              "of at most 4 GiB",
                              code, size);
  function_desc f;
  f.start = reinterpret_cast<uint64_t>(code);
  f.size = static_cast<uint32_t>(size);
  f.rows.assign(rows.begin(), rows.end());
  return publish_named("name_code", name, f);
}

result<void> name_function(std::string_view name, const function_desc& f) {
  if (f.start == 0 || f.size == 0)
    return detail::make_error(errc::invalid_argument,
                              "name_function: code at 0x%llx, size %u: the code must be a "
                              "non-empty range",
                              static_cast<unsigned long long>(f.start), f.size);
  return publish_named("name_function", name, f);
}

namespace {

// name_code and name_function: `api` names the caller's entry point in messages.
result<void> publish_named(const char* api, std::string_view name, const function_desc& f) {
  const uint64_t start = f.start;
  const size_t size = f.size;
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  JITUNWIND_TRY_ASSIGN(session * sess, get_session(s));
  // An empty row list is legal SFrame v3 (an outermost frame: unwinders stop there), which is
  // never what a runtime naming its code means: refuse it rather than cut every stack.
  if (f.rows.empty())
    return detail::make_error(errc::invalid_argument,
                              "%s: no rows for code at 0x%llx: give at least the entry row "
                              "(frame_builder(abi).finish(...) of an empty builder)",
                              api, static_cast<unsigned long long>(start));
  if (s.windows.count(start) != 0)
    return detail::make_error(errc::already_exists,
                              "%s: code at 0x%llx is named already (forget_code it first)", api,
                              static_cast<unsigned long long>(start));
  auto described = sess->describe_window({.text_start = start, .text_size = size});
  if (!described) return in_terms_of(api, described.error());
  window* w = *described;
  auto published = [&]() -> result<void> {
    JITUNWIND_TRY(w->append(name, f));
    return w->publish();
  }();
  if (!published) {
    // Nothing of it was published: the window goes at once.
    (void)w->retire(std::chrono::milliseconds(0));
    (void)sess->poll();
    return published;
  }
  s.windows.emplace(start, w);
  return {};
}

}  // namespace

result<void> forget_code(const void* code) {
  const auto start = reinterpret_cast<uint64_t>(code);
  onramp_state& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.windows.find(start);
  if (it == s.windows.end())
    return detail::make_error(errc::not_found, "forget_code: no code named at 0x%llx",
                              static_cast<unsigned long long>(start));
  // The caller says nothing runs it any more: no grace period.
  JITUNWIND_TRY(it->second->retire(std::chrono::milliseconds(0)));
  s.windows.erase(it);
  (void)s.owned->poll();
  return {};
}

}  // namespace jitunwind
