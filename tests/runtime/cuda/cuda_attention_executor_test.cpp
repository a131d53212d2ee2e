// Tensor-core attention through the executor, as a compiled model reaches it:
// artifacts at bf16 and fp16 with head dims 64 and 128, q/k/v as strided
// views split from one fused qkv tensor (batch axes batch and heads),
// cross-attention (k and v from another tensor, other lengths), Keep
// (causal), Add and Drop masks broadcast over heads, causal attention as
// scaled_dot_product_attention(causal=true) compiles it (causal positions:
// a chunk of queries after cached keys, queries folding grouped heads; the
// kernels skip the key tiles no query of a block sees), odd and tiny lengths.
// Each is compared with attention in double on the host from the same
// bf16/fp16-rounded q, k and v, at 5e-3 (bf16) and 1e-3 (fp16) relative
// (runtime/src/backends/cuda/README.md), and at fp32 (the fp32 flash kernel)
// at 1e-4. The executor picks the key tile for this device's shared memory.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "ein/half_float.hpp"

namespace ein::testing {
namespace {

struct Arithmetic {
  fb::Precision precision;
  double tolerance;
  const char *name;
  float round(float value) const {
    if (precision == fb::Precision::Fp32) return value;
    return precision == fb::Precision::Bf16 ? bfloatToFloat(floatToBfloat(value)) : halfToFloat(floatToHalf(value));
  }
};
const Arithmetic kArithmetics[] = {
    {fb::Precision::Bf16, 5e-3, "bf16"}, {fb::Precision::Fp16, 1e-3, "fp16"}, {fb::Precision::Fp32, 1e-4, "fp32"}};

struct ExecutorCase {
  const char *name;
  int64_t batch, heads, queries, keys, dim;
  bool fusedQkv;  // q, k, v from one [b, n, 3, h, d] tensor; else q [b, i, h, d] and kv [b, j, 2, h, d]
  fb::MaskKind mask;  // Keep: causal [i, j]; Add: f32 [b, i, j]; Drop: bool [b, i, j] (both broadcast over heads)
  int64_t causalPositions = 0;  // > 0: query i sees key j <= i % P + keys - P
};

const ExecutorCase kCases[] = {
    {"self-attention, fused qkv, d 64, odd length", 2, 3, 77, 77, 64, true, fb::MaskKind::None},
    {"self-attention, fused qkv, d 128, causal", 1, 2, 131, 131, 128, true, fb::MaskKind::Keep},
    {"self-attention, fused qkv, d 64, causal, several key tiles", 1, 2, 200, 200, 64, true, fb::MaskKind::Keep},
    {"cross-attention, d 64, additive mask", 2, 2, 33, 150, 64, false, fb::MaskKind::Add},
    {"cross-attention, d 128, drop mask, 7 keys", 1, 3, 65, 7, 128, false, fb::MaskKind::Drop},
    {"cross-attention, d 128, one query", 3, 1, 1, 257, 128, false, fb::MaskKind::None},
    {"cross-attention, d 64, one key", 2, 2, 19, 1, 64, false, fb::MaskKind::None},
    {"self-attention, fused qkv, d 64, causal positions, several key tiles", 1, 2, 200, 200, 64, true,
     fb::MaskKind::None, 200},
    {"d 128, causal positions, a chunk of 70 queries after 130 cached keys", 2, 1, 70, 200, 128, false,
     fb::MaskKind::None, 70},
    {"d 64, causal positions, 3 grouped heads folded into 150 queries, additive mask", 1, 2, 150, 90, 64, false,
     fb::MaskKind::Add, 50},
    {"d 128, causal positions, one query decoding after 256 cached keys", 2, 2, 1, 257, 128, false,
     fb::MaskKind::None, 1},
};

// A row-major [b, n, parts, h, d] tensor's view of part `part` as [b, h, n, d].
ViewSpec partView(uint32_t tensor, int64_t n, int64_t parts, int64_t heads, int64_t dim, int64_t part) {
  return ViewSpec{tensor, part * heads * dim, {n * parts * heads * dim, dim, parts * heads * dim, 1}};
}

// Element [b, h, t, x] of part `part` of a row-major [b, n, parts, h, d] array.
float partAt(const std::vector<float> &values, int64_t n, int64_t parts, int64_t heads, int64_t dim, int64_t part,
             int64_t b, int64_t h, int64_t t, int64_t x) {
  return values[(((b * n + t) * parts + part) * heads + h) * dim + x];
}

void runExecutorCase(const ExecutorCase &c, const Arithmetic &arithmetic, Device device = Device::Cuda) {
  SCOPED_TRACE(::testing::Message() << c.name << ", " << arithmetic.name);
  const int64_t B = c.batch, H = c.heads, I = c.queries, J = c.keys, D = c.dim;
  const float scale = 1.0f / std::sqrt(float(D));
  // Fused: qkv [B, I, 3, H, D]. Cross: q [B, I, 1, H, D], kv [B, J, 2, H, D].
  const std::vector<float> first = randomFloats(B * I * (c.fusedQkv ? 3 : 1) * H * D, 50);
  const std::vector<float> second = c.fusedQkv ? std::vector<float>() : randomFloats(B * J * 2 * H * D, 51);
  std::vector<uint8_t> flags(c.mask == fb::MaskKind::Keep ? I * J : B * I * J);
  std::vector<float> additive;
  if (c.mask == fb::MaskKind::Keep)
    for (int64_t i = 0; i < I; ++i)
      for (int64_t j = 0; j < J; ++j) flags[i * J + j] = j <= i + J - I;
  if (c.mask == fb::MaskKind::Drop) {
    const std::vector<float> draws = randomFloats(flags.size(), 52, 0.0f, 1.0f);
    for (size_t at = 0; at < flags.size(); ++at) flags[at] = draws[at] < 0.3f;
  }
  if (c.mask == fb::MaskKind::Add) {
    additive = randomFloats(B * I * J, 53);
    if (B > 1)
      for (int64_t j = 0; j < J; ++j) additive[(1 * I + 2) * J + j] = -INFINITY;  // batch 1, query 2: a NaN row
  }
  const float dropFill = -1e4f;

  ArtifactBuilder builder;
  builder.target = device == Device::Cuda ? fb::Target::Cuda : fb::Target::Cpu;
  builder.precision = arithmetic.precision;
  AttentionSpec spec{{B, H}, I, J, D, D, scale};
  if (c.fusedQkv) {
    const uint32_t qkv = builder.input("qkv", fb::DType::F32, {B, I, 3, H, D});
    spec.q = partView(qkv, I, 3, H, D, 0);
    spec.k = partView(qkv, I, 3, H, D, 1);
    spec.v = partView(qkv, I, 3, H, D, 2);
  } else {
    const uint32_t q = builder.input("q", fb::DType::F32, {B, I, H, D});
    const uint32_t kv = builder.input("kv", fb::DType::F32, {B, J, 2, H, D});
    spec.q = partView(q, I, 1, H, D, 0);
    spec.k = partView(kv, J, 2, H, D, 0);
    spec.v = partView(kv, J, 2, H, D, 1);
  }
  const uint32_t out = builder.output("out", fb::DType::F32, {B, I, H, D});
  spec.out = partView(out, I, 1, H, D, 0);
  spec.maskKind = c.mask;
  spec.causalPositions = c.causalPositions;
  if (c.mask == fb::MaskKind::Keep) {
    spec.mask = ViewSpec{builder.input("mask", fb::DType::Bool, {I, J}), 0, {0, 0, J, 1}};
  } else if (c.mask == fb::MaskKind::Add) {
    spec.mask = ViewSpec{builder.input("mask", fb::DType::F32, {B, I, J}), 0, {I * J, 0, J, 1}};
  } else if (c.mask == fb::MaskKind::Drop) {
    spec.mask = ViewSpec{builder.input("mask", fb::DType::Bool, {B, I, J}), 0, {I * J, 0, J, 1}};
    spec.maskFill = dropFill;
  }
  builder.attention(spec);
  std::map<std::string, std::vector<uint8_t>> inputs;
  inputs[c.fusedQkv ? "qkv" : "q"] = bytesOf(first);
  if (!c.fusedQkv) inputs["kv"] = bytesOf(second);
  if (c.mask == fb::MaskKind::Add) inputs["mask"] = bytesOf(additive);
  else if (c.mask != fb::MaskKind::None) inputs["mask"] = flags;

  StatusOr<Outputs> got = runOn(device, builder.build(), inputs);
  ASSERT_TRUE(got.ok()) << got.status().toString();

  // The reference, from the rounded operands, in double.
  auto q = [&](int64_t b, int64_t h, int64_t i, int64_t x) {
    return arithmetic.round(c.fusedQkv ? partAt(first, I, 3, H, D, 0, b, h, i, x) : partAt(first, I, 1, H, D, 0, b, h, i, x));
  };
  auto kv = [&](int part, int64_t b, int64_t h, int64_t j, int64_t x) {
    return arithmetic.round(c.fusedQkv ? partAt(first, I, 3, H, D, 1 + part, b, h, j, x)
                                       : partAt(second, J, 2, H, D, part, b, h, j, x));
  };
  std::vector<double> want(B * I * H * D), scores(J);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < I; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < J; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < D; ++x) dot += double(q(b, h, i, x)) * kv(0, b, h, j, x);
          double score = double(scale) * dot;
          if (c.mask == fb::MaskKind::Keep && !flags[i * J + j]) score = -INFINITY;
          if (c.causalPositions > 0 && j > i % c.causalPositions + J - c.causalPositions) score = -INFINITY;
          if (c.mask == fb::MaskKind::Add) score += additive[(b * I + i) * J + j];
          if (c.mask == fb::MaskKind::Drop && flags[(b * I + i) * J + j]) score = dropFill;
          scores[j] = score;
          max = std::max(max, score);
        }
        double sum = 0;
        for (double &s : scores) sum += s = std::exp(s - max);  // a row of all -inf: NaN, as the schema says
        for (int64_t x = 0; x < D; ++x) {
          double value = 0;
          for (int64_t j = 0; j < J; ++j) value += scores[j] / sum * kv(1, b, h, j, x);
          want[((b * I + i) * H + h) * D + x] = value;
        }
      }
  expectClose(got.value().at("out"), want, arithmetic.tolerance, "out");
}

TEST(CudaAttentionExecutor, TensorCoresBf16) {
  EIN_REQUIRE_CUDA();
  for (const ExecutorCase &c : kCases) runExecutorCase(c, kArithmetics[0]);
}

TEST(CudaAttentionExecutor, TensorCoresFp16) {
  EIN_REQUIRE_CUDA();
  for (const ExecutorCase &c : kCases) runExecutorCase(c, kArithmetics[1]);
}

TEST(CudaAttentionExecutor, FlashFp32) {
  EIN_REQUIRE_CUDA();
  for (const ExecutorCase &c : kCases) runExecutorCase(c, kArithmetics[2]);
}

// The cases' artifacts and their reference, checked on the CPU at fp32 in every
// build: a failure on the GPU then points at the GPU, not at the test.
TEST(CudaAttentionExecutor, CasesAndReferenceHoldOnTheCpu) {
  for (const ExecutorCase &c : kCases) runExecutorCase(c, kArithmetics[2], Device::Cpu);
}

}  // namespace
}  // namespace ein::testing
