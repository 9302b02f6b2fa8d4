// toylang — the tiny language shared by examples/toy-jit and examples/interpreter.
//
// A program is a list of functions over 64-bit integers:
//
//   // comment
//   fn fib(n) {
//     if (n < 2) { return n; }
//     return fib(n - 1) + fib(n - 2);
//   }
//   fn main(n) { print(fib(n)); return 0; }
//
// Statements: `let x = e;`, `x = e;`, `if (e) {...} else if (e) {...} else {...}`,
// `while (e) {...}`, `return e;` / `return;`, `e;`. Expressions: decimal or 0x integers,
// variables, calls, unary `-` `!`, binary `* / % + - < <= > >= == != && ||` with C precedence.
// Arithmetic wraps (two's complement); `/` and `%` truncate toward zero, dividing by zero is a
// runtime error, and INT64_MIN / -1 == INT64_MIN (INT64_MIN % -1 == 0). Comparisons and `!`,
// `&&`, `||` give 0 or 1 (`&&`/`||` short-circuit). A function that falls off its end returns 0.
// Names are block-scoped; a `let` may shadow an outer name but not one of the same block.
//
// Builtins (see builtins.h): print(x), checkpoint(tag), native_fp(n), native_nofp(n).
//
// The front end parses and checks a program and resolves every name: variables to slot numbers
// (parameters first), calls to user functions or builtins. Both back ends walk the same AST.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace toylang {

struct location {
  uint32_t line = 0;
  uint32_t column = 0;
};

/// A compile error, printed as `file:line:column: error: message`.
struct diagnostic {
  location where;
  std::string message;
};

enum class binary_op { mul, div, mod, add, sub, lt, le, gt, ge, eq, ne, logical_and, logical_or };
enum class unary_op { neg, logical_not };

/// Source spelling of an operator ("+", "<=", "&&", ...).
const char* spelling(binary_op op);
const char* spelling(unary_op op);

enum class callee_kind { function, builtin };

struct expr {
  enum class kind { integer, variable, unary, binary, call };
  kind k;
  location loc;
  int64_t value = 0;                            // integer
  std::string name;                             // variable, call
  binary_op bop{};                              // binary
  unary_op uop{};                               // unary
  std::vector<std::unique_ptr<expr>> operands;  // unary: 1, binary: 2, call: arguments

  // Filled in by the checker.
  uint32_t slot = 0;          // variable
  callee_kind callee{};       // call
  uint32_t callee_index = 0;  // call: index into program::functions or into builtins()
};

struct stmt;
using block = std::vector<std::unique_ptr<stmt>>;

struct stmt {
  enum class kind { let, assign, expression, if_else, while_loop, return_value, nested_block };
  kind k;
  location loc;
  std::string name;             // let, assign
  std::unique_ptr<expr> value;  // let, assign, expression, if/while condition, return (may be null)
  block body;                   // if (then), while, nested_block
  block else_body;              // if
  bool has_else = false;

  uint32_t slot = 0;  // let, assign: filled in by the checker
};

struct function {
  std::string name;
  location loc;
  std::vector<std::string> params;
  block body;

  // Filled in by the checker.
  uint32_t num_slots = 0;  // parameters + every `let` (each `let` has its own slot)
  uint32_t index = 0;      // position in program::functions
};

struct program {
  std::string file;  // as given on the command line, for messages
  std::vector<function> functions;

  /// Index of the function named `name`, if any.
  std::optional<uint32_t> find(const std::string& name) const;
};

/// Parses and checks `source`. On failure returns nothing and fills `errors` (sorted by
/// position; parsing stops at the first syntax error, the checker reports every error it finds).
std::optional<program> compile(const std::string& file, const std::string& source,
                               std::vector<diagnostic>& errors);

/// Reads `path` and compiles it; a file that cannot be read is reported as a diagnostic at 0:0.
std::optional<program> compile_file(const std::string& path, std::vector<diagnostic>& errors);

/// `file:line:column: error: message` lines, one per diagnostic.
std::string format(const std::string& file, const std::vector<diagnostic>& errors);

/// Parses main's command-line arguments (decimal or 0x, optional sign). On error returns
/// nothing and sets `message`.
std::optional<std::vector<int64_t>> parse_arguments(const program& p,
                                                    const std::vector<std::string>& args,
                                                    std::string& message);

/// Wrapping arithmetic with the language's semantics. `div`/`mod` require b != 0.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t wrap_neg(int64_t a) {
  return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
}
inline int64_t wrap_div(int64_t a, int64_t b) {
  return b == -1 ? wrap_neg(a) : a / b;
}
inline int64_t wrap_mod(int64_t a, int64_t b) {
  return b == -1 ? 0 : a % b;
}

}  // namespace toylang
