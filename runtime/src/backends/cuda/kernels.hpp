// The CUDA kernels' launch functions, one per step kind. Each takes a plain
// description of the step (views already resolved to device addresses and
// merged to at most kMaxRank axes by the executor), enqueues its kernel(s) on
// `stream` and returns the launch error (cudaGetLastError), cudaSuccess when
// the launch was accepted. Nothing here allocates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "backends/cuda/device_types.hpp"

namespace ein::cuda {

// ---- element-wise (elementwise.cu) -------------------------------------------
// The register program, renumbered onto at most kMaxSlots live slots.
inline constexpr int kMaxSlots = 32;

struct Instruction {
  Op op = Op::Const;
  uint8_t a = 0, b = 0, c = 0;  // operand slots
  uint8_t out = 0;              // result slot
  float imm = 0.0f;
};

struct ElementwiseInput {
  DeviceView view;  // over ElementwiseLaunch::shape
  ElementType type = ElementType::F32;
  uint8_t slot = 0;
};

struct ElementwiseLaunch {
  Shape shape;
  int32_t inputCount = 0, instructionCount = 0;
  uint8_t resultSlot = 0;
  // Device memory: inputCount ElementwiseInput, then instructionCount Instruction.
  const void *table = nullptr;
  DeviceView output;
  ElementType outputType = ElementType::F32;  // the result is computed in f32, stored as this
};
size_t elementwiseTableBytes(int inputCount, int instructionCount);
cudaError_t launchElementwise(const ElementwiseLaunch &launch, cudaStream_t stream);

// ---- softmax and layernorm (normalization.cu) ---------------------------------
// Rows over `rows` (strides 0..rows.rank-1), the normalised axis `length`
// long with stride `step` in each view.
struct RowView {
  DeviceView view;
  int64_t step = 0;
};

struct SoftmaxLaunch {
  Shape rows;
  int64_t length = 0;
  RowView x, y;
};
cudaError_t launchSoftmax(const SoftmaxLaunch &launch, cudaStream_t stream);

struct VectorView {  // [n]
  const float *data = nullptr;
  int64_t offset = 0, stride = 0;
};

struct LayerNormLaunch {
  Shape rows;
  int64_t length = 0;
  RowView x, y, residual, sum;  // residual and sum: data null when absent
  VectorView gamma, beta;       // data null when absent
  float epsilon = 0.0f;
  LayerNormVariant variant = LayerNormVariant::Variance;
};
cudaError_t launchLayerNorm(const LayerNormLaunch &launch, cudaStream_t stream);

// ---- reduce, variance, gather, copy (reduce_gather_copy.cu) ---------------------
// The operands of a reduction: each kept element reduces its row of
// `reduced` elements of x.
struct ReducedRows {
  Shape kept, reduced;
  DeviceView x;         // strides over kept
  DeviceView xReduced;  // strides over reduced (offset unused)
  DeviceView y;         // over kept
};

struct ReduceLaunch {
  ReducedRows rows;
  ReduceKind kind = ReduceKind::Sum;
};
cudaError_t launchReduce(const ReduceLaunch &launch, cudaStream_t stream);

// var / std: y = sum (x - mean)^2 / max(0, n - correction), square-rooted when `root`.
struct VarianceLaunch {
  ReducedRows rows;
  int64_t correction = 0;
  bool root = false;
};
cudaError_t launchVariance(const VarianceLaunch &launch, cudaStream_t stream);

struct GatherLaunch {
  Shape ids;
  DeviceView idsView;  // over ids
  bool wideIds = false;  // i64, else i32
  DeviceView y;          // over ids, then stride[ids.rank] along the width
  VectorView table;      // row r, column w at offset + r * rowStride + w * stride
  int64_t tableRowStride = 0;
  int64_t rows = 0, width = 0;
  // The smallest row-major number of an id outside [0, rows) is atomicMin'd
  // here (the executor sets it to all ones before each run).
  unsigned long long *firstBadId = nullptr;
};
cudaError_t launchGather(const GatherLaunch &launch, cudaStream_t stream);

struct CopyLaunch {
  Shape shape;
  DeviceView x, y;
  int32_t elementSize = 4;  // 1, 2, 4 or 8 bytes
  bool roundToBf16 = false;  // x f32, y bf16 (rounded to nearest even); elementSize unused
};
cudaError_t launchCopy(const CopyLaunch &launch, cudaStream_t stream);

// ---- gemm (gemm_fallback.cu, gemv_bf16.cu; cuBLASLt in gemm_cublaslt.cpp) ----------
// Views carry the batch strides, then [m, k] / [k, n] / [m, n].
struct GemmLaunch {
  Shape batch;
  int64_t m = 0, n = 0, k = 0;
  DeviceView a, b, c, bias, residual;  // bias, residual: data null when absent
  // a and b are f32 or bf16 (a bf16 artifact's weights b, and the bf16 copy
  // of a that cuBLASLt multiplies them with); everything else is f32.
  ElementType aType = ElementType::F32, bType = ElementType::F32;
  float alpha = 1.0f;
  Activation activation = Activation::None;
};
// Any strides: c = act(alpha * a b + bias) + residual, computed in fp32 (a
// f32; b f32 or bf16).
cudaError_t launchGemmTiled(const GemmLaunch &launch, cudaStream_t stream);
// After a library gemm wrote c = alpha * a b: c = act(c + bias) + residual in place.
cudaError_t launchGemmEpilogue(const GemmLaunch &launch, cudaStream_t stream);

// The decode gemm over bf16 weights (gemv_bf16.cu): up to kGemvMaxRows rows
// of a (f32, unit stride along k) times one bf16 matrix b with unit stride
// along k (a PyTorch Linear's weight [n, k] as it is stored), each weight
// read once from memory. A warp per column of b; c = act(alpha * a b +
// bias) + residual in f32. Row r of a, c, bias and residual starts at its
// element offset in aRow[r], ...; their columns follow at the given strides.
inline constexpr int kGemvMaxRows = 8;
struct GemvLaunch {
  int32_t rows = 0;
  int64_t n = 0, k = 0;
  const float *a = nullptr;
  int64_t aRow[kGemvMaxRows] = {};
  const uint16_t *b = nullptr;  // bf16 bits; b(p, j) at bOffset + j * bColumn + p
  int64_t bOffset = 0, bColumn = 0;
  float *c = nullptr;
  int64_t cRow[kGemvMaxRows] = {}, cColumn = 0;
  const float *bias = nullptr, *residual = nullptr;  // null when absent
  int64_t biasRow[kGemvMaxRows] = {}, biasColumn = 0, residualRow[kGemvMaxRows] = {}, residualColumn = 0;
  float alpha = 1.0f;
  Activation activation = Activation::None;
  // 16-byte loads of 8 weights and 4 + 4 activations: b's and a's addresses
  // (offsets included), bColumn and k multiples of 8 elements (16 bytes) and
  // a's rows of 4 (16 bytes); else one element at a time.
  bool vectorLoads = false;
};
cudaError_t launchGemvBf16(const GemvLaunch &launch, cudaStream_t stream);
// The gemv launch for a gemm over bf16 weights with few rows: every (batch,
// row) of a one of at most kGemvMaxRows rows, b one matrix for the whole
// batch, a and b with unit strides along k. Null when `gemm` is not of that
// form (it then runs on cuBLASLt). Host arithmetic only: tested without a GPU.
std::optional<GemvLaunch> gemvLaunchFor(const GemmLaunch &gemm);

// ---- attention (attention_f32_flash.cu, attention_bf16_flash2.cu,
// talking_heads_f32.cu) ----
// Views carry the batch strides, then two: q [i, d], k [j, d], v [j, e],
// out [i, e], mask [i, j].
struct AttentionLaunch {
  Shape batch;
  int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  DeviceView q, k, v, out, mask;  // mask: data null without one
  MaskKind maskKind = MaskKind::None;
  float maskFill = 0.0f;
  int64_t causalPositions = 0;  // causal when > 0: query i sees key j <= i % P + keys - P
  float softcap = 0.0f;         // scores capped as softcap * tanh(s / softcap) when > 0
};
// fp32 everywhere; head_dim and value_dim up to kFlashF32MaxDim.
inline constexpr int64_t kFlashF32MaxDim = 256;
bool attentionF32FlashSupports(const AttentionLaunch &launch);
cudaError_t launchAttentionF32Flash(const AttentionLaunch &launch, cudaStream_t stream);
// Tensor cores (bf16 or fp16 operands, f32 accumulation and softmax) with
// scores, probabilities and output in registers (FlashAttention-2's layout;
// attention_bf16_flash2.cu): head_dim == value_dim in {64, 128}, 128 queries
// a block (8 warps of 16) and 64 keys
// a tile in two shared-memory stages (70 KB at head_dim 128: any sm_80+
// device). k and v are first converted to 16-bit copies in `scratch`, device
// memory of attentionFlash2ScratchBytes, which the launch may use until the
// stream reaches its next step.
inline constexpr int kFlash2Warps = 8, kFlash2Queries = 16 * kFlash2Warps, kFlash2Keys = 64;
bool attentionFlash2Supports(const AttentionLaunch &launch);
size_t attentionFlash2ScratchBytes(const AttentionLaunch &launch);
cudaError_t launchAttentionFlash2(const AttentionLaunch &launch, Precision precision, void *scratch,
                                  cudaStream_t stream);

// Views carry the batch strides, then three: [h, i, d] and so on.
struct MatrixView {  // [heads, heads]
  const float *data = nullptr;
  int64_t offset = 0, rowStride = 0, columnStride = 0;
};
struct TalkingHeadsLaunch {
  Shape batch;
  int64_t heads = 0, queries = 0, keys = 0, headDim = 0, valueDim = 0;
  float scale = 1.0f;
  DeviceView q, k, v, out, mask;
  MatrixView preMix, postMix;   // data null when absent
  VectorView preBias, postBias;  // data null when absent
  MaskKind maskKind = MaskKind::None;
  float maskFill = 0.0f;
};
// Shared memory it needs, in bytes; the executor refuses a step above the device's limit.
size_t talkingHeadsSharedBytes(const TalkingHeadsLaunch &launch);
cudaError_t launchTalkingHeads(const TalkingHeadsLaunch &launch, cudaStream_t stream);

}  // namespace ein::cuda
