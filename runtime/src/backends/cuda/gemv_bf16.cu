// The decode gemm over bf16 weights: a few rows of activations times a weight
// matrix read once. Decode is bound by the bytes of the weights, so each warp
// streams one column of b (contiguous along k) with 16-byte loads, several in
// flight before any is used, and multiplies it with every row of a (small,
// served by L1/L2); the warp's sums are reduced by shuffles and lane 0 applies
// the epilogue.
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"

namespace ein::cuda {
namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kLoadsInFlight = 4;  // 16-byte weight loads a lane issues before using them

__device__ __forceinline__ float lowBf16(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float highBf16(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// Rows up to kRows (the smallest of 1, 2, 4, 8 that holds launch.rows), so
// the sums stay in registers.
template <int kRows, bool kVector>
__global__ void __launch_bounds__(kThreads) gemvBf16Kernel(GemvLaunch launch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rows = launch.rows;
  for (int64_t j = int64_t(blockIdx.x) * kWarps + warp; j < launch.n; j += int64_t(gridDim.x) * kWarps) {
    const uint16_t *column = launch.b + launch.bOffset + j * launch.bColumn;
    float sum[kRows] = {};
    if constexpr (kVector) {
      constexpr int64_t kStep = 32 * 8;  // elements a warp's loads cover
      for (int64_t base = lane * 8; base < launch.k; base += kStep * kLoadsInFlight) {
        uint4 weights[kLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
          const int64_t p = base + u * kStep;
          weights[u] = p < launch.k ? __ldg(reinterpret_cast<const uint4 *>(column + p)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
          const int64_t p = base + u * kStep;
          if (p >= launch.k) break;
          const float w[8] = {lowBf16(weights[u].x), highBf16(weights[u].x), lowBf16(weights[u].y),
                              highBf16(weights[u].y), lowBf16(weights[u].z), highBf16(weights[u].z),
                              lowBf16(weights[u].w), highBf16(weights[u].w)};
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            if (r >= rows) break;
            const auto *a = reinterpret_cast<const float4 *>(launch.a + launch.aRow[r] + p);
            const float4 a0 = __ldg(a), a1 = __ldg(a + 1);
            sum[r] = fmaf(a0.x, w[0], sum[r]);
            sum[r] = fmaf(a0.y, w[1], sum[r]);
            sum[r] = fmaf(a0.z, w[2], sum[r]);
            sum[r] = fmaf(a0.w, w[3], sum[r]);
            sum[r] = fmaf(a1.x, w[4], sum[r]);
            sum[r] = fmaf(a1.y, w[5], sum[r]);
            sum[r] = fmaf(a1.z, w[6], sum[r]);
            sum[r] = fmaf(a1.w, w[7], sum[r]);
          }
        }
      }
    } else {
      for (int64_t p = lane; p < launch.k; p += 32) {
        const float w = __uint_as_float(uint32_t(column[p]) << 16);
#pragma unroll
        for (int r = 0; r < kRows; ++r)
          if (r < rows) sum[r] = fmaf(launch.a[launch.aRow[r] + p], w, sum[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) sum[r] = warpSum(sum[r]);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        float value = launch.alpha * sum[r];
        if (launch.bias) value += launch.bias[launch.biasRow[r] + j * launch.biasColumn];
        value = ops::activate(launch.activation, value);
        if (launch.residual) value += launch.residual[launch.residualRow[r] + j * launch.residualColumn];
        launch.c[launch.cRow[r] + j * launch.cColumn] = value;
      }
    }
  }
}

template <int kRows>
void launchRows(const GemvLaunch &launch, unsigned blocks, cudaStream_t stream) {
  if (launch.vectorLoads)
    gemvBf16Kernel<kRows, true><<<blocks, kThreads, 0, stream>>>(launch);
  else
    gemvBf16Kernel<kRows, false><<<blocks, kThreads, 0, stream>>>(launch);
}

bool aligned16(const void *data, int64_t offset, size_t elementBytes) {
  return (reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(offset) * elementBytes) % 16 == 0;
}

}  // namespace

std::optional<GemvLaunch> gemvLaunchFor(const GemmLaunch &gemm) {
  const int r = gemm.batch.rank;
  const int64_t rows = gemm.batch.count() * gemm.m;
  if (gemm.bType != ElementType::BF16 || gemm.aType != ElementType::F32 || rows < 1 || rows > kGemvMaxRows)
    return std::nullopt;
  for (int axis = 0; axis < r; ++axis)
    if (gemm.b.stride[axis] != 0) return std::nullopt;
  if (gemm.k > 1 && (gemm.b.stride[r] != 1 || gemm.a.stride[r + 1] != 1)) return std::nullopt;
  GemvLaunch gemv;
  gemv.rows = static_cast<int32_t>(rows);
  gemv.n = gemm.n;
  gemv.k = gemm.k;
  gemv.a = static_cast<const float *>(gemm.a.data);
  gemv.b = static_cast<const uint16_t *>(gemm.b.data);
  gemv.bOffset = gemm.b.offset;
  gemv.bColumn = gemm.b.stride[r + 1];
  gemv.c = static_cast<float *>(gemm.c.data);
  gemv.cColumn = gemm.c.stride[r + 1];
  gemv.bias = static_cast<const float *>(gemm.bias.data);
  gemv.biasColumn = gemm.bias.stride[r + 1];
  gemv.residual = static_cast<const float *>(gemm.residual.data);
  gemv.residualColumn = gemm.residual.stride[r + 1];
  gemv.alpha = gemm.alpha;
  gemv.activation = gemm.activation;
  gemv.vectorLoads = gemm.k % 8 == 0 && gemv.bColumn % 8 == 0 && aligned16(gemv.b, gemv.bOffset, 2);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t batch = row / gemm.m, i = row % gemm.m;
    gemv.aRow[row] = offsetOf(gemm.batch, gemm.a, batch) + i * gemm.a.stride[r];
    gemv.cRow[row] = offsetOf(gemm.batch, gemm.c, batch) + i * gemm.c.stride[r];
    if (gemv.bias) gemv.biasRow[row] = offsetOf(gemm.batch, gemm.bias, batch) + i * gemm.bias.stride[r];
    if (gemv.residual) gemv.residualRow[row] = offsetOf(gemm.batch, gemm.residual, batch) + i * gemm.residual.stride[r];
    gemv.vectorLoads = gemv.vectorLoads && aligned16(gemv.a, gemv.aRow[row], 4);
  }
  return gemv;
}

cudaError_t launchGemvBf16(const GemvLaunch &launch, cudaStream_t stream) {
  if (launch.rows < 1 || launch.rows > kGemvMaxRows) return cudaErrorInvalidValue;
  if (launch.n == 0) return cudaSuccess;
  const int64_t blocks = (launch.n + kWarps - 1) / kWarps;
  const auto grid = static_cast<unsigned>(blocks < kMaxGridX ? blocks : kMaxGridX);
  if (launch.rows == 1) launchRows<1>(launch, grid, stream);
  else if (launch.rows == 2) launchRows<2>(launch, grid, stream);
  else if (launch.rows <= 4) launchRows<4>(launch, grid, stream);
  else launchRows<8>(launch, grid, stream);
  return cudaGetLastError();
}

}  // namespace ein::cuda
