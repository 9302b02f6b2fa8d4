#include "jitwalk/run.hpp"

#include "jitwalk/tree_end.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace jitwalk {

namespace {
volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) {
  g_stop = 1;
}

// execvp's PATH lookup, done here to find the executable's dynamic loader before it runs.
std::string resolve_command(const std::string& cmd) {
  if (cmd.find('/') != std::string::npos) return cmd;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= p.size()) {
    size_t colon = p.find(':', pos);
    std::string dir = p.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + cmd;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return cmd;
}
}  // namespace

void install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: interrupt the ring buffer poll
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A closed terminal stops the run like Ctrl-C (the command is stopped, the files written);
  // a closed pipe (`jitwalk ... | head`) must not kill jitwalk before it has done either.
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() {
  return g_stop != 0;
}

result<std::unique_ptr<run_session>> run_session::start(const run_options& o) {
  std::unique_ptr<run_session> s(new run_session());
  s->o_ = o;
  s->budget_ = std::make_unique<jitunwind::toolkit::memory_budget>(o.max_memory,
                                                                  "raise it with --max-memory");
  s->o_.tracker.budget = s->budget_.get();
  if (o.target.command.empty() && o.target.pid <= 0) {
    return make_error(errc::invalid_argument, "no target: give -p PID or -- COMMAND");
  }
  if (o.target.command.empty() && !process_alive(o.target.pid)) {
    return make_error(errc::not_found, "no process with PID %d", o.target.pid);
  }
  bpf_options bo = o.bpf;
  bo.stack_depth = std::min<uint32_t>(std::max<uint32_t>(o.max_depth, 1), JW_MAX_DEPTH);
  auto bpf = bpf_session::open(bo);
  if (!bpf) return bpf.error();
  s->bpf_ = std::move(bpf.value());

  std::string exe_path;
  if (!o.target.command.empty()) {
    // The command's processes whose parent exits come to us, not to init: the whole tree stays
    // ours to end (tree_end.hpp).
    become_subreaper();
    exe_path = resolve_command(o.target.command.front());
    auto child = child_process::spawn(o.target.command);
    if (!child) return child.error();
    s->child_.emplace(std::move(child.value()));
    s->pid_ = s->child_->pid();
    std::string base = exe_path.substr(exe_path.rfind('/') + 1);
    s->process_name_ = base.substr(0, 15);  // like /proc/PID/comm
  } else {
    s->pid_ = o.target.pid;
    s->process_name_ = read_comm(s->pid_);
  }

  jw_config& cfg = s->bpf_->config();
  cfg.target_tgid = static_cast<uint32_t>(s->pid_);
  cfg.max_depth = std::min<uint32_t>(std::max<uint32_t>(o.max_depth, 1), JW_MAX_DEPTH);
  cfg.kernel_stacks = o.kernel_stacks;
  cfg.per_thread = o.per_thread;
  cfg.fp_only = o.fp_only;
  cfg.follow_children = o.follow_children;
  cfg.stop_on_publish = o.sync_tables;
  // Without JIT rows (--no-jit, the frame-pointer unwinders) code published a moment ago is
  // walked like all JIT code, with frame pointers.
  cfg.jit_rows = o.tracker.jit && !o.fp_only;
  // A command we start is held at every loader event so probes are in place before its code
  // (and every dlopened object's) runs; an attached process is never stopped for that.
  cfg.stop_on_loader = !o.target.command.empty();

  s->tables_ = std::make_unique<table_store>(s->bpf_->views());
  s->sym_ = std::make_unique<symbolizer>(
      s->pid_, symbolizer_limits{s->budget_.get(), o.max_file_bytes, &s->shared_objects_});
  if (o.table_cache) {
    s->cache_ = std::make_unique<table_cache>(o.table_cache_dir.empty() ? table_cache::default_dir()
                                                                        : o.table_cache_dir);
    if (s->cache_->enabled()) {
      s->o_.tracker.cache = s->cache_.get();
    } else {
      note("native table cache off: %s", s->cache_->problem().c_str());
    }
  }
  s->o_.tracker.shared_native = &s->shared_native_;
  s->tracker_ = std::make_unique<tracker>(*s->bpf_, *s->tables_, *s->sym_, s->pid_, s->o_.tracker);
  s->tree_ = std::make_unique<process_tree>(
      *s->bpf_, *s->tables_,
      process_tree_options{
          symbolizer_limits{s->budget_.get(), o.max_file_bytes, &s->shared_objects_},
          s->o_.tracker});
  if (auto r = s->tree_->add_root(s->pid_, s->process_name_, *s->sym_, *s->tracker_,
                                  s->child_.has_value());
      !r) {
    return r.error();
  }
  // Without these tracepoints an exec'd target keeps its old tables and children are not seen.
  if (auto r = s->bpf_->attach_process_events(); !r) {
    warn("%s: processes the target forks or exec's are not followed", r.error().message().c_str());
  }

  if (s->child_) {
    // The executable is not mapped yet: probes in it (static SDK) and the loader hook go in now.
    s->tracker_->attach_probes_in(exe_path);
    std::string interp;
    if (auto obj = elf_file::open(exe_path); obj) interp = obj.value()->interpreter();
    if (!interp.empty()) {
      if (auto r = s->tracker_->attach_loader(interp); !r) {
        warn("%s; objects loaded by %s get no probes", r.error().message().c_str(),
             exe_path.c_str());
      }
    }
  } else {
    s->sym_->refresh();
    s->tracker_->scan_objects();
    s->tracker_->sync_registry();
    s->tracker_->flush();
    if (auto r = s->tracker_->attach_loader(); !r) {
      detail("%s (objects loaded later are not followed)", r.error().message().c_str());
    }
  }
  return s;
}

void run_session::release_all() {
  // Never leave the target stopped behind us.
  if (pid_ > 0 && (!child_ || !child_->exited())) kill(pid_, SIGCONT);
  if (tree_ && bpf_) {
    // Nor a process of its tree: no handler stops one from now on, and those stopped at an exec
    // or loader event nobody will read are resumed.
    bpf_->config().stop_on_loader = 0;
    bpf_->config().stop_on_publish = 0;
    (void)bpf_->poll_events(0, [](const void* data, size_t size) {
      jw_event_header h{};
      if (size < sizeof h) return;
      std::memcpy(&h, data, sizeof h);
      if (h.stopped) kill(static_cast<pid_t>(h.tgid), SIGCONT);
    });
    tree_->resume_all();
  }
}

run_session::~run_session() {
  release_all();
  // A command's tree never outlives jitwalk (profile and verify end it first; this is for
  // errors on the way).
  if (child_ && !child_->exited()) (void)end_tree(*child_, 0.5, false, [] { return false; });
  tree_.reset();
  tracker_.reset();
  bpf_.reset();
}

result<void> run_session::go() {
  started_ = std::chrono::steady_clock::now();
  if (child_) return child_->release();
  return {};
}

double run_session::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void run_session::loop(const std::function<void()>& tick, int tick_ms) {
  auto next_tick = std::chrono::steady_clock::now() + std::chrono::milliseconds(tick_ms);
  auto next_sync = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const auto handler = [&](const void* data, size_t size) { tree_->on_event(data, size); };
  for (;;) {
    auto polled = bpf_->poll_events(50, handler);
    if (!polled) {
      warn("%s", polled.error().message().c_str());
    }
    tree_->flush();
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_sync) {
      // Safety net for events lost or never emitted (runtimes without USDT events).
      next_sync = now + std::chrono::seconds(1);
      tree_->sync_registry();
      tree_->flush();
    }
    if (now >= next_tick) {
      next_tick = now + std::chrono::milliseconds(tick_ms);
      // Orphans of the command's tree are ours (subreaper): no zombies pile up in a long run.
      if (child_) reap_orphans(child_->pid());
      if (tick) tick();
    }
    if (stop_requested()) {
      stop_reason_ = "interrupted";
      break;
    }
    if (child_ && child_->poll_exit()) {
      stop_reason_ = "command " + child_->describe_end();
      break;
    }
    if (!child_ && !process_alive(pid_)) {
      stop_reason_ = format("process %d exited", pid_);
      break;
    }
    if (o_.duration_s > 0 && elapsed_s() >= o_.duration_s) {
      stop_reason_ = format("%.1f s elapsed", o_.duration_s);
      break;
    }
  }
  // Events still queued (the last checkpoints, names) are processed before returning.
  for (int i = 0; i < 8; ++i) {
    auto n = bpf_->poll_events(0, handler);
    if (!n || n.value() == 0) break;
  }
  tree_->flush();
}

}  // namespace jitwalk
