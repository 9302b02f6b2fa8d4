// Ending a command jitwalk started together with every process of its tree, so that none is
// left running: not a runtime whose wrapper ignored the signals and was killed (a supervisor, an
// init shim, `unshare --fork`), not a daemon it forked, and none holding the pipe a caller reads
// jitwalk's output from.
//
// jitwalk is made the "child subreaper" (PR_SET_CHILD_SUBREAPER) before it starts the command:
// a process of the tree whose parent dies is re-parented to jitwalk instead of init, so the
// tree is always jitwalk's descendants, found in /proc by parent PID. Not thread-safe.
#pragma once

#include "jitwalk/proc.hpp"

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace jitwalk {

/// PR_SET_CHILD_SUBREAPER for jitwalk (warns if the kernel refuses).
void become_subreaper();

/// The live processes descending from jitwalk (zombies left out; jitwalk's own zombie children
/// are reaped on the way, except `keep`, which its child_process waits for).
std::vector<pid_t> live_descendants(pid_t keep);

/// Reaps the zombies re-parented to jitwalk (orphans of the tree that exited), leaving `keep`
/// (the command, which its child_process waits for). Cheap: no /proc scan.
void reap_orphans(pid_t keep);

/// A process jitwalk sent a signal to when ending the tree.
struct ended_process {
  pid_t pid = 0;
  std::string comm;
  int last_signal = 0;  ///< SIGINT, SIGTERM or SIGKILL
  bool gone = false;    ///< no longer running once jitwalk was done
};

struct tree_end {
  std::vector<ended_process> signalled;  ///< other than the command itself (child_process says)
  /// The summary line ("" when jitwalk signalled no other process): "2 other processes of the
  /// command's tree ended by jitwalk: sup-12 (SIGKILL: still running after SIGINT and SIGTERM),
  /// node-13 (SIGINT)".
  std::string text() const;
};

/// Ends `command` and every process of its tree: with `wait_exit` first waits until all of them
/// exited by themselves, or `interrupted()` says to stop waiting; then SIGINT to each, SIGTERM to
/// those still running after `grace_s`, SIGKILL to those running after another `grace_s`, and
/// waits until they are gone (SIGKILL: at most a few seconds). Returns what it had to do.
tree_end end_tree(child_process& command, double grace_s, bool wait_exit,
                  const std::function<bool()>& interrupted);

}  // namespace jitwalk
