// The public C++ headers as an embedder compiles them: built twice, at -std=c++17 and
// -std=c++20 (-pedantic -Werror), from the public include directory only
// (tests/capi/CMakeLists.txt). It includes every embedding header, uses jitunwind::span with the
// containers a C++17 program has, the result helpers (value_or, JITUNWIND_TRY,
// JITUNWIND_TRY_ASSIGN) and the on-ramp, and checks that value() on an error ends the program the
// documented way in this build type. Prints "ok" and exits 0 when every check holds.
#include <jitunwind/config.h>
#include <jitunwind/frame.h>
#include <jitunwind/jitunwind.h>
#include <jitunwind/log.h>
#include <jitunwind/onramp.h>
#include <jitunwind/registry_abi.h>
#include <jitunwind/remote.h>
#include <jitunwind/result.h>
#include <jitunwind/span.h>
#include <jitunwind/trampolines.h>
#include <jitunwind/usdt.h>
#include <jitunwind/window.h>
#if __cplusplus >= 202002L
#include <jitunwind/cfi.h>  // tooling headers: C++20 only
#include <jitunwind/sframe.h>
#endif

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace jitunwind;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "cxx_headers (C++%ld): FAILED: %s\n", __cplusplus / 100 % 100, what);
    ++failures;
  }
}

result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return error(errc::invalid_argument, std::string("not a digit: ") + c);
  return c - '0';
}

// Propagation with and without a value, in functions of other result types.
result<int> sum_digits(const char* s) {
  int sum = 0;
  for (; *s != '\0'; ++s) {
    JITUNWIND_TRY_ASSIGN(const int d, parse_digit(*s));
    sum += d;
  }
  return sum;
}

result<void> all_digits(const char* s) {
  for (; *s != '\0'; ++s) JITUNWIND_TRY(parse_digit(*s));
  return {};
}

// value() of an error, in a child: must print the error and abort, whatever NDEBUG says.
void check_value_on_error_aborts() {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return check(false, "pipe");
  const pid_t child = fork();
  if (child == 0) {
    dup2(pipe_fds[1], 2);
    result<int> r = parse_digit('x');
    std::printf("%d\n", r.value());  // must not return
    std::_Exit(0);
  }
  close(pipe_fds[1]);
  char buf[512] = {};
  size_t n = 0;
  for (ssize_t got; (got = read(pipe_fds[0], buf + n, sizeof buf - 1 - n)) > 0;) n += got;
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  check(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "value() on an error: SIGABRT");
  check(std::strstr(buf, "invalid_argument: not a digit: x") != nullptr,
        "value() on an error: the error on stderr");
}

}  // namespace

int main() {
  // Versions: the headers' and the library's agree.
  check(jitunwind_version() == JITUNWIND_VERSION, "jitunwind_version()");
  check(std::string(jitunwind_version_string()) == JITUNWIND_VERSION_STRING, "version string");

  // result helpers.
  check(parse_digit('7').value_or(-1) == 7, "value_or of a value");
  check(parse_digit('x').value_or(-1) == -1, "value_or of an error");
  check(sum_digits("123").value_or(-1) == 6, "JITUNWIND_TRY_ASSIGN: values");
  auto bad = sum_digits("12x");
  check(!bad.ok() && bad.error().message() == "not a digit: x", "JITUNWIND_TRY_ASSIGN: error");
  check(all_digits("42").ok() && !all_digits("4-2").ok(), "JITUNWIND_TRY");
  check_value_on_error_aborts();

  // span from the containers of C++17, and frame rows compared.
  const std::vector<frame_row> rows{entry_row(abi::amd64)};
  const std::array<recipes::epilogue, 1> epilogues{{{10, 11}}};
  span<const frame_row> view = rows;
  check(view.size() == 1 && view[0] == entry_row(abi::amd64), "span of a vector, row ==");
  auto fp = recipes::frame_pointer(abi::amd64, 0x1000, 11, 1, 4, epilogues);
  check(fp.ok() && fp->rows.size() == 4 && fp->rows.front() != fp->rows.back(),
        "recipes::frame_pointer with a std::array of epilogues");

  // The on-ramp, registry only (no files).
  setenv("JITUNWIND_PUBLISH", "registry", 1);
  static const unsigned char code[16] = {0xc3};
  check(name_code(code, sizeof code, "cxx:ret", rows).ok(), "name_code");
  check(forget_code(code).ok(), "forget_code");

  if (failures == 0) std::printf("cxx_headers (C++%ld): ok\n", __cplusplus / 100 % 100);
  return failures == 0 ? 0 : 1;
}
