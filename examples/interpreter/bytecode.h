// The interpreter's bytecode: a stack machine compiled from the toylang AST.
//
// Each function has `num_slots` local slots (parameters first) followed by an operand stack of
// at most `max_stack` values; both live in the interpreter's value stack. A call pops the
// arguments from the caller's operand stack; they become the callee's first slots in place.
#pragma once

#include "toylang.h"

#include <cstdint>
#include <string>
#include <vector>

namespace toyinterp {

enum class opcode : uint8_t {
  constant,  ///< push constants[a]
  load,      ///< push slot a
  store,     ///< pop into slot a
  pop,       ///< drop the top
  add,
  sub,
  mul,
  div,
  mod,  ///< div/mod: a = line, b = column (for the division-by-zero error)
  neg,
  logical_not,
  to_bool,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  jump,             ///< pc = a
  jump_if_zero,     ///< pop; if zero, pc = a
  jump_if_nonzero,  ///< pop; if non-zero, pc = a
  call,             ///< call function a (its arity is known); pushes the result
  builtin,          ///< call builtin a with one argument; pushes the result
  line,             ///< a statement of line a starts (only emitted when probes are compiled in)
  ret,              ///< pop the result and return it
};

const char* name(opcode op);

struct instruction {
  opcode op;
  int32_t a = 0;
  int32_t b = 0;
};

struct function {
  std::string name;
  uint32_t line = 0;    ///< where the function is defined (for runtime errors raised at entry)
  uint32_t column = 0;
  uint32_t index = 0;
  uint32_t arity = 0;
  uint32_t num_slots = 0;  ///< parameters + locals
  uint32_t max_stack = 0;  ///< deepest operand stack
  std::vector<instruction> code;
  /// The same function with a `line` instruction before every statement; empty unless
  /// compile_options::line_events. The eval loop switches to it (at function entry) only while
  /// the line probe is enabled, so untraced code never dispatches `line` instructions.
  std::vector<instruction> code_with_lines;
  std::vector<int64_t> constants;
};

struct program {
  std::string file;
  std::vector<function> functions;
  uint32_t main_index = 0;
};

struct compile_options {
  /// Also produce `code_with_lines` for the `line` probe.
  bool line_events = false;
};

/// Compiles a checked toylang program. Never fails: the front end has checked everything.
program compile(const toylang::program& source, const compile_options& options);

/// Human-readable listing (for --dump-bytecode and tests).
std::string disassemble(const program& p);

}  // namespace toyinterp
