// Folded stacks: one line per distinct name path, "thread;root;...;leaf count".
#include "jitwalk/profile_data.hpp"

#include <map>
#include <jitunwind/toolkit/names.hpp>

namespace jitwalk {

namespace {
// ';' separates frames and the count follows the last space: keep names unambiguous. Other
// control bytes (the target chose these names) become '?', as in the SDK's perf maps.
void append_clean(std::string& out, const std::string& name) {
  for (char c : name) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\r') c = ' ';
    if (jitunwind::toolkit::is_control_byte(static_cast<unsigned char>(c))) c = '?';
    out.push_back(c);
  }
}
}  // namespace

std::string folded_text(const profile_data& p) {
  std::map<std::string, uint64_t> lines;  // sorted, merged by names
  for (const profile_stack& s : p.stacks()) {
    std::string line;
    append_clean(line, s.thread);
    for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it) {
      line.push_back(';');
      const profile_frame& f = p.frames()[*it];
      append_clean(line, marked_name(f));
      if (f.kind == frame_kind::kernel) line += "_[k]";  // flamegraph.pl's kernel annotation
    }
    lines[line] += s.count;
  }
  std::string out;
  for (const auto& [line, count] : lines) {
    out += line;
    out += ' ';
    out += std::to_string(count);
    out += '\n';
  }
  return out;
}

result<void> write_folded(const profile_data& p, const std::string& path) {
  return write_output(path, folded_text(p));
}

}  // namespace jitwalk
