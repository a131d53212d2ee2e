// Flash attention on tensor cores: bf16 or fp16 operands (the artifact's
// precision), f32 accumulation and an f32 online softmax, for
// head_dim == value_dim in {64, 128}. Any strides: tiles are read from the
// f32 views and converted while they are staged in shared memory.
//
// A block takes 64 queries of one batch index; each of its 4 warps owns 16 of
// them. For each tile of 64 keys (32 where the device's shared memory is too
// small for 64 at head_dim 128: launch_plan.hpp's mmaKeyTile):
//   S[16 x keys] = Q K^T         (WMMA 16x16x16, f32 accumulators -> shared)
//   softmax     scale, mask, running max m / sum l per row, P = exp(S - m) in
//               bf16/fp16, the output rows rescaled by exp(m_old - m_new)
//   O[16 x E]  += P V            (WMMA, O kept in shared memory as f32)
// and at the end out = O / l. Masked rows behave as in the fp32 path: all
// -inf gives NaN, a NaN score makes the row NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = kMmaWarps, kRows = kMmaRows, kQueries = kMmaQueries;

template <typename T>
__device__ __forceinline__ T fromFloat(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __forceinline__ __half fromFloat<__half>(float x) { return __float2half(x); }

template <typename T, int D, int kKeys>
__global__ void __launch_bounds__(kWarps * 32) attentionMmaKernel(AttentionLaunch launch) {
  static_assert(kKeys % 32 == 0, "each lane takes keys lane, lane + 32, ...");
  constexpr MmaLayout L = mmaLayout(D, kKeys);
  constexpr int kKeysPerLane = kKeys / 32;
  extern __shared__ __align__(128) unsigned char shared[];
  T *qTile = reinterpret_cast<T *>(shared + L.q);
  T *kTile = reinterpret_cast<T *>(shared + L.k);
  T *vTile = reinterpret_cast<T *>(shared + L.v);
  float *sTile = reinterpret_cast<float *>(shared + L.s);
  T *pTile = reinterpret_cast<T *>(shared + L.p);
  float *oTile = reinterpret_cast<float *>(shared + L.o);
  float *rowMax = reinterpret_cast<float *>(shared + L.stats), *rowSum = rowMax + kQueries,
        *rowNan = rowSum + kQueries;

  const int r = launch.batch.rank;
  const int64_t batch = blockIdx.x, firstQuery = int64_t(blockIdx.y) * kQueries, keys = launch.keys;
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
  const int64_t mI = launch.mask.stride[r], mJ = launch.mask.stride[r + 1];

  for (int at = threadIdx.x; at < kQueries * D; at += blockDim.x) {
    const int row = at / D, d = at % D;
    const int64_t i = firstQuery + row;
    qTile[row * L.ld16 + d] = fromFloat<T>(i < launch.queries ? q[qBase + i * qI + d * qD] : 0.0f);
  }
  for (int at = threadIdx.x; at < kQueries * L.ldO; at += blockDim.x) oTile[at] = 0.0f;
  for (int at = threadIdx.x; at < kQueries; at += blockDim.x) {
    rowMax[at] = -INFINITY;
    rowSum[at] = 0.0f;
    rowNan[at] = 0.0f;
  }

  const int warpRow = warp * kRows;
  // Causal: the key tiles past the block's last visible key are skipped.
  const int64_t keyEnd = causalKeyEnd(launch.causalPositions, firstQuery, kQueries, launch.queries, keys);
  for (int64_t firstKey = 0; firstKey < keyEnd; firstKey += kKeys) {
    __syncthreads();  // the previous tiles are no longer read; the query tile and statistics are ready
    for (int at = threadIdx.x; at < kKeys * D; at += blockDim.x) {
      const int key = at / D, d = at % D;
      const int64_t j = firstKey + key;
      kTile[key * L.ld16 + d] = fromFloat<T>(j < keys ? k[kBase + j * kJ + d * kD] : 0.0f);
      vTile[key * L.ld16 + d] = fromFloat<T>(j < keys ? v[vBase + j * vJ + d * vE] : 0.0f);
    }
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
    for (int block = 0; block < kKeys / 16; ++block) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> scores;
      wmma::fill_fragment(scores, 0.0f);
#pragma unroll
      for (int step = 0; step < D / 16; ++step) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qFragment;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kFragment;
        wmma::load_matrix_sync(qFragment, qTile + warpRow * L.ld16 + step * 16, L.ld16);
        wmma::load_matrix_sync(kFragment, kTile + block * 16 * L.ld16 + step * 16, L.ld16);
        wmma::mma_sync(scores, qFragment, kFragment, scores);
      }
      wmma::store_matrix_sync(sTile + warpRow * L.ldS + block * 16, scores, L.ldS, wmma::mem_row_major);
    }
    __syncwarp();

    // The online softmax, one row at a time: each lane takes keys lane, lane + 32, ...
    for (int row = warpRow; row < warpRow + kRows; ++row) {
      const int64_t i = firstQuery + row;
      float score[kKeysPerLane], p[kKeysPerLane];
      bool nan = false;
#pragma unroll
      for (int h = 0; h < kKeysPerLane; ++h) {
        const int key = lane + 32 * h;
        const int64_t j = firstKey + key;
        score[h] = -INFINITY;
        if (j < keys && i < launch.queries) {
          score[h] = launch.scale * sTile[row * L.ldS + key];
          if (launch.maskKind != MaskKind::None)
            score[h] = maskScore(launch.maskKind, score[h], launch.mask.data, mBase + i * mI + j * mJ, launch.maskFill);
          if (causallyHidden(launch.causalPositions, i, j, keys)) score[h] = -INFINITY;
          nan |= isnan(score[h]);
        }
      }
      const float oldMax = rowMax[row];
      float laneMax = score[0];
#pragma unroll
      for (int h = 1; h < kKeysPerLane; ++h) laneMax = fmaxf(laneMax, score[h]);
      const float newMax = fmaxf(oldMax, warpMax(laneMax));
      const float correction = expShifted(oldMax, newMax);
      float tileSum = 0.0f;
#pragma unroll
      for (int h = 0; h < kKeysPerLane; ++h) {
        const int64_t j = firstKey + lane + 32 * h;
        p[h] = j < keys ? expShifted(score[h], newMax) : 0.0f;
        tileSum += p[h];
        pTile[row * L.ldP + lane + 32 * h] = fromFloat<T>(p[h]);
      }
      tileSum = warpSum(tileSum);
      nan = warpAny(nan);
      for (int e = lane; e < D; e += 32) oTile[row * L.ldO + e] *= correction;
      __syncwarp();
      if (lane == 0) {
        rowMax[row] = newMax;
        rowSum[row] = rowSum[row] * correction + tileSum;
        if (nan) rowNan[row] = 1.0f;
      }
    }
    __syncwarp();

    // O += P V for this warp's rows.
    for (int block = 0; block < D / 16; ++block) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> values;
      float *oBlock = oTile + warpRow * L.ldO + block * 16;
      wmma::load_matrix_sync(values, oBlock, L.ldO, wmma::mem_row_major);
#pragma unroll
      for (int step = 0; step < kKeys / 16; ++step) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pFragment;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vFragment;
        wmma::load_matrix_sync(pFragment, pTile + warpRow * L.ldP + step * 16, L.ldP);
        wmma::load_matrix_sync(vFragment, vTile + step * 16 * L.ld16 + block * 16, L.ld16);
        wmma::mma_sync(values, pFragment, vFragment, values);
      }
      wmma::store_matrix_sync(oBlock, values, L.ldO, wmma::mem_row_major);
    }
  }
  __syncthreads();

  for (int at = threadIdx.x; at < kQueries * D; at += blockDim.x) {
    const int row = at / D, e = at % D;
    const int64_t i = firstQuery + row;
    if (i >= launch.queries) continue;
    // keys == 0: an empty sum of values is 0; all -inf: 0 / 0 is NaN.
    const float value = keys == 0 ? 0.0f : rowNan[row] != 0.0f ? NAN : oTile[row * L.ldO + e] / rowSum[row];
    out[oBase + i * launch.out.stride[r] + e * launch.out.stride[r + 1]] = value;
  }
}

template <typename T, int D, int kKeys>
cudaError_t launchTyped(const AttentionLaunch &launch, cudaStream_t stream) {
  const int64_t batches = launch.batch.count(), tiles = (launch.queries + kQueries - 1) / kQueries;
  if (batches == 0 || tiles == 0) return cudaSuccess;
  constexpr size_t shared = mmaLayout(D, kKeys).bytes;
  const cudaError_t error =
      cudaFuncSetAttribute(attentionMmaKernel<T, D, kKeys>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (error != cudaSuccess) return error;
  attentionMmaKernel<T, D, kKeys><<<dim3(static_cast<unsigned>(batches), static_cast<unsigned>(tiles)), kWarps * 32,
                                    shared, stream>>>(launch);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launchWithKeyTile(const AttentionLaunch &launch, int keyTile, cudaStream_t stream) {
  if (keyTile == 64) return launchTyped<T, D, 64>(launch, stream);
  if (keyTile == 32) return launchTyped<T, D, 32>(launch, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

bool attentionMmaSupports(const AttentionLaunch &launch) {
  return (launch.headDim == 64 || launch.headDim == 128) && launch.valueDim == launch.headDim &&
         (launch.queries + kQueries - 1) / kQueries <= kMaxGridYZ && launch.batch.count() <= kMaxGridX;
}

cudaError_t launchAttentionMma(const AttentionLaunch &launch, Precision precision, int keyTile, cudaStream_t stream) {
  if (!attentionMmaSupports(launch) || precision == Precision::Fp32) return cudaErrorInvalidValue;
  const bool bf16 = precision == Precision::Bf16;
  if (launch.headDim == 64)
    return bf16 ? launchWithKeyTile<__nv_bfloat16, 64>(launch, keyTile, stream)
                : launchWithKeyTile<__half, 64>(launch, keyTile, stream);
  return bf16 ? launchWithKeyTile<__nv_bfloat16, 128>(launch, keyTile, stream)
              : launchWithKeyTile<__half, 128>(launch, keyTile, stream);
}

}  // namespace ein::cuda
