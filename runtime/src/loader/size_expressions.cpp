#include "loader/size_expressions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "loader/flatbuffer_vectors.hpp"
#include "util/limits.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

namespace fb = ein::schema;

Status invalid(std::string message) { return Status(StatusCode::InvalidArtifact, std::move(message)); }

bool pushes(SizeOpcode opcode) { return opcode == SizeOpcode::Constant || opcode == SizeOpcode::Dim; }

// Why an expression has no value at some dims.
enum class Failure { None, Overflow, DivisionByZero, NegativeDivisor, NegativeResult };

const char *failureText(Failure failure) {
  switch (failure) {
    case Failure::None: break;
    case Failure::Overflow: return "overflows";
    case Failure::DivisionByZero: return "divides by zero";
    case Failure::NegativeDivisor: return "divides by a negative number";
    case Failure::NegativeResult: return "is negative";
  }
  return "fails";
}

// a op b, or the failure; floor division and modulo take b > 0 (the schema's
// rule), so neither can overflow.
Failure apply(SizeOpcode opcode, int64_t a, int64_t b, int64_t &result) {
  switch (opcode) {
    case SizeOpcode::Add: return __builtin_add_overflow(a, b, &result) ? Failure::Overflow : Failure::None;
    case SizeOpcode::Sub: return __builtin_sub_overflow(a, b, &result) ? Failure::Overflow : Failure::None;
    case SizeOpcode::Mul: return __builtin_mul_overflow(a, b, &result) ? Failure::Overflow : Failure::None;
    case SizeOpcode::FloorDiv:
    case SizeOpcode::Mod: {
      if (b <= 0) return b == 0 ? Failure::DivisionByZero : Failure::NegativeDivisor;
      int64_t quotient = a / b, remainder = a % b;
      if (remainder < 0) {
        quotient -= 1;
        remainder += b;
      }
      result = opcode == SizeOpcode::FloorDiv ? quotient : remainder;
      return Failure::None;
    }
    case SizeOpcode::Max: result = a > b ? a : b; return Failure::None;
    case SizeOpcode::Min: result = a < b ? a : b; return Failure::None;
    case SizeOpcode::Constant:
    case SizeOpcode::Dim: break;
  }
  return Failure::Overflow;  // not reached: decode() admits only known opcodes
}

// Runs one verified postfix program.
Failure run(const std::vector<SizeOp> &ops, std::span<const int64_t> dimValues, int64_t &value) {
  std::array<int64_t, kMaxSizeExpressionDepth> stack{};
  size_t depth = 0;
  for (const SizeOp &op : ops) {
    if (pushes(op.opcode)) {
      stack[depth++] = op.opcode == SizeOpcode::Constant ? op.operand : dimValues[static_cast<size_t>(op.operand)];
      continue;
    }
    const int64_t b = stack[--depth], a = stack[depth - 1];
    if (Failure failure = apply(op.opcode, a, b, stack[depth - 1]); failure != Failure::None) return failure;
  }
  value = stack[0];
  return value < 0 ? Failure::NegativeResult : Failure::None;
}

// Infix text with the fewest parentheses that keep the tree's meaning.
struct Rendered {
  std::string text;
  int precedence = 3;  // 1: + -, 2: * // %, 3: an atom or a call
  SizeOpcode opcode = SizeOpcode::Constant;
};

int precedenceOf(SizeOpcode opcode) {
  switch (opcode) {
    case SizeOpcode::Add:
    case SizeOpcode::Sub: return 1;
    case SizeOpcode::Mul:
    case SizeOpcode::FloorDiv:
    case SizeOpcode::Mod: return 2;
    default: return 3;
  }
}

const char *symbolOf(SizeOpcode opcode) {
  switch (opcode) {
    case SizeOpcode::Add: return "+";
    case SizeOpcode::Sub: return "-";
    case SizeOpcode::Mul: return "*";
    case SizeOpcode::FloorDiv: return "//";
    case SizeOpcode::Mod: return "%";
    case SizeOpcode::Max: return "max";
    case SizeOpcode::Min: return "min";
    default: return "?";
  }
}

Rendered combine(SizeOpcode opcode, const Rendered &a, const Rendered &b) {
  const int precedence = precedenceOf(opcode);
  if (precedence == 3) return {fmt::format("{}({}, {})", symbolOf(opcode), a.text, b.text), 3, opcode};
  // Left operands group to the left, so only a lower precedence needs
  // parentheses; a right operand of equal precedence needs them unless
  // regrouping keeps the value: a + (b - c) is a + b - c, a - (b + c) is not,
  // a * (b // c) is not a * b // c.
  const bool regroups = (opcode == SizeOpcode::Add || opcode == SizeOpcode::Mul) &&
                        b.opcode != SizeOpcode::FloorDiv && b.opcode != SizeOpcode::Mod;
  const bool wrapRight = b.precedence < precedence || (b.precedence == precedence && !regroups);
  const std::string left = a.precedence < precedence ? "(" + a.text + ")" : a.text;
  const std::string right = wrapRight ? "(" + b.text + ")" : b.text;
  return {fmt::format("{} {} {}", left, symbolOf(opcode), right), precedence, opcode};
}

StatusOr<std::vector<SizeOp>> decodeExpression(const fb::SizeExpression *in, size_t dimCount) {
  const size_t length = in && in->ops() ? in->ops()->size() : 0;
  if (length == 0) return invalid("it is empty");
  if (length > kMaxSizeExpressionOps)
    return invalid(fmt::format("it has {} ops, more than the runtime's limit of {}", length, kMaxSizeExpressionOps));
  std::vector<SizeOp> ops;
  size_t depth = 0;
  for (size_t i = 0; i < length; ++i) {
    // Copied out: a struct vector's elements may be misaligned (the
    // verifier checks only its length's alignment).
    fb::SizeOp encoded;
    std::memcpy(&encoded, reinterpret_cast<const uint8_t *>(in->ops()->Data()) + i * sizeof(fb::SizeOp),
                sizeof encoded);
    const auto opcode = static_cast<uint8_t>(encoded.opcode());
    if (opcode > static_cast<uint8_t>(fb::SizeOpcode::MAX))
      return invalid(fmt::format("op {} has unknown opcode {}", i, opcode));
    SizeOp op{static_cast<SizeOpcode>(opcode), encoded.operand()};
    if (op.opcode == SizeOpcode::Dim && (op.operand < 0 || static_cast<uint64_t>(op.operand) >= dimCount))
      return invalid(fmt::format("op {} reads dim {}, but the model has {} dims", i, op.operand, dimCount));
    if (pushes(op.opcode)) {
      if (++depth > kMaxSizeExpressionDepth)
        return invalid(fmt::format("op {} needs a stack deeper than the runtime's limit of {}", i,
                                   kMaxSizeExpressionDepth));
    } else {
      if (depth < 2)
        return invalid(fmt::format("op {} ({}) needs two values, but the stack holds {}", i,
                                   fb::EnumNameSizeOpcode(encoded.opcode()), depth));
      --depth;
    }
    ops.push_back(op);
  }
  if (depth != 1) return invalid(fmt::format("it leaves {} values on the stack instead of one", depth));
  return ops;
}

StatusOr<std::vector<DimInfo>> decodeDims(const fb::Model &model) {
  const size_t count = model.dims() ? model.dims()->size() : 0;
  if (count > kMaxDims) return invalid(fmt::format("{} dims exceed the runtime's limit of {}", count, kMaxDims));
  std::vector<DimInfo> dims;
  std::set<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    const fb::Dim *dim = model.dims()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!dim->name() || dim->name()->size() == 0) return invalid(fmt::format("dim {} has no name", i));
    DimInfo info{dim->name()->str(), dim->min(), dim->max()};
    if (!names.insert(info.name).second) return invalid(fmt::format("two dims are named \"{}\"", info.name));
    if (info.min < 0 || info.min > info.max || info.max > kMaxTensorElements)
      return invalid(fmt::format("dim {} ranges over {}..{}; a range needs 0 <= min <= max <= 2^40", info.name,
                                 info.min, info.max));
    dims.push_back(std::move(info));
  }
  return dims;
}

Status checkReference(int64_t field, size_t expressionCount, const std::string &what) {
  if (field >= 0 || static_cast<uint64_t>(-1 - field) < expressionCount) return Status();
  return invalid(fmt::format("{} refers to size expression {}, but the model has {}", what, -1 - field,
                             expressionCount));
}

StatusOr<SizeCheck> decodeCheck(const fb::Check &in, size_t expressionCount, size_t index) {
  SizeCheck check;
  switch (in.kind()) {
    case fb::CheckKind::Equal: check.kind = CheckKind::Equal; break;
    case fb::CheckKind::LessEqual: check.kind = CheckKind::LessEqual; break;
    case fb::CheckKind::Divides: check.kind = CheckKind::Divides; break;
    default: return invalid(fmt::format("check {} has unknown kind {}", index, static_cast<int>(in.kind())));
  }
  check.lhs = readSize(in.lhs());
  check.rhs = readSize(in.rhs());
  const std::string what = fmt::format("check {}", index);
  if (Status status = checkReference(check.lhs, expressionCount, what); !status.ok()) return status;
  if (Status status = checkReference(check.rhs, expressionCount, what); !status.ok()) return status;
  check.location = in.location() ? in.location()->str() : "";
  check.message = in.message() ? in.message()->str() : "";
  return check;
}

const uint8_t *follow(const uint8_t *offset) { return offset + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(offset); }

// Calls onSize(name, value) for every Size field of a verified table and of
// the tables below it, and onTensor(value) for every field named "tensor" (a
// View's, a Binding's): guided by the schema's mini-reflection tables
// (--reflect-names), a generic walk, so a kernel added to the schema is
// covered without code here. A Size is found by its type; no other struct
// (SizeOp, Instruction) holds one.
template <typename OnSize, typename OnTensor>
Status walkReferences(const flatbuffers::Table &table, const flatbuffers::TypeTable &type, OnSize &onSize,
                      OnTensor &onTensor) {
  for (size_t i = 0; i < type.num_elems; ++i) {
    const uint8_t *field = table.GetAddressOf(flatbuffers::FieldIndexToOffset(static_cast<flatbuffers::voffset_t>(i)));
    if (!field) continue;
    const flatbuffers::TypeCode code = type.type_codes[i];
    const flatbuffers::TypeTable *ref = code.sequence_ref >= 0 ? type.type_refs[code.sequence_ref]() : nullptr;
    const uint8_t *elements = nullptr;
    flatbuffers::uoffset_t count = 1;
    if (code.is_repeating) {
      const uint8_t *vector = follow(field);
      count = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(vector);
      elements = vector + sizeof(flatbuffers::uoffset_t);
    }
    if (ref == fb::SizeTypeTable()) {
      for (flatbuffers::uoffset_t j = 0; j < count; ++j)
        EIN_RETURN_IF_ERROR(
            onSize(type.names[i], readSizeAt(code.is_repeating ? elements + j * sizeof(fb::Size) : field)));
      continue;
    }
    if (code.base_type == flatbuffers::ET_UINT && !code.is_repeating && std::strcmp(type.names[i], "tensor") == 0) {
      onTensor(flatbuffers::ReadScalar<uint32_t>(field));
      continue;
    }
    if (code.base_type != flatbuffers::ET_SEQUENCE || !ref) continue;
    if (ref->st == flatbuffers::ST_UNION) {
      // The member's type is the field before it; an unknown one is the
      // step decoder's to refuse.
      const uint8_t *tag =
          i > 0 ? table.GetAddressOf(flatbuffers::FieldIndexToOffset(static_cast<flatbuffers::voffset_t>(i - 1)))
                : nullptr;
      const size_t member = tag ? *tag : 0;
      if (member == 0 || member >= ref->num_elems || ref->type_codes[member].sequence_ref < 0) continue;
      const flatbuffers::TypeTable *memberType = ref->type_refs[ref->type_codes[member].sequence_ref]();
      EIN_RETURN_IF_ERROR(
          walkReferences(*reinterpret_cast<const flatbuffers::Table *>(follow(field)), *memberType, onSize, onTensor));
      continue;
    }
    if (ref->st != flatbuffers::ST_TABLE) continue;
    for (flatbuffers::uoffset_t j = 0; j < count; ++j) {
      const uint8_t *child = follow(code.is_repeating ? elements + j * sizeof(flatbuffers::uoffset_t) : field);
      EIN_RETURN_IF_ERROR(walkReferences(*reinterpret_cast<const flatbuffers::Table *>(child), *ref, onSize, onTensor));
    }
  }
  return Status();
}

}  // namespace

StatusOr<SizeProgram> SizeProgram::decode(const fb::Model &model) {
  SizeProgram program;
  StatusOr<std::vector<DimInfo>> dims = decodeDims(model);
  if (!dims.ok()) return dims.status();
  program.dims_ = std::move(dims).value();
  const size_t count = model.sizes() ? model.sizes()->size() : 0;
  if (count > kMaxSizeExpressions)
    return invalid(fmt::format("{} size expressions exceed the runtime's limit of {}", count, kMaxSizeExpressions));
  for (size_t i = 0; i < count; ++i) {
    StatusOr<std::vector<SizeOp>> ops =
        decodeExpression(model.sizes()->Get(static_cast<flatbuffers::uoffset_t>(i)), program.dims_.size());
    if (!ops.ok()) return invalid(fmt::format("size expression {}: {}", i, ops.status().message()));
    program.expressions_.push_back(std::move(ops).value());
  }
  const size_t checkCount = model.checks() ? model.checks()->size() : 0;
  for (size_t i = 0; i < checkCount; ++i) {
    StatusOr<SizeCheck> check = decodeCheck(*model.checks()->Get(static_cast<flatbuffers::uoffset_t>(i)), count, i);
    if (!check.ok()) return check.status();
    program.checks_.push_back(std::move(check).value());
  }
  return program;
}

SizeProgram::Values SizeProgram::valuesAt(std::span<const int64_t> dimValues) const {
  Values values;
  values.values.resize(expressions_.size());
  for (size_t i = 0; i < expressions_.size(); ++i)
    if (run(expressions_[i], dimValues, values.values[i]) != Failure::None) values.missing.push_back(i);
  return values;
}

Status SizeProgram::noValue(size_t expression, std::span<const int64_t> dimValues) const {
  int64_t value = 0;
  const Failure failure = run(expressions_[expression], dimValues, value);
  const int64_t field = -1 - static_cast<int64_t>(expression);
  const std::string shown = failure == Failure::NegativeResult ? fmt::format(" ({})", value) : "";
  return Status(StatusCode::InvalidArgument, fmt::format("size {} {}{} at {}", text(field), failureText(failure),
                                                         shown, dimsText({field}, dimValues)));
}

StatusOr<int64_t> SizeProgram::valueOf(int64_t field, std::span<const int64_t> dimValues,
                                       const Values &values) const {
  if (field >= 0) return field;
  const auto index = static_cast<size_t>(-1 - field);
  if (std::binary_search(values.missing.begin(), values.missing.end(), index)) return noValue(index, dimValues);
  // References were verified at load: the index is in range.
  return values.values[index];
}

StatusOr<std::vector<int64_t>> SizeProgram::evaluate(std::span<const int64_t> dimValues) const {
  Values values = valuesAt(dimValues);
  if (!values.missing.empty()) return noValue(values.missing.front(), dimValues);
  return std::move(values.values);
}

Status SizeProgram::check(std::span<const int64_t> dimValues, const Values &values) const {
  for (const SizeCheck &check : checks_) {
    // "model.ein:9:3: what must hold, but why not": built only when a check fails.
    auto failed = [&](const std::string &why) {
      return Status(StatusCode::InvalidArgument,
                    fmt::format("{}{}, but {}", check.location.empty() ? "" : check.location + ": ",
                                check.message.empty() ? "a run-time check fails" : check.message, why));
    };
    StatusOr<int64_t> lhsValue = valueOf(check.lhs, dimValues, values), rhsValue = valueOf(check.rhs, dimValues, values);
    for (const StatusOr<int64_t> *side : {&lhsValue, &rhsValue})
      if (!side->ok()) return failed(side->status().message());
    const int64_t lhs = lhsValue.value(), rhs = rhsValue.value();
    std::string broken;
    switch (check.kind) {
      case CheckKind::Equal:
        if (lhs != rhs) broken = fmt::format("{} != {}", lhs, rhs);
        break;
      case CheckKind::LessEqual:
        if (lhs > rhs) broken = fmt::format("{} > {}", lhs, rhs);
        break;
      case CheckKind::Divides:
        if (lhs <= 0 || rhs % lhs != 0) broken = fmt::format("{} does not divide {}", lhs, rhs);
        break;
    }
    if (broken.empty()) continue;
    return failed(fmt::format("{} ({})", broken, dimsText({check.lhs, check.rhs}, dimValues)));
  }
  return Status();
}

std::string SizeProgram::text(int64_t field) const {
  if (field >= 0) return std::to_string(field);
  const auto index = static_cast<size_t>(-1 - field);
  if (index >= expressions_.size()) return fmt::format("<size expression {}>", index);
  std::vector<Rendered> stack;
  for (const SizeOp &op : expressions_[index]) {
    if (op.opcode == SizeOpcode::Constant) {
      stack.push_back({std::to_string(op.operand), op.operand < 0 ? 2 : 3, op.opcode});
    } else if (op.opcode == SizeOpcode::Dim) {
      stack.push_back({dims_[static_cast<size_t>(op.operand)].name, 3, op.opcode});
    } else {
      Rendered b = std::move(stack.back());
      stack.pop_back();
      stack.back() = combine(op.opcode, stack.back(), b);
    }
  }
  return stack.back().text;
}

std::optional<size_t> SizeProgram::bareDim(int64_t field) const {
  if (field >= 0) return std::nullopt;
  const auto index = static_cast<size_t>(-1 - field);
  if (index >= expressions_.size() || expressions_[index].size() != 1) return std::nullopt;
  const SizeOp &op = expressions_[index][0];
  if (op.opcode != SizeOpcode::Dim) return std::nullopt;
  return static_cast<size_t>(op.operand);
}

std::vector<bool> SizeProgram::dimsUsed(int64_t field) const {
  std::vector<bool> used(dims_.size(), false);
  if (field >= 0) return used;
  const auto index = static_cast<size_t>(-1 - field);
  if (index >= expressions_.size()) return used;
  for (const SizeOp &op : expressions_[index])
    if (op.opcode == SizeOpcode::Dim) used[static_cast<size_t>(op.operand)] = true;
  return used;
}

bool SizeProgram::dependsOnDim(int64_t field, size_t dim) const {
  const std::vector<bool> used = dimsUsed(field);
  return dim < used.size() && used[dim];
}

bool SizeProgram::dependsOnDims(int64_t field) const {
  for (bool used : dimsUsed(field))
    if (used) return true;
  return false;
}

std::string SizeProgram::dimsText(std::initializer_list<int64_t> fields, std::span<const int64_t> dimValues) const {
  std::vector<bool> used(dims_.size(), false);
  for (int64_t field : fields) {
    std::vector<bool> those = dimsUsed(field);
    for (size_t d = 0; d < used.size(); ++d) used[d] = used[d] || those[d];
  }
  std::string text;
  for (size_t d = 0; d < dims_.size() && d < dimValues.size(); ++d)
    if (used[d]) text += fmt::format("{}{} = {}", text.empty() ? "" : ", ", dims_[d].name, dimValues[d]);
  return text.empty() ? "no dims" : text;
}

StatusOr<int64_t> SizeResolver::operator()(int64_t field, const char *what) const {
  if (field >= 0 || values_.empty()) return field;
  const auto index = static_cast<uint64_t>(-1 - field);
  if (index >= values_.size())
    return invalid(fmt::format("{} refers to size expression {}, but the model has {}", what, index, values_.size()));
  return values_[index];
}

Status checkSizeReferences(const fb::Model &model, size_t expressionCount) {
  auto onSize = [&](const char *name, int64_t value) {
    return checkReference(value, expressionCount, fmt::format("field {} ({})", name, value));
  };
  auto onTensor = [](uint32_t) {};
  return walkReferences(*reinterpret_cast<const flatbuffers::Table *>(&model), *fb::ModelTypeTable(), onSize,
                        onTensor);
}

void collectStepReferences(const fb::Step &step, std::vector<int64_t> &sizeFields, std::vector<uint32_t> &tensors) {
  auto onSize = [&](const char *, int64_t value) {
    sizeFields.push_back(value);
    return Status();
  };
  auto onTensor = [&](uint32_t tensor) { tensors.push_back(tensor); };
  (void)walkReferences(*reinterpret_cast<const flatbuffers::Table *>(&step), *fb::StepTypeTable(), onSize, onTensor);
}

}  // namespace ein::detail
