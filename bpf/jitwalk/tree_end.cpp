#include "jitwalk/tree_end.hpp"

#include <jitunwind/toolkit/proc_stat.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace jitwalk {

void become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    warn(
        "PR_SET_CHILD_SUBREAPER: %s (processes of the command whose parent exits are not "
        "ended with it)",
        std::strerror(errno));
}

std::vector<pid_t> live_descendants(pid_t keep) {
  const pid_t self = getpid();
  std::multimap<pid_t, std::pair<pid_t, bool>> children;  // ppid -> (pid, zombie)
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      auto st = jitunwind::toolkit::read_proc_stat(pid);
      if (!st || st->kernel_thread()) continue;
      children.emplace(st->ppid, std::make_pair(pid, st->ended()));
    }
    closedir(d);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo{self};
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(parent);
    for (auto it = lo; it != hi; ++it) {
      const auto [pid, zombie] = it->second;
      if (zombie) {
        // An orphan re-parented to us (we are its subreaper) is ours to reap.
        if (parent == self && pid != keep) ::waitpid(pid, nullptr, WNOHANG);
        continue;
      }
      out.push_back(pid);
      todo.push_back(pid);
    }
  }
  return out;
}

void reap_orphans(pid_t keep) {
  for (int i = 0; i < 1024; ++i) {
    siginfo_t info{};
    // Look first (WNOWAIT): the command's own status belongs to its child_process.
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (info.si_pid == keep) return;
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

namespace {

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? format("SIG%s", abbrev) : format("signal %d", sig);
}

}  // namespace

std::string tree_end::text() const {
  if (signalled.empty()) return {};
  std::string out =
      format("%zu other process%s of the command's tree ended by jitwalk:", signalled.size(),
             signalled.size() == 1 ? "" : "es");
  const size_t shown = std::min<size_t>(signalled.size(), 6);
  for (size_t i = 0; i < shown; ++i) {
    const ended_process& p = signalled[i];
    std::string how = signal_text(p.last_signal);
    if (p.last_signal == SIGKILL) how += ": still running after SIGINT and SIGTERM";
    if (!p.gone) how += "; STILL RUNNING";
    out += format("%s %s-%d (%s)", i ? "," : "", jitunwind::toolkit::terminal_text(p.comm).c_str(),
                  p.pid, how.c_str());
  }
  if (signalled.size() > shown) out += format(", %zu more", signalled.size() - shown);
  return out;
}

tree_end end_tree(child_process& command, double grace_s, bool wait_exit,
                  const std::function<bool()>& interrupted) {
  tree_end out;
  std::map<pid_t, ended_process> sent;
  auto others = [&] {
    std::vector<pid_t> v = live_descendants(command.pid());
    std::erase(v, command.pid());
    return v;
  };
  auto all_gone = [&] { return command.poll_exit() && others().empty(); };
  auto await = [&](double seconds) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(seconds, 0.0));
    while (!all_gone()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  };
  if (wait_exit && !interrupted()) {
    note(
        "-d over: sampling stopped; waiting for the command and its processes to exit by "
        "themselves (--wait-exit; Ctrl-C ends them)");
    while (!all_gone() && !interrupted())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  bool done = all_gone();
  for (int sig : {SIGINT, SIGTERM, SIGKILL}) {
    if (done) break;
    command.signal(sig);
    for (pid_t pid : others()) {
      ended_process& p = sent[pid];
      if (p.pid == 0) {
        p.pid = pid;
        p.comm = read_comm(pid);
      }
      if (::kill(pid, sig) == 0) p.last_signal = sig;
      // A process stopped (job control, a handler's SIGSTOP) acts on the signal once resumed.
      if (sig != SIGKILL) ::kill(pid, SIGCONT);
    }
    done = await(sig == SIGKILL ? 5.0 : grace_s);
  }
  const std::vector<pid_t> left = others();
  for (auto& [pid, p] : sent) {
    if (p.last_signal == 0) continue;  // gone before the signal reached it
    p.gone = std::find(left.begin(), left.end(), pid) == left.end();
    out.signalled.push_back(p);
  }
  return out;
}

}  // namespace jitwalk
