// The verified, decoded form of an artifact: plain structs that executors run
// from, so running never touches the FlatBuffer. Every index, offset and
// stride in here has been checked against its bounds (see loader/).
#pragma once

#include <cstdint>
#include <limits>
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
  // A row per token (schema Tensor.per_token; never a weight or a state):
  // when many sequences run at once, each sequence's rows start at its first token.
  bool perToken = false;
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

struct Instruction {
  Opcode opcode = Opcode::Const;
  uint16_t a = 0, b = 0, c = 0;
  float imm = 0.0f;
};

// The decoded fields of every kernel step (GemmFields, ...), generated from
// the kern ops' definitions (ir/kern/kern_ops.td; the schema's
// kernel_steps.fbs says what each step computes), with the step's struct
// where it adds nothing; below, the steps that add members of their own
// (hasRuntimeMembers).
#define GET_STEP_FIELDS
#include "program/step_fields.inc"

struct Gemm : GemmFields {
  int32_t packedB = -1;  // Program::packed entry holding b pre-packed at load, or -1
  // b's bits where bGroupScale holds its scales per group: 4 (i4) or 8 (i8)
  // (set by the loader).
  int8_t groupBits = 0;
};

// Registers 0..inputs-1 hold the inputs; instruction i writes register
// inputs + i; the last register is the result.
struct Elementwise : ElementwiseFields {
  size_t registerCount() const { return inputs.size() + program.size(); }
};


// Where row r of a view walking a paged state (program/paged_state.hpp)
// lies: in block blocks[(firstRow + r) / blockRows], (firstRow + r) %
// blockRows rows into it; blocks lie blockElements apart from the state's
// base. Without blocks, r rows from the view's offset.
struct RowPages {
  const uint32_t *blocks = nullptr;  // the sequence's block table; null: not paged
  int64_t blockRows = 0;
  int64_t blockElements = 0;
  int64_t firstRow = 0;
  // The element offset of row `row`, rows `stride` apart within a block.
  int64_t offsetOf(int64_t row, int64_t stride) const {
    if (!blocks) return row * stride;
    const int64_t r = firstRow + row;
    return static_cast<int64_t>(blocks[r / blockRows]) * blockElements + r % blockRows * stride;
  }
  // The rows from `row` on that lie one after another in its block.
  int64_t rowsInBlockFrom(int64_t row) const {
    return blocks ? blockRows - (firstRow + row) % blockRows : std::numeric_limits<int64_t>::max();
  }
};

struct Attention : AttentionFields {
  // How many keys (a prefix) query `i` sees: all, or i % P + keys - P + 1
  // for causal attention over P = causalPositions positions (the loader
  // keeps causalPositions 0 when the step is not causal).
  int64_t visibleKeys(int64_t i) const {
    return causalPositions == 0 ? keys : i % causalPositions + keys - causalPositions + 1;
  }
  // A bf16 (int8, int4) artifact's attention on the CPU, but for one over a
  // session's state: q . k and p . v in bf16 with f32 accumulation where the
  // CPU has the bf16 gemm (set by the loader).
  bool bf16 = false;
  // k and v are bf16 tensors (a bf16 key/value cache, schema Tensor.dtype),
  // read as bf16 where they lie; else f32 (set by the loader).
  bool bf16KeyValues = false;
  // k and v in a paged cache (set by the executor for one sequence's run):
  // their views' offsets and strides are then those within a block.
  RowPages kPages, vPages;
};


using Kernel = std::variant<
#define GET_STEP_LIST
#include "program/step_fields.inc"
    >;

// A weight matrix [k, n] re-laid out once at load for the gemm kernels:
// column panels of `nr` (the last zero-padded), each k x nr, row-major in f32;
// or, with bf16Pairs (bf16 weights: the bf16 gemm's operand, or widened as
// they are read where the CPU has no bf16 gemm), each ceil(k / 2) x nr
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
  // Group-scaled weights (groupBits 4: int4; 8: int8 with a scale per
  // group): panels of nr columns (the table's groupedNr), each ceil(k / 32)
  // groups of 16 or 32 bytes of weights a column and nr f16 scales
  // (isa/grouped_gemm.hpp).
  int groupBits = 0;
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
  int64_t groupPanelBytes() const { return (k + 31) / 32 * (32 * nr * groupBits / 8 + 2 * nr); }
  const uint8_t *groupPanel(int64_t column) const {
    return reinterpret_cast<const uint8_t *>(data.data()) + column / nr * groupPanelBytes();
  }
  const int32_t *s8ColumnSums(int64_t column) const {
    const int64_t panels = (n + nr - 1) / nr;
    return reinterpret_cast<const int32_t *>(data.data() + panels * s8PanelBytes()) + column / nr * nr;
  }
};

struct Step {
  Kernel kernel;
  std::string label;  // "step 7 (gemm at model.ein:12:5)", for messages
  // When many sequences run at once: once per sequence, over its own tokens,
  // position and state (else once over every sequence's tokens).
  bool perSequence = false;
  // Only at a sequence's first run, position 0 (schema Step.first_run):
  // later runs skip it.
  bool firstRun = false;
  // A per-sequence step computing each token's rows from that token's rows
  // and the kept states alone, at any position (schema Step.rows_over_kept):
  // once for the sequences sharing a kept slot, side by side in a run
  // (SequenceSlice::keptGroup), from their group's program.
  bool rowsOverKept = false;
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
  // A decoder that serves many sequences in one run: the dim their tokens
  // are laid end to end along (-1: one sequence per session; oneSequence
  // says why, where the compiler found a reason).
  int32_t sequenceTokensDim = -1;
  std::string oneSequence;

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
  std::vector<TensorPlacement> tensorPlacements;  // one per tensor, as Model::tensors() shows them
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
