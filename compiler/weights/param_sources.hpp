// Where a compilation takes parameter values from (a weights file under
// PyTorch state_dict names: .safetensors, or llama.cpp's GGUF; or seeded
// random values for benchmarks), and how they enter the IR: each ein.param's
// `value`, bound once after the front end.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/weights/safetensors.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"

namespace ein {

// The values of one parameter, in the layout of its declared type (row-major,
// little-endian): a blob that owns its bytes or points into a mapped weights
// file (which then outlives the module). Errors are reported at the
// declaration's location.
using ParamProvider = std::function<mlir::FailureOr<mlir::AsmResourceBlob>(
    llvm::StringRef name, mlir::RankedTensorType type, mlir::Location declaredAt)>;

// A blob that owns `bytes`.
mlir::AsmResourceBlob ownedBlob(std::vector<uint8_t> bytes);

// When a provider's values are taken: at once (a file's, mapped: errors
// reported before any pass runs), or each the first time a pass or the
// writer reads it, and again after they let it go (values made from a seed:
// never all held at once).
enum class ParamBinding { Now, OnDemand };

// Binds every parameter of `module` that something reads: its `value`
// becomes a dense resource over the provider's bytes, whose size is checked
// against the declared type. `bound` is told the bytes bound so far (einc's
// progress line).
mlir::LogicalResult bindParameters(mlir::ModuleOp module, const ParamProvider &params,
                                   const std::function<void(uint64_t bytes)> &bound = {},
                                   ParamBinding binding = ParamBinding::Now);

// Serves parameters from a weights file (a safetensors file, a GGUF file read
// as one, or several files as one: weights::WeightsFile), checking each
// against the type the model declares, and remembers which tensors the model
// used.
class SafetensorsParams {
 public:
  explicit SafetensorsParams(std::unique_ptr<weights::WeightsFile> file) : file(std::move(file)) {}
  explicit SafetensorsParams(weights::SafetensorsFile file)
      : file(std::make_unique<weights::SafetensorsFile>(std::move(file))) {}

  ParamProvider provider();

  // Checks that the file holds every parameter `module` declares, with its
  // shape and a type it converts to, before anything is compiled: the first
  // missing parameter, then the first mismatched one, is an error at its
  // declaration, so the provider fails on none of them (values bound on
  // demand are made inside passes, which cannot report an error). Afterwards
  // a missing parameter's message (here or from the provider) can say that
  // every missing name is in the file under a prefix added or removed.
  mlir::LogicalResult checkParameters(mlir::ModuleOp module);

  // How to bind the provider, once checkParameters has run: at once when the
  // file holds every parameter's values as declared (served in place from
  // the mapping, they cost no memory), else on demand, so that the values
  // made for them (converted, dequantized, rows reordered) are not all held
  // at once.
  ParamBinding binding() const { return everyValueInPlace ? ParamBinding::Now : ParamBinding::OnDemand; }

  // Names of the file's tensors that no parameter asked for.
  std::vector<std::string> unusedTensors() const;
  // Whether the file stores a tensor in `quantization`, by ggml's name
  // (weights::WeightsFile::blockQuantization).
  bool holdsBlocks(llvm::StringRef quantization) const;
  // The path of the file that holds `tensor` (a shard's, for weights in
  // several files), for messages about it.
  llvm::StringRef pathOf(llvm::StringRef tensor) const;

 private:
  // "FILE: missing parameter "NAME" (declared at ...)" and what may explain
  // it: the file's names carry a prefix the model's lack (or the other way
  // round), or a name a few edits away.
  std::string missingMessage(llvm::StringRef name, mlir::Location declaredAt) const;
  // Whether `entry` can serve a parameter of `type`; if not, the error at
  // the declaration.
  mlir::LogicalResult checkEntry(const weights::TensorEntry &entry, llvm::StringRef name, mlir::RankedTensorType type,
                                 mlir::Location declaredAt) const;

  std::unique_ptr<weights::WeightsFile> file;
  std::set<std::string> used;
  std::vector<std::string> declared;  // every parameter of the model, once checkParameters has run
  bool everyValueInPlace = true;
};

// How --random-weights draws a float parameter, decided by how the model uses
// it, as PyTorch's modules initialise theirs.
enum class RandomInit {
  Normal,          // N(0, 0.02): anything not below
  One,             // a layernorm / rmsnorm weight
  Zero,            // a norm's bias, or a bias added to a GEMM's (linear, matmul, einsum, conv2d) result
  FanInUniform,    // a GEMM weight: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), nn.Linear's and nn.Conv2d's default
  StandardNormal,  // an embedding table (rows gathered by ids): N(0, 1), nn.Embedding's default
};

struct ParamInit {
  RandomInit kind = RandomInit::Normal;
  int64_t fanIn = 1;  // FanInUniform: the elements each output sums over
};

using ParamInits = std::map<std::string, ParamInit>;

// Each float parameter's RandomInit, from its uses in `module`, the ein
// dialect as the front end gives it (before the passes fuse and lower it).
// A use is seen through views (rearrange, slice, cast, transpose, concat);
// when a parameter has several kinds of use, the first of One, Zero (norm
// bias), StandardNormal, FanInUniform, Zero (GEMM bias) wins.
ParamInits paramInitsFromUses(mlir::ModuleOp module);

// Deterministic values from `seed` and each parameter's name, so a value does
// not depend on declaration order: floats as `inits` says (N(0, 0.02) for a
// parameter it does not name; f16 and bf16 parameters hold them rounded to
// their type), 0/1 for bools, [0, 2) for integers.
ParamProvider randomParams(uint64_t seed, ParamInits inits = {});

}  // namespace ein
