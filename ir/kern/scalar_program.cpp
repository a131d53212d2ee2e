#include "ir/kern/scalar_program.hpp"

#include "ir/kern/kern_dialect.hpp"
#include "ir/op_table.hpp"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace ein::kern {

FailureOr<std::vector<ScalarInstruction>> compileScalarProgram(Block &block) {
  DenseMap<Value, uint16_t> registers;
  for (BlockArgument argument : block.getArguments())
    registers[argument] = static_cast<uint16_t>(argument.getArgNumber());
  std::vector<ScalarInstruction> program;
  auto next = [&]() { return static_cast<uint32_t>(block.getNumArguments() + program.size()); };
  auto reg = [&](Value v) { return registers.at(v); };
  auto emit = [&](Operation *op, ops::Opcode opcode, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0,
                  float imm = 0.0f) -> LogicalResult {
    if (next() > UINT16_MAX) return op->emitError() << "element-wise program is too long";
    if (op->getNumResults() == 1) registers[op->getResult(0)] = static_cast<uint16_t>(next());
    program.push_back({opcode, a, b, c, imm});
    return success();
  };
  for (Operation &op : block) {
    auto binary = [&](ops::Opcode opcode) {
      return emit(&op, opcode, reg(op.getOperand(0)), reg(op.getOperand(1)));
    };
    LogicalResult status = llvm::TypeSwitch<Operation *, LogicalResult>(&op)
        .Case<arith::ConstantOp>([&](arith::ConstantOp constant) -> LogicalResult {
          auto value = dyn_cast<FloatAttr>(constant.getValue());
          if (!value) return constant.emitOpError() << "only f32 constants are supported in element-wise bodies";
          return emit(&op, ops::Opcode::Const, 0, 0, 0, static_cast<float>(value.getValueAsDouble()));
        })
        .Case<arith::CmpFOp>([&](arith::CmpFOp compare) -> LogicalResult {
          switch (compare.getPredicate()) {
            case arith::CmpFPredicate::OLT: return binary(ops::Opcode::Lt);
            case arith::CmpFPredicate::OLE: return binary(ops::Opcode::Le);
            case arith::CmpFPredicate::OGT: return binary(ops::Opcode::Gt);
            case arith::CmpFPredicate::OGE: return binary(ops::Opcode::Ge);
            case arith::CmpFPredicate::OEQ: return binary(ops::Opcode::Eq);
            case arith::CmpFPredicate::UNE: return binary(ops::Opcode::Ne);
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
          if (failed(emit(&op, ops::Opcode::Const, 0, 0, 0, 1.0f))) return failure();
          uint16_t one = static_cast<uint16_t>(next() - 1);
          program.push_back({ops::Opcode::Mul, value, one, 0, 0.0f});
          return success();
        })
        .Default([&](Operation *other) -> LogicalResult {
          // The op table's row naming this op (math.exp, kern.gelu, arith.select, ...).
          std::optional<ops::Opcode> opcode = ir::opcodeOfScalarOp(other);
          if (!opcode || static_cast<int>(other->getNumOperands()) != ops::operandCount(*opcode))
            return other->emitOpError() << "has no element-wise runtime opcode";
          uint16_t operands[3] = {0, 0, 0};
          for (auto [index, operand] : llvm::enumerate(other->getOperands())) operands[index] = reg(operand);
          return emit(other, *opcode, operands[0], operands[1], operands[2]);
        });
    if (failed(status)) return failure();
  }
  return program;
}

}  // namespace ein::kern
