// A loaded, verified artifact. Loading maps the file read-only, verifies every
// index, offset, size, stride and dtype in it, and decodes the steps into
// plain structs; nothing in the file is trusted before that.
//
//   ein::StatusOr<std::shared_ptr<const ein::Model>> model = ein::Model::load("vit.einb");
//   if (!model.ok()) { std::cerr << model.status().toString(); return 1; }
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ein/status.hpp"
#include "ein/types.hpp"

namespace ein {

// A named tensor the model exposes: an input, an output or a parameter.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Integer inputs that index a table take ids in [0, upperBound); 0 when unknown.
  int64_t upperBound = 0;

  int64_t numElements() const;  // verified at load not to overflow
  size_t byteSize() const;
};

// One step of the program, as ein-inspect shows it.
struct StepInfo {
  // "gemm", "elementwise", "softmax", "reduce", "gather", "copy", "attention",
  // "talking_heads_attention", "layernorm"
  std::string op;
  std::string location;  // source location, e.g. "model.ein:12:5"; may be empty
  // The kernel's key sizes: gemm m, n, k; elementwise inputs, program (its length);
  // attention queries, keys, head_dim, value_dim (and heads for talking heads); ...
  std::map<std::string, int64_t> sizes;
  // Its iteration spaces: gemm and attention batch; elementwise, softmax, reduce,
  // copy, layernorm shape; gather ids_shape.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Its options: gemm activation, bias, residual, alpha (when not 1); attention mask, scale; layernorm
  // variant, epsilon and optional operands; reduce kind; copy dtype.
  std::map<std::string, std::string> attributes;
};

// The arithmetic an artifact allows its target (einc --precision): tensors stay
// f32 in memory; with Bf16 or Fp16 the CUDA attention and gemm kernels feed the
// tensor cores in that type and accumulate in f32. Matches ein.schema.Precision.
enum class Precision : uint8_t { Fp32 = 0, Bf16, Fp16 };
const char *precisionName(Precision precision);  // "fp32", "bf16", "fp16"

namespace detail {
struct Program;
}

class Model {
 public:
  // Maps the artifact at `path` read-only and verifies it; the mapping lives
  // as long as the model (and every session made from it).
  static StatusOr<std::shared_ptr<const Model>> load(const std::string &path);
  // Copies `size` bytes of an artifact into the model and verifies them.
  // `name` stands for the file in messages.
  static StatusOr<std::shared_ptr<const Model>> loadFromMemory(const void *data, size_t size,
                                                               const std::string &name = "<memory>");

  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  const std::string &name() const;  // the path, or the name given to loadFromMemory
  uint32_t formatVersion() const;
  Device target() const;
  Precision precision() const;
  const std::string &producer() const;
  const std::string &source() const;

  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  const std::vector<TensorInfo> &params() const;
  const std::vector<StepInfo> &steps() const;
  uint64_t arenaBytes() const;
  uint64_t weightsBytes() const;
  // The artifact's bytes, as loaded and verified (the file's mapping or the
  // model's copy): what to write to save the model again.
  std::span<const std::byte> artifactBytes() const;

  // The decoded program, for the runtime's executors.
  const detail::Program &program() const { return *program_; }

 private:
  explicit Model(std::unique_ptr<const detail::Program> program);
  std::unique_ptr<const detail::Program> program_;
};

}  // namespace ein
