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

// A dim the model leaves open (`dim t = 1..256`): each run reads its value
// from the input shapes, and it must lie in [min, max].
struct DimInfo {
  std::string name;
  int64_t min = 0, max = 0;
};

// A dim the model fixed (`dim s = 4`): folded into every size, so it cannot
// change at run time; named for messages (recompile with einc --dim to range it).
struct FixedDimInfo {
  std::string name;
  int64_t value = 0;
  std::string declaredAt;  // "model.ein:2:5"
};

// A named tensor the model exposes: an input, an output or a parameter.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  // -1 for an axis whose size depends on the dims (see `dims`).
  std::vector<int64_t> shape;
  // Integer inputs that index a table take ids in [0, upperBound); 0 when unknown.
  int64_t upperBound = 0;
  // Per axis, the size as an expression over the model's dims ("t",
  // "t + 1", "b * h"), or "" where the axis has a constant size. Empty for a
  // model without dims (every axis constant).
  std::vector<std::string> dims;
  // An input read only at a sequence's first run (an encoder-decoder's
  // encoder input: its output is kept in the session's state, keep() in the
  // language). Later runs of the sequence skip what reads it.
  bool firstRunOnly = false;

  // Whether some axis depends on the dims (its size is -1 in `shape`).
  bool dynamic() const;
  // For a shape without -1: verified at load not to overflow. A dynamic
  // shape has -1 elements and 0 bytes.
  int64_t numElements() const;
  size_t byteSize() const;
};

// How the artifact holds a parameter: in a weight tensor of its own, possibly
// in another type (bf16 or i8 gemm weights), or `folded` into a tensor
// computed from it and other parameters (q, k and v weights stored as their
// concatenation). dtype and shape are that tensor's, and its bytes are
// [offset, offset + bytes) of the weight segment.
struct ParamStorage {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  bool folded = false;
  uint64_t offset = 0, bytes = 0;
};

// One of the program's tensors and where its bytes live (ein-inspect --json,
// the Model Explorer adapter's memory overlay).
struct TensorPlacement {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;      // at the dims' maxima
  std::vector<std::string> dims;   // per axis, its size over the dims ("t + 1"), "" where constant; empty without dims
  std::string storage;             // "arena", "weights", "input", "output" or "state"
  uint32_t index = 0;              // the input, output or state number
  uint64_t offset = 0, bytes = 0;  // into the arena, the weight segment or the state; bytes at the maxima
};

// A tensor a step reads or writes, by its role in the step's kernel ("a",
// "b", "c" of a gemm; "input 0" of an element-wise step).
struct StepOperand {
  std::string role;
  uint32_t tensor = 0;  // an index into Model::tensors()
  bool written = false;
};

// One step of the program, as ein-inspect shows it.
struct StepInfo {
  // "gemm", "elementwise", "softmax", "reduce", "gather", "copy", "attention",
  // "talking_heads_attention", "layernorm"
  std::string op;
  std::string location;  // source location, e.g. "model.ein:12:5"; may be empty
  // The kernel's key sizes: gemm m, n, k; elementwise inputs, program (its length);
  // attention queries, keys, head_dim, value_dim (heads for talking heads, causal_positions when causal); ...
  std::map<std::string, int64_t> sizes;
  // Its iteration spaces: gemm and attention batch; elementwise, softmax, reduce,
  // copy, layernorm shape; gather ids_shape.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Its options: gemm activation, bias, residual, alpha (when not 1); attention mask, scale, causal; layernorm
  // variant, epsilon and optional operands; reduce kind; copy dtype.
  std::map<std::string, std::string> attributes;
  // The tensors it reads and writes, in the kernel's order.
  std::vector<StepOperand> operands;
  // Every source location of the model's ops that this step computes
  // (attention fused from an einsum, a scale, a mask, a softmax and an einsum
  // lists each), `location` first; the namespace of the block it came from
  // ("blocks.3.attn"; "" at the top level); the compiler passes that fused
  // it, in order. Empty for artifacts of older einc.
  std::vector<std::string> sources;
  std::string scope;
  std::vector<std::string> fusedBy;
  // Runs only at a sequence's first run (an encoder whose output the state keeps).
  bool firstRun = false;
  // Computes each token's rows from that token's rows and what a first run
  // kept alone (a cross-attention): beams sharing those run it together.
  bool rowsOverKept = false;
};

// The arithmetic an artifact allows its target (einc --precision): tensors stay
// f32 in memory; with Bf16 or Fp16 the CUDA attention and gemm kernels feed the
// tensor cores in that type and accumulate in f32. Matches ein.schema.Precision.
// Int8 (CPU): gemm weights as int8 with a scale per output column, the
// gemms' inputs quantized per row at run time, int32 sums. Int4 (CPU): gemm
// weights as int4 with a scale per group of 32 along k and column, the
// inputs quantized per group of 32.
enum class Precision : uint8_t { Fp32 = 0, Bf16, Fp16, Int8, Int4 };
const char *precisionName(Precision precision);  // "fp32", "bf16", "fp16", "int8", "int4"

namespace detail {
struct Program;
class DynamicProgram;
}  // namespace detail

// How Model::load prepares a model.
struct LoadOptions {
  // Pack the GEMM weights for this CPU's kernels once, at load (a copy of
  // them: what fast runs want). Off for tools that only read the artifact
  // (ein-inspect): the model still runs, its GEMMs reading the weights as
  // stored.
  bool prepackWeights = true;
};

class Model {
 public:
  // Maps the artifact at `path` read-only and verifies it; the mapping lives
  // as long as the model (and every session made from it).
  static StatusOr<std::shared_ptr<const Model>> load(const std::string &path, const LoadOptions &options = {});
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

  // The ranged dims, in the artifact's order; empty for a model whose every
  // size is fixed.
  const std::vector<DimInfo> &dims() const;
  // The dims the model fixed, by name (none for artifacts of older einc).
  const std::vector<FixedDimInfo> &fixedDims() const;
  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  // The parameters at their declared types, and how each is stored.
  const std::vector<TensorInfo> &params() const;
  const std::vector<ParamStorage> &paramStorage() const;
  // Session state (a key/value cache), kept by each Session from run to run,
  // and the dim that is the session's position (an index into dims(); -1
  // for a model without state).
  const std::vector<TensorInfo> &states() const;
  int positionDim() const;
  // A decoder that serves many sequences in one run (ein::SequencePool):
  // the dim their tokens are laid end to end along (an index into dims()), or
  // -1, with why where the compiler said ("model.ein:12:5: ...").
  int sequenceTokensDim() const;
  const std::string &oneSequenceReason() const;
  // For a model with dims: the steps at the dims' maxima (empty when the
  // steps do not verify there, e.g. a check excludes the maxima).
  const std::vector<StepInfo> &steps() const;
  // Every tensor of the program (what StepOperand::tensor indexes), at the
  // dims' maxima like the steps.
  const std::vector<TensorPlacement> &tensors() const;
  // Planned for the dims' maxima: the arena serves every run.
  uint64_t arenaBytes() const;
  uint64_t weightsBytes() const;
  // The artifact's bytes, as loaded and verified (the file's mapping or the
  // model's copy): what to write to save the model again.
  std::span<const std::byte> artifactBytes() const;

  // Each output's shape for inputs of `inputShapes` (one per input, in the
  // order of inputs()) in a session at `position` (rows already in its
  // state; 0 for a model without), with the checks and messages a run
  // makes: the dims read from the inputs, their ranges, the inputs'
  // agreement and the model's run-time checks (a state's rows not exceeded
  // among them). For callers that allocate outputs, or ask whether a run
  // fits the cache, before it runs.
  StatusOr<std::vector<std::vector<int64_t>>> outputShapes(std::span<const std::vector<int64_t>> inputShapes,
                                                           int64_t position = 0) const;

  // Each input's shape when the dims take `dimValues` (one per dim, in the
  // order of dims(), each within its range): for callers that make inputs,
  // e.g. random ones at chosen dims. A static model takes no values.
  StatusOr<std::vector<std::vector<int64_t>>> inputShapes(std::span<const int64_t> dimValues) const;

  // The decoded program, for the runtime's executors. For a model with dims
  // it holds what every instantiation shares (no tensors or steps).
  const detail::Program &program() const { return *program_; }
  // What a model with dims instantiates its program from; null without dims.
  const detail::DynamicProgram *dynamicProgram() const { return dynamic_.get(); }

 private:
  Model(std::unique_ptr<const detail::Program> program, std::unique_ptr<const detail::DynamicProgram> dynamic);
  std::unique_ptr<const detail::Program> program_;
  std::unique_ptr<const detail::DynamicProgram> dynamic_;
};

}  // namespace ein
