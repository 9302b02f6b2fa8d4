#include "proc_files.hpp"

#include "cli.hpp"
#include <jitunwind/toolkit/guarded_file.hpp>
#include <jitunwind/toolkit/proc_stat.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace jitunwind::cli {

namespace {

// Whether thread `tid` has not ended (its command name may hold ')' and newlines: the state
// follows the last ')').
bool task_alive(pid_t tid) {
  auto st = toolkit::read_proc_stat(tid);
  return st && !st->ended();
}

}  // namespace

long status_field(pid_t pid, std::string_view field, long otherwise) {
  auto text = toolkit::read_proc_text("/proc/" + std::to_string(pid) + "/status");
  if (!text) return otherwise;
  std::istringstream status(*text);
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field)) return std::atol(line.c_str() + field.size());
  return otherwise;
}

pid_t process_of(pid_t tid) {
  return static_cast<pid_t>(status_field(tid, "Tgid:", tid));
}

pid_t live_task(pid_t tgid, pid_t preferred) {
  if (preferred > 0 && process_of(preferred) == tgid && task_alive(preferred)) return preferred;
  if (task_alive(tgid)) return tgid;
  DIR* d = ::opendir(("/proc/" + std::to_string(tgid) + "/task").c_str());
  if (d == nullptr) return 0;
  pid_t found = 0;
  while (dirent* e = ::readdir(d)) {
    const pid_t tid = static_cast<pid_t>(std::atol(e->d_name));
    if (tid > 0 && task_alive(tid)) {
      found = tid;
      break;
    }
  }
  ::closedir(d);
  return found;
}

std::optional<uid_t> process_owner(pid_t pid) {
  struct stat st {};
  if (::stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return std::nullopt;
  return st.st_uid;
}

bool process_running(pid_t tgid) {
  return live_task(tgid, 0) != 0;
}

std::optional<std::string> environment_value(pid_t task, std::string_view name) {
  std::istringstream environ(
      toolkit::proc_text_or_empty("/proc/" + std::to_string(task) + "/environ"));
  const std::string key = std::string(name) + "=";
  std::optional<std::string> value;
  for (std::string var; std::getline(environ, var, '\0');)
    if (var.starts_with(key)) value = var.substr(key.size());
  return value;
}

std::string perf_map_path(pid_t tgid, pid_t task) {
  const std::string proc = "/proc/" + std::to_string(task > 0 ? task : tgid);
  std::string dir = "/tmp";
  if (auto v = environment_value(task > 0 ? task : tgid, "JITUNWIND_DIR"); v && !v->empty())
    dir = *v;
  // "NSpid:\t4242\t7": the last one is the pid in the process's own namespace.
  pid_t own = tgid;
  std::istringstream status(
      toolkit::proc_text_or_empty("/proc/" + std::to_string(tgid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("NSpid:")) continue;
    const size_t last = line.find_last_of(" \t");
    if (last != std::string::npos) own = static_cast<pid_t>(std::atol(line.c_str() + last + 1));
  }
  const std::string name = "/perf-" + std::to_string(own) + ".map";
  if (own > 0 && own != tgid) return proc + "/root" + dir + name;
  return dir + name;
}

result<void> check_perf_map_file(const std::string& path) {
  toolkit::open_rules rules;
  rules.what = "perf map";
  rules.no_follow = false;  // named by the user
  rules.max_bytes = UINT64_MAX;
  auto f = toolkit::guarded_file::open(path, rules);
  if (!f) return f.error();
  return {};
}

perf_map_names::perf_map_names(std::string path, std::optional<uid_t> owner,
                               toolkit::memory_budget* budget, uint64_t max_bytes)
    : path_(std::move(path)), owner_(owner), budget_(budget), max_bytes_(max_bytes) {}

void perf_map_names::note(std::string problem) {
  if (problem_.empty()) problem_ = std::move(problem);
}

void perf_map_names::update() {
  // The process writes this file, and may have put a FIFO, a device or a link to one there
  // instead: the open must not block, nor follow a link when the process chose the path.
  toolkit::open_rules rules;
  rules.what = "perf map";
  rules.no_follow = owner_.has_value();
  rules.owner = owner_;
  rules.max_bytes = UINT64_MAX;  // read up to max_bytes_ below, whatever its size
  auto f = toolkit::guarded_file::open(path_, rules);
  if (!f) {
    if (f.error().code() != errc::not_found) note(f.error().message());
    return;
  }
  if (f->device() != device_ || f->inode() != inode_ || f->size() < offset_) {
    // Another file (a new process with the same pid rewrote it), or the same one truncated.
    device_ = f->device();
    inode_ = f->inode();
    offset_ = 0;
    tail_.clear();
    skipping_ = false;
    names_.clear();
    charge_.release();
  }
  char buf[64 * 1024];
  while (!full_) {
    if (offset_ >= max_bytes_) {
      if (f->size() > offset_) {
        cut_ = true;
        note("perf map " + path_ + ": only its first " + toolkit::size_text(max_bytes_) +
             " read (--max-file)");
      }
      break;
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, max_bytes_ - offset_));
    auto n = f->read_some(offset_, buf, want);
    if (!n || *n == 0) break;
    offset_ += *n;
    consume(buf, *n);
  }
}

void perf_map_names::consume(const char* p, size_t n) {
  while (n > 0) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', n));
    const size_t take = nl != nullptr ? static_cast<size_t>(nl - p) : n;
    if (!skipping_) {
      if (tail_.size() + take > max_line) {
        skipping_ = true;
        tail_.clear();
      } else {
        tail_.append(p, take);
      }
    }
    if (nl == nullptr) return;
    if (!skipping_) parse_line(tail_);
    tail_.clear();
    skipping_ = false;
    p = nl + 1;
    n -= take + 1;
  }
}

void perf_map_names::parse_line(std::string_view line) {
  if (full_) return;
  std::istringstream fields{std::string(line)};
  std::string start, len;
  if (!(fields >> start >> len)) return;
  std::string name;
  std::getline(fields >> std::ws, name);
  auto a = parse_u64("0x" + start);
  if (!a) return;
  // What a name costs the tool: its bytes and a map node. A map of millions of tiny lines
  // stops at the memory budget, with the names read until then.
  if (auto r = charge_.grow(budget_, name.size() + 64, "names of perf map " + path_); !r) {
    full_ = true;
    cut_ = true;
    note(r.error().message());
    return;
  }
  names_[*a] = std::move(name);
}

std::string perf_map_names::name_or_address(uint64_t start) const {
  auto it = names_.find(start);
  return it == names_.end() ? hex_text(start) : "'" + toolkit::terminal_text(it->second) + "'";
}

}  // namespace jitunwind::cli
