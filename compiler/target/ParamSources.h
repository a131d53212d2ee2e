// Where einc takes parameter values from: a .safetensors file under PyTorch
// state_dict names, or seeded random values for benchmarks.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "target/ArtifactWriter.h"
#include "weights/Safetensors.h"

namespace ein {

// Serves parameters from a safetensors file, checking each against the type
// the model declares, and remembers which tensors the model used.
class SafetensorsParams {
 public:
  explicit SafetensorsParams(weights::SafetensorsFile file) : file(std::move(file)) {}

  ParamBytesProvider provider();

  // Names of the file's tensors that no parameter asked for.
  std::vector<std::string> unusedTensors() const;

 private:
  weights::SafetensorsFile file;
  std::set<std::string> used;
};

// Deterministic values from `seed` and each parameter's name, so a value does
// not depend on declaration order: N(0, 0.02) for floats (as transformer
// initialisers do), 0/1 for bools, [0, 2) for integers.
ParamBytesProvider randomParams(uint64_t seed);

}  // namespace ein
