// The verified, decoded form of an artifact: plain structs that executors run
// from, so running never touches the FlatBuffer. Every index, offset and
// stride in here has been checked against its bounds (see loader/).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "ein/model.hpp"
#include "ops/ops.hpp"
#include "util/aligned_buffer.hpp"
#include "util/dims.hpp"

namespace ein::detail {

enum class Storage : uint8_t { Arena, Weights, Input, Output, State };

struct Tensor {
  DType dtype = DType::F32;
  Dims shape;
  int64_t numElements = 0;
  uint64_t byteSize = 0;
  Storage storage = Storage::Arena;
  uint32_t index = 0;   // input, output or state number
  uint64_t offset = 0;  // bytes into the arena, the weight segment or the session's state
};

// Element (i0, i1, ...) is element offset + sum(ik * strides[k]) of `tensor`;
// the owning step gives the sizes.
struct View {
  uint32_t tensor = 0;
  int64_t offset = 0;
  Dims strides;
};

// The kernels' enums are the op table's (schemas/ops/op_table.def).
using ops::Activation;
using ops::LayerNormVariant;
using ops::MaskKind;
using ops::Opcode;
using ops::operandCount;
using ops::ReduceKind;

// c[b.., m, n] = activation(alpha * sum_k a[b.., m, k] * b[b.., k, n] + bias[b.., m, n])
//               + residual[b.., m, n]
struct Gemm {
  Dims batch;
  int64_t m = 0, n = 0, k = 0;
  View a, b, c;
  std::optional<View> bias;
  float alpha = 1.0f;
  Activation activation = Activation::None;
  std::optional<View> residual;
  std::optional<View> bScale;  // int8 b: its f32 scale per column, indexed [n]
  int32_t packedB = -1;  // Program::packed entry holding b pre-packed at load, or -1
};

struct Instruction {
  Opcode opcode = Opcode::Const;
  uint16_t a = 0, b = 0, c = 0;
  float imm = 0.0f;
};

// Registers 0..inputs-1 hold the inputs; instruction i writes register
// inputs + i; the last register is the result.
struct Elementwise {
  Dims shape;
  std::vector<View> inputs;
  View output;
  std::vector<Instruction> program;

  size_t registerCount() const { return inputs.size() + program.size(); }
};

// Over the last axis of `shape`.
struct Softmax {
  Dims shape;
  View x, y;
};

// The trailing `reducedRank` axes of `shape`; y is indexed by the kept ones.
struct Reduce {
  Dims shape;
  size_t reducedRank = 0;
  ReduceKind kind = ReduceKind::Sum;
  View x, y;
};

// y[i.., w] = table[ids[i..], w]
struct Gather {
  Dims idsShape;
  int64_t rows = 0, width = 0;
  View ids, table, y;
};

struct Copy {
  Dims shape;
  View x, y;
};

// Attention scores are masked before the softmax (MaskKind): s + mask (f32
// mask), mask ? s : fill (Keep) or mask ? fill : s (Drop), bool masks.
// out[b.., i, e] = sum_j softmax_j(mask(scale * q[b.., i, :] . k[b.., j, :])) v[b.., j, e];
// views q [b.., i, d], k [b.., j, d], v [b.., j, e], out [b.., i, e], mask [b.., i, j].
struct Attention {
  Dims batch;
  int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  View q, k, v, out;
  MaskKind maskKind = MaskKind::None;
  std::optional<View> mask;  // present exactly when maskKind != None
  float maskFill = 0.0f;
  // Causal (schema Attention.causal): query i sees key j <= i % causalPositions
  // + keys - causalPositions; causalPositions is 0 when not causal.
  int64_t causalPositions = 0;
  // How many keys (a prefix) query `i` sees: all, or i % P + keys - P + 1.
  int64_t visibleKeys(int64_t i) const {
    return causalPositions == 0 ? keys : i % causalPositions + keys - causalPositions + 1;
  }
  // A bf16 artifact's attention on the CPU: q . k and p . v in bf16 with f32
  // accumulation where the CPU has the bf16 gemm (set by the loader).
  bool bf16 = false;
  // k and v are bf16 tensors (a bf16 key/value cache, schema Tensor.dtype),
  // read as bf16 where they lie; else f32 (set by the loader).
  bool bf16KeyValues = false;
};

// Attention whose heads are mixed by [heads, heads] matrices before the mask
// (preMix, preBias) and after the softmax (postMix, postBias); each optional.
// Views carry the heads axis after the batch axes: q [b.., h, i, d] and so on.
struct TalkingHeadsAttention {
  Dims batch;
  int64_t heads = 0, queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  View q, k, v, out;
  std::optional<View> preMix, preBias, postMix, postBias;  // a bias only with its matrix
  MaskKind maskKind = MaskKind::None;
  std::optional<View> mask;  // indexed [b.., g, i, j]
  float maskFill = 0.0f;
};

// Over the last axis of `shape`: x' = x + residual (also written to `sum`),
// y = normalise(x') * gamma + beta. gamma and beta are indexed [n].
struct LayerNorm {
  Dims shape;
  View x, y;
  std::optional<View> residual, sum, gamma, beta;  // sum only with residual
  float epsilon = 0.0f;
  LayerNormVariant variant = LayerNormVariant::Variance;
};

using Kernel = std::variant<Gemm, Elementwise, Softmax, Reduce, Gather, Copy, Attention, TalkingHeadsAttention,
                            LayerNorm>;

// A weight matrix [k, n] re-laid out once at load for the gemm kernels:
// column panels of `nr` (the last zero-padded), each k x nr, row-major in f32;
// or, with bf16Pairs (bf16 weights for the bf16 gemm), each ceil(k / 2) x nr
// uint32 holding the bf16 pair (row 2q, row 2q + 1), an odd k's last row
// paired with zero.
struct PackedMatrix {
  AlignedBuffer data;
  int nr = 0;
  int64_t k = 0, n = 0;
  bool bf16Pairs = false;
  // int8 weights (s8Quads): panels of ceil(k / 4) quads x nr columns x 4
  // bytes (IsaKernels::s8GemmTile's layout), then every panel column's sum
  // of its weights (int32, nr per panel).
  bool s8Quads = false;
  const float *panel(int64_t column) const {
    return reinterpret_cast<const float *>(data.data()) + column / nr * k * nr;
  }
  const uint32_t *pairPanel(int64_t column) const {
    return reinterpret_cast<const uint32_t *>(data.data()) + column / nr * ((k + 1) / 2) * nr;
  }
  int64_t s8PanelBytes() const { return (k + 3) / 4 * 4 * nr; }
  const int8_t *s8Panel(int64_t column) const {
    return reinterpret_cast<const int8_t *>(data.data()) + column / nr * s8PanelBytes();
  }
  const int32_t *s8ColumnSums(int64_t column) const {
    const int64_t panels = (n + nr - 1) / nr;
    return reinterpret_cast<const int32_t *>(data.data() + panels * s8PanelBytes()) + column / nr * nr;
  }
};

struct Step {
  Kernel kernel;
  std::string label;  // "step 7 (gemm at model.ein:12:5)", for messages
};

struct Program {
  std::string name;  // the file, for messages
  // Keeps the artifact's bytes (a mapping or a copy) alive; `weights` points into them.
  std::shared_ptr<const void> bytes;
  // The whole artifact inside `bytes`, as verified (Model::artifactBytes).
  std::span<const std::byte> artifact;
  const std::byte *weights = nullptr;
  uint64_t weightsBytes = 0;
  uint64_t arenaBytes = 0;
  // Session state (schema Model.states): its bytes per session, the dim
  // whose value is the session's position (-1: none) and how far a run
  // moves the position (at this program's dims).
  uint64_t stateBytes = 0;
  int32_t positionDim = -1;
  int64_t positionAdvance = 0;

  uint32_t formatVersion = 0;
  Device target = Device::Cpu;
  Precision precision = Precision::Fp32;
  std::string producer, source;
  std::vector<FixedDimInfo> fixedDims;

  std::vector<Tensor> tensors;
  std::vector<TensorInfo> inputs, outputs, params, states;
  std::vector<ParamStorage> paramStorage;  // one per params entry
  std::vector<uint32_t> inputTensors, outputTensors, stateTensors;  // tensor of each input, output, state
  std::vector<Step> steps;
  std::vector<StepInfo> stepInfos;
  std::vector<PackedMatrix> packed;  // filled after verification, shared by all sessions
  // The dims' values this program was instantiated at (a model with dims);
  // empty for a static model's program. Its gemms' packedB index the
  // model's program's `packed`, which executors take from there.
  std::vector<int64_t> dimValues;
  // A dynamic model's own program: what its instantiations share (infos,
  // packed weights, the arena's size), with no tensors or steps to run.
  bool dynamicBase = false;
};

}  // namespace ein::detail
