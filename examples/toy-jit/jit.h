// toy-jit's runtime: compiles every function of a program, places the code, runs main.
#pragma once

#include "codegen.h"
#include "toylang.h"
#include "unwind_check.h"

#include <jitunwind/sframe.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace toyjit {

struct jit_options {
  bool frame_pointers = true;
  /// AArch64 only (see codegen_options).
  bool save_lr_only = false;
  char pauth = 0;
  codegen_options::wrong_rows wrong_rows = codegen_options::wrong_rows::none;
  bool shadow_stack = false;
  /// Recompile a function every this many calls (0 = never).
  uint64_t recompile_every = 0;
  /// Called at checkpoint(tag) with the ground truth: the shadow stack, innermost first (empty
  /// without --shadow-stack). `interrupted` is null for a checkpoint that called the runtime;
  /// for one that trapped (AArch64 leaf functions) it holds the registers of the trap in JIT
  /// code, and the callback runs in the SIGTRAP handler.
  void (*on_checkpoint)(void* user, int64_t tag, std::span<const uint64_t> addrs,
                        const jitunwind::sframe::regs* interrupted) = nullptr;
  void* checkpoint_user = nullptr;
};

/// Where one function's current code is.
struct placed_function {
  std::string name;
  uint64_t start = 0;
  uint32_t size = 0;
  jitunwind::function_desc frames;
  std::vector<uint32_t> return_offsets;
  /// Time the placer spent in asmjit (relocation and copy), for --stats.
  uint64_t place_ns = 0;
};

class code_placer;

/// One JIT per process (the native helpers the code calls find it through a global).
class jit {
 public:
  static std::unique_ptr<jit> create(const toylang::program& p, const jit_options& options,
                                     std::unique_ptr<code_placer> placer, std::string& error);
  ~jit();

  int64_t run_main(std::span<const int64_t> args);

  const std::vector<placed_function>& functions() const { return functions_; }
  std::span<const uint64_t> ground_truth() const;
  code_placer& placer() { return *placer_; }
  uint64_t recompilations() const { return recompilations_; }
  /// Time spent in asmjit (generating, relocating and copying code), and in the SDK (window
  /// allocation, append, publish with every active publisher), over every compilation so far.
  struct timings {
    uint64_t functions = 0;
    uint64_t generate_ns = 0;
    uint64_t publish_ns = 0;
  };
  const timings& compile_timings() const { return timings_; }
  const toylang::program& program() const { return program_; }

  // Entry points of the native helpers (called from JIT code).
  static int64_t checkpoint_helper(int64_t tag);
  /// A checkpoint that trapped in JIT code (AArch64 leaf functions), from the SIGTRAP handler.
  static void checkpoint_trap(int64_t tag, const jitunwind::sframe::regs& interrupted);
  [[noreturn]] static void division_by_zero(int64_t line, int64_t column);
  [[noreturn]] static void stack_overflow(int64_t function_index);
  static void recompile_hook(int64_t function_index);

 private:
  jit(const toylang::program& p, const jit_options& options, std::unique_ptr<code_placer> placer);
  bool compile_all(std::string& error);
  bool compile(uint32_t index, bool recompiling, std::string& error);

  const toylang::program& program_;
  jit_options options_;
  std::unique_ptr<code_placer> placer_;
  runtime_addresses addresses_;
  codegen_options codegen_;
  std::vector<placed_function> functions_;
  // Read by generated code through absolute addresses (see runtime_addresses).
  std::unique_ptr<uint64_t[]> entry_table_;
  std::unique_ptr<int64_t[]> counters_;
  uint64_t* shadow_top_ = nullptr;
  uint64_t stack_limit_ = 0;
  std::unique_ptr<uint64_t[]> shadow_;
  uint64_t* shadow_end_ = nullptr;
  uint64_t recompilations_ = 0;
  timings timings_;
};

/// Puts generated code into executable memory and announces it (SDK windows and publishers).
class code_placer {
 public:
  virtual ~code_placer() = default;
  /// Places `g` as function `name`; `replaces` is the previous placement when recompiling
  /// (null the first time). Returns the new placement or an error message.
  virtual bool place(const std::string& name, generated_function& g,
                     const placed_function* replaces, placed_function& out, std::string& error) = 0;
  /// Makes everything placed so far executable and visible.
  virtual bool publish(std::string& error) = 0;
  /// Called at safe points (recompile hook): lets retired code be reclaimed.
  virtual void poll() {}
  /// The SFrame sections of every live code region, as currently published.
  virtual std::vector<toylang::jit_sframe> sframe_sections() = 0;
  /// One line for --stats: publishers and windows.
  virtual std::string describe() const { return {}; }
};

}  // namespace toyjit
