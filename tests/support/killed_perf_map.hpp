// Perf maps of `testjit --stress` runs ended by kill -9. SIGKILL can cut a write(2) where the
// kernel moves on to the next page of the file (generic_perform_write checks for a fatal signal
// between pages); no writer can prevent that. So such a map is whole lines, possibly followed by
// the start of one more line, and then only at a page boundary (CI saw it: 1 kill in ~300).
#pragma once

#include <cctype>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace jitunwind::test {

/// Whether `part` can be the beginning of a line "<hex> 10 stress_t<d>_fn<n>_with_a_longer_name"
/// followed by one of `suffixes`.
inline bool is_start_of_stress_line(std::string_view part,
                                    std::initializer_list<std::string_view> suffixes) {
  size_t i = 0;
  while (i < part.size() && std::isxdigit(static_cast<unsigned char>(part[i]))) ++i;
  part.remove_prefix(i);
  // nullopt: `expect` matched whole, go on; true: part ended inside it; false: mismatch.
  const auto take = [&part](std::string_view expect) -> std::optional<bool> {
    const size_t n = std::min(part.size(), expect.size());
    if (part.substr(0, n) != expect.substr(0, n)) return false;
    part.remove_prefix(n);
    return n == expect.size() ? std::nullopt : std::optional<bool>(true);
  };
  const auto digits = [&part](size_t max) {
    size_t n = 0;
    while (n < part.size() && n < max && std::isdigit(static_cast<unsigned char>(part[n]))) ++n;
    part.remove_prefix(n);
    return n;
  };
  if (auto r = take(" 10 stress_t")) return *r;
  if (part.empty()) return true;
  if (digits(1) != 1) return false;
  if (auto r = take("_fn")) return *r;
  if (part.empty()) return true;
  if (digits(10) == 0) return false;
  if (auto r = take("_with_a_longer_name")) return *r;
  for (std::string_view s : suffixes)
    if (s.starts_with(part)) return true;
  return false;
}

struct killed_perf_map {
  std::string lines;    ///< the whole lines
  std::string tail;     ///< what follows the last newline (empty if the file ends in one)
  std::string problem;  ///< empty if the tail is one that SIGKILL can leave
};

inline killed_perf_map split_killed_perf_map(const std::string& text,
                                             std::initializer_list<std::string_view> suffixes) {
  killed_perf_map m;
  const size_t cut = text.rfind('\n') + 1;  // npos + 1 == 0: no whole line at all
  m.lines = text.substr(0, cut);
  m.tail = text.substr(cut);
  if (m.tail.empty()) return m;
  if (text.size() % 4096 != 0)
    m.problem = "the file ends in part of a line, and not at a page boundary (size " +
                std::to_string(text.size()) + ")";
  else if (!is_start_of_stress_line(m.tail, suffixes))
    m.problem = "the file ends in '" + m.tail + "', which starts no line the program writes";
  return m;
}

}  // namespace jitunwind::test
