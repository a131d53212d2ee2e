// Opening a weights file of either format the compiler reads, told by its
// first bytes: einc's --weights and the Python package's weights= share it.
#pragma once

#include <memory>

#include "compiler/weights/safetensors.hpp"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace ein::weights {

// The file at `path`, validated: a GgufFile (gguf.hpp) when it starts with
// GGUF's magic, else a SafetensorsFile, whose reader names a file of another
// kind (a model, an artifact, an array) for what it is.
llvm::Expected<std::unique_ptr<WeightsFile>> openWeightsFile(llvm::StringRef path);

}  // namespace ein::weights
