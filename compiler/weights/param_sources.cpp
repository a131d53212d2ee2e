#include "compiler/weights/param_sources.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>

#include "compiler/limits.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/ein/equations.hpp"
#include "ir/half_floats.hpp"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace ein {
namespace {

std::string typeString(RankedTensorType type) {
  std::string text;
  Type element = type.getElementType();
  if (element.isF32()) text = "f32";
  else if (element.isF16()) text = "f16";
  else if (element.isBF16()) text = "bf16";
  else if (element.isInteger(1)) text = "bool";
  else if (element.isSignlessInteger(32)) text = "i32";
  else if (element.isSignlessInteger(64)) text = "i64";
  else text = "?";
  text += "[";
  for (auto [i, size] : llvm::enumerate(type.getShape())) text += (i ? ", " : "") + std::to_string(size);
  return text + "]";
}

// The file's dtype that stores the model's element type without conversion.
std::optional<weights::DType> exactDType(Type element) {
  if (element.isInteger(1)) return weights::DType::Bool;
  if (element.isSignlessInteger(32)) return weights::DType::I32;
  if (element.isSignlessInteger(64)) return weights::DType::I64;
  if (element.isF32()) return weights::DType::F32;
  if (element.isF16()) return weights::DType::F16;
  if (element.isBF16()) return weights::DType::BF16;
  return std::nullopt;
}

bool isFloat(Type element) { return element.isF32() || element.isF16() || element.isBF16(); }

// The file's bytes of `entry` as values of `element`, in place, where the file
// stores them so.
std::optional<llvm::ArrayRef<uint8_t>> inPlaceBytes(const weights::WeightsFile &file, const weights::TensorEntry &entry,
                                                    Type element) {
  std::optional<weights::DType> exact = exactDType(element);
  if (!exact || entry.dtype != *exact) return std::nullopt;
  return file.storedBytes(entry);
}

// Bytes per element of a parameter's type (a bool is one byte).
size_t elementBytes(Type element) { return element.isInteger(1) ? 1 : element.getIntOrFloatBitWidth() / 8; }

// f32 values as `element` (f32, or f16 / bf16 rounded to nearest even).
std::vector<uint8_t> floatBytes(llvm::ArrayRef<float> values, Type element) {
  std::vector<uint8_t> bytes(values.size() * elementBytes(element));
  if (element.isF32()) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  const llvm::fltSemantics &semantics = ir::halfSemantics(element);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t bits = ir::toHalfBits(values[i], semantics);
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

}  // namespace

AsmResourceBlob ownedBlob(std::vector<uint8_t> bytes) {
  auto *owner = new std::vector<uint8_t>(std::move(bytes));
  llvm::ArrayRef<char> data(reinterpret_cast<const char *>(owner->data()), owner->size());
  // operator new aligns the bytes for any element type.
  return AsmResourceBlob(data, alignof(std::max_align_t), [owner](void *, size_t, size_t) { delete owner; },
                         /*dataIsMutable=*/true);
}

LogicalResult bindParameters(ModuleOp module, const ParamProvider &params,
                             const std::function<void(uint64_t bytes)> &bound, ParamBinding binding) {
  auto shared = std::make_shared<ParamProvider>(params);
  uint64_t total = 0;
  WalkResult walked = module.walk([&](ir::ParamOp param) {
    if (param->use_empty()) return WalkResult::advance();  // the passes drop it
    RankedTensorType type = param.getType();
    const uint64_t expected = static_cast<uint64_t>(type.getNumElements()) * elementBytes(type.getElementType());
    // Refused before its values are read or generated: a model declaring
    // terabytes of random weights would otherwise exhaust memory.
    if (std::optional<std::string> passed = limits::weightLimitPassed(total, expected)) {
      emitError(param.getLoc()) << *passed;
      return WalkResult::interrupt();
    }
    auto values = [shared, name = param.getName().str(), type, at = param.getLoc(),
                   expected]() -> FailureOr<AsmResourceBlob> {
      FailureOr<AsmResourceBlob> blob = (*shared)(name, type, at);
      if (failed(blob)) return failure();
      if (blob->getData().size() != expected)
        return emitError(at) << "parameter \"" << name << "\" has " << blob->getData().size()
                             << " bytes of values for " << type << " (" << expected << " bytes)";
      return blob;
    };
    total += expected;
    if (binding == ParamBinding::OnDemand) {
      param.bindOnDemand(std::move(values));
    } else {
      FailureOr<AsmResourceBlob> blob = values();
      if (failed(blob)) return WalkResult::interrupt();
      param.setValueAttr(DenseResourceElementsAttr::get(type, param.getName(), std::move(*blob)));
    }
    if (bound) bound(total);
    return WalkResult::advance();
  });
  return failure(walked.wasInterrupted());
}

LogicalResult SafetensorsParams::checkEntry(const weights::TensorEntry &entry, llvm::StringRef name,
                                            RankedTensorType type, Location declaredAt) const {
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  Type element = type.getElementType();
  auto exact = exactDType(element);
  bool typeFits = exact && (entry.dtype == *exact || (isFloat(element) && weights::isFloatingPoint(entry.dtype)));
  if (entry.shape == shape && typeFits) return success();
  return emitError(declaredAt) << file->pathOf(entry) << ": parameter \"" << name << "\" is " << entry.typeString()
                               << " in the file and " << typeString(type) << " in "
                               << ein::ir::locationText(declaredAt, "the model");
}

ParamProvider SafetensorsParams::provider() {
  return [this](llvm::StringRef name, RankedTensorType type, Location declaredAt) -> FailureOr<AsmResourceBlob> {
    const weights::TensorEntry *entry = file->find(name);
    if (!entry) return emitError(declaredAt) << missingMessage(name, declaredAt);
    used.insert(entry->name);
    if (failed(checkEntry(*entry, name, type, declaredAt))) return failure();
    Type element = type.getElementType();
    if (std::optional<llvm::ArrayRef<uint8_t>> bytes = inPlaceBytes(*file, *entry, element)) {
      // The file's bytes as they are, in place where they are aligned for
      // their elements (the mapping outlives the module), else copied.
      const size_t alignment = elementBytes(element);
      if (reinterpret_cast<uintptr_t>(bytes->data()) % alignment == 0)
        return UnmanagedAsmResourceBlob::allocateWithAlign(
            llvm::ArrayRef<char>(reinterpret_cast<const char *>(bytes->data()), bytes->size()), alignment);
      return ownedBlob(std::vector<uint8_t>(bytes->begin(), bytes->end()));
    }
    auto values = file->toF32(*entry);
    if (!values) return emitError(declaredAt) << llvm::toString(values.takeError());
    file->release(*entry);
    return ownedBlob(floatBytes(*values, element));
  };
}

LogicalResult SafetensorsParams::checkParameters(ModuleOp module) {
  declared.clear();
  everyValueInPlace = true;
  std::optional<std::pair<std::string, Location>> firstMissing;
  std::vector<ir::ParamOp> read;
  // A parameter nothing reads is never asked for (the passes drop it).
  module.walk([&](ir::ParamOp param) {
    if (param->use_empty()) return;
    declared.push_back(param.getName().str());
    read.push_back(param);
    if (!firstMissing && !file->find(param.getName())) firstMissing.emplace(param.getName().str(), param.getLoc());
  });
  if (firstMissing) return emitError(firstMissing->second) << missingMessage(firstMissing->first, firstMissing->second);
  for (ir::ParamOp param : read) {
    const weights::TensorEntry &entry = *file->find(param.getName());
    if (failed(checkEntry(entry, param.getName(), param.getType(), param.getLoc()))) return failure();
    // Counted as used now: values bound on demand are asked for only by the
    // passes that read them.
    used.insert(entry.name);
    if (!inPlaceBytes(*file, entry, param.getType().getElementType())) everyValueInPlace = false;
  }
  return success();
}

std::string SafetensorsParams::missingMessage(llvm::StringRef name, Location declaredAt) const {
  std::string message = file->path().str() + ": missing parameter \"" + name.str() + "\" (declared at " +
                        ein::ir::locationText(declaredAt, "the model") + ")";
  std::set<std::string> inFile;
  for (const weights::TensorEntry &entry : file->entries()) inFile.insert(entry.name);
  // Every declared parameter the file lacks (this one alone when the model's
  // names are not known), this one first.
  std::vector<std::string> missing = {name.str()};
  for (const std::string &other : declared)
    if (other != name && !file->find(other) && !llvm::is_contained(missing, other)) missing.push_back(other);
  auto quoted = [](const std::string &text) { return "\"" + text + "\""; };
  const std::string every = missing.size() == 1 ? "" : "; all " + std::to_string(missing.size()) +
                                                           " missing parameters are there ";

  // The file's names with a prefix the model's lack: "model.w_out" for "w_out".
  for (const std::string &candidate : inFile) {
    if (candidate.size() <= name.size() + 1 || !llvm::StringRef(candidate).ends_with("." + name.str())) continue;
    std::string prefix = candidate.substr(0, candidate.size() - name.size());
    if (llvm::all_of(missing, [&](const std::string &m) { return inFile.count(prefix + m) > 0; }))
      return message + "; the file's names carry the prefix " + quoted(prefix) + " (it has " + quoted(candidate) +
             (every.empty() ? "" : every + "under it") +
             "): save the weights without the prefix, or declare the parameters with it";
  }
  // The model's names with a prefix the file's lack: "w_out" for "model.w_out".
  for (size_t dot = name.find('.'); dot != llvm::StringRef::npos; dot = name.find('.', dot + 1)) {
    std::string prefix = name.substr(0, dot + 1).str();
    if (llvm::all_of(missing, [&](const std::string &m) {
          return llvm::StringRef(m).starts_with(prefix) && inFile.count(m.substr(prefix.size())) > 0;
        }))
      return message + "; the file's names lack the prefix " + quoted(prefix) + " (it has " +
             quoted(name.substr(prefix.size()).str()) + (every.empty() ? "" : every + "without it") +
             "): save the weights with the prefix, or declare the parameters without it";
  }
  // A name a few edits away that no other parameter uses: a typo.
  unsigned limit = std::max<unsigned>(2, static_cast<unsigned>(name.size()) / 3), best = limit + 1;
  std::string closest;
  for (const std::string &candidate : inFile) {
    if (llvm::is_contained(declared, candidate)) continue;
    unsigned distance = name.edit_distance(candidate, /*AllowReplacements=*/true, limit);
    if (distance < best) {
      best = distance;
      closest = candidate;
    }
  }
  if (!closest.empty()) message += " (did you mean " + quoted(closest) + "?)";
  if (missing.size() > 1) {
    message += "; " + std::to_string(missing.size() - 1) + " more parameter" + (missing.size() == 2 ? " is" : "s are") +
               " missing too: ";
    for (size_t i = 1; i < missing.size() && i <= 3; ++i) message += (i > 1 ? ", " : "") + quoted(missing[i]);
    if (missing.size() > 4) message += ", ...";
  }
  return message;
}

llvm::StringRef SafetensorsParams::pathOf(llvm::StringRef tensor) const {
  const weights::TensorEntry *entry = file->find(tensor);
  return entry ? file->pathOf(*entry) : file->path();
}

std::vector<std::string> SafetensorsParams::unusedTensors() const {
  std::vector<std::string> unused;
  for (const weights::TensorEntry &entry : file->entries())
    if (!used.count(entry.name)) unused.push_back(entry.name);
  return unused;
}

bool SafetensorsParams::holdsBlocks(llvm::StringRef quantization) const {
  return llvm::any_of(file->entries(),
                      [&](const weights::TensorEntry &entry) { return file->blockQuantization(entry) == quantization; });
}

namespace {

// A value seen through the ops that only move, pick or convert its elements.
bool isView(Operation *op) {
  if (auto rearrange = dyn_cast<ir::RearrangeOp>(op)) return !rearrange.getReduction();
  if (auto einsum = dyn_cast<ir::EinsumOp>(op)) return einsum.getInputs().size() == 1;
  return isa<ir::SliceOp, ir::CastOp, ir::ConcatOp>(op);
}

// Whether `value` is a contraction's result, seen through views: what a bias is added to.
bool isContraction(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    if (isa<ir::LinearOp, ir::MatmulOp>(op)) return true;
    if (auto einsum = dyn_cast<ir::EinsumOp>(op); einsum && einsum.getInputs().size() > 1) return true;
    if (!isView(op) || op->getNumOperands() != 1) return false;
    value = op->getOperand(0);
  }
  return false;
}

// The elements of operand `index` that each output element sums over: the
// sizes of its labels that the output lacks. 1 when it sums over none.
int64_t contractedSize(ir::EinsumOp einsum, unsigned index) {
  std::vector<int64_t> ranks;
  for (Value input : einsum.getInputs()) ranks.push_back(cast<RankedTensorType>(input.getType()).getRank());
  auto equation = EinsumEquation::parse(einsum.getEquation().str(), ranks, /*canonical=*/true);
  if (ein::failed(equation)) return 1;
  const EinsumEquation &parsed = std::get<EinsumEquation>(equation);
  auto shape = cast<RankedTensorType>(einsum.getInputs()[index].getType()).getShape();
  int64_t total = 1;
  for (auto [axis, label] : llvm::enumerate(parsed.inputs[index]))
    if (!llvm::is_contained(parsed.output, label)) total *= std::max<int64_t>(shape[axis], 1);
  return total;
}

// How one use of a parameter's value (`operand` of its user) initialises
// it, with its rank: lower ranks win. nullopt when the use says nothing.
std::optional<std::pair<int, ParamInit>> useKind(OpOperand &use) {
  Operation *user = use.getOwner();
  Value value = use.get();
  auto type = cast<RankedTensorType>(value.getType());
  if (auto norm = dyn_cast<ir::LayerNormOp>(user)) {
    if (value == norm.getWeight()) return std::pair{0, ParamInit{RandomInit::One}};
    if (value == norm.getBias()) return std::pair{1, ParamInit{RandomInit::Zero}};
    return std::nullopt;
  }
  if (auto embedding = dyn_cast<ir::EmbeddingOp>(user)) {
    if (value == embedding.getTable()) return std::pair{2, ParamInit{RandomInit::StandardNormal}};
    return std::nullopt;
  }
  if (auto linear = dyn_cast<ir::LinearOp>(user)) {
    if (value == linear.getWeight())
      return std::pair{3, ParamInit{RandomInit::FanInUniform, type.getRank() ? type.getShape().back() : 1}};
    if (value == linear.getBias()) return std::pair{4, ParamInit{RandomInit::Zero}};
    return std::nullopt;
  }
  if (auto matmul = dyn_cast<ir::MatmulOp>(user)) {
    // x @ w: w's rows are summed over; w @ x: its columns.
    int64_t rank = type.getRank();
    if (rank == 0) return std::nullopt;
    bool rhs = use.getOperandNumber() == 1;
    int64_t fanIn = rhs ? type.getShape()[rank >= 2 ? rank - 2 : 0] : type.getShape().back();
    return std::pair{3, ParamInit{RandomInit::FanInUniform, std::max<int64_t>(fanIn, 1)}};
  }
  if (auto einsum = dyn_cast<ir::EinsumOp>(user); einsum && einsum.getInputs().size() > 1) {
    int64_t fanIn = contractedSize(einsum, use.getOperandNumber());
    if (fanIn > 1) return std::pair{3, ParamInit{RandomInit::FanInUniform, fanIn}};
    return std::nullopt;
  }
  if (auto binary = dyn_cast<ir::BinaryOp>(user)) {
    if (binary.getKind() != ir::BinaryKind::add && binary.getKind() != ir::BinaryKind::sub) return std::nullopt;
    Value other = use.getOperandNumber() == 0 ? binary.getRhs() : binary.getLhs();
    if (isContraction(other)) return std::pair{4, ParamInit{RandomInit::Zero}};
  }
  return std::nullopt;
}

}  // namespace

ParamInits paramInitsFromUses(ModuleOp module) {
  ParamInits inits;
  module.walk([&](ir::ParamOp param) {
    if (!param.getType().getElementType().isF32() && !param.getType().getElementType().isF16() &&
        !param.getType().getElementType().isBF16())
      return;
    std::optional<std::pair<int, ParamInit>> best;
    llvm::SmallVector<Value> values = {param.getResult()};
    llvm::DenseSet<Value> seen;
    while (!values.empty()) {
      Value value = values.pop_back_val();
      if (!seen.insert(value).second) continue;
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (isView(user)) {
          values.push_back(user->getResult(0));
          continue;
        }
        if (auto kind = useKind(use); kind && (!best || kind->first < best->first)) best = kind;
      }
    }
    if (best) inits[param.getName().str()] = best->second;
  });
  return inits;
}

ParamProvider randomParams(uint64_t seed, ParamInits inits) {
  return [seed, inits = std::move(inits)](llvm::StringRef name, RankedTensorType type,
                                          Location declaredAt) -> FailureOr<AsmResourceBlob> {
    std::mt19937_64 generator(seed ^ std::hash<std::string>{}(name.str()));
    Type element = type.getElementType();
    int64_t count = type.getNumElements();
    std::vector<uint8_t> bytes;
    auto append = [&](const auto &value) {
      auto *begin = reinterpret_cast<const uint8_t *>(&value);
      bytes.insert(bytes.end(), begin, begin + sizeof value);
    };
    if (isFloat(element)) {
      auto found = inits.find(name.str());
      ParamInit init = found == inits.end() ? ParamInit{} : found->second;
      // Straight into the bytes: one copy of the parameter at a time.
      bytes.assign(static_cast<size_t>(count) * sizeof(float), 0);
      auto fill = [&](auto &&draw) {
        for (int64_t i = 0; i < count; ++i) {
          float value = draw();
          std::memcpy(bytes.data() + i * sizeof(float), &value, sizeof value);
        }
      };
      switch (init.kind) {
        case RandomInit::One: fill([] { return 1.0f; }); break;
        case RandomInit::Zero: break;
        case RandomInit::FanInUniform: {
          float bound = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(init.fanIn, 1)));
          std::uniform_real_distribution<float> uniform(-bound, bound);
          fill([&] { return uniform(generator); });
          break;
        }
        case RandomInit::StandardNormal: {
          std::normal_distribution<float> normal(0.0f, 1.0f);
          fill([&] { return normal(generator); });
          break;
        }
        case RandomInit::Normal: {
          std::normal_distribution<float> normal(0.0f, 0.02f);
          fill([&] { return normal(generator); });
          break;
        }
      }
      if (element.isF32()) return ownedBlob(std::move(bytes));
      llvm::ArrayRef<float> values(reinterpret_cast<const float *>(bytes.data()), static_cast<size_t>(count));
      return ownedBlob(floatBytes(values, element));
    }
    std::uniform_int_distribution<int> bit(0, 1);
    for (int64_t i = 0; i < count; ++i) {
      if (element.isInteger(1)) bytes.push_back(static_cast<uint8_t>(bit(generator)));
      else if (element.isSignlessInteger(32)) append(static_cast<int32_t>(bit(generator)));
      else if (element.isSignlessInteger(64)) append(static_cast<int64_t>(bit(generator)));
      else return emitError(declaredAt) << "parameter \"" << name << "\": no random values for " << element;
    }
    return ownedBlob(std::move(bytes));
  };
}

}  // namespace ein
