// cmdline::parse and the typed accessors of its result.
#include "cmdline/cmdline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cmdline {

namespace {

kind kind_of(const option& o) {
  if (o.type != kind::automatic) return o.type;
  return o.value_name.empty() ? kind::flag : kind::text;
}

bool takes_value(const option& o) {
  return kind_of(o) != kind::flag;
}

/// The option a long name (after "--") means, and whether it came as --no-NAME.
const option* find_long(const command& spec, std::string_view name, bool* negated) {
  *negated = false;
  for (const option& o : spec.options)
    if (o.name == name) return &o;
  if (name.substr(0, 3) == "no-") {
    for (const option& o : spec.options) {
      if (o.name == name.substr(3) && (kind_of(o) == kind::flag || o.negatable)) {
        *negated = true;
        return &o;
      }
    }
  }
  return nullptr;
}

const option* find_short(const command& spec, char c) {
  for (const option& o : spec.options)
    if (o.short_name == c) return &o;
  return nullptr;
}

/// "%g" without a trailing ".0" and without exponents for the numbers options have.
std::string number_text(double v) {
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e18)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// A limit as the user would write it: in the option's bare unit.
std::string limit_text(const option& o, double base_value) {
  switch (kind_of(o)) {
    case kind::duration: {
      const std::string unit = o.bare_unit.empty() ? "s" : o.bare_unit;
      return number_text(base_value / *duration_unit(unit)) + unit;
    }
    case kind::size: {
      const std::string unit = o.bare_unit.empty() ? "B" : o.bare_unit;
      const auto scale = size_unit(unit);
      return number_text(base_value / static_cast<double>(scale ? *scale : 1)) +
             (unit == "B" ? "" : unit);
    }
    case kind::frequency:
      return number_text(base_value) + " Hz";
    default:
      return number_text(base_value);
  }
}

const char* example_of(kind k) {
  switch (k) {
    case kind::duration:
      return "a duration (e.g. 1.5, 500ms, 2s, 1m)";
    case kind::size:
      return "a size (e.g. 4096, 64k, 16M, 1Gi)";
    case kind::frequency:
      return "a frequency (e.g. 99, 1kHz)";
    default:
      return "a number";
  }
}

/// Converts and range-checks `text` for option `o` (typed as `typed`); an error names both.
bool convert(const option& o, const std::string& typed, const std::string& text, parsed::entry* e,
             std::string* error) {
  const kind k = kind_of(o);
  if (k == kind::text) return true;
  if (k == kind::choice) {
    std::string list;
    for (size_t i = 0; i < o.choices.size(); ++i) {
      if (o.choices[i] == text) return true;
      list += (i == 0 ? "" : i + 1 == o.choices.size() ? " or " : ", ") + o.choices[i];
    }
    *error = typed + ": '" + shown(text) + "' (expected " + list + ")";
    return false;
  }
  number_error why = number_error::none;
  double value = 0;
  switch (k) {
    case kind::whole: {
      auto v = parse_whole(text, &why);
      if (v) e->whole = *v, value = static_cast<double>(*v);
      break;
    }
    case kind::size: {
      auto v = parse_size(text, o.bare_unit, &why);
      if (v) e->whole = *v, value = static_cast<double>(*v);
      break;
    }
    case kind::decimal: {
      auto v = parse_decimal(text, &why);
      if (v) e->decimal = value = *v;
      break;
    }
    case kind::duration: {
      auto v = parse_duration(text, o.bare_unit, &why);
      if (v) e->decimal = value = *v;
      break;
    }
    case kind::frequency: {
      auto v = parse_frequency(text, &why);
      if (v) e->decimal = value = *v;
      break;
    }
    default:
      break;
  }
  switch (why) {
    case number_error::none:
      break;
    case number_error::too_large:
      // Digits after all: say what the limit is, as for any other value above it.
      *error = typed + ": " + shown(text) + " is more than " +
               (std::isinf(o.max) && (k == kind::whole || k == kind::size)
                    ? std::to_string(UINT64_MAX) + (k == kind::size ? " bytes" : "")
                    : limit_text(o, o.max));
      return false;
    case number_error::not_whole:
      *error = typed + ": '" + shown(text) + "' is not a whole number" +
               (k == kind::size ? " of bytes" : "");
      return false;
    case number_error::not_a_number:
      *error = typed + ": '" + shown(text) + "' is not " +
               (k == kind::whole || k == kind::decimal ? "a number" : example_of(k)) +
               (k == kind::duration && !o.bare_unit.empty() && o.bare_unit != "s"
                    ? "; a bare number is in " + o.bare_unit
                    : "");
      return false;
  }
  if (value > o.max) {
    *error = typed + ": " + shown(text) + " is more than " + limit_text(o, o.max);
    return false;
  }
  if (value < o.min) {
    *error = typed + ": " + shown(text) + " is less than " + limit_text(o, o.min);
    return false;
  }
  return true;
}

/// The state a flag's `=VALUE` names.
std::optional<bool> on_off(std::string_view v) {
  for (const char* on : {"on", "yes", "true", "1"})
    if (v == on) return true;
  for (const char* off : {"off", "no", "false", "0"})
    if (v == off) return false;
  return std::nullopt;
}

/// Where the options of `args` end: help is looked for only there.
size_t options_end(const command& spec, std::span<const std::string> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return i;
    if (spec.style == layout::leading && (a.size() < 2 || a[0] != '-')) return i;
  }
  return args.size();
}

}  // namespace

bool parsed::flag(std::string_view name) const {
  return state(name).value_or(false);
}

std::optional<bool> parsed::state(std::string_view name) const {
  auto it = given_.find(name);
  if (it == given_.end()) return std::nullopt;
  return it->second.on;
}

std::optional<std::string> parsed::value(std::string_view name) const {
  auto it = given_.find(name);
  if (it == given_.end() || !it->second.on) return std::nullopt;
  return it->second.text;
}

uint64_t parsed::whole(std::string_view name, uint64_t fallback) const {
  auto it = given_.find(name);
  return it == given_.end() || !it->second.on ? fallback : it->second.whole;
}

double parsed::decimal(std::string_view name, double fallback) const {
  auto it = given_.find(name);
  return it == given_.end() || !it->second.on ? fallback : it->second.decimal;
}

std::optional<std::string> parsed::last_of(std::string_view a, std::string_view b) const {
  auto ia = given_.find(a), ib = given_.find(b);
  if (ia == given_.end() && ib == given_.end()) return std::nullopt;
  if (ib == given_.end() || (ia != given_.end() && ia->second.position > ib->second.position))
    return std::string(a);
  return std::string(b);
}

bool parse(const command& spec, std::span<const std::string> args, parsed& out,
           std::string* error) {
  out = parsed{};
  // --help wins over everything else on the line (even a bad option before it).
  const size_t end = options_end(spec, args);
  for (size_t i = 0; i < end; ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      out.help = true;
      return true;
    }
  }
  auto usage = [&](std::string message) {
    *error = std::move(message);
    return false;
  };
  const std::string for_command = spec.name.empty() ? "" : " for '" + spec.name + "'";
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      if (spec.style == layout::after_separator && !options_done)
        return usage("unexpected argument '" + shown(a) + "'" + for_command +
                     " (a command to run goes after '--')");
      out.operands.push_back(a);
      if (spec.style == layout::leading) options_done = true;
      continue;
    }
    if (a == "--") {
      options_done = true;
      out.saw_separator = true;
      out.separator = out.operands.size();
      continue;
    }
    const option* o = nullptr;
    bool negated = false;
    std::optional<std::string> inline_value;
    std::string typed = a;
    if (a.rfind("--", 0) == 0) {
      std::string name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name.resize(eq);
        typed = "--" + name;
      }
      o = find_long(spec, name, &negated);
    } else {
      o = find_short(spec, a[1]);
      typed = a.substr(0, 2);
      if (o && a.size() > 2) {
        if (!takes_value(*o))
          o = nullptr;  // "-vq" and the like are not spelt here
        else
          inline_value = a.substr(2);
      }
    }
    if (!o) {
      std::string what = "unknown option '" + shown(typed) + "'" + for_command;
      // `check PROGRAM --opt`: most likely meant for the program.
      if (!out.operands.empty() && spec.operands.find("-- ") != std::string::npos)
        what +=
            " (to pass options on to '" + shown(out.operands.front()) + "', put '--' before it)";
      return usage(what);
    }
    parsed::entry e;
    e.position = i;
    if (negated) {
      if (inline_value) return usage("option " + typed + " takes no value");
      e.on = false;
      out.set(o->name, std::move(e));
      continue;
    }
    if (!takes_value(*o)) {
      if (inline_value) {
        auto state = on_off(*inline_value);
        if (!state) return usage(typed + ": '" + shown(*inline_value) + "' is not on or off");
        e.on = *state;
      }
      out.set(o->name, std::move(e));
      continue;
    }
    if (!inline_value && o->implicit_value) inline_value = *o->implicit_value;
    if (!inline_value && spec.style == layout::leading && typed.rfind("--", 0) == 0)
      return usage("option '" + typed + "' needs a value (" + typed + "=...)");
    if (!inline_value) {
      if (i + 1 >= args.size())
        return usage("option " + typed + " needs a value (" + o->value_name + ")");
      inline_value = args[++i];
    }
    e.text = *inline_value;
    if (!convert(*o, typed, e.text, &e, error)) return false;
    out.set(o->name, std::move(e));
  }
  if (out.operands.size() < spec.min_operands)
    return usage(spec.name.empty()
                     ? "missing " + spec.operands.substr(0, spec.operands.find(' '))
                     : "'" + spec.name + "' needs " +
                           (spec.operands.empty() ? std::string("operands") : spec.operands));
  if (out.operands.size() > spec.max_operands)
    return usage("unexpected argument '" + shown(out.operands[spec.max_operands]) + "'" +
                 for_command);
  return true;
}

int usage_error(const std::string& invocation, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\nTry '%s --help'.\n", invocation.c_str(), message.c_str(),
               invocation.c_str());
  return exit_usage;
}

bool parse_or_exit_status(const command& spec, const std::string& invocation, int argc, char** argv,
                          int first, parsed& out, int* exit_status) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) args.emplace_back(argv[i]);
  std::string error;
  if (!parse(spec, args, out, &error)) {
    *exit_status = usage_error(invocation, error);
    return false;
  }
  if (out.help) {
    const std::string help = help_text(invocation, spec);
    std::fwrite(help.data(), 1, help.size(), stdout);
    *exit_status = std::fflush(stdout) == 0 ? 0 : 1;
    return false;
  }
  return true;
}

std::string shown(std::string_view text, size_t limit) {
  std::string out;
  const size_t n = std::min(text.size(), limit);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    // C0 controls, DEL and the UTF-8 form of a C1 control (U+0080..U+009F, e.g. the CSI that
    // starts an escape sequence) are shown as bytes; everything else as typed.
    const bool c1 =
        c == 0xc2 && i + 1 < n && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80;
    if (c < 0x20 || c == 0x7f || c1) {
      for (size_t k = 0; k < (c1 ? 2u : 1u); ++k) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(text[i + k]));
        out += buf;
      }
      i += c1 ? 1 : 0;
      continue;
    }
    out += static_cast<char>(c);
  }
  if (text.size() > limit) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace cmdline
