// Softmax and layernorm over the last axis: one block per row (grid-stride
// over rows), block-wide reductions in f32. Rows are read again for each pass
// instead of being staged, so y may alias x as on the CPU (each element is
// read and written by the same thread in the last pass).
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"

namespace ein::cuda {
namespace {

constexpr int kMaxThreads = 256;

// Sum (or max, ignoring NaN) over the block; every thread gets the result.
template <bool kMax>
__device__ float blockReduce(float value, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  value = kMax ? warpMax(value) : warpSum(value);
  __syncthreads();  // scratch may still be read from the previous reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  float total = kMax ? -INFINITY : 0.0f;
  for (int w = 0; w < warps; ++w) total = kMax ? fmaxf(total, scratch[w]) : total + scratch[w];
  return total;
}

__global__ void softmaxKernel(SoftmaxLaunch launch, int64_t rowCount) {
  __shared__ float scratch[32];
  const int64_t n = launch.length;
  const auto *x = static_cast<const float *>(launch.x.view.data);
  auto *y = static_cast<float *>(launch.y.view.data);
  for (int64_t row = blockIdx.x; row < rowCount; row += gridDim.x) {
    const int64_t xBase = offsetOf(launch.rows, launch.x.view, row), yBase = offsetOf(launch.rows, launch.y.view, row);
    float max = -INFINITY;
    bool sawNan = false;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
      const float value = x[xBase + c * launch.x.step];
      sawNan |= isnan(value);
      max = fmaxf(max, value);
    }
    max = blockReduce<true>(max, scratch);
    if (__syncthreads_or(sawNan)) max = NAN;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) sum += expf(x[xBase + c * launch.x.step] - max);
    sum = blockReduce<false>(sum, scratch);
    const float inverse = 1.0f / sum;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
      y[yBase + c * launch.y.step] = expf(x[xBase + c * launch.x.step] - max) * inverse;
  }
}

__global__ void layerNormKernel(LayerNormLaunch launch, int64_t rowCount) {
  __shared__ float scratch[32];
  const int64_t n = launch.length;
  const auto *x = static_cast<const float *>(launch.x.view.data);
  const auto *residual = static_cast<const float *>(launch.residual.view.data);
  auto *sum = static_cast<float *>(launch.sum.view.data);
  auto *y = static_cast<float *>(launch.y.view.data);
  for (int64_t row = blockIdx.x; row < rowCount; row += gridDim.x) {
    const int64_t xBase = offsetOf(launch.rows, launch.x.view, row), yBase = offsetOf(launch.rows, launch.y.view, row);
    const int64_t rBase = residual ? offsetOf(launch.rows, launch.residual.view, row) : 0;
    const int64_t sBase = sum ? offsetOf(launch.rows, launch.sum.view, row) : 0;
    auto valueAt = [&](int64_t c) {
      float value = x[xBase + c * launch.x.step];
      if (residual) value += residual[rBase + c * launch.residual.step];
      return value;
    };
    // RMSNorm does not centre: its squares are about 0.
    const bool rms = launch.variant == LayerNormVariant::Rms;
    float total = 0.0f;
    if (!rms)
      for (int64_t c = threadIdx.x; c < n; c += blockDim.x) total += valueAt(c);
    const float mean = rms ? 0.0f : blockReduce<false>(total, scratch) / static_cast<float>(n);
    float squares = 0.0f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
      const float centred = valueAt(c) - mean;
      squares += centred * centred;
    }
    squares = blockReduce<false>(squares, scratch);
    const float scale = launch.variant == LayerNormVariant::UnbiasedStd
                            ? 1.0f / (sqrtf(squares / static_cast<float>(n - 1)) + launch.epsilon)
                            : 1.0f / sqrtf(squares / static_cast<float>(n) + launch.epsilon);
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
      const float value = valueAt(c);
      if (sum) sum[sBase + c * launch.sum.step] = value;
      float out = (value - mean) * scale;
      if (launch.gamma.data) out *= launch.gamma.data[launch.gamma.offset + c * launch.gamma.stride];
      if (launch.beta.data) out += launch.beta.data[launch.beta.offset + c * launch.beta.stride];
      y[yBase + c * launch.y.step] = out;
    }
  }
}

int threadsFor(int64_t length) {
  int64_t threads = (length + 31) / 32 * 32;
  return static_cast<int>(threads < 32 ? 32 : threads > kMaxThreads ? kMaxThreads : threads);
}

unsigned blocksFor(int64_t rows) { return static_cast<unsigned>(rows < 65536 * 4 ? rows : 65536 * 4); }

}  // namespace

cudaError_t launchSoftmax(const SoftmaxLaunch &launch, cudaStream_t stream) {
  const int64_t rows = launch.rows.count();
  if (rows == 0 || launch.length == 0) return cudaSuccess;
  softmaxKernel<<<blocksFor(rows), threadsFor(launch.length), 0, stream>>>(launch, rows);
  return cudaGetLastError();
}

cudaError_t launchLayerNorm(const LayerNormLaunch &launch, cudaStream_t stream) {
  const int64_t rows = launch.rows.count();
  if (rows == 0 || launch.length == 0) return cudaSuccess;
  layerNormKernel<<<blocksFor(rows), threadsFor(launch.length), 0, stream>>>(launch, rows);
  return cudaGetLastError();
}

}  // namespace ein::cuda
