// Private: every address range a perf map has named, for the "reused address" warning (the perf
// map publisher, window/name_publishers.cpp).
//
// Semantics of a map start -> end (the largest end named at that start): `earlier` finds the
// range with the largest start <= s if it reaches past s, else the one with the next start if
// it begins before e. Stored as runs: sorted vectors of (start, end), keyed in a map by their
// first start, every start of a run below the next run's first. A JIT names its functions in
// address order within a window, so nearly every range goes at the end of the run before it
// (push_back, no node allocated; 16 bytes a range). A range that lands inside a run (a window
// placed between two windows named before, or a reused address) splits the run there once, and
// the ranges after it then go at the end of the first half.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace jitunwind::detail {

class named_ranges {
 public:
  using range = std::pair<uint64_t, uint64_t>;  // [start, end)

  /// The earlier range [start, end) meets (see the file comment), then records it.
  std::optional<range> add(uint64_t start, uint64_t end) {
    run* r = run_before(start);
    std::optional<range> earlier;
    if (r == nullptr) {
      if (next_first_ < end) earlier = range{next_first_, next_end_};
      cache(runs_.emplace(start, run{range{start, end}}).first);  // before every run
      return earlier;
    }
    // The first range of the run that starts after `start` (nearly always: none of it).
    const size_t pos =
        r->back().first <= start
            ? r->size()
            : static_cast<size_t>(std::upper_bound(r->begin(), r->end(), start,
                                                   [](uint64_t a, const range& x) {
                                                     return a < x.first;
                                                   }) -
                                  r->begin());
    range& prev = (*r)[pos - 1];  // the run's first start is <= start
    if (prev.second > start)
      earlier = prev;
    else if (pos < r->size() ? (*r)[pos].first < end : next_first_ < end)
      earlier = pos < r->size() ? (*r)[pos] : range{next_first_, next_end_};
    if (prev.first == start) {
      prev.second = std::max(prev.second, end);
      return earlier;
    }
    if (pos < r->size()) {
      // Inside the run: the ranges after it become a run of their own.
      run tail(r->begin() + static_cast<ptrdiff_t>(pos), r->end());
      r->erase(r->begin() + static_cast<ptrdiff_t>(pos), r->end());
      const uint64_t key = tail.front().first;
      runs_.emplace(key, std::move(tail));
      cache(last_);
    }
    r->emplace_back(start, end);
    return earlier;
  }

  size_t runs() const noexcept { return runs_.size(); }

 private:
  using run = std::vector<range>;
  using iterator = std::map<uint64_t, run>::iterator;

  // The run holding the largest start <= `start` (null if none), with next_first_/next_end_
  // set to the first range of the run after it (UINT64_MAX: none).
  run* run_before(uint64_t start) {
    if (has_last_ && last_->first <= start && start < next_first_) return &last_->second;
    auto it = runs_.upper_bound(start);
    if (it == runs_.begin()) {
      has_last_ = false;
      set_next(it);
      return nullptr;
    }
    cache(std::prev(it));
    return &last_->second;
  }

  void cache(iterator it) {
    last_ = it;
    has_last_ = true;
    set_next(std::next(it));
  }

  void set_next(iterator next) {
    next_first_ = next == runs_.end() ? UINT64_MAX : next->second.front().first;
    next_end_ = next == runs_.end() ? UINT64_MAX : next->second.front().second;
  }

  std::map<uint64_t, run> runs_;
  iterator last_{};
  bool has_last_ = false;
  uint64_t next_first_ = UINT64_MAX, next_end_ = UINT64_MAX;
};

}  // namespace jitunwind::detail
