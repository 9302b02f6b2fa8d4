#include "jitwalk/jit_names.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

namespace jitwalk {

void jit_names::add(entry e) {
  if (e.size == 0 || e.name.empty()) return;
  if (e.size > max_size_) max_size_ = e.size;
  ++count_;
  auto& bucket = (e.from == origin::perfmap ? perfmap_ : timed_)[e.start];
  bucket.push_back(std::move(e));
}

const jit_names::entry* jit_names::find(uint64_t pc, const jit_when& when) const {
  if (when.generation != 0) {
    // The newest publication at or before `when` that put code at pc (within the window, when
    // the rows of one window unwound the frame).
    const entry* best = nullptr;
    auto it = timed_.upper_bound(pc);
    while (it != timed_.begin()) {
      --it;
      if (pc - it->first >= max_size_) break;  // nothing this far below can cover pc
      for (const entry& e : it->second) {
        if (pc - e.start >= e.size || e.generation == 0 || e.generation > when.generation) continue;
        if (when.window_id != 0 && e.window_id != when.window_id) continue;
        if (!best || e.generation >= best->generation) best = &e;
      }
    }
    if (best) return best;
  }
  return find(pc, when.before);
}

const jit_names::entry* jit_names::find(uint64_t pc, uint64_t before) const {
  // Newest covering entry; perf map entries are ordered by line number (their `time`).
  auto search = [&](const std::map<uint64_t, std::vector<entry>>& m, uint64_t limit) {
    const entry* best = nullptr;
    auto it = m.upper_bound(pc);
    while (it != m.begin()) {
      --it;
      if (pc - it->first >= max_size_) break;  // nothing this far below can cover pc
      for (const entry& e : it->second) {
        if (pc - e.start >= e.size || e.time >= limit) continue;
        if (!best || e.time >= best->time) best = &e;
      }
    }
    return best;
  };
  if (const entry* e = search(timed_, before)) return e;
  return search(perfmap_, UINT64_MAX);
}

size_t jit_names::load_perf_map(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return 0;
  size_t& done = consumed_[path];
  f.seekg(static_cast<std::streamoff>(done));
  std::stringstream ss;
  ss << f.rdbuf();
  size_t used = 0;
  size_t n = parse_perf_map(ss.str(), used);
  done += used;
  return n;
}

size_t jit_names::parse_perf_map(std::string_view text, size_t& used) {
  size_t n = 0, pos = 0;
  for (;;) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a line still being written: next time
    std::string line(text.substr(pos, nl - pos));
    pos = nl + 1;
    unsigned long long start = 0, size = 0;
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx %llx %n", &start, &size, &consumed) < 2 || consumed <= 0) {
      continue;
    }
    entry e;
    e.start = start;
    e.size = size;
    e.name = line.substr(static_cast<size_t>(consumed));
    e.from = origin::perfmap;
    e.time = ++perfmap_lines_;
    add(std::move(e));
    ++n;
  }
  used = pos;
  return n;
}

result<size_t> jit_names::load_jitdump(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(errc::io_error, "cannot read jitdump %s", path.c_str());
  size_t& done = consumed_[path];
  std::stringstream ss;
  if (done != 0) {
    // Later calls read only what was appended (the file holds code bytes: it grows large).
    f.seekg(static_cast<std::streamoff>(done));
    ss << f.rdbuf();
    return parse_jitdump_records(ss.str(), done);
  }
  ss << f.rdbuf();
  auto n = parse_jitdump(ss.str(), done);
  if (!n) return make_error(n.error().code(), "%s: %s", path.c_str(), n.error().message().c_str());
  return n;
}

result<size_t> jit_names::parse_jitdump(std::string_view data, size_t& done) {
  uint32_t magic = 0, header_size = 0;
  if (data.size() >= 12) {
    std::memcpy(&magic, data.data(), 4);
    std::memcpy(&header_size, data.data() + 8, 4);
  }
  if (data.size() < 40 || magic != 0x4A695444) {
    return make_error(errc::malformed, "not a jitdump file (no JiTD magic)");
  }
  if (header_size < 40)
    return make_error(errc::malformed, "jitdump header size %u < 40", header_size);
  if (done == 0) done = header_size;
  if (done >= data.size()) return size_t{0};
  return parse_jitdump_records(data.substr(done), done);
}

size_t jit_names::parse_jitdump_records(std::string_view data, size_t& done) {
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, data.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, data.data() + at, 8);
    return v;
  };
  size_t pos = 0;
  size_t n = 0;
  auto& by_index = jitdump_index_;  // code_index -> name, for CODE_MOVE
  while (pos + 16 <= data.size()) {
    uint32_t id = u32(pos), total = u32(pos + 4);
    uint64_t ts = u64(pos + 8);
    if (total < 16 || total > data.size() - pos) break;  // truncated (still being written)
    const size_t body = pos + 16;
    if (id == 0 && total >= 16 + 40 + 1) {  // CODE_LOAD
      uint64_t code_addr = u64(body + 16), code_size = u64(body + 24), index = u64(body + 32);
      const char* name = data.data() + body + 40;
      size_t max = total - 16 - 40;
      std::string nm(name, strnlen(name, max));
      add({code_addr, code_size, nm, ts, origin::jitdump});
      by_index[index] = {nm, code_size};
      ++n;
    } else if (id == 1 && total >= 16 + 48) {  // CODE_MOVE
      uint64_t new_addr = u64(body + 24), code_size = u64(body + 32), index = u64(body + 40);
      auto it = by_index.find(index);
      if (it != by_index.end()) {
        add({new_addr, code_size, it->second.first, ts, origin::jitdump});
        ++n;
      }
    }
    pos += total;
  }
  done += pos;
  return n;
}

}  // namespace jitwalk
