// Serialises a planned kern-dialect function into an ein artifact (.einb).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"

namespace ein {

enum class ArtifactTarget { Cpu, Cuda };
enum class ArtifactPrecision { Fp32, Bf16, Fp16, Int8, Int4 };

struct ArtifactOptions {
  std::string source;  // the model file, recorded for messages and ein-inspect
  ArtifactTarget target = ArtifactTarget::Cpu;
  ArtifactPrecision precision = ArtifactPrecision::Fp32;
};

// What writeArtifact wrote: the FlatBuffer header (einc's summary reads it)
// and the artifact's size in bytes.
struct WrittenArtifact {
  std::vector<uint8_t> header;
  uint64_t bytes = 0;
};

// Writes the artifact to `out` (a file or a buffer: the header is written
// last, into room left for it), one weight at a time. `function` must have
// been through the compiler pipeline (kern ops with planned arena offsets),
// with every parameter it keeps bound to its values (bindParameters).
mlir::FailureOr<WrittenArtifact> writeArtifact(mlir::func::FuncOp function, const ArtifactOptions &options,
                                               llvm::raw_pwrite_stream &out);
// The artifact in memory.
mlir::FailureOr<std::vector<uint8_t>> writeArtifact(mlir::func::FuncOp function, const ArtifactOptions &options);

}  // namespace ein
