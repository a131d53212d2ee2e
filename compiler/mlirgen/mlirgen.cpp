// AST -> ein dialect.
//
// The generator evaluates the model like an interpreter that emits ops
// instead of computing: dims and numbers fold at compile time, `def` blocks
// are inlined at each call and `for` loops unrolled, and each tensor
// expression becomes one ein op whose result type is the op's own shape rule
// (`inferResultType`, which its verifier checks too). Every error is reported
// at the source location of the construct that caused it.
#include "compiler/mlirgen/mlirgen.hpp"

#include <cmath>

#include "compiler/mlirgen/generator.hpp"
#include "llvm/ADT/StringExtras.h"
#include "mlir/IR/Verifier.h"

namespace ein::mlirgen::detail {

mlir::OwningOpRef<mlir::ModuleOp> Generator::run(const ast::Module &module) {
  Location fileLoc = mlir::FileLineColLoc::get(&context, filename, 1, 1);
  mlir::OwningOpRef<mlir::ModuleOp> owned = mlir::ModuleOp::create(fileLoc);
  function = mlir::func::FuncOp::create(fileLoc, "main", builder.getFunctionType({}, {}));
  owned->push_back(function);
  body = function.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  try {
    for (const auto &statement : module.statements) execute(*statement, globals);
    for (const auto &[name, _] : overrides)
      if (!usedOverrides.count(name)) failUndeclared("dim", name, llvm::make_first_range(dims));
    for (const auto &[name, _] : configOverrides)
      if (!configs.count(name)) failUndeclared("config", name, llvm::make_first_range(configs));
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

// A value given for a dim or config the model lacks (einc --dim/--config,
// ein.compile's dims=/config=) has no place in the model: the message is
// located nowhere, and each tool says which option gave it.
template <typename Names>
void Generator::failUndeclared(const char *kind, const std::string &name, Names names) {
  std::vector<std::string> declared(names.begin(), names.end());
  fail(builder.getUnknownLoc(), "the model declares no " + std::string(kind) + " '" + name + "'" +
                                    didYouMean(name, declared) +
                                    (declared.empty() ? "; it declares no " + std::string(kind) + "s"
                                                      : "; its " + std::string(kind) + "s: " + llvm::join(declared, ", ")));
}

std::string Generator::didYouMean(const std::string &name, const std::vector<std::string> &known) {
  // PyTorch's and NumPy's words for what the language spells otherwise.
  static const std::map<std::string, std::string> kSpellings = {
      {"True", "true"}, {"False", "false"}, {"dim", "axis"}, {"axes", "axis"}, {"keepdims", "keepdim"}};
  auto spelled = kSpellings.find(name);
  if (spelled != kSpellings.end() && (spelled->second == "true" || spelled->second == "false" ||
                                       llvm::is_contained(known, spelled->second)))
    return " (did you mean '" + spelled->second + "'?)";
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

Location Generator::fileLoc(const ast::SourceLoc &at) {
  return mlir::FileLineColLoc::get(&context, filename, at.line, at.col);
}

Location Generator::loc(const ast::SourceLoc &at) {
  Location file = fileLoc(at);
  return blockNamespace.empty() ? file : mlir::NameLoc::get(mlir::StringAttr::get(&context, blockNamespace), file);
}

void Generator::fail(Location at, const std::string &message) {
  // A diagnostic points at the file position; a block's namespace is for tools.
  if (auto named = mlir::dyn_cast<mlir::NameLoc>(at)) at = named.getChildLoc();
  mlir::emitError(at) << message;
  throw GenerationFailed{};
}

void Generator::fail(const ast::SourceLoc &at, const std::string &message) { fail(fileLoc(at), message); }

std::string Generator::typeString(Type type) {
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

std::string Generator::typeString(RankedTensorType type) {
  return typeString(type.getElementType()) + ein::formatShape(ir::shapeOf(type));
}

const char *Generator::kindName(const EValue &value) {
  switch (value.value.index()) {
    case 0: return "a number";
    case 1: return "a boolean";
    case 2: return "a string";
    case 3: return "a namespace";
    case 4: return "a tensor";
    case 5: return "a list";
    default: return "a size over ranged dims";
  }
}

void Generator::execute(const ast::Stmt &statement, Scope &scope) {
  using K = ast::Stmt::Kind;
  switch (statement.kind) {
    case K::Dim: return declareDims(static_cast<const ast::DimDecl &>(statement));
    case K::Config: return declareConfig(static_cast<const ast::ConfigDecl &>(statement), scope);
    case K::Input: return declareInput(static_cast<const ast::InputDecl &>(statement), scope);
    case K::Param: {
      const auto &decl = static_cast<const ast::ParamDecl &>(statement);
      return decl.state ? declareState(decl, scope) : declareParam(decl, scope);
    }
    case K::Output: return declareOutput(static_cast<const ast::OutputDecl &>(statement), scope);
    case K::Assign: return assign(static_cast<const ast::Assign &>(statement), scope);
    case K::Def: {
      const auto &def = static_cast<const ast::Def &>(statement);
      if (!defs.emplace(def.name, &def).second) fail(def.loc, "block '" + def.name + "' is defined twice");
      return;
    }
    case K::For: return runLoop(static_cast<const ast::For &>(statement), scope);
    case K::If: runIf(static_cast<const ast::If &>(statement), scope, /*inBlock=*/false); return;
    case K::Return: fail(statement.loc, "'return' outside a def block");
  }
}

void Generator::declareDims(const ast::DimDecl &decl) {
  if (decl.position) {
    if (!position.empty())
      fail(decl.loc, "the position is declared twice (first as '" + position + "')");
    position = decl.entries[0].name;
    positionAt = loc(decl.loc);
  }
  for (const auto &entry : decl.entries) {
    if (dims.count(entry.name)) fail(entry.loc, "dim '" + entry.name + "' is declared twice");
    const std::string what = "dim '" + entry.name + "'";
    ein::DimRange range;
    if (auto override = overrides.find(entry.name); override != overrides.end()) {
      range = override->second;
      usedOverrides.insert(entry.name);
    } else {
      range.min = integer(*entry.value, globals, what);
      range.max = entry.max ? integer(*entry.max, globals, what + "'s maximum") : range.min;
    }
    // A fixed dim is positive; a range may start at 0 (empty inputs allowed).
    bool ranged = range.min != range.max;
    if (range.min < (ranged ? 0 : 1))
      fail(entry.loc, what + (ranged ? "'s minimum must not be negative, got " : " must be positive, got ") +
                          std::to_string(range.min));
    if (range.max < range.min)
      fail(entry.loc, what + " ranges over " + std::to_string(range.min) + ".." + std::to_string(range.max) +
                          ", which is empty");
    if (range.max > limits::kMaxTensorElements)
      fail(entry.loc, what + " is " + std::to_string(range.max) + ", beyond the limit of 2^40");
    if (decl.position && !ranged)
      fail(entry.loc, "position '" + entry.name + "' must range over values, e.g. 0..2048");
    if (!ranged) {
      dims[entry.name] = range.min;
      fixedDims.insert_or_assign(entry.name, std::pair{range.min, entry.loc});
      continue;
    }
    dims[entry.name] = ein::Size::dim(entry.name);
    ranges[entry.name] = range;
  }
}

void Generator::declareConfig(const ast::ConfigDecl &decl, Scope &scope) {
  if (&scope != &globals) fail(decl.loc, "configs are declared at the top level, not inside a block");
  for (const auto &entry : decl.entries) {
    const std::string name = entry.name.str();
    if (configs.count(name) || lookup(name, scope) || dims.count(name) || dottedValues.count(name))
      fail(entry.loc, "'" + name + "' is already defined");
    EValue value = evaluate(*entry.value, scope);
    auto scalar = [](const EValue &item) {
      return std::holds_alternative<Number>(item.value) || std::holds_alternative<Boolean>(item.value) ||
             std::holds_alternative<String>(item.value);
    };
    const auto *defaultList = std::get_if<List>(&value.value);
    if (!scalar(value) && !(defaultList && llvm::all_of(defaultList->items, scalar)))
      fail(entry.value->loc, "config '" + name +
                                 "' is a number, true or false, a string, or a list of them, not " + kindName(value));
    if (auto given = configOverrides.find(name); given != configOverrides.end())
      value = configValue(entry, value, given->second);
    if (entry.allowed) {
      EValue allowed = evaluate(*entry.allowed, scope);
      auto *list = std::get_if<List>(&allowed.value);
      if (!list) fail(entry.allowed->loc, "after 'in' comes a list of the values config '" + name + "' may take");
      std::vector<std::string> spelled;
      for (const EValue &item : list->items) spelled.push_back(describeConstant(item));
      // A list config's every item is one of the values.
      const auto *items = std::get_if<List>(&value.value);
      for (size_t i = 0; i < (items ? items->items.size() : 1); ++i) {
        const EValue &checked = items ? items->items[i] : value;
        if (llvm::none_of(list->items, [&](const EValue &item) { return sameConstant(item, checked); }))
          fail(entry.loc, "config '" + name + "'" + (items ? " item " + std::to_string(i) : std::string()) +
                              " is " + describeConstant(checked) + ", which the model does not handle (it handles " +
                              llvm::join(spelled, ", ") + ")");
      }
    }
    configs.emplace(name, entry.loc);
    bindDeclared(entry.name, name, std::move(value), scope);
  }
}

EValue Generator::configValue(const ast::ConfigDecl::Entry &entry, const EValue &fallback, const ConfigValue &given) {
  auto scalar = [](const ConfigScalar &item) {
    if (auto *flag = std::get_if<bool>(&item)) return EValue{Boolean{*flag}};
    if (auto *integer = std::get_if<int64_t>(&item)) return EValue{Number{static_cast<double>(*integer), true}};
    if (auto *real = std::get_if<double>(&item)) return EValue{Number{*real, false}};
    return EValue{String{std::get<std::string>(item)}};
  };
  const EValue value = std::visit(
      [&](const auto &item) {
        if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::vector<ConfigScalar>>) {
          List list;
          for (const ConfigScalar &scalarItem : item) list.items.push_back(scalar(scalarItem));
          return EValue{std::move(list)};
        } else {
          return scalar(item);
        }
      },
      given);
  if (value.value.index() != fallback.value.index())
    fail(entry.loc, "config '" + entry.name.str() + "' takes " + kindName(fallback) + " (its default is " +
                        describeConstant(fallback) + "), not " + kindName(value) + " such as " +
                        describeConstant(value));
  return value;
}

std::string Generator::describeConstant(const EValue &value) {
  if (auto *number = std::get_if<Number>(&value.value)) return formatNumber(number->value);
  if (auto *flag = std::get_if<Boolean>(&value.value)) return flag->value ? "true" : "false";
  if (auto *text = std::get_if<String>(&value.value)) return "\"" + text->value + "\"";
  if (auto *list = std::get_if<List>(&value.value)) {
    std::vector<std::string> items;
    for (const EValue &item : list->items) items.push_back(describeConstant(item));
    const std::string spelled = "[" + llvm::join(items, ", ") + "]";
    return spelled.size() > 80 ? spelled.substr(0, 76) + "...]" : spelled;
  }
  return kindName(value);
}

bool Generator::sameConstant(const EValue &a, const EValue &b) {
  if (a.value.index() != b.value.index()) return false;
  if (auto *number = std::get_if<Number>(&a.value)) return number->value == std::get<Number>(b.value).value;
  if (auto *flag = std::get_if<Boolean>(&a.value)) return flag->value == std::get<Boolean>(b.value).value;
  if (auto *text = std::get_if<String>(&a.value)) return text->value == std::get<String>(b.value).value;
  return false;
}

RankedTensorType Generator::tensorType(const ast::TypeExpr &type, Scope &scope) {
  Type element;
  if (type.dtype == "f32") element = builder.getF32Type();
  else if (type.dtype == "f16") element = builder.getF16Type();
  else if (type.dtype == "bf16") element = builder.getBF16Type();
  else if (type.dtype == "i32") element = builder.getI32Type();
  else if (type.dtype == "i64") element = builder.getI64Type();
  else if (type.dtype == "bool") element = builder.getI1Type();
  else fail(type.loc, "unknown dtype '" + type.dtype + "' (expected f32, f16, bf16, i32, i64 or bool)");
  ein::Shape shape;
  for (const auto &dim : type.dims) {
    ein::Size entry = size(*dim, scope, "a shape entry");
    if (std::optional<int64_t> constant = entry.constant(); constant && *constant <= 0)
      fail(dim->loc, "shape entries must be positive, got " + std::to_string(*constant));
    if (ein::SizeBounds bounds = entry.bounds(ranges); bounds.min < 0)
      fail(dim->loc, "shape entry " + entry.str() + " is negative for some dims (down to " +
                         std::to_string(bounds.min) + ")");
    shape.push_back(entry);
  }
  RankedTensorType result = ir::sizedTensorType(shape, element);
  checkLimits(result, loc(type.loc), "the type");
  return result;
}

void Generator::checkLimits(RankedTensorType type, Location at, const std::string &what) {
  if (type.getRank() > limits::kMaxRank)
    fail(at, what + " " + typeString(type) + " has " + std::to_string(type.getRank()) +
                 " axes, beyond the limit of " + std::to_string(limits::kMaxRank));
  // At the dims' maxima: the largest the tensor gets.
  std::optional<int64_t> elements;
  if (ein::SizeBounds bounds = ein::product(ir::shapeOf(type)).bounds(ranges); bounds.max <= limits::kMaxTensorElements)
    elements = bounds.max;
  if (!elements)
    fail(at, what + " " + typeString(type) + " has more elements than the limit of 2^40");
  uint64_t elementBytes = (type.getElementType().getIntOrFloatBitWidth() + 7) / 8;
  if (static_cast<uint64_t>(*elements) * elementBytes > limits::kMaxTensorBytes)
    fail(at, what + " " + typeString(type) + " has more bytes than the limit of 2^43");
}

void Generator::declareInput(const ast::InputDecl &decl, Scope &scope) {
  if (&scope != &globals) fail(decl.loc, "inputs are declared at the top level or in loops, not inside a block");
  const std::string name = resolveName(decl.name, scope);
  if (lookup(name, scope) || dottedValues.count(name) || params.count(name) ||
      llvm::is_contained(inputNames, name))
    fail(decl.loc, "'" + name + "' is already defined");
  RankedTensorType type = tensorType(decl.type, scope);
  mlir::Value argument = body->addArgument(type, loc(decl.loc));
  declaredTypes.try_emplace(argument, &decl.type, loc(decl.loc));
  inputNames.push_back(name);
  bindDeclared(decl.name, name, EValue{Tensor{argument}}, scope);
}

// A declared input's or output's value: a plain name in the scope, a dotted
// one (`past.{i}.key`, resolved) where dotted names are looked up.
void Generator::bindDeclared(const ast::Name &written, const std::string &name, EValue value, Scope &scope) {
  if (written.segments.size() == 1) scope[name] = std::move(value);
  else dottedValues[name] = std::move(value);
}

std::string Generator::resolveName(const ast::Name &name, Scope &scope) {
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
        // A loop variable, or an integer expression of loop variables, dims and numbers.
        EValue value = evaluate(*segment.expr, scope);
        auto *number = std::get_if<Number>(&value.value);
        if (!number)
          fail(segment.loc, "'{" + segment.text + "}' in a dotted name must be an integer (a loop variable, or an "
                            "expression of loop variables, dims and numbers), not " + kindName(value));
        if (!number->isInteger)
          fail(segment.loc, "'{" + segment.text + "}' is " +
                                (std::trunc(number->value) == number->value ? "the number " : "") +
                                formatNumber(number->value) +
                                ", not an integer ('/' and functions such as floor give numbers: '//' divides "
                                "integers, i64(...) truncates a number)");
        int64_t index = exactInteger(*number, segment.loc, "'{" + segment.text + "}'");
        if (index < 0) fail(segment.loc, "'{" + segment.text + "}' is " + std::to_string(index) + ": a dotted name's "
                                         "segment is not negative");
        part = std::to_string(index);
        break;
      }
    }
    text += (i ? "." : "") + part;
  }
  return text;
}

void Generator::declareParam(const ast::ParamDecl &decl, Scope &scope) {
  std::string name = resolveName(decl.name, scope);
  RankedTensorType type = tensorType(decl.type, scope);
  if (!type.hasStaticShape())
    fail(decl.loc, "parameter \"" + name + "\" has the shape " + shapeString(type) +
                       ", which depends on ranged dims; weights have fixed shapes");
  if (auto existing = params.find(name); existing != params.end()) {
    if (existing->second.type != type)
      fail(decl.loc, "parameter \"" + name + "\" is declared as " + typeString(type) + " here and as " +
                         typeString(existing->second.type) + " at " + ir::locationText(existing->second.declaredAt, "?"));
    return;
  }
  mlir::Value value = atTop<ir::ParamOp>(loc(decl.loc), type, name);
  declaredTypes.try_emplace(value, &decl.type, loc(decl.loc));
  params.emplace(name, Param{value, type, loc(decl.loc)});
}

// Parameters and states go to the top of the function, in declaration order,
// so every use is dominated.
template <typename StorageOp>
mlir::Value Generator::atTop(Location at, RankedTensorType type, const std::string &name) {
  mlir::OpBuilder::InsertionGuard guard(builder);
  if (lastParam) builder.setInsertionPointAfter(lastParam);
  else builder.setInsertionPointToStart(body);
  auto op = builder.create<StorageOp>(at, type, builder.getStringAttr(name));
  lastParam = op;
  return op;
}

void Generator::declareState(const ast::ParamDecl &decl, Scope &scope) {
  std::string name = resolveName(decl.name, scope);
  RankedTensorType type = tensorType(decl.type, scope);
  if (!type.hasStaticShape())
    fail(decl.loc, "state \"" + name + "\" has the shape " + shapeString(type) +
                       ", which depends on ranged dims; a session allocates its state once, at a fixed shape");
  if (!type.getElementType().isF32())
    fail(decl.loc, "state \"" + name + "\" must be f32 (the kernels' type), not " + typeString(type.getElementType()));
  if (states.count(name) || params.count(name))
    fail(decl.loc, "\"" + name + "\" is declared twice (state names are unique and differ from parameters)");
  states.emplace(name, Param{atTop<ir::StateOp>(loc(decl.loc), type, name), type, loc(decl.loc)});
}

void Generator::declareOutput(const ast::OutputDecl &decl, Scope &scope) {
  if (&scope != &globals) fail(decl.loc, "outputs are declared at the top level or in loops, not inside a block");
  const std::string name = resolveName(decl.name, scope);
  for (const auto &output : outputs)
    if (output.first == name) fail(decl.loc, "output '" + name + "' is declared twice");
  mlir::Value value;
  if (decl.value) {
    value = tensor(evaluate(*decl.value, scope), decl.value->loc, "an output");
    bindDeclared(decl.name, name, EValue{Tensor{value}}, scope);
  } else {
    std::optional<EValue> existing = resolveValue(decl.name, scope);
    if (!existing) fail(decl.loc, "output '" + name + "' names no value (write `output " + name + " = ...`)");
    value = tensor(*existing, decl.loc, "an output");
  }
  outputs.emplace_back(name, value);
}

void Generator::assign(const ast::Assign &statement, Scope &scope) {
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
    ein::Shape offsets(type.getRank(), 0), sizes = shapeOf(whole);
    offsets[0] = static_cast<int64_t>(i);
    sizes[0] = 1;
    bind(statement.targets[i].name, statement.targets[i].loc,
         EValue{Tensor{slice(loc(statement.targets[i].loc), whole, offsets, sizes, {0})}}, scope);
  }
}

void Generator::bind(const std::string &name, const ast::SourceLoc &at, EValue value, Scope &scope) {
  if (dims.count(name)) fail(at, "'" + name + "' is a dim and cannot be assigned");
  scope[name] = std::move(value);
}

void Generator::runLoop(const ast::For &loop, Scope &scope) {
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

EValue Generator::callBlock(const ast::Def &def, const ast::Call &site, Scope &scope) {
  if (site.positional.size() != def.params.size())
    fail(site.loc, "block '" + def.name + "' takes " + std::to_string(def.params.size()) + " argument" +
                       (def.params.size() == 1 ? "" : "s") + " but " + std::to_string(site.positional.size()) +
                       " " + (site.positional.size() == 1 ? "is" : "are") + " given");
  if (!site.keywords.empty()) fail(site.keywords.front().loc, "blocks take positional arguments only");
  if (++callDepth > kMaxCallDepth) fail(site.loc, "blocks nest deeper than " + std::to_string(kMaxCallDepth) + " calls");
  Scope local;
  for (size_t i = 0; i < def.params.size(); ++i) local[def.params[i].name] = evaluateArgument(*site.positional[i], scope);
  // The first namespace argument names the block's ops.
  const std::string outerNamespace = blockNamespace;
  for (size_t i = 0; i < def.params.size(); ++i)
    if (auto *ns = std::get_if<Namespace>(&local[def.params[i].name].value)) {
      blockNamespace = ns->prefix;
      break;
    }
  std::optional<EValue> result = runBody(def.body, local, /*inBlock=*/true);
  blockNamespace = outerNamespace;
  --callDepth;
  if (!result) fail(site.loc, "block '" + def.name + "' returns no value");
  return *result;
}

std::optional<EValue> Generator::runBody(const std::vector<ast::StmtPtr> &body, Scope &scope, bool inBlock) {
  for (const auto &statement : body) {
    if (inBlock && statement->kind == ast::Stmt::Kind::Return) {
      const auto &ret = static_cast<const ast::Return &>(*statement);
      if (ret.values.size() == 1) return evaluate(*ret.values[0], scope);
      List list;
      for (const auto &value : ret.values) list.items.push_back(evaluate(*value, scope));
      return EValue{std::move(list)};
    }
    if (statement->kind == ast::Stmt::Kind::If) {
      if (std::optional<EValue> result = runIf(static_cast<const ast::If &>(*statement), scope, inBlock))
        return result;
      continue;
    }
    execute(*statement, scope);
  }
  return std::nullopt;
}

std::optional<EValue> Generator::runIf(const ast::If &branching, Scope &scope, bool inBlock) {
  for (const auto &branch : branching.branches) {
    if (branch.condition) {
      EValue condition = evaluate(*branch.condition, scope);
      auto *flag = std::get_if<Boolean>(&condition.value);
      if (!flag)
        fail(branch.condition->loc,
             std::string("an if's condition is true or false when the model compiles (a config, or a comparison of "
                         "configs, dims and numbers), not ") +
                 kindName(condition) +
                 (std::holds_alternative<Tensor>(condition.value)
                      ? "; a tensor's values are known only when it runs: choose between values with where(...)"
                      : ""));
      if (!flag->value) continue;
    }
    return runBody(branch.body, scope, inBlock);
  }
  return std::nullopt;
}

EValue Generator::evaluateArgument(const ast::Expr &expr, Scope &scope) {
  if (expr.kind == ast::Expr::Kind::Name) {
    const auto &name = static_cast<const ast::NameExpr &>(expr).name;
    if (auto value = resolveValue(name, scope)) return *value;
    return EValue{Namespace{resolveName(name, scope)}};
  }
  return evaluate(expr, scope);
}

const EValue *Generator::lookup(const std::string &name, Scope &scope) {
  if (auto it = scope.find(name); it != scope.end()) return &it->second;
  if (&scope != &globals)
    if (auto it = globals.find(name); it != globals.end()) return &it->second;
  return nullptr;
}

void Generator::finish(Location at) {
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
  finishState();
  // The fixed dims, each with its value and where it is declared
  // ([value, line, column] in the model's file), for tools that name them:
  // a run-time --dim of a fixed dim says where it was fixed.
  if (!fixedDims.empty()) {
    llvm::SmallVector<mlir::NamedAttribute> fixed;
    for (const auto &[name, entry] : fixedDims)
      fixed.push_back(builder.getNamedAttr(
          name, builder.getDenseI64ArrayAttr({entry.first, static_cast<int64_t>(entry.second.line),
                                              static_cast<int64_t>(entry.second.col)})));
    function->setAttr("ein.fixed_dims", builder.getDictionaryAttr(fixed));
  }
  if (ranges.empty()) return;
  // The runtime reads each ranged dim off an input axis of exactly that size
  // (the position: off the session).
  for (const auto &[name, range] : ranges) {
    if (name == position) continue;
    bool read = llvm::any_of(body->getArgumentTypes(), [&, &name = name](Type type) {
      return llvm::is_contained(ir::shapeOf(type), ein::Size::dim(name));
    });
    if (!read)
      fail(at, "the ranged dim '" + name + "' is the size of no input axis, so the runtime could not learn its value; "
               "declare an input with an axis of size " + name);
  }
  llvm::SmallVector<mlir::NamedAttribute> dimRanges;
  for (const auto &[name, range] : ranges)
    dimRanges.push_back(builder.getNamedAttr(name, builder.getDenseI64ArrayAttr({range.min, range.max})));
  function->setAttr("ein.dims", builder.getDictionaryAttr(dimRanges));
  llvm::SmallVector<mlir::Attribute> checkAttrs;
  for (const auto &[check, where] : checks) checkAttrs.push_back(ir::sizeCheckAttr(&context, check, where));
  if (!checkAttrs.empty()) function->setAttr("ein.checks", builder.getArrayAttr(checkAttrs));
}

// A model with state has a position and appends to every state, each the
// same number of rows a run; the function records the position's dim and
// that number for the artifact.
void Generator::finishState() {
  if (states.empty() && position.empty()) return;
  if (position.empty())
    fail(states.begin()->second.declaredAt,
         "a model with state declares its position, the rows its states hold before a run: position past = 0..N");
  if (states.empty()) fail(positionAt, "position '" + position + "' is declared but the model keeps no state");
  for (const auto &[name, state] : states)
    if (!appendedStates.count(name))
      fail(state.declaredAt, "state \"" + name + "\" is never written (append(" + name + ", x, axis) or keep(" + name +
                                 ", x, axis))");
  if (!advance)
    fail(positionAt, "position '" + position + "' counts the rows appended to the states, but the model only keeps "
                     "(keep()): append to one state (a decoder's key/value cache)");
  function->setAttr("ein.position", builder.getStringAttr(position));
  function->setAttr("ein.position_advance", ir::SizesAttr::get(&context, {*advance}));
}

void Generator::requireSizes(const ein::SizeCheck &check, Location at) {
  // The difference that must be zero (Equal) or non-negative (LessEqual).
  ein::Size slack = check.rhs - check.lhs;
  ein::SizeBounds bounds = slack.bounds(ranges);
  bool always = false, never = false;
  switch (check.kind) {
    case ein::SizeCheck::Equal:
      always = slack == 0;
      never = bounds.min > 0 || bounds.max < 0;
      break;
    case ein::SizeCheck::LessEqual:
      always = bounds.min >= 0;
      never = bounds.max < 0;
      break;
    case ein::SizeCheck::Divides: {
      std::optional<int64_t> divisor = check.lhs.constant();
      if (!divisor || *divisor <= 0) fail(at, check.message + ": the divisor " + check.lhs.str() + " must be a positive constant");
      std::optional<int64_t> remainder = ein::Size::mod(check.rhs, *divisor).constant();
      always = remainder == 0;
      never = remainder.has_value() && *remainder != 0;
      break;
    }
  }
  if (always) return;
  bool constant = check.lhs.isConstant() && check.rhs.isConstant();
  if (never) fail(at, check.message + (constant ? "" : " for every value of the dims"));
  checks.emplace_back(check, at);
}

std::optional<EValue> Generator::resolveValue(const ast::Name &name, Scope &scope) {
  if (name.segments.size() == 1 && name.segments[0].kind == ast::NameSegment::Kind::Identifier) {
    const std::string &identifier = name.segments[0].text;
    if (const EValue *value = lookup(identifier, scope)) return *value;
    if (auto dim = dims.find(identifier); dim != dims.end()) {
      if (std::optional<int64_t> constant = dim->second.constant())
        return EValue{Number{static_cast<double>(*constant), true}};
      return EValue{SizeValue{dim->second}};
    }
  }
  std::string full = resolveName(name, scope);
  if (auto param = params.find(full); param != params.end()) return EValue{Tensor{param->second.value}};
  if (auto state = states.find(full); state != states.end()) return EValue{Tensor{state->second.value}};
  if (auto declared = dottedValues.find(full); declared != dottedValues.end()) return declared->second;
  return std::nullopt;
}

}  // namespace ein::mlirgen::detail

namespace ein::mlirgen {

namespace ast = ein::frontend;

mlir::OwningOpRef<mlir::ModuleOp> generate(mlir::MLIRContext &context, llvm::StringRef source,
                                           llvm::StringRef filename, const ein::DimRanges &dimOverrides,
                                           const ConfigValues &configOverrides) {
  ast::ParseResult parsed = ast::parse(std::string_view(source.data(), source.size()));
  if (!parsed.diagnostics.empty()) {
    for (const auto &diagnostic : parsed.diagnostics)
      mlir::emitError(mlir::FileLineColLoc::get(&context, filename, diagnostic.loc.line, diagnostic.loc.col))
          << diagnostic.message;
    return nullptr;
  }
  return detail::Generator(context, filename, dimOverrides, configOverrides).run(*parsed.module);
}

}  // namespace ein::mlirgen
