// The tensor-core attention kernel (flash2; bf16 and fp16, head_dim 64 and 128) called directly,
// against attention in double on the host from the same bf16/fp16-rounded
// q, k and v, so the tolerance measures the kernel (P rounded before P V,
// f32 accumulation) rather than the inputs' rounding: 5e-3 (bf16) and 1e-3
// (fp16) relative, as runtime/src/backends/cuda/README.md explains. Also the fp32
// flash kernel on the unrounded data, at the fp32 tolerance.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cuda/kernels.hpp"
#include "cuda_test_support.hpp"
#include "ein/half_float.hpp"

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

enum class Kernel { F32Flash, Flash2 };

// `values` as the kernel sees them: rounded to bf16 or fp16 on tensor cores.
std::vector<float> roundedFor(ec::Precision precision, std::vector<float> values) {
  for (float &value : values)
    if (precision == ec::Precision::Bf16) value = bfloatToFloat(floatToBfloat(value));
    else if (precision == ec::Precision::Fp16) value = halfToFloat(floatToHalf(value));
  return values;
}

void runCase(const Case &c, Kernel kernel, ec::Precision precision, double tolerance) {
  SCOPED_TRACE(::testing::Message() << (kernel == Kernel::Flash2 ? "flash2" : "f32") << " batch " << c.batch
                                    << " queries " << c.queries << " keys " << c.keys << " d " << c.dim
                                    << (c.causalMask ? " causal" : ""));
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
  DeviceArray scratch(kernel == Kernel::Flash2 ? ec::attentionFlash2ScratchBytes(launch) : 0);
  const cudaError_t launched =
      kernel == Kernel::F32Flash ? ec::launchAttentionF32Flash(launch, nullptr)
                                 : ec::launchAttentionFlash2(launch, precision, scratch.data, nullptr);
  ASSERT_EQ(launched, cudaSuccess) << cudaGetErrorString(launched);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> got(q.size());
  ASSERT_EQ(cudaMemcpy(got.data(), dout.data, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  expectClose(got,
              reference(c, roundedFor(precision, q), roundedFor(precision, k), roundedFor(precision, v), launch.scale),
              tolerance, "attention");
}

// Several query blocks of both kernels (64 and 128 queries) and partial key tiles.
const Case kCases[] = {
    {2, 64, 64, 64, false}, {3, 100, 130, 64, true},  {1, 1, 257, 128, false},
    {2, 77, 50, 128, true}, {1, 300, 200, 128, true}, {2, 129, 65, 64, false},
};

void runTensorCoreCases(ec::Precision precision, double tolerance) {
  for (const Case &c : kCases) runCase(c, Kernel::Flash2, precision, tolerance);
}

TEST(CudaAttention, TensorCoresBf16) {
  EIN_REQUIRE_CUDA();
  runTensorCoreCases(ec::Precision::Bf16, 5e-3);
}

TEST(CudaAttention, TensorCoresFp16) {
  EIN_REQUIRE_CUDA();
  runTensorCoreCases(ec::Precision::Fp16, 1e-3);
}

// Only what the tensor-core kernel is built for launches: not fp32
// arithmetic, nor a head dim other than 64 and 128.
TEST(CudaAttention, TensorCoresRefuseWhatTheyAreNotBuiltFor) {
  EIN_REQUIRE_CUDA();
  ec::AttentionLaunch launch;
  launch.batch.rank = 1;
  launch.batch.size[0] = 1;
  launch.queries = launch.keys = 4;
  launch.headDim = launch.valueDim = 64;
  EXPECT_EQ(ec::launchAttentionFlash2(launch, ec::Precision::Fp32, nullptr, nullptr), cudaErrorInvalidValue);
  launch.headDim = launch.valueDim = 96;
  EXPECT_FALSE(ec::attentionFlash2Supports(launch));
  EXPECT_EQ(ec::launchAttentionFlash2(launch, ec::Precision::Bf16, nullptr, nullptr), cudaErrorInvalidValue);
}

TEST(CudaAttention, FlashF32) {
  EIN_REQUIRE_CUDA();
  for (const Case &c : kCases) runCase(c, Kernel::F32Flash, ec::Precision::Fp32, 1e-4);
}

}  // namespace
}  // namespace ein::testing
