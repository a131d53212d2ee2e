// The int8 gemm of int8 artifacts (einc --precision int8): the row
// quantization and the s8 register tile of every ISA table this CPU runs
// against their definitions (bit for bit), the whole gemm against the int8
// reference (1 and 2 threads, weights packed at load and packed as it goes),
// and the loader's checks of int8 weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "artifact_builder.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "kernels/quantized_gemm_shape.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

using detail::cpu::IsaKernels;

class S8TileTest : public ::testing::TestWithParam<const IsaKernels *> {};

// Every table's vector quantization gives quantizeRowS8's bytes and scale,
// with its own offset: lengths around the vector widths, a row of zeros,
// rows with inf or NaN (scale NaN, bytes 0), exact halves (ties to even) and
// values past the row's max after scaling (clamped to 127).
TEST_P(S8TileTest, QuantizeRowMatchesTheDefinition) {
  const IsaKernels &isa = *GetParam();
  std::vector<std::vector<float>> rows;
  for (int64_t k : {1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 385}) rows.push_back(randomFloats(k, 40 + k));
  rows.push_back(std::vector<float>(19, 0.0f));
  rows.push_back(randomFloats(40, 3));
  rows.back()[17] = INFINITY;
  rows.push_back(randomFloats(40, 4));
  rows.back()[39] = NAN;
  // max 127: x * 1 exactly, so 0.5, 1.5, -2.5 are ties (to 0, 2, -2).
  rows.push_back({127.0f, 0.5f, 1.5f, -2.5f, -127.0f, 3.5f, 126.5f, -0.5f, 64.5f});
  for (const std::vector<float> &row : rows) {
    const auto k = static_cast<int64_t>(row.size()), padded = (k + 3) / 4 * 4;
    std::vector<uint8_t> want(static_cast<size_t>(padded)), got(static_cast<size_t>(padded), 0xee);
    const float wantScale = detail::cpu::quantizeRowS8(row.data(), 1, k, padded, isa.s8ActivationOffset, want.data());
    const float gotScale = isa.s8QuantizeRow(row.data(), k, padded, got.data());
    if (std::isnan(wantScale)) EXPECT_TRUE(std::isnan(gotScale)) << "k " << k;
    else EXPECT_EQ(gotScale, wantScale) << "k " << k;
    EXPECT_EQ(got, want) << isa.name << " k " << k;
  }
  // The definition itself: ties to even, clamped, symmetric.
  std::vector<uint8_t> q(12);
  const std::vector<float> ties{127.0f, 0.5f, 1.5f, -2.5f, -127.0f, 3.5f, 126.5f, -0.5f, 64.5f};
  EXPECT_EQ(detail::cpu::quantizeRowS8(ties.data(), 1, 9, 12, 0, q.data()), 1.0f);
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()), (std::vector<int>{127, 0, 2, 254, 129, 4, 126, 0, 64, 0, 0, 0}));
}

// The tile's int32 sums equal exact integer sums of the bytes as the table
// reads them (u8 with offset 128, else s8), accumulating or not.
TEST_P(S8TileTest, TileSumsExactly) {
  const IsaKernels &isa = *GetParam();
  const int mr = isa.s8GemmMr, nr = isa.s8GemmNr;
  std::mt19937 random(5);
  std::uniform_int_distribution<int> value(-127, 127);
  for (int64_t quads : {1, 2, 5, 96, 193}) {
    const int64_t lda = 4 * quads + 8, ldc = nr + 5;
    std::vector<uint8_t> a(static_cast<size_t>(mr * lda));
    std::vector<int8_t> b(static_cast<size_t>(quads * nr * 4));
    for (uint8_t &x : a) x = static_cast<uint8_t>(value(random) + isa.s8ActivationOffset);
    for (int8_t &x : b) x = static_cast<int8_t>(value(random));
    for (bool accumulate : {false, true}) {
      std::vector<int32_t> c(static_cast<size_t>(mr * ldc), 7), want = c;
      for (int r = 0; r < mr; ++r)
        for (int j = 0; j < nr; ++j) {
          int64_t sum = accumulate ? want[r * ldc + j] : 0;
          for (int64_t p = 0; p < 4 * quads; ++p) {
            const int av = isa.s8ActivationOffset ? int(a[r * lda + p]) : int(static_cast<int8_t>(a[r * lda + p]));
            sum += av * b[(p / 4 * nr + j) * 4 + p % 4];
          }
          want[r * ldc + j] = static_cast<int32_t>(sum);
        }
      // Pulling another buffer into L2 meanwhile (the next panel) changes nothing.
      const std::vector<int8_t> nextPanel(b.size() + 100, 1);
      for (bool prefetch : {false, true}) {
        std::vector<int32_t> got = c;
        isa.s8GemmTile(quads, a.data(), lda, b.data(), got.data(), ldc, accumulate,
                       prefetch ? reinterpret_cast<const char *>(nextPanel.data()) : nullptr,
                       prefetch ? static_cast<int64_t>(nextPanel.size()) : 0);
        EXPECT_EQ(got, want) << isa.name << " quads " << quads << (accumulate ? " accumulating" : "")
                             << (prefetch ? " prefetching" : "");
      }
    }
  }
}

// The scales come in with the same f32 operations on every table.
TEST_P(S8TileTest, DequantizeRowMatchesTheDefinition) {
  const IsaKernels &isa = *GetParam();
  std::mt19937 random(6);
  std::uniform_int_distribution<int32_t> sums(-2000000, 2000000), columns(-16000, 16000);
  for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 100}) {
    std::vector<int32_t> acc(static_cast<size_t>(n)), columnSums(static_cast<size_t>(n));
    for (int32_t &x : acc) x = sums(random);
    for (int32_t &x : columnSums) x = columns(random);
    std::vector<float> scale = randomFloats(n, 11), want(static_cast<size_t>(n)), got(static_cast<size_t>(n), NAN);
    detail::cpu::dequantizeRowS8(acc.data(), columnSums.data(), isa.s8ActivationOffset, 0.0123f, scale.data(), n,
                                 want.data());
    isa.s8DequantizeRow(acc.data(), columnSums.data(), isa.s8ActivationOffset, 0.0123f, scale.data(), n, got.data());
    EXPECT_EQ(got, want) << isa.name << " n " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, S8TileTest, ::testing::ValuesIn(detail::cpu::supportedKernels()),
                         [](const auto &info) { return std::string(info.param->name); });

// --- the whole gemm -------------------------------------------------------------

std::vector<int8_t> randomS8(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> value(-127, 127);
  std::vector<int8_t> out(static_cast<size_t>(count));
  for (int8_t &x : out) x = static_cast<int8_t>(value(random));
  return out;
}

// An int8 artifact's gemm: b int8 weights [K, N] (or [N, K]) shared by the
// batch, scales [N] positive.
std::vector<uint8_t> int8GemmArtifact(const QuantizedGemmShape &s) {
  ArtifactBuilder builder;
  builder.precision = fb::Precision::Int8;
  const int64_t B = s.batch, M = s.m, N = s.n, K = s.k;
  uint32_t a = builder.input("a", fb::DType::F32, s.transposeA ? std::vector<int64_t>{B, K, M} : std::vector<int64_t>{B, M, K});
  std::vector<int8_t> q = randomS8(K * N, 9);
  uint32_t b = builder.weights(fb::DType::I8, s.transposeB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
                               std::vector<uint8_t>(q.begin(), q.end()));
  std::vector<float> scales = randomFloats(N, 10);
  for (float &x : scales) x = 0.001f + std::fabs(x) * 0.01f;
  uint32_t scale = builder.weightsF32({N}, scales);
  uint32_t c = builder.output("c", fb::DType::F32, {B, M, N + 3});
  ViewSpec aView = s.transposeA ? ViewSpec{a, 0, {M * K, 1, M}} : ViewSpec{a, 0, {M * K, K, 1}};
  ViewSpec bView = s.transposeB ? ViewSpec{b, 0, {0, 1, K}} : ViewSpec{b, 0, {0, N, 1}};
  GemmSpec spec{{B}, M, N, K, aView, bView, ViewSpec{c, 0, {M * (N + 3), N + 3, 1}}};
  if (s.bias == 1) spec.bias = ViewSpec{builder.weightsF32({N}, randomFloats(N, 8)), 0, {0, 0, 1}};
  if (s.bias == 2) spec.bias = ViewSpec{builder.input("bias", fb::DType::F32, {N, M}), 0, {0, 1, M}};
  if (s.residual) spec.residual = ViewSpec{builder.input("r", fb::DType::F32, {B, M, N}), 0, {M * N, N, 1}};
  spec.activation = static_cast<fb::Activation>(s.activation);
  spec.alpha = s.alpha;
  spec.bScale = ViewSpec{scale, 0, {1}};
  builder.gemm(spec);
  return builder.build();
}

class Int8GemmTest : public ::testing::TestWithParam<QuantizedGemmShape> {};

// The int32 sums are exact on every path; what differs from the reference
// (double) is the f32 scaling and epilogue: a few f32 roundings.
TEST_P(Int8GemmTest, MatchesTheInt8ReferenceOnEveryIsaAndThreadCount) {
  StepHarness harness(int8GemmArtifact(GetParam()));
  const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
  ASSERT_TRUE(gemm.bScale.has_value());
  if (GetParam().k > 0) {
    ASSERT_GE(gemm.packedB, 0) << "int8 weights are packed at load";
    EXPECT_TRUE(harness.program().packed[gemm.packedB].s8Quads);
    EXPECT_EQ(harness.program().packed[gemm.packedB].nr, detail::cpu::bestKernels().s8GemmNr);
  }
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      // Other tables than the one the weights were packed for pack as they go.
      std::vector<float> got = harness.run(detail::cpu::gemmS8Dynamic, *isa, threads);
      expectNear(got, want, 2e-6, std::string(isa->name) + " threads " + std::to_string(threads));
    }
}

using detail::Activation;
INSTANTIATE_TEST_SUITE_P(
    Shapes, Int8GemmTest,
    ::testing::Values(QuantizedGemmShape{1, 1, 1, 1, false, false, 0, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 197, 384, 384, false, true, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 197, 1152, 383, false, true, 1, true, Activation::Gelu, 1.0f},
                      QuantizedGemmShape{2, 33, 65, 257, true, true, 2, true, Activation::Silu, -1.25f},
                      QuantizedGemmShape{3, 17, 70, 1601, true, false, 1, true, Activation::GeluTanh, 1.0f},
                      QuantizedGemmShape{1, 13, 129, 3073, false, false, 0, false, Activation::Relu, 0.5f},
                      QuantizedGemmShape{2, 100, 17, 6, false, false, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 5, 3, 0, false, false, 1, true, Activation::Gelu, 1.0f}),
    quantizedGemmName);

// Gemms of 1 to 16 rows with the int8 weights packed for each table in turn
// (as a CPU whose best table it is would load them): rows up to
// kGemvMaxRows take the gemv (IsaKernels::s8GemvPanel), more the tiles (and
// the gemv the last few rows).
class Int8GemvTest : public ::testing::TestWithParam<QuantizedGemmShape> {};

TEST_P(Int8GemvTest, MatchesTheInt8ReferenceOnEveryPackedTableAndThreadCount) {
  StepHarness harness(int8GemmArtifact(GetParam()));
  std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels()) {
    harness.packWeightsFor(*isa);
    const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
    ASSERT_GE(gemm.packedB, 0) << isa->name;
    EXPECT_EQ(harness.program().packed[gemm.packedB].nr, isa->s8GemmNr) << isa->name;
    for (int threads : {1, 2})
      expectNear(harness.run(detail::cpu::gemmS8Dynamic, *isa, threads), want, 2e-6,
                 std::string(isa->name) + " threads " + std::to_string(threads));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rows, Int8GemvTest,
    ::testing::Values(QuantizedGemmShape{1, 1, 131, 97, false, false, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 1, 70, 771, false, true, 0, true, Activation::Gelu, 1.0f},
                      QuantizedGemmShape{2, 1, 65, 257, true, false, 2, true, Activation::Silu, -1.25f},
                      QuantizedGemmShape{1, 2, 129, 1601, false, false, 1, true, Activation::GeluTanh, 1.0f},
                      QuantizedGemmShape{1, 3, 200, 33, true, true, 2, false, Activation::Relu, 0.5f},
                      QuantizedGemmShape{1, 4, 64, 1, false, false, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{3, 4, 17, 300, false, false, 1, true, Activation::Gelu, 1.0f},
                      QuantizedGemmShape{1, 5, 129, 300, false, false, 1, true, Activation::Silu, 1.0f},
                      QuantizedGemmShape{1, 6, 70, 383, true, false, 0, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 7, 33, 64, false, true, 2, true, Activation::Relu, 2.0f},
                      QuantizedGemmShape{2, 8, 191, 129, false, false, 1, false, Activation::Gelu, 1.0f},
                      // Tiles and a last 4 rows by the gemv, items in runs, a
                      // batch's items after another's.
                      QuantizedGemmShape{1, 10, 530, 1601, false, false, 1, true, Activation::Silu, 1.0f},
                      QuantizedGemmShape{2, 16, 600, 900, false, false, 0, false, Activation::None, 1.0f}),
    quantizedGemmName);

// The int8 reference approximates the f32 gemm on the dequantized weights
// within the activations' quantization error (half a step per element).
TEST(Int8Gemm, ApproximatesTheF32GemmOfTheDequantizedWeights) {
  const QuantizedGemmShape shape{1, 31, 40, 300, false, false, 0, false, Activation::None, 1.0f};
  StepHarness int8(int8GemmArtifact(shape));
  std::vector<float> got = int8.run(detail::cpu::gemmS8Dynamic, detail::cpu::bestKernels(), 1);
  // The same gemm in f32 with b = q * scale.
  ArtifactBuilder builder;
  const int64_t M = shape.m, N = shape.n, K = shape.k;
  uint32_t a = builder.input("a", fb::DType::F32, {1, M, K});
  std::vector<int8_t> q = randomS8(K * N, 9);
  std::vector<float> scales = randomFloats(N, 10), b(static_cast<size_t>(K * N));
  for (float &x : scales) x = 0.001f + std::fabs(x) * 0.01f;
  for (int64_t p = 0; p < K; ++p)
    for (int64_t j = 0; j < N; ++j) b[p * N + j] = q[p * N + j] * scales[j];
  uint32_t bt = builder.weightsF32({K, N}, b);
  uint32_t c = builder.output("c", fb::DType::F32, {1, M, N + 3});
  builder.gemm(GemmSpec{{1}, M, N, K, ViewSpec{a, 0, {M * K, K, 1}}, ViewSpec{bt, 0, {0, N, 1}},
                        ViewSpec{c, 0, {M * (N + 3), N + 3, 1}}});
  StepHarness f32(builder.build());
  std::vector<float> want = f32.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
  double worst = 0, largest = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!std::isnan(want[i])) {
      worst = std::max(worst, double(std::fabs(got[i] - want[i])));
      largest = std::max(largest, double(std::fabs(want[i])));
    }
  // |a| < 1 in the harness: a step is max|a| / 127 < 1/127; each product's
  // error is at most half a step times |b| <= 127 * 0.011.
  EXPECT_LT(worst, 0.5 / 127 * 127 * 0.011 * double(K) / 4) << "largest " << largest;
  EXPECT_GT(worst, 0.0) << "activations are quantized";
}

// --- the loader ---------------------------------------------------------------

std::string loadError(const std::vector<uint8_t> &bytes) {
  auto loaded = Model::loadFromMemory(bytes.data(), bytes.size());
  if (loaded.ok()) return "loaded";
  EXPECT_EQ(loaded.status().code(), StatusCode::InvalidArtifact) << loaded.status().toString();
  return loaded.status().toString();
}

// A small int8 gemm with one thing changed.
std::vector<uint8_t> int8Gemm(fb::Precision precision, fb::DType bType, bool withScale, fb::DType scaleType,
                              int64_t k = 8, bool batchedB = false, fb::Target target = fb::Target::Cpu,
                              fb::Storage scaleStorage = fb::Storage::Weights) {
  ArtifactBuilder builder;
  builder.precision = precision;
  builder.target = target;
  const int64_t M = 2, N = 3;
  uint32_t a = builder.input("a", fb::DType::F32, {2, M, k});
  const int64_t bElements = (batchedB ? 2 : 1) * k * N;
  uint32_t b = builder.weights(bType, {bElements}, std::vector<uint8_t>(static_cast<size_t>(bElements) * (bType == fb::DType::F32 ? 4 : 1)));
  uint32_t scale = scaleStorage == fb::Storage::Weights
                       ? builder.weights(scaleType, {N}, std::vector<uint8_t>(static_cast<size_t>(N) * (scaleType == fb::DType::F32 ? 4 : 1)))
                       : builder.input("s", scaleType, {N});
  uint32_t c = builder.output("c", fb::DType::F32, {2, M, N});
  GemmSpec spec{{2}, M, N, k, ViewSpec{a, 0, {M * k, k, 1}}, ViewSpec{b, 0, {batchedB ? k * N : 0, N, 1}},
                ViewSpec{c, 0, {M * N, N, 1}}};
  if (withScale) spec.bScale = ViewSpec{scale, 0, {1}};
  builder.gemm(spec);
  return builder.build();
}

TEST(Int8Loader, AcceptsAnInt8GemmAndRefusesEveryMalformedOne) {
  using fb::DType;
  using fb::Precision;
  EXPECT_EQ(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::F32)), "loaded");
  EXPECT_EQ(loadError(int8LinearArtifact()), "loaded");
  EXPECT_EQ(loadError(int8Gemm(Precision::Int8, DType::F32, false, DType::F32)), "loaded") << "f32 weights stay allowed";
  EXPECT_NE(loadError(int8Gemm(Precision::Fp32, DType::I8, true, DType::F32)).find("i8 tensor must be a weight of an int8 artifact"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Bf16, DType::I8, true, DType::F32)).find("int8 artifact"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, false, DType::F32)).find("need either a b_scale or a b_group_scale view"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::F32, true, DType::F32)).find("b_scale is only for int8"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::I8)).find("view b_scale is over a i8 tensor"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::F32, 8, false, fb::Target::Cpu, fb::Storage::Input))
                .find("b_scale must view a weight tensor"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::F32, 8, true)).find("shared by the batch"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::F32, 65537)).find("k is at most 65536"), std::string::npos);
  EXPECT_NE(loadError(int8Gemm(Precision::Int8, DType::I8, true, DType::F32, 8, false, fb::Target::Cuda)).find("cpu target only"), std::string::npos);
  // An i8 tensor anywhere but the weights (an input).
  ArtifactBuilder builder;
  builder.precision = fb::Precision::Int8;
  builder.input("x", fb::DType::I8, {4});
  builder.output("y", fb::DType::F32, {4});
  EXPECT_NE(loadError(builder.build()).find("i8 tensor must be a weight"), std::string::npos);
}

}  // namespace
}  // namespace ein::testing
