// Builds .einb artifacts in tests with the FlatBuffers API, the way einc
// lays them out: a size-prefixed FlatBuffer, padding, then a 64-aligned
// weight segment. Every field can be set to a bad value on purpose.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ein/runtime.hpp"
#include "ein/schema/ein_artifact_generated.h"

namespace ein::testing {

namespace fb = ein::schema;

struct ViewSpec {
  uint32_t tensor = 0;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

// Row-major strides of `shape`.
std::vector<int64_t> denseStrides(const std::vector<int64_t> &shape);
// The whole of `tensor` (of shape `shape`), row-major.
ViewSpec dense(uint32_t tensor, const std::vector<int64_t> &shape);

struct GemmSpec {
  std::vector<int64_t> batch;
  int64_t m = 0, n = 0, k = 0;
  ViewSpec a, b, c;
  std::optional<ViewSpec> bias;
  float alpha = 1.0f;
  fb::Activation activation = fb::Activation::None;
  std::optional<ViewSpec> residual;
  std::optional<ViewSpec> bScale;  // int8 weights b: their scale per column
  std::optional<ViewSpec> bGroupScale;  // int4 weights b: their scale per group of 32 along k and column
};

struct AttentionSpec {
  std::vector<int64_t> batch;
  int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  ViewSpec q, k, v, out;
  fb::MaskKind maskKind = fb::MaskKind::None;
  std::optional<ViewSpec> mask;
  float maskFill = -INFINITY;
  int64_t causalPositions = 0;  // 0: not causal
  float softcap = 0.0f;         // 0: scores not capped
};

struct TalkingHeadsSpec {
  std::vector<int64_t> batch;
  int64_t heads = 0, queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  ViewSpec q, k, v, out;
  std::optional<ViewSpec> preMix, preBias, postMix, postBias;
  fb::MaskKind maskKind = fb::MaskKind::None;
  std::optional<ViewSpec> mask;
  float maskFill = -INFINITY;
};

struct LayerNormSpec {
  std::vector<int64_t> shape;
  ViewSpec x;
  std::optional<ViewSpec> residual, sum, gamma, beta;
  ViewSpec y;
  float epsilon = 1e-5f;
  fb::LayerNormVariant variant = fb::LayerNormVariant::Variance;
};

struct ElementwiseSpec {
  std::vector<int64_t> shape;
  std::vector<ViewSpec> inputs;
  ViewSpec output;
  std::vector<fb::Instruction> program;
};

struct SoftmaxSpec {
  std::vector<int64_t> shape;
  ViewSpec x, y;
};

struct ReduceSpec {
  std::vector<int64_t> shape;
  uint32_t reducedRank = 0;
  fb::ReduceKind kind = fb::ReduceKind::Sum;
  ViewSpec x, y;
};

struct VarianceSpec {
  std::vector<int64_t> shape;
  uint32_t reducedRank = 0;
  int64_t correction = 0;
  bool root = false;
  ViewSpec x, y;
};

struct GatherSpec {
  std::vector<int64_t> idsShape;
  int64_t rows = 0, width = 0;
  ViewSpec ids, table, y;
};

struct CopySpec {
  std::vector<int64_t> shape;
  ViewSpec x, y;
};

struct TensorSpec {
  fb::DType dtype = fb::DType::F32;
  std::vector<int64_t> shape;
  fb::Storage storage = fb::Storage::Arena;
  uint32_t index = 0;
  uint64_t offset = 0;
};

// A size expression for a dynamic artifact, written with operators and
// stored as the schema's postfix program: dimSize(0) * 4 + 1.
struct Size {
  std::vector<fb::SizeOp> ops;
  // The value at `dims` (the builder's own evaluator, for planning and for
  // building the static twin of a dynamic model).
  int64_t at(const std::vector<int64_t> &dims) const;
};
Size constantSize(int64_t value);
Size dimSize(uint32_t dim);
Size operator+(Size a, const Size &b);
Size operator-(Size a, const Size &b);
Size operator*(Size a, const Size &b);
Size floorDiv(Size a, const Size &b);
Size operator+(Size a, int64_t b);
Size operator-(Size a, int64_t b);
Size operator*(Size a, int64_t b);
Size operator*(int64_t a, const Size &b);
Size operator-(int64_t a, const Size &b);
Size floorDiv(Size a, int64_t b);

class ArtifactBuilder {
 public:
  // Each returns the new tensor's number. Inputs and outputs are bound in
  // the order they are added; arena tensors get 64-aligned offsets.
  uint32_t input(const std::string &name, fb::DType dtype, std::vector<int64_t> shape, int64_t upperBound = 0);
  uint32_t output(const std::string &name, fb::DType dtype, std::vector<int64_t> shape);
  uint32_t arena(fb::DType dtype, std::vector<int64_t> shape);
  // A session state tensor, placed after the others (stateBytes grows).
  uint32_t state(const std::string &name, fb::DType dtype, std::vector<int64_t> shape);
  // A weight tensor holding `bytes`; with a name it is also a parameter.
  uint32_t weights(fb::DType dtype, std::vector<int64_t> shape, const std::vector<uint8_t> &bytes,
                   const std::string &paramName = "");
  uint32_t weightsF32(std::vector<int64_t> shape, const std::vector<float> &values, const std::string &paramName = "");
  // `values` rounded to bf16 (nearest even), as a bf16 artifact stores them.
  uint32_t weightsBf16(std::vector<int64_t> shape, const std::vector<float> &values, const std::string &paramName = "");
  // A tensor exactly as given, bound to nothing.
  uint32_t tensor(const TensorSpec &spec);

  void gemm(const GemmSpec &spec, const std::string &location = "test.ein:1:1");
  void elementwise(const ElementwiseSpec &spec, const std::string &location = "test.ein:2:1");
  void softmax(const SoftmaxSpec &spec, const std::string &location = "test.ein:3:1");
  void reduce(const ReduceSpec &spec, const std::string &location = "test.ein:4:1");
  void variance(const VarianceSpec &spec, const std::string &location = "test.ein:4:1");
  void gather(const GatherSpec &spec, const std::string &location = "test.ein:5:1");
  void copy(const CopySpec &spec, const std::string &location = "test.ein:6:1");
  void attention(const AttentionSpec &spec, const std::string &location = "test.ein:7:1");
  void talkingHeads(const TalkingHeadsSpec &spec, const std::string &location = "test.ein:8:1");
  void layerNorm(const LayerNormSpec &spec, const std::string &location = "test.ein:9:1");
  // A step built by hand, e.g. with an unknown kernel type.
  using StepFn = std::function<flatbuffers::Offset<fb::Step>(flatbuffers::FlatBufferBuilder &)>;
  void step(StepFn build);

  // Fields a test may corrupt. By default they are computed consistently.
  uint32_t formatVersion = static_cast<uint32_t>(fb::FormatVersion::Current);
  fb::Target target = fb::Target::Cpu;
  fb::Precision precision = fb::Precision::Fp32;  // the CUDA gemm/attention arithmetic
  std::optional<uint64_t> arenaBytes, weightsOffset, weightsBytes;
  uint64_t stateBytes = 0;  // the session state a model claims
  // The dim (its index) that is the session's position (-1: none), and how
  // far a run moves it (a (size) field).
  int32_t positionDim = -1;
  int64_t positionAdvance = 0;
  std::vector<TensorSpec> tensors;
  struct BindingSpec {
    std::string name;
    uint32_t tensor;
    int64_t upperBound;
    bool firstRun = false;  // read at a sequence's first run only
  };
  // The steps (numbered as added) that run at a sequence's first run only,
  // once per sequence (Step.per_sequence) and over kept states (Step.rows_over_kept).
  std::set<size_t> firstRunSteps, perSequenceSteps, rowsOverKeptSteps;
  std::vector<BindingSpec> inputs, outputs, states;
  struct ParamSpec {
    std::string name;
    uint32_t tensor;
    // The declared type; none: the artifact leaves it out (as before v2.1).
    std::optional<std::vector<int64_t>> shape = std::nullopt;
    fb::DType dtype = fb::DType::F32;
    bool folded = false;
  };
  std::vector<ParamSpec> params;

  std::vector<uint8_t> build() const;

  // Ranged dims, size expressions and run-time checks (empty: a static
  // artifact). A field written as sizeField(e) refers to expression e.
  struct DimSpec {
    std::string name;
    int64_t min = 0, max = 0;
  };
  std::vector<DimSpec> dims;
  std::vector<std::vector<fb::SizeOp>> sizes;
  struct CheckSpec {
    fb::CheckKind kind = fb::CheckKind::Equal;
    int64_t lhs = 0, rhs = 0;  // (size) fields
    std::string location, message;
  };
  std::vector<CheckSpec> checks;
  // Adds a dim and returns it as an expression.
  Size dim(const std::string &name, int64_t min, int64_t max);
  // The (size) field referring to `size`: -1 - its expression's number (an
  // identical expression is stored once).
  int64_t sizeField(const Size &size);
  // An arena tensor whose shape fields may refer to expressions: its offset
  // is planned for `plannedShape` (the shape at the dims' maxima).
  uint32_t arena(fb::DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &plannedShape);

 private:
  std::vector<uint8_t> header(uint64_t weightsOffset) const;

  std::vector<StepFn> steps_;
  // Step `index`'s table: `kind` of `kernel` at `location`, first-run as firstRunSteps says.
  flatbuffers::Offset<fb::Step> stepOf(flatbuffers::FlatBufferBuilder &b, fb::Kernel kind,
                                       flatbuffers::Offset<void> kernel, const std::string &location,
                                       size_t index) const;
  std::vector<uint8_t> weights_;
  uint64_t arenaUsed_ = 0;
};

fb::Instruction instruction(fb::Opcode opcode, uint16_t a = 0, uint16_t b = 0, uint16_t c = 0, float imm = 0.0f);

template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T> &values) {
  const auto *begin = reinterpret_cast<const uint8_t *>(values.data());
  return std::vector<uint8_t>(begin, begin + values.size() * sizeof(T));
}
template <typename T>
std::vector<T> valuesOf(const ein::TensorRef &tensor) {
  std::vector<T> values(tensor.bytes / sizeof(T));
  if (tensor.bytes) std::memcpy(values.data(), tensor.data, tensor.bytes);
  return values;
}

// Loads `artifact`, sets `inputs` (raw bytes by name, dtype and shape from the
// model), runs once and returns the session.
StatusOr<std::unique_ptr<Session>> loadAndRun(const std::vector<uint8_t> &artifact,
                                              const std::map<std::string, std::vector<uint8_t>> &inputs);

// A model that exercises every kernel: gather -> gemm (bias, gelu) ->
// elementwise (with a bool mask) -> softmax -> reduce, plus a copy.
// Inputs: ids i32[2, 3] (upper bound 5), mask bool[2, 3, 4]; outputs: probs
// f32[2, 3, 4], total f32[2], probsT f32[4, 2, 3].
std::vector<uint8_t> everyKernelArtifact();

// A model with attention (additive mask), talking-heads attention (both
// mixes, bool mask), layernorm (residual, sum) and a gemm with a residual.
// Inputs: x f32[2, 5, 8], keep bool[2, 5, 5]; outputs: y f32[2, 5, 8],
// th f32[2, 2, 5, 4], h f32[2, 5, 8].
std::vector<uint8_t> fusedKernelArtifact();

// y = x * 2 for x f32[2, 3]; flags bool[4] is passed through as flags_out.
std::vector<uint8_t> doublingArtifact(fb::Target target = fb::Target::Cpu);
// An int8 CPU artifact: y[2, 3] = x[2, 8] . w with int8 weights w [3, 8] read
// transposed, a scale per column and an f32 bias (einc --precision int8's
// shape of a linear).
std::vector<uint8_t> int8LinearArtifact();
// y = x . w^T with w [3, 40] group-scaled: int4 (bits 4) or int8 (bits 8)
// weights with an f16 scale per group of 32 along k (Gemm.b_group_scale).
std::vector<uint8_t> groupScaledLinearArtifact(int bits);

// Builds one model either static (every size a constant: the dims' values)
// or dynamic (the dims ranged, sizes as expressions), from the same code, so
// tests can compare a dynamic artifact at some dims with its static twin.
class ShapeBuilder {
 public:
  // Dynamic: the dims range over `ranges`.
  ShapeBuilder(ArtifactBuilder &builder, const std::vector<ArtifactBuilder::DimSpec> &ranges);
  // Static: the dims are `values`.
  ShapeBuilder(ArtifactBuilder &builder, const std::vector<ArtifactBuilder::DimSpec> &ranges,
               const std::vector<int64_t> &values);

  const Size &dim(size_t index) const { return dims_[index]; }
  // A (size) field: a constant when static or when no dim is involved.
  int64_t field(const Size &size);
  std::vector<int64_t> fields(const std::vector<Size> &sizes);
  uint32_t input(const std::string &name, fb::DType dtype, const std::vector<Size> &shape, int64_t upperBound = 0);
  uint32_t output(const std::string &name, fb::DType dtype, const std::vector<Size> &shape);
  uint32_t arena(fb::DType dtype, const std::vector<Size> &shape);
  ViewSpec dense(uint32_t tensor, const std::vector<Size> &shape);

 private:
  ArtifactBuilder &builder_;
  std::vector<Size> dims_;
  std::vector<int64_t> planned_;  // the dims' values (static) or maxima (dynamic)
  bool dynamic_;
};

// A model of every basic kernel over dims b (batch) and t (tokens):
// gather -> gemm (bias, gelu; packed weights) -> layernorm -> attention with
// a keep mask broadcast from keep[b, t] (strides that depend on t) ->
// elementwise residual -> softmax -> reduce (mean over t) and a transposing
// copy. Inputs ids i32[b, t] (upper bound 5), keep bool[b, t]; outputs probs
// f32[b, t, 4], pooled f32[b, 4], probsT f32[4, b, t]. `values` empty:
// dynamic over b = 1..3, t = 1..6; else static at {b, t}.
std::vector<uint8_t> dynamicEveryKernelArtifact(const std::vector<int64_t> &values = {});

// A small dynamic model over t = min..max: y = x * 2 + z for x, z f32[t, 3];
// head f32[t] = pad[:t] for pad f32[t + 1], with the check t + 1 <= 6
// ("test.ein:3:5: pad[:t + 1] needs t + 1 <= 6"). `edit` may damage the
// artifact before it is built.
std::vector<uint8_t> dynamicDoublingArtifact(int64_t min = 1, int64_t max = 8,
                                             const std::function<void(ArtifactBuilder &)> &edit = {});

// `count` uniform floats in [low, high), the same for the same seed.
std::vector<float> randomFloats(size_t count, uint32_t seed, float low = -2.0f, float high = 2.0f);

// Equal within `tolerance` (relative to max(1, |want|)), both NaN, or the
// same infinity; reports at most ten mismatches.
void expectClose(const std::vector<float> &got, const std::vector<double> &want, double tolerance,
                 const std::string &what);

// A fresh empty directory under the test temp dir.
std::string temporaryDirectory(const std::string &name);
void writeFile(const std::string &path, const std::vector<uint8_t> &bytes);

}  // namespace ein::testing
