// The gemm: the reference kernel against a naive loop (batch axes, a
// transposed and broadcast b, bias, activations, the residual added after the
// activation), the packed f32 kernel and the bf16 kernel against the
// reference on every instruction set this CPU has, with one and two threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

// --- gemm -------------------------------------------------------------------

struct GemmCase {
  int64_t m, n, k;
  fb::Activation activation;
};

void PrintTo(const GemmCase &c, std::ostream *out) {
  *out << "m=" << c.m << " n=" << c.n << " k=" << c.k << " " << fb::EnumNameActivation(c.activation);
}

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

// C[b0, b1, m, n] = alpha * A[b0, b1, m, k] . Bt[b1, n, k]^T + bias[n]: B is
// stored transposed and broadcast over b0 (stride 0), the bias broadcast over
// everything but n, and C written with a padded row stride.
TEST_P(GemmTest, MatchesNaiveLoopWithBatchTransposeAndBroadcast) {
  const auto [m, n, k, activation] = GetParam();
  const int64_t b0 = 2, b1 = 3, cRow = n + 3;
  std::vector<float> a = randomFloats(b0 * b1 * m * k, 1), bt = randomFloats(b1 * n * k, 2),
                     bias = randomFloats(n, 3);
  const float alpha = 0.75f;
  ArtifactBuilder builder;
  uint32_t aId = builder.input("a", fb::DType::F32, {b0, b1, m, k});
  uint32_t btId = builder.input("bt", fb::DType::F32, {b1, n, k});
  uint32_t cId = builder.output("c", fb::DType::F32, {b0, b1, m, cRow});
  uint32_t biasId = builder.weightsF32({n}, bias, "bias");
  builder.gemm({{b0, b1}, m, n, k, dense(aId, {b0, b1, m, k}), {btId, 0, {0, n * k, 1, k}},
                {cId, 0, {b1 * m * cRow, m * cRow, cRow, 1}}, ViewSpec{biasId, 0, {0, 0, 0, 1}}, alpha, activation});
  auto session = loadAndRun(builder.build(), {{"a", bytesOf(a)}, {"bt", bytesOf(bt)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("c").value());

  std::vector<double> want(got.size(), 0.0);  // the padding columns stay zero
  for (int64_t i0 = 0; i0 < b0; ++i0)
    for (int64_t i1 = 0; i1 < b1; ++i1)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += double(a[((i0 * b1 + i1) * m + i) * k + p]) * bt[(i1 * n + j) * k + p];
          want[((i0 * b1 + i1) * m + i) * cRow + j] = activate(activation, alpha * sum + bias[j]);
        }
  expectClose(got, want, 1e-5, "gemm");
}

INSTANTIATE_TEST_SUITE_P(Sizes, GemmTest,
                         ::testing::Values(GemmCase{1, 1, 1, fb::Activation::None},
                                           GemmCase{7, 5, 197, fb::Activation::None},
                                           GemmCase{197, 7, 1, fb::Activation::Relu},
                                           GemmCase{7, 197, 7, fb::Activation::Gelu},
                                           GemmCase{5, 7, 13, fb::Activation::GeluTanh},
                                           GemmCase{7, 1, 7, fb::Activation::Silu}),
                         [](const auto &info) {
                           const GemmCase &c = info.param;
                           return "m" + std::to_string(c.m) + "_n" + std::to_string(c.n) + "_k" + std::to_string(c.k) +
                                  "_" + fb::EnumNameActivation(c.activation);
                         });

TEST(Gemm, EmptyReductionGivesBiasOnly) {
  ArtifactBuilder builder;
  uint32_t a = builder.input("a", fb::DType::F32, {3, 0});
  uint32_t b = builder.input("b", fb::DType::F32, {0, 2});
  uint32_t c = builder.output("c", fb::DType::F32, {3, 2});
  uint32_t bias = builder.weightsF32({2}, {1.5f, -2.0f});
  builder.gemm({{}, 3, 2, 0, dense(a, {3, 0}), dense(b, {0, 2}), dense(c, {3, 2}), ViewSpec{bias, 0, {0, 1}}});
  auto session = loadAndRun(builder.build(), {{"a", {}}, {"b", {}}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  EXPECT_EQ(valuesOf<float>(session.value()->output("c").value()),
            (std::vector<float>{1.5f, -2.0f, 1.5f, -2.0f, 1.5f, -2.0f}));
}

// --- gemm residual -----------------------------------------------------------------

// c = gelu(a . b + bias) + residual, with the residual broadcast over the
// batch (stride 0) and stored transposed; the activation applies before the
// residual is added.
TEST(GemmResidual, AddedAfterTheActivation) {
  const int64_t batch = 3, m = 7, n = 197, k = 13;
  std::vector<float> a = randomFloats(batch * m * k, 31), b = randomFloats(k * n, 32), bias = randomFloats(n, 33),
                     residual = randomFloats(n * m, 34);
  ArtifactBuilder builder;
  uint32_t aId = builder.input("a", fb::DType::F32, {batch, m, k});
  uint32_t bId = builder.weightsF32({k, n}, b);
  uint32_t biasId = builder.weightsF32({n}, bias);
  uint32_t rId = builder.input("r", fb::DType::F32, {n, m});
  uint32_t cId = builder.output("c", fb::DType::F32, {batch, m, n});
  builder.gemm({{batch}, m, n, k, dense(aId, {batch, m, k}), {bId, 0, {0, n, 1}}, dense(cId, {batch, m, n}),
                ViewSpec{biasId, 0, {0, 0, 1}}, 1.0f, fb::Activation::Gelu, ViewSpec{rId, 0, {0, 1, m}}});
  auto session = loadAndRun(builder.build(), {{"a", bytesOf(a)}, {"r", bytesOf(residual)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("c").value());
  std::vector<double> want(got.size());
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias[j];
        for (int64_t l = 0; l < k; ++l) sum += double(a[(p * m + i) * k + l]) * b[l * n + j];
        want[(p * m + i) * n + j] = 0.5 * sum * (1 + std::erf(sum / std::sqrt(2.0))) + residual[j * m + i];
      }
  expectClose(got, want, 1e-5, "gemm residual");
}

// --- gemm ----------------------------------------------------------------------

struct GemmShape {
  int64_t batch, m, n, k;
  bool transposeA, transposeB, weightsB, broadcastB;
  int bias;  // 0 none, 1 per column, 2 full strided matrix, 3 per row
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
                              : builder.weightsBf16(bShape, randomFloats(bBatch * K * N, 7));
  // c is written with a padded row (3 extra columns) that must stay untouched.
  uint32_t c = builder.output("c", fb::DType::F32, {B, M, N + 3});
  ViewSpec aView = s.transposeA ? ViewSpec{a, 0, {M * K, 1, M}} : ViewSpec{a, 0, {M * K, K, 1}};
  const int64_t bStride = s.broadcastB ? 0 : K * N;
  ViewSpec bView = s.transposeB ? ViewSpec{b, 0, {bStride, 1, K}} : ViewSpec{b, 0, {bStride, N, 1}};
  GemmSpec spec{{B}, M, N, K, aView, bView, ViewSpec{c, 0, {M * (N + 3), N + 3, 1}}};
  if (s.bias == 1) spec.bias = ViewSpec{builder.weightsF32({N}, randomFloats(N, 8)), 0, {0, 0, 1}};
  if (s.bias == 2) spec.bias = ViewSpec{builder.input("bias", fb::DType::F32, {N, M}), 0, {0, 1, M}};
  if (s.bias == 3) spec.bias = ViewSpec{builder.weightsF32({M}, randomFloats(M, 9)), 0, {0, 1, 0}};
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
                      GemmShape{2, 20, 129, 1700, false, true, false, false, 2, false, Activation::None, 0.5f},
                      // A bias per row (one value along j) with alpha, GELU and a residual,
                      // a partial last vector of each row.
                      GemmShape{2, 37, 45, 19, false, false, true, true, 3, true, Activation::Gelu, 0.5f},
                      // A few sequences decoding at once: row tiles as even as can be
                      // (RowTiles at mr 6: 8 rows as 4 + 4, 14 as 5 + 5 + 4, 16 as
                      // 6 + 5 + 5) read in place or packed (a whole tile's as its panel,
                      // a shorter one's as rows).
                      GemmShape{1, 8, 100, 300, false, true, true, true, 1, true, Activation::Silu, 1.0f},
                      GemmShape{2, 14, 40, 33, true, false, true, true, 0, false, Activation::None, 1.0f},
                      GemmShape{1, 16, 70, 90, false, false, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{1, 16, 33, 41, true, true, false, true, 2, true, Activation::Gelu, 0.5f},
                      // One column (a depthwise convolution's batch of matrix-vector
                      // products: gemmColumnF32): a contiguous along k (dot products) or
                      // along m (transposed: scaled columns added), past one block of k
                      // (the tiled gemm), b shared or per batch element, each epilogue.
                      GemmShape{96, 200, 1, 49, false, false, true, false, 1, false, Activation::None, 1.0f},
                      GemmShape{3, 37, 1, 13, false, true, false, false, 3, true, Activation::Gelu, 0.5f},
                      GemmShape{2, 250, 1, 9, false, false, true, true, 2, true, Activation::Relu, 1.0f},
                      GemmShape{2, 30, 1, 5, true, false, true, false, 1, false, Activation::None, 1.0f},
                      GemmShape{5, 150, 1, 7, true, true, false, false, 3, true, Activation::Silu, 2.0f},
                      GemmShape{1, 20, 1, 900, false, false, false, true, 0, false, Activation::None, 1.0f}),
    [](const auto &info) {
      const GemmShape &s = info.param;
      return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
             std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "") +
             (s.weightsB ? "_weights" : "") + (s.broadcastB ? "_shared" : "");
    });

// --- bf16 gemm ----------------------------------------------------------------

// A bf16 artifact's gemm with bf16 weights, packed at load as bf16 pairs for
// each table in turn. On tables with the bf16 gemm (avx512bf16, amx) they run
// the bf16 kernel: a is rounded to bf16 too, so the oracle is the reference
// on the bf16-rounded a (the products of bf16 are exact, the sums f32 ones).
// Every other path (other tables, widening the pairs in registers or panel by
// panel, or weights not packed at load) computes in f32 on the bf16 weights:
// the oracle is the reference on the f32 a. Both within f32 summation error
// of their oracle.
class Bf16GemmFastTest : public ::testing::TestWithParam<GemmShape> {};

TEST_P(Bf16GemmFastTest, MatchesReferenceOnBf16RoundedOperands) {
  const GemmShape &shape = GetParam();
  StepHarness harness(gemmArtifact(shape, true));
  const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
  ASSERT_EQ(harness.program().tensors[gemm.b.tensor].dtype, DType::BF16);
  const bool packed = gemm.packedB >= 0;
  EXPECT_EQ(packed, shape.broadcastB);
  if (packed) {
    EXPECT_TRUE(harness.program().packed[gemm.packedB].bf16Pairs) << "bf16 weights stay bf16";
  }
  const double tolerance = 2e-5 * std::sqrt(double(shape.k + 1));
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  std::vector<std::pair<std::string, std::vector<float>>> bf16Runs;
  for (const IsaKernels *isa : detail::cpu::supportedKernels()) {
    if (packed) harness.packWeightsFor(*isa);
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(detail::cpu::gemmF32Packed, *isa, threads);
      std::string what = std::string(isa->name) + " threads " + std::to_string(threads);
      if (packed && isa->bf16GemmTile) {
        bf16Runs.emplace_back(what, std::move(got));
      } else {
        expectNear(got, want, tolerance, what + " (bf16 weights widened)");
      }
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
                      GemmShape{3, 19, 7, 61, false, false, true, false, 1, false, Activation::Relu, 1.0f},
                      GemmShape{1, 8, 100, 301, false, true, true, true, 1, true, Activation::Silu, 1.0f},
                      GemmShape{2, 14, 40, 33, true, false, true, true, 0, false, Activation::None, 1.0f},
                      // amx, tile by tile: the bias in the tiles' initial sums and whole tiles
                      // stored into c, a partial last panel and row tile through the epilogue;
                      // a bias per element (row and column) only through the epilogue.
                      GemmShape{2, 70, 100, 384, false, false, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{1, 64, 128, 64, false, false, true, true, 2, false, Activation::None, 1.0f},
                      // amx, tile by tile, every tile through the epilogue: a bias per row
                      // (not in the tiles), GELU and a residual.
                      GemmShape{1, 70, 100, 384, false, false, true, true, 3, true, Activation::Gelu, 1.0f},
                      // amx, weights wider than L2 (over 1.5 MB of pairs): panel by panel
                      // over several row tiles, through the epilogue and stored straight into c.
                      GemmShape{1, 75, 1100, 767, false, false, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{2, 40, 1030, 801, false, false, true, true, 1, false, Activation::None, 1.0f}),
    [](const auto &info) {
      const GemmShape &s = info.param;
      return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
             std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "") +
             (s.broadcastB ? "" : "_batchedB") + (s.bias == 2 ? "_biasPerElement" : s.bias == 3 ? "_biasPerRow" : "");
    });

// --- gemv (few rows, weights packed at load) -----------------------------------

// Gemms of 1 to 16 rows with the weights packed for each table in turn (as a
// CPU whose best table it is would load them): rows up to kGemvMaxRows take
// the gemv (IsaKernels::gemvPanel, bf16GemvPanel, bf16WidenGemvPanel), more
// the register tiles (and the gemv the last few rows).
class GemvTest : public ::testing::TestWithParam<GemmShape> {};

// On every table and 1 and 2 threads, `kernel` on weights packed for the
// table against `want`.
void expectEveryPackedTableMatches(StepHarness &harness, const std::vector<float> &want, double tolerance) {
  for (const IsaKernels *isa : detail::cpu::supportedKernels()) {
    harness.packWeightsFor(*isa);
    const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
    ASSERT_GE(gemm.packedB, 0) << isa->name;
    EXPECT_EQ(harness.program().packed[gemm.packedB].nr, isa->gemmNr) << isa->name;
    for (int threads : {1, 2})
      expectNear(harness.run(detail::cpu::gemmF32Packed, *isa, threads), want, tolerance,
                 std::string(isa->name) + " threads " + std::to_string(threads));
  }
}

TEST_P(GemvTest, F32MatchesReferenceOnEveryPackedTableAndThreadCount) {
  StepHarness harness(gemmArtifact(GetParam()));
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  expectEveryPackedTableMatches(harness, want, 2e-5 * std::sqrt(double(GetParam().k + 1)));
}

// a rounded to bf16 first, so that the bf16 arithmetic of tables with the
// bf16 gemm and the f32 arithmetic on widened weights of the others have the
// same oracle.
TEST_P(GemvTest, Bf16MatchesReferenceOnEveryPackedTableAndThreadCount) {
  StepHarness harness(gemmArtifact(GetParam(), true));
  harness.roundToBf16(std::get<detail::Gemm>(harness.program().steps[0].kernel).a.tensor);
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  expectEveryPackedTableMatches(harness, want, 2e-5 * std::sqrt(double(GetParam().k + 1)));
}

// Odd n (a partial last panel) and k (a bf16 pair's zero half), k from 1 to
// past the tiles' k block, strided a, a batch sharing the weights, and every
// epilogue.
INSTANTIATE_TEST_SUITE_P(
    Rows, GemvTest,
    ::testing::Values(GemmShape{1, 1, 131, 97, false, false, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{1, 1, 70, 771, false, true, true, true, 0, true, Activation::Gelu, 1.0f},
                      GemmShape{2, 1, 65, 257, true, false, true, true, 2, true, Activation::Silu, -1.25f},
                      GemmShape{1, 2, 129, 1601, false, false, true, true, 1, true, Activation::GeluTanh, 1.0f},
                      GemmShape{1, 3, 200, 33, true, true, true, true, 2, false, Activation::Relu, 0.5f},
                      GemmShape{1, 4, 64, 1, false, false, true, true, 1, false, Activation::None, 1.0f},
                      GemmShape{3, 4, 17, 300, false, false, true, true, 1, true, Activation::Gelu, 1.0f},
                      GemmShape{1, 5, 129, 300, false, false, true, true, 1, true, Activation::Silu, 1.0f},
                      GemmShape{1, 6, 70, 383, true, false, true, true, 0, false, Activation::None, 1.0f},
                      GemmShape{1, 7, 33, 64, false, true, true, true, 2, true, Activation::Relu, 2.0f},
                      GemmShape{2, 8, 191, 129, false, false, true, true, 1, false, Activation::Gelu, 1.0f},
                      // Tiles and a last 4 rows by the gemv over blocks of k,
                      // items in runs, a batch's items after another's.
                      GemmShape{1, 10, 530, 1601, false, false, true, true, 1, true, Activation::Silu, 1.0f},
                      GemmShape{2, 16, 600, 900, false, false, true, true, 0, false, Activation::None, 1.0f}),
    [](const auto &info) {
      const GemmShape &s = info.param;
      return "b" + std::to_string(s.batch) + "_m" + std::to_string(s.m) + "_n" + std::to_string(s.n) + "_k" +
             std::to_string(s.k) + (s.transposeA ? "_aT" : "") + (s.transposeB ? "_bT" : "");
    });

}  // namespace
}  // namespace ein::testing
