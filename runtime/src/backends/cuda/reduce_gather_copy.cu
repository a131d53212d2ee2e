// Data movement and reductions: reduce and variance (one warp per kept element), gather
// (one thread per output element, ids range-checked), copy (one thread per
// element, any dtype, or f32 rounded into bf16).
#include <cuda_bf16.h>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"

namespace ein::cuda {
namespace {

constexpr int kThreads = 256;

unsigned gridFor(int64_t items, int64_t perBlock) {
  const int64_t blocks = (items + perBlock - 1) / perBlock;
  return static_cast<unsigned>(blocks < 65536 * 8 ? blocks : 65536 * 8);
}

__device__ float combine(ReduceKind kind, float accumulator, float value) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return accumulator + value;
    case ReduceKind::Prod: return accumulator * value;
    case ReduceKind::Max: return fmaxf(accumulator, value);
    case ReduceKind::Min: return fminf(accumulator, value);
  }
  return accumulator;
}

__device__ float initialValue(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean: return 0.0f;
    case ReduceKind::Prod: return 1.0f;
    case ReduceKind::Max: return -INFINITY;
    case ReduceKind::Min: return INFINITY;
  }
  return 0.0f;
}

// NaN propagates through every kind (max and min too, as torch.amax/amin);
// the mean of nothing is NaN.
__global__ void reduceKernel(ReduceLaunch launch, int64_t keptCount, int64_t reducedCount) {
  const ReducedRows &rows = launch.rows;
  const int lane = threadIdx.x & 31;
  const int64_t warpsPerGrid = int64_t(gridDim.x) * (blockDim.x / 32);
  const auto *x = static_cast<const float *>(rows.x.data);
  auto *y = static_cast<float *>(rows.y.data);
  for (int64_t out = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; out < keptCount; out += warpsPerGrid) {
    const int64_t base = offsetOf(rows.kept, rows.x, out);
    float accumulator = initialValue(launch.kind);
    bool sawNan = false;
    for (int64_t r = lane; r < reducedCount; r += 32) {
      const float value = x[base + offsetOf(rows.reduced, rows.xReduced, r)];
      sawNan |= isnan(value);
      accumulator = combine(launch.kind, accumulator, value);
    }
    for (int delta = 16; delta > 0; delta >>= 1)
      accumulator = combine(launch.kind, accumulator, __shfl_xor_sync(0xffffffffu, accumulator, delta));
    sawNan = warpAny(sawNan);
    if (lane == 0) {
      if (launch.kind == ReduceKind::Mean) accumulator /= static_cast<float>(reducedCount);
      y[offsetOf(rows.kept, rows.y, out)] = sawNan ? NAN : accumulator;
    }
  }
}

// Two passes over each kept element's row: the mean, then the squared
// deviations from it (NaN propagates through both sums; 0 / 0 is NaN).
__global__ void varianceKernel(VarianceLaunch launch, int64_t keptCount, int64_t reducedCount) {
  const ReducedRows &rows = launch.rows;
  const int lane = threadIdx.x & 31;
  const int64_t warpsPerGrid = int64_t(gridDim.x) * (blockDim.x / 32);
  const auto *x = static_cast<const float *>(rows.x.data);
  auto *y = static_cast<float *>(rows.y.data);
  const float divisor = static_cast<float>(reducedCount > launch.correction ? reducedCount - launch.correction : 0);
  for (int64_t out = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; out < keptCount; out += warpsPerGrid) {
    const int64_t base = offsetOf(rows.kept, rows.x, out);
    float sum = 0.0f;
    for (int64_t r = lane; r < reducedCount; r += 32) sum += x[base + offsetOf(rows.reduced, rows.xReduced, r)];
    for (int delta = 16; delta > 0; delta >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, delta);
    const float mean = sum / static_cast<float>(reducedCount);
    float squares = 0.0f;
    for (int64_t r = lane; r < reducedCount; r += 32) {
      const float deviation = x[base + offsetOf(rows.reduced, rows.xReduced, r)] - mean;
      squares += deviation * deviation;
    }
    for (int delta = 16; delta > 0; delta >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, delta);
    if (lane == 0) {
      const float variance = squares / divisor;
      y[offsetOf(rows.kept, rows.y, out)] = launch.root ? sqrtf(variance) : variance;
    }
  }
}

__global__ void gatherKernel(GatherLaunch launch, int64_t total) {
  const auto *table = launch.table.data;
  auto *y = static_cast<float *>(launch.y.data);
  const int rank = launch.ids.rank;
  for (int64_t flat = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; flat < total;
       flat += int64_t(gridDim.x) * blockDim.x) {
    const int64_t position = flat / launch.width, w = flat % launch.width;
    const int64_t idAt = offsetOf(launch.ids, launch.idsView, position);
    const int64_t id = launch.wideIds ? static_cast<const int64_t *>(launch.idsView.data)[idAt]
                                      : static_cast<const int32_t *>(launch.idsView.data)[idAt];
    if (id < 0 || id >= launch.rows) {
      atomicMin(launch.firstBadId, static_cast<unsigned long long>(position));
      continue;
    }
    const int64_t yAt = offsetOf(launch.ids, launch.y, position) + w * launch.y.stride[rank];
    y[yAt] = table[launch.table.offset + id * launch.tableRowStride + w * launch.table.stride];
  }
}

template <typename Word>
__global__ void copyKernel(CopyLaunch launch, int64_t total) {
  const auto *x = static_cast<const Word *>(launch.x.data);
  auto *y = static_cast<Word *>(launch.y.data);
  for (int64_t flat = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; flat < total;
       flat += int64_t(gridDim.x) * blockDim.x)
    y[offsetOf(launch.shape, launch.y, flat)] = x[offsetOf(launch.shape, launch.x, flat)];
}

__global__ void copyRoundedToBf16Kernel(CopyLaunch launch, int64_t total) {
  const auto *x = static_cast<const float *>(launch.x.data);
  auto *y = static_cast<__nv_bfloat16 *>(launch.y.data);
  for (int64_t flat = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; flat < total;
       flat += int64_t(gridDim.x) * blockDim.x)
    y[offsetOf(launch.shape, launch.y, flat)] = __float2bfloat16_rn(x[offsetOf(launch.shape, launch.x, flat)]);
}

}  // namespace

cudaError_t launchReduce(const ReduceLaunch &launch, cudaStream_t stream) {
  const int64_t kept = launch.rows.kept.count();
  if (kept == 0) return cudaSuccess;
  reduceKernel<<<gridFor(kept, kThreads / 32), kThreads, 0, stream>>>(launch, kept, launch.rows.reduced.count());
  return cudaGetLastError();
}

cudaError_t launchVariance(const VarianceLaunch &launch, cudaStream_t stream) {
  const int64_t kept = launch.rows.kept.count();
  if (kept == 0) return cudaSuccess;
  varianceKernel<<<gridFor(kept, kThreads / 32), kThreads, 0, stream>>>(launch, kept, launch.rows.reduced.count());
  return cudaGetLastError();
}

cudaError_t launchGather(const GatherLaunch &launch, cudaStream_t stream) {
  const int64_t total = launch.ids.count() * launch.width;
  if (total == 0) return cudaSuccess;
  gatherKernel<<<gridFor(total, kThreads), kThreads, 0, stream>>>(launch, total);
  return cudaGetLastError();
}

cudaError_t launchCopy(const CopyLaunch &launch, cudaStream_t stream) {
  const int64_t total = launch.shape.count();
  if (total == 0) return cudaSuccess;
  const unsigned grid = gridFor(total, kThreads);
  if (launch.roundToBf16) {
    copyRoundedToBf16Kernel<<<grid, kThreads, 0, stream>>>(launch, total);
    return cudaGetLastError();
  }
  switch (launch.elementSize) {
    case 1: copyKernel<uint8_t><<<grid, kThreads, 0, stream>>>(launch, total); break;
    case 2: copyKernel<uint16_t><<<grid, kThreads, 0, stream>>>(launch, total); break;
    case 4: copyKernel<uint32_t><<<grid, kThreads, 0, stream>>>(launch, total); break;
    case 8: copyKernel<unsigned long long><<<grid, kThreads, 0, stream>>>(launch, total); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ein::cuda
