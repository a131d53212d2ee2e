// Small predicates the ein-level fusion passes share.
#pragma once

#include <optional>

#include "ir/ein/ein_dialect.hpp"
#include "mlir/IR/BuiltinAttributes.h"

namespace ein {

// `value`'s defining op when it is the binary op `kind`, else null.
inline ir::BinaryOp binaryOf(mlir::Value value, ir::BinaryKind kind) {
  auto op = value.getDefiningOp<ir::BinaryOp>();
  return op && op.getKind() == kind ? op : ir::BinaryOp();
}

// The value of a one-element float constant.
inline std::optional<double> scalarConstant(mlir::Value value) {
  auto constant = value.getDefiningOp<ir::ConstantOp>();
  if (!constant || constant.getType().getNumElements() != 1) return std::nullopt;
  auto elements = mlir::dyn_cast<mlir::DenseElementsAttr>(constant.getValue());
  if (!elements || !mlir::isa<mlir::FloatType>(elements.getElementType())) return std::nullopt;
  return elements.getSplatValue<mlir::APFloat>().convertToDouble();
}

// The other operand of a commutative `op` whose one operand is `known`, or null.
inline mlir::Value otherOperand(ir::BinaryOp op, mlir::Value known) {
  if (op.getLhs() == known) return op.getRhs();
  if (op.getRhs() == known) return op.getLhs();
  return mlir::Value();
}

}  // namespace ein
