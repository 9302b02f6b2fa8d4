// jitwalk verify: compare the BPF walk with the ground truth the example runtimes carry at every
// `checkpoint` probe (protocol: docs/ground-truth.md), side by side with the kernel's
// frame-pointer walk on the same events.
#include <signal.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "guarded/text.hpp"
#include "jitwalk/aggregate.hpp"
#include "jitwalk/cli.hpp"
#include "jitwalk/native_tables.hpp"

namespace jitwalk {

namespace {

struct tag_stats {
  uint64_t checkpoints = 0, exact = 0, fp_exact = 0, complete = 0;
  uint64_t max_truth = 0;
};

struct verify_state {
  uint64_t checkpoints = 0;
  uint64_t exact = 0, fp_exact = 0;
  uint64_t complete = 0, fp_complete = 0;
  uint64_t truth_frames = 0, found_frames = 0, fp_found_frames = 0;
  uint64_t invalid_truth = 0;
  uint64_t empty_truth_with_jit = 0;  // count 0 although the walk found JIT frames
  uint64_t stale_refusals = 0, stale_uses = 0, races = 0;
  uint64_t max_truth = 0;
  // Walks that named a JIT frame the ground truth does not have at that depth (a wrong frame,
  // not merely a walk that ended early).
  uint64_t wrong_walks = 0;
  std::array<uint64_t, JW_STOP_COUNT_> by_stop{};
  std::array<uint64_t, 5> steps{};
  std::array<uint64_t, 4> failed{};  ///< steps tried at the last frame that failed, by source
  std::map<uint64_t, uint64_t>
      fp_lost_at;  // index of the first ground-truth frame the FP walk missed
  std::map<int64_t, tag_stats> tags;
  std::vector<std::string> mismatches;
  std::vector<std::string> walks;  // --print-walks
  // Names: every walked JIT frame's PC, how jitwalk names it (tracker::naming) and the name of
  // the code live at the checkpoint (tracker::live_name), checked once all events are in.
  std::set<std::tuple<uint64_t, jit_when, std::string>> names_to_check;
  uint64_t named_frames = 0;
};

}  // namespace

int cmd_verify(int argc, char** argv) {
  cmdline::parsed a;
  if (int status = 0; !parse_command_line(verify_command, argc, argv, a, &status)) return status;
  run_options ro;
  ro.sync_tables = true;
  ro.tracker.attach_checkpoints = true;
  ro.max_depth = JW_MAX_DEPTH;  // ground truth goes up to 512 JIT frames
  if (std::string bad = read_shared_options(a, ro); !bad.empty())
    return usage_failure(verify_command, bad);
  ro.target.command = a.operands;
  if (ro.target.command.empty())
    return usage_failure(verify_command, "no command: -- COMMAND ARGS");
  const double min_match = a.decimal("min-match", 100.0);
  const size_t show = static_cast<size_t>(a.whole("show", 5));
  const size_t print_walks = static_cast<size_t>(a.whole("print-walks", 0));
  const bool per_tag = a.flag("per-tag");
  const std::string json_path = a.value("json").value_or("");
  ro.tracker.checkpoint_provider = a.value("provider").value_or(ro.tracker.checkpoint_provider);

  // An unwritable --json fails now, not after the whole run.
  if (!json_path.empty()) {
    if (auto r = check_output(json_path); !r) {
      report(r.error());
      return 1;
    }
  }
  install_stop_signals();
  auto started = run_session::start(ro);
  if (!started) {
    report(started.error());
    return 1;
  }
  run_session& s = *started.value();
  verify_state v;
  std::map<uint64_t, bool> is_main_cache;

  auto jit_pcs = [&](const std::vector<uint64_t>& pcs) {
    std::vector<uint64_t> out;
    for (size_t i = 1; i < pcs.size(); ++i) {
      if (pcs[i] && s.track().window_at(pcs[i] - 1)) out.push_back(pcs[i]);
    }
    return out;
  };
  // "Complete": after the outermost JIT frame the walk goes on to `main`.
  auto reaches_main = [&](const std::vector<uint64_t>& pcs) {
    const size_t n = pcs.size();
    size_t last_jit = 0;
    bool any = false;
    for (size_t i = 1; i < n; ++i) {
      if (pcs[i] && s.track().window_at(pcs[i] - 1)) {
        last_jit = i;
        any = true;
      }
    }
    for (size_t i = any ? last_jit + 1 : 1; i < n; ++i) {
      auto it = is_main_cache.find(pcs[i]);
      if (it == is_main_cache.end()) {
        frame_desc d = s.sym().user_frame(pcs[i], true);
        it = is_main_cache.emplace(pcs[i], d.name == "main").first;
      }
      if (it->second) return true;
    }
    return false;
  };
  auto describe = [&](uint64_t pc, bool caller) {
    frame_desc d = s.sym().user_frame(pc, caller);
    return format("%s %s", hex(pc).c_str(), d.name.c_str());
  };

  s.track().checkpoint_handler = [&](const checkpoint_record& rec) {
    const jw_checkpoint_event& e = *rec.e;
    ++v.checkpoints;
    tag_stats& ts = v.tags[e.tag];
    ++ts.checkpoints;
    if (e.truth_count > JW_MAX_TRUTH || e.truth_read_err != 0 || e.truth_n != e.truth_count) {
      ++v.invalid_truth;
      if (v.mismatches.size() < show) {
        v.mismatches.push_back(
            format("checkpoint tag %lld: ground truth unreadable (count %llu, "
                   "read error %d)",
                   static_cast<long long>(e.tag), static_cast<unsigned long long>(e.truth_count),
                   e.truth_read_err));
      }
      return;
    }
    const size_t n = rec.truth.size();
    std::vector<uint64_t> truth(rec.truth.begin(), rec.truth.end());
    const size_t depth = rec.walk.size();
    std::vector<uint64_t> walk_pcs;
    for (const jw_frame& f : rec.walk) walk_pcs.push_back(f.pc);
    std::vector<uint64_t> fp_pcs(rec.fp.begin(), rec.fp.end());
    std::vector<uint64_t> ours = jit_pcs(walk_pcs);
    std::vector<uint64_t> fp = jit_pcs(fp_pcs);
    if (n == 0 && !ours.empty()) ++v.empty_truth_with_jit;
    v.truth_frames += n;
    v.max_truth = std::max<uint64_t>(v.max_truth, n);
    ts.max_truth = std::max<uint64_t>(ts.max_truth, n);
    auto common_prefix = [&](const std::vector<uint64_t>& got) {
      size_t k = 0;
      while (k < got.size() && k < truth.size() && got[k] == truth[k]) ++k;
      return k;
    };
    const size_t agree = common_prefix(ours);
    v.found_frames += agree;
    if (agree < ours.size()) ++v.wrong_walks;
    if (e.walk_stop < JW_STOP_COUNT_) ++v.by_stop[e.walk_stop];
    const size_t fp_prefix = common_prefix(fp);
    v.fp_found_frames += fp_prefix;
    const bool exact = ours == truth && e.walk_stop != JW_STOP_TABLE_RACE;
    const bool fp_exact = fp == truth;
    if (exact) {
      ++v.exact;
      ++ts.exact;
    }
    if (fp_exact) {
      ++v.fp_exact;
      ++ts.fp_exact;
    } else {
      ++v.fp_lost_at[fp_prefix];
    }
    if (reaches_main(walk_pcs)) {
      ++v.complete;
      ++ts.complete;
    }
    if (reaches_main(fp_pcs)) ++v.fp_complete;
    if (e.walk_stop == JW_STOP_TABLE_RACE) ++v.races;
    v.stale_refusals += e.walk_stale;
    for (size_t i = 1; i < depth; ++i) {
      const uint64_t pc = walk_pcs[i];
      if (pc == 0 || !s.track().window_at(pc - 1)) continue;
      if (const std::string* live = s.track().live_name(pc - 1)) {
        ++v.named_frames;
        v.names_to_check.emplace(pc, s.track().naming(rec.walk[i]), *live);
      }
    }
    for (size_t i = 0; i < depth; ++i) {
      const uint32_t meta = rec.walk[i].meta;
      const unsigned method = JW_META_METHOD(meta), kind = JW_META_KIND(meta);
      if (method == JW_M_TABLE) {
        v.steps[kind == JW_RANGE_JIT ? 0 : kind == JW_RANGE_SFRAME ? 1 : 2]++;
        // A stale use: rows of a window that had been freed before this event.
        if (kind == JW_RANGE_JIT && s.track().freed_time(JW_META_UID(meta)) < e.h.time_ns) {
          ++v.stale_uses;
        }
      } else if (method != JW_M_END) {
        v.steps[3]++;
      }
    }
    // The step that failed at the last frame, by the same source (the walk tried it and could
    // not reach the caller): shares of steps tried, not only of steps made.
    if (e.walk_end_method != 0 && e.walk_stop != JW_STOP_OUTERMOST && depth > 0) {
      const unsigned kind = JW_META_KIND(rec.walk[depth - 1].meta);
      v.failed[e.walk_end_method != JW_M_TABLE ? 3
               : kind == JW_RANGE_JIT          ? 0
               : kind == JW_RANGE_SFRAME       ? 1
                                               : 2]++;
    }
    const bool print_this = v.checkpoints <= print_walks;
    if ((!exact && v.mismatches.size() < show) || print_this) {
      std::string m = format(
          "%scheckpoint tag %lld (thread %u): ground truth %zu JIT frames, "
          "jitwalk found %zu (first %zu agree), walk ended by %s\n",
          exact ? "(exact) " : "", static_cast<long long>(e.tag), e.h.tid, n, ours.size(), agree,
          stop_name(e.walk_stop));
      m += "    ground truth (innermost first):\n";
      for (size_t i = 0; i < n && i < 12; ++i) m += "      " + describe(truth[i], true) + "\n";
      if (n > 12) m += format("      ... %zu more\n", n - 12);
      m += "    jitwalk walk (all frames):\n";
      for (size_t i = 0; i < depth; ++i) {
        const uint32_t meta = rec.walk[i].meta;
        const char* how = JW_META_METHOD(meta) == JW_M_TABLE      ? "table"
                          : JW_META_METHOD(meta) == JW_M_END      ? "end"
                          : JW_META_METHOD(meta) == JW_M_FP_STALE ? "fp (freed window)"
                                                                  : "fp";
        m += format("      #%-3zu %s  [%s%s]\n", i, describe(walk_pcs[i], i > 0).c_str(), how,
                    s.track().window_at(walk_pcs[i] - (i > 0)) ? ", jit" : "");
      }
      if (print_this && exact) {
        v.walks.push_back(std::move(m));
      } else {
        v.mismatches.push_back(std::move(m));
      }
    }
  };

  if (auto r = s.go(); !r) {
    report(r.error());
    return 1;
  }
  note("verifying pid %d (%s)", s.pid(), s.process_name().c_str());
  s.loop([&] {
    note("%.0f s: %llu checkpoints, %llu exact", s.elapsed_s(),
         static_cast<unsigned long long>(v.checkpoints), static_cast<unsigned long long>(v.exact));
  });
  int child_status = s.child() && s.child()->exited() ? s.child()->exit_code() : -1;
  if (s.child() && !s.child()->exited()) {
    s.child()->signal(SIGTERM);
    child_status = s.child()->wait();
  }

  // Named now, with every name the run announced: later code at the same addresses included.
  uint64_t misnamed = 0;
  std::vector<std::string> misnamed_examples;
  for (const auto& [pc, when, live] : v.names_to_check) {
    const frame_desc d = s.sym().user_frame(pc, true, when);
    if (d.name == live) continue;
    ++misnamed;
    if (misnamed_examples.size() < show)
      misnamed_examples.push_back(format("%s named '%s', the code there was '%s'", hex(pc).c_str(),
                                         d.name.c_str(), live.c_str()));
  }
  const auto bs = s.bpf().stats();
  const auto& tst = s.track().stats();
  std::printf("jitwalk verify: %s (pid %d): %llu checkpoints; %s\n",
              jitunwind::detail::terminal_text(s.process_name()).c_str(), s.pid(),
              static_cast<unsigned long long>(v.checkpoints), s.stop_reason().c_str());
  std::printf("  %-24s %-22s %-18s %s\n", "", "exact matches", "complete (main)",
              "JIT frames found");
  std::printf("  %-24s %8llu %6.1f%%        %8llu %6.1f%%   %llu of %llu\n",
              "jitwalk (SFrame walk)", static_cast<unsigned long long>(v.exact),
              pct(v.exact, v.checkpoints), static_cast<unsigned long long>(v.complete),
              pct(v.complete, v.checkpoints), static_cast<unsigned long long>(v.found_frames),
              static_cast<unsigned long long>(v.truth_frames));
  std::printf("  %-24s %8llu %6.1f%%        %8llu %6.1f%%   %llu of %llu\n",
              "kernel frame-pointer walk", static_cast<unsigned long long>(v.fp_exact),
              pct(v.fp_exact, v.checkpoints), static_cast<unsigned long long>(v.fp_complete),
              pct(v.fp_complete, v.checkpoints), static_cast<unsigned long long>(v.fp_found_frames),
              static_cast<unsigned long long>(v.truth_frames));
  if (!v.fp_lost_at.empty()) {
    std::string hist;
    for (const auto& [k, c] : v.fp_lost_at) {
      hist += format("%s%llu at JIT frame %llu", hist.empty() ? "" : ", ",
                     static_cast<unsigned long long>(c), static_cast<unsigned long long>(k));
    }
    std::printf("  kernel frame-pointer walk lost the stack: %s\n", hist.c_str());
  }
  if (const std::string stops = stop_counts(v.by_stop); !stops.empty())
    std::printf("  jitwalk walks ended by: %s\n", stops.c_str());
  std::printf("  jitwalk walks with a wrong JIT frame: %llu\n",
              static_cast<unsigned long long>(v.wrong_walks));
  std::printf("  deepest ground truth: %llu JIT frames\n",
              static_cast<unsigned long long>(v.max_truth));
  if (!per_tag && v.tags.size() > 20) {
    std::printf("  %zu distinct checkpoint tags (--per-tag lists them)\n", v.tags.size());
  }
  for (const auto& [tag, t] : (per_tag || v.tags.size() <= 20) ? v.tags : decltype(v.tags){}) {
    std::printf(
        "  tag %lld: %llu checkpoints, jitwalk %llu exact, kernel FP %llu exact, %llu "
        "complete, up to %llu JIT frames\n",
        static_cast<long long>(tag), static_cast<unsigned long long>(t.checkpoints),
        static_cast<unsigned long long>(t.exact), static_cast<unsigned long long>(t.fp_exact),
        static_cast<unsigned long long>(t.complete), static_cast<unsigned long long>(t.max_truth));
  }
  std::printf(
      "  jitwalk caller steps made (failed): %llu (%llu) JIT window tables, %llu (%llu) native "
      ".sframe, %llu (%llu) native .eh_frame, %llu (%llu) frame-pointer fallback\n",
      static_cast<unsigned long long>(v.steps[0]), static_cast<unsigned long long>(v.failed[0]),
      static_cast<unsigned long long>(v.steps[1]), static_cast<unsigned long long>(v.failed[1]),
      static_cast<unsigned long long>(v.steps[2]), static_cast<unsigned long long>(v.failed[2]),
      static_cast<unsigned long long>(v.steps[3]), static_cast<unsigned long long>(v.failed[3]));
  std::printf(
      "  JIT windows: %zu generations loaded, %zu rejected, %zu freed; freed-window rows "
      "refused %llu times; stale-table uses: %llu; table races: %llu\n",
      tst.windows_loaded, tst.windows_rejected, tst.windows_freed,
      static_cast<unsigned long long>(v.stale_refusals),
      static_cast<unsigned long long>(v.stale_uses), static_cast<unsigned long long>(v.races));
  std::printf("  JIT frame names: %llu checked (%zu distinct), %llu misnamed\n",
              static_cast<unsigned long long>(v.named_frames), v.names_to_check.size(),
              static_cast<unsigned long long>(misnamed));
  for (const std::string& m : misnamed_examples) std::printf("  MISNAMED %s\n", m.c_str());
  if (v.invalid_truth) {
    std::printf("  checkpoints with unreadable ground truth: %llu\n",
                static_cast<unsigned long long>(v.invalid_truth));
  }
  if (bs[JW_STAT_RINGBUF_FULL]) {
    std::printf("  events lost (ring buffer full): %llu\n",
                static_cast<unsigned long long>(bs[JW_STAT_RINGBUF_FULL]));
  }
  for (const std::string& m : v.walks) std::printf("  WALK %s\n", m.c_str());
  for (const std::string& m : v.mismatches) std::printf("  MISMATCH %s\n", m.c_str());

  const double match = pct(v.exact, v.checkpoints);
  std::string verdict;
  bool pass = true;
  if (v.checkpoints == 0) {
    pass = false;
    verdict = "no checkpoint was hit (is the command's checkpoint probe there?)";
  } else if (match + 1e-9 < min_match) {
    pass = false;
    verdict = format("%.2f%% exact < --min-match %g%%", match, min_match);
    if (v.empty_truth_with_jit == v.checkpoints) {
      verdict +=
          "; every checkpoint reported an empty ground truth while the walk found JIT "
          "frames: does the runtime need an option to record it (toy-jit: --shadow-stack)?";
    }
  } else if (v.stale_uses) {
    pass = false;
    verdict = "stale tables were used";
  } else if (misnamed != 0) {
    pass = false;
    verdict = format("%llu JIT frames were named after other code",
                     static_cast<unsigned long long>(misnamed));
  } else if (bs[JW_STAT_RINGBUF_FULL]) {
    pass = false;
    verdict = "checkpoint events were lost";
  } else if (child_status != 0) {
    pass = false;
    verdict = format("the command exited with status %d", child_status);
  } else {
    verdict = format("%.2f%% exact >= --min-match %g%%", match, min_match);
  }
  std::printf("result: %s (%s)\n", pass ? "PASS" : "FAIL", verdict.c_str());

  if (!json_path.empty()) {
    nlohmann::json j;
    j["checkpoints"] = v.checkpoints;
    j["exact"] = v.exact;
    j["complete"] = v.complete;
    j["fp_exact"] = v.fp_exact;
    j["fp_complete"] = v.fp_complete;
    j["truth_frames"] = v.truth_frames;
    j["found_frames"] = v.found_frames;
    j["fp_found_frames"] = v.fp_found_frames;
    j["max_truth"] = v.max_truth;
    j["wrong_walks"] = v.wrong_walks;
    nlohmann::json stops = nlohmann::json::object();
    for (unsigned i = 1; i < JW_STOP_COUNT_; ++i)
      if (v.by_stop[i]) stops[stop_key(i)] = v.by_stop[i];
    j["walk_stops"] = stops;
    j["stale_refusals"] = v.stale_refusals;
    j["stale_uses"] = v.stale_uses;
    j["races"] = v.races;
    j["named_frames"] = v.named_frames;
    j["misnamed"] = misnamed;
    j["invalid_truth"] = v.invalid_truth;
    j["windows_loaded"] = tst.windows_loaded;
    j["windows_rejected"] = tst.windows_rejected;
    j["windows_freed"] = tst.windows_freed;
    j["window_states_pruned"] = tst.window_states_pruned;
    j["steps"] = {{"jit", v.steps[0]},
                  {"sframe", v.steps[1]},
                  {"eh_frame", v.steps[2]},
                  {"fp_fallback", v.steps[3]}};
    j["failed_steps"] = {{"jit", v.failed[0]},
                         {"sframe", v.failed[1]},
                         {"eh_frame", v.failed[2]},
                         {"fp_fallback", v.failed[3]}};
    nlohmann::json lost = nlohmann::json::object();
    for (const auto& [k, c] : v.fp_lost_at) lost[std::to_string(k)] = c;
    j["fp_lost_at"] = lost;
    j["command_status"] = child_status;
    j["pass"] = pass;
    if (auto w = write_output(json_path, j.dump(2) + "\n"); !w) {
      // The verdict was printed, but a caller reading the JSON would find none: a failure.
      report(w.error());
      return 1;
    }
  }
  return pass ? 0 : 1;
}

}  // namespace jitwalk
