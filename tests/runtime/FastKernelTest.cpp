// The fast CPU kernels against the reference kernels (their oracle), for every
// instruction set this CPU runs and for one and two threads, on random shapes
// with odd sizes, strided and permuted operands, broadcasts and epilogues.
// Also the vector math and the thread pool they rely on.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>

#include "artifact_builder.hpp"
#include "kernels/cpu/kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

using detail::cpu::IsaKernels;
using detail::cpu::KernelContext;

std::string isaName(const IsaKernels *isa) { return isa->name; }

// --- vector math -------------------------------------------------------------

class VectorMathTest : public ::testing::TestWithParam<const IsaKernels *> {};

TEST_P(VectorMathTest, ExpIsAccurateAndKeepsIeeeSpecials) {
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  for (float v : {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, 88.7f, 88.8f, -87.3f, -87.4f, 1e-8f}) x.push_back(v);
  std::vector<float> y = x;
  GetParam()->expInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::exp(double(x[i]));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
    } else if (want > 3.4028234e38) {
      EXPECT_EQ(y[i], INFINITY) << x[i];
    } else if (x[i] < -87.33f) {
      EXPECT_EQ(y[i], 0.0f) << x[i];  // below exp(-87.33) = 1.183e-38: flushed, never subnormal
    } else if (want < 1.1754944e-38) {
      ADD_FAILURE() << "exp(" << x[i] << ") is subnormal above -87.33";
    } else {
      EXPECT_NEAR(y[i], want, 3e-7 * want) << x[i];
    }
  }
  EXPECT_EQ(y[x.size() - 10], 0.0f);  // exp(-inf) is exactly 0
}

TEST_P(VectorMathTest, ActivationsMatchTheScalarDefinitions) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.00731f) x.push_back(v);
  x.push_back(NAN);
  using detail::Activation;
  for (Activation activation : {Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu}) {
    std::vector<float> y = x;
    GetParam()->activateInPlace(y.data(), static_cast<int64_t>(y.size()), activation);
    for (size_t i = 0; i + 1 < x.size(); ++i) {
      const double v = x[i], want = ops::activate(activation, v);
      ASSERT_NEAR(y[i], want, 5e-7 * std::max(1.0, std::fabs(want))) << "activation " << int(activation) << " at " << v;
    }
    // NaN stays NaN, except relu (x > 0 ? x : 0 gives 0).
    if (activation == Activation::Relu) EXPECT_EQ(y.back(), 0.0f);
    else EXPECT_TRUE(std::isnan(y.back()));
  }
}

// Every opcode of the vector interpreter (its vector form, or the per-lane
// path for those without one) against its scalar definition in double, on
// values that cross zero, ties between operands, and NaN.
TEST_P(VectorMathTest, ElementwiseOpcodesMatchTheScalarDefinitions) {
  constexpr int64_t kBlock = static_cast<int64_t>(detail::cpu::kElementwiseBlock), count = kBlock - 3;
  std::vector<float> registers(4 * kBlock, 0.0f);
  float *a = registers.data(), *b = a + kBlock, *c = b + kBlock, *out = c + kBlock;
  for (int64_t e = 0; e < count; ++e) {
    a[e] = -12.0f + 24.0f * static_cast<float>(e) / static_cast<float>(count);
    b[e] = e % 5 == 0 ? a[e] : 0.25f + 1.75f * static_cast<float>(e % 11) / 10.0f;
    c[e] = static_cast<float>(e % 7) - 3.0f;
  }
  a[count - 1] = NAN;
  const float imm = 0.75f;
  for (int value = 0; value < ops::kValueCount<ops::Opcode>; ++value) {
    const auto opcode = static_cast<ops::Opcode>(value);
    const detail::Instruction instruction{opcode, 0, 1, 2, imm};
    GetParam()->elementwiseBlock(&instruction, 1, 3, registers.data(), count);
    for (int64_t e = 0; e < count; ++e) {
      const double want = ops::evaluate<double>(opcode, a[e], b[e], c[e], imm);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(out[e])) << ops::info(opcode).name << " at " << a[e] << ", " << b[e];
        continue;
      }
      ASSERT_NEAR(out[e], want, 2e-6 * std::max(1.0, std::fabs(want)))
          << ops::info(opcode).name << " at " << a[e] << ", " << b[e] << ", " << c[e];
    }
  }
}

TEST_P(VectorMathTest, WeightedSumOfRowsWithATail) {
  // y[i] = bias + sum_h w[h * 2] * x[h * 40 + i] for 3 rows and 37 columns
  // (whole vectors and a scalar tail).
  const std::vector<float> x = randomFloats(3 * 40, 11), w = randomFloats(6, 12);
  std::vector<float> y(37);
  GetParam()->weightedSum(y.data(), x.data(), 40, 3, w.data(), 2, 0.25f, 37);
  for (int64_t i = 0; i < 37; ++i) {
    double want = 0.25;
    for (int64_t h = 0; h < 3; ++h) want += double(w[h * 2]) * x[h * 40 + i];
    EXPECT_NEAR(y[i], want, 1e-6) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, VectorMathTest, ::testing::ValuesIn(detail::cpu::supportedKernels()),
                         [](const auto &info) { return isaName(info.param); });

// --- thread pool -------------------------------------------------------------

TEST(ThreadPool, RunsEveryItemOnceAcrossManyRuns) {
  detail::ThreadPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  std::vector<std::atomic<int>> hits(1000);
  std::atomic<int> maxThread{0};
  for (int run = 0; run < 200; ++run) {
    int64_t count = run % 7 == 0 ? 1 : 1 + run * 5;
    pool.run(count, [&](int64_t item, int thread) {
      hits[item].fetch_add(1);
      int seen = maxThread.load();
      while (thread > seen && !maxThread.compare_exchange_weak(seen, thread)) {
      }
    });
  }
  int64_t total = 0;
  for (auto &hit : hits) total += hit.load();
  int64_t want = 0;
  for (int run = 0; run < 200; ++run) want += run % 7 == 0 ? 1 : 1 + run * 5;
  EXPECT_EQ(total, want);
  EXPECT_EQ(hits[0].load(), 200);
  EXPECT_LT(maxThread.load(), 3);
}

TEST(ParallelChunks, CoverEveryItemOnceInChunksTheThreadsShareEvenly) {
  detail::ThreadPool pool(2);
  const std::vector<detail::Tensor> tensors;
  const KernelContext context{tensors, nullptr, nullptr, 0, &pool, &detail::cpu::portableKernels(), nullptr};
  struct Case {
    int64_t total, grain, wantChunks;
  };
  // 197 rows of 384 at the layernorm's grain: 4 chunks, two per thread.
  for (const Case &c : {Case{197, 85, 4}, Case{1, 1, 1}, Case{5, 100, 1}, Case{1000, 1, 8}, Case{3, 1, 3}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(c.total));
    std::atomic<int> chunks{0};
    context.parallelChunks(c.total, c.grain, [&](int64_t begin, int64_t end, int) {
      chunks.fetch_add(1);
      for (int64_t item = begin; item < end; ++item) hits[static_cast<size_t>(item)].fetch_add(1);
    });
    for (const auto &hit : hits) ASSERT_EQ(hit.load(), 1) << "total " << c.total;
    EXPECT_EQ(chunks.load(), c.wantChunks) << "total " << c.total << " grain " << c.grain;
  }
}

// --- gemm ----------------------------------------------------------------------

struct GemmShape {
  int64_t batch, m, n, k;
  bool transposeA, transposeB, weightsB, broadcastB;
  int bias;  // 0 none, 1 per column, 2 full strided matrix
  bool residual;
  detail::Activation activation;
  float alpha;
};

// bf16Weights: a bf16 artifact (einc --precision bf16) whose weight operand b
// is stored as bf16.
std::vector<uint8_t> gemmArtifact(const GemmShape &s, bool bf16Weights = false) {
  ArtifactBuilder builder;
  if (bf16Weights) builder.precision = fb::Precision::Bf16;
  const int64_t B = s.batch, M = s.m, N = s.n, K = s.k, bBatch = s.broadcastB ? 1 : B;
  uint32_t a = builder.input("a", fb::DType::F32, s.transposeA ? std::vector<int64_t>{B, K, M} : std::vector<int64_t>{B, M, K});
  std::vector<int64_t> bShape = s.transposeB ? std::vector<int64_t>{bBatch, N, K} : std::vector<int64_t>{bBatch, K, N};
  uint32_t b = !s.weightsB   ? builder.input("b", fb::DType::F32, bShape)
               : !bf16Weights ? builder.weightsF32(bShape, randomFloats(bBatch * K * N, 7))
                              : 0;
  if (s.weightsB && bf16Weights) {
    std::vector<uint8_t> bytes;
    for (float value : randomFloats(bBatch * K * N, 7)) {
      const uint16_t bits = floatToBfloat(value);
      bytes.push_back(static_cast<uint8_t>(bits));
      bytes.push_back(static_cast<uint8_t>(bits >> 8));
    }
    b = builder.weights(fb::DType::BF16, bShape, bytes);
  }
  // c is written with a padded row (3 extra columns) that must stay untouched.
  uint32_t c = builder.output("c", fb::DType::F32, {B, M, N + 3});
  ViewSpec aView = s.transposeA ? ViewSpec{a, 0, {M * K, 1, M}} : ViewSpec{a, 0, {M * K, K, 1}};
  const int64_t bStride = s.broadcastB ? 0 : K * N;
  ViewSpec bView = s.transposeB ? ViewSpec{b, 0, {bStride, 1, K}} : ViewSpec{b, 0, {bStride, N, 1}};
  GemmSpec spec{{B}, M, N, K, aView, bView, ViewSpec{c, 0, {M * (N + 3), N + 3, 1}}};
  if (s.bias == 1) spec.bias = ViewSpec{builder.weightsF32({N}, randomFloats(N, 8)), 0, {0, 0, 1}};
  if (s.bias == 2) spec.bias = ViewSpec{builder.input("bias", fb::DType::F32, {N, M}), 0, {0, 1, M}};
  if (s.residual) spec.residual = ViewSpec{builder.input("r", fb::DType::F32, {B, M, N}), 0, {M * N, N, 1}};
  spec.activation = static_cast<fb::Activation>(s.activation);
  spec.alpha = s.alpha;
  builder.gemm(spec);
  return builder.build();
}

class GemmFastTest : public ::testing::TestWithParam<GemmShape> {};

TEST_P(GemmFastTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  StepHarness harness(gemmArtifact(GetParam()));
  const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
  EXPECT_EQ(gemm.packedB >= 0, GetParam().weightsB && GetParam().broadcastB) << "weights shared by the batch are packed at load";
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(detail::cpu::gemmF32Packed, *isa, threads);
      expectNear(got, want, 2e-5 * std::sqrt(double(GetParam().k + 1)),
                 std::string(isa->name) + " threads " + std::to_string(threads));
    }
}

using detail::Activation;
INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmFastTest,
    ::testing::Values(GemmShape{1, 1, 1, 1, false, false, true, true, 0, false, Activation::None, 1.0f},
                      GemmShape{1, 197, 384, 384, false, true, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{1, 197, 1152, 384, false, true, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{2, 7, 197, 7, true, false, false, false, 2, true, Activation::GeluTanh, 0.5f},
                      GemmShape{3, 197, 7, 600, false, false, true, false, 1, false, Activation::Relu, 1.0f},
                      GemmShape{2, 33, 65, 257, true, true, true, true, 2, true, Activation::Silu, -1.25f},
                      GemmShape{1, 100, 300, 1, false, false, false, true, 0, true, Activation::None, 1.0f},
                      GemmShape{1, 5, 3, 0, false, false, false, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{4, 97, 129, 64, true, false, true, true, 0, false, Activation::None, 0.125f},
                      // Depths past one k block (kc 768): c accumulated over blocks, then the epilogue.
                      GemmShape{1, 13, 70, 1600, true, false, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{2, 20, 129, 1700, false, true, false, false, 2, false, Activation::None, 0.5f}),
    [](const auto &info) {
      const GemmShape &s = info.param;
      return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
             std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "") +
             (s.weightsB ? "_weights" : "") + (s.broadcastB ? "_shared" : "");
    });

// --- bf16 gemm ----------------------------------------------------------------

// A bf16 artifact's gemm with bf16 weights. On the avx512bf16 table, packed
// weights run the bf16 kernel: a is rounded to bf16 too, so the oracle is the
// reference on the bf16-rounded a (the products of bf16 are exact, the sums
// f32 ones). Every other path (other ISAs, or weights not packed at load)
// widens the bf16 weights to f32: the oracle is the reference on the f32 a.
// Both within f32 summation error of their oracle.
class Bf16GemmFastTest : public ::testing::TestWithParam<GemmShape> {};

TEST_P(Bf16GemmFastTest, MatchesReferenceOnBf16RoundedOperands) {
  const GemmShape &shape = GetParam();
  StepHarness harness(gemmArtifact(shape, true));
  const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
  ASSERT_EQ(harness.program().tensors[gemm.b.tensor].dtype, DType::BF16);
  const bool packed = gemm.packedB >= 0;
  EXPECT_EQ(packed, shape.broadcastB);
  if (packed) {
    EXPECT_EQ(harness.program().packed[gemm.packedB].bf16Pairs, detail::cpu::bestKernels().bf16GemmTile != nullptr)
        << "bf16 weights stay bf16 where the CPU has the bf16 gemm";
  }
  const double tolerance = 2e-5 * std::sqrt(double(shape.k + 1));
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  std::vector<std::pair<std::string, std::vector<float>>> bf16Runs;
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(detail::cpu::gemmF32Packed, *isa, threads);
      std::string what = std::string(isa->name) + " threads " + std::to_string(threads);
      if (packed && isa->bf16GemmTile) {
        bf16Runs.emplace_back(what, std::move(got));
      } else {
        expectNear(got, want, tolerance, what + " (bf16 weights widened)");
      }
    }
  if (bf16Runs.empty()) return;
  harness.roundToBf16(gemm.a.tensor);
  std::vector<float> wantRounded = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  for (const auto &[what, got] : bf16Runs) expectNear(got, wantRounded, tolerance, what + " (bf16 arithmetic)");
  // The bf16 kernel did round a: its result is off the f32-a oracle by more
  // than f32 summation error somewhere (K > 8 makes that certain).
  if (shape.k > 8) {
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (!std::isnan(want[i])) worst = std::max(worst, double(std::fabs(bf16Runs[0].second[i] - want[i])));
    EXPECT_GT(worst, tolerance);
  }
}

// Odd sizes everywhere: odd k (the last bf16 pair half zero), k past one
// block (kc 768, blocks starting at even rows), a partial last row panel and
// column panel, strided (transposed) a and b, and unpacked batched weights.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Bf16GemmFastTest,
    ::testing::Values(GemmShape{1, 1, 1, 1, false, false, true, true, 0, false, Activation::None, 1.0f},
                      GemmShape{1, 197, 384, 384, false, true, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{1, 197, 1152, 383, false, true, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{2, 33, 65, 257, true, true, true, true, 2, true, Activation::Silu, -1.25f},
                      GemmShape{3, 17, 70, 1601, true, false, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{1, 13, 129, 1537, false, false, true, true, 0, false, Activation::None, 0.5f},
                      GemmShape{3, 19, 7, 61, false, false, true, false, 1, false, Activation::Relu, 1.0f}),
    [](const auto &info) {
      const GemmShape &s = info.param;
      return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
             std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "") +
             (s.broadcastB ? "" : "_batchedB");
    });

}  // namespace
}  // namespace ein::testing
