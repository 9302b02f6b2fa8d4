#include "internal.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace toylang {

const char* spelling(binary_op op) {
  switch (op) {
    case binary_op::mul:
      return "*";
    case binary_op::div:
      return "/";
    case binary_op::mod:
      return "%";
    case binary_op::add:
      return "+";
    case binary_op::sub:
      return "-";
    case binary_op::lt:
      return "<";
    case binary_op::le:
      return "<=";
    case binary_op::gt:
      return ">";
    case binary_op::ge:
      return ">=";
    case binary_op::eq:
      return "==";
    case binary_op::ne:
      return "!=";
    case binary_op::logical_and:
      return "&&";
    case binary_op::logical_or:
      return "||";
  }
  return "?";
}

const char* spelling(unary_op op) {
  return op == unary_op::neg ? "-" : "!";
}

std::optional<uint32_t> program::find(const std::string& name) const {
  for (const function& f : functions) {
    if (f.name == name) return f.index;
  }
  return std::nullopt;
}

std::optional<program> compile(const std::string& file, const std::string& source,
                               std::vector<diagnostic>& errors) {
  program p;
  p.file = file;
  if (!detail::parse(source, p.functions, errors)) return std::nullopt;
  for (uint32_t i = 0; i < p.functions.size(); ++i) p.functions[i].index = i;
  const size_t before = errors.size();
  detail::check(p, errors);
  if (errors.size() != before) {
    std::stable_sort(errors.begin() + static_cast<std::ptrdiff_t>(before), errors.end(),
                     [](const diagnostic& a, const diagnostic& b) {
                       return a.where.line != b.where.line ? a.where.line < b.where.line
                                                           : a.where.column < b.where.column;
                     });
    return std::nullopt;
  }
  return p;
}

std::optional<program> compile_file(const std::string& path, std::vector<diagnostic>& errors) {
  // A directory opens as an ifstream and then reads as empty: say so, not "no function 'main'".
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    errors.push_back({{0, 0}, "cannot read '" + path + "': " + std::strerror(EISDIR)});
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back({{0, 0}, "cannot read '" + path + "': " + std::strerror(errno)});
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return compile(path, text.str(), errors);
}

std::string format(const std::string& file, const std::vector<diagnostic>& errors) {
  std::string out;
  for (const diagnostic& d : errors) {
    if (d.where.line == 0) {
      out += file + ": error: " + d.message + "\n";
    } else {
      out += file + ":" + std::to_string(d.where.line) + ":" + std::to_string(d.where.column) +
             ": error: " + d.message + "\n";
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> parse_arguments(const program& p,
                                                    const std::vector<std::string>& args,
                                                    std::string& message) {
  const auto main = p.find("main");
  if (!main) {
    message = "no function 'main'";
    return std::nullopt;
  }
  const size_t want = p.functions[*main].params.size();
  if (args.size() != want) {
    message = "'main' takes " + std::to_string(want) + " argument" + (want == 1 ? "" : "s") + ", " +
              std::to_string(args.size()) + " given on the command line";
    return std::nullopt;
  }
  std::vector<int64_t> values;
  for (const std::string& a : args) {
    errno = 0;
    char* end = nullptr;
    // Decimal, or hexadecimal with 0x (no octal: "010" is ten, as in the language).
    const size_t digits = (a.size() > 0 && (a[0] == '-' || a[0] == '+')) ? 1 : 0;
    const bool hex =
        a.size() > digits + 1 && a[digits] == '0' && (a[digits + 1] == 'x' || a[digits + 1] == 'X');
    // Unsigned hex spells any 64-bit pattern, as literals do (0xffffffffffffffff is -1).
    const long long v = hex && digits == 0
                            ? static_cast<long long>(std::strtoull(a.c_str(), &end, 16))
                            : std::strtoll(a.c_str(), &end, hex ? 16 : 10);
    // strtoll skips leading blanks; an argument with them is a mistake.
    if (a.empty() || std::isspace(static_cast<unsigned char>(a[0])) || end == nullptr ||
        *end != '\0' || errno == ERANGE) {
      message = "argument '" + a + "' is not a 64-bit integer";
      return std::nullopt;
    }
    values.push_back(v);
  }
  return values;
}

}  // namespace toylang
