#include "window/session_impl.hpp"

#include <jitunwind/onramp.h>

#include "common/error.hpp"
#include "perfmap/record_file.hpp"
#include "window/backends.hpp"

#include <algorithm>
#include <atomic>

namespace jitunwind {

result<std::unique_ptr<session>> session::create(const session_options& options) {
  if (options.target != abi::amd64 && options.target != abi::aarch64_le &&
      options.target != abi::aarch64_be)
    return detail::make_error(errc::invalid_argument, "session: unknown ABI id %d",
                              static_cast<int>(options.target));
  if (options.sframe_version != 2 && options.sframe_version != 3)
    return detail::make_error(errc::invalid_argument,
                              "session: SFrame version %u cannot be written (2 or 3)",
                              options.sframe_version);
  // Every publisher's bit, up to the highest (kernel): anything above is a caller's mistake.
  constexpr publisher_set known = (static_cast<uint32_t>(publisher::kernel) << 1) - 1;
  if ((options.publishers & ~known) != 0)
    return detail::make_error(errc::invalid_argument, "session: unknown publisher bits 0x%x",
                              options.publishers & ~known);
  for (const durability d : {options.perfmap_durability, options.jitdump_durability}) {
    if (d != durability::sync && d != durability::batched)
      return detail::make_error(errc::invalid_argument, "session: unknown durability %d",
                                static_cast<int>(d));
  }
  if (options.flush_bytes < min_flush_bytes || options.flush_bytes > max_flush_bytes)
    return detail::make_error(errc::invalid_argument,
                              "session: flush_bytes %zu is outside [%zu, %zu]", options.flush_bytes,
                              min_flush_bytes, max_flush_bytes);
  if (options.flush_latency < min_flush_latency || options.flush_latency > max_flush_latency)
    return detail::make_error(errc::invalid_argument,
                              "session: flush_latency %lld ms is outside [%lld, %lld] ms",
                              static_cast<long long>(options.flush_latency.count()),
                              static_cast<long long>(min_flush_latency.count()),
                              static_cast<long long>(max_flush_latency.count()));
  auto s = std::make_unique<detail::session_impl>(options);
  s->start_publishers();
  return std::unique_ptr<session>(std::move(s));
}

namespace detail {

uint64_t next_window_id() noexcept {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

session_impl::session_impl(const session_options& options) : options_(options) {}

session_impl::~session_impl() {
  std::unordered_map<const window*, std::unique_ptr<window_impl>> windows;
  {
    std::lock_guard lock(mutex_);
    windows.swap(windows_);
  }
  for (auto& [handle, w] : windows) w->shutdown();
  windows.clear();
  slots_.clear();  // backends flush and close their files (jitdump CODE_CLOSE)
  flusher_.reset();
}

void session_impl::start_publishers() {
  // Publishing order: the registry first (external unwinders then find the new rows as soon as
  // any announcement arrives), the kernel, the name publishers, and the USDT events last.
  const publisher order[] = {publisher::registry, publisher::kernel,  publisher::perfmap,
                             publisher::jitdump,  publisher::gdb,     publisher::usdt_events};
  const bool perfmap_batched = contains(options_.publishers, publisher::perfmap) &&
                               options_.perfmap_durability == durability::batched;
  const bool jitdump_batched = contains(options_.publishers, publisher::jitdump) &&
                               options_.jitdump_durability == durability::batched;
  batched_files_ = perfmap_batched || jitdump_batched;
  if (batched_files_ && options_.flush_thread) flusher_ = std::make_unique<flusher>();
  voices_.reserve(std::size(order));
  for (publisher p : order) {
    slot s;
    s.kind = p;
    if (!contains(options_.publishers, p)) {
      slots_.push_back(std::move(s));
      continue;
    }
    // The backend reports through the session, which counts its warnings for status().
    voices_.push_back({this, slots_.size(), p});
    session_options backend_options = options_;
    backend_options.log.fn = [](void* user, log_level level, std::string_view message) {
      auto* v = static_cast<backend_voice*>(user);
      v->session->publisher_said(*v, level, message);
    };
    backend_options.log.user = &voices_.back();
    backend_options.log.min_level = log_level::debug;
    auto backend = make_backend(p, backend_options, flusher_.get());
    if (backend) {
      s.backend = std::move(backend).value();
      s.state = publisher_state::active;
      s.message = s.backend->note();
      log(log_level::debug, std::string("publisher ") + to_string(p) + " active" +
                                (s.message.empty() ? "" : ": " + s.message));
    } else {
      const error& e = backend.error();
      s.state =
          e.code() == errc::unsupported ? publisher_state::unsupported : publisher_state::failed;
      s.message = e.message();
      log(e.code() == errc::unsupported ? log_level::info : log_level::warning,
          std::string("publisher ") + to_string(p) + " " + to_string(s.state) + ": " + e.message());
    }
    slots_.push_back(std::move(s));
  }
  uint32_t mask = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const slot& s = slots_[i];
    if (s.state == publisher_state::active) mask |= 1u << i;
    if (s.kind == publisher::jitdump || s.kind == publisher::gdb) rows_mask_ |= 1u << i;
    if (s.kind == publisher::jitdump && s.state == publisher_state::active)
      code_gap_ = perf_code_gap_reserve;  // perf inject --jit maps unwinding data after the code
    // perf reads both files after the fact and cannot tell two codes at one address apart in
    // every case (docs/window.md, "Reused addresses").
    if ((s.kind == publisher::jitdump || s.kind == publisher::perfmap) &&
        s.state == publisher_state::active && options_.reuse == address_reuse::automatic)
      recycles_ = false;
  }
  if (options_.reuse == address_reuse::never) recycles_ = false;
  active_mask_.store(mask, std::memory_order_release);
  log(log_level::debug, std::string("address reuse ") +
                            (recycles_ ? "allowed" : "off: freed code ranges stay reserved"));
}

void session_impl::mark_failed(slot& s, const char* what, uint64_t window_id, const error& e) {
  // Window id 0: not about a window (session::flush, poll).
  std::string message = std::string(to_string(s.kind)) + ": " + what +
                        (window_id != 0 ? " of window " + std::to_string(window_id) : "") +
                        " failed: " + e.message();
  {
    std::lock_guard lock(mutex_);
    if (s.state != publisher_state::active) return;
    s.state =
        e.code() == errc::unsupported ? publisher_state::unsupported : publisher_state::failed;
    active_mask_.fetch_and(~(1u << static_cast<uint32_t>(&s - slots_.data())),
                           std::memory_order_acq_rel);
    s.message = message;
  }
  log(log_level::error, "publisher " + message + " (publisher stopped)");
}

std::string session_impl::in_caller_language(std::string_view message) const {
  const bool c = c_names_.load(std::memory_order_relaxed);
  std::string out;
  out.reserve(message.size() + 16);
  for (size_t at = 0;;) {
    const size_t token = message.find("{api:", at);
    const size_t end = token == std::string_view::npos ? token : message.find('}', token);
    if (end == std::string_view::npos) {
      out.append(message.substr(at));
      return out;
    }
    out.append(message.substr(at, token - at));
    out.append(c ? "jitunwind_" : "jitunwind::");
    out.append(message.substr(token + 5, end - token - 5));
    at = end + 1;
  }
}

void session_impl::publisher_said(const backend_voice& voice, log_level level,
                                  std::string_view message) {
  // The first warnings of a publisher are logged; a runtime that packs every function closer
  // than perf needs would otherwise log one line per function. All are counted in status().
  constexpr uint64_t logged_warnings = 10;
  std::string text = in_caller_language(message);
  uint64_t count = 0;
  if (level >= log_level::warning) {
    std::lock_guard lock(mutex_);
    if (voice.slot < slots_.size()) {  // not while the backend is being created
      slot& s = slots_[voice.slot];
      count = ++s.warnings;
      s.last_warning = text;
    }
  }
  if (count > logged_warnings) return;
  if (count == logged_warnings)
    text += " (further warnings of this publisher are counted in the session's status only)";
  log(level, std::string("publisher ") + to_string(voice.kind) + ": " + text);
}

result<window*> session_impl::create_owned_window(const owned_window_options& o) {
  size_t sframe_capacity = o.sframe_capacity;
  if (sframe_capacity == 0) {
    // About one typical function (FDE + 4 rows) per 64 bytes of code, at least one page, at
    // most the per-window limit (256 MiB: still ~10 million functions).
    sframe_capacity =
        std::clamp<size_t>(o.code_capacity / 64 * 48 + 64, page_size(), size_t{1} << 28);
  }
  owned_memory mem = take_owned(round_up(o.code_capacity, page_size()),
                                round_up(sframe_capacity, page_size()), o.layout);
  if (mem.code_capacity() == 0) {
    auto fresh = owned_memory::create(o.code_capacity, sframe_capacity, o.layout);
    if (!fresh) return std::move(fresh).error();
    mem = std::move(fresh).value();
  }
  return adopt_window(std::make_unique<window_impl>(*this, next_window_id(), std::move(mem)));
}

window* session_impl::adopt_window(std::unique_ptr<window_impl> w) {
  window_impl* raw = w.get();
  std::lock_guard lock(mutex_);
  windows_.emplace(raw, std::move(w));
  raw->live_index = live_.size();
  live_.push_back(raw);
  live_by_start_.emplace(raw->text_start(), raw);
  return raw;
}

result<window*> session_impl::describe_window(const described_window_options& o) {
  if (o.text_size == 0 || o.text_start + o.text_size < o.text_start)
    return make_error(errc::invalid_argument, "describe_window: invalid range 0x%llx + %zu",
                      static_cast<unsigned long long>(o.text_start), o.text_size);
  if (o.text_size >= (size_t{1} << 31))
    return make_error(errc::out_of_range,
                      "describe_window: a window of %zu bytes cannot be described by one SFrame "
                      "section (32-bit offsets); split it",
                      o.text_size);
  // About one typical function (FDE + 4 rows) per 64 bytes of code; small windows share
  // arenas, so no page minimum.
  const size_t sframe_capacity =
      o.sframe_capacity != 0 ? o.sframe_capacity : o.text_size / 64 * 48 + 64;
  sframe_block block;
  {
    std::lock_guard lock(mutex_);
    // Windows not freed do not overlap: only the nearest one starting below the end can.
    auto next = live_by_start_.lower_bound(o.text_start + o.text_size);
    if (next != live_by_start_.begin()) {
      const window_impl* w = std::prev(next)->second;
      const uint64_t a = w->text_start(), b = a + w->text_size();
      if (o.text_start < b)
        return make_error(errc::already_exists,
                          "describe_window: [0x%llx, 0x%llx) overlaps window %llu [0x%llx, "
                          "0x%llx)",
                          static_cast<unsigned long long>(o.text_start),
                          static_cast<unsigned long long>(o.text_start + o.text_size),
                          static_cast<unsigned long long>(w->id()),
                          static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
    }
    auto taken = sframe_space_.take(o.text_start, o.text_size, sframe_capacity);
    if (!taken) return std::move(taken).error();
    block = *taken;
  }
  return adopt_window(
      std::make_unique<window_impl>(*this, next_window_id(), o.text_start, o.text_size, block));
}

void session_impl::give_back(const sframe_block& block) {
  if (!block.valid()) return;
  std::lock_guard lock(mutex_);
  sframe_space_.give_back(block);
}

void session_impl::recycle(owned_memory memory) {
  if (memory.code_capacity() == 0) return;
  std::lock_guard lock(mutex_);
  if (spare_owned_.size() == max_spare_buffers) spare_owned_.erase(spare_owned_.begin());
  spare_owned_.push_back(std::move(memory));
}

owned_memory session_impl::take_owned(size_t code_capacity, size_t sframe_each,
                                      code_layout layout) {
  std::lock_guard lock(mutex_);
  for (size_t i = spare_owned_.size(); i-- > 0;) {
    if (!spare_owned_[i].fits(code_capacity, sframe_each, layout)) continue;
    owned_memory m = std::move(spare_owned_[i]);
    spare_owned_.erase(spare_owned_.begin() + static_cast<ptrdiff_t>(i));
    return m;
  }
  return {};
}

void session_impl::recycle(window_lists lists) {
  std::lock_guard lock(mutex_);
  if (lists.records.capacity() >= spare_lists_.records.capacity()) spare_lists_ = std::move(lists);
}

window_lists session_impl::take_lists() {
  std::lock_guard lock(mutex_);
  return std::exchange(spare_lists_, {});
}

void session_impl::remove_live(window_impl* w) {
  const size_t at = w->live_index;
  if (at >= live_.size() || live_[at] != w) return;  // not live (any more)
  live_[at] = live_.back();
  live_[at]->live_index = at;
  live_.pop_back();
  auto by_start = live_by_start_.find(w->text_start());
  if (by_start != live_by_start_.end() && by_start->second == w) live_by_start_.erase(by_start);
}

void session_impl::forget_freed() {
  std::vector<std::unique_ptr<window_impl>> gone;  // destroyed outside the lock
  {
    std::lock_guard lock(mutex_);
    for (size_t i = live_.size(); i-- > 0;) {
      window_impl* w = live_[i];
      if (w->state() != window_state::freed) continue;
      remove_live(w);
      if (w->release_when_freed()) {
        auto h = windows_.find(w);
        gone.push_back(std::move(h->second));
        windows_.erase(h);
      }
    }
  }
}

size_t session_impl::poll() {
  std::lock_guard poll_lock(poll_mutex_);
  std::vector<window_impl*> windows;
  {
    std::lock_guard lock(mutex_);
    windows = live_;
  }
  const auto now = std::chrono::steady_clock::now();
  size_t acted = 0;
  for (window_impl* w : windows) acted += w->poll_grace(now) ? 1 : 0;
  if (acted != 0) forget_freed();
  // Without a flusher thread, a runtime's regular poll keeps the batched files' latency bound.
  if (batched_files_) {
    const uint64_t now_ns = monotonic_ns();
    for_each_backend("flush", 0, [&](publisher_backend& b) { return b.flush(true, now_ns); });
  }
  return acted;
}

result<window_impl*> session_impl::find_window(window* handle, const char* what) {
  std::lock_guard lock(mutex_);
  auto it = windows_.find(handle);
  if (it == windows_.end())
    return make_error(errc::invalid_argument,
                      "%s: %p is not a window of this session (or was released already)", what,
                      static_cast<void*>(handle));
  return it->second.get();
}

result<void> session_impl::release(window* handle) {
  std::lock_guard poll_lock(poll_mutex_);
  auto found = find_window(handle, "release");
  if (!found) return std::move(found).error();
  window_impl* w = *found;
  auto now = w->prepare_release();
  if (!now) return std::move(now).error();
  if (!*now) return {};               // still in its grace period: poll frees and then destroys it
  std::unique_ptr<window_impl> gone;  // destroyed after the lock is released
  std::lock_guard lock(mutex_);
  remove_live(w);
  auto it = windows_.find(w);
  gone = std::move(it->second);
  windows_.erase(it);
  return {};
}

result<void> session_impl::free_and_release(window* handle) {
  {
    std::lock_guard poll_lock(poll_mutex_);
    auto found = find_window(handle, "free");
    if (!found) return std::move(found).error();
    // Retired with a grace period of 0: due now (poll would free it the same way).
    (void)(*found)->poll_grace(std::chrono::steady_clock::now());
  }
  return release(handle);
}

result<void> session_impl::flush() {
  result<void> first;
  for_each_backend("flush", 0, [&](publisher_backend& b) {
    result<void> r = b.flush(false, 0);
    if (!r && first) first = r;
    return r;
  });
  return first;
}

std::vector<publisher_status> session_impl::status() const {
  std::lock_guard lock(mutex_);
  std::vector<publisher_status> out;
  for (const slot& s : slots_) {
    std::string message = s.message;
    if (s.warnings != 0)
      message += "; " + std::to_string(s.warnings) + (s.warnings == 1 ? " warning" : " warnings") +
                 ", the last: " + s.last_warning;
    out.push_back({s.kind, s.state, std::move(message)});
  }
  return out;
}

}  // namespace detail
}  // namespace jitunwind
