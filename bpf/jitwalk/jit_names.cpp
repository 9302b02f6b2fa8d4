#include "jitwalk/jit_names.hpp"

#include <algorithm>
#include <cstring>

namespace jitwalk {

namespace {
// Bytes read at a time from a perf map or jitdump (a record larger than this ends the reading
// of that jitdump: code blobs of 16 MiB are not JIT functions).
constexpr size_t read_chunk = size_t{16} << 20;
// What one name costs beyond its bytes (map node, vector slot, entry).
constexpr uint64_t entry_overhead = sizeof(jit_names::entry) + 64;
}  // namespace

void jit_names::set_limits(jitunwind::toolkit::memory_budget* budget, uint64_t max_file_bytes,
                           std::optional<uid_t> owner) {
  budget_ = budget;
  max_file_bytes_ = max_file_bytes;
  owner_ = owner;
}

bool jit_names::charge(uint64_t bytes) {
  if (auto r = charge_.grow(budget_, bytes, "JIT function names"); !r) {
    if (dropped_++ == 0) warn("%s; further JIT names are dropped", r.error().message().c_str());
    return false;
  }
  return true;
}

bool jit_names::add(entry e) {
  if (e.size == 0 || e.name.empty()) return false;
  if (!charge(entry_overhead + e.name.size())) return false;
  if (e.size > max_size_) max_size_ = e.size;
  ++count_;
  if (e.generation != 0) ++with_generation_;
  auto& bucket = (e.from == origin::perfmap ? perfmap_ : timed_)[e.start];
  bucket.push_back(std::move(e));
  return true;
}

const jit_names::entry* jit_names::find(uint64_t pc, const jit_when& when) const {
  if (when.generation != 0) {
    // The newest publication at or before `when` that put code at pc (within the window, when
    // the rows of one window unwound the frame).
    // Bounded like find(pc, before): the newest of one start first, at most max_examined.
    const entry* best = nullptr;
    size_t examined = 0;
    auto it = timed_.upper_bound(pc);
    while (it != timed_.begin() && examined < max_examined) {
      --it;
      if (pc - it->first >= max_size_) break;  // nothing this far below can cover pc
      for (auto e = it->second.rbegin(); e != it->second.rend() && examined < max_examined; ++e) {
        ++examined;
        if (pc - e->start >= e->size || e->generation == 0 || e->generation > when.generation)
          continue;
        if (when.window_id != 0 && e->window_id != when.window_id) continue;
        if (!best || e->generation > best->generation) best = &*e;
      }
    }
    examined_ += examined;
    if (best) return best;
  }
  return find(pc, when.before);
}

const jit_names::entry* jit_names::find(uint64_t pc, uint64_t before) const {
  // Newest covering entry; perf map entries are ordered by line number (their `time`). The
  // names nearest below pc are looked at first, the newest of one address first, and at most
  // max_examined of them: a target that stacks names over one address (huge sizes, one start
  // repeated) costs each lookup a bounded time, not the count of its names.
  size_t examined = 0;
  auto search = [&](const std::map<uint64_t, std::vector<entry>>& m, uint64_t limit) {
    const entry* best = nullptr;
    auto it = m.upper_bound(pc);
    while (it != m.begin() && examined < max_examined) {
      --it;
      if (pc - it->first >= max_size_) break;  // nothing this far below can cover pc
      for (auto e = it->second.rbegin(); e != it->second.rend() && examined < max_examined; ++e) {
        ++examined;
        if (pc - e->start >= e->size || e->time >= limit) continue;
        if (!best || e->time > best->time) best = &*e;
      }
    }
    examined_ += examined;
    return best;
  };
  if (const entry* e = search(timed_, before)) return e;
  return search(perfmap_, UINT64_MAX);
}

result<jitunwind::toolkit::guarded_file> jit_names::open_names_file(const std::string& path,
                                                                   file_state& st, const char* what,
                                                                   bool& restarted) {
  jitunwind::toolkit::open_rules rules;
  rules.what = what;
  rules.no_follow = true;
  rules.owner = owner_;
  rules.root_fd = root_fd_;
  rules.max_bytes = UINT64_MAX;  // at most max_file_bytes_ of it are read, whatever its size
  auto f = jitunwind::toolkit::guarded_file::open(path, rules);
  if (!f) {
    if (f.error().code() != errc::not_found && f.error().message() != st.refused) {
      st.refused = f.error().message();
      warn("%s: its names are not read", st.refused.c_str());
    }
    return f;
  }
  st.refused.clear();
  restarted = f->device() != st.device || f->inode() != st.inode || f->size() < st.done;
  if (restarted) {
    // Replaced (a new process with the same pid, or a rewrite) or truncated: from the start.
    st.device = f->device();
    st.inode = f->inode();
    st.done = 0;
  }
  return f;
}

result<size_t> jit_names::read_appended(const std::string& path, const char* what,
                                        const appended_parser& parse) {
  file_state& st = files_[path];
  st.what = what;
  bool restarted = false;
  auto f = open_names_file(path, st, what, restarted);
  if (!f) return f.error();
  st.found = true;
  size_t n = 0;
  std::string buf;
  while (st.done < f->size() && st.done < max_file_bytes_) {
    const uint64_t want =
        std::min<uint64_t>({f->size() - st.done, max_file_bytes_ - st.done, read_chunk});
    buf.resize(static_cast<size_t>(want));
    auto got = f->read_some(st.done, buf.data(), buf.size());
    if (!got) return got.error();
    if (*got == 0) break;
    size_t used = 0;
    auto entries = parse(std::string_view(buf.data(), *got), st.done, used);
    if (!entries)
      return make_error(entries.error().code(), "%s %s: %s", what, path.c_str(),
                        entries.error().message().c_str());
    n += *entries;
    st.entries += *entries;
    if (used == 0) break;  // a line or record still being written (or too large): next time
    st.done += used;
  }
  if (st.done >= max_file_bytes_ && st.refused.empty()) {
    st.refused = "read only";
    warn_cut(format("%s %s after its first %s", what, path.c_str(),
                    jitunwind::toolkit::size_text(max_file_bytes_).c_str()),
             error(errc::limit_exceeded, "--max-file " + std::to_string(max_file_bytes_ >> 20) +
                                             " (MiB) reached"));
  }
  return n;
}

std::vector<jit_names::file_report> jit_names::files() const {
  std::vector<file_report> out;
  for (const auto& [path, st] : files_) {
    file_report r;
    r.path = path;
    r.what = st.what;
    r.found = st.found || !st.refused.empty();
    r.bytes = st.done;
    r.entries = st.entries;
    if (st.refused != "read only") r.refused = st.refused;
    out.push_back(std::move(r));
  }
  return out;
}

size_t jit_names::load_perf_map(const std::string& path) {
  auto n = read_appended(path, "perf map",
                         [&](std::string_view data, uint64_t, size_t& used) -> result<size_t> {
                           const size_t entries = parse_perf_map(data, used);
                           // No newline in a whole chunk: not a perf map line, skipped.
                           if (used == 0 && data.size() == read_chunk) used = data.size();
                           return entries;
                         });
  return n ? *n : 0;
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
  return read_appended(path, "jitdump",
                       [&](std::string_view data, uint64_t offset, size_t& used) -> result<size_t> {
                         // The header is read with the first records; later reads start at a
                         // record.
                         size_t done = static_cast<size_t>(offset);
                         auto n = offset == 0 ? parse_jitdump(data, done)
                                              : result<size_t>(parse_jitdump_records(data, done));
                         used = done - static_cast<size_t>(offset);
                         return n;
                       });
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
      // Kept for a later CODE_MOVE only when the name fit the budget (the copy is charged too).
      if (add({code_addr, code_size, nm, ts, origin::jitdump}) &&
          charge(entry_overhead + nm.size()))
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
