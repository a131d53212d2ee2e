// Talking-heads attention in fp32. The heads of a query are mixed with each
// other before the softmax (pre_mix) and after it (post_mix), so a block keeps
// all heads of one query together: block = (batch index, query). Keys are
// walked in tiles of 32 twice: the first pass finds each mixed head's max and
// sum (an online softmax), the second forms the probabilities, mixes them and
// accumulates the values. Semantics as the reference (a row of all -inf or
// any NaN gives NaN, and post_mix spreads it as it does there).
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"

namespace ein::cuda {
namespace {

constexpr int kThreads = 128, kKeys = 32;

struct SharedLayout {
  size_t qRows, raw, logits, acc, preW, postW, preB, postB, max, sum, nan, floats;
  explicit __host__ __device__ SharedLayout(const TalkingHeadsLaunch &launch) {
    const size_t h = size_t(launch.heads);
    qRows = 0;
    raw = qRows + h * size_t(launch.headDim);
    logits = raw + h * kKeys;
    acc = logits + h * kKeys;
    preW = acc + h * size_t(launch.valueDim);
    postW = preW + h * h;
    preB = postW + h * h;
    postB = preB + h;
    max = postB + h;
    sum = max + h;
    nan = sum + h;
    floats = nan + h;
  }
};

__global__ void __launch_bounds__(kThreads) talkingHeadsKernel(TalkingHeadsLaunch launch) {
  extern __shared__ float shared[];
  const SharedLayout layout(launch);
  float *qRows = shared + layout.qRows, *raw = shared + layout.raw, *logits = shared + layout.logits,
        *acc = shared + layout.acc, *preW = shared + layout.preW, *postW = shared + layout.postW,
        *preB = shared + layout.preB, *postB = shared + layout.postB, *rowMax = shared + layout.max,
        *rowSum = shared + layout.sum, *rowNan = shared + layout.nan;
  const int64_t H = launch.heads, D = launch.headDim, E = launch.valueDim, keys = launch.keys;
  const int r = launch.batch.rank;
  const int64_t batch = blockIdx.x / launch.queries, i = blockIdx.x % launch.queries;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = kThreads / 32;
  const auto *q = static_cast<const float *>(launch.q.data);
  const auto *k = static_cast<const float *>(launch.k.data);
  const auto *v = static_cast<const float *>(launch.v.data);
  auto *out = static_cast<float *>(launch.out.data);
  const int64_t qBase = offsetOf(launch.batch, launch.q, batch) + i * launch.q.stride[r + 1];
  const int64_t kBase = offsetOf(launch.batch, launch.k, batch), vBase = offsetOf(launch.batch, launch.v, batch);
  const int64_t oBase = offsetOf(launch.batch, launch.out, batch) + i * launch.out.stride[r + 1];
  const int64_t mBase = launch.mask.data ? offsetOf(launch.batch, launch.mask, batch) + i * launch.mask.stride[r + 1] : 0;

  for (int64_t at = threadIdx.x; at < H * D; at += kThreads)
    qRows[at] = q[qBase + at / D * launch.q.stride[r] + at % D * launch.q.stride[r + 2]];
  for (int64_t at = threadIdx.x; at < H * E; at += kThreads) acc[at] = 0.0f;
  for (int64_t at = threadIdx.x; at < H * H; at += kThreads) {
    const int64_t g = at / H, h = at % H;
    if (launch.preMix.data)
      preW[at] = launch.preMix.data[launch.preMix.offset + g * launch.preMix.rowStride + h * launch.preMix.columnStride];
    if (launch.postMix.data)
      postW[at] =
          launch.postMix.data[launch.postMix.offset + g * launch.postMix.rowStride + h * launch.postMix.columnStride];
  }
  for (int64_t g = threadIdx.x; g < H; g += kThreads) {
    preB[g] = launch.preBias.data ? launch.preBias.data[launch.preBias.offset + g * launch.preBias.stride] : 0.0f;
    postB[g] = launch.postBias.data ? launch.postBias.data[launch.postBias.offset + g * launch.postBias.stride] : 0.0f;
    rowMax[g] = -INFINITY;
    rowSum[g] = 0.0f;
    rowNan[g] = 0.0f;
  }
  __syncthreads();

  // logits[g][jj] for keys firstKey + jj: scores, pre-mix, mask.
  auto computeLogits = [&](int64_t firstKey) {
    for (int64_t at = threadIdx.x; at < H * kKeys; at += kThreads) {
      const int64_t h = at / kKeys, j = firstKey + at % kKeys;
      float dot = 0.0f;
      if (j < keys) {
        const int64_t kRow = kBase + h * launch.k.stride[r] + j * launch.k.stride[r + 1];
        for (int64_t d = 0; d < D; ++d) dot = fmaf(qRows[h * D + d], k[kRow + d * launch.k.stride[r + 2]], dot);
      }
      raw[at] = launch.scale * dot;
    }
    __syncthreads();
    for (int64_t at = threadIdx.x; at < H * kKeys; at += kThreads) {
      const int64_t g = at / kKeys, jj = at % kKeys, j = firstKey + jj;
      float logit = raw[at];
      if (launch.preMix.data) {
        logit = preB[g];
        for (int64_t h = 0; h < H; ++h) logit = fmaf(preW[g * H + h], raw[h * kKeys + jj], logit);
      }
      if (j < keys && launch.maskKind != MaskKind::None)
        logit = maskScore(launch.maskKind, logit, launch.mask.data,
                          mBase + g * launch.mask.stride[r] + j * launch.mask.stride[r + 2], launch.maskFill);
      logits[at] = logit;
    }
    __syncthreads();
  };

  // Pass 1: each mixed head's max and sum.
  for (int64_t firstKey = 0; firstKey < keys; firstKey += kKeys) {
    computeLogits(firstKey);
    const bool valid = firstKey + lane < keys;
    for (int64_t g = warp; g < H; g += warps) {
      const float logit = valid ? logits[g * kKeys + lane] : -INFINITY;
      const bool nan = warpAny(valid && isnan(logit));
      const float oldMax = rowMax[g], newMax = fmaxf(oldMax, warpMax(logit));
      const float tileSum = warpSum(valid ? expShifted(logit, newMax) : 0.0f);
      __syncwarp();
      if (lane == 0) {
        rowSum[g] = rowSum[g] * expShifted(oldMax, newMax) + tileSum;
        rowMax[g] = newMax;
        if (nan) rowNan[g] = 1.0f;
      }
    }
    __syncthreads();
  }
  for (int64_t g = threadIdx.x; g < H; g += kThreads)
    if (rowNan[g] != 0.0f) rowMax[g] = NAN;
  __syncthreads();

  // Pass 2: probabilities (raw is reused for them), post-mix, values.
  for (int64_t firstKey = 0; firstKey < keys; firstKey += kKeys) {
    computeLogits(firstKey);
    for (int64_t at = threadIdx.x; at < H * kKeys; at += kThreads) {
      const int64_t g = at / kKeys, j = firstKey + at % kKeys;
      raw[at] = j < keys ? expf(logits[at] - rowMax[g]) / rowSum[g] : 0.0f;
    }
    __syncthreads();
    float *probs = raw;
    if (launch.postMix.data) {
      for (int64_t at = threadIdx.x; at < H * kKeys; at += kThreads) {
        const int64_t g = at / kKeys, jj = at % kKeys;
        float mixed = 0.0f;
        if (firstKey + jj < keys) {
          mixed = postB[g];
          for (int64_t h = 0; h < H; ++h) mixed = fmaf(postW[g * H + h], raw[h * kKeys + jj], mixed);
        }
        logits[at] = mixed;
      }
      __syncthreads();
      probs = logits;
    }
    const int64_t tileKeys = keys - firstKey < kKeys ? keys - firstKey : kKeys;
    for (int64_t at = threadIdx.x; at < H * E; at += kThreads) {
      const int64_t g = at / E, e = at % E;
      float sum = acc[at];
      for (int64_t jj = 0; jj < tileKeys; ++jj)
        sum = fmaf(probs[g * kKeys + jj],
                   v[vBase + g * launch.v.stride[r] + (firstKey + jj) * launch.v.stride[r + 1] + e * launch.v.stride[r + 2]],
                   sum);
      acc[at] = sum;
    }
    __syncthreads();
  }

  for (int64_t at = threadIdx.x; at < H * E; at += kThreads)
    out[oBase + at / E * launch.out.stride[r] + at % E * launch.out.stride[r + 2]] = acc[at];
}

}  // namespace

size_t talkingHeadsSharedBytes(const TalkingHeadsLaunch &launch) { return SharedLayout(launch).floats * sizeof(float); }

cudaError_t launchTalkingHeads(const TalkingHeadsLaunch &launch, cudaStream_t stream) {
  const int64_t blocks = launch.batch.count() * launch.queries;
  if (blocks == 0 || launch.heads == 0 || launch.valueDim == 0) return cudaSuccess;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const size_t shared = talkingHeadsSharedBytes(launch);
  if (shared > 48 * 1024) {
    const cudaError_t error =
        cudaFuncSetAttribute(talkingHeadsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
    if (error != cudaSuccess) return error;
  }
  talkingHeadsKernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(launch);
  return cudaGetLastError();
}

}  // namespace ein::cuda
