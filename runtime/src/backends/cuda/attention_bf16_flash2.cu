// Flash attention on tensor cores with the scores, probabilities and output
// in registers, as FlashAttention-2 keeps them: bf16 or fp16 operands (the
// artifact's precision), f32 accumulation and an f32 online softmax, for
// head_dim == value_dim in {64, 128}, any strides.
//
// Two kernels. stageKeysValues converts k and v once to 16-bit copies in the
// scratch buffer, k as [batch][key][d] and v transposed as [batch][e][key],
// both zero-padded to a whole number of 64-key tiles, so every tile is a
// block of 16-byte rows. attentionFlash2Kernel then takes 128 queries of one
// batch index a block; each of its 8 warps owns 16 of them, whose q
// fragments it holds in registers for the whole key loop. Key tiles are
// copied into shared memory with cp.async, the next one while the current is
// computed (two stages), and for each tile of 64 keys:
//   S[16 x 64] = Q K^T     mma.sync m16n8k16, f32 accumulators in registers
//   softmax                scale, mask, running max per row (the 4 lanes that
//                          share a row agree through two shuffles), P = exp(S - m)
//   O[16 x E] += P V       P's accumulators are repacked as the A operand in
//                          place (the m16n8 C layout is the m16k16 A layout)
// k as [key][d] and v as [e][key] are both read as mma's column-major B
// operand with 32-bit loads. Each lane keeps a partial row sum; the 4
// partials are added once at the end, out = O / l. Masked rows behave as in
// the fp32 path: all -inf gives NaN, a NaN score makes the row NaN, no keys
// gives 0. Blocks are numbered query tile first, so the blocks in flight
// share one batch index's keys and values in L2.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane =
// 4 * group + quad; A (16 x 16, row-major) a0 = (group, 2 quad .. +1),
// a1 = (group + 8, 2 quad ..), a2 = (group, 2 quad + 8 ..), a3 = (group + 8,
// 2 quad + 8 ..); B (16 x 8, column-major) b0 = (2 quad .. +1, group),
// b1 = (2 quad + 8 .., group); C (16 x 8) c0, c1 = (group, 2 quad .. +1),
// c2, c3 = (group + 8, 2 quad ..). A 32-bit register holds two 16-bit values,
// the lower column (row, for B) in its low half.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

constexpr int kWarps = kFlash2Warps, kQueries = kFlash2Queries, kKeys = kFlash2Keys;
constexpr int kPad = 8;  // 16-bit elements per shared row beyond the data: rows 4 banks apart, no conflicts

template <typename T>
__device__ __forceinline__ uint32_t pack(float low, float high);
template <>
__device__ __forceinline__ uint32_t pack<__nv_bfloat16>(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);  // .x (low half) = low
  return *reinterpret_cast<const uint32_t *>(&pair);
}
template <>
__device__ __forceinline__ uint32_t pack<__half>(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  return *reinterpret_cast<const uint32_t *>(&pair);
}

template <typename T>
__device__ __forceinline__ T narrow(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __forceinline__ __half narrow<__half>(float x) { return __float2half(x); }

// c += a b for one m16n8k16 tile.
template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two adjacent 16-bit elements of a shared row as one register.
template <typename T>
__device__ __forceinline__ uint32_t pairAt(const T *row, int column) {
  return *reinterpret_cast<const uint32_t *>(row + column);
}

// Whether any of the 4 lanes of a group (one row's lanes) has the flag; the
// row's max and sum are warpMax<4> and warpSum<4>.
__device__ __forceinline__ bool quadAny(bool flag) {
  int value = flag;
  value |= __shfl_xor_sync(0xffffffffu, value, 1);
  return (value | __shfl_xor_sync(0xffffffffu, value, 2)) != 0;
}

constexpr int kThreads = kWarps * 32;

// Keys rounded up to whole tiles: the staged copies' length.
constexpr int64_t paddedKeys(int64_t keys) { return (keys + kKeys - 1) / kKeys * kKeys; }

// 16-bit k [batch][key][d] and v^T [batch][e][key] from the f32 views, zero
// past `keys`. A block converts 32 keys x 32 dims (v through shared memory,
// so both the reads and the transposed writes are coalesced).
template <typename T, int D>
__global__ void __launch_bounds__(256) stageKeysValues(AttentionLaunch launch, T *kOut, T *vOut, int64_t keyBlocks) {
  __shared__ float vBlock[32][33];
  constexpr int kDimBlocks = D / 32;
  const int r = launch.batch.rank;
  const int64_t block = blockIdx.x, batch = block / (keyBlocks * kDimBlocks);
  const int64_t firstKey = block / kDimBlocks % keyBlocks * 32;
  const int firstDim = int(block % kDimBlocks) * 32, column = threadIdx.x & 31;
  const int64_t keys = launch.keys, padded = paddedKeys(keys);
  const auto *k = static_cast<const float *>(launch.k.data);
  const auto *v = static_cast<const float *>(launch.v.data);
  const int64_t kBase = offsetOf(launch.batch, launch.k, batch), vBase = offsetOf(launch.batch, launch.v, batch);
  for (int row = threadIdx.x >> 5; row < 32; row += 8) {
    const int64_t j = firstKey + row;
    const int d = firstDim + column;
    const bool inside = j < keys;
    kOut[(batch * padded + j) * D + d] =
        narrow<T>(inside ? k[kBase + j * launch.k.stride[r] + d * launch.k.stride[r + 1]] : 0.0f);
    vBlock[row][column] = inside ? v[vBase + j * launch.v.stride[r] + d * launch.v.stride[r + 1]] : 0.0f;
  }
  __syncthreads();
  for (int row = threadIdx.x >> 5; row < 32; row += 8)
    vOut[(batch * D + firstDim + row) * padded + firstKey + column] = narrow<T>(vBlock[column][row]);
}

// 16 bytes from global to shared memory without passing through registers.
__device__ __forceinline__ void copyAsync16(void *shared, const void *global) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global));
}
__device__ __forceinline__ void commitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `pending` of the committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

template <int D>
struct Flash2Layout {
  static constexpr int kLdK = D + kPad, kLdV = kKeys + kPad;  // 16-bit elements a shared row
  static constexpr int kStage = kKeys * kLdK + D * kLdV;      // elements a stage: k [key][d], then v [e][key]
  static constexpr size_t kBytes = 2 * size_t(kStage) * 2;    // two stages of 16-bit elements
};

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    attentionFlash2Kernel(AttentionLaunch launch, const T *kStaged, const T *vStaged, int64_t tiles) {
  using L = Flash2Layout<D>;
  constexpr int kLdK = L::kLdK, kLdV = L::kLdV;
  constexpr int kScoreTiles = kKeys / 8, kOutTiles = D / 8, kDimSteps = D / 16, kKeySteps = kKeys / 16;
  extern __shared__ __align__(16) unsigned char shared[];
  T *stages = reinterpret_cast<T *>(shared);

  const int r = launch.batch.rank;
  const int64_t batch = int64_t(blockIdx.x) / tiles, firstQuery = int64_t(blockIdx.x) % tiles * kQueries;
  const int64_t keys = launch.keys, queries = launch.queries, padded = paddedKeys(keys);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, group = lane >> 2, quad = lane & 3;
  const auto *q = static_cast<const float *>(launch.q.data);
  auto *out = static_cast<float *>(launch.out.data);
  const int64_t qBase = offsetOf(launch.batch, launch.q, batch), oBase = offsetOf(launch.batch, launch.out, batch);
  const int64_t mBase = launch.mask.data ? offsetOf(launch.batch, launch.mask, batch) : 0;
  const int64_t qI = launch.q.stride[r], qD = launch.q.stride[r + 1];
  const int64_t mI = launch.mask.stride[r], mJ = launch.mask.stride[r + 1];
  const T *kRows = kStaged + batch * padded * D;    // [key][d]
  const T *vRows = vStaged + batch * D * padded;    // [e][key]

  // Tile `tile`'s keys and values into stage `stage`: 16-byte rows pieces, 8 a k row of 64 dims.
  auto load = [&](int64_t tile, int stage) {
    T *kTile = stages + stage * L::kStage, *vTile = kTile + kKeys * kLdK;
    const T *kFrom = kRows + tile * kKeys * D, *vFrom = vRows + tile * kKeys;
    for (int piece = threadIdx.x; piece < kKeys * D / 8; piece += kThreads) {
      const int row = piece / (D / 8), column = piece % (D / 8) * 8;
      copyAsync16(kTile + row * kLdK + column, kFrom + row * D + column);
    }
    for (int piece = threadIdx.x; piece < D * kKeys / 8; piece += kThreads) {
      const int row = piece / (kKeys / 8), column = piece % (kKeys / 8) * 8;
      copyAsync16(vTile + row * kLdV + column, vFrom + row * padded + column);
    }
  };

  // This lane's two rows (c0/c1 and c2/c3 of every accumulator), and their q fragments.
  const int64_t rowLow = firstQuery + warp * 16 + group, rowHigh = rowLow + 8;
  auto qAt = [&](int64_t i, int d) { return i < queries ? q[qBase + i * qI + d * qD] : 0.0f; };
  uint32_t qFragment[kDimSteps][4];
#pragma unroll
  for (int step = 0; step < kDimSteps; ++step) {
    const int d = 16 * step + 2 * quad;
    qFragment[step][0] = pack<T>(qAt(rowLow, d), qAt(rowLow, d + 1));
    qFragment[step][1] = pack<T>(qAt(rowHigh, d), qAt(rowHigh, d + 1));
    qFragment[step][2] = pack<T>(qAt(rowLow, d + 8), qAt(rowLow, d + 9));
    qFragment[step][3] = pack<T>(qAt(rowHigh, d + 8), qAt(rowHigh, d + 9));
  }

  float o[kOutTiles][4];
#pragma unroll
  for (int t = 0; t < kOutTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  float maxLow = -INFINITY, maxHigh = -INFINITY, sumLow = 0.0f, sumHigh = 0.0f;  // sums: this lane's part
  bool nanLow = false, nanHigh = false;

  // Causal: the key tiles past the block's last visible key are skipped.
  const int64_t keyEnd = causalKeyEnd(launch.causalPositions, firstQuery, kQueries, queries, keys);
  const int64_t keyTiles = (keyEnd + kKeys - 1) / kKeys;
  if (keyTiles > 0) load(0, 0);
  commitCopies();
  for (int64_t tile = 0; tile < keyTiles; ++tile) {
    if (tile + 1 < keyTiles) load(tile + 1, int(tile + 1) & 1);  // that stage was last read before the loop's end
    commitCopies();
    waitCopies<1>();  // this tile's group has landed (the next one may still be in flight)
    __syncthreads();  // ... for every thread's pieces
    const T *kTile = stages + (tile & 1) * L::kStage, *vTile = kTile + kKeys * kLdK;
    const int64_t firstKey = tile * kKeys;

    // S = Q K^T: score tile t holds keys 8t .. 8t + 7 of this tile.
    float s[kScoreTiles][4];
#pragma unroll
    for (int t = 0; t < kScoreTiles; ++t) {
      s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
      const T *keyRow = kTile + (8 * t + group) * kLdK + 2 * quad;
#pragma unroll
      for (int step = 0; step < kDimSteps; ++step)
        mma<T>(s[t], qFragment[step], pairAt(keyRow, 16 * step), pairAt(keyRow, 16 * step + 8));
    }

    // Scale, mask, and this tile's row maxima.
    float tileMaxLow = -INFINITY, tileMaxHigh = -INFINITY;
#pragma unroll
    for (int t = 0; t < kScoreTiles; ++t)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t i = c < 2 ? rowLow : rowHigh, j = firstKey + 8 * t + 2 * quad + (c & 1);
        float score = -INFINITY;
        if (j < keys && i < queries) {
          score = launch.scale * s[t][c];
          if (launch.softcap > 0.0f) score = launch.softcap * tanhf(score / launch.softcap);
          if (launch.maskKind != MaskKind::None)
            score = maskScore(launch.maskKind, score, launch.mask.data, mBase + i * mI + j * mJ, launch.maskFill);
          if (causallyHidden(launch.causalPositions, i, j, keys)) score = -INFINITY;
        }
        s[t][c] = score;
        if (c < 2) {
          nanLow |= isnan(score);
          tileMaxLow = fmaxf(tileMaxLow, score);
        } else {
          nanHigh |= isnan(score);
          tileMaxHigh = fmaxf(tileMaxHigh, score);
        }
      }
    const float newMaxLow = fmaxf(maxLow, warpMax<4>(tileMaxLow));
    const float newMaxHigh = fmaxf(maxHigh, warpMax<4>(tileMaxHigh));
    const float correctionLow = expShifted(maxLow, newMaxLow), correctionHigh = expShifted(maxHigh, newMaxHigh);
    maxLow = newMaxLow;
    maxHigh = newMaxHigh;
    sumLow *= correctionLow;
    sumHigh *= correctionHigh;
#pragma unroll
    for (int t = 0; t < kOutTiles; ++t) {
      o[t][0] *= correctionLow;
      o[t][1] *= correctionLow;
      o[t][2] *= correctionHigh;
      o[t][3] *= correctionHigh;
    }

    // P = exp(S - m), summed in f32, then O += P V sixteen keys at a time.
#pragma unroll
    for (int step = 0; step < kKeySteps; ++step) {
      float p[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          p[half][c] = expShifted(s[2 * step + half][c], c < 2 ? maxLow : maxHigh);
          if (c < 2) sumLow += p[half][c];
          else sumHigh += p[half][c];
        }
      const uint32_t pFragment[4] = {pack<T>(p[0][0], p[0][1]), pack<T>(p[0][2], p[0][3]), pack<T>(p[1][0], p[1][1]),
                                     pack<T>(p[1][2], p[1][3])};
#pragma unroll
      for (int t = 0; t < kOutTiles; ++t) {
        const T *valueRow = vTile + (8 * t + group) * kLdV + 16 * step + 2 * quad;
        mma<T>(o[t], pFragment, pairAt(valueRow, 0), pairAt(valueRow, 8));
      }
    }
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  const float totalLow = warpSum<4>(sumLow), totalHigh = warpSum<4>(sumHigh);
  nanLow = quadAny(nanLow);
  nanHigh = quadAny(nanHigh);
#pragma unroll
  for (int t = 0; t < kOutTiles; ++t)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t i = c < 2 ? rowLow : rowHigh;
      if (i >= queries) continue;
      const int e = 8 * t + 2 * quad + (c & 1);
      // keys == 0: an empty sum of values is 0; all -inf: 0 / 0 is NaN.
      const float value = keys == 0                   ? 0.0f
                          : (c < 2 ? nanLow : nanHigh) ? NAN
                                                       : o[t][c] / (c < 2 ? totalLow : totalHigh);
      out[oBase + i * launch.out.stride[r] + e * launch.out.stride[r + 1]] = value;
    }
}

template <typename T, int D>
cudaError_t launchTyped(const AttentionLaunch &launch, void *scratch, cudaStream_t stream) {
  const int64_t tiles = (launch.queries + kQueries - 1) / kQueries, batches = launch.batch.count();
  if (tiles * batches == 0) return cudaSuccess;
  const int64_t padded = paddedKeys(launch.keys);
  T *kStaged = static_cast<T *>(scratch), *vStaged = kStaged + batches * padded * D;
  if (padded > 0) {
    const int64_t keyBlocks = padded / 32;
    stageKeysValues<T, D><<<static_cast<unsigned>(batches * keyBlocks * (D / 32)), 256, 0, stream>>>(
        launch, kStaged, vStaged, keyBlocks);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  constexpr size_t shared = Flash2Layout<D>::kBytes;
  const cudaError_t error = cudaFuncSetAttribute(attentionFlash2Kernel<T, D>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (error != cudaSuccess) return error;
  attentionFlash2Kernel<T, D><<<static_cast<unsigned>(tiles * batches), kThreads, shared, stream>>>(launch, kStaged,
                                                                                                   vStaged, tiles);
  return cudaGetLastError();
}

}  // namespace

bool attentionFlash2Supports(const AttentionLaunch &launch) {
  const int64_t tiles = (launch.queries + kQueries - 1) / kQueries, batches = launch.batch.count();
  const int64_t stagingBlocks = paddedKeys(launch.keys) / 32 * (launch.headDim / 32);
  return (launch.headDim == 64 || launch.headDim == 128) && launch.valueDim == launch.headDim &&
         batches <= kMaxGridX / (tiles > 0 ? tiles : 1) && batches <= kMaxGridX / (stagingBlocks > 0 ? stagingBlocks : 1);
}

size_t attentionFlash2ScratchBytes(const AttentionLaunch &launch) {
  return 2 * size_t(launch.batch.count()) * size_t(paddedKeys(launch.keys)) * size_t(launch.headDim) * 2;
}

cudaError_t launchAttentionFlash2(const AttentionLaunch &launch, Precision precision, void *scratch,
                                  cudaStream_t stream) {
  if (!attentionFlash2Supports(launch) || precision == Precision::Fp32) return cudaErrorInvalidValue;
  const bool bf16 = precision == Precision::Bf16;
  if (launch.headDim == 64)
    return bf16 ? launchTyped<__nv_bfloat16, 64>(launch, scratch, stream)
                : launchTyped<__half, 64>(launch, scratch, stream);
  return bf16 ? launchTyped<__nv_bfloat16, 128>(launch, scratch, stream)
              : launchTyped<__half, 128>(launch, scratch, stream);
}

}  // namespace ein::cuda
