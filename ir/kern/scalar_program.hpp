// An element-wise kernel's body as the register program the runtime runs
// (schemas/ops/op_table.def's opcodes): block arguments are registers
// 0..n-1 and each instruction defines the next one; the result is the last.
// The artifact writer serialises it; kern-store-weights evaluates it.
#pragma once

#include <cstdint>
#include <vector>

#include "mlir/IR/Block.h"
#include "mlir/Support/LogicalResult.h"
#include "ops/scalar_functions.hpp"

namespace ein::kern {

struct ScalarInstruction {
  ops::Opcode opcode;
  uint16_t a = 0, b = 0, c = 0;
  float imm = 0.0f;
};

mlir::FailureOr<std::vector<ScalarInstruction>> compileScalarProgram(mlir::Block &block);

// Runs `program` on `registers`, whose first entries are the inputs; the
// result is then registers.back() (registers holds inputs + program.size()).
inline void runScalarProgram(const std::vector<ScalarInstruction> &program, size_t inputs,
                             std::vector<float> &registers) {
  for (size_t p = 0; p < program.size(); ++p) {
    const ScalarInstruction &in = program[p];
    registers[inputs + p] = ops::evaluate<float>(in.opcode, registers[in.a], registers[in.b], registers[in.c], in.imm);
  }
}

}  // namespace ein::kern
