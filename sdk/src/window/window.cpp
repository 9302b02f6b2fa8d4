#include "window/session_impl.hpp"

#include "common/error.hpp"
#include "common/names.hpp"
#include "registry/registry_writer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace jitunwind::detail {

namespace {

// Upper bound of the SFrame bytes one function adds: the FDE plus, per row, a 4-byte start
// address, the info byte and three 4-byte offsets.
// An FDE (v2: 20 bytes; v3: 16-byte index entry + 5-byte attribute record) and per row an FRE
// with a 4-byte address, its info byte and up to six 4-byte words (a v3 FLEX row).
size_t sframe_bytes_bound(const function_desc& f) { return 21 + f.rows.size() * (4 + 1 + 24); }

result<void> check_name(std::string_view name) {
  if (name.empty()) return make_error(errc::invalid_argument, "function name is empty");
  if (name.size() > 4096)
    return make_error(errc::invalid_argument, "function name of %zu bytes is too long (max 4096)",
                      name.size());
  if (!has_control_bytes(name)) return {};
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      return make_error(errc::invalid_argument,
                        "function name '%.*s…' has control character 0x%02x at byte %zu",
                        static_cast<int>(std::min<size_t>(i, 64)), name.data(), c, i);
  }
  return {};
}

}  // namespace

window_impl::window_impl(session_impl& s, uint64_t id, owned_memory mem)
    : window(id), session_(s), owned_(true), mem_(std::move(mem)) {
  adopt(s.take_lists());
  text_start_ = mem_.code_address();
  text_size_ = mem_.code_capacity();
  last_end_ = text_start_;
}

window_impl::window_impl(session_impl& s, uint64_t id, uint64_t text_start, size_t text_size,
                         near_buffers near)
    : window(id), session_(s), owned_(false), near_(std::move(near)) {
  adopt(s.take_lists());
  text_start_ = text_start;
  text_size_ = text_size;
  last_end_ = text_start_;
}

window_impl::~window_impl() = default;

const sframe_buffers& window_impl::buffers() const noexcept {
  return owned_ ? mem_.sframe() : near_.sframe();
}

// Lists from take_lists are empty (release_lists empties them); entries of pending_ are reused
// in place.
void window_impl::adopt(window_lists l) {
  pending_ = std::move(l.pending);
  records_ = std::move(l.records);
  names_ = std::move(l.names);
  ranges_ = std::move(l.ranges);
  encoder_ = std::move(l.encoder);
}

window_lists window_impl::release_lists() {
  forget_functions();
  return {std::exchange(pending_, {}), std::exchange(records_, {}), std::exchange(names_, {}),
          std::exchange(ranges_, {}), std::exchange(encoder_, std::nullopt)};
}

result<void> window_impl::reset_encoder() {
  sframe::encoder_options o;
  o.target = session_.options().target;
  o.version = session_.options().sframe_version;
  o.allow_flex = session_.options().sframe_allow_flex;
  o.section_address = reinterpret_cast<uint64_t>(buffers().buffer(0));
  // An encoder from a freed window keeps its storage; with no function left, relocating it
  // cannot fail, and it then encodes exactly like a new one with these options.
  bool reused = false;
  if (encoder_ && encoder_->options().target == o.target &&
      encoder_->options().version == o.version &&
      encoder_->options().allow_flex == o.allow_flex) {
    encoder_->clear();
    reused = encoder_->relocate(o.section_address).ok();
  }
  if (!reused) {
    auto e = sframe::encoder::create(o);
    if (!e) return std::move(e).error();
    encoder_.emplace(std::move(e).value());
  }
  encoder_ready_ = true;
  written_[0] = written_[1] = 0;
  return {};
}

result<window::code_space> window_impl::allocate(size_t size, size_t alignment) {
  if (!owned_)
    return make_error(errc::invalid_argument,
                      "window %llu: allocate() is for owned windows; a described window's memory "
                      "belongs to the runtime",
                      static_cast<unsigned long long>(id_));
  if (state() != window_state::open)
    return make_error(errc::bad_state, "window %llu: allocate() on a %s window",
                      static_cast<unsigned long long>(id_), to_string(state()));
  if (size == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0 ||
      alignment > page_size())
    return make_error(errc::invalid_argument,
                      "window %llu: allocate(size %zu, alignment %zu): size must be > 0 and "
                      "alignment a power of two up to the page size",
                      static_cast<unsigned long long>(id_), size, alignment);
  const size_t offset = round_up(alloc_cursor_, alignment);
  if (offset > mem_.code_capacity() || size > mem_.code_capacity() - offset)
    return make_error(errc::limit_exceeded,
                      "window %llu: %zu bytes of code do not fit (%zu of %zu bytes used)",
                      static_cast<unsigned long long>(id_), size, alloc_cursor_,
                      mem_.code_capacity());
  // The gap is best effort: the last allocation of a window may use it for code.
  alloc_cursor_ = std::min(offset + size + session_.code_gap(), mem_.code_capacity());
  const uint64_t address = text_start_ + offset;
  return code_space{address, std::span<uint8_t>(mem_.writable_for(address), size)};
}

result<void> window_impl::append(std::string_view name, const function_desc& frames,
                                 uint64_t moved_from) {
  const auto id = static_cast<unsigned long long>(id_);
  if (state() != window_state::open)
    return make_error(errc::bad_state, "window %llu: append to a %s window", id,
                      to_string(state()));
  if (auto ok = check_name(name); !ok)
    return make_error(errc::invalid_argument, "window %llu: %s", id, ok.error().message().c_str());
  const uint64_t end = frames.start + frames.size;
  const uint64_t limit = owned_ ? text_start_ + alloc_cursor_ : text_start_ + text_size_;
  if (frames.start < text_start_ || end > limit || end < frames.start)
    return make_error(errc::invalid_argument,
                      "window %llu: function '%.*s' [0x%llx, 0x%llx) is outside the window's "
                      "%s [0x%llx, 0x%llx)",
                      id, static_cast<int>(name.size()), name.data(),
                      static_cast<unsigned long long>(frames.start),
                      static_cast<unsigned long long>(end),
                      owned_ ? "allocated code" : "range",
                      static_cast<unsigned long long>(text_start_),
                      static_cast<unsigned long long>(limit));
  if (frames.start < last_end_)
    return make_error(errc::invalid_argument,
                      "window %llu: function '%.*s' at 0x%llx overlaps or precedes the previous "
                      "function (ends at 0x%llx); functions are appended in address order",
                      id, static_cast<int>(name.size()), name.data(),
                      static_cast<unsigned long long>(frames.start),
                      static_cast<unsigned long long>(last_end_));
  if (!encoder_ready_) {
    if (auto ok = reset_encoder(); !ok) return ok;
  }
  if (encoder_->size() + sframe_bytes_bound(frames) > buffers().capacity())
    return make_error(errc::limit_exceeded,
                      "window %llu: SFrame capacity of %zu bytes is full (%zu used); open a new "
                      "window",
                      id, buffers().capacity(), encoder_->size());
  if (auto ok = encoder_->append(frames); !ok)
    return make_error(ok.error().code(), "window %llu: function '%.*s': %s", id,
                      static_cast<int>(name.size()), name.data(), ok.error().message().c_str());
  add_pending(name, frames, moved_from, /*name_only=*/false);
  ranges_.emplace_back(frames.start, end);
  last_end_ = end;
  return {};
}

published_function& window_impl::next_pending() {
  if (pending_count_ == pending_.size()) pending_.emplace_back();
  return pending_[pending_count_++];
}

result<void> window_impl::name_range(std::string_view name, const function_desc& frames) {
  const auto id = static_cast<unsigned long long>(id_);
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: name_range on a %s window", id,
                      to_string(st));
  if (auto ok = check_name(name); !ok)
    return make_error(errc::invalid_argument, "window %llu: %s", id, ok.error().message().c_str());
  if (auto ok = validate(session_.options().target, frames); !ok)
    return make_error(errc::invalid_argument, "window %llu: range '%.*s': %s", id,
                      static_cast<int>(name.size()), name.data(), ok.error().message().c_str());
  const uint64_t end = frames.start + frames.size;
  // The last function that starts at or before the range.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), frames.start,
                             [](uint64_t a, const auto& r) { return a < r.first; });
  const bool inside = it != ranges_.begin() && end <= std::prev(it)->second;
  if (!inside)
    return make_error(errc::invalid_argument,
                      "window %llu: range '%.*s' [0x%llx, 0x%llx) is not inside one appended "
                      "function",
                      id, static_cast<int>(name.size()), name.data(),
                      static_cast<unsigned long long>(frames.start),
                      static_cast<unsigned long long>(end));
  add_pending(name, frames, 0, /*name_only=*/true);
  return {};
}

void window_impl::add_pending(std::string_view name, const function_desc& frames,
                              uint64_t moved_from, bool name_only) {
  published_function& pf = next_pending();
  // The name is stored once, NUL-terminated, in names_ (functions() and the publishers read it
  // there); the publishers get a view of it at publish time.
  pf.name_offset = names_.size();
  pf.name_size = static_cast<uint32_t>(name.size());
  pf.frames.start = frames.start;
  pf.frames.size = frames.size;
  if (session_.rows_needed()) {
    pf.frames.rows.assign(frames.rows.begin(), frames.rows.end());
    pf.frames.saved_registers.assign(frames.saved_registers.begin(),
                                     frames.saved_registers.end());
  } else {
    pf.frames.rows.clear();
    pf.frames.saved_registers.clear();
  }
  pf.frames.pcmask_rep = frames.pcmask_rep;
  pf.moved_from = moved_from;
  pf.name_only = name_only;
  records_.push_back({frames.start, frames.size, pf.name_size, names_.size()});
  names_.append(name);
  names_.push_back('\0');
}

window_view window_impl::view(bool with_added) const {
  window_view v;
  v.id = id_;
  v.generation = publication_generation_;
  v.reuse_count = generation_;
  v.code_end = last_end_;
  v.target = session_.options().target;
  v.text_start = text_start_;
  v.text_size = text_size_;
  if (current_buffer_ >= 0) {
    v.sframe_address = reinterpret_cast<uint64_t>(buffers().buffer(current_buffer_));
    v.sframe = std::span<const uint8_t>(buffers().buffer(current_buffer_), current_size_);
  }
  v.previous_sframe_address = previous_sframe_address_;
  v.previous_sframe_size = previous_sframe_size_;
  if (with_added) v.added = std::span<const published_function>(pending_.data(), pending_count_);
  return v;
}

result<void> window_impl::publish() {
  const auto id = static_cast<unsigned long long>(id_);
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: publish on a %s window", id, to_string(st));
  if (pending_count_ == 0 && current_buffer_ >= 0) return {};
  if (!encoder_ready_) {
    if (auto ok = reset_encoder(); !ok) return ok;
  }
  if (owned_) {
    if (auto ok = mem_.make_executable(exec_from_, alloc_cursor_ - exec_from_); !ok)
      return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
    // New code goes to a fresh page: published pages are never made writable again.
    if (!mem_.dual()) alloc_cursor_ = std::min(round_up(alloc_cursor_, page_size()),
                                               mem_.code_capacity());
    exec_from_ = alloc_cursor_;
  }
  // Build the new section in the buffer not in use, then switch: consumers of the old one
  // (kernel, external readers between their seqlock checks) never see a half-written section.
  // That buffer still holds the section of the publish before last: only the functions added
  // since then are written (plus the header, and one memmove of the FREs behind the new FDEs).
  const int target = current_buffer_ == 0 ? 1 : 0;
  uint8_t* buf = buffers().buffer(target);
  const size_t size = encoder_->size();
  if (auto ok = encoder_->write_update(std::span<uint8_t>(buf, size),
                                       reinterpret_cast<uint64_t>(buf), written_[target]);
      !ok)
    return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
  written_[target] = encoder_->function_count();
  if (current_buffer_ >= 0) {
    previous_sframe_address_ = reinterpret_cast<uint64_t>(buffers().buffer(current_buffer_));
    previous_sframe_size_ = current_size_;
  }
  current_buffer_ = target;
  current_size_ = size;
  publication_generation_ = next_publication_generation();
  for (size_t i = 0; i < pending_count_; ++i) {
    published_function& pf = pending_[i];
    pf.name = std::string_view(names_.data() + pf.name_offset, pf.name_size);
  }
  const window_view v = view(true);
  session_.for_each_backend("publish", id_, [&](publisher_backend& b) { return b.on_publish(v); });
  pending_count_ = 0;
  return {};
}

result<void> window_impl::seal() {
  if (state() != window_state::open)
    return make_error(errc::bad_state, "window %llu: seal on a %s window",
                      static_cast<unsigned long long>(id_), to_string(state()));
  if (auto ok = publish(); !ok) return ok;
  state_.store(window_state::sealed, std::memory_order_release);
  const window_view v = view(false);
  session_.for_each_backend("seal", id_, [&](publisher_backend& b) { return b.on_seal(v); });
  return {};
}

result<void> window_impl::retire(std::chrono::milliseconds grace,
                                 std::function<bool(window&)> on_grace_over) {
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: retire on a %s window",
                      static_cast<unsigned long long>(id_), to_string(st));
  if (grace.count() < 0)
    return make_error(errc::invalid_argument, "window %llu: negative grace period",
                      static_cast<unsigned long long>(id_));
  state_.store(window_state::retired, std::memory_order_release);
  const window_view v = view(false);
  session_.for_each_backend("retire", id_, [&](publisher_backend& b) { return b.on_retire(v); });
  grace_deadline_ = std::chrono::steady_clock::now() + grace;
  on_grace_over_ = std::move(on_grace_over);
  kept_for_reuse_ = false;
  grace_.store(grace_stage::armed, std::memory_order_release);
  return {};
}

bool window_impl::poll_grace(std::chrono::steady_clock::time_point now) {
  // The deadline and callback are read only after seeing them armed.
  if (grace_.load(std::memory_order_acquire) != grace_stage::armed || now < grace_deadline_)
    return false;
  grace_stage expected = grace_stage::armed;
  if (!grace_.compare_exchange_strong(expected, grace_stage::running, std::memory_order_acq_rel))
    return false;  // another poller has it
  kept_for_reuse_ = on_grace_over_ ? on_grace_over_(*this) : false;
  on_grace_over_ = nullptr;
  if (!kept_for_reuse_) free_memory(/*recycle=*/true);
  grace_.store(grace_stage::done, std::memory_order_release);
  return true;
}

void window_impl::free_memory(bool recycle) {
  const window_view v = view(false);
  session_.for_each_backend("free", id_, [&](publisher_backend& b) { return b.on_free(v); });
  // Nobody reads the buffers or runs the code any more (the publishers were told above, the
  // grace period is over); the session may give them, pages already faulted in, to the next
  // window. Code that cannot be wiped is unmapped instead.
  if (recycle) {
    if (owned_ && mem_.wipe(alloc_cursor_).ok()) session_.recycle(std::move(mem_));
    session_.recycle(std::exchange(near_, near_buffers{}));
    session_.recycle(release_lists());
  }
  mem_ = owned_memory{};
  near_ = near_buffers{};
  pending_ = {};
  encoder_.reset();
  encoder_ready_ = false;
  forget_functions();
  // Freed for good: give the rest back.
  records_ = {};
  names_ = {};
  ranges_ = {};
  current_buffer_ = -1;
  current_size_ = 0;
  state_.store(window_state::freed, std::memory_order_release);
}

result<void> window_impl::reuse() {
  const auto id = static_cast<unsigned long long>(id_);
  if (state() != window_state::retired ||
      grace_.load(std::memory_order_acquire) != grace_stage::done || !kept_for_reuse_)
    return make_error(errc::bad_state,
                      "window %llu: reuse needs a retired window whose grace period is over and "
                      "whose callback kept it (state %s)",
                      id, to_string(state()));
  const window_view v = view(false);
  session_.for_each_backend("free", id_, [&](publisher_backend& b) { return b.on_free(v); });
  if (owned_) {
    if (auto ok = mem_.wipe(alloc_cursor_); !ok)
      return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
  }
  encoder_ready_ = false;  // the next append clears the encoder, keeping its storage
  forget_functions();
  last_end_ = text_start_;
  alloc_cursor_ = 0;
  exec_from_ = 0;
  current_buffer_ = -1;
  current_size_ = 0;
  previous_sframe_address_ = 0;
  previous_sframe_size_ = 0;
  ++generation_;
  kept_for_reuse_ = false;
  grace_.store(grace_stage::idle, std::memory_order_relaxed);  // published by the store below
  state_.store(window_state::open, std::memory_order_release);
  return {};
}

void window_impl::shutdown() {
  const window_state st = state();
  if (st == window_state::open || st == window_state::sealed) {
    state_.store(window_state::retired, std::memory_order_release);
    const window_view v = view(false);
    session_.for_each_backend("retire", id_, [&](publisher_backend& b) { return b.on_retire(v); });
  }
  if (state() != window_state::freed) free_memory(/*recycle=*/false);  // the session is going
}

void window_impl::forget_functions() {
  pending_count_ = 0;
  records_.clear();
  names_.clear();
  ranges_.clear();
  written_[0] = written_[1] = 0;
}

std::vector<window::function_entry> window_impl::functions() const {
  std::vector<function_entry> out;
  out.reserve(records_.size());
  for (const window_lists::record& r : records_)
    out.push_back({names_.substr(r.name_offset, r.name_size), r.start, r.size});
  return out;
}

std::span<const uint8_t> window_impl::published_sframe() const noexcept {
  if (current_buffer_ < 0) return {};
  return {buffers().buffer(current_buffer_), current_size_};
}

}  // namespace jitunwind::detail
