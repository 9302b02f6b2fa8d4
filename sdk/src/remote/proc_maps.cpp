#include "remote/proc_maps.hpp"

#include "common/error.hpp"

#include <jitunwind/toolkit/guarded_file.hpp>

#include <cinttypes>
#include <cstdio>

namespace jitunwind::remote::detail {

using jitunwind::detail::make_error;

std::vector<map_line> parse_maps(std::string_view text) {
  std::vector<map_line> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string line(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    map_line m;
    char perms[8] = {}, dev[16] = {};
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %15s %" SCNu64 " %n",
                    &m.start, &m.end, perms, &m.offset, dev, &m.inode, &path_at) < 6) {
      continue;
    }
    m.perms = perms;
    m.device = dev;
    if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) m.path = line.substr(path_at);
    out.push_back(std::move(m));
  }
  return out;
}

result<std::vector<map_line>> read_maps(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/maps", static_cast<int>(pid));
  auto text = jitunwind::toolkit::read_proc_text(path);
  if (!text) {
    const errc code = text.error().code();
    if (code == errc::not_found) return make_error(errc::not_found, "pid %d: no such process", pid);
    if (code == errc::permission_denied)
      return make_error(errc::permission_denied, "pid %d: cannot read %s: %s", pid, path,
                        text.error().message().c_str());
    return make_error(code, "pid %d: %s", pid, text.error().message().c_str());
  }
  return parse_maps(*text);
}

}  // namespace jitunwind::remote::detail
