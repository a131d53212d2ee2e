// kern-store-weights (passes.td): every weight the artifact stores, computed
// and in the type it is stored in. Folding computes element-wise, copy and
// concat kernels of weights (a scaled, transposed or offset weight; the fused
// parallel linears' concatenated weights) once, in f32 as the runtime's
// kernels would (the element-wise program through the op table's scalar
// definitions, inputs read through their views). Storing rounds gemm weights
// to bf16 or quantizes them to int8 with a scale per column, or to int4 or
// int8 with a scale per group of 32 along k and column (llama.cpp's q4_0 and
// q8_0). Each weight is
// folded and stored before the next is read, so at most one f32 weight the
// pass computed is held at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "compiler/transforms/kern/passes.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "ir/half_floats.hpp"
#include "ir/kern/kern_dialect.hpp"
#include "ir/kern/scalar_program.hpp"
#include "llvm/ADT/SetVector.h"
#include "mlir/IR/DialectResourceBlobManager.h"

namespace ein {
#define GEN_PASS_DEF_STOREKERNWEIGHTS
#include "compiler/transforms/kern/passes.h.inc"
}  // namespace ein

using namespace mlir;
using ein::Shape;
using ein::Size;

namespace {

bool staticView(ein::kern::ViewAttr view) {
  if (!view.getOffset().constant()) return false;
  return llvm::all_of(view.getStrides(), [](const Size &stride) { return stride.constant().has_value(); });
}

// The values of a weight: a bound parameter's or a constant's.
ElementsAttr valueOf(Value value) {
  Operation *producer = value.getDefiningOp();
  if (auto param = dyn_cast_or_null<ein::ir::ParamOp>(producer)) return param.getValueAttr();
  if (auto constant = dyn_cast_or_null<ein::ir::ConstantOp>(producer)) return constant.getValue();
  return {};
}

// Lets a weight's values go once nothing needs them: a resource's blob is
// emptied (a folded weight's memory, a random parameter's, or a mapped
// file's pages), since erasing the op that holds it does not free it.
void release(Value value) {
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(valueOf(value)))
    if (auto *entry = resource.getRawHandle().getResource()) entry->setBlob(AsmResourceBlob());
}

// A weight's f32 values, row-major: read in place from a resource (a bound
// parameter's, made first if bound on demand; a folded constant's), copied
// out of a dense attribute.
struct F32Values {
  std::vector<float> copied;
  const char *bytes = nullptr;  // into the resource, or `copied`
  float operator[](size_t i) const {
    float value;
    std::memcpy(&value, bytes + i * sizeof(float), sizeof value);
    return value;
  }
};

std::optional<F32Values> f32ValuesOf(Value weight) {
  auto type = cast<RankedTensorType>(weight.getType());
  if (!type.getElementType().isF32()) return std::nullopt;
  const auto count = static_cast<size_t>(type.getNumElements());
  F32Values values;
  ElementsAttr attr = valueOf(weight);
  if (auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr)) {
    ArrayRef<char> bytes;
    if (auto param = weight.getDefiningOp<ein::ir::ParamOp>()) bytes = param.getBoundBytes();
    else if (AsmResourceBlob *blob = resource.getRawHandle().getBlob()) bytes = blob->getData();
    if (bytes.size() != count * sizeof(float)) return std::nullopt;
    values.bytes = bytes.data();
    return values;
  }
  auto dense = dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense) return std::nullopt;
  values.copied.assign(dense.getValues<float>().begin(), dense.getValues<float>().end());
  values.bytes = reinterpret_cast<const char *>(values.copied.data());
  return values;
}

// Whether `op` is an f32 element-wise, copy or concat kernel of a static
// shape, not a model output, whose inputs are all f32 weights with values
// read through static views, and whose result is no larger than those inputs
// together (folding never grows the weights: a broadcast stays a kernel).
bool foldable(Operation &op, Operation *terminator) {
  using namespace ein;
  if (!isa<kern::ElementwiseOp, kern::CopyOp, kern::ConcatOp>(op) || op.getNumResults() != 1) return false;
  auto type = cast<RankedTensorType>(op.getResult(0).getType());
  if (!type.getElementType().isF32() || !type.hasStaticShape()) return false;
  if (llvm::is_contained(op.getResult(0).getUsers(), terminator)) return false;
  int64_t inputElements = 0;
  for (Value input : op.getOperands()) {
    ElementsAttr value = valueOf(input);
    auto inputType = cast<RankedTensorType>(input.getType());
    if (!value || !inputType.getElementType().isF32() || !inputType.hasStaticShape()) return false;
    inputElements += inputType.getNumElements();
  }
  if (auto elementwise = dyn_cast<kern::ElementwiseOp>(op)) {
    if (elementwise.getInputs().empty()) return false;
    for (Attribute view : elementwise.getInputViews())
      if (!staticView(cast<kern::ViewAttr>(view))) return false;
  } else if (auto concat = dyn_cast<kern::ConcatOp>(op)) {
    for (Attribute view : concat.getInputViews())
      if (!staticView(cast<kern::ViewAttr>(view))) return false;
  } else if (!staticView(cast<kern::CopyOp>(op).getXView())) {
    return false;
  }
  return type.getNumElements() <= inputElements;
}

// One input of a fold: its values and the view it is read through.
struct Input {
  F32Values values;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  int64_t offsetAt(const std::vector<int64_t> &index) const {
    int64_t element = offset;
    for (size_t axis = 0; axis < index.size(); ++axis) element += index[axis] * strides[axis];
    return element;
  }
};

// Steps through a row-major index over `extent`; false after the last.
bool next(std::vector<int64_t> &index, const std::vector<int64_t> &extent) {
  for (size_t axis = extent.size(); axis-- > 0;)
    if (++index[axis] < extent[axis]) return true;
    else index[axis] = 0;
  return false;
}

// The kernel's result (f32, row-major), as the runtime computes it, into
// `out` (the elements of its type).
LogicalResult fold(Operation &op, MutableArrayRef<float> out) {
  std::vector<int64_t> sizes;
  for (const Size &size : ein::ir::shapeOf(op.getResult(0).getType())) sizes.push_back(*size.constant());
  // Runs `body` (none: a copy) over `values` at every index of `extent`,
  // writing each result at its row-major place in `out`, `start` further
  // along `axis` (a concat part's slab; 0 for a whole result).
  auto evaluate = [&](ValueRange values, ArrayRef<Attribute> views, Block *body, const std::vector<int64_t> &extent,
                      size_t axis, int64_t start) -> LogicalResult {
    std::vector<Input> inputs;
    for (auto [value, attr] : llvm::zip(values, views)) {
      std::optional<F32Values> weights = f32ValuesOf(value);
      if (!weights) return op.emitOpError() << "folds a weight whose values are not f32";
      auto view = cast<ein::kern::ViewAttr>(attr);
      Input input{std::move(*weights), *view.getOffset().constant(), {}};
      for (const Size &stride : view.getStrides()) input.strides.push_back(*stride.constant());
      inputs.push_back(std::move(input));
    }
    std::vector<ein::kern::ScalarInstruction> program;
    if (body) {
      auto compiled = ein::kern::compileScalarProgram(*body);
      if (failed(compiled)) return failure();
      program = std::move(*compiled);
    }
    for (int64_t size : extent)
      if (size == 0) return success();
    // Row by row along the last axis (contiguous in `out`): a weight of a
    // billion elements is copied (a concat of q, k and v) in a tight loop.
    const bool scalar = extent.empty();
    const int64_t rowLength = scalar ? 1 : extent.back();
    std::vector<int64_t> rows = extent, index(extent.size(), 0);
    if (!scalar) rows.back() = 1;
    std::vector<float> registers(inputs.size() + program.size());
    std::vector<int64_t> rowStart(inputs.size()), rowStride(inputs.size());
    do {
      int64_t flat = 0;
      for (size_t d = 0; d < sizes.size(); ++d) flat = flat * sizes[d] + index[d] + (d == axis ? start : 0);
      float *row = out.data() + flat;
      for (size_t i = 0; i < inputs.size(); ++i) {
        rowStart[i] = inputs[i].offsetAt(index);
        rowStride[i] = scalar ? 0 : inputs[i].strides.back();
      }
      if (program.empty() && inputs.size() == 1) {  // a copy
        const F32Values &from = inputs[0].values;
        for (int64_t j = 0; j < rowLength; ++j) row[j] = from[static_cast<size_t>(rowStart[0] + j * rowStride[0])];
        continue;
      }
      for (int64_t j = 0; j < rowLength; ++j) {
        for (size_t i = 0; i < inputs.size(); ++i)
          registers[i] = inputs[i].values[static_cast<size_t>(rowStart[i] + j * rowStride[i])];
        ein::kern::runScalarProgram(program, inputs.size(), registers);
        row[j] = registers.back();
      }
    } while (next(index, rows));
    return success();
  };
  if (out.empty()) return success();
  if (auto concat = dyn_cast<ein::kern::ConcatOp>(op)) {
    const auto axis = static_cast<size_t>(concat.getAxis());
    const Shape parts = concat.getSizes().sizes();
    for (auto [part, size] : llvm::enumerate(parts)) {
      std::vector<int64_t> extent = sizes;
      extent[axis] = *size.constant();
      Block *body = concat.isCopy(part) ? nullptr : &concat.getParts()[part].front();
      if (failed(evaluate(concat.partInputs(part), concat.partViews(part), body, extent, axis,
                          *concat.partStart(part).constant())))
        return failure();
      // A weight only this part reads goes now, before the next part is
      // computed (the concatenation of two weights then needs one and a half
      // times their memory, not twice).
      for (Value input : concat.partInputs(part)) {
        bool readLater = llvm::any_of(llvm::seq(part + 1, parts.size()), [&](size_t later) {
          return llvm::is_contained(concat.partInputs(later), input);
        });
        if (!readLater && llvm::all_of(input.getUsers(), [&](Operation *user) { return user == &op; }))
          release(input);
      }
    }
    return success();
  }
  if (auto copy = dyn_cast<ein::kern::CopyOp>(op)) return evaluate(copy.getX(), copy.getXViewAttr(), nullptr, sizes, 0, 0);
  auto elementwise = cast<ein::kern::ElementwiseOp>(op);
  return evaluate(elementwise.getInputs(), elementwise.getInputViews().getValue(), &elementwise.getBody().front(),
                  sizes, 0, 0);
}

// ---- storing -------------------------------------------------------------

// Whether every use of `value` is a gemm's weight operand b (and nothing else of it).
bool onlyGemmWeights(Value value) {
  if (value.use_empty()) return false;
  return llvm::all_of(value.getUses(), [&](OpOperand &use) {
    auto gemm = dyn_cast<ein::kern::GemmOp>(use.getOwner());
    return gemm && gemm.getB() == value && gemm.getA() != value && gemm.getBias() != value &&
           gemm.getResidual() != value;
  });
}

// How int8 weights lie: [k, n] with strides sK, sN (row-major [k, n] or its
// transpose [n, k]), one matrix for every batch, read through one view.
struct Int8Layout {
  int64_t k = 0, n = 0, sK = 0, sN = 0;
  bool operator==(const Int8Layout &other) const {
    return k == other.k && n == other.n && sK == other.sK && sN == other.sN;
  }
};

std::optional<Int8Layout> int8Layout(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  std::optional<Int8Layout> layout;
  for (Operation *user : value.getUsers()) {
    auto gemm = cast<ein::kern::GemmOp>(user);
    ein::kern::ViewAttr view = gemm.getBView();
    const Shape &strides = view.getStrides();
    const Shape batch = gemm.getBatch().sizes();
    std::optional<int64_t> k = ein::kern::sizeOf(gemm.getK()).constant(), n = ein::kern::sizeOf(gemm.getN()).constant();
    std::optional<int64_t> offset = view.getOffset().constant();
    if (!k || !n || !offset || *offset != 0 || strides.size() != batch.size() + 2) return std::nullopt;
    for (size_t axis = 0; axis < batch.size(); ++axis) {
      std::optional<int64_t> stride = strides[axis].constant(), size = batch[axis].constant();
      if (!stride || !size || (*stride != 0 && *size != 1)) return std::nullopt;
    }
    std::optional<int64_t> sK = strides[batch.size()].constant(), sN = strides[batch.size() + 1].constant();
    if (!sK || !sN) return std::nullopt;
    // Each element once: row-major [k, n] or its transpose [n, k].
    const bool dense = (*sN == 1 && *sK == *n) || (*sK == 1 && *sN == *k);
    if (!dense || *k * *n != type.getNumElements() || *k * *n == 0 || *k > 65536) return std::nullopt;
    const Int8Layout here{*k, *n, *sK, *sN};
    if (layout && !(*layout == here)) return std::nullopt;
    layout = here;
  }
  return layout;
}

// A constant of `type` holding `blob`, right after `after` (the writer lays
// the weights out in the order of their ops).
ein::ir::ConstantOp storedConstant(OpBuilder &builder, Operation *after, RankedTensorType type, StringRef key,
                                   AsmResourceBlob blob) {
  builder.setInsertionPointAfter(after);
  return builder.create<ein::ir::ConstantOp>(after->getLoc(), DenseResourceElementsAttr::get(type, key, std::move(blob)));
}

// How a message names the weight `producer` defines: "parameter 'NAME'", or
// "the folded weight".
std::string weightName(Operation *producer) {
  auto param = dyn_cast<ein::ir::ParamOp>(producer);
  return param ? "parameter '" + param.getName().str() + "'" : std::string("the folded weight");
}

class Storer {
 public:
  // bf16 weights on either target (the CUDA gemms read them as they are);
  // int8 and int4 have CPU kernels only.
  // int8's scales are per column, or per group of 32 along k (groupSize 32).
  Storer(StringRef precision, StringRef target, int64_t groupSize)
      : bf16(precision == "bf16"),
        int8(target == "cpu" && precision == "int8"),
        int4(target == "cpu" && precision == "int4"),
        int8Groups(int8 && groupSize == 32) {}

  // Stores the weight `producer` defines (a bound parameter, or a constant
  // folding made) in its artifact type, if it has one other than f32.
  LogicalResult store(OpBuilder &builder, Operation *producer) {
    if (!bf16 && !int8 && !int4) return success();
    Value weight = producer->getResult(0);
    auto type = cast<RankedTensorType>(weight.getType());
    if (!type.getElementType().isF32() || !type.hasStaticShape() || !onlyGemmWeights(weight)) return success();
    if (!valueOf(weight)) return success();  // no values bound: the writer says so
    std::optional<Int8Layout> layout = int8 || int4 ? int8Layout(weight) : std::nullopt;
    if ((int8 || int4) && !layout) return success();
    std::optional<F32Values> f32 = f32ValuesOf(weight);
    if (!f32) return producer->emitError() << "the values of this weight cannot be read";
    ein::ir::ConstantOp stored;
    if (int8 || int4) {
      FailureOr<ein::ir::ConstantOp> quantized =
          int4 || int8Groups ? quantizeGroups(builder, producer, *f32, *layout, int4 ? 4 : 8)
                             : quantize(builder, producer, *f32, *layout);
      if (failed(quantized)) return failure();
      stored = *quantized;
    } else {
      AsmResourceBlob blob = HeapAsmResourceBlob::allocate(static_cast<size_t>(type.getNumElements()) * 2,
                                                           alignof(uint16_t), /*dataIsMutable=*/true);
      MutableArrayRef<char> out = blob.getMutableData();
      for (size_t i = 0; i < out.size() / 2; ++i) {
        const uint16_t bits = ein::ir::toHalfBits((*f32)[i], APFloat::BFloat());
        std::memcpy(out.data() + 2 * i, &bits, 2);
      }
      stored = storedConstant(builder, producer, RankedTensorType::get(type.getShape(), builder.getBF16Type()),
                              "stored", std::move(blob));
    }
    weight.replaceAllUsesWith(stored.getResult());
    if (auto param = dyn_cast<ein::ir::ParamOp>(producer)) {
      stored->setAttr(ein::kern::kStoredFromAttr, builder.getStringAttr(param.getName()));
      release(param);
      param.removeValueAttr();
    } else {
      if (Attribute from = producer->getAttr(ein::kern::kFoldedFromAttr))
        stored->setAttr(ein::kern::kFoldedFromAttr, from);
      release(weight);
      producer->erase();
    }
    return success();
  }

 private:
  // The weights as i8 at their own places and their scales (an f32 [n]
  // constant after them) that the gemms reading them take as b_scale. A
  // folded weight (a concatenation) is quantized as computed, so the scales
  // of concatenated weights are theirs concatenated.
  FailureOr<ein::ir::ConstantOp> quantize(OpBuilder &builder, Operation *producer, const F32Values &f32,
                                          const Int8Layout &layout) {
    const auto count = static_cast<size_t>(layout.k * layout.n);
    AsmResourceBlob quantized = HeapAsmResourceBlob::allocate(count, 1, /*dataIsMutable=*/true);
    AsmResourceBlob scales = HeapAsmResourceBlob::allocate(static_cast<size_t>(layout.n) * sizeof(float),
                                                           alignof(float), /*dataIsMutable=*/true);
    MutableArrayRef<char> q = quantized.getMutableData(), scale = scales.getMutableData();
    auto at = [&](int64_t p, int64_t j) { return f32[static_cast<size_t>(p * layout.sK + j * layout.sN)]; };
    for (int64_t j = 0; j < layout.n; ++j) {
      float absMax = 0.0f;
      for (int64_t p = 0; p < layout.k; ++p) {
        const float weight = at(p, j);
        if (!std::isfinite(weight)) {
          return producer->emitError()
                 << weightName(producer)
                 << " holds a value that is not finite: it cannot be quantized to int8";
        }
        absMax = std::max(absMax, std::fabs(weight));
      }
      const float columnScale = absMax / 127.0f;
      std::memcpy(scale.data() + j * sizeof(float), &columnScale, sizeof(float));
      const float inverse = absMax == 0.0f ? 0.0f : 127.0f / absMax;
      for (int64_t p = 0; p < layout.k; ++p) {
        // 127 / absMax overflows for a subnormal absMax: then the quotient itself.
        float value = std::nearbyint(std::isfinite(inverse) ? at(p, j) * inverse : at(p, j) / columnScale);
        value = std::min(127.0f, std::max(-127.0f, value));
        q[static_cast<size_t>(p * layout.sK + j * layout.sN)] = static_cast<char>(static_cast<int8_t>(value));
      }
    }
    auto type = cast<RankedTensorType>(producer->getResult(0).getType());
    ein::ir::ConstantOp weights = storedConstant(
        builder, producer, RankedTensorType::get(type.getShape(), builder.getIntegerType(8)), "stored", std::move(quantized));
    ein::ir::ConstantOp perColumn = storedConstant(
        builder, weights, RankedTensorType::get({layout.n}, builder.getF32Type()), "scales", std::move(scales));
    for (Operation *user : producer->getResult(0).getUsers())
      cast<ein::kern::GemmOp>(user).getBScaleMutable().assign(perColumn.getResult());
    return weights;
  }

  // The weights quantized per group of 32 along k and column, at their own
  // places, and their scales, an f16 [ceil(k / 32), n] constant after them:
  // - 4 bits, two to a byte (element e in the low nibble of byte e / 2 when e
  //   is even, else the high one), as llama.cpp's q4_0 quantizes a block of
  //   32: d = the value of largest magnitude / -8, q = min(15, trunc(x / d +
  //   8.5)) - 8 with the f32 d;
  // - 8 bits, as its q8_0 does: d = the largest magnitude / 127, q =
  //   round_half_away(x / d) with the f32 d;
  // d stored as f16. So q4_0 and q8_0 blocks' values are held exactly.
  FailureOr<ein::ir::ConstantOp> quantizeGroups(OpBuilder &builder, Operation *producer, const F32Values &f32,
                                                const Int8Layout &layout, int bits) {
    const auto count = static_cast<size_t>(layout.k * layout.n);
    const int64_t groups = (layout.k + 31) / 32;
    const char *kind = bits == 4 ? "int4" : "int8";
    AsmResourceBlob quantized =
        HeapAsmResourceBlob::allocate(bits == 4 ? (count + 1) / 2 : count, 1, /*dataIsMutable=*/true);
    AsmResourceBlob scales = HeapAsmResourceBlob::allocate(static_cast<size_t>(groups * layout.n) * sizeof(uint16_t),
                                                           alignof(uint16_t), /*dataIsMutable=*/true);
    MutableArrayRef<char> q = quantized.getMutableData(), scale = scales.getMutableData();
    std::fill(q.begin(), q.end(), 0);
    auto index = [&](int64_t p, int64_t j) { return static_cast<size_t>(p * layout.sK + j * layout.sN); };
    for (int64_t j = 0; j < layout.n; ++j)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t begin = g * 32, end = std::min(begin + 32, layout.k);
        float largest = 0.0f, magnitude = 0.0f;
        for (int64_t p = begin; p < end; ++p) {
          const float weight = f32[index(p, j)];
          if (!std::isfinite(weight)) {
            return producer->emitError()
                   << weightName(producer) << " holds a value that is not finite: it cannot be quantized to " << kind;
          }
          if (std::fabs(weight) > magnitude) magnitude = std::fabs(weight), largest = weight;
        }
        const float d = bits == 4 ? largest / -8.0f : magnitude / 127.0f, inverse = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t halfBits = ein::ir::toHalfBits(d, APFloat::IEEEhalf());
        if ((halfBits & 0x7c00) == 0x7c00) {  // past f16's range: the scale would be inf
          return producer->emitError() << weightName(producer) << " holds " << largest << ", beyond " << kind
                                       << "'s range (|w| <= " << (bits == 4 ? 8 : 127)
                                       << " x 65504, its scale being f16)";
        }
        std::memcpy(scale.data() + static_cast<size_t>(g * layout.n + j) * sizeof(uint16_t), &halfBits,
                    sizeof halfBits);
        for (int64_t p = begin; p < end; ++p) {
          const size_t element = index(p, j);
          // 1 / d overflows for a subnormal d: then the quotient itself.
          const float scaled = std::isfinite(inverse) ? f32[element] * inverse : f32[element] / d;
          if (bits == 8) {
            q[element] = static_cast<char>(static_cast<int8_t>(std::clamp(std::round(scaled), -127.0f, 127.0f)));
            continue;
          }
          const int value = static_cast<int>(std::clamp(scaled + 8.5f, 0.0f, 15.0f)) - 8;
          q[element / 2] = static_cast<char>(static_cast<uint8_t>(q[element / 2]) |
                                             (static_cast<uint8_t>(value) & 15) << (element % 2 * 4));
        }
      }
    auto type = cast<RankedTensorType>(producer->getResult(0).getType());
    ein::ir::ConstantOp weights =
        storedConstant(builder, producer, RankedTensorType::get(type.getShape(), builder.getIntegerType(bits)),
                       "stored", std::move(quantized));
    ein::ir::ConstantOp perGroup = storedConstant(
        builder, weights, RankedTensorType::get({groups, layout.n}, builder.getF16Type()), "scales", std::move(scales));
    for (Operation *user : producer->getResult(0).getUsers())
      cast<ein::kern::GemmOp>(user).getBScaleMutable().assign(perGroup.getResult());
    return weights;
  }

  bool bf16, int8, int4, int8Groups;
};

// ---- the pass ------------------------------------------------------------

struct StoreKernWeightsPass : ein::impl::StoreKernWeightsBase<StoreKernWeightsPass> {
  using StoreKernWeightsBase::StoreKernWeightsBase;

  LogicalResult foldKernel(OpBuilder &builder, Operation &op, Operation *&constantOut) {
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    AsmResourceBlob blob = HeapAsmResourceBlob::allocate(static_cast<size_t>(type.getNumElements()) * sizeof(float),
                                                         alignof(float), /*dataIsMutable=*/true);
    MutableArrayRef<char> bytes = blob.getMutableData();
    if (failed(fold(op, MutableArrayRef<float>(reinterpret_cast<float *>(bytes.data()), bytes.size() / sizeof(float)))))
      return failure();
    // The parameters it holds: its inputs', and those folded into them.
    llvm::SetVector<StringRef> names;
    llvm::SetVector<Operation *> producers;
    for (Value input : op.getOperands()) {
      Operation *producer = input.getDefiningOp();
      producers.insert(producer);
      if (auto param = dyn_cast<ein::ir::ParamOp>(producer)) names.insert(param.getName());
      if (auto from = producer->getAttrOfType<ArrayAttr>(ein::kern::kFoldedFromAttr))
        for (auto name : from.getAsValueRange<StringAttr>()) names.insert(name);
    }
    builder.setInsertionPoint(&op);
    auto constant = builder.create<ein::ir::ConstantOp>(op.getLoc(),
                                                        DenseResourceElementsAttr::get(type, "folded", std::move(blob)));
    constant->setAttr(ein::kern::kFoldedFromAttr, builder.getStrArrayAttr(names.getArrayRef()));
    op.getResult(0).replaceAllUsesWith(constant.getResult());
    op.erase();
    // A weight nothing reads any more: a constant goes; a parameter stays
    // declared (the artifact lists it, held by the folded constant) but
    // lets its values go.
    for (Operation *producer : producers) {
      if (!producer->use_empty()) continue;
      release(producer->getResult(0));
      if (auto param = dyn_cast<ein::ir::ParamOp>(producer)) param.removeValueAttr();
      else producer->erase();
    }
    constantOut = constant;
    return success();
  }

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    Block &body = function.getBody().front();
    Operation *terminator = body.getTerminator();
    OpBuilder builder(&getContext());
    Storer storer(precision, target, groupSize);
    // In op order: each fold as it comes, stored at once; a parameter no
    // fold reads, stored when it is visited.
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
      Operation *weight = nullptr;
      if (foldable(op, terminator)) {
        if (failed(foldKernel(builder, op, weight))) return signalPassFailure();
      } else if (isa<ein::ir::ParamOp>(op) && !op.getResult(0).use_empty() &&
                 llvm::none_of(op.getResult(0).getUsers(), [&](Operation *user) { return foldable(*user, terminator); })) {
        weight = &op;
      }
      if (weight && failed(storer.store(builder, weight))) return signalPassFailure();
    }
    // A parameter a fold reads and gemms read too, stored once every fold
    // has read its f32 values.
    for (auto param : llvm::make_early_inc_range(body.getOps<ein::ir::ParamOp>()))
      if (!param.getResult().use_empty() && param.getValueAttr() && onlyGemmWeights(param.getResult()))
        if (failed(storer.store(builder, param))) return signalPassFailure();
  }
};

}  // namespace
