#include "jitwalk/common.hpp"

#include <jitunwind/toolkit/output_file.hpp>
#include <jitunwind/toolkit/terminal_text.hpp>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace jitwalk {

int g_verbosity = 1;

namespace {
// Messages carry what the target chose (paths, names): escaped for the terminal.
void vprint(const char* prefix, const char* fmt, va_list ap) {
  std::string text = jitunwind::toolkit::terminal_text(jitunwind::toolkit::vformat(fmt, ap));
  std::fprintf(stderr, "jitwalk: %s%s\n", prefix, text.c_str());
}
}  // namespace

void note(const char* fmt, ...) {
  if (g_verbosity < 1) return;
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

void detail(const char* fmt, ...) {
  if (g_verbosity < 2) return;
  va_list ap;
  va_start(ap, fmt);
  vprint("", fmt, ap);
  va_end(ap);
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprint("warning: ", fmt, ap);
  va_end(ap);
}

jitunwind::toolkit::input_cuts& input_cuts() {
  static jitunwind::toolkit::input_cuts cuts;
  return cuts;
}

void warn_cut(std::string_view what, const error& why) {
  // add() escapes both for the terminal.
  std::fprintf(stderr, "jitwalk: warning: %s\n", input_cuts().add(what, why.message()).c_str());
}

int status_after_cuts(int status, uint64_t budget_refusals) {
  if (status != 0 || (input_cuts().count() == 0 && budget_refusals == 0)) return status;
  std::fprintf(stderr,
               "jitwalk: warning: limits left part of the target's data out (see the warnings "
               "above; --max-memory, --max-file): exit status %d\n",
               jitunwind::toolkit::exit_input_cut);
  return jitunwind::toolkit::exit_input_cut;
}

void report(const error& e) {
  std::fprintf(stderr, "jitwalk: error: %s\n",
               jitunwind::toolkit::terminal_text(e.message()).c_str());
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

result<void> check_output(const std::string& path, const char* what) {
  return jitunwind::toolkit::check_output_path(path, what);
}

result<void> write_output(const std::string& path, std::string_view contents, const char* what) {
  return jitunwind::toolkit::replace_file(path, contents, what);
}

}  // namespace jitwalk
