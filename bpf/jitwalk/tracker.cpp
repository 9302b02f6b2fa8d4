#include "jitwalk/tracker.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>

namespace jitwalk {

using jitunwind::remote::registry_reader;
using jitunwind::remote::window_record;
using jitunwind::remote::window_state;

namespace {
// What following one window costs (its entries in windows_ / rejected_ and bookkeeping).
constexpr uint64_t per_window_cost = 256;
constexpr size_t max_rejections_named = 100;
constexpr uint64_t max_windows_followed = 65536;  // jw_windows in walker.bpf.c
}  // namespace

tracker::tracker(bpf_session& bpf, table_store& tables, symbolizer& sym, pid_t pid,
                 tracker_options o)
    : bpf_(bpf), tables_(tables), sym_(sym), pid_(pid), o_(std::move(o)) {}

namespace {

// A path the kernel resolves to the object's inode: its own path when that still names the same
// file, else /proc/PID/map_files/... (deleted files, memfds, other mount namespaces).
std::string attach_path(pid_t pid, const mapping& m) {
  if (m.file_backed() && m.path.find(" (deleted)") == std::string::npos) {
    struct stat st {};
    if (stat(m.path.c_str(), &st) == 0 && st.st_ino == m.inode) return m.path;
  }
  return map_files_path(pid, m);
}

}  // namespace

result<void> tracker::attach_loader(const std::string& interp) {
  std::string path = interp;
  if (path.empty()) {
    std::string exe = format("/proc/%d/exe", pid_);
    if (auto obj = elf_file::open(exe); obj) path = obj.value()->interpreter();
    if (path.empty()) return make_error(errc::not_found, "process %d has no dynamic loader", pid_);
    // The loader as mapped by the target (its mount namespace may differ from ours).
    if (auto maps = read_maps(pid_); maps) {
      for (const mapping& m : maps.value()) {
        if (m.executable && m.path == path) {
          path = attach_path(pid_, m);
          break;
        }
      }
    }
  }
  auto r = bpf_.attach_uprobe(program::loader, pid_, path, "_dl_debug_state");
  if (!r) return r.error();
  ++stats_.probes_attached;
  return {};
}

void tracker::attach_probes_in(const std::string& path) {
  auto obj = elf_file::open(path);
  if (!obj) return;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;
  // /proc/PID/maps prints devices as major:minor; keep the same encoding.
  const uint64_t dev = (uint64_t{major(st.st_dev)} << 20) | minor(st.st_dev);
  attach_object_probes(path, *obj.value(), dev, st.st_ino);
}

void tracker::attach_object_probes(const std::string& path, const elf_file& obj, uint64_t dev,
                                   uint64_t inode) {
  // One attachment per (object, probe name): libbpf attaches every site of that name.
  if (probed_.count({dev, inode})) return;
  probed_.insert({dev, inode});
  std::set<std::pair<std::string, std::string>> done;
  for (const sdt_probe& p : obj.sdt_probes()) {
    if (!done.insert({p.provider, p.name}).second) continue;
    std::optional<program> which;
    if (p.provider == "jitunwind" && o_.attach_events) {
      if (p.name == "window_publish") which = program::window_publish;
      if (p.name == "window_retire") which = program::window_retire;
      if (p.name == "window_free") which = program::window_free;
      if (p.name == "code_add") which = program::code_add;
    }
    // The SDK maps dynamic USDT objects itself: ld.so's _dl_debug_state never sees them.
    if (p.provider == "jitunwind" && p.name == "usdt_load") which = program::loader;
    if (p.name == "checkpoint" && o_.attach_checkpoints &&
        (o_.checkpoint_provider.empty() || o_.checkpoint_provider == p.provider)) {
      which = program::checkpoint;
    }
    if (!which) continue;
    auto r = bpf_.attach_usdt(*which, pid_, path, p.provider, p.name);
    if (!r) {
      warn("%s", r.error().message().c_str());
      continue;
    }
    ++stats_.probes_attached;
    detail("attached %s to USDT %s:%s in %s", to_string(*which), p.provider.c_str(), p.name.c_str(),
           path.c_str());
  }
}

void tracker::scan_objects() {
  auto maps = read_maps(pid_);
  if (!maps) return;
  std::set<object_key> seen;
  for (const mapping& m : maps.value()) {
    if (!m.executable || m.inode == 0 || m.shared_anonymous()) continue;  // JIT memory
    object_key key{m.dev, m.inode, m.start};
    seen.insert(key);
    if (objects_.count(key)) continue;
    objects_[key] = 0;
    auto obj = sym_.object_for(m);
    if (!obj) {
      ++stats_.objects_without;
      detail("%s: not an ELF object we can read", m.path.c_str());
      continue;
    }
    attach_object_probes(attach_path(pid_, m), *obj, m.dev, m.inode);
    auto bias = obj->load_bias(m.start, m.offset);
    if (!bias) {
      ++stats_.objects_without;
      continue;
    }
    // An object mapped in several executable parts (node: 3) is parsed once per scan; with the
    // cache, not at all once a run has converted it.
    auto build = [&]() -> result<native_table> {
      auto& parsed = parsed_[{m.dev, m.inode}];
      if (!parsed) parsed = collect_native_functions(*obj, o_.native);
      if (!*parsed) return parsed->error();
      return lay_out_native_table(parsed->value(), obj->path(), *bias, m.start, m.end);
    };
    bool cached = false;
    auto t =
        o_.cache ? o_.cache->get(*obj, *bias, m.start, m.end, o_.native, build, &cached) : build();
    if (!t) {
      ++stats_.objects_without;
      detail("%s: %s (frame-pointer fallback there)", m.path.c_str(), t.error().message().c_str());
      continue;
    }
    for (const std::string& p : t->problems) detail("%s: %s", m.path.c_str(), p.c_str());
    range_info info;
    info.source = t->sframe_functions ? table_source::sframe : table_source::eh_frame;
    info.label = m.path;
    info.asid = o_.asid;
    const size_t nrows = t->rows.rows.size();
    auto uid = tables_.add(std::move(t->rows), info);
    if (!uid) {
      warn("%s", uid.error().message().c_str());
      continue;
    }
    objects_[key] = uid.value();
    ++stats_.objects;
    if (t->sframe_functions) {
      ++stats_.objects_sframe;
      if (t->sframe_version == 1) ++stats_.objects_sframe_v1;
      if (t->sframe_version == 2) ++stats_.objects_sframe_v2;
      if (t->sframe_version == 3) ++stats_.objects_sframe_v3;
    }
    // Only the tables the object has (no "0 functions from .sframe v0" for an object without).
    std::string from;
    if (t->sframe_version != 0)
      from = format("%zu functions from .sframe v%d", t->sframe_functions, t->sframe_version);
    if (t->eh_frame_functions != 0 || obj->image().find_section(".eh_frame") != nullptr) {
      from += format("%s%zu %sfrom .eh_frame", from.empty() ? "" : ", ", t->eh_frame_functions,
                     from.empty() ? "functions " : "");
    }
    detail("%s: %zu rows (%s%s)", m.path.c_str(), nrows, from.c_str(),
           cached ? "; converted rows from the table cache" : "");
  }
  parsed_.clear();  // the copies are in the BPF tables now
  for (auto it = objects_.begin(); it != objects_.end();) {
    if (!seen.count(it->first)) {
      if (it->second) tables_.remove(it->second);
      it = objects_.erase(it);
    } else {
      ++it;
    }
  }
}

void tracker::sync_registry() {
  if (!o_.jit) return;
  if (!reader_) {
    jitunwind::remote::read_options options;
    options.only_used_sframe = true;  // a claimed size over untouched memory costs its header
    // The walker follows at most this many (its window map); a registry claiming a million
    // windows costs the snapshot of these, not of all.
    options.max_windows = max_windows_followed;
    auto r = registry_reader::open(pid_, options);
    if (!r) {
      detail("no jitunwind registry in process %d yet: %s", pid_, r.error().message().c_str());
      return;
    }
    reader_.emplace(std::move(r.value()));
    for (const auto& loc : reader_->registries()) {
      note("registry found in %s at %s", loc.object_path.c_str(), hex(loc.address).c_str());
    }
  }
  auto snap = reader_->read();
  if (!snap) {
    detail("registry of process %d: %s", pid_, snap.error().message().c_str());
    return;
  }
  ++stats_.registry_reads;
  // Entries the reader left out (stuck mid-update, impossible values): said once each; the
  // other windows are used.
  for (const auto& k : snap->skipped) {
    if (!skipped_.emplace(k.registry_address, k.slot, k.reason).second) continue;
    stats_.slots_skipped += k.entries;
    warn("registry at %s: entry %u skipped: %s", hex(k.registry_address).c_str(), k.slot,
         k.reason.c_str());
  }
  std::set<uint64_t> present;
  for (const window_record& w : snap->windows) {
    if (w.state == window_state::free) continue;
    present.insert(w.window_id);
    auto it = windows_.find(w.window_id);
    if (it != windows_.end() && it->second.generation == w.generation) {
      it->second.state = w.state;
      continue;
    }
    if (rejected_.count({w.window_id, w.generation})) continue;
    // What following a window costs jitwalk is charged: a registry of a million windows stops
    // at the budget, not at the machine's memory.
    if (!track_charge_.grow(o_.budget, per_window_cost, "the target's JIT windows")) {
      if (stats_.windows_untracked++ == 0)
        warn("memory budget reached: JIT windows beyond %zu are not followed",
             windows_.size() + rejected_.size());
      continue;
    }
    load_window(w);
  }
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (!present.count(it->first)) {
      if (it->second.uid) tables_.remove(it->second.uid);
      dropped_at_commit_[it->first] = tables_.stats().commits;
      it = windows_.erase(it);
      window_index_dirty_ = true;
    } else {
      ++it;
    }
  }
  track_charge_.shrink_to(per_window_cost * (windows_.size() + rejected_.size()));
}

void tracker::load_window(const window_record& w) {
  window_info info;
  info.id = w.window_id;
  info.generation = w.generation;
  info.text_start = w.text_start;
  info.text_size = w.text_size;
  info.state = w.state;
  // Whatever we knew about the window is replaced (the SDK's contract for a new generation).
  if (auto old = windows_.find(w.window_id); old != windows_.end() && old->second.uid) {
    tables_.remove(old->second.uid);
  }
  windows_[w.window_id] = info;
  window_index_dirty_ = true;
  if (w.sframe_size == 0) return;  // no code described yet
  if (w.code_abi != jitunwind::abi::amd64) {
    reject_window(w,
                  format("ABI %s (this walker unwinds AMD64)", jitunwind::to_string(w.code_abi)));
    return;
  }
  // The copy is charged while it is converted (its rows then live in the BPF tables).
  jitunwind::detail::budget_charge copy_charge;
  if (w.sframe_size <= jitunwind::remote::read_options{}.max_sframe_size) {
    auto c = jitunwind::detail::budget_charge::take(
        o_.budget, w.sframe_size,
        format("the SFrame of window %llu", static_cast<unsigned long long>(w.window_id)));
    if (!c) {
      reject_window(w, c.error().message());
      return;
    }
    copy_charge = std::move(*c);
  }
  const auto bytes = read_window_sframe(w);
  if (!bytes) return;
  auto rows = window_rows(w, *bytes);
  if (!rows) {
    if (rows.error().code() == errc::not_found) return;  // empty section: nothing to unwind
    reject_window(w, rows.error().message());
    return;
  }
  range_info ri;
  ri.source = table_source::jit;
  ri.window_id = w.window_id;
  ri.generation = w.generation;
  ri.asid = o_.asid;
  ri.label = format("window %llu generation %llu", static_cast<unsigned long long>(w.window_id),
                    static_cast<unsigned long long>(w.generation));
  const size_t nrows = rows->rows.size();
  auto uid = tables_.add(std::move(rows.value()), ri);
  if (!uid) {
    reject_window(w, uid.error().message());
    return;
  }
  windows_[w.window_id].uid = uid.value();
  uid_windows_[uid.value()] = {w.window_id, w.generation};
  newest_generation_ = std::max(newest_generation_, w.generation);
  uint64_t& newest = max_loaded_gen_[w.window_id];
  newest = std::max(newest, w.generation);
  ++stats_.windows_loaded;
  detail("loaded %s: %s+%llu, %zu rows", ri.label.c_str(), hex(w.text_start).c_str(),
         static_cast<unsigned long long>(w.text_size), nrows);
}

// The window's SFrame section; nothing if it was rejected or went away while it was read.
std::optional<std::vector<uint8_t>> tracker::read_window_sframe(const window_record& w) {
  auto bytes = reader_->read_sframe(w);
  if (bytes) return std::move(bytes).value();
  const errc code = bytes.error().code();
  bool vanished = code == errc::bad_state;  // changed while we read it
  if (!vanished && code != errc::limit_exceeded && code != errc::malformed) {
    // Unreadable memory: either the runtime freed the window after our snapshot (a race, not
    // an error) or the registry points at nothing (reject). The registry tells which.
    vanished = true;
    if (auto again = reader_->read(); again) {
      for (const window_record& now : again->windows) {
        if (now.window_id == w.window_id && now.generation == w.generation &&
            now.state != window_state::free) {
          vanished = false;
        }
      }
    }
  }
  if (!vanished) {
    reject_window(w, bytes.error().message());
    return std::nullopt;
  }
  ++stats_.windows_vanished;
  detail("window %llu generation %llu changed before its SFrame could be read",
         static_cast<unsigned long long>(w.window_id),
         static_cast<unsigned long long>(w.generation));
  registry_dirty_ = true;  // a newer generation is coming (or the window is gone)
  windows_.erase(w.window_id);
  window_index_dirty_ = true;
  return std::nullopt;
}

// The rows of a window's SFrame section, every function inside the window's text (strict: a
// window that describes code elsewhere is refused, not trimmed).
result<range_rows> tracker::window_rows(const window_record& w,
                                        const std::vector<uint8_t>& sframe) {
  auto fns = sframe_functions(sframe, w.sframe_address, table_source::jit, nullptr, true);
  if (!fns) return fns.error();
  flatten_limits lim;
  lim.lo = w.text_start;
  lim.hi = w.text_start + w.text_size;
  lim.strict = true;
  if (lim.hi < lim.lo) return error(errc::malformed, "text range wraps around");
  return flatten(std::move(fns.value()), 0, lim);
}

void tracker::reject_window(const window_record& w, const std::string& why) {
  rejected_.insert({w.window_id, w.generation});
  ++stats_.windows_rejected;
  std::string msg = format("window %llu (generation %llu, text %s+%llu): SFrame rejected: %s",
                           static_cast<unsigned long long>(w.window_id),
                           static_cast<unsigned long long>(w.generation), hex(w.text_start).c_str(),
                           static_cast<unsigned long long>(w.text_size), why.c_str());
  // A target can publish any number of bad windows: the first ones are named, the rest
  // counted (in the summary).
  if (rejections_.size() < max_rejections_named) {
    warn("%s", msg.c_str());
    rejections_.push_back(std::move(msg));
  } else if (rejections_.size() == max_rejections_named) {
    warn("more windows rejected: counted in the summary only");
    rejections_.push_back("...");
  }
}

void tracker::drop_window(uint64_t id, uint64_t up_to_generation, uint64_t time) {
  auto it = windows_.find(id);
  if (it == windows_.end() || it->second.generation > up_to_generation) return;
  if (it->second.uid) {
    tables_.remove(it->second.uid);
    freed_at_[it->second.uid] = time;
  }
  dropped_at_commit_[id] = tables_.stats().commits;
  windows_.erase(it);
  window_index_dirty_ = true;
  ++stats_.windows_freed;
}

void tracker::on_event(const void* data, size_t size) {
  if (size < sizeof(jw_event_header)) return;
  jw_event_header h;
  std::memcpy(&h, data, sizeof h);
  switch (h.type) {
    case JW_EV_WINDOW_PUBLISH:
    case JW_EV_WINDOW_RETIRE:
    case JW_EV_WINDOW_FREE: {
      if (size < sizeof(jw_window_event)) return;
      jw_window_event e;
      std::memcpy(&e, data, sizeof e);
      bpf_window_ids_.insert(e.id);
      if (h.type == JW_EV_WINDOW_PUBLISH) {
        newest_generation_ = std::max<uint64_t>(newest_generation_, e.generation);
        // One registry read per batch of events (flush), however many windows were published:
        // a runtime that churns windows publishes thousands per second. A checkpoint after a
        // publish in the same batch is impossible with --sync-tables (the target is stopped at
        // the publish until flush), which is what verify uses.
        registry_dirty_ = true;
      } else if (h.type == JW_EV_WINDOW_RETIRE) {
        auto it = windows_.find(e.id);
        if (it != windows_.end() && it->second.generation <= e.generation) {
          it->second.state = window_state::retired;
        }
      } else {
        drop_window(e.id, e.generation, h.time_ns);
      }
      break;
    }
    case JW_EV_CODE_ADD: {
      if (size < sizeof(jw_code_event)) return;
      const auto* e = static_cast<const jw_code_event*>(data);
      jit_names::entry n;
      n.start = e->addr;
      n.size = e->size;
      n.name.assign(e->name, strnlen(e->name, sizeof e->name));
      n.time = h.time_ns;
      n.from = jit_names::origin::event;
      n.window_id = e->window_id;
      n.generation = e->generation;
      newest_generation_ = std::max<uint64_t>(newest_generation_, e->generation);
      if (n.size != 0) {
        // The newest code_add wins wherever it covers: drop what it overlaps.
        const uint64_t end = n.start + n.size;
        auto it = live_names_.lower_bound(n.start);
        if (it != live_names_.begin() && std::prev(it)->second.first > n.start) --it;
        while (it != live_names_.end() && it->first < end) it = live_names_.erase(it);
        live_names_.emplace(n.start, std::make_pair(end, n.name));
      }
      sym_.names().add(std::move(n));
      ++stats_.code_names;
      break;
    }
    case JW_EV_LOADER:
      // New objects may carry tables, probes, or (a dlopened SDK) a registry.
      scan_objects();
      sym_.refresh();
      if (!reader_) sync_registry();
      if (tables_.dirty()) {
        if (auto r = tables_.commit(); !r) warn("%s", r.error().message().c_str());
      }
      break;
    case JW_EV_CHECKPOINT: {
      if (size < sizeof(jw_checkpoint_event) || !checkpoint_handler) break;
      const auto* e = static_cast<const jw_checkpoint_event*>(data);
      const size_t need =
          sizeof(*e) + 8 * (size_t{e->truth_n} + e->fp_n) + 16 * size_t{e->walk_depth};
      if (need > size) {
        warn("checkpoint record of %zu bytes, %zu needed: ignored", size, need);
        break;
      }
      const auto* words = reinterpret_cast<const uint64_t*>(e + 1);
      checkpoint_record rec;
      rec.e = e;
      rec.truth = {words, e->truth_n};
      rec.fp = {words + e->truth_n, e->fp_n};
      rec.walk = {reinterpret_cast<const jw_frame*>(words + e->truth_n + e->fp_n), e->walk_depth};
      checkpoint_handler(rec);
      break;
    }
    default:
      break;
  }
  if (h.stopped) resume_ = true;
}

void tracker::flush() {
  if (registry_dirty_) {
    registry_dirty_ = false;
    sync_registry();
  }
  if (bpf_window_ids_.size() > o_.window_state_limit) prune_window_states();
  if (tables_.dirty()) {
    if (auto r = tables_.commit(); !r) warn("%s", r.error().message().c_str());
  }
  if (resume_) {
    resume_ = false;
    kill(pid_, SIGCONT);
  }
}

// An entry of jw_windows can go once no index half can still hold a range of that window (two
// table commits after its last range was removed) and the entry's freed mark covers every
// generation ever loaded: then a walk could only meet newer generations, which the entry does
// not concern. The BPF handlers recreate it at the window's next event.
void tracker::prune_window_states() {
  const size_t commits = tables_.stats().commits;
  for (auto it = bpf_window_ids_.begin(); it != bpf_window_ids_.end();) {
    const uint64_t id = *it;
    auto dropped = dropped_at_commit_.find(id);
    if (windows_.count(id) || dropped == dropped_at_commit_.end() ||
        commits < dropped->second + 2) {
      ++it;
      continue;
    }
    const uint64_t key = id ^ (uint64_t{o_.asid} << JW_WINDOW_ASID_SHIFT);
    auto state = bpf_.read_window_state(key);
    const uint64_t newest = max_loaded_gen_.count(id) ? max_loaded_gen_[id] : 0;
    if (state && state->freed_gen < newest) {
      ++it;
      continue;
    }
    if (state) bpf_.delete_window_state(key);
    ++stats_.window_states_pruned;
    dropped_at_commit_.erase(dropped);
    it = bpf_window_ids_.erase(it);
  }
}

const window_info* tracker::window_at(uint64_t pc) const {
  if (window_index_dirty_) {
    window_index_.clear();
    for (const auto& [id, w] : windows_) window_index_.emplace_back(w.text_start, &w);
    std::sort(window_index_.begin(), window_index_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    window_index_dirty_ = false;
  }
  auto it = std::upper_bound(window_index_.begin(), window_index_.end(), pc,
                             [](uint64_t v, const auto& e) { return v < e.first; });
  // Windows do not overlap, except briefly when freed memory is reused before the free event
  // is processed: look at a few candidates below pc.
  for (int n = 0; n < 4 && it != window_index_.begin(); ++n) {
    --it;
    const window_info& w = *it->second;
    if (pc - w.text_start < w.text_size) return &w;
  }
  return nullptr;
}

jit_when tracker::naming(const jw_frame& f) const {
  jit_when when;
  if (f.stamp != 0) {
    // The walker keeps the low 32 bits of a generation: the newest generation seen with those
    // bits (generations only grow, and a stamp is never newer than what was announced).
    const uint64_t high = newest_generation_ & ~uint64_t{0xffffffff};
    uint64_t g = high | f.stamp;
    if (g > newest_generation_ && high != 0) g -= uint64_t{1} << 32;
    when.generation = g;
    return when;
  }
  const uint32_t uid = JW_META_UID(f.meta);
  if (uid == 0) return when;
  when.before = freed_time(uid);
  if (auto it = uid_windows_.find(uid); it != uid_windows_.end()) {
    when.window_id = it->second.first;
    when.generation = it->second.second;
  }
  return when;
}

const std::string* tracker::live_name(uint64_t pc) const {
  auto it = live_names_.upper_bound(pc);
  if (it == live_names_.begin()) return nullptr;
  --it;
  return pc < it->second.first ? &it->second.second : nullptr;
}

uint64_t tracker::freed_time(uint32_t uid) const {
  auto it = freed_at_.find(uid);
  return it == freed_at_.end() ? UINT64_MAX : it->second;
}

}  // namespace jitwalk
