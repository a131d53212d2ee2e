// Opening the weights a compilation reads: einc's --weights and the Python
// package's weights= both go through openWeights.
#pragma once

#include <memory>
#include <string>

#include "compiler/weights/safetensors.hpp"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace ein::weights {

// The file at `path`, validated: a GgufFile (gguf.hpp) when it starts with
// GGUF's magic, else a SafetensorsFile, whose reader names a file of another
// kind (a model, an artifact, an array) for what it is. A PyTorch pickle
// checkpoint is refused with the command that converts it to safetensors:
// unpickling runs code from the file, and ein never does.
llvm::Expected<std::unique_ptr<WeightsFile>> openWeightsFile(llvm::StringRef path);

// The tensors at `paths` as one WeightsFile (weights_set.hpp: a tensor in
// two files is an error). Each path is a weights file (openWeightsFile) or a
// checkpoint folder, which holds, in the order looked for:
//   - an index, `model.safetensors.index.json` (or one `*.safetensors.index.json`),
//     whose "weight_map" names the shard of each tensor: the shards it lists
//     are read, and each tensor must be in the shard it names;
//   - `model.safetensors`, read alone;
//   - else every `*.safetensors` file in it.
// A folder with none of them is an error that says what it holds instead
// (pickle checkpoints: the command that converts them; GGUF files: give one).
// One file, or a folder of one, is served as that file, under its own path.
// Names are read as transformers reads them (checkpoint_names.hpp): under the
// legacy LayerNorm names where the files hold those, and with
// `baseModelPrefix` ("transformer.") added or removed where the files hold
// them so.
llvm::Expected<std::unique_ptr<WeightsFile>> openWeights(llvm::ArrayRef<std::string> paths,
                                                         llvm::StringRef baseModelPrefix = "");

}  // namespace ein::weights
