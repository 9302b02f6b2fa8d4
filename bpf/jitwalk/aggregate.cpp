#include "jitwalk/aggregate.hpp"

#include <time.h>

#include <cerrno>
#include <set>

namespace jitwalk {

const char* stop_name(unsigned stop) noexcept {
  switch (stop) {
    case JW_STOP_OUTERMOST:
      return "outermost frame";
    case JW_STOP_FP_END:
      return "end of frame-pointer chain";
    case JW_STOP_RA_ZERO:
      return "return address 0";
    case JW_STOP_DEPTH:
      return "depth limit";
    case JW_STOP_READ:
      return "unreadable stack";
    case JW_STOP_NO_PROGRESS:
      return "stack did not move up";
    case JW_STOP_BAD_FP:
      return "bad frame pointer";
    case JW_STOP_TABLE_RACE:
      return "table update race";
    case JW_STOP_NO_USER:
      return "no user context";
    case JW_STOP_UNSUPPORTED_RULE:
      return "unwind rule the walker cannot follow (SFrame v3 FLEX, needs another register)";
    case JW_STOP_ROWS_PENDING:
      return "JIT code published a moment ago, rows not loaded yet";
    default:
      return "?";
  }
}

const char* stop_key(unsigned stop) noexcept {
  static_assert(JW_STOP_COUNT_ == 12, "a key for every stop reason");
  static constexpr const char* keys[JW_STOP_COUNT_] = {
      "none",   "outermost",  "fp_end",  "ra_zero",          "depth",       "read", "no_progress",
      "bad_fp", "table_race", "no_user", "unsupported_rule", "rows_pending"};
  return stop < JW_STOP_COUNT_ ? keys[stop] : "?";
}

std::string stop_counts(const std::array<uint64_t, JW_STOP_COUNT_>& by_stop) {
  std::string out;
  for (unsigned i = 1; i < JW_STOP_COUNT_; ++i) {
    if (i == JW_STOP_OUTERMOST || by_stop[i] == 0) continue;
    out += format("%s%llu %s", out.empty() ? "" : ", ", static_cast<unsigned long long>(by_stop[i]),
                  stop_name(i));
  }
  return out;
}

std::string step_counts(const walk_summary& sum) {
  static constexpr const char* sources[4] = {"JIT window tables", "native .sframe",
                                             "native .eh_frame", "frame-pointer fallback"};
  uint64_t tried_total = 0;
  for (size_t i = 0; i < 4; ++i) tried_total += sum.frames[i] + sum.failed[i];
  if (tried_total == 0) return {};
  std::string out = format("%llu tried: ", static_cast<unsigned long long>(tried_total));
  for (size_t i = 0; i < 4; ++i) {
    const uint64_t tried = sum.frames[i] + sum.failed[i];
    out += format("%s%.1f%% %s", i ? ", " : "", pct(tried, tried_total), sources[i]);
    if (sum.failed[i] != 0) {
      out += format(" (%llu failed, %.1f%% of its tries)",
                    static_cast<unsigned long long>(sum.failed[i]), pct(sum.failed[i], tried));
    }
  }
  if (sum.sp_ra != 0) {
    out += format(
        "; %llu frameless leaves' callers from the return address at the stack pointer "
        "(marked %s)",
        static_cast<unsigned long long>(sum.sp_ra), sp_mark);
  }
  if (sum.no_step != 0) {
    out += format("; %llu of %llu walks made no step", static_cast<unsigned long long>(sum.no_step),
                  static_cast<unsigned long long>(sum.samples));
  }
  return out;
}

std::vector<std::string> walk_accounting(const walk_summary& sum) {
  auto row = [&](const char* what, uint64_t n, const std::string& note) {
    return format("  %-38s %10llu %6.1f%%%s", what, static_cast<unsigned long long>(n),
                  pct(n, sum.samples), note.empty() ? "" : ("   " + note).c_str());
  };
  const uint64_t pending = sum.by_stop[JW_STOP_ROWS_PENDING];
  std::vector<std::string> out;
  out.push_back(format("%-40s %10s", "walks", "samples"));
  out.push_back(row("to the root, every step by tables", sum.root_tables_only, ""));
  out.push_back(row("to the root, with frame-pointer steps", sum.root - sum.root_tables_only,
                    sum.root > sum.root_tables_only
                        ? format("frames found by them end in %s", fp_mark)
                        : std::string()));
  out.push_back(row("cut", sum.samples - sum.root,
                    pending ? format("%llu at JIT code whose rows were not loaded yet "
                                     "(--sync-tables waits for them)",
                                     static_cast<unsigned long long>(pending))
                            : std::string()));
  out.push_back(row("used the frame-pointer fallback", sum.fallback, ""));
  return out;
}

bool is_fp_method(unsigned method) noexcept {
  return method == JW_M_FP || method == JW_M_FP_GAP || method == JW_M_FP_STALE;
}

bool is_entry_function(const std::string& name) noexcept {
  static const std::set<std::string> entries = {"_start",
                                                "__libc_start_main",
                                                "__libc_start_call_main",
                                                "__libc_start_main_impl",
                                                "start_thread",
                                                "clone",
                                                "clone3",
                                                "__clone",
                                                "__clone3",
                                                "__clone_internal",
                                                "thread_start",
                                                "_dl_start_user",
                                                "__start"};
  return entries.count(name) != 0;
}

aggregator::aggregator(bpf_session& bpf, symbolizer& sym, const tracker& tr, profile_data& out,
                       aggregate_options o)
    : bpf_(bpf), sym_(&sym), tr_(&tr), out_(out), o_(o) {}

const std::string& aggregator::thread_name(uint32_t tgid, uint32_t tid) {
  const auto key = std::make_pair(tid ? tid : tgid, asid_);
  auto it = thread_names_.find(key);
  if (it != thread_names_.end()) return it->second;
  if (tree_)
    return thread_names_.emplace(key, tree_->label(tgid, tid, asid_, o_.merge_processes))
        .first->second;
  std::string name = read_comm(static_cast<pid_t>(tgid), static_cast<pid_t>(tid));
  if (name == "?" && !out_.process_name.empty()) name = out_.process_name;
  if (tid) name += format("/%u", tid);
  return thread_names_.emplace(key, name).first->second;
}

namespace {

// CLOCK_MONOTONIC, the clock of jitdump timestamps.
uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

uint32_t aggregator::user_frame(const jw_frame& frame, bool caller, bool fp_found, bool sp_found,
                                bool* entry, uint32_t tgid) {
  const uint64_t pc = frame.pc;
  const jit_when when = tr_->naming(frame);
  auto key = std::make_tuple(pc, caller, fp_found, sp_found, when, asid_);
  if (auto it = frame_cache_.find(key); it != frame_cache_.end()) {
    *entry = it->second.entry;
    return it->second.id;
  }
  frame_desc d = sym_->user_frame(pc, caller, when);
  profile_frame f = to_profile_frame(d, pc, caller);
  f.fp_found = fp_found;
  f.sp_found = sp_found;
  uint32_t id = out_.intern(f);
  *entry = is_entry_function(d.name);
  if (d.kind == frame_kind::unknown && !late_.has(id)) {
    // The name may arrive later (a jitdump written through a buffer, a perf map appended
    // after the code ran): kept raw, named by resolve_late(). Code loaded after this moment
    // cannot be what ran in the sample.
    late_names::pending_frame p;
    // With a process tree, names come from the frame's address space (one symbolizer each).
    p.tgid = tree_ ? asid_ : tgid;
    p.pc = pc;
    p.return_address = caller;
    p.when = when;
    p.when.before = std::min(when.before, monotonic_ns());
    p.first = d;
    late_.add(id, std::move(p));
  }
  frame_cache_.emplace(key, cached_frame{id, *entry});
  return id;
}

const aggregator::known_stack& aggregator::know(uint64_t hash, const jw_stack* st, uint32_t tgid) {
  known_stack k;
  if (st == nullptr) {
    k.stop = JW_STOP_READ;  // evicted before we saw it (should not happen: we delete only ours)
    return stacks_.emplace(hash, std::move(k)).first->second;
  }
  bool last_entry = false;
  const uint32_t depth = std::min<uint32_t>(st->depth, JW_MAX_DEPTH);
  k.frames.reserve(depth);
  // The step to this frame was the frame-pointer fallback / the return address at SP.
  bool fp_step = false, sp_step = false;
  for (uint32_t i = 0; i < depth; ++i) {
    const uint32_t meta = st->frames[i].meta;
    k.frames.push_back(user_frame(st->frames[i], i > 0, fp_step, sp_step, &last_entry, tgid));
    const unsigned method = JW_META_METHOD(meta), kind = JW_META_KIND(meta);
    fp_step = i + 1 < depth && is_fp_method(method);
    sp_step = i + 1 < depth && method == JW_M_SP_RA;
    size_t slot = 4;
    if (i + 1 < depth || method != JW_M_END) {
      if (method == JW_M_TABLE) {
        slot = kind == JW_RANGE_JIT ? 0 : kind == JW_RANGE_SFRAME ? 1 : 2;
      } else {
        slot = 3;
        if (method == JW_M_SP_RA) ++k.sp_ra;
      }
    }
    ++k.steps[slot];
  }
  k.stop = st->stop;
  // Reaching the thread's or process's entry function counts as the root even when the walk
  // then stops on something else (glibc's start code has no frame pointer to follow).
  k.root = st->stop == JW_STOP_OUTERMOST || (last_entry && st->stop != JW_STOP_TABLE_RACE);
  k.fallback = st->fallback != 0;
  k.stale = st->stale != 0;
  if (!k.root && depth > 0 && st->end_method != 0) {
    const unsigned kind = JW_META_KIND(st->frames[depth - 1].meta);
    k.failed = st->end_method != JW_M_TABLE ? 3
               : kind == JW_RANGE_JIT       ? 0
               : kind == JW_RANGE_SFRAME    ? 1
                                            : 2;
  }
  return stacks_.emplace(hash, std::move(k)).first->second;
}

void aggregator::drain() {
  std::vector<std::pair<jw_count_key, uint64_t>> counts;
  bpf_.drain_counts([&](const jw_count_key& k, uint64_t c) { counts.emplace_back(k, c); });
  if (counts.empty()) return;
  if (tree_) {
    tree_->refresh_symbols();
  } else {
    sym_->refresh();
  }
  std::set<uint64_t> fetched;
  for (const auto& [key, count] : counts) {
    if (tree_) {
      asid_ = key.asid;
      sym_ = &tree_->sym(key.asid);
      tr_ = &tree_->track(key.asid);
      tree_->count(key.tgid, key.asid, count);
    }
    auto it = stacks_.find(key.ustack);
    const known_stack* k = it == stacks_.end() ? nullptr : &it->second;
    if (k == nullptr) {
      auto st = bpf_.read_stack(key.ustack);
      k = &know(key.ustack, st ? &*st : nullptr, key.tgid);
      if (st) fetched.insert(key.ustack);
    }
    std::vector<uint32_t> frames;
    if (key.kstack >= 0) {
      for (uint64_t pc : bpf_.read_kernel_stack(key.kstack)) {
        auto kc = kernel_cache_.find(pc);
        if (kc == kernel_cache_.end()) {
          frame_desc d = sym_->kernel_frame(pc);
          profile_frame f;
          f.name = d.name;
          f.kind = frame_kind::kernel;
          f.address = pc;
          f.module = d.module;
          kc = kernel_cache_.emplace(pc, out_.intern(f)).first;
        }
        frames.push_back(kc->second);
      }
    } else if (o_.kernel && key.kstack != -EFAULT) {
      // -EFAULT is an empty kernel stack: the sample hit user mode, nothing was lost. Other
      // errors (a full or colliding stack map) lose the kernel part of the stack.
      summary_.kernel_stack_lost += count;
    }
    frames.insert(frames.end(), k->frames.begin(), k->frames.end());
    for (size_t i = 0; i < k->steps.size(); ++i) summary_.frames[i] += k->steps[i] * count;
    summary_.sp_ra += k->sp_ra * count;
    if (k->failed >= 0) summary_.failed[static_cast<size_t>(k->failed)] += count;
    if (!k->root && k->steps[0] + k->steps[1] + k->steps[2] + k->steps[3] == 0)
      summary_.no_step += count;
    summary_.samples += count;
    if (k->root) summary_.root += count;
    if (k->root && !k->fallback) summary_.root_tables_only += count;
    if (k->fallback) summary_.fallback += count;
    if (k->stale) summary_.stale += count;
    if (k->stop < JW_STOP_COUNT_) summary_.by_stop[k->stop] += count;
    if (!k->root && o_.mark_cut) {
      profile_frame marker;
      marker.name = format("[cut: %s]", stop_name(k->stop));
      marker.kind = frame_kind::unknown;
      frames.push_back(out_.intern(marker));
    }
    out_.add(o_.per_thread ? thread_name(key.tgid, key.tid) : thread_name(key.tgid, 0),
             std::move(frames), count);
  }
  // Our copies are authoritative now: free the BPF entries for new stacks.
  for (uint64_t h : fetched) bpf_.delete_stack(h);
}

late_summary aggregator::resolve_late() {
  std::vector<uint32_t> new_id;
  // Pending frames are keyed by tgid, or with a process tree by address space (user_frame).
  const late_summary ls = late_.resolve(
      out_, [&](uint32_t key) -> symbolizer& { return tree_ ? tree_->sym(key) : *sym_; },
      o_.rename_late, o_.raw_addresses, &new_id);
  // Ids held for later drains follow the rebuild.
  for (auto& [hash, k] : stacks_)
    for (uint32_t& id : k.frames) id = new_id[id];
  for (auto& [key, c] : frame_cache_) c.id = new_id[c.id];
  for (auto& [pc, id] : kernel_cache_) id = new_id[id];
  return ls;
}

}  // namespace jitwalk
