#include "ir/op_table.hpp"

#include "ops/scalar_functions.hpp"

namespace ein::ir {
namespace {

ops::Opcode opcodeSpelled(llvm::StringRef spelling) {
  std::optional<ops::Opcode> opcode = ops::findOpcode(&ops::OpcodeInfo::spelling, spelling);
  if (!opcode) llvm::report_fatal_error("the op table has no opcode spelled '" + spelling + "'");
  return *opcode;
}

}  // namespace

ops::Opcode opcodeOf(UnaryKind kind) { return opcodeSpelled(stringifyUnaryKind(kind)); }
ops::Opcode opcodeOf(BinaryKind kind) { return opcodeSpelled(stringifyBinaryKind(kind)); }

double applyScalar(UnaryKind kind, double x) { return ops::evaluate(opcodeOf(kind), x, 0.0, 0.0, 0.0); }

mlir::Value createScalarOp(mlir::OpBuilder &builder, mlir::Location loc, ops::Opcode opcode,
                           mlir::ValueRange operands) {
  llvm::StringRef name = ops::info(opcode).mlirOp;
  if (name.empty()) return nullptr;
  mlir::OperationState state(loc, name, operands, {builder.getF32Type()});
  assert(state.name.isRegistered() && "the op table names an op of a dialect that is not loaded");
  return builder.create(state)->getResult(0);
}

std::optional<ops::Opcode> opcodeOfScalarOp(mlir::Operation *op) {
  return ops::findOpcode(&ops::OpcodeInfo::mlirOp, op->getName().getStringRef());
}

}  // namespace ein::ir
