// Serialises a planned kern-dialect function into an ein artifact (.einb).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"

namespace ein {

// The bytes of one parameter, in the layout of its declared type (row-major,
// little-endian). Errors are reported at the declaration's location.
using ParamBytesProvider =
    std::function<mlir::FailureOr<std::vector<uint8_t>>(llvm::StringRef name, mlir::RankedTensorType type,
                                                        mlir::Location declaredAt)>;

enum class ArtifactTarget { Cpu, Cuda };
enum class ArtifactPrecision { Fp32, Bf16, Fp16, Int8 };

struct ArtifactOptions {
  std::string source;  // the model file, recorded for messages and ein-inspect
  ArtifactTarget target = ArtifactTarget::Cpu;
  ArtifactPrecision precision = ArtifactPrecision::Fp32;
};

// Builds the artifact in memory. `function` must have been through the
// compiler pipeline (kern ops with planned arena offsets).
mlir::FailureOr<std::vector<uint8_t>> writeArtifact(mlir::func::FuncOp function, const ParamBytesProvider &params,
                                                    const ArtifactOptions &options);

}  // namespace ein
