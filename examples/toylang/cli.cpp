#include "cli.h"

#include "unwind_check.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace toylang::cli {

int finish_output(const char* program, int status) {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && std::ferror(stdout) == 0) return status;
  // ferror alone: an earlier write failed and its errno is long gone.
  std::fprintf(stderr, "%s: writing standard output failed: %s\n", program,
               !flushed && errno != 0 ? std::strerror(errno) : "an earlier write failed");
  return 3;
}

void usage_error(const char* program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n(see %s --help)\n", program, message.c_str(), program);
  std::exit(2);
}

bool option_scanner::next() {
  if (next_ >= argc_) return false;
  const std::string_view a = argv_[next_];
  if (a.size() < 2 || a.substr(0, 2) != "--") return false;
  ++next_;
  if (a == "--") return false;
  if (a == "--help") {
    std::fputs(usage_, stdout);
    std::exit(finish_output(program_, 0));
  }
  const size_t eq = a.find('=');
  arg_ = a;
  flag_ = a.substr(0, eq);
  has_value_ = eq != std::string_view::npos;
  value_ = has_value_ ? a.substr(eq + 1) : "";
  return true;
}

void option_scanner::unknown() const {
  if (!has_value_ &&
      std::string_view(usage_).find(std::string(flag_) + "=") != std::string_view::npos)
    error("option '" + std::string(flag_) + "' needs a value (" + std::string(flag_) + "=...)");
  error("unknown option '" + std::string(arg_) + "'");
}

bool option_scanner::on_off() const {
  if (value_ == "on") return true;
  if (value_ == "off") return false;
  error(std::string(flag_) + " takes 'on' or 'off', not '" + std::string(value_) + "'");
}

uint64_t option_scanner::parse_count(std::string_view value) const {
  const std::string text(value);
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  // Digits only: strtoull would also take blanks, '+' and '-'.
  if (text.empty() || *end != '\0' || errno != 0 ||
      !std::isdigit(static_cast<unsigned char>(text[0]))) {
    error(std::string(flag_) + " takes a non-negative integer, not '" + std::string(value) + "'");
  }
  return v;
}

size_t option_scanner::size() const {
  std::string text(value_);
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        scale = 1024;
        break;
      case 'm':
      case 'M':
        scale = 1024 * 1024;
        break;
      case 'g':
      case 'G':
        scale = 1024 * 1024 * 1024;
        break;
      default:
        break;
    }
    if (scale != 1) text.pop_back();
  }
  const bool digits = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
  const uint64_t n = digits ? parse_count(text) : 0;
  if (n == 0 || n > (uint64_t{1} << 32) / scale) {
    error(std::string(flag_) + " takes a size from 1 byte to 4g, not '" + std::string(value_) +
          "'");
  }
  return static_cast<size_t>(n * scale);
}

int option_scanner::seconds() const {
  const std::string text(value_);
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || v < 1 ||
      v > 3600) {
    error(std::string(flag_) + " takes a number of seconds (1..3600), not '" + text + "'");
  }
  return static_cast<int>(v);
}

jitunwind::publisher_set option_scanner::publishers() const {
  auto set = jitunwind::parse_publishers(value_);
  if (!set) error(std::string(flag_) + ": " + set.error().message());
  return *set;
}

void option_scanner::operands(std::string& file, std::vector<std::string>& args) {
  if (next_ >= argc_) error("no PROGRAM.toy given");
  file = argv_[next_++];
  for (; next_ < argc_; ++next_) args.emplace_back(argv_[next_]);
}

namespace {
const char* out_of_memory_program = "";
}

void exit_on_out_of_memory(const char* program) {
  out_of_memory_program = program;
  std::set_new_handler([] {
    std::fprintf(stderr, "%s: out of memory\n", out_of_memory_program);
    std::_Exit(3);
  });
}

loaded_program load(const char* program, const std::string& file,
                    const std::vector<std::string>& args, bool with_args) {
  std::vector<diagnostic> errors;
  auto source = compile_file(file, errors);
  if (!source) {
    std::fputs(format(file, errors).c_str(), stderr);
    std::exit(1);
  }
  if (!with_args) return {std::move(*source), {}};
  std::string message;
  auto values = parse_arguments(*source, args, message);
  if (!values) usage_error(program, message);
  return {std::move(*source), std::move(*values)};
}

jitunwind::log_sink stderr_log(const char* program) {
  jitunwind::log_sink sink;
  sink.fn = [](void* user, jitunwind::log_level level, std::string_view text) {
    std::fprintf(stderr, "%s: jitunwind %s: %.*s\n", static_cast<const char*>(user),
                 jitunwind::to_string(level), static_cast<int>(text.size()), text.data());
  };
  sink.user = const_cast<char*>(program);  // only ever read back as const char*
  sink.min_level = jitunwind::log_level::warning;
  return sink;
}

int verify_unwind_status(const char* program, const unwind_checker& checker) {
  std::fprintf(stderr, "%s: %s\n", program, checker.summary().c_str());
  const bool all = checker.exact() == checker.checks() && checker.complete() == checker.checks();
  return all ? 0 : 5;
}

}  // namespace toylang::cli
