// The tensor-core attention kernel (bf16 and fp16, head_dim 64 and 128)
// called directly, against attention in double on the host, with the
// per-precision tolerances of runtime/src/cuda/README.md. Also the fp32
// flash kernel on the same data, at the fp32 tolerance.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/kernels.hpp"
#include "cuda_test_support.hpp"

namespace ein::testing {
namespace {

namespace ec = ein::cuda;

struct DeviceArray {
  void *data = nullptr;
  explicit DeviceArray(size_t bytes) { EXPECT_EQ(cudaMalloc(&data, bytes < 4 ? 4 : bytes), cudaSuccess); }
  ~DeviceArray() { cudaFree(data); }
};

struct Case {
  int64_t batch, queries, keys, dim;
  bool causalMask;  // a bool Keep mask: key j visible to query i when j <= i + keys - queries
};

// out[b, i, :] for q [b, i, d], k [b, j, d], v [b, j, d], in double.
std::vector<double> reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                              const std::vector<float> &v, float scale) {
  const int64_t d = c.dim;
  std::vector<double> out(c.batch * c.queries * d), scores(c.keys);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.queries; ++i) {
      double max = -INFINITY;
      for (int64_t j = 0; j < c.keys; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += double(q[(b * c.queries + i) * d + x]) * k[(b * c.keys + j) * d + x];
        scores[j] = scale * dot;
        if (c.causalMask && j > i + c.keys - c.queries) scores[j] = -INFINITY;
        max = std::max(max, scores[j]);
      }
      double sum = 0;
      for (double &s : scores) sum += s = std::exp(s - max);
      for (int64_t e = 0; e < d; ++e) {
        double value = 0;
        for (int64_t j = 0; j < c.keys; ++j) value += scores[j] / sum * v[(b * c.keys + j) * d + e];
        out[(b * c.queries + i) * d + e] = value;
      }
    }
  return out;
}

void runCase(const Case &c, int kernel /* 0 fp32, 1 bf16, 2 fp16 */, double tolerance) {
  const int64_t d = c.dim;
  std::vector<float> q = randomFloats(c.batch * c.queries * d, 40), k = randomFloats(c.batch * c.keys * d, 41),
                     v = randomFloats(c.batch * c.keys * d, 42);
  std::vector<uint8_t> keep(c.batch * c.queries * c.keys);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.queries; ++i)
      for (int64_t j = 0; j < c.keys; ++j) keep[(b * c.queries + i) * c.keys + j] = j <= i + c.keys - c.queries;
  DeviceArray dq(q.size() * 4), dk(k.size() * 4), dv(v.size() * 4), dout(q.size() * 4), dmask(keep.size());
  ASSERT_EQ(cudaMemcpy(dq.data, q.data(), q.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.data, k.data(), k.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.data, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dmask.data, keep.data(), keep.size(), cudaMemcpyHostToDevice), cudaSuccess);

  ec::AttentionLaunch launch;
  launch.batch.rank = 1;
  launch.batch.size[0] = c.batch;
  launch.queries = c.queries;
  launch.keys = c.keys;
  launch.headDim = launch.valueDim = d;
  launch.scale = 1.0f / std::sqrt(float(d));
  auto view = [](void *data, int64_t rows, int64_t dim) {
    ec::DeviceView out;
    out.data = data;
    out.stride[0] = rows * dim;
    out.stride[1] = dim;
    out.stride[2] = 1;
    return out;
  };
  launch.q = view(dq.data, c.queries, d);
  launch.k = view(dk.data, c.keys, d);
  launch.v = view(dv.data, c.keys, d);
  launch.out = view(dout.data, c.queries, d);
  if (c.causalMask) {
    launch.mask = view(dmask.data, c.queries, c.keys);
    launch.maskKind = ec::MaskKind::Keep;
    launch.maskFill = -INFINITY;
  }
  const cudaError_t launched =
      kernel == 0 ? ec::launchAttentionF32Flash(launch, nullptr)
                  : ec::launchAttentionMma(launch, kernel == 1 ? ec::Precision::Bf16 : ec::Precision::Fp16, nullptr);
  ASSERT_EQ(launched, cudaSuccess) << cudaGetErrorString(launched);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(q.size());
  ASSERT_EQ(cudaMemcpy(got.data(), dout.data, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  expectClose(got, reference(c, q, k, v, launch.scale), tolerance, "attention");
}

const Case kCases[] = {
    {2, 64, 64, 64, false}, {3, 100, 130, 64, true}, {1, 1, 257, 128, false}, {2, 77, 50, 128, true},
};

TEST(CudaAttention, TensorCoresBf16) {
  EIN_REQUIRE_CUDA();
  for (const Case &c : kCases) runCase(c, 1, 2e-2);
}

TEST(CudaAttention, TensorCoresFp16) {
  EIN_REQUIRE_CUDA();
  for (const Case &c : kCases) runCase(c, 2, 5e-3);
}

TEST(CudaAttention, FlashF32) {
  EIN_REQUIRE_CUDA();
  for (const Case &c : kCases) runCase(c, 0, 1e-4);
}

}  // namespace
}  // namespace ein::testing
