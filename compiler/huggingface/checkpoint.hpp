// A Hugging Face checkpoint folder (config.json, safetensors weights) as a
// model to compile: the model file of the library (models/huggingface) for
// the checkpoint's architecture, with config.json's fields as the values of
// the dims and configs the file declares under the same names. einc --hf and
// the Python package's from_pretrained share it.
#pragma once

#include <string>
#include <vector>

#include "compiler/driver/compiler.hpp"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace ein::huggingface {

struct Checkpoint {
  std::string folder;
  std::string architecture;  // config.json's architectures[0]
  // The library's model file for the architecture ("huggingface/llama.ein").
  driver::ModelSource source;
  ein::DimRanges dims;             // config.json's values of the file's fixed dims
  mlirgen::ConfigValues configs;   // and of its configs (nested objects' fields dotted)
  // The prefix of the base model's names ("transformer." in GPT2LMHeadModel),
  // which weights saved from the base model alone lack and weights saved
  // from a model with a head over it have (weights::CheckpointNames); empty
  // where the architecture has none.
  std::string baseModelPrefix;
};

// Reads `folder`/config.json and picks the model file; an error names the
// file, the field and its value (a missing config.json, an architecture the
// library lacks, a field whose value a dim cannot take).
llvm::Expected<Checkpoint> readCheckpoint(llvm::StringRef folder);

// The architectures the library has a model file for, sorted.
std::vector<std::string> supportedArchitectures();

// `checkpoint`'s model text with the values it takes from config.json (and
// `dims`, `configs` given on top) written in as the declarations' defaults:
// a file that compiles alone, to read and edit (einc --hf DIR --emit=ein).
std::string modelTextWithValues(const Checkpoint &checkpoint, const ein::DimRanges &dims,
                                const mlirgen::ConfigValues &configs);

}  // namespace ein::huggingface
