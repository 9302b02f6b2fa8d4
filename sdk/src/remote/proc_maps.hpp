// /proc/PID/maps of another process.
#pragma once

#include <jitunwind/result.h>

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::remote::detail {

struct map_line {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string perms;
  std::string device;
  std::string path;  ///< as printed, including a " (deleted)" suffix
};

/// Parses the text of a maps file (lines that do not parse are skipped).
std::vector<map_line> parse_maps(std::string_view text);

/// Reads and parses /proc/PID/maps. Errors: not_found (no such process), permission_denied.
result<std::vector<map_line>> read_maps(pid_t pid);

}  // namespace jitunwind::remote::detail
