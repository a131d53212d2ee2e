// The gemm for views cuBLASLt cannot take (any strides, broadcast batches),
// and the epilogue that follows a library gemm when cuBLASLt's own epilogues
// do not cover the step. fp32 arithmetic (bf16 weights b widened as they are
// read): 16 x 16 output tiles, shared-memory panels of a and b, the epilogue fused.
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

constexpr int kTile = kGemmTile;

__device__ __forceinline__ int64_t batchOffset(const Shape &batch, const DeviceView &view, int64_t flat) {
  return offsetOf(batch, view, flat);
}

// Row tiles blockIdx.y, blockIdx.y + gridDim.y, ... and batches likewise on z
// (tiledGemmGrid clamps both to 65535). The loops are uniform across the
// block, so the __syncthreads inside are reached by every thread.
__global__ void gemmTiledKernel(GemmLaunch launch, int64_t batches, int64_t rowTiles) {
  __shared__ float aTile[kTile][kTile + 1];
  __shared__ float bTile[kTile][kTile + 1];
  const int r = launch.batch.rank;
  const auto *a = static_cast<const float *>(launch.a.data);
  const auto *b = static_cast<const float *>(launch.b.data);
  const auto *bBf16 = static_cast<const uint16_t *>(launch.b.data);
  const bool bf16Weights = launch.bType == ElementType::BF16;
  auto *c = static_cast<float *>(launch.c.data);
  const auto *bias = static_cast<const float *>(launch.bias.data);
  const auto *residual = static_cast<const float *>(launch.residual.data);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t column = blockIdx.x * int64_t(kTile) + tx;
  for (int64_t batch = blockIdx.z; batch < batches; batch += gridDim.z)
  for (int64_t rowTile = blockIdx.y; rowTile < rowTiles; rowTile += gridDim.y) {
    const int64_t row = rowTile * kTile + ty;
    const int64_t aBase = batchOffset(launch.batch, launch.a, batch), bBase = batchOffset(launch.batch, launch.b, batch);
    float sum = 0.0f;
    for (int64_t k0 = 0; k0 < launch.k; k0 += kTile) {
      const int64_t aRow = row, aK = k0 + tx;
      aTile[ty][tx] = aRow < launch.m && aK < launch.k
                          ? a[aBase + aRow * launch.a.stride[r] + aK * launch.a.stride[r + 1]] : 0.0f;
      const int64_t bK = k0 + ty, bColumn = blockIdx.x * int64_t(kTile) + tx;
      const int64_t bAt = bBase + bK * launch.b.stride[r] + bColumn * launch.b.stride[r + 1];
      bTile[ty][tx] = bK < launch.k && bColumn < launch.n
                          ? (bf16Weights ? __uint_as_float(uint32_t(bBf16[bAt]) << 16) : b[bAt]) : 0.0f;
      __syncthreads();
#pragma unroll
      for (int p = 0; p < kTile; ++p) sum = fmaf(aTile[ty][p], bTile[p][tx], sum);
      __syncthreads();
    }
    if (row < launch.m && column < launch.n) {
      float value = launch.alpha * sum;
      if (bias)
        value += bias[batchOffset(launch.batch, launch.bias, batch) + row * launch.bias.stride[r] +
                      column * launch.bias.stride[r + 1]];
      value = ops::activate(launch.activation, value);
      if (residual)
        value += residual[batchOffset(launch.batch, launch.residual, batch) + row * launch.residual.stride[r] +
                          column * launch.residual.stride[r + 1]];
      c[batchOffset(launch.batch, launch.c, batch) + row * launch.c.stride[r] + column * launch.c.stride[r + 1]] = value;
    }
  }
}

__global__ void gemmEpilogueKernel(GemmLaunch launch, int64_t total) {
  const int r = launch.batch.rank;
  auto *c = static_cast<float *>(launch.c.data);
  const auto *bias = static_cast<const float *>(launch.bias.data);
  const auto *residual = static_cast<const float *>(launch.residual.data);
  for (int64_t flat = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; flat < total;
       flat += int64_t(gridDim.x) * blockDim.x) {
    const int64_t column = flat % launch.n, row = flat / launch.n % launch.m, batch = flat / launch.n / launch.m;
    float &out = c[batchOffset(launch.batch, launch.c, batch) + row * launch.c.stride[r] + column * launch.c.stride[r + 1]];
    float value = out;
    if (bias)
      value += bias[batchOffset(launch.batch, launch.bias, batch) + row * launch.bias.stride[r] +
                    column * launch.bias.stride[r + 1]];
    value = ops::activate(launch.activation, value);
    if (residual)
      value += residual[batchOffset(launch.batch, launch.residual, batch) + row * launch.residual.stride[r] +
                        column * launch.residual.stride[r + 1]];
    out = value;
  }
}

}  // namespace

cudaError_t launchGemmTiled(const GemmLaunch &launch, cudaStream_t stream) {
  const int64_t batches = launch.batch.count();
  if (batches == 0 || launch.m == 0 || launch.n == 0) return cudaSuccess;
  const TiledGemmGrid plan = tiledGemmGrid(launch.m, launch.n, batches);
  if (!plan.ok) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(plan.x), static_cast<unsigned>(plan.y), static_cast<unsigned>(plan.z));
  gemmTiledKernel<<<grid, dim3(kTile, kTile), 0, stream>>>(launch, batches, plan.rowTiles);
  return cudaGetLastError();
}

cudaError_t launchGemmEpilogue(const GemmLaunch &launch, cudaStream_t stream) {
  const int64_t total = launch.batch.count() * launch.m * launch.n;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + 255) / 256;
  gemmEpilogueKernel<<<static_cast<unsigned>(blocks < 65536 * 8 ? blocks : 65536 * 8), 256, 0, stream>>>(launch, total);
  return cudaGetLastError();
}

}  // namespace ein::cuda
