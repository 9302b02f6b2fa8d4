#include <jitunwind/toolkit/proc_stat.hpp>

#include <jitunwind/toolkit/format.hpp>
#include <jitunwind/toolkit/guarded_file.hpp>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace jitunwind::toolkit {

std::optional<proc_stat> parse_proc_stat(std::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  proc_stat s;
  const std::string head(text.substr(0, open));
  char* end = nullptr;
  const long pid = std::strtol(head.c_str(), &end, 10);
  if (end == head.c_str() || pid <= 0) return std::nullopt;
  s.pid = static_cast<pid_t>(pid);
  s.comm = std::string(text.substr(open + 1, close - open - 1));
  // " S PPID PGRP SESSION TTY TPGID FLAGS ..."
  const std::string rest(text.substr(close + 1));
  char state = 0;
  long long ppid = 0, pgrp = 0, session = 0, tty = 0, tpgid = 0;
  unsigned long long flags = 0;
  if (std::sscanf(rest.c_str(), " %c %lld %lld %lld %lld %lld %llu", &state, &ppid, &pgrp, &session,
                  &tty, &tpgid, &flags) != 7)
    return std::nullopt;
  s.state = state;
  s.ppid = static_cast<pid_t>(ppid);
  s.flags = flags;
  return s;
}

result<proc_stat> read_proc_stat(pid_t pid, pid_t tid) {
  const std::string path =
      tid != 0 ? format("/proc/%d/task/%d/stat", pid, tid) : format("/proc/%d/stat", pid);
  auto text = read_proc_text(path, 64 * 1024);
  if (!text) {
    if (text.error().code() == errc::not_found)
      return make_error(errc::not_found, "no such %s: %d", tid != 0 ? "thread" : "process",
                        tid != 0 ? tid : pid);
    return std::move(text).error();
  }
  auto s = parse_proc_stat(*text);
  if (!s) return make_error(errc::malformed, "%s: cannot parse its contents", path.c_str());
  return std::move(*s);
}

}  // namespace jitunwind::toolkit
