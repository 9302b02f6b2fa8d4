// toy-jit: compiles a toylang program to x86-64 with asmjit and runs it.
#include "cli.h"
#include "jit.h"
#include "placer.h"
#include "toylang.h"

#include <jitunwind/usdt.h>
#include <jitunwind/window.h>

#include "usdt_support.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

constexpr const char* program_name = "toy-jit";

constexpr const char* usage =
    "usage: toy-jit [OPTIONS] PROGRAM.toy [ARGS...]\n"
    "\n"
    "Compiles every function of a toylang program to x86-64 machine code (asmjit) and runs\n"
    "main(ARGS...), printing what the program prints and then main's value.\n"
    "\n"
    "options:\n"
    "  --frame-pointers=on|off  keep rbp as frame pointer in JIT code (default on); with off,\n"
    "                           rbp is a general register and only SFrame/eh_frame unwind it\n"
    "  --publish=LIST           SDK publishers: comma-separated registry, usdt-events, perfmap,\n"
    "                           jitdump, gdb, kernel, or all/none/default (default:\n"
    "                           $JITUNWIND_PUBLISH, else registry, usdt-events, perfmap, gdb)\n"
    "  --sframe-version=2|3     SFrame version of the windows' sections (default 3, or\n"
    "                           $JITUNWIND_SFRAME_VERSION)\n"
    "  --windows=SIZE           bytes of code per SDK code window, e.g. 4096, 64k, 1m\n"
    "                           (default 1m); a full window is sealed and a new one opened\n"
    "  --shadow-stack           maintain the ground-truth stack of JIT return addresses that\n"
    "                           the checkpoint probe reports (docs/ground-truth.md)\n"
    "  --recompile-every=N      recompile a function every N calls into fresh code (0 = never)\n"
    "  --verify-unwind          at every checkpoint, unwind this thread's stack in-process with\n"
    "                           the SDK's SFrame unwinder (no frame pointers) and compare with\n"
    "                           the shadow stack; summary on stderr, exit 5 on any mismatch\n"
    "                           (implies --shadow-stack)\n"
    "  --wait-for-tracer[=S]    after start-up, wait (at most S seconds, default 30) until a\n"
    "                           tracer attaches to the toyjit:checkpoint probe\n"
    "  --dump-frames            print every function's address, size and frame rows to\n"
    "                           stderr after compiling (the rows the SDK publishes)\n"
    "  --stats                  print compile/publication times, recompilations and the\n"
    "                           publishers' state to stderr at exit\n"
    "  --help                   this text\n"
    "\n"
    "exit status: 0 ok, 1 compile error, 2 usage error, 3 runtime error (or the output could\n"
    "             not be written), 4 JIT or SDK failure or --wait-for-tracer timeout,\n"
    "             5 --verify-unwind mismatch\n";

struct options {
  toyjit::jit_options jit;
  toyjit::placer_options placement;
  bool verify_unwind = false;
  bool stats = false;
  bool dump_frames = false;
  int wait_for_tracer = 0;
  std::string sframe_version;  ///< empty: the SDK's default (or $JITUNWIND_SFRAME_VERSION)
  std::string file;
  std::vector<std::string> args;
};

options parse_command_line(int argc, char** argv) {
  options o;
  toylang::cli::option_scanner s(program_name, usage, argc, argv);
  while (s.next()) {
    const std::string_view a = s.arg();
    const std::string_view flag = s.flag();
    const bool has_value = s.has_value();
    if (flag == "--frame-pointers" && has_value) {
      o.jit.frame_pointers = s.on_off();
    } else if (flag == "--publish" && has_value) {
      o.placement.publishers = s.publishers();
    } else if (flag == "--windows" && has_value) {
      o.placement.window_size = s.size();
      if (o.placement.window_size > (size_t{1} << 30))
        s.error("--windows takes at most 1g (the SDK's limit per window)");
    } else if (flag == "--sframe-version" && has_value) {
      o.sframe_version = std::string(s.value());
      if (o.sframe_version != "2" && o.sframe_version != "3")
        s.error("--sframe-version takes 2 or 3");
    } else if (a == "--stats") {
      o.stats = true;
    } else if (a == "--dump-frames") {
      o.dump_frames = true;
    } else if (flag == "--wait-for-tracer") {
      o.wait_for_tracer = has_value ? s.seconds() : 30;
    } else if (a == "--shadow-stack") {
      o.jit.shadow_stack = true;
    } else if (a == "--verify-unwind") {
      o.verify_unwind = true;
      o.jit.shadow_stack = true;
    } else if (flag == "--recompile-every" && has_value) {
      o.jit.recompile_every = s.count();
    } else {
      s.unknown();
    }
  }
  s.operands(o.file, o.args);
  return o;
}

// One line per row: "  +OFFSET  CFA=rsp+16  rbp@CFA-16" (what SFrame and .eh_frame say).
void dump_frames(const toyjit::jit& jit) {
  for (const auto& f : jit.functions()) {
    std::fprintf(stderr, "%s at 0x%" PRIx64 ", %u bytes, %zu rows, return addresses at +",
                 f.name.c_str(), f.start, f.size, f.frames.rows.size());
    for (size_t i = 0; i < f.return_offsets.size(); ++i) {
      std::fprintf(stderr, "%s%u", i ? "," : "", f.return_offsets[i]);
    }
    std::fprintf(stderr, "\n");
    for (const auto& r : f.frames.rows) {
      std::fprintf(stderr, "  +%-4u CFA=%s%+d", r.pc_offset,
                   r.cfa == jitunwind::cfa_base::sp ? "rsp" : "rbp", r.cfa_offset);
      if (r.fp == jitunwind::fp_rule::saved) std::fprintf(stderr, "  rbp@CFA%+d", r.fp_offset);
      std::fprintf(stderr, "\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  options opt = parse_command_line(argc, argv);
  // --publish wins over $JITUNWIND_PUBLISH, even over a value the SDK would reject.
  if (opt.placement.publishers) ::unsetenv("JITUNWIND_PUBLISH");
  // The SDK session reads its SFrame version from the environment (session_options::from_env).
  if (!opt.sframe_version.empty())
    ::setenv("JITUNWIND_SFRAME_VERSION", opt.sframe_version.c_str(), 1);
  // A bad JITUNWIND_* setting is a usage error (2), as in toy-interp, not a JIT failure (4).
  if (auto env = jitunwind::session_options::from_env(); !env)
    toylang::cli::usage_error(program_name, env.error().message());
  toylang::cli::exit_on_out_of_memory(program_name);
  const toylang::cli::loaded_program loaded = toylang::cli::load(program_name, opt.file, opt.args);

  std::string error;
  // The ground-truth probe toyjit:checkpoint(tag, count, addrs), a dynamic USDT probe.
  auto provider = jitunwind::usdt::provider::create("toyjit");
  if (!provider) {
    std::fprintf(stderr, "toy-jit: %s\n", provider.error().message().c_str());
    return 4;
  }
  auto checkpoint_probe = provider->add_probe("checkpoint", toylang::checkpoint_args);
  if (!checkpoint_probe) {
    std::fprintf(stderr, "toy-jit: %s\n", checkpoint_probe.error().message().c_str());
    return 4;
  }
  if (auto r = provider->load(); !r) {
    // Tracing is optional: run without the probe.
    std::fprintf(stderr, "toy-jit: warning: no checkpoint probe: %s\n",
                 r.error().message().c_str());
  }
  struct checkpoint_context {
    uint64_t count = 0;
    size_t deepest = 0;
    toyjit::jit* jit = nullptr;
    jitunwind::usdt::probe probe;
    std::unique_ptr<toylang::unwind_checker> checker;
  } ctx;
  ctx.probe = *checkpoint_probe;
  if (opt.verify_unwind) {
    ctx.checker = toylang::unwind_checker::create(error);
    if (!ctx.checker) {
      std::fprintf(stderr, "toy-jit: --verify-unwind: %s\n", error.c_str());
      return 4;
    }
  }
  opt.jit.checkpoint_user = &ctx;
  opt.jit.on_checkpoint = [](void* user, int64_t tag, std::span<const uint64_t> truth) {
    auto& c = *static_cast<checkpoint_context*>(user);
    ++c.count;
    c.deepest = std::max(c.deepest, truth.size());
    toylang::fire_checkpoint(c.probe, tag, truth);
    if (c.checker) {
      const auto sections = c.jit->placer().sframe_sections();
      const auto outcome = c.checker->check(truth, sections);
      if (!outcome.exact || !outcome.complete) {
        std::fprintf(stderr, "toy-jit: verify-unwind: checkpoint %" PRId64 ": %s\n", tag,
                     outcome.message.c_str());
      }
    }
  };
  opt.placement.log = toylang::cli::stderr_log(program_name);
  auto placer = toyjit::make_sdk_placer(opt.placement, error);
  if (!placer) {
    std::fprintf(stderr, "toy-jit: %s\n", error.c_str());
    return 4;
  }
  auto jit = toyjit::jit::create(loaded.source, opt.jit, std::move(placer), error);
  if (!jit) {
    std::fprintf(stderr, "toy-jit: %s\n", error.c_str());
    return 4;
  }
  ctx.jit = jit.get();
  if (opt.dump_frames) dump_frames(*jit);
  if (opt.wait_for_tracer != 0) {
    const jitunwind::usdt::probe probes[] = {ctx.probe};
    if (!provider->loaded() ||
        !toylang::wait_for_tracer("toy-jit", *provider, probes,
                                  std::chrono::seconds(opt.wait_for_tracer))) {
      std::fprintf(stderr, "toy-jit: --wait-for-tracer: no tracer attached within %d s\n",
                   opt.wait_for_tracer);
      return 4;
    }
  }
  const int64_t value = jit->run_main(loaded.args);
  std::printf("%" PRId64 "\n", value);
  std::fflush(stdout);
  if (opt.stats) {
    const auto& t = jit->compile_timings();
    std::fprintf(stderr,
                 "toy-jit: stats: %" PRIu64 " compilations (%" PRIu64
                 " recompilations), asmjit %.1f us, jitunwind %.1f us, ratio %.3f\n",
                 t.functions, jit->recompilations(), t.generate_ns / 1e3, t.publish_ns / 1e3,
                 t.generate_ns ? static_cast<double>(t.publish_ns) / t.generate_ns : 0.0);
    std::fprintf(stderr, "toy-jit: stats: %s\n", jit->placer().describe().c_str());
    std::fprintf(stderr, "toy-jit: stats: checkpoints %" PRIu64 " deepest %zu\n", ctx.count,
                 ctx.deepest);
  }
  const int status =
      ctx.checker ? toylang::cli::verify_unwind_status(program_name, *ctx.checker) : 0;
  return toylang::cli::finish_output(program_name, status);
}
