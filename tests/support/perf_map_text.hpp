// Reading perf maps written by perfmap_writer in tests. The writer never lets a line of at most
// 4096 bytes cross a 4096-byte boundary of the file: it pads the previous line with newlines up
// to the boundary instead. So `kill -9` in the middle of a write (which the kernel can only stop
// where it moves to the next page of the file) never leaves part of a line, and empty lines
// appear only as such padding.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jitunwind::test {

struct perf_map_text {
  std::vector<std::string> lines;  ///< the non-empty lines, in file order
  std::string problem;             ///< empty if the text follows the writer's rules
};

inline perf_map_text parse_perf_map_text(std::string_view text) {
  constexpr size_t page = 4096;
  perf_map_text out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      out.problem = "the file ends in part of a line at offset " + std::to_string(pos) + ": '" +
                    std::string(text.substr(pos, 80)) + "'";
      return out;
    }
    if (nl == pos) {
      // Padding: a run of newlines that ends exactly at a page boundary.
      size_t end = pos;
      while (end < text.size() && text[end] == '\n') ++end;
      if (end % page != 0) {
        out.problem = "empty lines at offset " + std::to_string(pos) +
                      " that do not end at a page boundary (" + std::to_string(end) + ")";
        return out;
      }
      pos = end;
      continue;
    }
    const size_t length = nl + 1 - pos;
    if (length <= page && pos / page != nl / page) {
      out.problem = "the line at offset " + std::to_string(pos) + " (" + std::to_string(length) +
                    " bytes) crosses a page boundary";
      return out;
    }
    out.lines.emplace_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace jitunwind::test
