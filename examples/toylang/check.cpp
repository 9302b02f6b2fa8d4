// Name resolution and semantic checks: every variable resolves to a slot of its function,
// every call to a user function or builtin with the right number of arguments.
#include "builtins.h"
#include "internal.h"

#include <algorithm>
#include <map>

namespace toylang::detail {

namespace {

// Functions may have at most this many parameters: keeps frames small and the interpreter's
// argument passing simple, while still exercising stack-passed arguments in the JIT (x86-64
// passes the 7th and later arguments on the stack).
constexpr size_t max_params = 16;

class checker {
 public:
  checker(program& p, std::vector<diagnostic>& errors) : p_(p), errors_(errors) {}

  void run() {
    std::map<std::string, location> seen;
    for (uint32_t i = 0; i < p_.functions.size(); ++i) {
      function& f = p_.functions[i];
      f.index = i;
      if (auto [it, inserted] = seen.emplace(f.name, f.loc); !inserted) {
        error(f.loc, "function '" + f.name + "' is already defined at line " +
                         std::to_string(it->second.line));
      }
      if (find_builtin(f.name) != nullptr) {
        error(f.loc, "'" + f.name + "' is a builtin and cannot be redefined");
      }
      if (f.params.size() > max_params) {
        error(f.loc, "function '" + f.name + "' has " + std::to_string(f.params.size()) +
                         " parameters (at most " + std::to_string(max_params) + ")");
      }
    }
    for (function& f : p_.functions) check_function(f);
    const auto main = p_.find("main");
    if (!main) {
      error({1, 1}, "no function 'main'");
    } else if (p_.functions[*main].params.size() > 8) {
      error(p_.functions[*main].loc, "'main' takes at most 8 parameters (the command-line ARGS)");
    }
  }

 private:
  void error(location loc, std::string message) { errors_.push_back({loc, std::move(message)}); }

  void check_function(function& f) {
    scopes_.clear();
    next_slot_ = 0;
    scopes_.emplace_back();
    for (const std::string& param : f.params) {
      if (scopes_.back().count(param) != 0) {
        error(f.loc, "parameter '" + param + "' appears twice in '" + f.name + "'");
      }
      scopes_.back()[param] = next_slot_++;
    }
    check_block(f.body, false);
    f.num_slots = next_slot_;
  }

  void check_block(block& b, bool new_scope) {
    if (new_scope) scopes_.emplace_back();
    for (auto& s : b) check_stmt(*s);
    if (new_scope) scopes_.pop_back();
  }

  const uint32_t* lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto found = it->find(name); found != it->end()) return &found->second;
    }
    return nullptr;
  }

  void check_stmt(stmt& s) {
    switch (s.k) {
      case stmt::kind::let:
        // The initializer is checked before the name exists: `let x = x;` needs an outer x.
        check_expr(*s.value);
        if (scopes_.back().count(s.name) != 0) {
          error(s.loc, "'" + s.name + "' is already declared in this block");
        }
        s.slot = next_slot_++;
        scopes_.back()[s.name] = s.slot;
        break;
      case stmt::kind::assign:
        check_expr(*s.value);
        if (const uint32_t* slot = lookup(s.name)) {
          s.slot = *slot;
        } else {
          error(s.loc, "assignment to undeclared variable '" + s.name + "' (use 'let')");
        }
        break;
      case stmt::kind::expression:
        check_expr(*s.value);
        break;
      case stmt::kind::if_else:
        check_expr(*s.value);
        check_block(s.body, true);
        check_block(s.else_body, true);
        break;
      case stmt::kind::while_loop:
        check_expr(*s.value);
        check_block(s.body, true);
        break;
      case stmt::kind::return_value:
        if (s.value) check_expr(*s.value);
        break;
      case stmt::kind::nested_block:
        check_block(s.body, true);
        break;
    }
  }

  void check_expr(expr& e) {
    for (auto& operand : e.operands) check_expr(*operand);
    if (e.k == expr::kind::variable) {
      if (const uint32_t* slot = lookup(e.name)) {
        e.slot = *slot;
      } else if (p_.find(e.name) || find_builtin(e.name)) {
        error(e.loc, "'" + e.name + "' is a function; call it with '" + e.name + "(...)'");
      } else {
        error(e.loc, "undeclared variable '" + e.name + "'");
      }
    } else if (e.k == expr::kind::call) {
      size_t arity = 0;
      if (auto index = p_.find(e.name)) {
        e.callee = callee_kind::function;
        e.callee_index = *index;
        arity = p_.functions[*index].params.size();
      } else if (const builtin_info* b = find_builtin(e.name)) {
        e.callee = callee_kind::builtin;
        e.callee_index = static_cast<uint32_t>(b->id);
        arity = b->arity;
      } else {
        error(e.loc, "call to undefined function '" + e.name + "'");
        return;
      }
      if (e.operands.size() != arity) {
        error(e.loc, "'" + e.name + "' takes " + std::to_string(arity) + " argument" +
                         (arity == 1 ? "" : "s") + ", " + std::to_string(e.operands.size()) +
                         " given");
      }
    }
  }

  program& p_;
  std::vector<diagnostic>& errors_;
  std::vector<std::map<std::string, uint32_t>> scopes_;
  uint32_t next_slot_ = 0;
};

}  // namespace

void check(program& p, std::vector<diagnostic>& errors) {
  checker(p, errors).run();
}

}  // namespace toylang::detail
