// The syntax tree of a .ein model, as the parser builds it. Plain C++: no MLIR.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ein::frontend {

// 1-based line and column (in bytes) in the model file.
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
};

// ---- expressions -------------------------------------------------------------

struct Expr {
  enum class Kind { Number, Bool, String, Name, Unary, Binary, Call, Index, List };
  Expr(Kind kind, SourceLoc loc) : kind(kind), loc(loc) {}
  virtual ~Expr() = default;
  Kind kind;
  SourceLoc loc;
};
using ExprPtr = std::unique_ptr<Expr>;

struct NumberExpr : Expr {
  NumberExpr(SourceLoc loc, double value, bool isInteger, std::string text)
      : Expr(Kind::Number, loc), value(value), isInteger(isInteger), text(std::move(text)) {}
  double value;
  bool isInteger;
  std::string text;
};

struct BoolExpr : Expr {
  BoolExpr(SourceLoc loc, bool value) : Expr(Kind::Bool, loc), value(value) {}
  bool value;
};

struct StringExpr : Expr {
  StringExpr(SourceLoc loc, std::string value) : Expr(Kind::String, loc), value(std::move(value)) {}
  std::string value;
};

// One part of a dotted name: `blocks`, `0`, or an interpolation `{i}`, `{2 * i + 1}`.
struct NameSegment {
  enum class Kind { Identifier, Integer, Interpolation };
  Kind kind;
  std::string text;  // the identifier, the digits, or the interpolated expression as dump() writes it
  SourceLoc loc;
  std::shared_ptr<const Expr> expr = nullptr;  // an interpolation's integer expression
};

struct Name {
  std::vector<NameSegment> segments;
  std::string str() const;  // as written: "blocks.{i}.norm1"
};

struct NameExpr : Expr {
  NameExpr(SourceLoc loc, Name name) : Expr(Kind::Name, loc), name(std::move(name)) {}
  Name name;
};

struct UnaryExpr : Expr {
  UnaryExpr(SourceLoc loc, char op, ExprPtr operand) : Expr(Kind::Unary, loc), op(op), operand(std::move(operand)) {}
  char op;  // '-', '+' or '~' (logical not of a bool)
  ExprPtr operand;
};

enum class BinaryOp { Add, Sub, Mul, Div, MatMul, Pow, Lt, Le, Gt, Ge, Eq, Ne, FloorDiv, Mod, And, Or };
const char *spelling(BinaryOp op);

struct BinaryExpr : Expr {
  BinaryExpr(SourceLoc loc, BinaryOp op, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind::Binary, loc), op(op), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  BinaryOp op;
  ExprPtr lhs, rhs;
};

struct KeywordArg {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

struct Call : Expr {
  Call(SourceLoc loc, std::string callee) : Expr(Kind::Call, loc), callee(std::move(callee)) {}
  std::string callee;
  std::vector<ExprPtr> positional;
  std::vector<KeywordArg> keywords;
};

// One item inside x[...]: an index `0`, a slice `1:`, or `...`.
struct IndexItem {
  enum class Kind { Index, Slice, Ellipsis };
  Kind kind;
  SourceLoc loc;
  ExprPtr index;        // Kind::Index
  ExprPtr start, stop, step;  // Kind::Slice, each optional
};

struct IndexExpr : Expr {
  IndexExpr(SourceLoc loc, ExprPtr base) : Expr(Kind::Index, loc), base(std::move(base)) {}
  ExprPtr base;
  std::vector<IndexItem> items;
};

struct ListExpr : Expr {
  explicit ListExpr(SourceLoc loc) : Expr(Kind::List, loc) {}
  std::vector<ExprPtr> items;
};

// ---- statements --------------------------------------------------------------

// `f32[b, t, 3*c]`
struct TypeExpr {
  std::string dtype;
  SourceLoc loc;
  std::vector<ExprPtr> dims;
};

struct Stmt {
  enum class Kind { Dim, Config, Input, Param, Output, Assign, Def, For, If, Return };
  Stmt(Kind kind, SourceLoc loc) : kind(kind), loc(loc) {}
  virtual ~Stmt() = default;
  Kind kind;
  SourceLoc loc;
};
using StmtPtr = std::unique_ptr<Stmt>;

struct Identifier {
  std::string name;
  SourceLoc loc;
};

struct DimDecl : Stmt {
  // `d = 64` fixes a dim; `t = 1..512` leaves it to the inputs, within [value, max].
  struct Entry {
    std::string name;
    SourceLoc loc;
    ExprPtr value;
    ExprPtr max;  // null for a fixed dim
  };
  explicit DimDecl(SourceLoc loc) : Stmt(Kind::Dim, loc) {}
  std::vector<Entry> entries;
  // `position past = 0..2048`: one ranged dim whose value is the session's
  // position (the rows appended to its state), not an input's axis.
  bool position = false;
};

// `config rms_norm_eps = 1e-6, hidden_act = "silu" in ["silu", "gelu"]`:
// compile-time values (numbers, booleans, strings) that einc --config, the
// Python package's config= and a checkpoint's config.json replace by name.
struct ConfigDecl : Stmt {
  struct Entry {
    Name name;  // dotted for a field of a nested object (`rope_scaling.factor`)
    SourceLoc loc;
    ExprPtr value;
    ExprPtr allowed;  // `in [...]`: the only values the model handles; null for any
  };
  explicit ConfigDecl(SourceLoc loc) : Stmt(Kind::Config, loc) {}
  std::vector<Entry> entries;
};

struct InputDecl : Stmt {
  explicit InputDecl(SourceLoc loc) : Stmt(Kind::Input, loc) {}
  Name name;  // dotted names may interpolate a loop variable: `input past.{i}.key: ...`
  TypeExpr type;
};

struct ParamDecl : Stmt {
  explicit ParamDecl(SourceLoc loc) : Stmt(Kind::Param, loc) {}
  Name name;
  TypeExpr type;
  bool state = false;  // `state kv.0.key: f32[...]`: session state, not a weight
};

struct OutputDecl : Stmt {
  explicit OutputDecl(SourceLoc loc) : Stmt(Kind::Output, loc) {}
  Name name;
  ExprPtr value;  // null for `output y` (marks an existing value)
};

struct Assign : Stmt {
  explicit Assign(SourceLoc loc) : Stmt(Kind::Assign, loc) {}
  std::vector<Identifier> targets;  // several for `q, k, v = e`
  ExprPtr value;
};

struct Def : Stmt {
  explicit Def(SourceLoc loc) : Stmt(Kind::Def, loc) {}
  std::string name;
  std::vector<Identifier> params;
  std::vector<StmtPtr> body;
};

struct For : Stmt {
  explicit For(SourceLoc loc) : Stmt(Kind::For, loc) {}
  std::string variable;
  ExprPtr start, end;  // `for i in start..end`, end exclusive
  std::vector<StmtPtr> body;
};

// `if c { ... } else if d { ... } else { ... }` on values known when the
// model compiles: only the body of the first true condition runs.
struct If : Stmt {
  struct Branch {
    ExprPtr condition;  // null for the final `else`
    std::vector<StmtPtr> body;
  };
  explicit If(SourceLoc loc) : Stmt(Kind::If, loc) {}
  std::vector<Branch> branches;
};

struct Return : Stmt {
  explicit Return(SourceLoc loc) : Stmt(Kind::Return, loc) {}
  std::vector<ExprPtr> values;
};

struct Module {
  std::vector<StmtPtr> statements;
};

// Canonical text of the tree (one statement per line, fully parenthesised
// expressions), for tests and debugging.
std::string dump(const Module &module);
std::string dump(const Expr &expr);

}  // namespace ein::frontend
