#include "window/session_impl.hpp"

#include "common/error.hpp"
#include <jitunwind/toolkit/names.hpp>
#include "registry/registry_writer.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

namespace jitunwind::detail {

namespace {

result<void> check_name_slow(std::string_view name);

// Every append checks its name: the common case inline, the messages out of line.
inline result<void> check_name(std::string_view name) {
  if (!name.empty() && name.size() <= 4096 && !has_control_bytes(name)) [[likely]]
    return {};
  return check_name_slow(name);
}

[[gnu::noinline]] result<void> check_name_slow(std::string_view name) {
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
                         sframe_block block)
    : window(id), session_(s), owned_(false), block_(block) {
  adopt(s.take_lists());
  text_start_ = text_start;
  text_size_ = text_size;
  last_end_ = text_start_;
}

window_impl::~window_impl() = default;

const sframe_buffers& window_impl::buffers() const noexcept {
  return owned_ ? mem_.sframe() : block_.buffers;
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
  removed_.clear();
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
  room_[0] = room_[1] = 0;
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
  if (size == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > page_size())
    return make_error(errc::invalid_argument,
                      "window %llu: allocate(size %zu, alignment %zu): size must be > 0 and "
                      "alignment a power of two up to the page size",
                      static_cast<unsigned long long>(id_), size, alignment);
  const size_t offset = round_up(alloc_cursor_, alignment);
  if (offset > mem_.code_capacity() || size > mem_.code_capacity() - offset)
    return make_error(
        errc::limit_exceeded, "window %llu: %zu bytes of code do not fit (%zu of %zu bytes used)",
        static_cast<unsigned long long>(id_), size, alloc_cursor_, mem_.code_capacity());
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
                      static_cast<unsigned long long>(end), owned_ ? "allocated code" : "range",
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
  if (auto ok = encoder_->append(frames); !ok)
    return make_error(ok.error().code(), "window %llu: function '%.*s': %s", id,
                      static_cast<int>(name.size()), name.data(), ok.error().message().c_str());
  // The exact size, not a bound: v3 rows that need FLEX are twice as large as the others, and a
  // bound for them made small described windows (preload, one per .eh_frame) refuse functions
  // that fit. The function is the encoder's last (address order), so taking it out leaves the
  // bytes of the functions written before unchanged.
  if (encoder_->size() > buffers().capacity()) {
    (void)encoder_->remove(frames.start);
    return make_error(errc::limit_exceeded,
                      "window %llu: SFrame capacity of %zu bytes is full (%zu used); open a new "
                      "window",
                      id, buffers().capacity(), encoder_->size());
  }
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
    return make_error(errc::bad_state, "window %llu: name_range on a %s window", id, to_string(st));
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

window_view window_impl::view(bool with_changes) const {
  window_view v;
  v.id = id_;
  v.generation = publication_generation_;
  v.reuse_count = reuse_count_;
  v.code_end = last_end_;
  v.target = session_.options().target;
  v.text_start = text_start_;
  v.text_size = text_size_;
  if (current_buffer_ >= 0) {
    v.sframe_address = reinterpret_cast<uint64_t>(buffers().buffer(current_buffer_));
    v.sframe = std::span<const uint8_t>(buffers().buffer(current_buffer_), current_size_);
  }
  v.publisher_state = publisher_state_;
  v.previous_sframe_address = previous_sframe_address_;
  v.previous_sframe_size = previous_sframe_size_;
  if (with_changes) {
    v.added = std::span<const published_function>(pending_.data(), pending_count_);
    v.removed = removed_views_;
  }
  return v;
}

result<void> window_impl::publish() {
  return publish_section(/*compact=*/false);
}

result<void> window_impl::publish_section(bool compact) {
  const auto id = static_cast<unsigned long long>(id_);
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: publish on a %s window", id, to_string(st));
  if (pending_count_ == 0 && removed_.empty() && current_buffer_ >= 0 &&
      (!compact || room_[current_buffer_] == encoder_->function_count()))
    return {};
  if (!encoder_ready_) {
    if (auto ok = reset_encoder(); !ok) return ok;
  }
  if (owned_) {
    if (auto ok = mem_.make_executable(exec_from_, alloc_cursor_ - exec_from_); !ok)
      return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
    // page_flip: new code goes to a fresh page (published pages become writable again only
    // for a patch). Alias layouts pack functions whatever the publishing rhythm.
    if (!mem_.aliased())
      alloc_cursor_ = std::min(round_up(alloc_cursor_, page_size()), mem_.code_capacity());
    exec_from_ = alloc_cursor_;
  }
  // Build the new section in the buffer not in use, then switch: consumers of the old one
  // (kernel, external readers between their seqlock checks) never see a half-written section.
  // That buffer still holds the section of the publish before last: only the functions added
  // since then are written (plus the header, and one memmove of the FREs behind the new FDEs).
  // While the window is open, the section keeps room for more FDEs in front of its FREs, so
  // that only the new FDEs and FREs are written (no memmove of the FREs per publish); the room
  // doubles when it is used up (one whole write), and goes when the window is sealed or the
  // buffer cannot hold it (then the FREs move behind the new FDEs).
  const int target = current_buffer_ == 0 ? 1 : 0;
  uint8_t* buf = buffers().buffer(target);
  const size_t n = encoder_->function_count();
  size_t room = room_[target], written = written_[target];
  bool moving = false;
  if (compact ? room != n : room < n) {
    const size_t want = std::max<size_t>(2 * n, 64);
    if (!compact && encoder_->size_with_room(want) <= buffers().capacity()) {
      room = want;
      written = 0;
    } else {
      moving = room == written;  // that layout is the one without room: update it in place
      if (!moving) written = 0;
      room = n;
    }
  }
  const size_t size = encoder_->size_with_room(room);
  const auto address = reinterpret_cast<uint64_t>(buf);
  if (auto ok = moving ? encoder_->write_update(std::span<uint8_t>(buf, size), address, written)
                       : encoder_->write_update(std::span<uint8_t>(buf, size), address, written,
                                                room);
      !ok)
    return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
  written_[target] = n;
  room_[target] = room;
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
  removed_views_.clear();
  for (const window_lists::record& r : removed_)
    removed_views_.push_back(
        {r.start, r.size, std::string_view(names_.data() + r.name_offset, r.name_size)});
  const window_view v = view(true);
  session_.for_each_backend("publish", id_, [&](publisher_backend& b) { return b.on_publish(v); });
  pending_count_ = 0;
  removed_.clear();
  removed_views_.clear();
  return {};
}

result<void> window_impl::seal() {
  if (state() != window_state::open)
    return make_error(errc::bad_state, "window %llu: seal on a %s window",
                      static_cast<unsigned long long>(id_), to_string(state()));
  // A sealed window's section has the layout every reader expects (no room before its FREs).
  if (auto ok = publish_section(/*compact=*/true); !ok) return ok;
  state_.store(window_state::sealed, std::memory_order_release);
  const window_view v = view(false);
  session_.for_each_backend("seal", id_, [&](publisher_backend& b) { return b.on_seal(v); });
  return {};
}

const std::pair<uint64_t, uint64_t>* window_impl::function_at(uint64_t address, size_t size) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                             [](uint64_t a, const auto& r) { return a < r.first; });
  if (it == ranges_.begin()) return nullptr;
  const auto& r = *std::prev(it);
  return address < r.second && size <= r.second - address ? &r : nullptr;
}

result<void> window_impl::patch(uint64_t address, span<const uint8_t> bytes) {
  const auto id = static_cast<unsigned long long>(id_);
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: patch on a %s window", id, to_string(st));
  if (!owned_)
    return make_error(errc::invalid_argument,
                      "window %llu: patch is for owned windows; a described window's memory is "
                      "the runtime's to write",
                      id);
  if (bytes.empty())
    return make_error(errc::invalid_argument, "window %llu: empty patch at 0x%llx", id,
                      static_cast<unsigned long long>(address));
  if (function_at(address, bytes.size()) == nullptr)
    return make_error(errc::invalid_argument,
                      "window %llu: patch [0x%llx, 0x%llx) is not inside one appended function", id,
                      static_cast<unsigned long long>(address),
                      static_cast<unsigned long long>(address + bytes.size()));
  const size_t offset = address - text_start_;
  if (auto ok = mem_.patch(offset, bytes, offset < exec_from_); !ok)
    return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
  return {};
}

result<void> window_impl::retire_function(uint64_t start) {
  const auto id = static_cast<unsigned long long>(id_);
  const window_state st = state();
  if (st != window_state::open && st != window_state::sealed)
    return make_error(errc::bad_state, "window %llu: retire_function on a %s window", id,
                      to_string(st));
  auto range = std::lower_bound(ranges_.begin(), ranges_.end(), start,
                                [](const auto& r, uint64_t a) { return r.first < a; });
  if (range == ranges_.end() || range->first != start)
    return make_error(errc::invalid_argument,
                      "window %llu: retire_function: no function of the window starts at 0x%llx",
                      id, static_cast<unsigned long long>(start));
  const uint64_t end = range->second;
  if (auto ok = encoder_->remove(start); !ok)
    return make_error(ok.error().code(), "window %llu: %s", id, ok.error().message().c_str());
  // The function, and names given to parts of it (name_range), leave the window. What the
  // consumers already have is taken back at the next publish; what is still pending never
  // reaches them.
  const auto inside = [&](uint64_t a, uint64_t size) { return a >= start && a + size <= end; };
  const auto first_pending = pending_.begin();
  const auto pending_end = std::stable_partition(
      first_pending, first_pending + static_cast<ptrdiff_t>(pending_count_),
      [&](const published_function& pf) { return !inside(pf.frames.start, pf.frames.size); });
  const size_t still_pending = static_cast<size_t>(pending_end - first_pending);
  std::erase_if(records_, [&](const window_lists::record& r) {
    if (!inside(r.start, r.size)) return false;
    const bool was_pending =
        std::any_of(pending_end, first_pending + static_cast<ptrdiff_t>(pending_count_),
                    [&](const published_function& pf) { return pf.name_offset == r.name_offset; });
    if (!was_pending) removed_.push_back(r);
    return true;
  });
  pending_count_ = still_pending;
  ranges_.erase(range);
  // The published sections no longer match the encoder: the next publish writes whole ones.
  written_[0] = written_[1] = 0;
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
  // A released handle cannot be reused, nor can any range while address reuse is off.
  if (release_when_freed_ || !session_.recycles_addresses()) kept_for_reuse_ = false;
  if (!kept_for_reuse_) free_memory(/*recycle=*/true);
  grace_.store(grace_stage::done, std::memory_order_release);
  return true;
}

void window_impl::free_memory(bool recycle) {
  const window_view v = view(false);
  session_.for_each_backend("free", id_, [&](publisher_backend& b) { return b.on_free(v); });
  // Nobody reads the buffers or runs the code any more (the publishers were told above, the
  // grace period is over); the session may give them, pages already faulted in, to the next
  // window. With address reuse off, code ranges are never handed out again: the pages move to
  // a new range (page_flip) or are dropped, and the old range stays reserved.
  const bool reuse_addresses = session_.recycles_addresses();
  if (owned_) {
    const bool wiped = recycle && mem_.wipe(alloc_cursor_).ok();
    if (wiped && reuse_addresses)
      session_.recycle(std::move(mem_));
    else if (wiped && mem_.move_away().ok())
      session_.recycle(std::move(mem_));
    else if (!reuse_addresses)
      mem_.release_reserving();
  }
  session_.give_back(std::exchange(block_, sframe_block{}));
  if (recycle) session_.recycle(release_lists());
  mem_ = owned_memory{};
  pending_ = {};
  encoder_.reset();
  encoder_ready_ = false;
  forget_functions();
  // Freed for good: give the rest back.
  records_ = {};
  names_ = {};
  ranges_ = {};
  removed_ = {};
  removed_views_ = {};
  current_buffer_ = -1;
  current_size_ = 0;
  state_.store(window_state::freed, std::memory_order_release);
}

result<bool> window_impl::prepare_release() {
  const window_state st = state();
  if (st == window_state::open || st == window_state::sealed)
    return make_error(errc::bad_state, "window %llu: release of a %s window (retire it first)",
                      static_cast<unsigned long long>(id_), to_string(st));
  if (st == window_state::freed) return true;
  // Retired. The caller holds the session's poll lock: no grace callback is running.
  if (grace_.load(std::memory_order_acquire) == grace_stage::done) {
    free_memory(/*recycle=*/true);  // kept for reuse: not any more
    return true;
  }
  release_when_freed_ = true;
  return false;
}

result<void> window_impl::reuse() {
  const auto id = static_cast<unsigned long long>(id_);
  if (!session_.recycles_addresses())
    return make_error(errc::bad_state,
                      "window %llu: reuse with address reuse off (session_options::reuse, or "
                      "automatic with the perf map or jitdump publisher on)",
                      id);
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
  publication_generation_ = 0;
  removed_.clear();
  ++reuse_count_;
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

span<const uint8_t> window_impl::published_sframe() const noexcept {
  if (current_buffer_ < 0) return {};
  return {buffers().buffer(current_buffer_), current_size_};
}

}  // namespace jitunwind::detail
