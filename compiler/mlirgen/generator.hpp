// The generator behind mlirgen::generate: the values a model evaluates to
// and the class that turns the AST into ein ops. Its members are defined by
// concern: mlirgen.cpp (statements, scopes, dims, params, blocks, loops),
// Expressions.cpp (operators, promotion, indexing, arguments), Builtins.cpp
// (the built-in table and the element-wise, reduction and norm built-ins) and
// ContractionBuiltins.cpp (einsum, einops, reshape, conv2d, linear) and
// AttentionBuiltins.cpp (scaled_dot_product_attention).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "compiler/frontend/parser.hpp"
#include "compiler/limits.hpp"
#include "compiler/mlirgen/mlirgen.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/ein/equations.hpp"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace ein::mlirgen::detail {

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
// An integer that depends on ranged dims (`t`, `t + 1`, `h * t`): it sizes
// tensors, but its value is known only at run time.
struct SizeValue {
  ein::Size size;
};
struct EValue;
struct List {
  std::vector<EValue> items;
};
struct EValue {
  std::variant<Number, Boolean, String, Namespace, Tensor, List, SizeValue> value;
};

struct Param {
  mlir::Value value;
  RankedTensorType type;
  Location declaredAt;
};

using limits::kMaxCallDepth;

class Generator {
 public:
  Generator(mlir::MLIRContext &context, llvm::StringRef filename, const ein::DimRanges &overrides,
            const ConfigValues &configOverrides)
      : context(context),
        builder(&context),
        filename(filename.str()),
        overrides(overrides),
        configOverrides(configOverrides) {}

  mlir::OwningOpRef<mlir::ModuleOp> run(const ast::Module &module);

 private:
  using Scope = std::map<std::string, EValue>;

  // " (did you mean 'x'?)" for the closest of `known` when it is a likely typo
  // of `name`: a few edits away, and `name` long enough for that to mean something.
  static std::string didYouMean(const std::string &name, const std::vector<std::string> &known);
  template <typename Names>
  [[noreturn]] void failUndeclared(const char *kind, const std::string &name, Names names);

  // For `x.shape` (`x.shape[0]` when `axis` is given), `x.dtype` and the
  // like, where `x` is a tensor: the language has no tensor attributes, and
  // names sizes by dims. Nullopt when the name's prefix is not a tensor.
  std::optional<std::string> tensorAttributeMessage(const ast::Name &name, Scope &scope, std::optional<int64_t> axis);

  // For a call that spreads over positional arguments what a built-in takes
  // as one list (`concat(x, y, axis=0)`): "; concat takes its tensors as one
  // list: concat([x, y], axis=0)". Empty when the call does not look so.
  std::string listArgumentHint(const ast::Call &call, const std::vector<std::string> &names);

  // ---- diagnostics ----------------------------------------------------------

  // Where an op made for `at` comes from: the file position, named by the
  // namespace of the block being inlined (tools group steps by it).
  Location loc(const ast::SourceLoc &at);
  // The file position alone, for diagnostics.
  Location fileLoc(const ast::SourceLoc &at);

  [[noreturn]] void fail(Location at, const std::string &message);
  [[noreturn]] void fail(const ast::SourceLoc &at, const std::string &message);

  // The result type an op's shape rule (ir::*Op::inferResultType, which its
  // verifier checks too) gives, or the rule's message, prefixed with
  // `context`, as an error at `at`. Asked before the op is built, so no
  // builder meets operands that admit no result.
  RankedTensorType inferred(const ein::EquationResult<RankedTensorType> &rule, Location at,
                            const std::string &context = "");

  static std::string typeString(Type type);

  static std::string typeString(RankedTensorType type);

  static const char *kindName(const EValue &value);

  // ---- statements ---------------------------------------------------------------

  void execute(const ast::Stmt &statement, Scope &scope);

  void declareDims(const ast::DimDecl &decl);

  // `config name = default [in [...]]`: the value given from outside, or the
  // default, bound as a number, boolean or string.
  void declareConfig(const ast::ConfigDecl &decl, Scope &scope);
  // Fails unless `given` is of the default's kind (a number, a boolean or a string).
  EValue configValue(const ast::ConfigDecl::Entry &entry, const EValue &fallback, const ConfigValue &given);
  static std::string describeConstant(const EValue &value);  // 1e-06, true, "silu"
  static bool sameConstant(const EValue &a, const EValue &b);

  RankedTensorType tensorType(const ast::TypeExpr &type, Scope &scope);

  // Fails at `at` when `type` is beyond the tensor limits (limits.hpp): rank,
  // elements, bytes. Declared types are checked where they are written, every
  // other value once generated, at the expression that computes it.
  void checkLimits(RankedTensorType type, Location at, const std::string &what);

  void declareInput(const ast::InputDecl &decl, Scope &scope);
  void bindDeclared(const ast::Name &written, const std::string &name, EValue value, Scope &scope);

  // "p.fc1.weight" with p = namespace "blocks.3.mlp" -> "blocks.3.mlp.fc1.weight".
  std::string resolveName(const ast::Name &name, Scope &scope);

  void declareParam(const ast::ParamDecl &decl, Scope &scope);
  template <typename StorageOp>
  mlir::Value atTop(Location at, RankedTensorType type, const std::string &name);
  // `state name: f32[...]`: session state, read and written by append().
  void declareState(const ast::ParamDecl &decl, Scope &scope);
  void finishState();

  void declareOutput(const ast::OutputDecl &decl, Scope &scope);

  void assign(const ast::Assign &statement, Scope &scope);

  void bind(const std::string &name, const ast::SourceLoc &at, EValue value, Scope &scope);

  void runLoop(const ast::For &loop, Scope &scope);

  // Runs `body` in `scope`; in a block's body (inBlock) a `return`, also one
  // inside an if, ends it with the returned value.
  std::optional<EValue> runBody(const std::vector<ast::StmtPtr> &body, Scope &scope, bool inBlock);
  // The body of the first branch whose condition holds (known when the model compiles).
  std::optional<EValue> runIf(const ast::If &branching, Scope &scope, bool inBlock);

  EValue callBlock(const ast::Def &def, const ast::Call &site, Scope &scope);

  // A block argument may be a namespace: a dotted name that is no value.
  EValue evaluateArgument(const ast::Expr &expr, Scope &scope);

  const EValue *lookup(const std::string &name, Scope &scope);

  void finish(Location at);

  // ---- expressions --------------------------------------------------------------

  std::optional<EValue> resolveValue(const ast::Name &name, Scope &scope);

  // The parser bounds the nesting of one expression, but blocks are inlined:
  // an expression that calls a block evaluates the block's expressions inside
  // it, so the depth is also bounded across calls (the C++ stack is finite).
  EValue evaluate(const ast::Expr &expr, Scope &scope);

  EValue evaluateUnbounded(const ast::Expr &expr, Scope &scope);

  int64_t integer(const ast::Expr &expr, Scope &scope, const std::string &what);
  // An integer that may depend on ranged dims: a shape entry, a slice bound.
  ein::Size size(const ast::Expr &expr, Scope &scope, const std::string &what);
  // What a ranged value cannot be used for, as an error at `at`.
  [[noreturn]] void failRanged(const ast::SourceLoc &at, const SizeValue &value, const std::string &what);
  EValue sizeArithmetic(const ast::BinaryExpr &expr, const EValue &lhs, const EValue &rhs);

  // A condition on sizes: nothing where it always holds, an error at `at`
  // where it never does, else a run-time check (the function's ein.checks).
  // `check.message` says what goes wrong when it fails.
  void requireSizes(const ein::SizeCheck &check, Location at);

  // `number` as an int64, for every number the compiler uses as an integer
  // (dims, shape entries, axes, loop bounds, integer constants): whole, and
  // within +-2^53, where doubles stop being exact (and long before the
  // conversion to int64 would overflow).
  int64_t exactInteger(const Number &number, const ast::SourceLoc &at, const std::string &what);

  static std::string formatNumber(double value);

  static std::string shapeString(RankedTensorType type);

  mlir::Value tensor(const EValue &value, const ast::SourceLoc &at, const std::string &what);

  // A tensor as f32 for float arithmetic (PyTorch promotes bool/int operands).
  mlir::Value floatTensor(const EValue &value, const ast::SourceLoc &at, const std::string &what);

  static Type elementType(mlir::Value value) { return mlir::cast<RankedTensorType>(value.getType()).getElementType(); }
  static bool isFloat(mlir::Value value) { return mlir::isa<mlir::FloatType>(elementType(value)); }
  // An i32 or i64 tensor (not bool).
  static bool isInteger(mlir::Value value) {
    return elementType(value).isSignlessInteger() && !elementType(value).isInteger(1);
  }
  static RankedTensorType typeOf(mlir::Value value) { return mlir::cast<RankedTensorType>(value.getType()); }

  mlir::Value cast(Location at, mlir::Value value, Type element);

  mlir::Value scalarConstant(Location at, double value, Type element);

  mlir::Value unaryOp(Location at, ir::UnaryKind kind, mlir::Value value);

  // The element type two tensors promote to, as torch.result_type.
  Type commonType(Type a, Type b);

  // Both operands of a binary op as tensors of one element type, PyTorch style.
  std::pair<mlir::Value, mlir::Value> promote(Location at, const EValue &lhs, const ast::SourceLoc &lhsLoc,
                                              const EValue &rhs, const ast::SourceLoc &rhsLoc);

  EValue binary(const ast::BinaryExpr &expr, Scope &scope);

  mlir::Value binaryOp(Location at, ir::BinaryKind kind, mlir::Value x, mlir::Value y);

  static ein::Shape shapeOf(mlir::Value value) { return ir::shapeOf(value.getType()); }

  mlir::Value matmul(Location at, mlir::Value x, mlir::Value y, const ast::SourceLoc &xLoc, const ast::SourceLoc &yLoc);

  // `steps` empty: every step is 1.
  mlir::Value slice(Location at, mlir::Value value, const ein::Shape &offsets, const ein::Shape &sizes,
                    llvm::ArrayRef<int64_t> dropped, llvm::ArrayRef<int64_t> steps = {});

  EValue index(const ast::IndexExpr &expr, Scope &scope);
  // list[i] of a list (a list config): its item, i counting from the end when negative.
  EValue listItem(const List &list, const ast::IndexExpr &expr, Scope &scope);

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

  Arguments bindArguments(const ast::Call &call, std::vector<std::string> names, size_t required, bool allowExtra);

  std::string stringArgument(const ast::Expr &expr, Scope &scope, const std::string &what);

  bool boolArgument(const ast::Expr *expr, Scope &scope, bool fallback, const std::string &what);

  double numberArgument(const ast::Expr *expr, Scope &scope, double fallback, const std::string &what);

  // Normalised axes from an int or a list of ints.
  llvm::SmallVector<int64_t> axesArgument(const ast::Expr &expr, Scope &scope, int64_t rank);

  EValue callExpr(const ast::Call &call, Scope &scope);

  // ---- built-in functions ------------------------------------------------------

  // Builds a built-in function's value from a call to it (named call.callee).
  using Builtin = EValue (Generator::*)(const ast::Call &call, Scope &scope);

  static const std::map<std::string, ir::UnaryKind> &unaryKinds();

  // Every built-in function by name: what calls dispatch on and what "did you
  // mean" suggests from.
  static const std::map<std::string, Builtin> &builtins();

  // The value of a call's tensor argument `param`.
  mlir::Value tensorArgument(const ast::Call &call, Scope &scope, const Arguments &args, const std::string &param);

  EValue callUnary(const ast::Call &call, Scope &scope);
  EValue callCast(const ast::Call &call, Scope &scope);
  EValue callLen(const ast::Call &call, Scope &scope);
  // Built-in unary kinds that give an integer for an integer (torch keeps the
  // dtype); unary minus does too, in Expressions.cpp.
  static bool keepsIntegers(ir::UnaryKind kind);


  EValue callMaximumOrMinimum(const ast::Call &call, Scope &scope);

  EValue callEinsum(const ast::Call &call, Scope &scope);

  EValue callEinops(const ast::Call &call, Scope &scope);

  EValue callSoftmax(const ast::Call &call, Scope &scope);

  // any/all reduce x != 0 as 1.0/0.0 with max/min (the kernels compute in f32), then
  // compare with 0.5 for a bool result.
  mlir::Value truthAsFloat(Location at, mlir::Value x);
  mlir::Value truthOf(Location at, mlir::Value reduced);

  // PyTorch's result types for reductions of integer and bool tensors: sum and
  // prod give i64, max and min keep an integer type and read bools as any and
  // all do, mean, var and std give f32. Integers reduce in f32 (exact up to
  // 2^24), as the kernels compute. reductionInput gives what to reduce,
  // reductionResult what to return.
  struct ReductionInput {
    mlir::Value x;
    bool logical = false;  // reduced as 1.0/0.0, compared back to bool
    Type integerResult;    // the integer type to store the f32 result as
  };
  ReductionInput reductionInput(Location at, mlir::Value x, ir::ReduceKind kind, bool logical);
  mlir::Value reductionResult(Location at, mlir::Value reduced, const ReductionInput &input);

  EValue callReduction(const ast::Call &call, Scope &scope);
  mlir::Value reduceOp(Location at, mlir::Value x, ir::ReduceKind kind, llvm::ArrayRef<int64_t> axes, bool keepdim,
                       int64_t correction = 0);

  // argmax(x, axis=-1, keepdim=false) and argmin.
  EValue callArgExtreme(const ast::Call &call, Scope &scope);

  EValue callLayerNorm(const ast::Call &call, Scope &scope);

  EValue callLinear(const ast::Call &call, Scope &scope);

  EValue callEmbedding(const ast::Call &call, Scope &scope);

  EValue callMaskedFill(const ast::Call &call, Scope &scope);

  EValue callWhere(const ast::Call &call, Scope &scope);

  EValue callConcat(const ast::Call &call, Scope &scope);

  // ein.embedding and ein.concat with their shape rules' result types.
  mlir::Value embeddingOp(Location at, mlir::Value ids, mlir::Value table);
  mlir::Value concatOp(Location at, llvm::ArrayRef<mlir::Value> parts, int64_t axis);

  EValue callTranspose(const ast::Call &call, Scope &scope);

  // Axis sizes as a rearrange's `sizes` attribute: integers, or #ein.sizes
  // where they depend on ranged dims.
  mlir::DictionaryAttr sizeDictionary(const std::map<std::string, ein::Size> &sizes);
  // An einops rearrange of `x` by `pattern` with the given axis sizes.
  mlir::Value rearrange(Location at, mlir::Value x, const std::string &pattern,
                        const std::map<std::string, ein::Size> &sizes, const ast::SourceLoc &where);

  // The integers of a list argument (`[b, -1, d]`), or of one integer.
  std::vector<std::pair<int64_t, ast::SourceLoc>> integerList(const ast::Expr &expr, Scope &scope,
                                                              const std::string &what);

  // torch.reshape: the row-major reshape; one size may be -1. Written as a
  // merge of every axis into one and a split of that axis, so the lowering
  // makes it a view wherever the input is laid out contiguously.
  EValue callReshape(const ast::Call &call, Scope &scope);

  // torch.nn.functional.conv1d and conv2d: padding (numbers, "same" or
  // "valid"), stride, dilation and groups. The padded input's windows are a
  // view (ein.windows) and the convolution one contraction of them with the
  // weight per group, a GEMM.
  EValue callConv(const ast::Call &call, Scope &scope);

  EValue callScaledDotProductAttention(const ast::Call &call, Scope &scope);
  // append(state, x, axis): x written into the state at the position; the
  // state's rows up to the position + x's, after the write.
  EValue callAppend(const ast::Call &call, Scope &scope);
  EValue callKeep(const ast::Call &call, Scope &scope);
  EValue writeState(const ast::Call &call, Scope &scope, bool firstRun);
  // ---- index built-ins (IndexBuiltins.cpp) ----------------------------------

  // An i64 constant of a static shape.
  mlir::Value integerTensor(Location at, const std::vector<int64_t> &shape, const std::vector<int64_t> &values);

  // torch.arange over integers (start and end may be sizes of ranged dims).
  EValue callArange(const ast::Call &call, Scope &scope);
  // The i64 values start .. end - 1 (a constant, or over ranged dims a slice of
  // one); errors name it as `what` ("arange(p, p + t)").
  mlir::Value rangeTensor(Location at, ein::Size start, ein::Size end, const ast::SourceLoc &where,
                          const std::string &what);

  // torch.roll: a gather by a constant row index, or concats of views.
  EValue callRoll(const ast::Call &call, Scope &scope);

  // torch.nn.functional.pad with a constant value.
  EValue callPad(const ast::Call &call, Scope &scope);
  // `x` with `pads[axis]` = (before, after) elements of `value` added along
  // each axis: a concat with a constant of that many values, repeated along
  // the other axes.
  mlir::Value padded(Location at, mlir::Value x, const std::vector<std::pair<int64_t, int64_t>> &pads, double value,
                     const ast::SourceLoc &where);

  // numpy.take along one axis with a tensor of ids.
  EValue callTake(const ast::Call &call, Scope &scope);

  mlir::Value einsum(const ast::Call &call, Scope &scope);
  // An ein.einsum of `operands` by `equation`, its type from the op's rule.
  mlir::Value einsumOp(Location at, const std::string &equation, mlir::ValueRange operands);

  mlir::Value einops(const ast::Call &call, Scope &scope);

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  std::string filename;
  const ein::DimRanges &overrides;
  std::set<std::string> usedOverrides;
  const ConfigValues &configOverrides;
  std::map<std::string, ast::SourceLoc> configs;  // declared, with where
  ein::DimRanges ranges;  // of the ranged dims
  std::map<std::string, std::pair<int64_t, ast::SourceLoc>> fixedDims;  // value and declaration
  std::vector<std::pair<ein::SizeCheck, Location>> checks;

  mlir::func::FuncOp function;
  mlir::Block *body = nullptr;
  Scope globals;
  std::map<std::string, ein::Size> dims;  // a constant, or the dim itself when ranged
  std::map<std::string, Param> params;
  std::map<std::string, Param> states;
  std::map<std::string, EValue> dottedValues;  // inputs and outputs with dotted names
  std::string position;  // the position dim's name, when declared
  Location positionAt = builder.getUnknownLoc();
  std::set<std::string> appendedStates;
  std::optional<ein::Size> advance;  // rows every append adds in one run
  Location advanceAt = builder.getUnknownLoc();
  mlir::Operation *lastParam = nullptr;  // where the next parameter goes
  std::map<std::string, const ast::Def *> defs;
  std::vector<std::string> inputNames;
  // The type each input and parameter was declared with, as written (dim
  // names, not their values), and where: what `x.shape` errors point to.
  llvm::DenseMap<mlir::Value, std::pair<const ast::TypeExpr *, Location>> declaredTypes;
  std::vector<std::pair<std::string, mlir::Value>> outputs;
  int callDepth = 0;
  // The namespace of the innermost block call that was given one
  // ("blocks.3.attn"); "" outside such blocks.
  std::string blockNamespace;
  int evaluationDepth = 0;
};

}  // namespace ein::mlirgen::detail
