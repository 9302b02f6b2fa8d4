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

const cmdline::command command_line{
    .operands = "PROGRAM.toy [ARGS...]",
    .summary =
        "Compiles every function of a toylang program to x86-64 machine code (asmjit) and "
        "runs main(ARGS...), printing what the program prints and then main's value.",
    .options =
        {
            {.name = "frame-pointers",
             .help = "JIT code without frame pointers (--frame-pointers=off): rbp is a general "
                     "register and only SFrame/eh_frame unwind it.",
             .type = cmdline::kind::flag,
             .on_by_default = true},
            toylang::cli::publish_option(""),
            {.name = "sframe-version",
             .value_name = "2|3",
             .help = "SFrame version of the windows' sections (default 3, or "
                     "$JITUNWIND_SFRAME_VERSION).",
             .type = cmdline::kind::choice,
             .choices = {"2", "3"}},
            {.name = "windows",
             .value_name = "SIZE",
             .help = "Bytes of code per SDK code window, e.g. 4096, 64k, 1M (default 1M, at "
                     "most 1G: the SDK's limit per window); a full window is sealed and a new one "
                     "opened.",
             .type = cmdline::kind::size,
             .min = 1,
             .max = 1 << 30},
            {"shadow-stack", 0, "",
             "Maintain the ground-truth stack of JIT return addresses that the checkpoint probe "
             "reports (docs/ground-truth.md)."},
            {"recompile-every", 0, "N",
             "Recompile a function every N calls into fresh code (0 = never).",
             cmdline::kind::whole},
            {"verify-unwind", 0, "",
             "At every checkpoint, unwind this thread's stack in-process with the SDK's SFrame "
             "unwinder (no frame pointers) and compare with the shadow stack; summary on stderr, "
             "exit 5 on any mismatch (implies --shadow-stack)."},
            toylang::cli::wait_for_tracer_option(
                "After start-up, wait (at most S seconds, default 30) until a tracer attaches to "
                "the toyjit:checkpoint probe."),
            {"dump-frames", 0, "",
             "Print every function's address, size and frame rows to stderr after compiling "
             "(the rows the SDK publishes)."},
            {"stats", 0, "",
             "Print compile/publication times, recompilations and the publishers' state to "
             "stderr at exit."},
        },
    .min_operands = 1,
    .notes =
        "Exit status: 0 ok, 1 compile error, 2 usage error, 3 runtime error (or the output "
        "could not be written), 4 JIT or SDK failure or --wait-for-tracer timeout, 5 "
        "--verify-unwind mismatch.",
    .style = cmdline::layout::leading,
};

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
  const cmdline::parsed a =
      toylang::cli::parse_command_line(command_line, program_name, argc, argv);
  options o;
  o.jit.frame_pointers = a.state("frame-pointers").value_or(true);
  if (auto list = a.value("publish"))
    o.placement.publishers = toylang::cli::publishers(program_name, *list);
  o.placement.window_size = static_cast<size_t>(a.whole("windows", o.placement.window_size));
  o.sframe_version = a.value("sframe-version").value_or("");
  o.stats = a.flag("stats");
  o.dump_frames = a.flag("dump-frames");
  o.wait_for_tracer = toylang::cli::wait_for_tracer_seconds(a);
  o.verify_unwind = a.flag("verify-unwind");
  o.jit.shadow_stack = a.flag("shadow-stack") || o.verify_unwind;
  o.jit.recompile_every = a.whole("recompile-every", o.jit.recompile_every);
  auto [file, args] = toylang::cli::program_operands(a);
  o.file = std::move(file);
  o.args = std::move(args);
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
