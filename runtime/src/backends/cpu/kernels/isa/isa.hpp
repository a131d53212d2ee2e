// The CPU kernels that depend on the instruction set: one table per ISA
// (AVX-512, AVX2 + FMA, portable C++), all built from the same templates
// (isa_kernels.hpp: one header per micro-kernel family) and chosen at run time by the features of the CPU, so an
// artifact compiled anywhere runs on any x86-64 machine.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "program/program.hpp"

namespace ein::detail::cpu {

// A block of a gemm's output: out(i, j) = act(alpha * acc(i, j) + bias(i, j))
// + residual(i, j) for i < rows, j < n, where x(i, j) = x[i * xRowStride +
// j * xStride]. acc's rows are contiguous and may be overwritten. One call
// takes a whole block, so a tile's epilogue costs no call per row.
struct GemmEpilogue {
  float *acc;
  int64_t accRowStride;
  int64_t rows, n;
  float alpha;
  const float *bias;  // null: none
  int64_t biasRowStride, biasStride;
  Activation activation;
  const float *residual;  // null: none
  int64_t residualRowStride, residualStride;
  float *out;
  int64_t outRowStride, outStride;
};

// Gemms of at most this many rows (batch-1 decode, a few draft tokens) take
// the gemv path (IsaKernels::gemvPanel and its bf16/int8 forms) where the
// weights were packed at load: memory-bound, so it reads each panel once
// without padding a to the register tile's rows.
inline constexpr int64_t kGemvMaxRows = 4;
// A gemv of bf16 pairs, int8 or int4 weights pulls the panel it streams a
// line at a time ahead of its reads (the f32 gemv does not: gemvPanelRows),
// by its registers' width: 256-bit gemvs (the AVX2 tables, Zen 3's) 1 KiB
// ahead into L1; 512-bit ones 4 KiB ahead into L2 (prefetcht2), which
// streamed 1.17-1.25x the bytes a second on Zen 4 (bf16 and int8, 768 x
// 32000 cold, 2 threads) and 1.2x on the Xeon with AMX (int4);
// docs/benchmarks.md. Reach multiplies the distance (the grouped tiles':
// grouped_gemm.hpp).
template <int VectorBits, int Reach = 1>
struct GemvPrefetch {
  static constexpr int64_t kBytes = (VectorBits == 512 ? 4096 : 1024) * Reach;
  static constexpr int kLocality = VectorBits == 512 ? 1 : 3;  // __builtin_prefetch's: 1 is prefetcht2
  // Pulls the line kBytes past `reading`.
  [[gnu::always_inline]] static void line(const void *reading) {
    __builtin_prefetch(static_cast<const char *>(reading) + kBytes, 0, kLocality);
  }
};

// Pulls [from, from + bytes) into L2 a line at a time, spread evenly over a
// loop of `steps` steps (step() once a step): a gemm tile working on one
// weight panel brings in the next from DRAM meanwhile, so the stream and the
// arithmetic overlap. from may be null.
class SpreadPrefetch {
 public:
  SpreadPrefetch(const char *from, int64_t bytes, int64_t steps)
      : next_(from), lines_(from ? bytes / 64 : 0), steps_(steps > 0 ? steps : 1) {}
  [[gnu::always_inline]] void step() {
    for (credit_ += lines_; credit_ >= steps_; credit_ -= steps_, next_ += 64) __builtin_prefetch(next_, 0, 2);
  }

 private:
  const char *next_;
  int64_t lines_, steps_, credit_ = 0;
};

// body(std::integral_constant<int, rows>{}) for 1 <= rows <= MaxRows: a
// kernel's row count as a compile-time constant (a short row tile's, the
// gemv's).
template <int MaxRows, typename Body>
[[gnu::always_inline]] inline void withRows(int rows, Body &&body) {
  if constexpr (MaxRows > 1)
    if (rows < MaxRows) return withRows<MaxRows - 1>(rows, body);
  body(std::integral_constant<int, MaxRows>{});
}
template <typename Body>
[[gnu::always_inline]] inline void withGemvRows(int rows, Body &&body) {
  withRows<kGemvMaxRows>(rows, body);
}

// Elements per register in the element-wise interpreter (a multiple of every
// ISA's vector width).
inline constexpr size_t kElementwiseBlock = 256;

// out[e] = instruction `in` on lanes e < count of registers a, b, c, by the
// opcode's scalar definition (ops/scalar_functions.hpp): the reference
// kernel's step, and the vector kernels' path for opcodes they have no vector
// form of. Out of line in elementwise_f32_fast.cpp, built for the baseline
// ISA, so that no per-ISA file compiles a copy the linker could pick for
// every caller.
void evaluateLanesF32(const Instruction &in, const float *a, const float *b, const float *c, float *out,
                      int64_t count);

// Vector work a matrix-unit tile does between its steps
// (IsaKernels::bf16GemmTallTileFromRow): run(context, part) for part <
// parts. The tile registers and the vector units work side by side, so the
// previous tile's epilogue (bias, GELU, residual, the stores into c) run
// there is partly hidden behind the tile's steps.
struct TileSideWork {
  void (*run)(void *context, int64_t part) = nullptr;
  void *context = nullptr;
  int64_t parts = 0;
};

struct IsaKernels {
  const char *name;  // "amx", "avx512bf16", "avx512vnni", "avx512", "avx2vnni", "avx2", "portable"
  int gemmMr, gemmNr;  // the register tile of gemmTile
  // c[r * ldc + j] (+)= sum_p a[p * mr + r] * b[p * nr + j] over the full
  // mr x nr tile: a and b are packed panels of kc steps; accumulate adds to c.
  // Meanwhile the bytes [prefetch, prefetch + prefetchBytes) are pulled into
  // L2, a line every few steps (a gemm's next weight panel, which comes from
  // DRAM once per run); prefetch may be null.
  void (*gemmTile)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool accumulate,
                   const char *prefetch, int64_t prefetchBytes);
  // As gemmTile, but a is mr plain rows: a[r * lda + p] (attention's
  // scores and queries, used in place).
  void (*gemmTileRows)(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc, bool accumulate,
                       const char *prefetch, int64_t prefetchBytes);
  // As gemmTileRows, but only the panel's first vectorFloats columns, with b's
  // rows ldb floats apart: the narrow last columns of a panel (attention's
  // last keys) without computing the panel's zero padding.
  void (*gemmTileRowsVector)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                             int64_t ldc, bool accumulate);
  // As gemmTileRows over the tile's first `rows` rows only (1 <= rows <=
  // gemmMr): a gemm's short row tiles (RowTiles) without computing padded
  // rows.
  void (*gemmTileRowsUpTo)(int rows, int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                           bool accumulate, const char *prefetch, int64_t prefetchBytes);
  // The gemv (a gemm of at most kGemvMaxRows rows: decode) over one packed
  // weight panel: c[r * ldc + j] = sum_p a[r * lda + p] * b[p * gemmNr + j]
  // for r < rows, j < gemmNr, p < k. The panel is read once, front to back,
  // with every row's sums in registers (no padded rows).
  void (*gemvPanel)(int rows, int64_t k, const float *a, int64_t lda, const float *b, float *c, int64_t ldc);
  int vectorFloats;  // floats per SIMD register
  void (*gemmEpilogue)(const GemmEpilogue &block);

  // Contiguous rows (n >= 0), in f32 with several vector accumulators.
  // sum, max, min or product of x[0..n); max and min propagate NaN, and
  // max of nothing is -inf (min +inf). Mean is left to the caller.
  float (*reduceRow)(const float *x, int64_t n, ReduceKind kind);
  // x[i] = exp(x[i] - shift); returns the sum of the new x.
  float (*expShiftSum)(float *x, int64_t n, float shift);
  void (*scaleInPlace)(float *x, int64_t n, float factor);
  // y[i] += a * x[i] (attention's additive mask).
  void (*addScaled)(float *y, const float *x, int64_t n, float a);
  // row[j] = fill where flags[j] (a bool tensor's bytes) is clear, with
  // keepWhereSet, or set, without: attention's boolean masks.
  void (*maskRow)(float *row, const uint8_t *flags, int64_t n, bool keepWhereSet, float fill);
  // y[i] = bias + sum_h w[h * wStride] * x[h * xStride + i] over `rows` rows
  // of x, for i < n (talking heads' mixing of every head into one).
  void (*weightedSum)(float *y, const float *x, int64_t xStride, int64_t rows, const float *w, int64_t wStride,
                      float bias, int64_t n);
  // s[t * lds + j] = sum_d a[t * lda + d] * b[j * ldb + d] for t < rows,
  // j < n, d < depth: a few rows against many, both stored row by row
  // (decode attention's queries against the keys where they lie).
  void (*rowDots)(const float *a, int64_t lda, int64_t rows, const float *b, int64_t ldb, int64_t n, int64_t depth,
                  float *s, int64_t lds);
  // o[t * ldo + e] += sum_j p[t * ldp + j] * b[j * ldb + e] for t < rows,
  // j < n, e < width (decode attention's probabilities times the values
  // where they lie).
  void (*addRowProducts)(const float *p, int64_t ldp, int64_t rows, const float *b, int64_t ldb, int64_t n,
                         int64_t width, float *o, int64_t ldo);
  // o[e] = sum_p column[p] * a[p * lda + e] for e < width, p < depth: a
  // matrix-vector product whose matrix is stored column by column (a
  // depthwise convolution's window row against its weights, in the gemm of
  // one column), the outputs in vector lanes.
  void (*columnSums)(const float *a, int64_t lda, int64_t depth, const float *column, int64_t width, float *o);
  // rowDots and addRowProducts with b in bf16 (a bf16 key/value cache, read
  // where it lies): each element widened to f32 in registers, the arithmetic
  // as above. Widening rather than vdpbf16ps keeps the queries and
  // probabilities f32; decode reads each key once, so the loads bound it.
  void (*rowDotsBf16)(const float *a, int64_t lda, int64_t rows, const uint16_t *b, int64_t ldb, int64_t n,
                      int64_t depth, float *s, int64_t lds);
  void (*addRowProductsBf16)(const float *p, int64_t ldp, int64_t rows, const uint16_t *b, int64_t ldb, int64_t n,
                             int64_t width, float *o, int64_t ldo);
  // sum (x[i] - mean)^2: the second pass of a variance.
  float (*squaredDeviation)(const float *x, int64_t n, float mean);
  // y[i] = (x[i] - mean) * scale * gamma[i] + beta[i]; gamma, beta may be null.
  void (*normalizeRow)(const float *x, int64_t n, float mean, float scale, const float *gamma, const float *beta,
                       float *y);
  // Runs an element-wise register program over `count` <= kElementwiseBlock
  // lanes (see Elementwise): register r < inputCount is inputs[r] (an input's
  // lanes where they lie, or a copy of them), instruction i's result is
  // registers[(inputCount + i) * kElementwiseBlock ...], the last one's at
  // `result` instead. Whole vectors are read and written, so where `count`
  // is not a multiple of the vector every operand and `result` must have
  // room up to the next one (a kElementwiseBlock register does).
  void (*elementwiseBlock)(const Instruction *program, size_t size, const float *const *inputs, size_t inputCount,
                           float *registers, float *result, int64_t count);
  // x[i] = exp(x[i]) and x[i] = activation(x[i]): the vector math, exposed for tests.
  void (*expInPlace)(float *x, int64_t n);
  void (*activateInPlace)(float *x, int64_t n, Activation activation);
  // x[i] = cap * tanh(x[i] / cap): attention's score softcap (Gemma 2).
  void (*softcapInPlace)(float *x, int64_t n, float cap);

  // bf16 arithmetic with f32 accumulation: only the avx512bf16 and amx tables
  // have it (null elsewhere, where bf16 weights are widened to f32 while packing).
  // c[r * ldc + j] (+)= sum_q a[r * lda + q] . b[q * nr + j] over the mr x nr
  // tile, where each uint32 holds a pair of bf16 (element 2q in the low half,
  // 2q + 1 in the high half) and . is the pair's dot product (vdpbf16ps: the
  // bf16 products are exact in f32, then added in f32).
  void (*bf16GemmTile)(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                       bool accumulate, const char *prefetch, int64_t prefetchBytes) = nullptr;
  // dst[r * ldd + q] = the bf16 pair (a[r * sM + 2q * sK], a[r * sM + (2q + 1) * sK]),
  // rounded to nearest even, for r < mr and q < ceil(kc / 2): rows past
  // `rows` and the odd last column's partner are zero. Rows of pairs, so
  // contiguous rows convert and store a vector at a time.
  void (*bf16PackRows)(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, uint32_t *dst,
                       int64_t ldd) = nullptr;
  // A taller tile for the gemm's bf16 path, as bf16GemmTile but over
  // bf16GemmTallMr x gemmNr (amx: 32 x 64 from tile registers); null where
  // the gemm uses bf16GemmTile. Attention keeps bf16GemmTile (its blocks
  // are gemmMr rows).
  // Where bf16GemmTile is null, bf16 weights are still packed as pairs
  // (decode streams half the bytes) and the f32 gemm runs on them: the gemv
  // widens each pair exactly in registers (as gemvPanel, b as in
  // bf16GemmTile), the gemm widens a panel's rows [0, kc) into an f32 panel
  // of gemmNr floats a row, once for all the row tiles that use it.
  void (*bf16WidenGemvPanel)(int rows, int64_t k, const float *a, int64_t lda, const uint32_t *b, float *c,
                             int64_t ldc) = nullptr;
  void (*bf16WidenPairPanel)(int64_t kc, const uint32_t *pairs, float *panel) = nullptr;
  // The gemv over a bf16 pair panel (as gemvPanel, with a and b as in
  // bf16GemmTile, for rows <= kGemvMaxRows rows of a): the panel's own lines
  // ahead of its reads, and as the tile, [prefetch, prefetch +
  // prefetchBytes) spread over its steps. Null where bf16GemmTile is.
  void (*bf16GemvPanel)(int rows, int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                        int64_t ldc, bool accumulate, const char *prefetch, int64_t prefetchBytes) = nullptr;
  int bf16GemmTallMr = 0;
  void (*bf16GemmTallTile)(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                           bool accumulate, const char *prefetch, int64_t prefetchBytes) = nullptr;
  // As bf16GemmTallTile without accumulating, the sums starting from
  // rowInit[j] (gemmNr floats) in every row where rowInit is not null (the
  // gemm's bias, added by the tile registers' initial load, not by the
  // epilogue), else from 0, with a in steps of bf16GemmTallPairStep (P)
  // pairs: pair q < pairs / P * P of row r at aSteps[q / P * mr * P + r * P +
  // q % P], the rest at aSteps[pairs / P * mr * P + r * (pairs % P) + q % P]
  // (mr = bf16GemmTallMr), so a step's tiles are contiguous. With side,
  // side->run(side->context, part) for part < side->parts in order, spread
  // over the tile's steps (all done by its return). Null where
  // bf16GemmTallTile is.
  void (*bf16GemmTallTileFromRow)(int64_t pairs, const uint32_t *aSteps, const uint32_t *b, const float *rowInit,
                                  float *c, int64_t ldc, const TileSideWork *side) = nullptr;
  // As bf16GemmTallTile over the tile's first gemmNr / 2 columns only (b is
  // still a whole panel): attention's last keys or values that fill no more
  // than half a panel. Null where bf16GemmTallTile is.
  void (*bf16GemmTallHalfTile)(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                               int64_t ldc, bool accumulate) = nullptr;
  // The tall tile's step over k in pairs (amx: 16): a pair count that is
  // not a multiple of it ends in a slower tail, so operands that can be
  // padded with zero pairs (attention's) are padded to it.
  int bf16GemmTallPairStep = 1;
  // dst[j] = the bf16 pair (a[j], b[j]) for j < n, rounded to nearest even,
  // b null: zero partners. Two rows of a matrix whose k runs down the rows
  // (attention's values) as a row of the bf16 gemm's b panel.
  void (*bf16InterleaveRows)(const float *a, const float *b, int64_t n, uint32_t *dst) = nullptr;
  // dst[q * ldd + r] = src[r * lds + q] for r < rows, q < cols: rows of bf16
  // pairs turned into columns (attention's keys, packed as rows of pairs,
  // into the bf16 tile's b panel). Null where bf16GemmTile is.
  void (*bf16TransposePairs)(const uint32_t *src, int64_t lds, int64_t rows, int64_t cols, uint32_t *dst,
                             int64_t ldd) = nullptr;
  // A softmax step whose probabilities feed the bf16 gemm: p[j] = exp(x[j] - shift)
  // for j < n (shift >= every x[j], as a row's max is; exactly 1 at x[j] == shift,
  // 0 below kExpUnderflow and for -inf, NaN for NaN; relative error under 4e-6,
  // far below bf16's rounding), stored as the bf16 pairs dst[q] = (p[2q], p[2q + 1])
  // for q < ceil(n / 2) (an odd n's last partner zero); returns the f32 sum of p.
  float (*bf16ExpShiftSumPairs)(const float *x, int64_t n, float shift, uint32_t *dst) = nullptr;

  // The int8 gemm (int8 artifacts), on every table: exact int32 sums of
  // 8-bit products. c[r * ldc + j] (+)= sum_p A[r][p] * b[p][j] over the
  // s8GemmMr x s8GemmNr tile and p < 4 * quads, where A[r][p] is the byte
  // a[r * lda + p] and b is a packed panel: b[(q * nr + j) * 4 + t] = b[4q + t][j]
  // (s8). The tile reads A as u8 where s8ActivationOffset is 128 (VNNI's
  // vpdpbusd: the driver stores q + 128 and subtracts 128 * the column sums of
  // b) and as s8 where it is 0 (AVX2's vpsignb/vpmaddubsw, portable C++).
  // amx's tile (tdpbusd) is 32 x 64 over the same panels as avx512vnni's 6 x 64.
  int s8GemmMr = 0, s8GemmNr = 0;
  uint8_t s8ActivationOffset = 0;
  // Meanwhile the bytes [prefetch, prefetch + prefetchBytes) are pulled into
  // L2 (SpreadPrefetch: the next weight panel); prefetch may be null.
  void (*s8GemmTile)(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                     bool accumulate, const char *prefetch, int64_t prefetchBytes) = nullptr;
  // The gemv over an int8 panel (as s8GemmTile, for rows <= kGemvMaxRows
  // rows of a, without padding rows; c is not accumulated into): the
  // panel's own lines ahead of its reads, and as the tile, [prefetch,
  // prefetch + prefetchBytes) spread over its steps.
  void (*s8GemvPanel)(int rows, int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c,
                      int64_t ldc, const char *prefetch, int64_t prefetchBytes) = nullptr;
  // quantizeRowS8 (quantize_s8.hpp) of a contiguous row with this table's
  // s8ActivationOffset, in vectors: q[0..kPadded) and the row's scale.
  float (*s8QuantizeRow)(const float *x, int64_t k, int64_t kPadded, uint8_t *q) = nullptr;
  // out[j] = rowScale * columnScale[j] * (acc[j] - offset * columnSums[j])
  // for j < n (the int8 gemm's scales, before its epilogue): the same f32
  // operations in that order on every table. out may be acc itself (each
  // lane is read before it is written), so a block's int32 sums become its
  // f32 rows where they lie.
  void (*s8DequantizeRow)(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                          const float *columnScale, int64_t n, float *out) = nullptr;

  // The group-scaled gemms (grouped_gemm.hpp's panels of groupedNr columns:
  // 8, or 16 where a register holds 16 lanes), on every table:
  // for r < rows <= 4 and the panel's groupedNr columns j,
  //   c[r * ldc + j] = sum_{g < groups} (aScale[r * lds + g] * scale[g][j]) * S[r][g][j]
  // where a holds each row's s8 quantization per group of 32
  // (quantizeGroupsS8) and aSum its per-group sums, and the exact integer S is
  //   int4: sum_{p < 32} a[r * lda + 32g + p] * u(b[32g + p][j]) - 8 * aSum[r * lds + g]
  //         (u = q + 8 is summed, 8 * aSum taken off);
  //   int8: sum_{p < 32} a[r * lda + 32g + p] * b[32g + p][j] (aSum unread);
  // each group's term added in f32 in group order (a fused multiply-add).
  int groupedNr = 0;
  void (*s4GemmTile)(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                     const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) = nullptr;
  void (*s8GroupedGemmTile)(int rows, int64_t groups, const int8_t *a, int64_t lda, const float *aScale,
                            const int32_t *aSum, int64_t lds, const uint8_t *panel, float *c, int64_t ldc) = nullptr;
  // quantizeGroupsS8 (quantize_s8.hpp) of a contiguous row, in vectors: the
  // same bytes, scales and sums.
  void (*s8QuantizeGroups)(const float *x, int64_t k, int64_t groups, int8_t *q, float *scale, int32_t *sum) = nullptr;
};

const IsaKernels &portableKernels();
const IsaKernels &avx2Kernels();
// avx2 with the int8 and group-scaled gemms on AVX-VNNI's (VEX, 256-bit) vpdpbusd.
const IsaKernels &avx2VnniKernels();
const IsaKernels &avx512Kernels();
// avx512 with the int8 and group-scaled gemms on AVX512_VNNI's vpdpbusd.
const IsaKernels &avx512VnniKernels();
// avx512vnni plus the bf16 gemm (AVX512_BF16's vdpbf16ps), for bf16 artifacts.
const IsaKernels &avx512Bf16Kernels();
// avx512bf16 with the gemms' bf16 and int8 tiles on AMX (tdpbf16ps, tdpbusd).
const IsaKernels &amxKernels();

// Whether this CPU has AMX (tile, bf16, int8), the OS saves the tile state
// (XCR0) and lets this process use it (arch_prctl ARCH_REQ_XCOMP_PERM, asked
// once): where the amx table is offered.
bool amxUsable();

// Per-thread CPU state a kernel sets up for itself (AMX's tile
// configuration) is trusted for one run of the executor: between runs, code
// outside ein may change it on the calling thread (oneDNN under OpenVINO or
// PyTorch loads its own tile configuration or releases the tiles). Every run
// begins a new epoch (beginKernelEpoch), and a kernel checks the thread's
// state once per epoch (kernelEpoch(), never 0), not on every call: reading
// the tile configuration waits for every tile instruction in flight (14% of
// a bf16 gemm's time when it was read per 32 x 64 tile).
void beginKernelEpoch();
uint64_t kernelEpoch();

// The fastest table this CPU runs. EIN_CPU_ISA=<a table's name> in the
// environment picks a lower one (to compare, or to test a path).
const IsaKernels &bestKernels();
// Every table this CPU can run, best first.
std::vector<const IsaKernels *> supportedKernels();

}  // namespace ein::detail::cpu
