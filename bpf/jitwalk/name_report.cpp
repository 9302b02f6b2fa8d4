#include "jitwalk/name_report.hpp"

#include <jitunwind/toolkit/terminal_text.hpp>

#include <algorithm>

namespace jitwalk {

std::string mapping_group_name(const std::string& module, uint64_t start, uint64_t end) {
  if (start == 0 && end == 0) return "[unknown]";
  std::string m = module;
  static const std::string deleted = " (deleted)";
  if (m.size() > deleted.size() &&
      m.compare(m.size() - deleted.size(), deleted.size(), deleted) == 0)
    m.resize(m.size() - deleted.size());
  if (m.empty() || m.rfind("/dev/zero", 0) == 0) {
    return format("[anon:0x%llx-0x%llx]", static_cast<unsigned long long>(start),
                  static_cast<unsigned long long>(end));
  }
  if (m[0] == '[') return m;
  if (m.rfind("/memfd:", 0) == 0) return "[memfd:" + m.substr(7) + "]";
  return "[" + m + "]";
}

namespace {

bool is_cut_marker(const profile_frame& f) {
  return f.name.rfind("[cut: ", 0) == 0;
}

// Outside every ELF object: JIT code, named or not, and unnamed anonymous code.
bool is_jit_or_anon(const profile_frame& f) {
  return (f.kind == frame_kind::jit || f.kind == frame_kind::unknown) && !is_cut_marker(f);
}

size_t idx(name_source s) {
  return static_cast<size_t>(s);
}

}  // namespace

name_counts count_names(const profile_data& p,
                        const std::function<bool(const std::string&)>& only) {
  name_counts c;
  const auto& frames = p.frames();
  for (const profile_stack& s : p.stacks()) {
    if (only && !only(s.thread)) continue;
    c.samples += s.count;
    const profile_frame* leaf = nullptr;
    for (uint32_t id : s.frames) {
      const profile_frame& f = frames[id];
      if (f.kind == frame_kind::kernel || is_cut_marker(f)) continue;
      if (leaf == nullptr) leaf = &f;
      if (is_jit_or_anon(f)) {
        c.jit_frames += s.count;
        c.jit_frames_by_source[idx(f.source)] += s.count;
      }
    }
    if (leaf == nullptr) {
      c.no_user_frame += s.count;
    } else if (leaf->source != name_source::none) {
      c.leaf_by_source[idx(leaf->source)] += s.count;
    } else if (leaf->kind == frame_kind::native) {
      c.leaf_unnamed_native += s.count;
    } else {
      c.leaf_unnamed_anon += s.count;
    }
  }
  return c;
}

namespace {

bool comm_is(const std::string& comm, const char* name) {
  return comm == name || comm.rfind(std::string(name) + "-", 0) == 0 ||
         comm.rfind(std::string(name), 0) == 0;
}

// Why JIT/anonymous code stayed unnamed, as far as the files say.
std::string hint(const name_counts& c, const process_names& p, bool have_map, bool have_dump) {
  // Below 1 % of the samples' leaves and of the JIT frames: noise (code that ran before its
  // name was written, a stub), not worth a hint.
  const uint64_t unnamed_jit = c.jit_frames_by_source[idx(name_source::none)];
  if (c.leaf_unnamed_anon * 100 < c.samples && unnamed_jit * 100 <= c.jit_frames) return {};
  if (!have_map && !have_dump && p.registry_windows == 0) {
    std::string how;
    if (comm_is(p.comm, "node")) {
      how = "start node with --perf-basic-prof (perf map) or --perf-prof (jitdump)";
    } else if (comm_is(p.comm, "luajit")) {
      how = "LuaJIT: load the module first (luajit -e 'require(\"jitunwind\")' ...)";
    } else if (comm_is(p.comm, "java")) {
      how =
          "JVM: write a perf map (-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, "
          "or jcmd PID Compiler.perfmap)";
    } else {
      how =
          "the runtime must write /tmp/perf-PID.map or a jitdump, or use the jitunwind SDK "
          "(docs/jitwalk.md)";
    }
    return format("no perf map, jitdump or jitunwind registry for pid %d%s: %s", p.pid,
                  p.where.empty() ? "" : (" (looked up " + p.where + ")").c_str(), how.c_str());
  }
  if (have_dump && p.still_running) {
    return format(
        "pid %d still runs: a runtime that writes its jitdump through a buffer (V8 "
        "--perf-prof) has not written the newest names yet; profile a command that "
        "exits (jitwalk profile -- node ...), or use a perf map (--perf-basic-prof)",
        p.pid);
  }
  if (comm_is(p.comm, "node") && have_map && !have_dump) {
    return "code the perf map does not list (V8's interpreter and builtins run from "
           "anonymous memory): node --interpreted-frames-native-stack names interpreted "
           "functions";
  }
  return "addresses no perf map line, jitdump record or registry window covers (code the "
         "runtime never published, or published after the profile ended)";
}

}  // namespace

std::vector<std::string> name_report_lines(const name_counts& c, const process_names& p,
                                           bool verbose) {
  std::vector<std::string> out;
  bool have_map = false, have_dump = false;
  std::string found;
  for (const auto& f : p.files) {
    if (!f.found) continue;
    (f.what == "jitdump" ? have_dump : have_map) = true;
    found += format("%s%s %s (%s)", found.empty() ? "" : ", ", f.what.c_str(), f.path.c_str(),
                    f.refused.empty()
                        ? format("%llu names", static_cast<unsigned long long>(f.entries)).c_str()
                        : "refused");
  }
  if (p.registry_windows != 0)
    found +=
        format("%sjitunwind registry (%zu windows)", found.empty() ? "" : ", ", p.registry_windows);
  const std::string who = p.one_of_tree ? format("pid %d (%s, %llu samples)", p.pid,
                                                 jitunwind::toolkit::terminal_text(p.comm).c_str(),
                                                 static_cast<unsigned long long>(p.samples))
                                        : format("pid %d", p.pid);
  std::string line =
      format("names for %s: %s", who.c_str(),
             found.empty() ? "no perf map, jitdump or registry found" : found.c_str());
  // A process in another mount or PID namespace has its own /tmp/perf-1.map: say where.
  if (!p.where.empty()) line += format(" (files looked up %s)", p.where.c_str());
  out.push_back(std::move(line));
  if (c.samples != 0) {
    std::string leaf = format("leaf frame named by:");
    bool first = true;
    for (name_source s :
         {name_source::registry, name_source::jitdump, name_source::perf_map, name_source::elf}) {
      const uint64_t n = c.leaf_by_source[idx(s)];
      if (n == 0) continue;
      leaf += format("%s %.1f%% %s", first ? "" : ",", pct(n, c.samples), to_string(s));
      first = false;
    }
    const uint64_t unnamed = c.leaf_unnamed_anon + c.leaf_unnamed_native + c.no_user_frame;
    leaf += format("%s %.1f%% unnamed", first ? "" : ";", pct(unnamed, c.samples));
    if (unnamed != 0) {
      leaf += format(" (%.1f%% JIT/anonymous code, %.1f%% native code without a symbol",
                     pct(c.leaf_unnamed_anon, c.samples), pct(c.leaf_unnamed_native, c.samples));
      if (c.no_user_frame != 0)
        leaf += format(", %.1f%% no user frame", pct(c.no_user_frame, c.samples));
      leaf += ")";
    }
    out.push_back(leaf);
    if (c.jit_frames != 0) {
      const uint64_t unnamed_jit = c.jit_frames_by_source[idx(name_source::none)];
      out.push_back(format("JIT/anonymous frames (every depth, by sample): %.1f%% of %llu named",
                           pct(c.jit_frames - unnamed_jit, c.jit_frames),
                           static_cast<unsigned long long>(c.jit_frames)));
    }
  }
  if (!p.ended_by_signal.empty() && have_dump) {
    // Said even when little is unnamed: what was lost cannot be counted.
    out.push_back(format(
        "note: names may be missing: jitwalk ended the command with %s, and a runtime that "
        "writes its jitdump through a buffer (V8 --perf-prof) loses the names still in it; let "
        "it exit by itself (no -d, or --wait-exit)",
        p.ended_by_signal.c_str()));
  } else if (std::string h = hint(c, p, have_map, have_dump); !h.empty()) {
    out.push_back("hint: " + h);
  }
  if (verbose) {
    for (const auto& f : p.files) {
      if (!f.found) {
        out.push_back(format("%s %s: not found", f.what.c_str(), f.path.c_str()));
      } else if (!f.refused.empty()) {
        out.push_back(
            format("%s %s: not read (%s)", f.what.c_str(), f.path.c_str(), f.refused.c_str()));
      } else {
        out.push_back(format("%s %s: %llu bytes read, %llu names", f.what.c_str(), f.path.c_str(),
                             static_cast<unsigned long long>(f.bytes),
                             static_cast<unsigned long long>(f.entries)));
      }
    }
  }
  return out;
}

}  // namespace jitwalk
