// The dialects' side of the op table (schemas/ops/op_table.def): the opcode of
// each element-wise kind of the ein dialect, its scalar definition, and the
// op of a kern.elementwise body that computes it, so that a new row needs no
// code here, in the lowering or in the artifact writer.
#pragma once

#include <optional>

#include "ir/ein/ein_dialect.hpp"
#include "mlir/IR/Builders.h"
#include "ops/ops.hpp"

namespace ein::ir {

// The row whose spelling is the kind's name (UnaryKind::gelu_tanh is
// Opcode::GeluTanh); every kind has one (tests/ir checks).
ops::Opcode opcodeOf(UnaryKind kind);
ops::Opcode opcodeOf(BinaryKind kind);

// The kind's scalar definition (ops/scalar_functions.hpp) in double: constant
// folding computes what the kernels would.
double applyScalar(UnaryKind kind, double x);

// The op of the opcode's row (math.exp, kern.gelu, ...) applied to f32
// `operands`, or null when the row names none.
mlir::Value createScalarOp(mlir::OpBuilder &builder, mlir::Location loc, ops::Opcode opcode,
                           mlir::ValueRange operands);

// The opcode an op of an element-wise body is written as, by its name.
std::optional<ops::Opcode> opcodeOfScalarOp(mlir::Operation *op);

}  // namespace ein::ir
