#include "jitwalk/table_store.hpp"

#include <algorithm>

namespace jitwalk {

namespace {
template <class T>
void store_release(T* p, T v) {
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
}
template <class T>
T load_relaxed(T* p) {
  return std::atomic_ref<T>(*p).load(std::memory_order_relaxed);
}
}  // namespace

table_store::table_store(table_views views) : v_(views) {
  if (!v_.rows.empty())
    free_[0] = static_cast<uint32_t>(std::min<size_t>(v_.rows.size(), UINT32_MAX));
  store_release(&v_.ctl->nranges[0], 0u);
  store_release(&v_.ctl->nranges[1], 0u);
  store_release(&v_.ctl->active, 0u);
}

result<uint32_t> table_store::add(range_rows rows, range_info info) {
  if (rows.rows.empty() || rows.end <= rows.start || (rows.end - 1) >> JW_ASID_SHIFT ||
      info.asid >= JW_ASID_LIMIT) {
    return make_error(errc::invalid_argument,
                      "%s: empty range, or one beyond the user address space", info.label.c_str());
  }
  if (rows.rows.size() > JW_MAX_ROWS_PER_RANGE) {
    return make_error(errc::limit_exceeded, "%s: %zu rows (at most %u per range)",
                      info.label.c_str(), rows.rows.size(), JW_MAX_ROWS_PER_RANGE);
  }
  if (!info.shared_rows.empty() && shared_.count(info.shared_rows))
    return add_shared(rows.start, rows.end, std::move(info));
  entry e;
  e.start = rows.start;
  e.end = rows.end;
  if (!info.shared_rows.empty()) {
    shared_slice& sl = shared_[info.shared_rows];
    sl.pending = std::move(rows);
  } else {
    e.pending = std::move(rows);
  }
  e.info = std::move(info);
  return queue(std::move(e));
}

result<uint32_t> table_store::add_shared(uint64_t start, uint64_t end, range_info info) {
  auto sl = shared_.find(info.shared_rows);
  if (sl == shared_.end())
    return make_error(errc::not_found, "%s: no rows to share", info.label.c_str());
  if (end <= start || (end - 1) >> JW_ASID_SHIFT || info.asid >= JW_ASID_LIMIT) {
    return make_error(errc::invalid_argument,
                      "%s: empty range, or one beyond the user address space", info.label.c_str());
  }
  ++shared_ranges_;
  shared_rows_saved_ += sl->second.placed ? sl->second.count : sl->second.pending.rows.size();
  entry e;
  e.start = start;
  e.end = end;
  e.info = std::move(info);
  return queue(std::move(e));
}

// Takes a new range's uid; the ranges of its address space it overlaps go (the newest
// description of an address range wins).
result<uint32_t> table_store::queue(entry e) {
  if (next_uid_ >= (1u << JW_UID_BITS)) {
    if (!e.info.shared_rows.empty() && shared_[e.info.shared_rows].refs == 0)
      shared_.erase(e.info.shared_rows);
    return make_error(errc::limit_exceeded, "table uid space exhausted (%u tables loaded)",
                      next_uid_ - 1);
  }
  if (!e.info.shared_rows.empty()) ++shared_[e.info.shared_rows].refs;
  std::vector<uint32_t> overlapped;
  for (const auto& [uid, old] : live_) {
    if (old.info.asid == e.info.asid && old.start < e.end && e.start < old.end)
      overlapped.push_back(uid);
  }
  for (uint32_t old : overlapped) remove(old);
  uint32_t uid = next_uid_++;
  live_.emplace(uid, std::move(e));
  dirty_ = true;
  return uid;
}

// The rows of a range that goes: its own, or its share of a shared slice (released with the
// last range using it). Released slots are reused only after the next commit (see commit).
void table_store::release_rows(entry& e) {
  if (e.info.shared_rows.empty()) {
    if (e.placed) quarantine_.push_back({e.row_first, e.row_count, commits_ + 1});
    return;
  }
  auto sl = shared_.find(e.info.shared_rows);
  if (sl == shared_.end() || --sl->second.refs > 0) return;
  if (sl->second.placed) quarantine_.push_back({sl->second.first, sl->second.count, commits_ + 1});
  shared_.erase(sl);
}

void table_store::remove(uint32_t uid) {
  auto it = live_.find(uid);
  if (it == live_.end()) return;
  release_rows(it->second);
  live_.erase(it);
  dirty_ = true;
}

void table_store::remove_if(const std::function<bool(const range_info&)>& pred) {
  std::vector<uint32_t> doomed;
  for (const auto& [uid, e] : live_) {
    if (pred(e.info)) doomed.push_back(uid);
  }
  for (uint32_t uid : doomed) remove(uid);
}

result<uint32_t> table_store::allocate(uint32_t count) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= count) {
      uint32_t first = it->first;
      uint32_t left = it->second - count;
      free_.erase(it);
      if (left) free_[first + count] = left;
      return first;
    }
  }
  // Full: a larger array holding the same rows at the same indexes, its new part free.
  const size_t cap = v_.rows.size();
  if (v_.grow && cap < max_rows) {
    const size_t want = std::min(max_rows, std::max(cap * 2, cap + count));
    if (auto bigger = v_.grow(want); bigger && bigger->size() > cap) {
      note("BPF row table full at %zu rows: grown to %zu", cap, bigger->size());
      v_.rows = *bigger;
      ++grown_;
      free_slots(static_cast<uint32_t>(cap), static_cast<uint32_t>(v_.rows.size() - cap));
      return allocate(count);
    } else if (!bigger) {
      grow_problem_ = bigger.error().message();
    }
  }
  return make_error(errc::limit_exceeded,
                    "no room for %u rows in the BPF row table (%zu slots%s%s)", count,
                    v_.rows.size(), grow_problem_.empty() ? "" : "; ", grow_problem_.c_str());
}

void table_store::free_slots(uint32_t first, uint32_t count) {
  auto [it, inserted] = free_.emplace(first, count);
  if (!inserted) return;
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

result<void> table_store::commit() {
  const uint32_t active = load_relaxed(&v_.ctl->active) & 1;
  const uint32_t half = active ^ 1;
  ++commits_;
  // Walks still using this half (they read `active` before the last flip) are invalidated
  // before anything they might read changes.
  std::atomic_ref<__u64>(v_.ctl->seq[half]).fetch_add(1, std::memory_order_acq_rel);

  // Rows released by an earlier commit were referenced only by this half (now invalidated)
  // and the active half no longer has them: reusable now.
  std::vector<released> keep;
  for (const released& r : quarantine_) {
    if (r.commit < commits_) {
      free_slots(r.first, r.count);
    } else {
      keep.push_back(r);
    }
  }
  quarantine_ = std::move(keep);  // released for this commit: free after the next one

  std::string failures, why;
  for (auto it = live_.begin(); it != live_.end();) {
    entry& e = it->second;
    if (!e.placed) {
      // A shared slice is placed by its first range; the others take its slots.
      shared_slice* sl = e.info.shared_rows.empty() ? nullptr : &shared_.at(e.info.shared_rows);
      range_rows& pending = sl ? sl->pending : e.pending;
      if (!sl || !sl->placed) {
        auto first = allocate(static_cast<uint32_t>(pending.rows.size()));
        if (!first) {
          failures += format("%s%s (%zu rows)", failures.empty() ? "" : ", ", e.info.label.c_str(),
                             pending.rows.size());
          why = first.error().message();
          release_rows(e);
          it = live_.erase(it);
          continue;
        }
        const auto count = static_cast<uint32_t>(pending.rows.size());
        std::copy(pending.rows.begin(), pending.rows.end(), v_.rows.begin() + first.value());
        pending = {};
        if (sl) {
          sl->first = first.value();
          sl->count = count;
          sl->placed = true;
        }
        e.row_first = first.value();
        e.row_count = count;
      } else {
        e.row_first = sl->first;
        e.row_count = sl->count;
      }
      e.placed = true;
    }
    ++it;
  }

  std::vector<std::pair<uint32_t, const entry*>> order;
  order.reserve(live_.size());
  for (const auto& [uid, e] : live_) order.emplace_back(uid, &e);
  const auto key = [](const entry& e, uint64_t addr) { return asid_key(e.info.asid, addr); };
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return key(*a.second, a.second->start) < key(*b.second, b.second->start);
  });
  if (order.size() > JW_RANGE_CAP) {
    return make_error(errc::limit_exceeded, "%zu ranges exceed the index capacity (%d)",
                      order.size(), JW_RANGE_CAP);
  }
  jw_range* dst = v_.ranges.data() + (half ? JW_RANGE_CAP : 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const entry& e = *order[i].second;
    jw_range r{};
    r.start = key(e, e.start);
    r.end = key(e, e.end);
    r.window_id = e.info.window_id ^ (uint64_t{e.info.asid} << JW_WINDOW_ASID_SHIFT);
    r.generation = e.info.generation;
    r.row_first = e.row_first;
    r.row_count = e.row_count;
    r.uid = order[i].first;
    r.kind = static_cast<uint16_t>(e.info.source);
    dst[i] = r;
  }
  store_release(&v_.ctl->nranges[half], static_cast<uint32_t>(order.size()));
  store_release(&v_.ctl->active, half);
  dirty_ = false;
  size_t rows_now = 0;
  for (const auto& [uid, e] : live_)
    if (e.info.shared_rows.empty()) rows_now += e.row_count;
  for (const auto& [name, sl] : shared_) rows_now += sl.count;
  rows_peak_ = std::max(rows_peak_, rows_now);
  ranges_peak_ = std::max(ranges_peak_, order.size());
  if (!failures.empty()) {
    return make_error(errc::limit_exceeded, "BPF row table full, not loaded: %s (%s)",
                      failures.c_str(), why.c_str());
  }
  return {};
}

const range_info* table_store::info(uint32_t uid) const {
  auto it = live_.find(uid);
  return it == live_.end() ? nullptr : &it->second.info;
}

uint32_t table_store::find(uint64_t pc, uint32_t asid) const {
  for (const auto& [uid, e] : live_) {
    if (e.placed && e.info.asid == asid && pc >= e.start && pc < e.end) return uid;
  }
  return 0;
}

table_stats table_store::stats() const {
  table_stats s;
  s.rows_capacity = v_.rows.size();
  for (const auto& [uid, e] : live_) {
    ++s.ranges;
    if (e.info.shared_rows.empty()) s.rows_used += e.placed ? e.row_count : e.pending.rows.size();
  }
  for (const auto& [key, sl] : shared_)
    s.rows_used += sl.placed ? sl.count : sl.pending.rows.size();
  s.shared_ranges = shared_ranges_;
  s.grown = grown_;
  s.shared_rows_saved = shared_rows_saved_;
  s.commits = commits_;
  s.rows_peak = rows_peak_;
  s.ranges_peak = ranges_peak_;
  return s;
}

}  // namespace jitwalk
