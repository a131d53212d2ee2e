#include "compiler/frontend/parser.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "compiler/frontend/lexer.hpp"
#include "compiler/limits.hpp"

namespace ein::frontend {
namespace {

using K = Token::Kind;

// Unwinds one statement after its first error.
struct StatementError {};

constexpr int kMaxDepth = ein::limits::kMaxNesting;

class Parser {
 public:
  explicit Parser(std::string_view source) : tokens(tokenize(source)) {}

  ParseResult run() {
    auto module = std::make_unique<Module>();
    parseStatements(module->statements, /*inBlock=*/false);
    return {std::move(module), std::move(diagnostics)};
  }

 private:
  // ---- tokens ----------------------------------------------------------------

  const Token &peek(size_t ahead = 0) const {
    size_t i = std::min(position + ahead, tokens.size() - 1);
    return tokens[i];
  }
  bool at(K kind) const { return peek().kind == kind; }
  bool atKeyword(const char *word) const { return at(K::Identifier) && peek().text == word; }
  const Token &advance() {
    const Token &token = tokens[position];
    if (position + 1 < tokens.size()) ++position;
    return token;
  }

  [[noreturn]] void error(SourceLoc loc, std::string message) {
    diagnostics.push_back({loc, std::move(message)});
    throw StatementError{};
  }
  [[noreturn]] void expected(const std::string &what) {
    const Token &token = peek();
    if (token.kind == K::Error) error(token.loc, token.text);
    error(token.loc, "expected " + what + ", found " + describe(token));
  }

  const Token &expect(K kind, const std::string &what) {
    if (!at(kind)) expected(what);
    return advance();
  }

  std::string expectIdentifier(const std::string &what) {
    if (!at(K::Identifier) || isKeyword(peek().text)) expected(what);
    return advance().text;
  }

  static bool isKeyword(const std::string &word) {
    return word == "dim" || word == "input" || word == "param" || word == "output" || word == "def" ||
           word == "return" || word == "for" || word == "in" || word == "if" || word == "else" || word == "and" ||
           word == "or" || word == "true" || word == "false";
  }

  void enter(SourceLoc loc) {
    if (++depth > kMaxDepth) error(loc, "nesting is deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  // ---- statements --------------------------------------------------------------

  void skipNewlines() {
    while (at(K::Newline)) advance();
  }

  void parseStatements(std::vector<StmtPtr> &out, bool inBlock) {
    while (true) {
      skipNewlines();
      if (at(K::End)) {
        if (inBlock) {
          diagnostics.push_back({peek().loc, "expected '}' to close the block, found end of file"});
        }
        return;
      }
      if (inBlock && at(K::RBrace)) return;
      int savedDepth = depth;
      try {
        out.push_back(statement());
        if (!at(K::Newline) && !at(K::End) && !(inBlock && at(K::RBrace)))
          expected("end of line after the statement");
      } catch (const StatementError &) {
        depth = savedDepth;
        recover(inBlock);
      }
    }
  }

  // Skips to the end of the statement that failed (its braces included).
  void recover(bool inBlock) {
    int braces = 0;
    while (!at(K::End)) {
      if (at(K::LBrace)) ++braces;
      if (at(K::RBrace)) {
        if (braces == 0) {
          if (inBlock) return;
          advance();
          continue;
        }
        --braces;
      }
      if (at(K::Newline) && braces == 0) return;
      advance();
    }
  }

  StmtPtr statement() {
    const Token &first = peek();
    SourceLoc loc = first.loc;
    if (first.kind == K::Identifier) {
      if (first.text == "dim") return dimDecl();
      // `position` and `state` declare only when a name follows, so models
      // that use them as variable names keep working.
      if (first.text == "position" && peek(1).kind == K::Identifier) {
        auto decl = dimDecl();
        auto &dims = static_cast<DimDecl &>(*decl);
        dims.position = true;
        if (dims.entries.size() != 1 || !dims.entries[0].max)
          error(loc, "position declares one ranged dim: position past = 0..2048");
        return decl;
      }
      if (first.text == "config" && peek(1).kind == K::Identifier) return configDecl();
      if (first.text == "state" && peek(1).kind == K::Identifier) {
        advance();
        auto decl = std::make_unique<ParamDecl>(loc);
        decl->state = true;
        decl->name = dottedName();
        expect(K::Colon, "':' and a type after the state name");
        decl->type = typeExpr();
        return decl;
      }
      if (first.text == "input") {
        advance();
        auto decl = std::make_unique<InputDecl>(loc);
        decl->name = dottedName();
        expect(K::Colon, "':' and a type after the input name");
        decl->type = typeExpr();
        return decl;
      }
      if (first.text == "param") {
        advance();
        auto decl = std::make_unique<ParamDecl>(loc);
        decl->name = dottedName();
        expect(K::Colon, "':' and a type after the parameter name");
        decl->type = typeExpr();
        return decl;
      }
      if (first.text == "output") {
        advance();
        auto decl = std::make_unique<OutputDecl>(loc);
        decl->name = dottedName();
        if (at(K::Assign)) {
          advance();
          decl->value = expression();
        }
        return decl;
      }
      if (first.text == "def") return def();
      if (first.text == "for") return forLoop();
      if (first.text == "if") return ifStatement();
      if (first.text == "else") error(loc, "'else' must follow the '}' of an if on the same line");
      if (first.text == "return") {
        advance();
        auto ret = std::make_unique<Return>(loc);
        ret->values.push_back(expression());
        while (at(K::Comma)) {
          advance();
          ret->values.push_back(expression());
        }
        return ret;
      }
      if (!isKeyword(first.text)) return assignment();
    }
    if (first.kind == K::RBrace) error(first.loc, "unexpected '}' with no block open");
    expected("a statement (dim, config, input, param, output, def, for, if, return or an assignment)");
  }

  StmtPtr dimDecl() {
    auto decl = std::make_unique<DimDecl>(advance().loc);
    do {
      if (!decl->entries.empty()) advance();  // ','
      DimDecl::Entry entry;
      entry.loc = peek().loc;
      entry.name = expectIdentifier("a dim name");
      expect(K::Assign, "'=' and a size after dim '" + entry.name + "'");
      entry.value = expression();
      if (at(K::Range)) {  // a ranged dim: min..max
        advance();
        entry.max = expression();
      }
      decl->entries.push_back(std::move(entry));
    } while (at(K::Comma));
    return decl;
  }

  StmtPtr configDecl() {
    auto decl = std::make_unique<ConfigDecl>(advance().loc);
    do {
      if (!decl->entries.empty()) advance();  // ','
      ConfigDecl::Entry entry;
      entry.loc = peek().loc;
      entry.name = dottedName();
      for (const NameSegment &segment : entry.name.segments)
        if (segment.kind == NameSegment::Kind::Interpolation)
          error(segment.loc, "a config's name is written out, without {...}");
      expect(K::Assign, "'=' and a default value after config '" + entry.name.str() + "'");
      entry.value = expression();
      if (atKeyword("in")) {
        advance();
        if (!at(K::LBracket)) expected("a list of the values the model handles after 'in' ([\"silu\", \"gelu\"])");
        entry.allowed = expression();
      }
      decl->entries.push_back(std::move(entry));
    } while (at(K::Comma));
    return decl;
  }

  StmtPtr ifStatement() {
    auto branching = std::make_unique<If>(peek().loc);
    while (true) {
      advance();  // 'if'
      If::Branch branch;
      branch.condition = expression();
      branch.body = block("if's body");
      branching->branches.push_back(std::move(branch));
      if (!atKeyword("else")) return branching;
      advance();
      if (atKeyword("if")) continue;
      If::Branch otherwise;
      otherwise.body = block("else's body");
      branching->branches.push_back(std::move(otherwise));
      return branching;
    }
  }

  StmtPtr assignment() {
    auto statement = std::make_unique<Assign>(peek().loc);
    while (true) {
      SourceLoc loc = peek().loc;
      std::string name = expectIdentifier("a name to assign");
      if (at(K::Dot)) error(peek().loc, "cannot assign to a dotted name; parameters are declared with `param`");
      statement->targets.push_back({name, loc});
      if (!at(K::Comma)) break;
      advance();
    }
    expect(K::Assign, statement->targets.size() > 1 ? "'=' after the names" : "'=' after '" + statement->targets[0].name + "'");
    statement->value = expression();
    return statement;
  }

  TypeExpr typeExpr() {
    TypeExpr type;
    type.loc = peek().loc;
    if (!at(K::Identifier)) expected("a dtype (f32, f16, bf16, i32, i64, bool)");
    type.dtype = advance().text;
    static const char *dtypes[] = {"f32", "f16", "bf16", "i32", "i64", "bool"};
    if (std::find(std::begin(dtypes), std::end(dtypes), type.dtype) == std::end(dtypes))
      error(type.loc, "expected a dtype (f32, f16, bf16, i32, i64, bool), found '" + type.dtype + "'");
    SourceLoc open = expect(K::LBracket, "'[' and the shape after the dtype").loc;
    if (!at(K::RBracket)) {
      type.dims.push_back(expression());
      while (at(K::Comma)) {
        advance();
        type.dims.push_back(expression());
      }
    }
    if (!at(K::RBracket)) expected("']' to close '[' at " + std::to_string(open.line) + ":" + std::to_string(open.col));
    advance();
    return type;
  }

  std::vector<StmtPtr> block(const std::string &what) {
    SourceLoc open = expect(K::LBrace, "'{' to open the " + what).loc;
    enter(open);
    std::vector<StmtPtr> body;
    parseStatements(body, /*inBlock=*/true);
    if (!at(K::RBrace)) throw StatementError{};  // end of file, already reported
    advance();
    --depth;
    return body;
  }

  StmtPtr def() {
    auto def = std::make_unique<Def>(advance().loc);
    def->name = expectIdentifier("a block name after 'def'");
    SourceLoc open = expect(K::LParen, "'(' and the block's arguments").loc;
    while (!at(K::RParen)) {
      if (!def->params.empty()) expect(K::Comma, "',' or ')' in the argument list opened at " +
                                                     std::to_string(open.line) + ":" + std::to_string(open.col));
      SourceLoc loc = peek().loc;
      def->params.push_back({expectIdentifier("an argument name"), loc});
    }
    advance();
    def->body = block("block '" + def->name + "'");
    return def;
  }

  StmtPtr forLoop() {
    auto loop = std::make_unique<For>(advance().loc);
    loop->variable = expectIdentifier("a loop variable after 'for'");
    if (!atKeyword("in")) expected("'in' after the loop variable");
    advance();
    loop->start = additive();
    expect(K::Range, "'..' in the loop range (for i in 0..12)");
    loop->end = additive();
    loop->body = block("loop body");
    return loop;
  }

  // ---- expressions --------------------------------------------------------------

  // `a or b`, `a and b`: booleans known when the model compiles; `and`
  // binds tighter, both looser than comparisons.
  ExprPtr expression() {
    enter(peek().loc);
    ExprPtr lhs = conjunction();
    while (atKeyword("or")) {
      SourceLoc loc = advance().loc;
      lhs = std::make_unique<BinaryExpr>(loc, BinaryOp::Or, std::move(lhs), conjunction());
    }
    --depth;
    return lhs;
  }

  ExprPtr conjunction() {
    ExprPtr lhs = comparison();
    while (atKeyword("and")) {
      SourceLoc loc = advance().loc;
      lhs = std::make_unique<BinaryExpr>(loc, BinaryOp::And, std::move(lhs), comparison());
    }
    return lhs;
  }

  ExprPtr comparison() {
    ExprPtr lhs = additive();
    static const std::pair<K, BinaryOp> comparisons[] = {
        {K::Less, BinaryOp::Lt},     {K::LessEqual, BinaryOp::Le}, {K::Greater, BinaryOp::Gt},
        {K::GreaterEqual, BinaryOp::Ge}, {K::Equal, BinaryOp::Eq}, {K::NotEqual, BinaryOp::Ne}};
    for (auto [kind, op] : comparisons) {
      if (!at(kind)) continue;
      SourceLoc loc = advance().loc;
      lhs = std::make_unique<BinaryExpr>(loc, op, std::move(lhs), additive());
      for (auto [other, _] : comparisons)
        if (at(other)) error(peek().loc, "comparisons cannot be chained; use parentheses");
      break;
    }
    return lhs;
  }

  ExprPtr additive() {
    ExprPtr lhs = multiplicative();
    while (at(K::Plus) || at(K::Minus)) {
      const Token &op = advance();
      lhs = std::make_unique<BinaryExpr>(op.loc, op.kind == K::Plus ? BinaryOp::Add : BinaryOp::Sub, std::move(lhs),
                                         multiplicative());
    }
    return lhs;
  }

  ExprPtr multiplicative() {
    ExprPtr lhs = unary();
    while (at(K::Star) || at(K::Slash) || at(K::At) || at(K::SlashSlash) || at(K::Percent)) {
      const Token &op = advance();
      BinaryOp kind = op.kind == K::Star         ? BinaryOp::Mul
                      : op.kind == K::Slash      ? BinaryOp::Div
                      : op.kind == K::SlashSlash ? BinaryOp::FloorDiv
                      : op.kind == K::Percent    ? BinaryOp::Mod
                                                 : BinaryOp::MatMul;
      lhs = std::make_unique<BinaryExpr>(op.loc, kind, std::move(lhs), unary());
    }
    return lhs;
  }

  ExprPtr unary() {
    if (at(K::Minus) || at(K::Plus) || at(K::Tilde)) {
      const Token &op = advance();
      enter(op.loc);
      ExprPtr operand = unary();
      --depth;
      return std::make_unique<UnaryExpr>(op.loc, op.kind == K::Minus ? '-' : op.kind == K::Plus ? '+' : '~',
                                         std::move(operand));
    }
    return power();
  }

  // `**` binds tighter than a unary minus on its left and is right-associative.
  ExprPtr power() {
    ExprPtr base = postfix();
    if (at(K::Power)) {
      SourceLoc loc = advance().loc;
      enter(loc);
      ExprPtr exponent = unary();
      --depth;
      return std::make_unique<BinaryExpr>(loc, BinaryOp::Pow, std::move(base), std::move(exponent));
    }
    return base;
  }

  ExprPtr postfix() {
    ExprPtr expr = primary();
    while (true) {
      if (at(K::LParen)) {
        auto *name = expr->kind == Expr::Kind::Name ? static_cast<NameExpr *>(expr.get()) : nullptr;
        if (!name || name->name.segments.size() != 1 || name->name.segments[0].kind != NameSegment::Kind::Identifier)
          error(peek().loc, notCallable(name));
        expr = call(expr->loc, name->name.segments[0].text);
      } else if (at(K::LBracket)) {
        expr = index(std::move(expr));
      } else {
        return expr;
      }
    }
  }

  // Why a call's callee is none: PyTorch's methods (x.transpose(0, 1)) and
  // module prefixes (torch.softmax, F.gelu) get the built-in's spelling.
  static std::string notCallable(const NameExpr *name) {
    std::string message = "only a function or block name can be called";
    if (!name || name->name.segments.size() < 2 || name->name.segments.back().kind != NameSegment::Kind::Identifier)
      return message;
    const std::string &function = name->name.segments.back().text;
    Name receiver = name->name;
    receiver.segments.pop_back();
    static const char *const kModules[] = {"torch", "F", "nn.functional", "torch.nn.functional", "np", "numpy", "einops"};
    for (const char *module : kModules)
      if (receiver.str() == module) return message + ": the built-ins have no module prefix; write " + function + "(...)";
    // x.size(0), x.dim(): sizes are dims, which have no call of their own.
    if (function == "size" || function == "dim" || function == "numel")
      return message + ": the language has no methods, and sizes are dims: name the size with a dim (dim s = 8) "
                       "where it is declared (input " + receiver.str() + ": f32[s, ...]) and write s";
    return message + ": the language has no methods; write " + function + "(" + receiver.str() + ", ...)";
  }

  ExprPtr call(SourceLoc loc, const std::string &callee) {
    SourceLoc open = advance().loc;
    auto call = std::make_unique<Call>(loc, callee);
    while (!at(K::RParen)) {
      if (!call->positional.empty() || !call->keywords.empty())
        expect(K::Comma, "',' or ')' in the call opened at " + std::to_string(open.line) + ":" + std::to_string(open.col));
      if (at(K::RParen)) break;  // trailing comma
      if (at(K::Identifier) && peek(1).kind == K::Assign) {
        KeywordArg keyword;
        keyword.loc = peek().loc;
        keyword.name = advance().text;
        advance();  // '='
        keyword.value = expression();
        for (const auto &other : call->keywords)
          if (other.name == keyword.name) error(keyword.loc, "keyword argument '" + keyword.name + "' is given twice");
        call->keywords.push_back(std::move(keyword));
      } else {
        if (!call->keywords.empty()) error(peek().loc, "positional argument after a keyword argument");
        call->positional.push_back(expression());
      }
    }
    advance();
    return call;
  }

  ExprPtr index(ExprPtr base) {
    SourceLoc open = advance().loc;
    auto expr = std::make_unique<IndexExpr>(open, std::move(base));
    while (!at(K::RBracket)) {
      if (!expr->items.empty())
        expect(K::Comma, "',' or ']' in the index opened at " + std::to_string(open.line) + ":" + std::to_string(open.col));
      IndexItem item;
      item.loc = peek().loc;
      if (at(K::Ellipsis)) {
        advance();
        item.kind = IndexItem::Kind::Ellipsis;
      } else {
        ExprPtr first;
        if (!at(K::Colon)) first = expression();
        if (at(K::Colon)) {
          advance();
          item.kind = IndexItem::Kind::Slice;
          item.start = std::move(first);
          if (!at(K::Comma) && !at(K::RBracket) && !at(K::Colon)) item.stop = expression();
          if (at(K::Colon)) {
            advance();
            if (!at(K::Comma) && !at(K::RBracket)) item.step = expression();
          }
        } else {
          item.kind = IndexItem::Kind::Index;
          item.index = std::move(first);
        }
      }
      expr->items.push_back(std::move(item));
    }
    if (expr->items.empty()) error(peek().loc, "empty index '[]'");
    advance();
    return expr;
  }

  // A name with optional dotted segments: `x`, `blocks.0.attn`, `blocks.{i}.mlp`.
  Name dottedName() {
    Name name;
    SourceLoc loc = peek().loc;
    name.segments.push_back({NameSegment::Kind::Identifier, expectIdentifier("a name"), loc});
    while (at(K::Dot) && !peek().spaceBefore) {
      advance();
      const Token &token = peek();
      if (token.spaceBefore) error(token.loc, "no space is allowed after '.' in a dotted name");
      if (token.kind == K::Identifier) {
        name.segments.push_back({NameSegment::Kind::Identifier, advance().text, token.loc});
      } else if (token.kind == K::Integer) {
        name.segments.push_back({NameSegment::Kind::Integer, advance().text, token.loc});
      } else if (token.kind == K::LBrace) {
        advance();
        SourceLoc exprLoc = peek().loc;
        std::shared_ptr<const Expr> interpolated = expression();
        std::string text = dump(*interpolated);
        if (interpolated->kind == Expr::Kind::Binary) text = text.substr(1, text.size() - 2);  // "i - 1", not "(i - 1)"
        expect(K::RBrace, "'}' after '{" + text);
        name.segments.push_back({NameSegment::Kind::Interpolation, text, exprLoc, std::move(interpolated)});
      } else {
        expected("a name segment after '.' (a name, a number or {i})");
      }
    }
    return name;
  }

  ExprPtr primary() {
    const Token &token = peek();
    switch (token.kind) {
      case K::Integer:
      case K::Float: {
        advance();
        double value = std::strtod(token.text.c_str(), nullptr);
        return std::make_unique<NumberExpr>(token.loc, value, token.kind == K::Integer, token.text);
      }
      case K::String: advance(); return std::make_unique<StringExpr>(token.loc, token.text);
      case K::Identifier: {
        if (token.text == "true" || token.text == "false") {
          advance();
          return std::make_unique<BoolExpr>(token.loc, token.text == "true");
        }
        if (token.text == "inf") {
          advance();
          return std::make_unique<NumberExpr>(token.loc, HUGE_VAL, false, "inf");
        }
        if (isKeyword(token.text)) expected("an expression");
        SourceLoc loc = token.loc;
        return std::make_unique<NameExpr>(loc, dottedName());
      }
      case K::LParen: {
        SourceLoc open = advance().loc;
        ExprPtr inner = expression();
        if (!at(K::RParen))
          expected("')' to close '(' at " + std::to_string(open.line) + ":" + std::to_string(open.col));
        advance();
        return inner;
      }
      case K::LBracket: {
        SourceLoc open = advance().loc;
        auto list = std::make_unique<ListExpr>(open);
        while (!at(K::RBracket)) {
          if (!list->items.empty())
            expect(K::Comma, "',' or ']' in the list opened at " + std::to_string(open.line) + ":" + std::to_string(open.col));
          if (at(K::RBracket)) break;
          list->items.push_back(expression());
        }
        advance();
        return list;
      }
      default: expected("an expression");
    }
  }

  std::vector<Token> tokens;
  size_t position = 0;
  int depth = 0;
  std::vector<Diagnostic> diagnostics;
};

}  // namespace

ParseResult parse(std::string_view source) { return Parser(source).run(); }

}  // namespace ein::frontend
