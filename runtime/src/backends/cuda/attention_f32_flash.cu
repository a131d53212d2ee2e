// Flash attention in fp32 (the exact path, and the one for any head_dim up to
// 256 or any strides): a block takes 16 queries of one batch index and walks
// the keys in tiles of 16 staged in shared memory, with an online softmax, so
// the score matrix never reaches memory.
//
// Each of the 4 warps owns 4 query rows. For a key tile, half-warps split the
// head dimension of each of the 16 dot products (lane = key + 16 * half),
// then the row's running max m and sum l are updated and the value
// accumulators (value dim spread over the lanes, up to 8 each) are rescaled
// by exp(m_old - m_new) and advanced. Scores are masked exactly as the
// schema says; a row whose keys are all -inf gives NaN (its sum stays 0 and
// 0 / 0 is NaN), any NaN score makes the row NaN, as softmax does.
#include <algorithm>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

constexpr int kWarps = 4, kRowsPerWarp = 4, kQueries = kWarps * kRowsPerWarp, kKeys = 16;
constexpr int kValueChunks = static_cast<int>(kFlashF32MaxDim / 32);

size_t sharedBytes(const AttentionLaunch &launch) {
  return sizeof(float) * (kQueries * launch.headDim + kKeys * (launch.headDim + 1) + kKeys * launch.valueDim);
}

__global__ void __launch_bounds__(kWarps * 32) attentionF32FlashKernel(AttentionLaunch launch) {
  extern __shared__ float shared[];
  const int64_t D = launch.headDim, E = launch.valueDim, keys = launch.keys;
  float *qTile = shared;                     // [kQueries][D]
  float *kTile = qTile + kQueries * D;       // [kKeys][D + 1]
  float *vTile = kTile + kKeys * (D + 1);    // [kKeys][E]
  const int r = launch.batch.rank;
  const int64_t batch = blockIdx.x, firstQuery = int64_t(blockIdx.y) * kQueries;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const auto *q = static_cast<const float *>(launch.q.data);
  const auto *k = static_cast<const float *>(launch.k.data);
  const auto *v = static_cast<const float *>(launch.v.data);
  auto *out = static_cast<float *>(launch.out.data);
  const int64_t qBase = offsetOf(launch.batch, launch.q, batch), kBase = offsetOf(launch.batch, launch.k, batch),
                vBase = offsetOf(launch.batch, launch.v, batch), oBase = offsetOf(launch.batch, launch.out, batch);
  const int64_t mBase = launch.mask.data ? offsetOf(launch.batch, launch.mask, batch) : 0;
  const int64_t qI = launch.q.stride[r], qD = launch.q.stride[r + 1], kJ = launch.k.stride[r],
                kD = launch.k.stride[r + 1], vJ = launch.v.stride[r], vE = launch.v.stride[r + 1];

  for (int64_t at = threadIdx.x; at < kQueries * D; at += blockDim.x) {
    const int64_t i = firstQuery + at / D, d = at % D;
    qTile[at] = i < launch.queries ? q[qBase + i * qI + d * qD] : 0.0f;
  }

  float rowMax[kRowsPerWarp], rowSum[kRowsPerWarp], acc[kRowsPerWarp][kValueChunks];
  bool sawNan[kRowsPerWarp];
#pragma unroll
  for (int row = 0; row < kRowsPerWarp; ++row) {
    rowMax[row] = -INFINITY;
    rowSum[row] = 0.0f;
    sawNan[row] = false;
#pragma unroll
    for (int t = 0; t < kValueChunks; ++t) acc[row][t] = 0.0f;
  }

  const int key = lane & 15, half = lane >> 4;
  // Causal: the key tiles past the block's last visible key are skipped.
  const int64_t keyEnd = causalKeyEnd(launch.causalPositions, firstQuery, kQueries, launch.queries, keys);
  for (int64_t firstKey = 0; firstKey < keyEnd; firstKey += kKeys) {
    __syncthreads();  // the previous tile is no longer read (and the query tile is complete)
    for (int64_t at = threadIdx.x; at < kKeys * D; at += blockDim.x) {
      const int64_t j = firstKey + at / D, d = at % D;
      kTile[at / D * (D + 1) + d] = j < keys ? k[kBase + j * kJ + d * kD] : 0.0f;
    }
    for (int64_t at = threadIdx.x; at < kKeys * E; at += blockDim.x) {
      const int64_t j = firstKey + at / E, e = at % E;
      vTile[at] = j < keys ? v[vBase + j * vJ + e * vE] : 0.0f;
    }
    __syncthreads();

    const int64_t j = firstKey + key;
    const bool validKey = j < keys;
#pragma unroll
    for (int row = 0; row < kRowsPerWarp; ++row) {
      const int localRow = warp * kRowsPerWarp + row;
      const int64_t i = firstQuery + localRow;
      const float *qRow = qTile + localRow * D, *kRow = kTile + key * (D + 1);
      float dot = 0.0f;
      for (int64_t d = half; d < D; d += 2) dot = fmaf(qRow[d], kRow[d], dot);
      dot += __shfl_xor_sync(0xffffffffu, dot, 16);
      float score = -INFINITY;
      if (validKey && i < launch.queries) {
        score = launch.scale * dot;
        if (launch.softcap > 0.0f) score = launch.softcap * tanhf(score / launch.softcap);
        if (launch.maskKind != MaskKind::None)
          score = maskScore(launch.maskKind, score, launch.mask.data,
                            mBase + i * launch.mask.stride[r] + j * launch.mask.stride[r + 1], launch.maskFill);
        if (causallyHidden(launch.causalPositions, i, j, keys)) score = -INFINITY;
      }
      sawNan[row] |= warpAny(isnan(score));
      const float newMax = fmaxf(rowMax[row], warpMax(score));
      const float correction = expShifted(rowMax[row], newMax);
      const float p = validKey ? expShifted(score, newMax) : 0.0f;
      rowSum[row] = rowSum[row] * correction + warpSum(half == 0 ? p : 0.0f);
      rowMax[row] = newMax;
#pragma unroll
      for (int t = 0; t < kValueChunks; ++t) acc[row][t] *= correction;
      for (int jj = 0; jj < kKeys; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
        const float *vRow = vTile + jj * E;
#pragma unroll
        for (int t = 0; t < kValueChunks; ++t) {
          const int64_t e = lane + 32 * t;
          if (e < E) acc[row][t] = fmaf(pj, vRow[e], acc[row][t]);
        }
      }
    }
  }

#pragma unroll
  for (int row = 0; row < kRowsPerWarp; ++row) {
    const int64_t i = firstQuery + warp * kRowsPerWarp + row;
    if (i >= launch.queries) continue;
#pragma unroll
    for (int t = 0; t < kValueChunks; ++t) {
      const int64_t e = lane + 32 * t;
      if (e >= E) continue;
      // keys == 0: an empty sum of values is 0.
      const float value = keys == 0 ? 0.0f : sawNan[row] ? NAN : acc[row][t] / rowSum[row];
      out[oBase + i * launch.out.stride[r] + e * launch.out.stride[r + 1]] = value;
    }
  }
}

}  // namespace

bool attentionF32FlashSupports(const AttentionLaunch &launch) {
  return launch.headDim <= kFlashF32MaxDim && launch.valueDim <= kFlashF32MaxDim &&
         (launch.queries + kQueries - 1) / kQueries <= 65535 && launch.batch.count() <= 0x7fffffff;
}

cudaError_t launchAttentionF32Flash(const AttentionLaunch &launch, cudaStream_t stream) {
  const int64_t batches = launch.batch.count(), tiles = (launch.queries + kQueries - 1) / kQueries;
  if (batches == 0 || tiles == 0 || launch.valueDim == 0) return cudaSuccess;
  if (!attentionF32FlashSupports(launch)) return cudaErrorInvalidValue;
  const size_t shared = sharedBytes(launch);
  if (shared > 48 * 1024) {
    const cudaError_t error =
        cudaFuncSetAttribute(attentionF32FlashKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
    if (error != cudaSuccess) return error;
  }
  attentionF32FlashKernel<<<dim3(static_cast<unsigned>(batches), static_cast<unsigned>(tiles)), kWarps * 32, shared,
                            stream>>>(launch);
  return cudaGetLastError();
}

}  // namespace ein::cuda
