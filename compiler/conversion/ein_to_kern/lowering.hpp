// The ein -> kern lowering's shared state: the Layout of each value and the
// Lowering class. Its members are defined by concern: ein_to_kern.cpp (the walk,
// copies and outputs), views.cpp (slices, rearranges, broadcasts),
// elementwise.cpp, reductions.cpp (reductions, softmax and layer norm),
// attention.cpp and contractions.cpp (einsum, matmul, linear).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "compiler/conversion/ein_to_kern/passes.hpp"
#include "ir/ein/equations.hpp"
#include "mlir/IR/Builders.h"

namespace ein::conversion {

using namespace mlir;
using ein::ir::BinaryKind;
using ein::ir::UnaryKind;
using ein::Shape;
using ein::Size;
using ein::kern::denseStrides;
using ein::kern::sizeAttr;
using ein::kern::sizesAttr;

// Element (i0, i1, ...) of the value is element `offset + sum(ik * strides[k])`
// of `buffer`'s flat row-major storage.
struct Layout {
  Value buffer;
  Size offset = 0;
  Shape sizes;
  Shape strides;
};

inline Shape shapeOf(Value value) { return ein::ir::shapeOf(value.getType()); }

inline Layout denseLayout(Value buffer) {
  Shape sizes = shapeOf(buffer);
  return Layout{buffer, 0, sizes, denseStrides(sizes)};
}

inline bool isDense(const Layout &layout) {
  if (layout.offset != 0 || ein::product(layout.sizes) != ein::product(shapeOf(layout.buffer))) return false;
  Shape dense = denseStrides(layout.sizes);
  for (size_t i = 0; i < layout.sizes.size(); ++i)
    if (layout.sizes[i] != 1 && layout.strides[i] != dense[i]) return false;
  return true;
}

// Merges axes (outer to inner) into one (size, stride) when they are laid out
// like one axis; unit axes are ignored.
inline std::optional<std::pair<Size, Size>> mergeAxes(ArrayRef<Size> sizes, ArrayRef<Size> strides) {
  Size size = 1, stride = 0;
  bool any = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (any && stride != strides[i] * sizes[i]) return std::nullopt;
    size *= sizes[i];
    stride = strides[i];
    any = true;
  }
  return std::make_pair(size, stride);
}

inline ein::kern::ViewAttr viewOf(MLIRContext *context, const Size &offset, ArrayRef<Size> strides) {
  return ein::kern::ViewAttr::get(context, offset, Shape(strides.begin(), strides.end()));
}

class Lowering {
 public:
  explicit Lowering(func::FuncOp function) : function(function), builder(function.getContext()) {}

  LogicalResult run();

 private:
  MLIRContext *context() { return function.getContext(); }

  LogicalResult lower(Operation *op);

  // ---- views -------------------------------------------------------------

  LogicalResult lowerSlice(ein::ir::SliceOp slice);

  LogicalResult lowerRearrange(ein::ir::RearrangeOp rearrange);

  LogicalResult lowerWindows(ein::ir::WindowsOp windows);

  // x copied into the state at the position; the result is a view of the
  // state itself (kern.append returns the state), so attention reads the
  // cache in place.
  LogicalResult lowerAppend(ein::ir::AppendOp append);

  // ---- kernels -------------------------------------------------------------

  Value buildCopy(Location loc, RankedTensorType resultType, const Layout &source);

  // A dense buffer holding `layout`'s elements in row-major order.
  Layout materialize(Location loc, const Layout &layout);

  static std::optional<ein::kern::ReduceKind> toKernReduce(ein::ir::ReduceKind kind);

  // Reduces the trailing `reducedRank` axes of `shape`, reading `source`'s
  // buffer with `strides` (over `shape`).
  Value buildReduce(Location loc, RankedTensorType resultType, const Layout &source, ArrayRef<Size> shape,
                    ArrayRef<Size> strides, int64_t reducedRank, ein::kern::ReduceKind kind);

  // `layout` read over `shape` with NumPy broadcasting (aligned on the right).
  static Shape broadcastStrides(const Layout &layout, ArrayRef<Size> shape);

  using ScalarBody = llvm::function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)>;

  // One kern.elementwise computing `body` of `operands` at every element of
  // `resultType`. Scalar constants become immediates in the body.
  FailureOr<Value> buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
                                    ArrayRef<Layout> operandLayouts, ScalarBody body);

  FailureOr<Value> buildElementwise(Location loc, RankedTensorType resultType, ArrayRef<Value> operands,
                                    ScalarBody body);

  Value constantF32(Location loc, double value);

  LogicalResult assignElementwise(Operation *op, FailureOr<Value> result);

  static Value isNonZero(OpBuilder &b, Location loc, Value x);

  static Value unaryScalar(OpBuilder &b, Location loc, UnaryKind kind, Value x);

  static Value binaryScalar(OpBuilder &b, Location loc, BinaryKind kind, Value x, Value y);

  LogicalResult lowerUnary(ein::ir::UnaryOp unary);

  LogicalResult lowerBinary(ein::ir::BinaryOp binary);

  LogicalResult lowerWhere(ein::ir::WhereOp where);

  LogicalResult lowerCast(ein::ir::CastOp cast);

  LogicalResult lowerConcat(ein::ir::ConcatOp concat);

  LogicalResult lowerSoftmax(ein::ir::SoftmaxOp softmax);

  // Reduces `axes` of `input` (any layout) with a kernel; the result is dense
  // over the kept axes in order.
  Value reduceAxes(Location loc, const Layout &input, ArrayRef<int64_t> axes, ein::kern::ReduceKind kind,
                   Type element);

  LogicalResult lowerReduce(ein::ir::ReduceOp reduce);

  ein::kern::ViewAttr viewOfLayout(const Layout &layout);

  // The buffer and view of an optional operand read over `shape`
  // (broadcasting), or nulls.
  std::pair<Value, ein::kern::ViewAttr> optionalView(Value value, ArrayRef<Size> shape);

  LogicalResult lowerLayerNorm(ein::ir::LayerNormOp norm);

  static ein::kern::MaskKind toKernMask(ein::ir::MaskKind kind);

  // The strides of `rearrange`'s input axes under which its result (it only
  // permutes, splits and merges axes) has `resultStrides`, or none where an
  // input axis would not be one strided axis.
  static std::optional<Shape> inputStridesFor(ein::ir::RearrangeOp rearrange, ArrayRef<Size> resultStrides);

  // Where an attention op writes its result [batch.., I, E]: straight into
  // the layout of the last of the rearranges that alone read it one after
  // the other (the head merge "b h n d -> b n (h d)", after the regrouping of
  // grouped-query heads) that it can write densely, so they are views and
  // need no copy; else densely.
  struct Placement {
    RankedTensorType bufferType;
    Shape strides;  // of the op's result axes in the buffer
  };
  static Placement placeAttentionOutput(Operation *op);

  // What both attention ops lower to alike: q [batch.., I, D], k, v
  // [batch.., J, E] and the mask [batch.., I, J] as views, the sizes, the
  // result's placement and the scale and mask attributes. For talking heads
  // the heads axis is the last of `batch`.
  struct AttentionParts {
    Shape batch;
    ein::ir::SizesAttr queries, keys, headDim, valueDim;
    Value q, k, v, mask;
    ein::kern::ViewAttr qView, kView, vView, maskView, outView;
    RankedTensorType resultType;
    Shape outStrides;
    FloatAttr scale, maskFill;
    ein::kern::MaskKindAttr maskKind;
  };
  template <typename Op>
  AttentionParts attentionParts(Op op);

  LogicalResult lowerAttention(ein::ir::AttentionOp attention);

  LogicalResult lowerTalkingHeadsAttention(ein::ir::TalkingHeadsAttentionOp attention);

  LogicalResult lowerEmbedding(ein::ir::EmbeddingOp embedding);

  // ---- contractions ----------------------------------------------------------

  struct Operand {
    Layout layout;
    SmallVector<std::string> labels;
  };

  // A label repeated inside one operand takes the diagonal: one axis whose
  // stride is the sum of the repeated axes' strides.
  static Operand takeDiagonals(Operand operand);

  // Sums away the labels of `operand` that appear in `keep` nowhere.
  Operand sumOut(Location loc, Operand operand, const std::set<std::string> &keep);

  // `operand` rewritten densely with its labels in `order`.
  Operand permuteDense(Location loc, const Operand &operand, ArrayRef<std::string> order);

  static Size strideOf(const Operand &operand, const std::string &label);

  // C[out] = sum over the other labels of A * B (+ bias), as one batched GEMM.
  // Labels in A, B and the output are batch axes; in A and the output only, M;
  // in B and the output only, N; in A and B only, K. Multi-axis M, N and K are
  // merged into one axis each where the strides allow; M and N axes that do
  // not merge become batch axes with stride 0 in the other operand, and K axes
  // that do not merge make both operands be copied into a matching order.
  // `residual` (dense over the output labels) is added to C.
  FailureOr<Value> buildContraction(Location loc, Operand a, Operand b, ArrayRef<std::string> outLabels,
                                    RankedTensorType resultType, std::optional<Layout> bias,
                                    Value residual = Value());

  // `operand` at index `index` of `label`: the label's axis dropped, the
  // offset moved there.
  static Operand atIndex(const Operand &operand, const std::string &label, int64_t index);

  // buildContraction where N is 1 (b's own labels are of size 1) and K does
  // not merge in a (a depthwise convolution's window rows and columns):
  // copying a into K's order (im2col) would write each element for one read.
  // Instead the largest K label stays the GEMM's K and the others (at most
  // kMaxContractionParts index combinations, of known sizes) are walked: a
  // GEMM for each of their indices on a and b offset there, each adding the
  // one before as its residual (the first takes the bias). None where this
  // does not apply.
  std::optional<FailureOr<Value>> buildContractionByParts(Location loc, const Operand &a, const Operand &b,
                                                         ArrayRef<std::string> kLabels,
                                                         ArrayRef<std::string> outLabels,
                                                         RankedTensorType resultType, std::optional<Layout> bias);
  static constexpr int64_t kMaxContractionParts = 64;

  LogicalResult assignContraction(Operation *op, FailureOr<Value> result);

  static std::string axisLabel(size_t i);

  LogicalResult lowerEinsum(ein::ir::EinsumOp einsum);

  // `layout` stretched to `rank` axes and `sizes` by broadcasting (stride 0).
  static Layout broadcastTo(const Layout &layout, ArrayRef<Size> sizes);

  LogicalResult lowerMatmul(ein::ir::MatmulOp matmul);

  LogicalResult lowerLinear(ein::ir::LinearOp linear);

  // ---- outputs ----------------------------------------------------------------

  // Each result must be its own dense buffer written by a kernel: outputs live
  // in the caller's buffers, so views, inputs, params and repeated results get
  // a copy.
  LogicalResult lowerReturn(func::ReturnOp ret);

  func::FuncOp function;
  OpBuilder builder;
  DenseMap<Value, Layout> layouts;
  DenseMap<Value, double> scalars;  // single-element constants, used as immediates
};

}  // namespace ein::conversion
