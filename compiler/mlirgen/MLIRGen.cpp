// AST -> ein dialect.
//
// The generator evaluates the model like an interpreter that emits ops
// instead of computing: dims and numbers fold at compile time, `def` blocks
// are inlined at each call and `for` loops unrolled, and each tensor
// expression becomes one ein op whose result type is the op's own shape rule
// (`inferResultType`, which its verifier checks too). Every error is reported
// at the source location of the construct that caused it.
#include "mlirgen/MLIRGen.h"

#include <cmath>
#include <set>
#include <variant>

#include "Limits.h"
#include "ein/IR/EinDialect.h"
#include "ein/IR/Equations.h"
#include "frontend/Parser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace ein::mlirgen {
namespace {

using mlir::Location;
using mlir::RankedTensorType;
using mlir::Type;

namespace ast = ein::frontend;

// Thrown after an error has been emitted, to unwind the recursive evaluator
// to `generate`. It never crosses an MLIR API boundary.
struct GenerationFailed {};

struct Number {
  double value;
  bool isInteger;
};
struct Boolean {
  bool value;
};
struct String {
  std::string value;
};
struct Namespace {
  std::string prefix;  // "blocks.3.mlp"
};
struct Tensor {
  mlir::Value value;
};
struct EValue;
struct List {
  std::vector<EValue> items;
};
struct EValue {
  std::variant<Number, Boolean, String, Namespace, Tensor, List> value;
};

struct Param {
  mlir::Value value;
  RankedTensorType type;
  Location declaredAt;
};

using limits::kMaxCallDepth;

class Generator {
 public:
  Generator(mlir::MLIRContext &context, llvm::StringRef filename, const std::map<std::string, int64_t> &overrides)
      : context(context), builder(&context), filename(filename.str()), overrides(overrides) {}

  mlir::OwningOpRef<mlir::ModuleOp> run(const ast::Module &module) {
    Location fileLoc = mlir::FileLineColLoc::get(&context, filename, 1, 1);
    mlir::OwningOpRef<mlir::ModuleOp> owned = mlir::ModuleOp::create(fileLoc);
    function = mlir::func::FuncOp::create(fileLoc, "main", builder.getFunctionType({}, {}));
    owned->push_back(function);
    body = function.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    try {
      for (const auto &statement : module.statements) execute(*statement, globals);
      for (const auto &[name, _] : overrides)
        if (!usedOverrides.count(name)) fail(fileLoc, "--dim " + name + ": the model declares no dim '" + name + "'");
      if (outputs.empty()) fail(fileLoc, "the model declares no output (write `output NAME = expression`)");
      finish(fileLoc);
      // Values computed from declared ones (an einsum's outer product, say)
      // can outgrow the limits too.
      function.walk([&](mlir::Operation *op) {
        for (mlir::Type type : op->getResultTypes())
          if (auto tensor = mlir::dyn_cast<RankedTensorType>(type)) checkLimits(tensor, op->getLoc(), "this value of type");
      });
    } catch (const GenerationFailed &) {
      return nullptr;
    }
    if (mlir::failed(mlir::verify(*owned))) return nullptr;
    return owned;
  }

 private:
  using Scope = std::map<std::string, EValue>;

  // " (did you mean 'x'?)" for the closest of `known` when it is a likely typo
  // of `name`: a few edits away, and `name` long enough for that to mean something.
  static std::string didYouMean(const std::string &name, const std::vector<std::string> &known) {
    if (name.size() < 3) return "";
    unsigned limit = std::max<unsigned>(1, static_cast<unsigned>(name.size()) / 3), best = limit + 1;
    std::string closest;
    for (const std::string &candidate : known) {
      unsigned distance = llvm::StringRef(name).edit_distance(candidate, /*AllowReplacements=*/true, limit);
      if (distance < best) {
        best = distance;
        closest = candidate;
      }
    }
    return closest.empty() ? "" : " (did you mean '" + closest + "'?)";
  }

  // ---- diagnostics ----------------------------------------------------------

  Location loc(const ast::SourceLoc &at) {
    return mlir::FileLineColLoc::get(&context, filename, at.line, at.col);
  }

  [[noreturn]] void fail(Location at, const std::string &message) {
    mlir::emitError(at) << message;
    throw GenerationFailed{};
  }
  [[noreturn]] void fail(const ast::SourceLoc &at, const std::string &message) { fail(loc(at), message); }

  // The result type an op's shape rule (ir::*Op::inferResultType, which its
  // verifier checks too) gives, or the rule's message, prefixed with
  // `context`, as an error at `at`. Asked before the op is built, so no
  // builder meets operands that admit no result.
  RankedTensorType inferred(const ein::EquationResult<RankedTensorType> &rule, Location at,
                            const std::string &context = "") {
    if (ein::failed(rule)) fail(at, context + std::get<ein::EquationError>(rule).message);
    return std::get<RankedTensorType>(rule);
  }

  static std::string typeString(Type type) {
    if (type.isF32()) return "f32";
    if (type.isF16()) return "f16";
    if (type.isBF16()) return "bf16";
    if (type.isInteger(1)) return "bool";
    if (type.isSignlessInteger(32)) return "i32";
    if (type.isSignlessInteger(64)) return "i64";
    std::string text;
    llvm::raw_string_ostream os(text);
    os << type;
    return text;
  }

  static std::string typeString(RankedTensorType type) {
    return typeString(type.getElementType()) +
           ein::formatShape(ein::Shape(type.getShape().begin(), type.getShape().end()));
  }

  static const char *kindName(const EValue &value) {
    switch (value.value.index()) {
      case 0: return "a number";
      case 1: return "a boolean";
      case 2: return "a string";
      case 3: return "a namespace";
      case 4: return "a tensor";
      default: return "a list";
    }
  }

  // ---- statements ---------------------------------------------------------------

  void execute(const ast::Stmt &statement, Scope &scope) {
    using K = ast::Stmt::Kind;
    switch (statement.kind) {
      case K::Dim: return declareDims(static_cast<const ast::DimDecl &>(statement));
      case K::Input: return declareInput(static_cast<const ast::InputDecl &>(statement), scope);
      case K::Param: return declareParam(static_cast<const ast::ParamDecl &>(statement), scope);
      case K::Output: return declareOutput(static_cast<const ast::OutputDecl &>(statement), scope);
      case K::Assign: return assign(static_cast<const ast::Assign &>(statement), scope);
      case K::Def: {
        const auto &def = static_cast<const ast::Def &>(statement);
        if (!defs.emplace(def.name, &def).second) fail(def.loc, "block '" + def.name + "' is defined twice");
        return;
      }
      case K::For: return runLoop(static_cast<const ast::For &>(statement), scope);
      case K::Return: fail(statement.loc, "'return' outside a def block");
    }
  }

  void declareDims(const ast::DimDecl &decl) {
    for (const auto &entry : decl.entries) {
      if (dims.count(entry.name)) fail(entry.loc, "dim '" + entry.name + "' is declared twice");
      int64_t size;
      if (auto override = overrides.find(entry.name); override != overrides.end()) {
        size = override->second;
        usedOverrides.insert(entry.name);
      } else {
        size = integer(*entry.value, globals, "dim '" + entry.name + "'");
      }
      if (size <= 0) fail(entry.loc, "dim '" + entry.name + "' must be positive, got " + std::to_string(size));
      if (size > limits::kMaxTensorElements)
        fail(entry.loc, "dim '" + entry.name + "' is " + std::to_string(size) + ", beyond the limit of 2^40");
      dims[entry.name] = size;
    }
  }

  RankedTensorType tensorType(const ast::TypeExpr &type, Scope &scope) {
    Type element;
    if (type.dtype == "f32") element = builder.getF32Type();
    else if (type.dtype == "f16") element = builder.getF16Type();
    else if (type.dtype == "bf16") element = builder.getBF16Type();
    else if (type.dtype == "i32") element = builder.getI32Type();
    else if (type.dtype == "i64") element = builder.getI64Type();
    else if (type.dtype == "bool") element = builder.getI1Type();
    else fail(type.loc, "unknown dtype '" + type.dtype + "' (expected f32, f16, bf16, i32, i64 or bool)");
    llvm::SmallVector<int64_t> shape;
    for (const auto &dim : type.dims) {
      int64_t size = integer(*dim, scope, "a shape entry");
      if (size <= 0) fail(dim->loc, "shape entries must be positive, got " + std::to_string(size));
      shape.push_back(size);
    }
    RankedTensorType result = RankedTensorType::get(shape, element);
    checkLimits(result, loc(type.loc), "the type");
    return result;
  }

  // Fails at `at` when `type` is beyond the tensor limits (Limits.h): rank,
  // elements, bytes. Declared types are checked where they are written, every
  // other value once generated, at the expression that computes it.
  void checkLimits(RankedTensorType type, Location at, const std::string &what) {
    if (type.getRank() > limits::kMaxRank)
      fail(at, what + " " + typeString(type) + " has " + std::to_string(type.getRank()) +
                   " axes, beyond the limit of " + std::to_string(limits::kMaxRank));
    std::optional<int64_t> elements = limits::checkedElementCount(type.getShape());
    if (!elements)
      fail(at, what + " " + typeString(type) + " has more elements than the limit of 2^40");
    uint64_t elementBytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
    if (static_cast<uint64_t>(*elements) * elementBytes > limits::kMaxTensorBytes)
      fail(at, what + " " + typeString(type) + " has more bytes than the limit of 2^43");
  }

  void declareInput(const ast::InputDecl &decl, Scope &scope) {
    if (&scope != &globals) fail(decl.loc, "inputs are declared at the top level, not inside a block");
    if (lookup(decl.name, scope)) fail(decl.loc, "'" + decl.name + "' is already defined");
    RankedTensorType type = tensorType(decl.type, scope);
    mlir::Value argument = body->addArgument(type, loc(decl.loc));
    inputNames.push_back(decl.name);
    scope[decl.name] = EValue{Tensor{argument}};
  }

  // "p.fc1.weight" with p = namespace "blocks.3.mlp" -> "blocks.3.mlp.fc1.weight".
  std::string resolveName(const ast::Name &name, Scope &scope) {
    std::string text;
    for (size_t i = 0; i < name.segments.size(); ++i) {
      const auto &segment = name.segments[i];
      std::string part;
      switch (segment.kind) {
        case ast::NameSegment::Kind::Identifier:
          part = segment.text;
          if (i == 0) {
            if (const EValue *value = lookup(segment.text, scope))
              if (auto *ns = std::get_if<Namespace>(&value->value)) part = ns->prefix;
          }
          break;
        case ast::NameSegment::Kind::Integer: part = segment.text; break;
        case ast::NameSegment::Kind::Interpolation: {
          const EValue *value = lookup(segment.text, scope);
          auto *number = value ? std::get_if<Number>(&value->value) : nullptr;
          if (!number || !number->isInteger)
            fail(segment.loc, "'{" + segment.text + "}' needs an integer loop variable named '" + segment.text + "'");
          part = std::to_string(exactInteger(*number, segment.loc, "'{" + segment.text + "}'"));
          break;
        }
      }
      text += (i ? "." : "") + part;
    }
    return text;
  }

  void declareParam(const ast::ParamDecl &decl, Scope &scope) {
    std::string name = resolveName(decl.name, scope);
    RankedTensorType type = tensorType(decl.type, scope);
    if (auto existing = params.find(name); existing != params.end()) {
      if (existing->second.type != type)
        fail(decl.loc, "parameter \"" + name + "\" is declared as " + typeString(type) + " here and as " +
                           typeString(existing->second.type) + " at " + describe(existing->second.declaredAt));
      return;
    }
    // Parameters go to the top of the function, in declaration order, so
    // every use is dominated.
    mlir::OpBuilder::InsertionGuard guard(builder);
    if (lastParam) builder.setInsertionPointAfter(lastParam);
    else builder.setInsertionPointToStart(body);
    auto op = builder.create<ir::ParamOp>(loc(decl.loc), type, builder.getStringAttr(name));
    lastParam = op;
    params.emplace(name, Param{op, type, loc(decl.loc)});
  }

  static std::string describe(Location at) {
    if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(at))
      return file.getFilename().str() + ":" + std::to_string(file.getLine()) + ":" + std::to_string(file.getColumn());
    return "?";
  }

  void declareOutput(const ast::OutputDecl &decl, Scope &scope) {
    if (&scope != &globals) fail(decl.loc, "outputs are declared at the top level, not inside a block");
    for (const auto &output : outputs)
      if (output.first == decl.name) fail(decl.loc, "output '" + decl.name + "' is declared twice");
    mlir::Value value;
    if (decl.value) {
      value = tensor(evaluate(*decl.value, scope), decl.value->loc, "an output");
      scope[decl.name] = EValue{Tensor{value}};
    } else {
      const EValue *existing = lookup(decl.name, scope);
      if (!existing) fail(decl.loc, "output '" + decl.name + "' names no value (write `output " + decl.name + " = ...`)");
      value = tensor(*existing, decl.loc, "an output");
    }
    outputs.emplace_back(decl.name, value);
  }

  void assign(const ast::Assign &statement, Scope &scope) {
    EValue value = evaluate(*statement.value, scope);
    if (statement.targets.size() == 1) {
      bind(statement.targets[0].name, statement.targets[0].loc, std::move(value), scope);
      return;
    }
    size_t count = statement.targets.size();
    if (auto *list = std::get_if<List>(&value.value)) {
      if (list->items.size() != count)
        fail(statement.loc, "cannot unpack " + std::to_string(list->items.size()) + " values into " +
                                std::to_string(count) + " names");
      for (size_t i = 0; i < count; ++i) bind(statement.targets[i].name, statement.targets[i].loc, list->items[i], scope);
      return;
    }
    mlir::Value whole = tensor(value, statement.value->loc, "a tuple assignment");
    auto type = mlir::cast<RankedTensorType>(whole.getType());
    if (type.getRank() == 0 || type.getDimSize(0) != static_cast<int64_t>(count))
      fail(statement.loc, "cannot unpack a tensor of shape " + shapeString(type) + " into " + std::to_string(count) +
                              " names: axis 0 must have size " + std::to_string(count));
    for (size_t i = 0; i < count; ++i) {
      llvm::SmallVector<int64_t> offsets(type.getRank(), 0), sizes(type.getShape());
      offsets[0] = static_cast<int64_t>(i);
      sizes[0] = 1;
      bind(statement.targets[i].name, statement.targets[i].loc,
           EValue{Tensor{slice(loc(statement.targets[i].loc), whole, offsets, sizes, {0})}}, scope);
    }
  }

  void bind(const std::string &name, const ast::SourceLoc &at, EValue value, Scope &scope) {
    if (dims.count(name)) fail(at, "'" + name + "' is a dim and cannot be assigned");
    scope[name] = std::move(value);
  }

  void runLoop(const ast::For &loop, Scope &scope) {
    int64_t start = integer(*loop.start, scope, "a loop bound");
    int64_t end = integer(*loop.end, scope, "a loop bound");
    if (end - start > limits::kMaxLoopIterations)
      fail(loop.loc, "loop of " + std::to_string(end - start) + " iterations is too long (the limit is " +
                         std::to_string(limits::kMaxLoopIterations) + ")");
    std::optional<EValue> shadowed;
    if (auto it = scope.find(loop.variable); it != scope.end()) shadowed = it->second;
    for (int64_t i = start; i < end; ++i) {
      scope[loop.variable] = EValue{Number{static_cast<double>(i), true}};
      for (const auto &statement : loop.body) execute(*statement, scope);
    }
    if (shadowed)
      scope[loop.variable] = *shadowed;
    else
      scope.erase(loop.variable);
  }

  EValue callBlock(const ast::Def &def, const ast::Call &site, Scope &scope) {
    if (site.positional.size() != def.params.size())
      fail(site.loc, "block '" + def.name + "' takes " + std::to_string(def.params.size()) + " argument" +
                         (def.params.size() == 1 ? "" : "s") + " but " + std::to_string(site.positional.size()) +
                         " " + (site.positional.size() == 1 ? "is" : "are") + " given");
    if (!site.keywords.empty()) fail(site.keywords.front().loc, "blocks take positional arguments only");
    if (++callDepth > kMaxCallDepth) fail(site.loc, "blocks nest deeper than " + std::to_string(kMaxCallDepth) + " calls");
    Scope local;
    for (size_t i = 0; i < def.params.size(); ++i) local[def.params[i].name] = evaluateArgument(*site.positional[i], scope);
    std::optional<EValue> result;
    for (const auto &statement : def.body) {
      if (statement->kind == ast::Stmt::Kind::Return) {
        const auto &ret = static_cast<const ast::Return &>(*statement);
        if (ret.values.size() == 1) {
          result = evaluate(*ret.values[0], local);
        } else {
          List list;
          for (const auto &value : ret.values) list.items.push_back(evaluate(*value, local));
          result = EValue{std::move(list)};
        }
        break;
      }
      execute(*statement, local);
    }
    --callDepth;
    if (!result) fail(site.loc, "block '" + def.name + "' returns no value");
    return *result;
  }

  // A block argument may be a namespace: a dotted name that is no value.
  EValue evaluateArgument(const ast::Expr &expr, Scope &scope) {
    if (expr.kind == ast::Expr::Kind::Name) {
      const auto &name = static_cast<const ast::NameExpr &>(expr).name;
      if (auto value = resolveValue(name, scope)) return *value;
      return EValue{Namespace{resolveName(name, scope)}};
    }
    return evaluate(expr, scope);
  }

  const EValue *lookup(const std::string &name, Scope &scope) {
    if (auto it = scope.find(name); it != scope.end()) return &it->second;
    if (&scope != &globals)
      if (auto it = globals.find(name); it != globals.end()) return &it->second;
    return nullptr;
  }

  void finish(Location at) {
    auto ret = builder.create<mlir::func::ReturnOp>(at, [&] {
      llvm::SmallVector<mlir::Value> values;
      for (const auto &output : outputs) values.push_back(output.second);
      return values;
    }());
    llvm::SmallVector<Type> inputTypes(body->getArgumentTypes()), outputTypes(ret.getOperandTypes());
    function.setFunctionType(builder.getFunctionType(inputTypes, outputTypes));
    for (size_t i = 0; i < inputNames.size(); ++i)
      function.setArgAttr(static_cast<unsigned>(i), "ein.name", builder.getStringAttr(inputNames[i]));
    for (size_t i = 0; i < outputs.size(); ++i)
      function.setResultAttr(static_cast<unsigned>(i), "ein.name", builder.getStringAttr(outputs[i].first));
  }

  // ---- expressions --------------------------------------------------------------

  std::optional<EValue> resolveValue(const ast::Name &name, Scope &scope) {
    if (name.segments.size() == 1 && name.segments[0].kind == ast::NameSegment::Kind::Identifier) {
      const std::string &identifier = name.segments[0].text;
      if (const EValue *value = lookup(identifier, scope)) return *value;
      if (auto dim = dims.find(identifier); dim != dims.end())
        return EValue{Number{static_cast<double>(dim->second), true}};
    }
    std::string full = resolveName(name, scope);
    if (auto param = params.find(full); param != params.end()) return EValue{Tensor{param->second.value}};
    return std::nullopt;
  }

  // The parser bounds the nesting of one expression, but blocks are inlined:
  // an expression that calls a block evaluates the block's expressions inside
  // it, so the depth is also bounded across calls (the C++ stack is finite).
  EValue evaluate(const ast::Expr &expr, Scope &scope) {
    if (++evaluationDepth > limits::kMaxEvaluationDepth)
      fail(expr.loc, "expressions nest deeper than " + std::to_string(limits::kMaxEvaluationDepth) +
                         " levels, counting those of the blocks they call");
    EValue value = evaluateUnbounded(expr, scope);
    --evaluationDepth;
    return value;
  }

  EValue evaluateUnbounded(const ast::Expr &expr, Scope &scope) {
    using K = ast::Expr::Kind;
    switch (expr.kind) {
      case K::Number: {
        const auto &number = static_cast<const ast::NumberExpr &>(expr);
        return EValue{Number{number.value, number.isInteger}};
      }
      case K::Bool: return EValue{Boolean{static_cast<const ast::BoolExpr &>(expr).value}};
      case K::String: return EValue{String{static_cast<const ast::StringExpr &>(expr).value}};
      case K::Name: {
        const auto &name = static_cast<const ast::NameExpr &>(expr).name;
        if (auto value = resolveValue(name, scope)) return *value;
        std::string full = resolveName(name, scope);
        if (name.segments.size() == 1) {
          std::vector<std::string> known;
          for (const Scope *names : {&scope, &globals})
            for (const auto &entry : *names) known.push_back(entry.first);
          for (const auto &entry : dims) known.push_back(entry.first);
          fail(expr.loc, "unknown name '" + full + "'" + didYouMean(full, known));
        }
        std::vector<std::string> known;
        for (const auto &entry : params) known.push_back(entry.first);
        std::string suggestion = didYouMean(full, known);
        fail(expr.loc, "unknown parameter \"" + full + "\"" +
                           (suggestion.empty() ? " (declare it with `param " + full + ": f32[...]`)" : suggestion));
      }
      case K::Unary: {
        const auto &unary = static_cast<const ast::UnaryExpr &>(expr);
        EValue operand = evaluate(*unary.operand, scope);
        if (unary.op == '+') return operand;
        if (auto *number = std::get_if<Number>(&operand.value)) return EValue{Number{-number->value, number->isInteger}};
        mlir::Value value = floatTensor(operand, unary.operand->loc, "unary '-'");
        return EValue{Tensor{unaryOp(loc(expr.loc), ir::UnaryKind::neg, value)}};
      }
      case K::Binary: return binary(static_cast<const ast::BinaryExpr &>(expr), scope);
      case K::Call: return callExpr(static_cast<const ast::Call &>(expr), scope);
      case K::Index: return index(static_cast<const ast::IndexExpr &>(expr), scope);
      case K::List: {
        List list;
        for (const auto &item : static_cast<const ast::ListExpr &>(expr).items) list.items.push_back(evaluate(*item, scope));
        return EValue{std::move(list)};
      }
    }
    fail(expr.loc, "unsupported expression");
  }

  int64_t integer(const ast::Expr &expr, Scope &scope, const std::string &what) {
    EValue value = evaluate(expr, scope);
    auto *number = std::get_if<Number>(&value.value);
    if (!number) fail(expr.loc, what + " must be an integer, not " + kindName(value));
    return exactInteger(*number, expr.loc, what);
  }

  // `number` as an int64, for every number the compiler uses as an integer
  // (dims, shape entries, axes, loop bounds, integer constants): whole, and
  // within +-2^53, where doubles stop being exact (and long before the
  // conversion to int64 would overflow).
  int64_t exactInteger(const Number &number, const ast::SourceLoc &at, const std::string &what) {
    if (!std::isfinite(number.value) || std::fabs(number.value) > static_cast<double>(limits::kMaxExactInteger))
      fail(at, what + " is too large: " + formatNumber(number.value) + " (integers are limited to +-2^53)");
    if (!number.isInteger && number.value != std::floor(number.value))
      fail(at, what + " must be an integer, got " + formatNumber(number.value));
    return static_cast<int64_t>(number.value);
  }

  static std::string formatNumber(double value) {
    std::string text = std::to_string(value);
    while (!text.empty() && text.back() == '0') text.pop_back();
    if (!text.empty() && text.back() == '.') text.pop_back();
    return text;
  }

  static std::string shapeString(RankedTensorType type) {
    return ein::formatShape(ein::Shape(type.getShape().begin(), type.getShape().end()));
  }

  mlir::Value tensor(const EValue &value, const ast::SourceLoc &at, const std::string &what) {
    if (auto *t = std::get_if<Tensor>(&value.value)) return t->value;
    fail(at, what + " must be a tensor, not " + kindName(value));
  }

  // A tensor as f32 for float arithmetic (PyTorch promotes bool/int operands).
  mlir::Value floatTensor(const EValue &value, const ast::SourceLoc &at, const std::string &what) {
    mlir::Value t = tensor(value, at, what);
    return isFloat(t) ? t : cast(loc(at), t, builder.getF32Type());
  }

  static Type elementType(mlir::Value value) { return mlir::cast<RankedTensorType>(value.getType()).getElementType(); }
  static bool isFloat(mlir::Value value) { return mlir::isa<mlir::FloatType>(elementType(value)); }
  static RankedTensorType typeOf(mlir::Value value) { return mlir::cast<RankedTensorType>(value.getType()); }

  mlir::Value cast(Location at, mlir::Value value, Type element) {
    if (elementType(value) == element) return value;
    return builder.create<ir::CastOp>(at, RankedTensorType::get(typeOf(value).getShape(), element), value);
  }

  mlir::Value scalarConstant(Location at, double value, Type element) {
    auto type = RankedTensorType::get({}, element);
    mlir::DenseElementsAttr attr;
    if (auto floatType = mlir::dyn_cast<mlir::FloatType>(element)) {
      // In the element type's own format (f16, bf16, f32): an attribute's
      // values must have its element type's semantics.
      llvm::APFloat converted(value);
      bool losesInfo = false;
      converted.convert(floatType.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
      attr = mlir::DenseElementsAttr::get(type, converted);
    } else if (element.isInteger(1)) {
      attr = mlir::DenseElementsAttr::get(type, value != 0);
    } else {
      // Integer constants meet integer tensors only as whole numbers (a
      // float number promotes the tensor to f32); they must fit its type.
      unsigned width = element.getIntOrFloatBitWidth();
      double limit = std::ldexp(1.0, static_cast<int>(width) - 1);
      if (!(value >= -limit && value < limit) || std::fabs(value) > static_cast<double>(limits::kMaxExactInteger))
        fail(at, "the integer " + formatNumber(value) + " does not fit the " + typeString(element) + " tensor it meets");
      attr = mlir::DenseElementsAttr::get(type, llvm::APInt(width, static_cast<int64_t>(value), true));
    }
    return builder.create<ir::ConstantOp>(at, attr);
  }

  mlir::Value unaryOp(Location at, ir::UnaryKind kind, mlir::Value value) {
    return builder.create<ir::UnaryOp>(at, value.getType(), ir::UnaryKindAttr::get(&context, kind), value);
  }

  // Both operands of a binary op as tensors of one element type, PyTorch style.
  std::pair<mlir::Value, mlir::Value> promote(Location at, const EValue &lhs, const ast::SourceLoc &lhsLoc,
                                              const EValue &rhs, const ast::SourceLoc &rhsLoc) {
    auto *lhsNumber = std::get_if<Number>(&lhs.value);
    auto *rhsNumber = std::get_if<Number>(&rhs.value);
    if (lhsNumber || rhsNumber) {
      // A number takes the tensor's type, except a float number with an
      // integer or bool tensor, which gives f32.
      const EValue &other = lhsNumber ? rhs : lhs;
      const Number &number = lhsNumber ? *lhsNumber : *rhsNumber;
      mlir::Value t = tensor(other, lhsNumber ? rhsLoc : lhsLoc, "an operand");
      if (!number.isInteger || elementType(t).isInteger(1)) t = isFloat(t) ? t : cast(at, t, builder.getF32Type());
      mlir::Value constant = scalarConstant(at, number.value, elementType(t));
      return lhsNumber ? std::make_pair(constant, t) : std::make_pair(t, constant);
    }
    mlir::Value a = tensor(lhs, lhsLoc, "an operand"), b = tensor(rhs, rhsLoc, "an operand");
    Type ta = elementType(a), tb = elementType(b);
    if (ta == tb) return {a, b};
    auto rank = [](Type t) { return mlir::isa<mlir::FloatType>(t) ? 3 : t.isInteger(1) ? 0 : t.getIntOrFloatBitWidth() == 32 ? 1 : 2; };
    Type target = rank(ta) >= rank(tb) ? ta : tb;
    // Two float types: the wider; f16 with bf16 gives f32, as in PyTorch.
    if (rank(ta) == 3 && rank(tb) == 3)
      target = ta.getIntOrFloatBitWidth() != tb.getIntOrFloatBitWidth()
                   ? (ta.getIntOrFloatBitWidth() > tb.getIntOrFloatBitWidth() ? ta : tb)
                   : builder.getF32Type();
    return {cast(at, a, target), cast(at, b, target)};
  }

  std::optional<double> foldNumbers(char op, double a, double b) {
    switch (op) {
      case '+': return a + b;
      case '-': return a - b;
      case '*': return a * b;
      case '/': return a / b;
      case '^': return std::pow(a, b);  // '**'
      default: return std::nullopt;
    }
  }

  EValue binary(const ast::BinaryExpr &expr, Scope &scope) {
    EValue lhs = evaluate(*expr.lhs, scope);
    EValue rhs = evaluate(*expr.rhs, scope);
    Location at = loc(expr.loc);
    ast::BinaryOp op = expr.op;
    auto *a = std::get_if<Number>(&lhs.value);
    auto *b = std::get_if<Number>(&rhs.value);
    if (a && b) {
      switch (op) {
        case ast::BinaryOp::Add: return EValue{Number{a->value + b->value, a->isInteger && b->isInteger}};
        case ast::BinaryOp::Sub: return EValue{Number{a->value - b->value, a->isInteger && b->isInteger}};
        case ast::BinaryOp::Mul: return EValue{Number{a->value * b->value, a->isInteger && b->isInteger}};
        case ast::BinaryOp::Div: {
          if (b->value == 0) fail(expr.loc, "division by zero");
          double quotient = a->value / b->value;
          // Integer division that divides exactly stays an integer, so shape
          // expressions like c/h work; otherwise it is a float, as in Python.
          return EValue{Number{quotient, a->isInteger && b->isInteger && quotient == std::floor(quotient)}};
        }
        case ast::BinaryOp::Pow: return EValue{Number{std::pow(a->value, b->value), a->isInteger && b->isInteger && b->value >= 0}};
        default: fail(expr.loc, "comparisons of numbers are not supported");
      }
    }
    if (op == ast::BinaryOp::MatMul) {
      mlir::Value x = tensor(lhs, expr.lhs->loc, "the left operand of '@'");
      mlir::Value y = tensor(rhs, expr.rhs->loc, "the right operand of '@'");
      return EValue{Tensor{matmul(at, x, y, expr.lhs->loc, expr.rhs->loc)}};
    }
    auto [x, y] = promote(at, lhs, expr.lhs->loc, rhs, expr.rhs->loc);
    ir::BinaryKind kind;
    switch (op) {
      case ast::BinaryOp::Add: kind = ir::BinaryKind::add; break;
      case ast::BinaryOp::Sub: kind = ir::BinaryKind::sub; break;
      case ast::BinaryOp::Mul: kind = ir::BinaryKind::mul; break;
      case ast::BinaryOp::Div:
        kind = ir::BinaryKind::div;
        if (!isFloat(x)) {  // true division, as in Python and PyTorch
          x = cast(at, x, builder.getF32Type());
          y = cast(at, y, builder.getF32Type());
        }
        break;
      case ast::BinaryOp::Pow: kind = ir::BinaryKind::pow; break;
      case ast::BinaryOp::Lt: kind = ir::BinaryKind::lt; break;
      case ast::BinaryOp::Le: kind = ir::BinaryKind::le; break;
      case ast::BinaryOp::Gt: kind = ir::BinaryKind::gt; break;
      case ast::BinaryOp::Ge: kind = ir::BinaryKind::ge; break;
      case ast::BinaryOp::Eq: kind = ir::BinaryKind::eq; break;
      case ast::BinaryOp::Ne: kind = ir::BinaryKind::ne; break;
      default: fail(expr.loc, "unsupported operator");
    }
    return EValue{Tensor{binaryOp(at, kind, x, y)}};
  }

  mlir::Value binaryOp(Location at, ir::BinaryKind kind, mlir::Value x, mlir::Value y) {
    auto type = inferred(ir::BinaryOp::inferResultType(kind, x.getType(), y.getType()), at);
    return builder.create<ir::BinaryOp>(at, type, ir::BinaryKindAttr::get(&context, kind), x, y);
  }

  static ein::Shape shapeOf(mlir::Value value) {
    auto shape = typeOf(value).getShape();
    return ein::Shape(shape.begin(), shape.end());
  }

  mlir::Value matmul(Location at, mlir::Value x, mlir::Value y, const ast::SourceLoc &xLoc, const ast::SourceLoc &yLoc) {
    ein::Shape a = shapeOf(x), b = shapeOf(y);
    if (a.empty()) fail(xLoc, "'@' needs tensors with at least one axis");
    if (b.empty()) fail(yLoc, "'@' needs tensors with at least one axis");
    auto [xx, yy] = promote(at, EValue{Tensor{x}}, xLoc, EValue{Tensor{y}}, yLoc);
    auto type = inferred(ir::MatmulOp::inferResultType(xx.getType(), yy.getType()), at, "'@' ");
    return builder.create<ir::MatmulOp>(at, type, xx, yy);
  }

  // `steps` empty: every step is 1.
  mlir::Value slice(Location at, mlir::Value value, llvm::ArrayRef<int64_t> offsets, llvm::ArrayRef<int64_t> sizes,
                    llvm::ArrayRef<int64_t> dropped, llvm::ArrayRef<int64_t> steps = {}) {
    bool unitSteps = llvm::all_of(steps, [](int64_t step) { return step == 1; });
    if (unitSteps) steps = {};
    auto type = inferred(ir::SliceOp::inferResultType(value.getType(), offsets, sizes, dropped, steps), at);
    return builder.create<ir::SliceOp>(at, type, value, builder.getDenseI64ArrayAttr(offsets),
                                       builder.getDenseI64ArrayAttr(sizes), builder.getDenseI64ArrayAttr(dropped),
                                       builder.getDenseI64ArrayAttr(steps));
  }

  EValue index(const ast::IndexExpr &expr, Scope &scope) {
    mlir::Value value = tensor(evaluate(*expr.base, scope), expr.base->loc, "an indexed value");
    auto type = typeOf(value);
    int64_t rank = type.getRank();
    size_t ellipses = 0;
    for (const auto &item : expr.items) ellipses += item.kind == ast::IndexItem::Kind::Ellipsis;
    if (ellipses > 1) fail(expr.loc, "an index may hold one '...' at most");
    int64_t named = static_cast<int64_t>(expr.items.size() - ellipses);
    if (named > rank)
      fail(expr.loc, "too many indices: " + std::to_string(named) + " for a tensor of rank " + std::to_string(rank));
    llvm::SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape()), dropped, steps(rank, 1);
    int64_t axis = 0;
    for (const auto &item : expr.items) {
      if (item.kind == ast::IndexItem::Kind::Ellipsis) {
        axis += rank - named;
        continue;
      }
      int64_t size = type.getDimSize(axis);
      if (item.kind == ast::IndexItem::Kind::Index) {
        int64_t i = integer(*item.index, scope, "an index");
        int64_t position = i < 0 ? i + size : i;
        if (position < 0 || position >= size)
          fail(item.loc, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) +
                             " of size " + std::to_string(size));
        offsets[axis] = position;
        sizes[axis] = 1;
        dropped.push_back(axis);
      } else {
        auto bound = [&](const ast::ExprPtr &e, int64_t fallback) {
          if (!e) return fallback;
          int64_t v = integer(*e, scope, "a slice bound");
          if (v < 0) v += size;
          return std::clamp<int64_t>(v, 0, size);
        };
        int64_t step = item.step ? integer(*item.step, scope, "a slice step") : 1;
        if (step < 1)
          fail(item.step->loc, "slice step " + std::to_string(step) + " is not positive (as in PyTorch, steps are >= 1)");
        int64_t start = bound(item.start, 0), stop = bound(item.stop, size);
        offsets[axis] = start;
        steps[axis] = step;
        sizes[axis] = stop > start ? (stop - start + step - 1) / step : 0;
        if (sizes[axis] == 0) fail(item.loc, "slice of axis " + std::to_string(axis) + " is empty");
      }
      ++axis;
    }
    return EValue{Tensor{slice(loc(expr.loc), value, offsets, sizes, dropped, steps)}};
  }

  // ---- calls --------------------------------------------------------------------------

  // Arguments of a built-in call, matched by position or keyword.
  struct Arguments {
    const ast::Call &call;
    std::vector<std::string> names;  // parameter names, in positional order
    std::vector<const ast::Expr *> bound;
    std::map<std::string, const ast::Expr *> extra;  // keywords beyond `names` (einops sizes)

    const ast::Expr *get(const std::string &name) const {
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return bound[i];
      return nullptr;
    }
  };

  Arguments bindArguments(const ast::Call &call, std::vector<std::string> names, size_t required, bool allowExtra) {
    Arguments args{call, names, std::vector<const ast::Expr *>(names.size(), nullptr), {}};
    if (call.positional.size() > names.size())
      fail(call.positional[names.size()]->loc, call.callee + "() takes at most " + std::to_string(names.size()) +
                                                   " positional argument" + (names.size() == 1 ? "" : "s"));
    for (size_t i = 0; i < call.positional.size(); ++i) args.bound[i] = call.positional[i].get();
    for (const auto &keyword : call.keywords) {
      auto it = std::find(names.begin(), names.end(), keyword.name);
      if (it == names.end()) {
        if (!allowExtra) fail(keyword.loc, call.callee + "() has no argument '" + keyword.name + "'");
        args.extra[keyword.name] = keyword.value.get();
        continue;
      }
      size_t i = it - names.begin();
      if (args.bound[i]) fail(keyword.loc, call.callee + "() got argument '" + keyword.name + "' twice");
      args.bound[i] = keyword.value.get();
    }
    for (size_t i = 0; i < required; ++i)
      if (!args.bound[i]) fail(call.loc, call.callee + "() is missing argument '" + names[i] + "'");
    return args;
  }

  std::string stringArgument(const ast::Expr &expr, Scope &scope, const std::string &what) {
    EValue value = evaluate(expr, scope);
    if (auto *s = std::get_if<String>(&value.value)) return s->value;
    fail(expr.loc, what + " must be a string, not " + kindName(value));
  }

  bool boolArgument(const ast::Expr *expr, Scope &scope, bool fallback, const std::string &what) {
    if (!expr) return fallback;
    EValue value = evaluate(*expr, scope);
    if (auto *b = std::get_if<Boolean>(&value.value)) return b->value;
    fail(expr->loc, what + " must be true or false, not " + kindName(value));
  }

  double numberArgument(const ast::Expr *expr, Scope &scope, double fallback, const std::string &what) {
    if (!expr) return fallback;
    EValue value = evaluate(*expr, scope);
    if (auto *n = std::get_if<Number>(&value.value)) return n->value;
    fail(expr->loc, what + " must be a number, not " + kindName(value));
  }

  // Normalised axes from an int or a list of ints.
  llvm::SmallVector<int64_t> axesArgument(const ast::Expr &expr, Scope &scope, int64_t rank) {
    EValue value = evaluate(expr, scope);
    std::vector<EValue> items;
    if (auto *list = std::get_if<List>(&value.value)) items = list->items;
    else items.push_back(value);
    llvm::SmallVector<int64_t> axes;
    for (const EValue &item : items) {
      auto *n = std::get_if<Number>(&item.value);
      if (!n || !n->isInteger) fail(expr.loc, "axis must be an integer or a list of integers");
      int64_t axis = exactInteger(*n, expr.loc, "an axis");
      if (axis < -rank || axis >= rank)
        fail(expr.loc, "axis " + std::to_string(axis) + " is out of range for a tensor of rank " + std::to_string(rank));
      axis = axis < 0 ? axis + rank : axis;
      if (llvm::is_contained(axes, axis)) fail(expr.loc, "axis " + std::to_string(axis) + " is listed twice");
      axes.push_back(axis);
    }
    return axes;
  }

  EValue callExpr(const ast::Call &call, Scope &scope) {
    if (auto def = defs.find(call.callee); def != defs.end()) return callBlock(*def->second, call, scope);
    if (auto builtin = builtins().find(call.callee); builtin != builtins().end())
      return (this->*builtin->second)(call, scope);
    std::vector<std::string> known;
    for (const auto &entry : builtins()) known.push_back(entry.first);
    for (const auto &entry : defs) known.push_back(entry.first);
    fail(call.loc, "unknown function '" + call.callee + "'" + didYouMean(call.callee, known));
  }

  // ---- built-in functions ------------------------------------------------------

  // Builds a built-in function's value from a call to it (named call.callee).
  using Builtin = EValue (Generator::*)(const ast::Call &call, Scope &scope);

  static const std::map<std::string, ir::UnaryKind> &unaryKinds() {
    static const std::map<std::string, ir::UnaryKind> kinds = {
        {"relu", ir::UnaryKind::relu},   {"gelu", ir::UnaryKind::gelu},       {"gelu_tanh", ir::UnaryKind::gelu_tanh},
        {"silu", ir::UnaryKind::silu},   {"sigmoid", ir::UnaryKind::sigmoid}, {"tanh", ir::UnaryKind::tanh},
        {"exp", ir::UnaryKind::exp},     {"log", ir::UnaryKind::log},         {"sqrt", ir::UnaryKind::sqrt},
        {"rsqrt", ir::UnaryKind::rsqrt}, {"abs", ir::UnaryKind::abs}};
    return kinds;
  }

  // Every built-in function by name: what calls dispatch on and what "did you
  // mean" suggests from.
  static const std::map<std::string, Builtin> &builtins() {
    static const std::map<std::string, Builtin> table = [] {
      std::map<std::string, Builtin> entries;
      for (const auto &entry : unaryKinds()) entries[entry.first] = &Generator::callUnary;
      for (const char *name : {"maximum", "minimum"}) entries[name] = &Generator::callMaximumOrMinimum;
      entries["einsum"] = &Generator::callEinsum;
      for (const char *name : {"rearrange", "reduce", "repeat"}) entries[name] = &Generator::callEinops;
      entries["softmax"] = &Generator::callSoftmax;
      for (const char *name : {"sum", "mean", "max", "min", "var", "std", "any", "all"})
        entries[name] = &Generator::callReduction;
      entries["layernorm"] = &Generator::callLayerNorm;
      entries["linear"] = &Generator::callLinear;
      entries["embedding"] = &Generator::callEmbedding;
      entries["masked_fill"] = &Generator::callMaskedFill;
      entries["where"] = &Generator::callWhere;
      entries["concat"] = &Generator::callConcat;
      entries["transpose"] = &Generator::callTranspose;
      entries["reshape"] = &Generator::callReshape;
      entries["conv2d"] = &Generator::callConv2d;
      return entries;
    }();
    return table;
  }

  // The value of a call's tensor argument `param`.
  mlir::Value tensorArgument(const ast::Call &call, Scope &scope, const Arguments &args, const std::string &param) {
    const ast::Expr *expr = args.get(param);
    return tensor(evaluate(*expr, scope), expr->loc, call.callee + "() argument '" + param + "'");
  }

  EValue callUnary(const ast::Call &call, Scope &scope) {
    const ir::UnaryKind kind = unaryKinds().at(call.callee);
    Arguments args = bindArguments(call, {"x"}, 1, false);
    EValue x = evaluate(*args.get("x"), scope);
    if (auto *n = std::get_if<Number>(&x.value)) return EValue{Number{foldUnary(kind, n->value, call), false}};
    return EValue{Tensor{unaryOp(loc(call.loc), kind, floatTensor(x, args.get("x")->loc, call.callee + "() argument"))}};
  }

  EValue callMaximumOrMinimum(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    const std::string &name = call.callee;
    Arguments args = bindArguments(call, {"a", "b"}, 2, false);
    auto [x, y] = promote(at, evaluate(*args.get("a"), scope), args.get("a")->loc, evaluate(*args.get("b"), scope),
                          args.get("b")->loc);
    return EValue{Tensor{binaryOp(at, name == "maximum" ? ir::BinaryKind::maximum : ir::BinaryKind::minimum, x, y)}};
  }

  EValue callEinsum(const ast::Call &call, Scope &scope) { return EValue{Tensor{einsum(call, scope)}}; }

  EValue callEinops(const ast::Call &call, Scope &scope) { return EValue{Tensor{einops(call, scope)}}; }

  EValue callSoftmax(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "axis"}, 1, false);
    mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, "softmax() argument 'x'");
    int64_t rank = typeOf(x).getRank();
    if (rank == 0) fail(args.get("x")->loc, "softmax() needs a tensor with at least one axis");
    int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : rank - 1;
    return EValue{Tensor{builder.create<ir::SoftmaxOp>(at, x.getType(), x, builder.getI64IntegerAttr(axis))}};
  }

  // any/all reduce x != 0 as 1.0/0.0 with max/min (the kernels compute in f32), then
  // compare with 0.5 for a bool result.
  mlir::Value truthAsFloat(Location at, mlir::Value x) {
    if (!elementType(x).isInteger(1))
      x = binaryOp(at, ir::BinaryKind::ne, x, scalarConstant(at, 0.0, elementType(x)));
    return cast(at, x, builder.getF32Type());
  }
  mlir::Value truthOf(Location at, mlir::Value reduced) {
    return binaryOp(at, ir::BinaryKind::gt, reduced, scalarConstant(at, 0.5, builder.getF32Type()));
  }

  EValue callReduction(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    const std::string &name = call.callee;
    bool moment = name == "var" || name == "std";
    bool logical = name == "any" || name == "all";
    Arguments args = moment ? bindArguments(call, {"x", "axis", "unbiased", "keepdim"}, 1, false)
                            : bindArguments(call, {"x", "axis", "keepdim"}, 1, false);
    mlir::Value x = tensor(evaluate(*args.get("x"), scope), args.get("x")->loc, name + "() argument 'x'");
    if (logical) x = truthAsFloat(at, x);
    else if (name != "max" && name != "min") x = floatTensor(EValue{Tensor{x}}, args.get("x")->loc, name + "()");
    int64_t rank = typeOf(x).getRank();
    llvm::SmallVector<int64_t> axes;
    if (args.get("axis")) axes = axesArgument(*args.get("axis"), scope, rank);
    else if (rank > 0) axes.push_back(rank - 1);
    bool keepdim = boolArgument(args.get("keepdim"), scope, false, "keepdim");
    bool unbiased = moment && boolArgument(args.get("unbiased"), scope, false, "unbiased");
    static const std::map<std::string, ir::ReduceKind> kinds = {
        {"sum", ir::ReduceKind::sum}, {"mean", ir::ReduceKind::mean}, {"max", ir::ReduceKind::max},
        {"min", ir::ReduceKind::min}, {"var", ir::ReduceKind::var},   {"std", ir::ReduceKind::std},
        {"any", ir::ReduceKind::max}, {"all", ir::ReduceKind::min}};
    std::sort(axes.begin(), axes.end());
    int64_t correction = unbiased ? 1 : 0;
    auto type = inferred(ir::ReduceOp::inferResultType(x.getType(), axes, keepdim, correction), at);
    auto op = builder.create<ir::ReduceOp>(at, type, x,
                                           ir::ReduceKindAttr::get(&context, kinds.at(name)),
                                           builder.getDenseI64ArrayAttr(axes), builder.getBoolAttr(keepdim),
                                           builder.getI64IntegerAttr(correction));
    return EValue{Tensor{logical ? truthOf(at, op) : mlir::Value(op)}};
  }

  EValue callLayerNorm(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "weight", "bias", "eps"}, 1, false);
    mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, "layernorm() argument 'x'");
    if (typeOf(x).getRank() == 0) fail(args.get("x")->loc, "layernorm() needs a tensor with at least one axis");
    int64_t features = typeOf(x).getShape().back();
    auto affine = [&](const std::string &param) -> mlir::Value {
      if (!args.get(param)) return nullptr;
      mlir::Value v = tensorArgument(call, scope, args, param);
      if (shapeOf(v) != ein::Shape{features})
        fail(args.get(param)->loc, "layernorm() " + param + " has shape " + shapeString(typeOf(v)) +
                                       " but the input's last axis is " + std::to_string(features));
      return cast(at, v, elementType(x));
    };
    mlir::Value weight = affine("weight"), bias = affine("bias");
    double eps = numberArgument(args.get("eps"), scope, 1e-5, "eps");
    return EValue{Tensor{builder.create<ir::LayerNormOp>(
        at, x.getType(), x, /*residual=*/mlir::Value(), weight, bias, builder.getF64FloatAttr(eps),
        ir::LayerNormVariantAttr::get(&context, ir::LayerNormVariant::variance))}};
  }

  EValue callLinear(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "weight", "bias"}, 2, false);
    mlir::Value x = tensorArgument(call, scope, args, "x"), w = tensorArgument(call, scope, args, "weight");
    ein::Shape xs = shapeOf(x), ws = shapeOf(w);
    if (ws.size() != 2) fail(args.get("weight")->loc, "linear() weight must be [out, in], got " + ein::formatShape(ws));
    if (xs.empty() || xs.back() != ws[1])
      fail(at, "linear() weight " + ein::formatShape(ws) + " takes " + std::to_string(ws[1]) +
                   " input features but x " + ein::formatShape(xs) + " has " +
                   (xs.empty() ? std::string("none") : std::to_string(xs.back())));
    mlir::Value b;
    if (args.get("bias")) {
      b = tensorArgument(call, scope, args, "bias");
      if (shapeOf(b) != ein::Shape{ws[0]})
        fail(args.get("bias")->loc, "linear() bias has shape " + shapeString(typeOf(b)) + " but should be [" +
                                        std::to_string(ws[0]) + "]");
    }
    auto type = inferred(ir::LinearOp::inferResultType(x.getType(), w.getType(), b ? b.getType() : Type()), at);
    return EValue{Tensor{builder.create<ir::LinearOp>(at, type, x, w, b)}};
  }

  EValue callEmbedding(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"ids", "table"}, 2, false);
    mlir::Value ids = tensorArgument(call, scope, args, "ids"), table = tensorArgument(call, scope, args, "table");
    if (!elementType(ids).isSignlessInteger(32) && !elementType(ids).isSignlessInteger(64))
      fail(args.get("ids")->loc, "embedding() ids must be i32 or i64, not " + typeString(elementType(ids)));
    if (typeOf(table).getRank() != 2)
      fail(args.get("table")->loc, "embedding() table must be [rows, width], got " + shapeString(typeOf(table)));
    auto type = inferred(ir::EmbeddingOp::inferResultType(ids.getType(), table.getType()), at);
    return EValue{Tensor{builder.create<ir::EmbeddingOp>(at, type, ids, table)}};
  }

  EValue callMaskedFill(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "mask", "value"}, 3, false);
    mlir::Value x = tensorArgument(call, scope, args, "x"), mask = tensorArgument(call, scope, args, "mask");
    if (!elementType(mask).isInteger(1))
      fail(args.get("mask")->loc, "masked_fill() mask must be bool, not " + typeString(elementType(mask)));
    auto shape = ein::broadcastShapes(shapeOf(mask), shapeOf(x));
    if (ein::failed(shape) || std::get<ein::Shape>(shape) != shapeOf(x))
      fail(args.get("mask")->loc, "masked_fill() mask of shape " + shapeString(typeOf(mask)) +
                                      " does not broadcast to x of shape " + shapeString(typeOf(x)));
    double fill = numberArgument(args.get("value"), scope, 0, "masked_fill() value");
    mlir::Value constant = scalarConstant(at, fill, elementType(x));
    auto type = inferred(ir::WhereOp::inferResultType(mask.getType(), constant.getType(), x.getType()), at);
    return EValue{Tensor{builder.create<ir::WhereOp>(at, type, mask, constant, x)}};
  }

  EValue callWhere(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"condition", "a", "b"}, 3, false);
    mlir::Value condition = tensorArgument(call, scope, args, "condition");
    if (!elementType(condition).isInteger(1))
      fail(args.get("condition")->loc, "where() condition must be bool, not " + typeString(elementType(condition)));
    auto [a, b] = promote(at, evaluate(*args.get("a"), scope), args.get("a")->loc, evaluate(*args.get("b"), scope),
                          args.get("b")->loc);
    auto type = inferred(ir::WhereOp::inferResultType(condition.getType(), a.getType(), b.getType()), at, "where(): ");
    return EValue{Tensor{builder.create<ir::WhereOp>(at, type, condition, a, b)}};
  }

  EValue callConcat(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"tensors", "axis"}, 1, false);
    EValue list = evaluate(*args.get("tensors"), scope);
    auto *items = std::get_if<List>(&list.value);
    if (!items || items->items.empty()) fail(args.get("tensors")->loc, "concat() takes a non-empty list of tensors");
    llvm::SmallVector<mlir::Value> tensors;
    for (const EValue &item : items->items) tensors.push_back(tensor(item, args.get("tensors")->loc, "concat() item"));
    int64_t rank = typeOf(tensors[0]).getRank();
    int64_t axis = args.get("axis") ? axesArgument(*args.get("axis"), scope, rank)[0] : 0;
    ein::Shape shape = shapeOf(tensors[0]);
    for (size_t i = 1; i < tensors.size(); ++i) {
      ein::Shape other = shapeOf(tensors[i]);
      bool fits = other.size() == shape.size() && elementType(tensors[i]) == elementType(tensors[0]);
      for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || other[d] == shape[d];
      if (!fits)
        fail(args.get("tensors")->loc, "concat() item " + std::to_string(i + 1) + " has shape " +
                                           ein::formatShape(other) + ", which does not match " +
                                           ein::formatShape(shapeOf(tensors[0])) + " outside axis " +
                                           std::to_string(axis));
    }
    auto type = inferred(ir::ConcatOp::inferResultType(mlir::ValueRange(tensors).getTypes(), axis), at);
    return EValue{Tensor{builder.create<ir::ConcatOp>(at, type, tensors, builder.getI64IntegerAttr(axis))}};
  }

  EValue callTranspose(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "dim0", "dim1"}, 3, false);
    mlir::Value x = tensorArgument(call, scope, args, "x");
    int64_t rank = typeOf(x).getRank();
    int64_t i = axesArgument(*args.get("dim0"), scope, rank)[0];
    int64_t j = axesArgument(*args.get("dim1"), scope, rank)[0];
    std::vector<std::string> labels;
    for (int64_t d = 0; d < rank; ++d) labels.push_back(std::string("d").append(std::to_string(d)));
    ein::EinsumEquation equation{{labels}, labels};
    std::swap(equation.output[i], equation.output[j]);
    auto type = inferred(ir::EinsumOp::inferResultType(equation.str(), x.getType()), at);
    return EValue{Tensor{
        builder.create<ir::EinsumOp>(at, type, builder.getStringAttr(equation.str()), mlir::ValueRange{x})}};
  }

  // An einops rearrange of `x` by `pattern` with the given axis sizes.
  mlir::Value rearrange(Location at, mlir::Value x, const std::string &pattern,
                        const std::map<std::string, int64_t> &sizes, const ast::SourceLoc &where) {
    llvm::SmallVector<mlir::NamedAttribute> sizeAttrs;
    for (const auto &[axis, size] : sizes) sizeAttrs.push_back(builder.getNamedAttr(axis, builder.getI64IntegerAttr(size)));
    mlir::DictionaryAttr sizeDict = builder.getDictionaryAttr(sizeAttrs);
    auto type = inferred(ir::RearrangeOp::inferResultType(x.getType(), pattern, sizeDict, /*reduction=*/false), loc(where));
    return builder.create<ir::RearrangeOp>(at, type, x, builder.getStringAttr(pattern), sizeDict, nullptr);
  }

  // The integers of a list argument (`[b, -1, d]`), or of one integer.
  std::vector<std::pair<int64_t, ast::SourceLoc>> integerList(const ast::Expr &expr, Scope &scope,
                                                              const std::string &what) {
    std::vector<std::pair<int64_t, ast::SourceLoc>> values;
    if (expr.kind == ast::Expr::Kind::List)
      for (const ast::ExprPtr &item : static_cast<const ast::ListExpr &>(expr).items)
        values.emplace_back(integer(*item, scope, what), item->loc);
    else
      values.emplace_back(integer(expr, scope, what), expr.loc);
    return values;
  }

  // torch.reshape: the row-major reshape; one size may be -1. Written as a
  // merge of every axis into one and a split of that axis, so the lowering
  // makes it a view wherever the input is laid out contiguously.
  EValue callReshape(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "shape"}, 2, false);
    mlir::Value x = tensorArgument(call, scope, args, "x");
    const ast::Expr &shapeExpr = *args.get("shape");
    if (shapeExpr.kind != ast::Expr::Kind::List) fail(shapeExpr.loc, "reshape() shape must be a list, e.g. [b, -1, d]");
    ein::Shape from = shapeOf(x), to;
    int64_t total = 1, known = 1;
    for (int64_t size : from) total *= size;  // the input's count, bounded when its type was made
    std::optional<size_t> inferred;
    for (const auto &[size, where] : integerList(shapeExpr, scope, "a reshape() size")) {
      if (size == -1) {
        if (inferred) fail(where, "only one reshape() size may be -1");
        inferred = to.size();
      } else if (size < 0 || (size > 0 && known > total / size && total > 0)) {
        fail(where, size < 0 ? "reshape() size " + std::to_string(size) + " is negative (only -1 may be)"
                             : "reshape() sizes multiply to more than the input's " + std::to_string(total) +
                                   " elements");
      } else {
        known *= size;
      }
      to.push_back(size);
    }
    if (inferred) {
      if (known == 0 || total % known != 0)
        fail(shapeExpr.loc, "reshape() cannot infer the -1 in " + ein::formatShape(to) + ": " + std::to_string(total) +
                                " elements do not divide into " + std::to_string(known));
      to[*inferred] = total / known;
    } else if (known != total) {
      fail(shapeExpr.loc, "reshape() cannot make " + ein::formatShape(from) + " (" + std::to_string(total) +
                              " elements) into " + ein::formatShape(to) + " (" + std::to_string(known) + ")");
    }
    if (to == from) return EValue{Tensor{x}};
    std::string inAxes, outAxes;
    std::map<std::string, int64_t> sizes;
    for (size_t i = 0; i < from.size(); ++i) inAxes += " i" + std::to_string(i);
    for (size_t i = 0; i < to.size(); ++i) {
      outAxes += " o" + std::to_string(i);
      sizes["o" + std::to_string(i)] = to[i];
    }
    mlir::Value flat = from.size() == 1 ? x : rearrange(at, x, inAxes + " -> (" + inAxes + ")", {}, call.loc);
    if (to.size() == 1) return EValue{Tensor{flat}};
    return EValue{Tensor{rearrange(at, flat, "(" + outAxes + ") ->" + outAxes, sizes, call.loc)}};
  }

  // torch.nn.functional.conv2d for windows that do not overlap (stride >= kernel
  // size, no padding): a patch embedding. The windows become axes of a view
  // and the convolution one contraction with the weight, a GEMM.
  EValue callConv2d(const ast::Call &call, Scope &scope) {
    Location at = loc(call.loc);
    Arguments args = bindArguments(call, {"x", "weight", "bias", "stride", "padding"}, 2, false);
    mlir::Value x = floatTensor(evaluate(*args.get("x"), scope), args.get("x")->loc, "conv2d() input");
    mlir::Value weight = floatTensor(evaluate(*args.get("weight"), scope), args.get("weight")->loc, "conv2d() weight");
    ein::Shape in = shapeOf(x), kernel = shapeOf(weight);
    if (in.size() != 4) fail(args.get("x")->loc, "conv2d() input must be [batch, channels, height, width], not " +
                                                     ein::formatShape(in));
    if (kernel.size() != 4 || kernel[1] != in[1])
      fail(args.get("weight")->loc, "conv2d() weight must be [out, " + std::to_string(in[1]) + ", kh, kw], not " +
                                        ein::formatShape(kernel));
    if (elementType(weight) != elementType(x)) weight = cast(at, weight, elementType(x));
    auto pair = [&](const char *name, int64_t fallback) {
      std::array<int64_t, 2> values = {fallback, fallback};
      if (const ast::Expr *expr = args.get(name)) {
        auto list = integerList(*expr, scope, std::string("conv2d() ") + name);
        if (list.size() != 1 && list.size() != 2)
          fail(expr->loc, std::string("conv2d() ") + name + " is one integer or two");
        values = {list[0].first, list.back().first};
      }
      return values;
    };
    std::array<int64_t, 2> stride = pair("stride", 1), padding = pair("padding", 0);
    const ast::SourceLoc &strideLoc = args.get("stride") ? args.get("stride")->loc : call.loc;
    if (padding[0] != 0 || padding[1] != 0)
      fail(args.get("padding")->loc, "conv2d() padding is not supported; pad the input before the call");
    std::array<int64_t, 2> out{};
    for (int d = 0; d < 2; ++d) {
      int64_t size = in[2 + d], window = kernel[2 + d];
      if (stride[d] < 1) fail(strideLoc, "conv2d() stride must be positive");
      if (stride[d] < window)
        fail(strideLoc, "conv2d() with stride " + std::to_string(stride[d]) + " below the kernel size " +
                            std::to_string(window) + " (overlapping windows) is not supported: stride >= kernel "
                            "size, as in a patch embedding");
      if (size < window)
        fail(args.get("x")->loc, "conv2d() input is " + std::to_string(size) + " wide, smaller than the kernel's " +
                                     std::to_string(window));
      out[d] = (size - window) / stride[d] + 1;
    }
    // Rows and columns past the last window are never read; then each window
    // is a (stride x stride) block, of which the kernel reads the first (kh x kw).
    if (out[0] * stride[0] != in[2] || out[1] * stride[1] != in[3])
      x = slice(at, x, {0, 0, 0, 0}, {in[0], in[1], out[0] * stride[0], out[1] * stride[1]}, {});
    mlir::Value windows = rearrange(at, x, "b c (h s1) (w s2) -> b h w c s1 s2", {{"s1", stride[0]}, {"s2", stride[1]}},
                                    call.loc);
    if (stride[0] != kernel[2] || stride[1] != kernel[3])
      windows = slice(at, windows, {0, 0, 0, 0, 0, 0}, {in[0], out[0], out[1], in[1], kernel[2], kernel[3]}, {});
    const char *contraction = "b h w c p q, o c p q -> b o h w";
    auto type = inferred(ir::EinsumOp::inferResultType(contraction, mlir::ValueRange{windows, weight}.getTypes()), at);
    mlir::Value y = builder.create<ir::EinsumOp>(at, type, builder.getStringAttr(contraction),
                                                 mlir::ValueRange{windows, weight});
    if (const ast::Expr *biasExpr = args.get("bias")) {
      mlir::Value bias = floatTensor(evaluate(*biasExpr, scope), biasExpr->loc, "conv2d() bias");
      if (shapeOf(bias) != ein::Shape{kernel[0]})
        fail(biasExpr->loc, "conv2d() bias must be [" + std::to_string(kernel[0]) + "], not " +
                                ein::formatShape(shapeOf(bias)));
      bias = rearrange(at, cast(at, bias, elementType(x)), "o -> o 1 1", {}, biasExpr->loc);
      y = binaryOp(at, ir::BinaryKind::add, y, bias);
    }
    return EValue{Tensor{y}};
  }

  double foldUnary(ir::UnaryKind kind, double x, const ast::Call &call) {
    switch (kind) {
      case ir::UnaryKind::exp: return std::exp(x);
      case ir::UnaryKind::log: return std::log(x);
      case ir::UnaryKind::sqrt: return std::sqrt(x);
      case ir::UnaryKind::rsqrt: return 1.0 / std::sqrt(x);
      case ir::UnaryKind::abs: return std::abs(x);
      case ir::UnaryKind::tanh: return std::tanh(x);
      default: fail(call.loc, call.callee + "() of a number is not supported; apply it to a tensor");
    }
  }

  mlir::Value einsum(const ast::Call &call, Scope &scope) {
    if (!call.keywords.empty()) fail(call.keywords.front().loc, "einsum() takes no keyword arguments");
    if (call.positional.size() < 2) fail(call.loc, "einsum() needs an equation and at least one operand");
    const ast::Expr &equationExpr = *call.positional[0];
    std::string text = stringArgument(equationExpr, scope, "einsum() equation");
    llvm::SmallVector<mlir::Value> operands;
    std::vector<int64_t> ranks;
    std::vector<ein::Shape> shapes;
    for (size_t i = 1; i < call.positional.size(); ++i) {
      mlir::Value operand = tensor(evaluate(*call.positional[i], scope), call.positional[i]->loc,
                                   "einsum() operand " + std::to_string(i));
      operands.push_back(operand);
      ranks.push_back(typeOf(operand).getRank());
      shapes.push_back(shapeOf(operand));
    }
    for (size_t i = 1; i < operands.size(); ++i)
      if (elementType(operands[i]) != elementType(operands[0]))
        fail(call.positional[i + 1]->loc, "einsum() operand " + std::to_string(i + 1) + " is " +
                                              typeString(elementType(operands[i])) + " but operand 1 is " +
                                              typeString(elementType(operands[0])));
    auto parsed = ein::EinsumEquation::parse(text, ranks);
    if (ein::failed(parsed)) fail(equationExpr.loc, std::get<ein::EquationError>(parsed).message);
    // Size-1 axes that broadcast become index 0 of that axis, their label left
    // out of that operand's term.
    std::vector<std::vector<size_t>> broadcast = std::get<ein::EinsumEquation>(parsed).broadcastAxes(shapes);
    const ein::EinsumEquation equation = std::get<ein::EinsumEquation>(parsed).withoutAxes(broadcast);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (broadcast[i].empty()) continue;
      llvm::SmallVector<int64_t> offsets(ranks[i], 0), sizes(shapes[i].begin(), shapes[i].end()), dropped;
      for (size_t axis : broadcast[i]) dropped.push_back(static_cast<int64_t>(axis));
      operands[i] = slice(loc(call.positional[i + 1]->loc), operands[i], offsets, sizes, dropped);
      shapes[i] = shapeOf(operands[i]);
    }
    auto type = inferred(ir::EinsumOp::inferResultType(equation.str(), mlir::ValueRange(operands).getTypes()),
                         loc(call.loc));
    return builder.create<ir::EinsumOp>(loc(call.loc), type, builder.getStringAttr(equation.str()), operands);
  }

  mlir::Value einops(const ast::Call &call, Scope &scope) {
    bool isReduce = call.callee == "reduce";
    Arguments args = isReduce ? bindArguments(call, {"x", "pattern", "reduction"}, 3, true)
                              : bindArguments(call, {"x", "pattern"}, 2, true);
    mlir::Value x = tensor(evaluate(*args.get("x"), scope), args.get("x")->loc, call.callee + "() argument 'x'");
    std::string pattern = stringArgument(*args.get("pattern"), scope, call.callee + "() pattern");
    std::map<std::string, int64_t> sizes;
    llvm::SmallVector<mlir::NamedAttribute> sizeAttrs;
    for (const auto &[axis, expr] : args.extra) {
      sizes[axis] = integer(*expr, scope, "size of axis '" + axis + "'");
      sizeAttrs.push_back(builder.getNamedAttr(axis, builder.getI64IntegerAttr(sizes[axis])));
    }
    ein::EinopsKind kind = isReduce ? ein::EinopsKind::Reduce
                           : call.callee == "repeat" ? ein::EinopsKind::Repeat
                                                     : ein::EinopsKind::Rearrange;
    auto plan = ein::planEinops(kind, pattern, shapeOf(x), sizes);
    if (ein::failed(plan)) fail(args.get("pattern")->loc, std::get<ein::EquationError>(plan).message);
    std::optional<ir::ReduceKind> reduction;
    bool logical = false;
    if (isReduce) {
      std::string name = stringArgument(*args.get("reduction"), scope, "reduce() reduction");
      logical = name == "any" || name == "all";
      auto parsed = logical ? std::optional(name == "any" ? ir::ReduceKind::max : ir::ReduceKind::min)
                            : ir::symbolizeReduceKind(name);
      if (!parsed || *parsed == ir::ReduceKind::var || *parsed == ir::ReduceKind::std)
        fail(args.get("reduction")->loc,
             "unknown reduction '" + name + "' (expected sum, mean, max, min, prod, any or all)");
      reduction = *parsed;
      if (logical) x = truthAsFloat(loc(call.loc), x);
      else if (!mlir::isa<mlir::FloatType>(elementType(x))) x = cast(loc(call.loc), x, builder.getF32Type());
    }
    // The plan above checks the pattern as the function called (rearrange,
    // reduce or repeat) reads it; the op's rule gives the type.
    mlir::DictionaryAttr sizeDict = builder.getDictionaryAttr(sizeAttrs);
    auto type = inferred(ir::RearrangeOp::inferResultType(x.getType(), pattern, sizeDict, reduction.has_value()),
                         loc(args.get("pattern")->loc));
    ir::ReduceKindAttr reductionAttr = reduction ? ir::ReduceKindAttr::get(&context, *reduction) : nullptr;
    mlir::Value result = builder.create<ir::RearrangeOp>(loc(call.loc), type, x, builder.getStringAttr(pattern),
                                                         sizeDict, reductionAttr);
    return logical ? truthOf(loc(call.loc), result) : result;
  }

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  std::string filename;
  const std::map<std::string, int64_t> &overrides;
  std::set<std::string> usedOverrides;

  mlir::func::FuncOp function;
  mlir::Block *body = nullptr;
  Scope globals;
  std::map<std::string, int64_t> dims;
  std::map<std::string, Param> params;
  mlir::Operation *lastParam = nullptr;  // where the next parameter goes
  std::map<std::string, const ast::Def *> defs;
  std::vector<std::string> inputNames;
  std::vector<std::pair<std::string, mlir::Value>> outputs;
  int callDepth = 0;
  int evaluationDepth = 0;
};

}  // namespace

mlir::OwningOpRef<mlir::ModuleOp> generate(mlir::MLIRContext &context, llvm::StringRef source,
                                           llvm::StringRef filename,
                                           const std::map<std::string, int64_t> &dimOverrides) {
  ast::ParseResult parsed = ast::parse(std::string_view(source.data(), source.size()));
  if (!parsed.diagnostics.empty()) {
    for (const auto &diagnostic : parsed.diagnostics)
      mlir::emitError(mlir::FileLineColLoc::get(&context, filename, diagnostic.loc.line, diagnostic.loc.col))
          << diagnostic.message;
    return nullptr;
  }
  return Generator(context, filename, dimOverrides).run(*parsed.module);
}

}  // namespace ein::mlirgen
