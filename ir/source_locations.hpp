// Source locations through fusion: a fused op keeps the location of every
// model op it replaced, so tools can trace a step back to the model's lines.
//
// An op's location is a FileLineColLoc ("model.ein:12:5"), wrapped in a
// NameLoc naming the namespace of the block it came from ("blocks.3.attn")
// when there is one. A fusion pass gives the op it builds a FusedLoc of the
// replaced ops' locations (flattened, the root's first) whose metadata is
// the list of passes that fused them.
#pragma once

#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/Operation.h"

namespace ein::ir {

// The location for `fused`, an op that takes the place of `replaced`: its
// own first, then those of the replaced ops and of every op in their block
// whose results only they use (directly or through such ops), in program
// order, with `pass` added to the passes that fused them. `fused` reads what
// survives the fusion, so call it once `fused` has its operands.
mlir::Location fusedLocation(mlir::Operation *fused, llvm::ArrayRef<mlir::Operation *> replaced, llvm::StringRef pass);

// What a location says about where an op came from.
struct SourceLocations {
  std::vector<std::string> sources;  // "model.ein:12:5", each once: the op's own, then the rest in text order
  std::string scope;                 // the first source's namespace ("blocks.3.attn"), or ""
  std::vector<std::string> passes;   // the passes that fused it, in order
};
SourceLocations sourceLocationsOf(mlir::Location loc);

}  // namespace ein::ir
