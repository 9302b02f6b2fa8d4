// cmdline::help_text: --help generated from a command's table.
#include "cmdline/cmdline.hpp"

#include <algorithm>
#include <sstream>

namespace cmdline {

namespace {

constexpr size_t help_width = 100;

kind kind_of(const option& o) {
  if (o.type != kind::automatic) return o.type;
  return o.value_name.empty() ? kind::flag : kind::text;
}

/// The left column of an option's row: the spelling that changes something ("--no-jit" for a
/// flag that is on by default), with its value placeholder.
std::string row_name(const option& o, layout style) {
  std::string left = o.short_name ? std::string("-") + o.short_name + ", " : std::string("    ");
  if (kind_of(o) == kind::flag) return left + (o.on_by_default ? "--no-" : "--") + o.name;
  left += "--" + o.name;
  if (o.implicit_value) return left + "[=" + o.value_name + "]";
  return left + (style == layout::leading ? "=" : " ") + o.value_name;
}

/// What the notes after the options explain: only what this command's options use.
std::string generated_notes(const command& spec) {
  bool flags = false, durations = false, sizes = false, frequencies = false, negatable = false;
  for (const option& o : spec.options) {
    switch (kind_of(o)) {
      case kind::flag:
        flags = true;
        break;
      case kind::duration:
        durations = true;
        break;
      case kind::size:
        sizes = true;
        break;
      case kind::frequency:
        frequencies = true;
        break;
      default:
        break;
    }
    negatable = negatable || o.negatable;
  }
  std::string s;
  if (flags)
    s += "Every flag has a --no- form and takes =on or =off (--no-X, --X=off); the last one "
         "given wins.\n";
  if (negatable && !flags) s += "An option shown with --no-X is turned off by it.\n";
  if (durations)
    s += "Durations take a unit: ns, us, ms, s, m, h (1.5, 500ms, 2m); a bare number is in the "
         "unit the option names.\n";
  if (sizes)
    s += "Sizes take a unit: k, M, G, T, powers of 1024 (64k, 16M, 1Gi); a bare number is in "
         "the unit the option names.\n";
  if (frequencies) s += "Frequencies take Hz or kHz (99, 1kHz).\n";
  return s;
}

}  // namespace

std::string wrap(const std::string& text, size_t indent, size_t width) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string word, current(indent, ' ');
    bool empty = true;
    while (words >> word) {
      if (!empty && current.size() + 1 + word.size() > width) {
        out += current + "\n";
        current.assign(indent, ' ');
        empty = true;
      }
      if (!empty) current += ' ';
      current += word;
      empty = false;
    }
    out += (empty ? std::string() : current) + "\n";
  }
  return out;
}

std::string help_text(const std::string& invocation, const command& spec) {
  std::string s = "Usage: " + invocation;
  if (!spec.usage.empty()) {
    s += " " + spec.usage;
  } else {
    if (!spec.options.empty()) s += " [OPTIONS]";
    if (!spec.operands.empty()) s += " " + spec.operands;
  }
  s += "\n\n" + wrap(spec.summary, 0, help_width);
  if (!spec.description.empty()) s += "\n" + wrap(spec.description, 0, help_width);

  struct row {
    std::string heading, left, help;
  };
  std::vector<row> rows;
  for (const option& o : spec.options) rows.push_back({o.heading, row_name(o, spec.style), o.help});
  rows.push_back({"", "-h, --help", "Show this help and exit."});
  size_t width = 0;
  for (const row& r : rows) width = std::max(width, r.left.size());
  // The help column starts after the longest name, but never right of the middle: a longer
  // name then has its help on the next line.
  width = std::min<size_t>(width, 28);
  // Options under headings need no "Options:" above the first heading.
  if (rows.front().heading.empty()) s += "\nOptions:\n";
  for (const row& r : rows) {
    if (!r.heading.empty()) s += "\n" + r.heading + ":\n";
    if (r.help.empty()) {
      s += "  " + r.left + "\n";
      continue;
    }
    std::string body = wrap(r.help, 2 + width + 2, help_width);
    if (r.left.size() > width) {
      s += "  " + r.left + "\n" + body;
    } else {
      body.replace(0, 2 + r.left.size(), "  " + r.left);
      s += body;
    }
  }
  if (const std::string g = generated_notes(spec); !g.empty()) s += "\n" + wrap(g, 0, help_width);
  if (!spec.notes.empty()) s += "\n" + wrap(spec.notes, 0, help_width);
  if (!spec.examples.empty()) {
    // Command lines as written: indented, never re-wrapped (a continued line keeps its indent).
    s += "\nExamples:\n";
    std::istringstream lines(spec.examples);
    for (std::string line; std::getline(lines, line);) s += "  " + line + "\n";
  }
  return s;
}

std::string command_list_text(const std::string& program, const std::string& about,
                              std::span<const command* const> commands) {
  std::string s =
      "Usage: " + program + " COMMAND [OPTIONS]\n\n" + wrap(about, 0, help_width) + "\nCommands:\n";
  size_t width = 0;
  for (const command* c : commands) width = std::max(width, c->name.size());
  for (const command* c : commands) {
    std::string body = wrap(c->summary, 2 + width + 2, help_width);
    body.replace(0, 2 + c->name.size(), "  " + c->name);
    s += body;
  }
  s += "\n`" + program + " COMMAND --help` documents a command.\n";
  return s;
}

}  // namespace cmdline
