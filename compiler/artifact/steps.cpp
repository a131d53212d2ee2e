// The writer's steps: one per kern op (concat one per part), with the views
// they read and write and the element-wise programs they run.
#include "compiler/artifact/writer.hpp"

#include "ir/op_table.hpp"
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
        if (auto scale = scaleTensor.find(gemm.getB()); scale != scaleTensor.end()) {
          std::vector<int64_t> unit{1};
          bScale = fb::CreateViewDirect(builder, scale->second, 0, &unit);
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

// Translates an elementwise body into register instructions: block
// arguments are registers 0..n-1 and each instruction defines the next one.
FailureOr<std::vector<fb::Instruction>> Writer::compileProgram(Block &block) {
  DenseMap<Value, uint16_t> registers;
  for (BlockArgument argument : block.getArguments())
    registers[argument] = static_cast<uint16_t>(argument.getArgNumber());
  std::vector<fb::Instruction> program;
  auto next = [&]() { return static_cast<uint32_t>(block.getNumArguments() + program.size()); };
  auto reg = [&](Value v) { return registers.at(v); };
  auto emit = [&](Operation *op, fb::Opcode opcode, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0,
                  float imm = 0.0f) -> LogicalResult {
    if (next() > UINT16_MAX) return op->emitError() << "element-wise program is too long";
    if (op->getNumResults() == 1) registers[op->getResult(0)] = static_cast<uint16_t>(next());
    program.emplace_back(opcode, a, b, c, imm);
    return success();
  };
  for (Operation &op : block) {
    auto binary = [&](fb::Opcode opcode) {
      return emit(&op, opcode, reg(op.getOperand(0)), reg(op.getOperand(1)));
    };
    LogicalResult status = llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<arith::ConstantOp>([&](arith::ConstantOp constant) -> LogicalResult {
          auto value = dyn_cast<FloatAttr>(constant.getValue());
          if (!value) return constant.emitOpError() << "only f32 constants are supported in element-wise bodies";
          return emit(&op, fb::Opcode::Const, 0, 0, 0, static_cast<float>(value.getValueAsDouble()));
        })
        .Case<arith::CmpFOp>([&](arith::CmpFOp compare) -> LogicalResult {
          switch (compare.getPredicate()) {
            case arith::CmpFPredicate::OLT: return binary(fb::Opcode::Lt);
            case arith::CmpFPredicate::OLE: return binary(fb::Opcode::Le);
            case arith::CmpFPredicate::OGT: return binary(fb::Opcode::Gt);
            case arith::CmpFPredicate::OGE: return binary(fb::Opcode::Ge);
            case arith::CmpFPredicate::OEQ: return binary(fb::Opcode::Eq);
            case arith::CmpFPredicate::UNE: return binary(fb::Opcode::Ne);
            default: return compare.emitOpError() << "predicate has no runtime opcode";
          }
        })
        .Case<arith::UIToFPOp>([&](arith::UIToFPOp convert) {
          // Booleans are already 0/1 in f32 registers.
          registers[convert] = reg(convert.getIn());
          return success();
        })
        .Case<kern::YieldOp>([&](kern::YieldOp yield) -> LogicalResult {
          // The result is the last register; x * 1 copies one there exactly.
          uint16_t value = reg(yield.getValue());
          if (!program.empty() && value == next() - 1) return success();
          if (failed(emit(&op, fb::Opcode::Const, 0, 0, 0, 1.0f))) return failure();
          uint16_t one = static_cast<uint16_t>(next() - 1);
          program.emplace_back(fb::Opcode::Mul, value, one, 0, 0.0f);
          return success();
        })
        .Default([&](Operation *other) -> LogicalResult {
          // The op table's row naming this op (math.exp, kern.gelu, arith.select, ...).
          std::optional<ops::Opcode> opcode = ir::opcodeOfScalarOp(other);
          if (!opcode || static_cast<int>(other->getNumOperands()) != ops::operandCount(*opcode))
            return other->emitOpError() << "has no element-wise runtime opcode";
          uint16_t operands[3] = {0, 0, 0};
          for (auto [index, operand] : llvm::enumerate(other->getOperands())) operands[index] = reg(operand);
          return emit(other, toSchema<fb::Opcode>(*opcode), operands[0], operands[1], operands[2]);
        });
    if (failed(status)) return failure();
  }
  return program;
}

}  // namespace ein::artifact
