// toy-interp: runs a toylang program in a bytecode interpreter.
#include "bytecode.h"
#include "cli.h"
#include "interp.h"
#include "probes.h"
#include "toylang.h"
#include "unwind_check.h"

#include <jitunwind/trampolines.h>
#include <jitunwind/window.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr const char* program_name = "toy-interp";

const cmdline::command command_line{
    .operands = "PROGRAM.toy [ARGS...]",
    .summary =
        "Runs main(ARGS...) of a toylang program in a bytecode interpreter, printing what "
        "the program prints and then main's value.",
    .options =
        {
            {.name = "trampolines",
             .help = "Call toy functions directly (--trampolines=off); by default each has its "
                     "own native trampoline, so profilers and debuggers see toy:<function> "
                     "frames.",
             .type = cmdline::kind::flag,
             .on_by_default = true},
            {.name = "probes",
             .help = "No USDT probes (--probes=off); by default toyinterp:function__entry/"
                     "function__return/line/checkpoint are there, and cost one check per call "
                     "untraced.",
             .type = cmdline::kind::flag,
             .on_by_default = true},
            toylang::cli::publish_option(" for the trampolines"),
            toylang::cli::wait_for_tracer_option(
                "After loading the probes, wait (at most S seconds, default 30) until a tracer "
                "attaches to one of them."),
            {"wait-for-probes", 0, "LIST",
             "The same, until every probe in LIST (comma-separated: function__entry, "
             "function__return, line, checkpoint) is enabled: a tracer attaches its probes one "
             "at a time."},
            {"stats", 0, "",
             "Print calls per function to stderr after the run (and how the probes are checked: "
             "one word, or probe by probe)."},
            {"verify-unwind", 0, "",
             "At every checkpoint, unwind this thread's stack in-process with the SDK's SFrame "
             "unwinder and compare the trampoline frames with the ground truth; summary on "
             "stderr, exit 5 on any mismatch (needs --trampolines=on)."},
            {"dump-bytecode", 0, "", "Print the bytecode and exit."},
        },
    .min_operands = 1,
    .notes =
        "Exit status: 0 ok, 1 compile error, 2 usage error, 3 runtime error (or the output "
        "could not be written), 4 SDK failure or --wait-for-tracer timeout, 5 "
        "--verify-unwind mismatch.",
    .style = cmdline::layout::leading,
};

struct options {
  std::optional<jitunwind::publisher_set> publishers;
  bool verify_unwind = false;
  int wait_for_tracer = 0;                   // seconds, 0 = do not wait
  std::vector<std::string> wait_for_probes;  // all of them, not only one
  bool trampolines = true;
  bool probes = true;
  bool stats = false;
  bool dump = false;
  std::string file;
  std::vector<std::string> args;
};

// The probe names of --wait-for-probes=LIST, each checked.
std::vector<std::string> probe_list(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string name(list.substr(0, comma));
    const auto& known = toyinterp::probes::probe_names;
    if (std::find(std::begin(known), std::end(known), name) == std::end(known))
      toylang::cli::usage_error(program_name, "--wait-for-probes: no probe named '" + name + "'");
    names.push_back(name);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  if (names.empty()) toylang::cli::usage_error(program_name, "--wait-for-probes needs probe names");
  return names;
}

options parse_command_line(int argc, char** argv) {
  const cmdline::parsed a =
      toylang::cli::parse_command_line(command_line, program_name, argc, argv);
  options o;
  o.trampolines = a.state("trampolines").value_or(true);
  o.probes = a.state("probes").value_or(true);
  if (auto list = a.value("publish")) o.publishers = toylang::cli::publishers(program_name, *list);
  o.wait_for_tracer = toylang::cli::wait_for_tracer_seconds(a);
  if (auto list = a.value("wait-for-probes")) {
    o.wait_for_probes = probe_list(*list);
    if (o.wait_for_tracer == 0) o.wait_for_tracer = 30;
  }
  o.verify_unwind = a.flag("verify-unwind");
  o.stats = a.flag("stats");
  o.dump = a.flag("dump-bytecode");
  auto [file, args] = toylang::cli::program_operands(a);
  o.file = std::move(file);
  o.args = std::move(args);
  if (o.verify_unwind && !o.trampolines)
    toylang::cli::usage_error(program_name, "--verify-unwind needs --trampolines=on");
  if (o.wait_for_tracer != 0 && (!o.probes || TOYINTERP_PROBES == 0)) {
    toylang::cli::usage_error(
        program_name, "--wait-for-tracer needs the probes (--probes=on, a build with probes)");
  }
  return o;
}

int fatal(const std::string& message) {
  std::fprintf(stderr, "toy-interp: %s\n", message.c_str());
  return 4;
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse_command_line(argc, argv);
  // --publish wins over $JITUNWIND_PUBLISH, even over a value the SDK would reject.
  if (opt.publishers) ::unsetenv("JITUNWIND_PUBLISH");
  toylang::cli::exit_on_out_of_memory(program_name);
  // --dump-bytecode runs nothing, so main's arguments are not needed.
  const toylang::cli::loaded_program loaded =
      toylang::cli::load(program_name, opt.file, opt.args, /*with_args=*/!opt.dump);

  toyinterp::compile_options copts;
  copts.line_events = TOYINTERP_PROBES != 0 && opt.probes;
  const toyinterp::program program = toyinterp::compile(loaded.source, copts);
  if (opt.dump) {
    std::fputs(toyinterp::disassemble(program).c_str(), stdout);
    return toylang::cli::finish_output(program_name, 0);
  }

  std::unique_ptr<toyinterp::probes> probes;
#if TOYINTERP_PROBES
  if (opt.probes) {
    std::string error;
    probes = toyinterp::probes::create(error);
    if (!probes)
      std::fprintf(stderr, "toy-interp: warning: probes unavailable: %s\n", error.c_str());
  }
#endif

  // Trampolines: one SDK stub per toy function, named toy:<function>.
  std::unique_ptr<jitunwind::session> session;
  std::unique_ptr<jitunwind::trampoline_pool> pool;
  toyinterp::interp_options iopts;
  if (opt.trampolines) {
    auto so = jitunwind::session_options::from_env();
    if (!so) toylang::cli::usage_error(program_name, so.error().message());
    if (opt.publishers) so->publishers = *opt.publishers;
    so->log = toylang::cli::stderr_log(program_name);
    auto s = jitunwind::session::create(*so);
    if (!s) return fatal("creating the jitunwind session: " + s.error().message());
    session = std::move(*s);
    jitunwind::trampoline_pool_options po;
    po.name_prefix = "toy:";
    po.near_address = toyinterp::interpreter::eval_address();
    auto p = jitunwind::trampoline_pool::create(*session, po);
    if (!p) return fatal("creating the trampoline pool: " + p.error().message());
    pool = std::move(*p);
    for (const auto& f : program.functions) {
      auto t = pool->acquire(f.name);
      if (!t) return fatal("trampoline for '" + f.name + "': " + t.error().message());
      iopts.trampolines.push_back(reinterpret_cast<toyinterp::trampoline_fn>(t->entry));
      iopts.trampoline_return_addresses.push_back(t->return_address);
    }
  }

  struct checkpoint_context {
    uint64_t count = 0;
    size_t deepest = 0;
    toyinterp::probes* probes = nullptr;
    jitunwind::trampoline_pool* pool = nullptr;
    std::unique_ptr<toylang::unwind_checker> checker;
  } ctx;
  ctx.probes = probes.get();
  ctx.pool = pool.get();
  if (opt.verify_unwind) {
    std::string error;
    ctx.checker = toylang::unwind_checker::create(error);
    if (!ctx.checker) return fatal("--verify-unwind: " + error);
  }
  iopts.checkpoint_user = &ctx;
  iopts.on_checkpoint = [](void* user, int64_t tag, std::span<const uint64_t> truth) {
    auto& c = *static_cast<checkpoint_context*>(user);
    ++c.count;
    c.deepest = std::max(c.deepest, truth.size());
    // The ground-truth probe (docs/ground-truth.md): at most 512 entries, else not reported.
    if (c.probes != nullptr) c.probes->checkpoint(tag, truth);
    if (c.checker) {
      std::vector<toylang::jit_sframe> sections;
      for (const jitunwind::window* w : c.pool->windows()) {
        const auto bytes = w->published_sframe();
        sections.push_back({bytes, reinterpret_cast<uint64_t>(bytes.data()), w->text_start(),
                            w->text_start() + w->text_size()});
      }
      const auto outcome = c.checker->check(truth, sections);
      if (!outcome.exact || !outcome.complete) {
        std::fprintf(stderr, "toy-interp: verify-unwind: checkpoint %" PRId64 ": %s\n", tag,
                     outcome.message.c_str());
      }
    }
  };
  toyinterp::interpreter interp(program, std::move(iopts), probes.get());
  if (opt.wait_for_tracer != 0 && probes &&
      !probes->wait_for_tracer(std::chrono::seconds(opt.wait_for_tracer), opt.wait_for_probes)) {
    return fatal("--wait-for-tracer: no tracer attached within " +
                 std::to_string(opt.wait_for_tracer) + " s");
  }
  const int64_t value = interp.run_main(loaded.args);
  std::printf("%" PRId64 "\n", value);
  std::fflush(stdout);
  if (opt.stats) {
    for (const auto& f : program.functions) {
      std::fprintf(stderr, "calls %s %" PRIu64 "\n", f.name.c_str(), interp.call_counts()[f.index]);
    }
    std::fprintf(stderr, "checkpoints %" PRIu64 " deepest %zu\n", ctx.count, ctx.deepest);
    if (probes) {
      std::fprintf(stderr, "probe check %s\n",
                   probes->one_word_check() ? "one word" : "probe by probe");
    }
  }
  const int status =
      ctx.checker ? toylang::cli::verify_unwind_status(program_name, *ctx.checker) : 0;
  return toylang::cli::finish_output(program_name, status);
}
