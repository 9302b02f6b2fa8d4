#include "cli.h"

#include "unwind_check.h"

#include <cerrno>
#include <cmath>
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
  std::exit(cmdline::usage_error(program, message));
}

cmdline::parsed parse_command_line(const cmdline::command& spec, const char* program, int argc,
                                   char** argv) {
  cmdline::parsed a;
  int status = 0;
  if (!cmdline::parse_or_exit_status(spec, program, argc, argv, 1, a, &status))
    std::exit(status == 0 ? finish_output(program, 0) : status);
  return a;
}

cmdline::option publish_option(const char* what) {
  return {"publish", 0, "LIST",
          std::string("SDK publishers") + what +
              ": comma-separated registry, usdt-events, perfmap, jitdump, gdb, kernel, or "
              "all/none/default (default: $JITUNWIND_PUBLISH, else registry, usdt-events, perfmap, "
              "gdb)."};
}

jitunwind::publisher_set publishers(const char* program, const std::string& list) {
  auto set = jitunwind::parse_publishers(list);
  if (!set) usage_error(program, "--publish: " + set.error().message());
  return *set;
}

cmdline::option wait_for_tracer_option(const char* help) {
  return {.name = "wait-for-tracer",
          .value_name = "S",
          .help = help,
          .type = cmdline::kind::duration,
          .min = 0.001,
          .max = 3600,
          .implicit_value = "30"};
}

int wait_for_tracer_seconds(const cmdline::parsed& a) {
  return static_cast<int>(std::ceil(a.decimal("wait-for-tracer", 0)));
}

operands program_operands(const cmdline::parsed& a) {
  operands o;
  o.file = a.operands.at(0);  // the table asks for at least one
  o.args.assign(a.operands.begin() + 1, a.operands.end());
  return o;
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
