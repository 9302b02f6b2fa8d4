#include "bytecode.h"

#include "builtins.h"

#include <algorithm>
#include <cassert>

namespace toyinterp {

const char* name(opcode op) {
  switch (op) {
    case opcode::constant:
      return "constant";
    case opcode::load:
      return "load";
    case opcode::store:
      return "store";
    case opcode::pop:
      return "pop";
    case opcode::add:
      return "add";
    case opcode::sub:
      return "sub";
    case opcode::mul:
      return "mul";
    case opcode::div:
      return "div";
    case opcode::mod:
      return "mod";
    case opcode::neg:
      return "neg";
    case opcode::logical_not:
      return "not";
    case opcode::to_bool:
      return "to_bool";
    case opcode::lt:
      return "lt";
    case opcode::le:
      return "le";
    case opcode::gt:
      return "gt";
    case opcode::ge:
      return "ge";
    case opcode::eq:
      return "eq";
    case opcode::ne:
      return "ne";
    case opcode::jump:
      return "jump";
    case opcode::jump_if_zero:
      return "jump_if_zero";
    case opcode::jump_if_nonzero:
      return "jump_if_nonzero";
    case opcode::call:
      return "call";
    case opcode::builtin:
      return "builtin";
    case opcode::line:
      return "line";
    case opcode::ret:
      return "ret";
  }
  return "?";
}

namespace {

using toylang::binary_op;
using toylang::expr;
using toylang::stmt;

class function_compiler {
 public:
  function_compiler(bool line_events, function& out, std::vector<instruction>& code)
      : line_events_(line_events), out_(out), code_(code) {}

  void compile(const toylang::function& f) {
    out_.name = f.name;
    out_.line = f.loc.line;
    out_.column = f.loc.column;
    out_.index = f.index;
    out_.arity = static_cast<uint32_t>(f.params.size());
    out_.num_slots = f.num_slots;
    compile_block(f.body);
    // Falling off the end returns 0.
    if (f.body.empty() || f.body.back()->k != stmt::kind::return_value) {
      emit(opcode::constant, constant(0), 0, +1);
      emit(opcode::ret, 0, 0, -1);
    }
  }

 private:
  int32_t constant(int64_t v) {
    auto it = std::find(out_.constants.begin(), out_.constants.end(), v);
    if (it != out_.constants.end()) return static_cast<int32_t>(it - out_.constants.begin());
    out_.constants.push_back(v);
    return static_cast<int32_t>(out_.constants.size() - 1);
  }

  // Emits an instruction and tracks the operand stack depth it leaves.
  size_t emit(opcode op, int32_t a, int32_t b, int stack_effect) {
    code_.push_back({op, a, b});
    depth_ += stack_effect;
    assert(depth_ >= 0);
    out_.max_stack = std::max(out_.max_stack, static_cast<uint32_t>(depth_));
    return code_.size() - 1;
  }

  int32_t here() const { return static_cast<int32_t>(code_.size()); }
  void patch(size_t at, int32_t target) { code_[at].a = target; }

  void compile_block(const toylang::block& b) {
    for (const auto& s : b) compile_stmt(*s);
  }

  void compile_stmt(const stmt& s) {
    if (line_events_ && s.k != stmt::kind::nested_block) {
      emit(opcode::line, static_cast<int32_t>(s.loc.line), 0, 0);
    }
    switch (s.k) {
      case stmt::kind::let:
      case stmt::kind::assign:
        compile_expr(*s.value);
        emit(opcode::store, static_cast<int32_t>(s.slot), 0, -1);
        break;
      case stmt::kind::expression:
        compile_expr(*s.value);
        emit(opcode::pop, 0, 0, -1);
        break;
      case stmt::kind::if_else: {
        compile_expr(*s.value);
        const size_t to_else = emit(opcode::jump_if_zero, 0, 0, -1);
        compile_block(s.body);
        if (s.has_else) {
          const size_t to_end = emit(opcode::jump, 0, 0, 0);
          patch(to_else, here());
          compile_block(s.else_body);
          patch(to_end, here());
        } else {
          patch(to_else, here());
        }
        break;
      }
      case stmt::kind::while_loop: {
        const int32_t top = here();
        compile_expr(*s.value);
        const size_t to_end = emit(opcode::jump_if_zero, 0, 0, -1);
        compile_block(s.body);
        emit(opcode::jump, top, 0, 0);
        patch(to_end, here());
        break;
      }
      case stmt::kind::return_value:
        if (s.value) {
          compile_expr(*s.value);
        } else {
          emit(opcode::constant, constant(0), 0, +1);
        }
        emit(opcode::ret, 0, 0, -1);
        break;
      case stmt::kind::nested_block:
        compile_block(s.body);
        break;
    }
  }

  void compile_expr(const expr& e) {
    switch (e.k) {
      case expr::kind::integer:
        emit(opcode::constant, constant(e.value), 0, +1);
        return;
      case expr::kind::variable:
        emit(opcode::load, static_cast<int32_t>(e.slot), 0, +1);
        return;
      case expr::kind::unary:
        compile_expr(*e.operands[0]);
        emit(e.uop == toylang::unary_op::neg ? opcode::neg : opcode::logical_not, 0, 0, 0);
        return;
      case expr::kind::call:
        for (const auto& arg : e.operands) compile_expr(*arg);
        if (e.callee == toylang::callee_kind::function) {
          emit(opcode::call, static_cast<int32_t>(e.callee_index), 0,
               1 - static_cast<int>(e.operands.size()));
        } else {
          emit(opcode::builtin, static_cast<int32_t>(e.callee_index), 0, 0);
        }
        return;
      case expr::kind::binary:
        break;
    }
    if (e.bop == binary_op::logical_and || e.bop == binary_op::logical_or) {
      // a && b: a; jz F; b; to_bool; jump E; F: 0; E:   (|| mirrors it with jnz and 1)
      const bool is_and = e.bop == binary_op::logical_and;
      compile_expr(*e.operands[0]);
      const size_t short_circuit =
          emit(is_and ? opcode::jump_if_zero : opcode::jump_if_nonzero, 0, 0, -1);
      compile_expr(*e.operands[1]);
      emit(opcode::to_bool, 0, 0, 0);
      const size_t to_end = emit(opcode::jump, 0, 0, 0);
      patch(short_circuit, here());
      depth_ -= 1;  // the two paths join with one value; count it once
      emit(opcode::constant, constant(is_and ? 0 : 1), 0, +1);
      patch(to_end, here());
      return;
    }
    compile_expr(*e.operands[0]);
    compile_expr(*e.operands[1]);
    const auto line = static_cast<int32_t>(e.loc.line);
    const auto column = static_cast<int32_t>(e.loc.column);
    switch (e.bop) {
      case binary_op::mul:
        emit(opcode::mul, 0, 0, -1);
        break;
      case binary_op::div:
        emit(opcode::div, line, column, -1);
        break;
      case binary_op::mod:
        emit(opcode::mod, line, column, -1);
        break;
      case binary_op::add:
        emit(opcode::add, 0, 0, -1);
        break;
      case binary_op::sub:
        emit(opcode::sub, 0, 0, -1);
        break;
      case binary_op::lt:
        emit(opcode::lt, 0, 0, -1);
        break;
      case binary_op::le:
        emit(opcode::le, 0, 0, -1);
        break;
      case binary_op::gt:
        emit(opcode::gt, 0, 0, -1);
        break;
      case binary_op::ge:
        emit(opcode::ge, 0, 0, -1);
        break;
      case binary_op::eq:
        emit(opcode::eq, 0, 0, -1);
        break;
      case binary_op::ne:
        emit(opcode::ne, 0, 0, -1);
        break;
      case binary_op::logical_and:
      case binary_op::logical_or:
        break;
    }
  }

  bool line_events_;
  function& out_;
  std::vector<instruction>& code_;
  int depth_ = 0;
};

}  // namespace

program compile(const toylang::program& source, const compile_options& options) {
  program p;
  p.file = source.file;
  p.functions.resize(source.functions.size());
  for (const toylang::function& f : source.functions) {
    function& out = p.functions[f.index];
    function_compiler(false, out, out.code).compile(f);
    if (options.line_events) function_compiler(true, out, out.code_with_lines).compile(f);
  }
  p.main_index = source.find("main").value_or(0);
  return p;
}

std::string disassemble(const program& p) {
  std::string out;
  for (const function& f : p.functions) {
    out += "fn " + f.name + " (arity " + std::to_string(f.arity) + ", slots " +
           std::to_string(f.num_slots) + ", stack " + std::to_string(f.max_stack) + ")\n";
    const auto& code = f.code_with_lines.empty() ? f.code : f.code_with_lines;
    for (size_t pc = 0; pc < code.size(); ++pc) {
      const instruction& in = code[pc];
      out += "  " + std::to_string(pc) + ": " + name(in.op);
      switch (in.op) {
        case opcode::constant:
          out += " " + std::to_string(f.constants[in.a]);
          break;
        case opcode::load:
        case opcode::store:
          out += " slot " + std::to_string(in.a);
          break;
        case opcode::jump:
        case opcode::jump_if_zero:
        case opcode::jump_if_nonzero:
          out += " -> " + std::to_string(in.a);
          break;
        case opcode::call:
          out += " " + p.functions[in.a].name;
          break;
        case opcode::builtin:
          out += std::string(" ") + toylang::builtins()[in.a].name;
          break;
        case opcode::line:
          out += " " + std::to_string(in.a);
          break;
        default:
          break;
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace toyinterp
