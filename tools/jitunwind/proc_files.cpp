#include "proc_files.hpp"

#include "cli.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace jitunwind::cli {

long status_field(pid_t pid, std::string_view field, long otherwise) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field)) return std::atol(line.c_str() + field.size());
  return otherwise;
}

pid_t process_of(pid_t tid) {
  return static_cast<pid_t>(status_field(tid, "Tgid:", tid));
}

bool process_running(pid_t pid) {
  // "PID (comm) S ...": the state follows the last ')' (comm may contain one).
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X' && state != 'x';
}

std::string perf_map_path(pid_t process) {
  std::string dir = "/tmp";
  std::ifstream environ("/proc/" + std::to_string(process) + "/environ", std::ios::binary);
  constexpr std::string_view key = "JITUNWIND_DIR=";
  for (std::string var; std::getline(environ, var, '\0');)
    if (var.starts_with(key) && var.size() > key.size()) dir = var.substr(key.size());
  return dir + "/perf-" + std::to_string(process) + ".map";
}

void perf_map_names::update() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < offset_) {
    offset_ = 0;
    names_.clear();
  }
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: not complete yet
    offset_ += line.size() + 1;
    std::istringstream fields(line);
    std::string start, len;
    if (!(fields >> start >> len)) continue;
    std::string name;
    std::getline(fields >> std::ws, name);
    if (auto a = parse_u64("0x" + start)) names_[*a] = name;
  }
}

std::string perf_map_names::name_or_address(uint64_t start) const {
  auto it = names_.find(start);
  return it == names_.end() ? hex_text(start) : "'" + it->second + "'";
}

}  // namespace jitunwind::cli
