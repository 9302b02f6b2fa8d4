#include "jitwalk/profile_data.hpp"

#include <algorithm>

namespace jitwalk {

std::string marked_name(const profile_frame& f) {
  return f.fp_found ? f.name + fp_mark : f.sp_found ? f.name + sp_mark : f.name;
}

uint32_t profile_data::intern(const profile_frame& f) {
  auto key = std::make_tuple(f.name, static_cast<uint8_t>(f.kind), f.address, f.module, f.fp_found,
                             f.sp_found);
  auto it = frame_ids_.find(key);
  if (it != frame_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(frames_.size());
  frames_.push_back(f);
  frame_ids_.emplace(std::move(key), id);
  return id;
}

void profile_data::add(const std::string& thread, std::vector<uint32_t> frames_leaf_first,
                       uint64_t count) {
  if (count == 0) return;
  counts_[{thread, std::move(frames_leaf_first)}] += count;
  total_ += count;
}

std::vector<uint32_t> profile_data::rebuild(
    const std::function<profile_frame(uint32_t id, const profile_frame&)>& f) {
  std::vector<profile_frame> old = std::move(frames_);
  frames_.clear();
  frame_ids_.clear();
  std::vector<uint32_t> new_id(old.size());
  for (uint32_t id = 0; id < old.size(); ++id) new_id[id] = intern(f(id, old[id]));
  auto old_counts = std::move(counts_);
  counts_.clear();
  for (auto& [key, count] : old_counts) {
    std::vector<uint32_t> frames = key.second;
    for (uint32_t& id : frames) id = new_id[id];
    counts_[{key.first, std::move(frames)}] += count;
  }
  return new_id;
}

std::vector<profile_stack> profile_data::stacks() const {
  std::vector<profile_stack> out;
  out.reserve(counts_.size());
  for (const auto& [key, count] : counts_) out.push_back({key.first, key.second, count});
  auto root_first_names = [&](const profile_stack& s) {
    std::vector<const std::string*> v;
    for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it) v.push_back(&frames_[*it].name);
    return v;
  };
  std::sort(out.begin(), out.end(), [&](const profile_stack& a, const profile_stack& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    auto na = root_first_names(a), nb = root_first_names(b);
    return std::lexicographical_compare(
        na.begin(), na.end(), nb.begin(), nb.end(),
        [](const std::string* x, const std::string* y) { return *x < *y; });
  });
  return out;
}

}  // namespace jitwalk
