#include "jitwalk/process_tree.hpp"

#include <jitunwind/toolkit/terminal_text.hpp>
#include "jitwalk/proc.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <vector>

namespace jitwalk {

process_tree::process_tree(bpf_session& bpf, table_store& tables, process_tree_options o)
    : bpf_(bpf), tables_(tables), o_(std::move(o)) {}

process_tree::~process_tree() = default;

result<void> process_tree::add_root(pid_t pid, const std::string& comm, symbolizer& sym,
                                    tracker& tr, bool started_by_us) {
  space& s = spaces_[0];
  s.sym = &sym;
  s.tr = &tr;
  s.live = 1;
  root_ = static_cast<uint32_t>(pid);
  process_image& img = image(static_cast<uint32_t>(pid), 0);
  img.comm = comm;
  live_[static_cast<uint32_t>(pid)] = 0;
  jw_task t{};
  t.asid = 0;
  t.flags = started_by_us ? JW_TASK_SKIP_EXEC : 0;
  return bpf_.follow(static_cast<uint32_t>(pid), t);
}

process_image& process_tree::image(uint32_t tgid, uint32_t asid) {
  process_image& img = images_[{tgid, asid}];
  img.pid = static_cast<pid_t>(tgid);
  img.asid = asid;
  return img;
}

// The process left its current address space (exit or exec). The space's rows leave the BPF
// index once no live process uses it; its symbolizer and tracker stay for naming.
void process_tree::leave(uint32_t tgid) {
  auto it = live_.find(tgid);
  if (it == live_.end()) return;
  const uint32_t asid = it->second;
  live_.erase(it);
  images_[{tgid, asid}].ended = true;
  auto sp = spaces_.find(asid);
  if (sp == spaces_.end() || --sp->second.live > 0) return;
  tables_.remove_if([asid](const range_info& r) { return r.asid == asid; });
}

void process_tree::on_exec(uint32_t tgid, uint32_t asid, const std::string& comm, bool stopped) {
  leave(tgid);
  process_image& img = image(tgid, asid);
  img.comm = comm;
  live_[tgid] = asid;
  space& s = spaces_[asid];
  ++s.live;
  if (asid >= JW_ASID_NONE) {
    // The BPF side ran out of ids: the process is walked with frame pointers only.
    detail("process %u exec'd %s: no address space id left (frame pointers only)", tgid,
           comm.c_str());
  } else if (!s.tr) {
    const auto t0 = std::chrono::steady_clock::now();
    tracker_options to = o_.tracker;
    to.asid = asid;
    s.own_sym = std::make_unique<symbolizer>(static_cast<pid_t>(tgid), o_.limits);
    s.own_tr = std::make_unique<tracker>(bpf_, tables_, *s.own_sym, static_cast<pid_t>(tgid), to);
    s.sym = s.own_sym.get();
    s.tr = s.own_tr.get();
    if (tgid == root_) {
      // verify's checkpoints continue in the program the target exec'd.
      s.tr->checkpoint_handler = spaces_.at(root_last_asid_).tr->checkpoint_handler;
      root_last_asid_ = asid;
    }
    // The new image is mapped (the executable and its loader): probes and tables go in before
    // its first instruction when the handler stopped it; objects it loads later arrive through
    // the loader hook, as for the target.
    if (auto r = s.tr->attach_loader(); !r) {
      detail("process %u (%s): %s (objects loaded later are not followed)", tgid, comm.c_str(),
             r.error().message().c_str());
    }
    s.tr->scan_objects();
    s.tr->sync_registry();
    s.tr->flush();
    s.sym->refresh();
    detail(
        "process %u exec'd %s: address space %u, its tables and probes in place in %.0f ms", tgid,
        comm.c_str(), asid,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (stopped) kill(static_cast<pid_t>(tgid), SIGCONT);
}

void process_tree::on_event(const void* data, size_t size) {
  if (size < sizeof(jw_event_header)) return;
  jw_event_header h;
  std::memcpy(&h, data, sizeof h);
  if (h.type == JW_EV_FORK || h.type == JW_EV_EXEC || h.type == JW_EV_EXIT) {
    if (size < sizeof(jw_task_event)) return;
    jw_task_event e;
    std::memcpy(&e, data, sizeof e);
    const std::string comm(e.comm, strnlen(e.comm, sizeof e.comm));
    if (h.type == JW_EV_FORK) {
      process_image& img = image(h.tgid, e.asid);
      img.parent = static_cast<pid_t>(e.parent_tgid);
      img.comm = comm;
      live_[h.tgid] = e.asid;
      ++spaces_[e.asid].live;
      detail("process %u forked %u", e.parent_tgid, h.tgid);
    } else if (h.type == JW_EV_EXEC) {
      on_exec(h.tgid, e.asid, comm, h.stopped != 0);
    } else {
      leave(h.tgid);
    }
    return;
  }
  // Probes are attached per process: an event comes from the process owning its space's
  // tracker. Anything else (a process no longer followed) is only let go.
  auto lv = live_.find(h.tgid);
  if (lv != live_.end()) {
    space& s = spaces_[lv->second];
    if (s.tr && s.tr->pid() == static_cast<pid_t>(h.tgid)) {
      s.tr->on_event(data, size);
      return;
    }
  }
  if (h.stopped) kill(static_cast<pid_t>(h.tgid), SIGCONT);
}

void process_tree::flush() {
  for (auto& [asid, s] : spaces_) {
    if (s.tr) s.tr->flush();
  }
}

void process_tree::sync_registry() {
  for (const auto& [tgid, asid] : live_) {
    space& s = spaces_[asid];
    if (s.tr && s.tr->pid() == static_cast<pid_t>(tgid)) s.tr->sync_registry();
  }
}

void process_tree::resume_all() {
  for (const auto& [tgid, asid] : live_) kill(static_cast<pid_t>(tgid), SIGCONT);
}

void process_tree::refresh_symbols() {
  for (auto& [asid, s] : spaces_) {
    if (s.sym && s.live > 0) s.sym->refresh();
  }
}

symbolizer& process_tree::sym(uint32_t asid) {
  auto it = spaces_.find(asid);
  if (it == spaces_.end() || !it->second.sym) return *spaces_.at(0).sym;
  return *it->second.sym;
}

const tracker& process_tree::track(uint32_t asid) const {
  auto it = spaces_.find(asid);
  if (it == spaces_.end() || !it->second.tr) return *spaces_.at(0).tr;
  return *it->second.tr;
}

std::string process_tree::label(uint32_t tgid, uint32_t tid, uint32_t asid, bool merge) {
  process_image& img = image(tgid, asid);
  if (img.comm.empty()) img.comm = read_comm(static_cast<pid_t>(tgid));
  std::string l = img.comm;  // raw: the writers make names safe for their formats
  if (!merge) l += format("-%u", tgid);
  if (tid) l += format("/%u", tid);
  return l;
}

void process_tree::count(uint32_t tgid, uint32_t asid, uint64_t n) {
  image(tgid, asid).samples += n;
}

size_t process_tree::processes_sampled(pid_t except) const {
  std::set<uint32_t> pids;
  for (const auto& [key, img] : images_) {
    if (img.samples && key.first != static_cast<uint32_t>(except)) pids.insert(key.first);
  }
  return pids.size();
}

tracker_stats process_tree::total_stats() const {
  tracker_stats t;
  for (const auto& [asid, sp] : spaces_) {
    if (!sp.tr) continue;
    const tracker_stats& s = sp.tr->stats();
    t.objects += s.objects;
    t.objects_sframe += s.objects_sframe;
    t.objects_sframe_v1 += s.objects_sframe_v1;
    t.objects_sframe_v2 += s.objects_sframe_v2;
    t.objects_sframe_v3 += s.objects_sframe_v3;
    t.objects_without += s.objects_without;
    t.windows_loaded += s.windows_loaded;
    t.windows_rejected += s.windows_rejected;
    t.windows_freed += s.windows_freed;
    t.windows_vanished += s.windows_vanished;
    t.slots_skipped += s.slots_skipped;
    t.windows_untracked += s.windows_untracked;
    t.window_states_pruned += s.window_states_pruned;
    t.registry_reads += s.registry_reads;
    t.probes_attached += s.probes_attached;
    t.code_names += s.code_names;
  }
  return t;
}

std::vector<process_image> process_tree::sampled() const {
  std::vector<process_image> out;
  for (const auto& [key, img] : images_) {
    if (img.samples) out.push_back(img);
  }
  std::sort(out.begin(), out.end(), [](const process_image& a, const process_image& b) {
    return a.samples != b.samples ? a.samples > b.samples : a.pid < b.pid;
  });
  return out;
}

std::string process_tree::summary(uint64_t not_followed, uint64_t exiting) {
  const std::vector<process_image> images = sampled();
  std::vector<const process_image*> sampled;
  for (const process_image& img : images) sampled.push_back(&img);
  std::set<uint32_t> followed;
  for (const auto& [key, img] : images_) followed.insert(key.first);
  size_t threads = 0;
  for (const auto& [tid, tgid] : bpf_.sampled_threads()) threads += followed.count(tgid);
  std::string out = format("%zu process%s (%zu thread%s) sampled", processes_sampled(),
                           processes_sampled() == 1 ? "" : "es", threads, threads == 1 ? "" : "s");
  const size_t shown = std::min<size_t>(sampled.size(), 6);
  for (size_t i = 0; i < shown; ++i) {
    const process_image& img = *sampled[i];
    out +=
        format("%s %s-%d %llu", i ? "," : ":", jitunwind::toolkit::terminal_text(img.comm).c_str(),
               img.pid, static_cast<unsigned long long>(img.samples));
  }
  if (sampled.size() > shown) out += format(", %zu more", sampled.size() - shown);
  out +=
      format("; %llu samples of tasks not followed", static_cast<unsigned long long>(not_followed));
  if (exiting != 0)
    out += format(" (and %llu of tasks already exiting, with no user stack left)",
                  static_cast<unsigned long long>(exiting));
  return out;
}

}  // namespace jitwalk
