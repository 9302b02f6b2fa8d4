// What toy-jit's code generators for x86-64 (codegen.cpp) and AArch64 (codegen_a64.cpp) share:
// the frame size a function needs, the helpers' addresses, asmjit's error reporting and the
// placement of finished code. Internal to the generators.
#pragma once

#include "builtins.h"
#include "codegen.h"
#include "toylang.h"

#include <asmjit/core.h>
#include <jitunwind/asmjit.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

namespace toyjit::detail {

class error_recorder final : public asmjit::ErrorHandler {
 public:
  void handleError(asmjit::Error, const char* message, asmjit::BaseEmitter*) override {
    if (first.empty()) first = message;
  }
  std::string first;
};

inline uint32_t align16(uint32_t n) {
  return (n + 15) & ~15u;
}

// An operand that needs no temporary to be loaded straight into a register.
inline bool is_simple(const toylang::expr& e) {
  return e.k == toylang::expr::kind::integer || e.k == toylang::expr::kind::variable;
}

// Temporaries an expression needs beyond the `depth` already in use (see the generators' gen).
inline uint32_t temps_needed(const toylang::expr& e) {
  using toylang::binary_op;
  using toylang::expr;
  switch (e.k) {
    case expr::kind::integer:
    case expr::kind::variable:
      return 0;
    case expr::kind::unary:
      return temps_needed(*e.operands[0]);
    case expr::kind::binary: {
      const uint32_t left = temps_needed(*e.operands[0]);
      if (e.bop == binary_op::logical_and || e.bop == binary_op::logical_or) {
        return std::max(left, temps_needed(*e.operands[1]));
      }
      const expr& right = *e.operands[1];
      return std::max(left, is_simple(right) ? 0 : 1 + temps_needed(right));
    }
    case expr::kind::call: {
      if (e.callee == toylang::callee_kind::builtin) return temps_needed(*e.operands[0]);
      uint32_t need = static_cast<uint32_t>(e.operands.size());
      for (uint32_t i = 0; i < e.operands.size(); ++i) {
        need = std::max(need, i + temps_needed(*e.operands[i]));
      }
      return need;
    }
  }
  return 0;
}

inline uint32_t temps_needed(const toylang::block& b) {
  uint32_t need = 0;
  for (const auto& s : b) {
    if (s->value) need = std::max(need, temps_needed(*s->value));
    need = std::max(need, temps_needed(s->body));
    need = std::max(need, temps_needed(s->else_body));
  }
  return need;
}

// True if the block always ends in a return (so no jump past the else branch is needed).
inline bool ends_in_return(const toylang::block& b) {
  return !b.empty() && b.back()->k == toylang::stmt::kind::return_value;
}

// A division's zero check jumps to a cold path that reports this source location.
struct division_check {
  asmjit::Label label;
  toylang::location where;
};

inline uint64_t builtin_address(const runtime_addresses& rt, toylang::builtin id) {
  switch (id) {
    case toylang::builtin::print:
      return rt.print;
    case toylang::builtin::checkpoint:
      return rt.checkpoint;
    case toylang::builtin::native_fp:
      return rt.native_fp;
    case toylang::builtin::native_nofp:
      return rt.native_nofp;
  }
  return 0;
}

// Relocates and copies `code` for `address`. No absolute relocations exist (codegen.h), so the
// size must be what it was when the frame rows were recorded; checked anyway.
inline jitunwind::result<void> copy_placed(asmjit::CodeHolder& code, uint64_t address,
                                           std::span<uint8_t> writable, const std::string& name,
                                           uint32_t size) {
  auto placed =
      jitunwind::asmjit_glue::copy_code(code, address, {writable.data(), writable.size()}, name);
  if (!placed) return placed.error();
  if (*placed != size) {
    return jitunwind::error(jitunwind::errc::invalid_argument,
                            "toy-jit: '" + name + "' is " + std::to_string(*placed) +
                                " bytes once relocated, " + std::to_string(size) + " before");
  }
  return {};
}

// The statements' control flow, the same on both machines. `Gen` (a generator, which befriends
// this) emits the machine's part: gen(expr, depth) leaves a value in the result register;
// store_result(slot), branch_if_zero(label), jump(label), zero_result(), epilogue(), and the
// labels of its assembler (new_label, bind).
template <class Gen>
class statement_emitter {
 protected:
  void block(const toylang::block& b) {
    for (const auto& s : b) statement(*s);
  }

  void statement(const toylang::stmt& s) {
    using kind = toylang::stmt::kind;
    Gen& g = static_cast<Gen&>(*this);
    switch (s.k) {
      case kind::let:
      case kind::assign:
        g.gen(*s.value, 0);
        g.store_result(s.slot);
        return;
      case kind::expression:
        g.gen(*s.value, 0);
        return;
      case kind::if_else: {
        const asmjit::Label else_label = g.new_label();
        const asmjit::Label end = g.new_label();
        g.gen(*s.value, 0);
        g.branch_if_zero(else_label);
        block(s.body);
        if (s.has_else && !ends_in_return(s.body)) g.jump(end);
        g.bind(else_label);
        if (s.has_else) block(s.else_body);
        g.bind(end);
        return;
      }
      case kind::while_loop: {
        const asmjit::Label top = g.new_label();
        const asmjit::Label end = g.new_label();
        g.bind(top);
        g.gen(*s.value, 0);
        g.branch_if_zero(end);
        block(s.body);
        g.jump(top);
        g.bind(end);
        return;
      }
      case kind::return_value:
        if (s.value) {
          g.gen(*s.value, 0);
        } else {
          g.zero_result();
        }
        g.epilogue();
        return;
      case kind::nested_block:
        block(s.body);
        return;
    }
  }
};

}  // namespace toyjit::detail
