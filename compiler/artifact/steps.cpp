// The writer's steps: one per kern op (concat one per part), with the views
// they read and write and the element-wise programs they run.
#include "compiler/artifact/writer.hpp"

#include "ir/kern/scalar_program.hpp"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

namespace ein::artifact {

flatbuffers::Offset<fb::View> Writer::view(Value value, kern::ViewAttr attr) {
  std::vector<int64_t> strides = fields(attr.getStrides());
  return fb::CreateViewDirect(builder, tensorIndex.at(value), field(attr.getOffset()), &strides);
}

// The dense row-major view of an op's own result over `sizes`.
flatbuffers::Offset<fb::View> Writer::denseView(Value value, const Shape &sizes) {
  std::vector<int64_t> strides = fields(kern::denseStrides(sizes));
  return fb::CreateViewDirect(builder, tensorIndex.at(value), 0, &strides);
}

// One step per part, each writing its slab of the result: a copy, or the
// part's element-wise program.
LogicalResult Writer::addConcatSteps(kern::ConcatOp concat) {
  Value result = concat.getResult();
  Shape shape = ir::shapeOf(concat.getType());
  Shape strides = kern::denseStrides(shape);
  std::vector<int64_t> strideFields = fields(strides);
  int64_t axis = concat.getAxis();
  for (auto [part, size] : llvm::enumerate(concat.getSizes().sizes())) {
    Shape partShape = shape;
    partShape[axis] = size;
    std::vector<int64_t> partFields = fields(partShape);
    std::vector<flatbuffers::Offset<fb::View>> inputs;
    for (auto [input, attr] : llvm::zip(concat.partInputs(part), concat.partViews(part)))
      inputs.push_back(view(input, cast<kern::ViewAttr>(attr)));
    auto y = fb::CreateViewDirect(builder, tensorIndex.at(result), field(concat.partStart(part) * strides[axis]),
                                  &strideFields);
    flatbuffers::Offset<void> kernel;
    fb::Kernel kind = fb::Kernel::Copy;
    if (concat.isCopy(part)) {
      kernel = fb::CreateCopyDirect(builder, &partFields, inputs.front(), y).Union();
    } else {
      auto program = compileProgram(concat.getParts()[part].front());
      if (failed(program)) return failure();
      kernel = fb::CreateElementwiseDirect(builder, &partFields, &inputs, y, &*program).Union();
      kind = fb::Kernel::Elementwise;
    }
    steps.push_back(fb::CreateStep(builder, kind, kernel, builder.CreateString(describe(concat.getLoc()))));
  }
  return success();
}

LogicalResult Writer::addStep(Operation &op) {
  if (auto concat = dyn_cast<kern::ConcatOp>(op)) return addConcatSteps(concat);
  Value result = op.getResult(0);
  auto shapeOf = [](Value v) { return ir::shapeOf(v.getType()); };
  auto vec = [&](ir::SizesAttr sizes) { return fields(sizes.sizes()); };
  auto one = [&](ir::SizesAttr size) { return field(kern::sizeOf(size)); };
  flatbuffers::Offset<void> kernel;
  fb::Kernel kind = fb::Kernel::NONE;
  LogicalResult status = llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<kern::GemmOp>([&](kern::GemmOp gemm) {
        auto batch = vec(gemm.getBatch());
        auto a = view(gemm.getA(), gemm.getAView());
        auto b = view(gemm.getB(), gemm.getBView());
        auto c = view(result, gemm.getCView());
        auto bias = optionalView(gemm.getBias(), gemm.getBiasView());
        auto residual = optionalView(gemm.getResidual(), gemm.getResidualView());
        // int8 weights: their scale per column (n), a dense [n] tensor.
        flatbuffers::Offset<fb::View> bScale = 0;
        if (Value scale = gemm.getBScale()) {
          std::vector<int64_t> unit{1};
          bScale = fb::CreateViewDirect(builder, tensorIndex.at(scale), 0, &unit);
        }
        kernel = fb::CreateGemmDirect(builder, &batch, one(gemm.getM()), one(gemm.getN()), one(gemm.getK()), a, b, c,
                                      bias,
                                      gemm.getAlpha().convertToFloat(), toSchema<fb::Activation>(gemm.getActivation()), residual,
                                      bScale)
                     .Union();
        kind = fb::Kernel::Gemm;
        return success();
      })
      .Case<kern::ElementwiseOp>([&](kern::ElementwiseOp elementwise) -> LogicalResult {
        // Any result type: the kernel computes in f32 and stores the result's dtype.
        auto program = compileProgram(elementwise.getBody().front());
        if (failed(program)) return failure();
        std::vector<flatbuffers::Offset<fb::View>> views;
        for (auto [input, attr] : llvm::zip(elementwise.getInputs(), elementwise.getInputViews()))
          views.push_back(view(input, cast<kern::ViewAttr>(attr)));
        auto output = denseView(result, shapeOf(result));
        auto shape = fields(shapeOf(result));
        kernel = fb::CreateElementwiseDirect(builder, &shape, &views, output, &*program).Union();
        kind = fb::Kernel::Elementwise;
        return success();
      })
      .Case<kern::SoftmaxOp>([&](kern::SoftmaxOp softmax) {
        auto shape = vec(softmax.getShape());
        auto x = view(softmax.getX(), softmax.getXView());
        auto y = view(result, softmax.getYView());
        kernel = fb::CreateSoftmaxDirect(builder, &shape, x, y).Union();
        kind = fb::Kernel::Softmax;
        return success();
      })
      .Case<kern::ReduceOp>([&](kern::ReduceOp reduce) {
        auto shape = vec(reduce.getShape());
        int64_t reducedRank = reduce.getReducedRankAttr().getInt();
        Shape sizes = reduce.getShape().sizes();
        auto x = view(reduce.getX(), reduce.getXView());
        auto y = denseView(result, Shape(sizes.begin(), sizes.end() - reducedRank));
        kernel = fb::CreateReduceDirect(builder, &shape, static_cast<uint32_t>(reducedRank),
                                        toSchema<fb::ReduceKind>(reduce.getKind()), x, y)
                     .Union();
        kind = fb::Kernel::Reduce;
        return success();
      })
      .Case<kern::GatherOp>([&](kern::GatherOp gather) {
        Shape idsSizes = kern::gatherIdsShape(gather), table = kern::gatherTableShape(gather);
        auto ids = view(gather.getIds(), gather.getIdsView());
        auto tableView = denseView(gather.getTable(), table);
        Shape ySizes = idsSizes;
        ySizes.push_back(table[1]);
        auto y = denseView(result, ySizes);
        auto idsShape = fields(idsSizes);
        kernel = fb::CreateGatherDirect(builder, &idsShape, field(table[0]), field(table[1]), ids, tableView, y)
                     .Union();
        kind = fb::Kernel::Gather;
        return success();
      })
      .Case<kern::CopyOp>([&](kern::CopyOp copy) {
        auto shape = vec(copy.getShape());
        auto x = view(copy.getX(), copy.getXView());
        auto y = denseView(result, copy.getShape().sizes());
        kernel = fb::CreateCopyDirect(builder, &shape, x, y).Union();
        kind = fb::Kernel::Copy;
        return success();
      })
      .Case<kern::AttentionOp>([&](kern::AttentionOp attention) {
        auto batch = vec(attention.getBatch());
        auto q = view(attention.getQ(), attention.getQView());
        auto k = view(attention.getK(), attention.getKView());
        auto v = view(attention.getV(), attention.getVView());
        auto out = view(result, attention.getOutView());
        auto mask = optionalView(attention.getMask(), attention.getMaskView());
        auto causal = attention.getCausalPositions();
        kernel = fb::CreateAttentionDirect(builder, &batch, one(attention.getQueries()), one(attention.getKeys()),
                                           one(attention.getHeadDim()), one(attention.getValueDim()),
                                           attention.getScale().convertToFloat(), q, k, v, out,
                                           toSchema<fb::MaskKind>(attention.getMaskKind()), mask,
                                           attention.getMaskFill().convertToFloat(), causal.has_value(),
                                           causal ? one(*causal) : 0)
                     .Union();
        kind = fb::Kernel::Attention;
        return success();
      })
      .Case<kern::TalkingHeadsAttentionOp>([&](kern::TalkingHeadsAttentionOp attention) {
        auto batch = vec(attention.getBatch());
        auto q = view(attention.getQ(), attention.getQView());
        auto k = view(attention.getK(), attention.getKView());
        auto v = view(attention.getV(), attention.getVView());
        auto out = view(result, attention.getOutView());
        auto preMix = optionalView(attention.getPreMix(), attention.getPreMixView());
        auto preBias = optionalView(attention.getPreBias(), attention.getPreBiasView());
        auto postMix = optionalView(attention.getPostMix(), attention.getPostMixView());
        auto postBias = optionalView(attention.getPostBias(), attention.getPostBiasView());
        auto mask = optionalView(attention.getMask(), attention.getMaskView());
        kernel = fb::CreateTalkingHeadsAttentionDirect(
                     builder, &batch, one(attention.getHeads()), one(attention.getQueries()), one(attention.getKeys()),
                     one(attention.getHeadDim()), one(attention.getValueDim()), attention.getScale().convertToFloat(), q, k,
                     v, out, preMix, preBias, postMix, postBias, toSchema<fb::MaskKind>(attention.getMaskKind()), mask,
                     attention.getMaskFill().convertToFloat())
                     .Union();
        kind = fb::Kernel::TalkingHeadsAttention;
        return success();
      })
      .Case<kern::LayerNormOp>([&](kern::LayerNormOp norm) {
        auto shape = vec(norm.getShape());
        auto x = view(norm.getX(), norm.getXView());
        auto residual = optionalView(norm.getResidual(), norm.getResidualView());
        auto gamma = optionalView(norm.getGamma(), norm.getGammaView());
        auto beta = optionalView(norm.getBeta(), norm.getBetaView());
        auto y = denseView(result, norm.getShape().sizes());
        kernel = fb::CreateLayerNormDirect(builder, &shape, x, residual, /*sum=*/0, gamma, beta, y,
                                           norm.getEpsilon().convertToFloat(),
                                           toSchema<fb::LayerNormVariant>(norm.getVariant()))
                     .Union();
        kind = fb::Kernel::LayerNorm;
        return success();
      })
      .Default([&](Operation *other) { return other->emitOpError() << "has no runtime kernel"; });
  if (failed(status) || broken) return failure();
  steps.push_back(fb::CreateStep(builder, kind, kernel, builder.CreateString(describe(op.getLoc()))));
  return success();
}

// The view of an optional operand, or none.
flatbuffers::Offset<fb::View> Writer::optionalView(Value value, std::optional<kern::ViewAttr> attr) {
  return value ? view(value, *attr) : flatbuffers::Offset<fb::View>();
}

// An elementwise body as register instructions (kern::compileScalarProgram).
FailureOr<std::vector<fb::Instruction>> Writer::compileProgram(Block &block) {
  FailureOr<std::vector<kern::ScalarInstruction>> scalar = kern::compileScalarProgram(block);
  if (failed(scalar)) return failure();
  std::vector<fb::Instruction> program;
  program.reserve(scalar->size());
  for (const kern::ScalarInstruction &in : *scalar)
    program.emplace_back(toSchema<fb::Opcode>(in.opcode), in.a, in.b, in.c, in.imm);
  return program;
}

}  // namespace ein::artifact
