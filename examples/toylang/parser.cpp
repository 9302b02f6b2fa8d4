// Lexer and recursive-descent parser of toylang. Stops at the first syntax error.
#include "internal.h"

#include <cctype>
#include <cstring>

namespace toylang::detail {

namespace {

enum class tok {
  end,
  identifier,
  integer,
  kw_fn,
  kw_let,
  kw_if,
  kw_else,
  kw_while,
  kw_return,
  lparen,
  rparen,
  lbrace,
  rbrace,
  comma,
  semicolon,
  assign,
  plus,
  minus,
  star,
  slash,
  percent,
  bang,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  and_and,
  or_or,
};

struct token {
  tok kind = tok::end;
  location loc;
  std::string text;
  int64_t value = 0;
};

struct syntax_error {
  diagnostic d;
};

class lexer {
 public:
  explicit lexer(const std::string& src) : src_(src) {}

  token next() {
    skip_space_and_comments();
    token t;
    t.loc = {line_, column_};
    if (pos_ >= src_.size()) return t;
    const char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return identifier(t);
    if (std::isdigit(static_cast<unsigned char>(c))) return number(t);
    advance();
    auto two = [&](char second, tok yes, tok no) {
      if (pos_ < src_.size() && src_[pos_] == second) {
        advance();
        return yes;
      }
      return no;
    };
    switch (c) {
      case '(':
        t.kind = tok::lparen;
        break;
      case ')':
        t.kind = tok::rparen;
        break;
      case '{':
        t.kind = tok::lbrace;
        break;
      case '}':
        t.kind = tok::rbrace;
        break;
      case ',':
        t.kind = tok::comma;
        break;
      case ';':
        t.kind = tok::semicolon;
        break;
      case '+':
        t.kind = tok::plus;
        break;
      case '-':
        t.kind = tok::minus;
        break;
      case '*':
        t.kind = tok::star;
        break;
      case '/':
        t.kind = tok::slash;
        break;
      case '%':
        t.kind = tok::percent;
        break;
      case '=':
        t.kind = two('=', tok::eq, tok::assign);
        break;
      case '!':
        t.kind = two('=', tok::ne, tok::bang);
        break;
      case '<':
        t.kind = two('=', tok::le, tok::lt);
        break;
      case '>':
        t.kind = two('=', tok::ge, tok::gt);
        break;
      case '&':
        if (two('&', tok::and_and, tok::end) == tok::end) fail(t.loc, "expected '&&'");
        t.kind = tok::and_and;
        break;
      case '|':
        if (two('|', tok::or_or, tok::end) == tok::end) fail(t.loc, "expected '||'");
        t.kind = tok::or_or;
        break;
      default:
        if (std::isprint(static_cast<unsigned char>(c))) {
          fail(t.loc, std::string("unexpected character '") + c + "'");
        }
        fail(t.loc, "unexpected byte 0x" + hex(static_cast<unsigned char>(c)));
    }
    return t;
  }

  [[noreturn]] static void fail(location loc, std::string message) {
    throw syntax_error{{loc, std::move(message)}};
  }

 private:
  static std::string hex(unsigned v) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[v >> 4], digits[v & 15]};
  }

  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  void skip_space_and_comments() {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  token identifier(token t) {
    while (pos_ < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
      t.text += src_[pos_];
      advance();
    }
    static const struct {
      const char* word;
      tok kind;
    } keywords[] = {{"fn", tok::kw_fn},     {"let", tok::kw_let},     {"if", tok::kw_if},
                    {"else", tok::kw_else}, {"while", tok::kw_while}, {"return", tok::kw_return}};
    t.kind = tok::identifier;
    for (const auto& k : keywords) {
      if (t.text == k.word) t.kind = k.kind;
    }
    return t;
  }

  token number(token t) {
    uint64_t base = 10;
    if (src_[pos_] == '0' && pos_ + 1 < src_.size() &&
        (src_[pos_ + 1] == 'x' || src_[pos_ + 1] == 'X')) {
      base = 16;
      advance();
      advance();
    }
    uint64_t v = 0;
    bool any = false;
    bool overflow = false;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      int digit = -1;
      if (std::isdigit(static_cast<unsigned char>(c)))
        digit = c - '0';
      else if (base == 16 && std::isxdigit(static_cast<unsigned char>(c)))
        digit = std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
      else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_')
        fail({line_, column_}, std::string("invalid digit '") + c + "' in integer literal");
      else
        break;
      if (v > (UINT64_MAX - static_cast<uint64_t>(digit)) / base) overflow = true;
      v = v * base + static_cast<uint64_t>(digit);
      any = true;
      advance();
    }
    if (!any) fail(t.loc, "hexadecimal literal without digits");
    // Hex literals may spell any 64-bit pattern; decimal ones must fit in int64.
    if (overflow || (base == 10 && v > static_cast<uint64_t>(INT64_MAX)))
      fail(t.loc, base == 16 ? "integer literal out of range (largest is 0xffffffffffffffff)"
                             : "integer literal out of range (largest is 9223372036854775807)");
    t.kind = tok::integer;
    t.value = static_cast<int64_t>(v);
    return t;
  }

  const std::string& src_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  uint32_t column_ = 1;
};

const char* describe(tok k) {
  switch (k) {
    case tok::end:
      return "end of file";
    case tok::identifier:
      return "a name";
    case tok::integer:
      return "an integer";
    case tok::kw_fn:
      return "'fn'";
    case tok::kw_let:
      return "'let'";
    case tok::kw_if:
      return "'if'";
    case tok::kw_else:
      return "'else'";
    case tok::kw_while:
      return "'while'";
    case tok::kw_return:
      return "'return'";
    case tok::lparen:
      return "'('";
    case tok::rparen:
      return "')'";
    case tok::lbrace:
      return "'{'";
    case tok::rbrace:
      return "'}'";
    case tok::comma:
      return "','";
    case tok::semicolon:
      return "';'";
    case tok::assign:
      return "'='";
    case tok::plus:
      return "'+'";
    case tok::minus:
      return "'-'";
    case tok::star:
      return "'*'";
    case tok::slash:
      return "'/'";
    case tok::percent:
      return "'%'";
    case tok::bang:
      return "'!'";
    case tok::lt:
      return "'<'";
    case tok::le:
      return "'<='";
    case tok::gt:
      return "'>'";
    case tok::ge:
      return "'>='";
    case tok::eq:
      return "'=='";
    case tok::ne:
      return "'!='";
    case tok::and_and:
      return "'&&'";
    case tok::or_or:
      return "'||'";
  }
  return "?";
}

std::string describe(const token& t) {
  if (t.kind == tok::identifier) return "'" + t.text + "'";
  if (t.kind == tok::integer) return "integer " + std::to_string(t.value);
  return describe(t.kind);
}

// Expression nesting bound: keeps the recursive parser (and both back ends, which recurse over
// the tree) far from the native stack limit on hostile input.
constexpr int max_nesting = 200;
constexpr int max_operators = 1000;

class parser {
 public:
  explicit parser(const std::string& src) : lex_(src) { cur_ = lex_.next(); }

  std::vector<function> parse_program() {
    std::vector<function> out;
    while (cur_.kind != tok::end) out.push_back(parse_function());
    return out;
  }

 private:
  void advance() { cur_ = lex_.next(); }

  bool accept(tok k) {
    if (cur_.kind != k) return false;
    advance();
    return true;
  }

  token expect(tok k, const char* context) {
    if (cur_.kind != k) {
      lexer::fail(cur_.loc, std::string("expected ") + describe(k) + " " + context + ", found " +
                                describe(cur_));
    }
    token t = cur_;
    advance();
    return t;
  }

  function parse_function() {
    function f;
    f.loc = cur_.loc;
    expect(tok::kw_fn, "to start a function");
    f.name = expect(tok::identifier, "after 'fn'").text;
    expect(tok::lparen, "after the function name");
    if (cur_.kind != tok::rparen) {
      do {
        f.params.push_back(expect(tok::identifier, "(a parameter name)").text);
      } while (accept(tok::comma));
    }
    expect(tok::rparen, "after the parameters");
    f.body = parse_block();
    return f;
  }

  block parse_block() {
    nesting_guard guard(*this, cur_.loc);
    expect(tok::lbrace, "to open a block");
    block b;
    while (cur_.kind != tok::rbrace) {
      if (cur_.kind == tok::end) lexer::fail(cur_.loc, "expected '}' before end of file");
      b.push_back(parse_statement());
    }
    advance();
    return b;
  }

  std::unique_ptr<stmt> make_stmt(stmt::kind k, location loc) {
    auto s = std::make_unique<stmt>();
    s->k = k;
    s->loc = loc;
    return s;
  }

  std::unique_ptr<stmt> parse_statement() {
    const location loc = cur_.loc;
    operators_in_statement_ = 0;
    if (accept(tok::kw_let)) {
      auto s = make_stmt(stmt::kind::let, loc);
      s->name = expect(tok::identifier, "after 'let'").text;
      expect(tok::assign, "after the variable name");
      s->value = parse_expr();
      expect(tok::semicolon, "after the statement");
      return s;
    }
    if (accept(tok::kw_if)) return parse_if(loc);
    if (accept(tok::kw_while)) {
      auto s = make_stmt(stmt::kind::while_loop, loc);
      expect(tok::lparen, "after 'while'");
      s->value = parse_expr();
      expect(tok::rparen, "after the condition");
      s->body = parse_block();
      return s;
    }
    if (accept(tok::kw_return)) {
      auto s = make_stmt(stmt::kind::return_value, loc);
      if (cur_.kind != tok::semicolon) s->value = parse_expr();
      expect(tok::semicolon, "after the return value");
      return s;
    }
    if (cur_.kind == tok::lbrace) {
      auto s = make_stmt(stmt::kind::nested_block, loc);
      s->body = parse_block();
      return s;
    }
    if (cur_.kind == tok::identifier) {
      // `name = ...` is an assignment; anything else starting with a name is an expression.
      token name = cur_;
      advance();
      if (accept(tok::assign)) {
        auto s = make_stmt(stmt::kind::assign, loc);
        s->name = name.text;
        s->value = parse_expr();
        expect(tok::semicolon, "after the statement");
        return s;
      }
      auto s = make_stmt(stmt::kind::expression, loc);
      s->value = parse_expr_after_name(std::move(name));
      expect(tok::semicolon, "after the expression");
      return s;
    }
    auto s = make_stmt(stmt::kind::expression, loc);
    s->value = parse_expr();
    expect(tok::semicolon, "after the expression");
    return s;
  }

  std::unique_ptr<stmt> parse_if(location loc) {
    auto s = make_stmt(stmt::kind::if_else, loc);
    expect(tok::lparen, "after 'if'");
    s->value = parse_expr();
    expect(tok::rparen, "after the condition");
    s->body = parse_block();
    if (accept(tok::kw_else)) {
      s->has_else = true;
      const location else_loc = cur_.loc;
      if (accept(tok::kw_if)) {
        s->else_body.push_back(parse_if(else_loc));
      } else {
        s->else_body = parse_block();
      }
    }
    return s;
  }

  // ---- expressions: precedence climbing over the binary operator table ----

  static int precedence(tok k) {
    switch (k) {
      case tok::or_or:
        return 1;
      case tok::and_and:
        return 2;
      case tok::eq:
      case tok::ne:
        return 3;
      case tok::lt:
      case tok::le:
      case tok::gt:
      case tok::ge:
        return 4;
      case tok::plus:
      case tok::minus:
        return 5;
      case tok::star:
      case tok::slash:
      case tok::percent:
        return 6;
      default:
        return 0;
    }
  }

  static binary_op to_binary(tok k) {
    switch (k) {
      case tok::or_or:
        return binary_op::logical_or;
      case tok::and_and:
        return binary_op::logical_and;
      case tok::eq:
        return binary_op::eq;
      case tok::ne:
        return binary_op::ne;
      case tok::lt:
        return binary_op::lt;
      case tok::le:
        return binary_op::le;
      case tok::gt:
        return binary_op::gt;
      case tok::ge:
        return binary_op::ge;
      case tok::plus:
        return binary_op::add;
      case tok::minus:
        return binary_op::sub;
      case tok::star:
        return binary_op::mul;
      case tok::slash:
        return binary_op::div;
      default:
        return binary_op::mod;
    }
  }

  std::unique_ptr<expr> make_expr(expr::kind k, location loc) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->loc = loc;
    return e;
  }

  std::unique_ptr<expr> parse_expr() { return parse_binary(parse_unary(), 1); }

  std::unique_ptr<expr> parse_expr_after_name(token name) {
    return parse_binary(parse_postfix_name(std::move(name)), 1);
  }

  std::unique_ptr<expr> parse_binary(std::unique_ptr<expr> lhs, int min_prec) {
    while (precedence(cur_.kind) >= min_prec) {
      const token op = cur_;
      const int prec = precedence(op.kind);
      advance();
      auto rhs = parse_unary();
      while (precedence(cur_.kind) > prec) rhs = parse_binary(std::move(rhs), prec + 1);
      auto e = make_expr(expr::kind::binary, op.loc);
      e->bop = to_binary(op.kind);
      e->operands.push_back(std::move(lhs));
      e->operands.push_back(std::move(rhs));
      lhs = std::move(e);
      // Bounds the depth of left-leaning operator chains, which the back ends recurse over.
      if (++operators_in_statement_ > max_operators)
        lexer::fail(op.loc, "statement too complex (more than " + std::to_string(max_operators) +
                                " operators)");
    }
    return lhs;
  }

  struct nesting_guard {
    parser& p;
    nesting_guard(parser& parent, location loc) : p(parent) {
      if (++p.depth_ > max_nesting)
        lexer::fail(loc, "nested too deeply (limit " + std::to_string(max_nesting) + ")");
    }
    ~nesting_guard() { --p.depth_; }
  };

  std::unique_ptr<expr> parse_unary() {
    nesting_guard guard(*this, cur_.loc);
    const location loc = cur_.loc;
    if (accept(tok::minus) || (cur_.kind == tok::bang)) {
      auto e = make_expr(expr::kind::unary, loc);
      if (cur_.kind == tok::bang) {
        advance();
        e->uop = unary_op::logical_not;
      } else {
        e->uop = unary_op::neg;
      }
      e->operands.push_back(parse_unary());
      return e;
    }
    if (cur_.kind == tok::integer) {
      auto e = make_expr(expr::kind::integer, loc);
      e->value = cur_.value;
      advance();
      return e;
    }
    if (cur_.kind == tok::identifier) {
      token name = cur_;
      advance();
      return parse_postfix_name(std::move(name));
    }
    if (accept(tok::lparen)) {
      auto e = parse_binary(parse_unary(), 1);
      expect(tok::rparen, "to close '('");
      return e;
    }
    lexer::fail(cur_.loc, "expected an expression, found " + describe(cur_));
  }

  std::unique_ptr<expr> parse_postfix_name(token name) {
    if (!accept(tok::lparen)) {
      auto e = make_expr(expr::kind::variable, name.loc);
      e->name = std::move(name.text);
      return e;
    }
    nesting_guard guard(*this, name.loc);
    auto e = make_expr(expr::kind::call, name.loc);
    e->name = std::move(name.text);
    if (cur_.kind != tok::rparen) {
      do {
        e->operands.push_back(parse_expr());
      } while (accept(tok::comma));
    }
    expect(tok::rparen, "after the arguments");
    return e;
  }

  lexer lex_;
  token cur_;
  int depth_ = 0;
  int operators_in_statement_ = 0;
};

}  // namespace

bool parse(const std::string& source, std::vector<function>& out, std::vector<diagnostic>& errors) {
  try {
    parser p(source);
    out = p.parse_program();
    return true;
  } catch (syntax_error& e) {
    errors.push_back(std::move(e.d));
    return false;
  }
}

}  // namespace toylang::detail
