// The group-scaled gemms (int4 artifacts, and int8 ones with a scale per
// group: einc --precision int4, --precision int8 --group-size 32): the
// per-group quantization of a row, the int4 and int8 tiles of every ISA table
// this CPU runs against the portable ones (bit for bit) and their
// definitions, the whole gemm against the reference (gemv and tile rows, 1
// and 2 threads, weights packed at load and packed as it goes, n and k off
// the panel and group sizes), and the loader's checks of the weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "artifact_builder.hpp"
#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "kernels/quantized_gemm_shape.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

using detail::cpu::IsaKernels;

// Each group of 32 is quantized as quantizeRowS8 quantizes a row of its own:
// a group with inf or NaN gets scale NaN and zeros, the others are unharmed;
// the tail past k is zero; the sums are the groups' sums of q.
TEST(QuantizeGroupsS8, QuantizesEachGroupAsARowOfItsOwn) {
  for (int64_t k : {1, 31, 32, 33, 64, 100, 385}) {
    std::vector<float> row = randomFloats(k, 60 + static_cast<uint32_t>(k));
    if (k > 40) row[35] = NAN;
    const int64_t groups = (k + 31) / 32;
    std::vector<int8_t> q(static_cast<size_t>(groups * 32), 99);
    std::vector<float> scale(static_cast<size_t>(groups));
    std::vector<int32_t> sum(static_cast<size_t>(groups));
    detail::cpu::quantizeGroupsS8(row.data(), 1, k, groups, q.data(), scale.data(), sum.data());
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t length = std::min<int64_t>(32, k - g * 32);
      std::vector<uint8_t> want(32);
      const float wantScale = detail::cpu::quantizeRowS8(row.data() + g * 32, 1, length, 32, 0, want.data());
      if (std::isnan(wantScale)) EXPECT_TRUE(std::isnan(scale[g])) << "k " << k << " group " << g;
      else EXPECT_EQ(scale[g], wantScale) << "k " << k << " group " << g;
      int32_t total = 0;
      for (int64_t p = 0; p < 32; ++p) {
        EXPECT_EQ(q[g * 32 + p], static_cast<int8_t>(want[p])) << "k " << k << " element " << g * 32 + p;
        total += q[g * 32 + p];
      }
      EXPECT_EQ(sum[g], total);
    }
    if (k > 40) {
      EXPECT_TRUE(std::isnan(scale[1]) && !std::isnan(scale[0]));
    }
  }
}

class GroupedTileTest : public ::testing::TestWithParam<const IsaKernels *> {};

// Every table's vector quantization gives quantizeGroupsS8's bytes, scales
// and sums: whole and partial groups, a group of zeros, groups with inf or
// NaN, exact halves (ties to even) and values clamped to 127.
TEST_P(GroupedTileTest, QuantizeRowMatchesTheDefinition) {
  const IsaKernels &isa = *GetParam();
  std::vector<std::vector<float>> rows;
  for (int64_t k : {1, 31, 32, 33, 64, 100, 385}) rows.push_back(randomFloats(k, 80 + static_cast<uint32_t>(k)));
  rows.push_back(std::vector<float>(70, 0.0f));
  rows.push_back(randomFloats(96, 5));
  rows.back()[40] = INFINITY;
  rows.back()[70] = NAN;
  // max 127: x * 1 exactly, so 0.5, 1.5, -2.5 are ties (to 0, 2, -2).
  rows.push_back({127.0f, 0.5f, 1.5f, -2.5f, -127.0f, 3.5f, 126.5f, -0.5f});
  rows.back().resize(40, 64.5f);
  for (const std::vector<float> &row : rows) {
    const auto k = static_cast<int64_t>(row.size()), groups = (k + 31) / 32;
    std::vector<int8_t> want(static_cast<size_t>(groups * 32)), got(want.size(), 99);
    std::vector<float> wantScale(static_cast<size_t>(groups)), gotScale(wantScale.size(), -1.0f);
    std::vector<int32_t> wantSum(static_cast<size_t>(groups)), gotSum(wantSum.size(), -1);
    detail::cpu::quantizeGroupsS8(row.data(), 1, k, groups, want.data(), wantScale.data(), wantSum.data());
    isa.s8QuantizeGroups(row.data(), k, groups, got.data(), gotScale.data(), gotSum.data());
    EXPECT_EQ(got, want) << isa.name << " k " << k;
    EXPECT_EQ(gotSum, wantSum) << isa.name << " k " << k;
    for (int64_t g = 0; g < groups; ++g)
      if (std::isnan(wantScale[g])) EXPECT_TRUE(std::isnan(gotScale[g])) << isa.name << " k " << k;
      else EXPECT_EQ(gotScale[g], wantScale[g]) << isa.name << " k " << k << " group " << g;
  }
}

// Each tile gives the portable tile's floats exactly (the same integer sums,
// the same f32 operations in the same order; the portable table's panels are
// 8 columns, so a wider panel's columns are compared with two of them) and
// the definition's value within f32 rounding: weights packed by
// packGroupedPanel from every value (each int4, each int8, -128 too), scales
// of both signs, 1 to 4 rows, activations at -127 and 127, a last panel short
// of columns.
TEST_P(GroupedTileTest, TilesMatchThePortableTilesAndTheDefinition) {
  const IsaKernels &isa = *GetParam(), &portable = detail::cpu::portableKernels();
  const int nr = isa.groupedNr;
  ASSERT_TRUE(nr == 8 || nr == 16) << isa.name;
  for (int bits : {4, 8}) {
    auto tile = [bits](const IsaKernels &table) { return bits == 4 ? table.s4GemmTile : table.s8GroupedGemmTile; };
    std::mt19937 random(7);
    std::uniform_int_distribution<int> weightValue(bits == 4 ? -8 : -128, bits == 4 ? 7 : 127), activation(-127, 127);
    std::uniform_real_distribution<float> scaleValue(-0.02f, 0.02f);
    for (int64_t groups : {1, 2, 3, 65}) {
      for (int cols : {nr, nr - 3}) {
        const int64_t k = groups * 32, lda = k + 8, lds = groups + 3, ldc = nr + 3;
        // b: k x nr weights (int4 two a byte, low nibble first), row-major;
        // scales: groups x nr f16.
        std::vector<int> q(static_cast<size_t>(k * nr));
        for (int &x : q) x = weightValue(random);
        q[5] = bits == 4 ? -8 : -128;
        std::vector<uint8_t> b(static_cast<size_t>(bits == 4 ? (k * nr + 1) / 2 : k * nr));
        for (int64_t e = 0; e < k * nr; ++e) {
          if (bits == 8) b[e] = static_cast<uint8_t>(q[e]);
          else b[e / 2] |= static_cast<uint8_t>((q[e] & 15) << (e % 2 * 4));
        }
        std::vector<uint16_t> scales(static_cast<size_t>(groups * nr));
        for (uint16_t &x : scales) x = floatToHalf(scaleValue(random));
        const int64_t groupBytes = detail::cpu::groupedGroupBytes(bits, nr);
        std::vector<uint8_t> panel(static_cast<size_t>(groups * groupBytes));
        detail::cpu::packGroupedPanel(bits, nr, b.data(), 0, nr, 1, scales.data(), nr, 1, k, cols, panel.data());
        std::vector<std::vector<uint8_t>> narrow(static_cast<size_t>(nr / 8));
        for (int half = 0; half < nr / 8; ++half) {
          narrow[half].resize(static_cast<size_t>(groups * detail::cpu::groupedGroupBytes(bits, 8)));
          detail::cpu::packGroupedPanel(bits, 8, b.data(), 8 * half, nr, 1, scales.data() + 8 * half, nr, 1, k,
                                        std::clamp(cols - 8 * half, 0, 8), narrow[half].data());
        }
        std::vector<int8_t> a(static_cast<size_t>(4 * lda));
        for (int8_t &x : a) x = static_cast<int8_t>(activation(random));
        a[0] = -127, a[1] = 127;
        std::vector<float> aScale = randomFloats(4 * lds, 21);
        std::vector<int32_t> aSum(static_cast<size_t>(4 * lds));
        for (int r = 0; r < 4; ++r)
          for (int64_t g = 0; g < groups; ++g)
            for (int p = 0; p < 32; ++p) aSum[r * lds + g] += a[r * lda + g * 32 + p];
        for (int rows = 1; rows <= 4; ++rows) {
          const std::string where = std::string(isa.name) + " bits " + std::to_string(bits) + " groups " +
                                    std::to_string(groups) + " columns " + std::to_string(cols) + " rows " +
                                    std::to_string(rows);
          std::vector<float> got(static_cast<size_t>(4 * ldc), -1.0f), want = got;
          tile(isa)(rows, groups, a.data(), lda, aScale.data(), aSum.data(), lds, panel.data(), got.data(), ldc);
          for (int half = 0; half < nr / 8; ++half)
            tile(portable)(rows, groups, a.data(), lda, aScale.data(), aSum.data(), lds, narrow[half].data(),
                           want.data() + 8 * half, ldc);
          EXPECT_EQ(got, want) << where;
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < nr; ++j) {
              double definition = 0.0, magnitude = 0.0;
              for (int64_t g = 0; g < groups && j < cols; ++g) {
                int64_t exact = 0;
                for (int p = 0; p < 32; ++p) exact += a[r * lda + g * 32 + p] * q[(g * 32 + p) * nr + j];
                const double term = double(aScale[r * lds + g]) * double(halfToFloat(scales[g * nr + j])) * double(exact);
                definition += term;
                magnitude += std::fabs(term);
              }
              EXPECT_NEAR(got[r * ldc + j], definition, 1e-6 * magnitude + 1e-30)
                  << where << " row " << r << " column " << j;
            }
          EXPECT_EQ(got[rows * ldc - 1], -1.0f) << "nothing written past the panel's columns";
        }
      }
    }
  }
}

// The 512-bit tiles with and without their software prefetch (the
// avx512vnni table holds one by CPU vendor: isa_avx512.cpp) give the same
// floats, so whichever this machine's table holds, the other is tested too.
TEST(GroupedTilePrefetch, WithAndWithoutGiveTheSameFloats) {
  const std::vector<const IsaKernels *> tables = detail::cpu::supportedKernels();
  const auto vnni = [](const IsaKernels *table) { return std::string(table->name) == "avx512vnni"; };
  if (std::none_of(tables.begin(), tables.end(), vnni)) GTEST_SKIP() << "this CPU has no AVX512_VNNI";
  constexpr int nr = 16;
  constexpr int64_t groups = 67, k = groups * 32, lda = k + 4, lds = groups + 1, ldc = nr + 2;
  std::mt19937 random(11);
  std::uniform_int_distribution<int> byte(0, 255), activation(-127, 127);
  std::uniform_real_distribution<float> scaleValue(-0.02f, 0.02f);
  std::vector<uint8_t> b(static_cast<size_t>(k * nr));
  for (uint8_t &x : b) x = static_cast<uint8_t>(byte(random));
  std::vector<uint16_t> scales(static_cast<size_t>(groups * nr));
  for (uint16_t &x : scales) x = floatToHalf(scaleValue(random));
  std::vector<int8_t> a(static_cast<size_t>(4 * lda));
  for (int8_t &x : a) x = static_cast<int8_t>(activation(random));
  const std::vector<float> aScale = randomFloats(4 * lds, 3);
  std::vector<int32_t> aSum(static_cast<size_t>(4 * lds));
  for (int r = 0; r < 4; ++r)
    for (int64_t g = 0; g < groups; ++g)
      for (int p = 0; p < 32; ++p) aSum[r * lds + g] += a[r * lda + g * 32 + p];
  using Tile = decltype(IsaKernels::s4GemmTile);
  const std::pair<Tile, Tile> flavours[] = {
      {&detail::cpu::s4GemmTileAvx512vnni, &detail::cpu::s4GemmTileAvx512vnniRowUnprefetched},
      {&detail::cpu::s8GroupedGemmTileAvx512vnni, &detail::cpu::s8GroupedGemmTileAvx512vnniRowUnprefetched}};
  for (int bits : {4, 8}) {
    std::vector<uint8_t> panel(static_cast<size_t>(groups * detail::cpu::groupedGroupBytes(bits, nr)));
    detail::cpu::packGroupedPanel(bits, nr, b.data(), 0, nr, 1, scales.data(), nr, 1, k, nr - 5, panel.data());
    const auto [prefetching, plain] = flavours[bits == 4 ? 0 : 1];
    for (int rows = 1; rows <= 4; ++rows) {
      std::vector<float> want(static_cast<size_t>(4 * ldc), -1.0f), got = want;
      prefetching(rows, groups, a.data(), lda, aScale.data(), aSum.data(), lds, panel.data(), want.data(), ldc);
      plain(rows, groups, a.data(), lda, aScale.data(), aSum.data(), lds, panel.data(), got.data(), ldc);
      EXPECT_EQ(got, want) << "bits " << bits << " rows " << rows;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GroupedTileTest, ::testing::ValuesIn(detail::cpu::supportedKernels()),
                         [](const auto &info) { return std::string(info.param->name); });

// --- the whole gemm -------------------------------------------------------------

// Random i4 bytes: every nibble value, two to a byte.
std::vector<uint8_t> randomI4(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> value(0, 255);
  std::vector<uint8_t> out(static_cast<size_t>((count + 1) / 2));
  for (uint8_t &x : out) x = static_cast<uint8_t>(value(random));
  if (count % 2) out.back() &= 15;  // the last byte's high nibble is no element
  return out;
}

// Random i8 bytes: every value, -128 too.
std::vector<uint8_t> randomI8(int64_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> value(0, 255);
  std::vector<uint8_t> out(static_cast<size_t>(count));
  for (uint8_t &x : out) x = static_cast<uint8_t>(value(random));
  return out;
}

// An int4 artifact's gemm (bits 4), or an int8 artifact's with a scale per
// group (bits 8): b weights [K, N] (or [N, K]) shared by the batch, f16
// scales [ceil(K / 32), N] of both signs.
std::vector<uint8_t> groupedGemmArtifact(const QuantizedGemmShape &s, int bits) {
  ArtifactBuilder builder;
  builder.precision = bits == 4 ? fb::Precision::Int4 : fb::Precision::Int8;
  const int64_t B = s.batch, M = s.m, N = s.n, K = s.k, G = (K + 31) / 32;
  uint32_t a = builder.input("a", fb::DType::F32, s.transposeA ? std::vector<int64_t>{B, K, M} : std::vector<int64_t>{B, M, K});
  uint32_t b = builder.weights(bits == 4 ? fb::DType::I4 : fb::DType::I8,
                               s.transposeB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
                               bits == 4 ? randomI4(K * N, 9) : randomI8(K * N, 9));
  std::vector<uint8_t> scaleBytes;
  for (float x : randomFloats(G * N, 10)) {
    const uint16_t bits = floatToHalf(x * 0.02f);
    scaleBytes.push_back(static_cast<uint8_t>(bits & 255));
    scaleBytes.push_back(static_cast<uint8_t>(bits >> 8));
  }
  uint32_t scale = builder.weights(fb::DType::F16, {G, N}, scaleBytes);
  uint32_t c = builder.output("c", fb::DType::F32, {B, M, N + 3});
  ViewSpec aView = s.transposeA ? ViewSpec{a, 0, {M * K, 1, M}} : ViewSpec{a, 0, {M * K, K, 1}};
  ViewSpec bView = s.transposeB ? ViewSpec{b, 0, {0, 1, K}} : ViewSpec{b, 0, {0, N, 1}};
  GemmSpec spec{{B}, M, N, K, aView, bView, ViewSpec{c, 0, {M * (N + 3), N + 3, 1}}};
  if (s.bias == 1) spec.bias = ViewSpec{builder.weightsF32({N}, randomFloats(N, 8)), 0, {0, 0, 1}};
  if (s.bias == 2) spec.bias = ViewSpec{builder.input("bias", fb::DType::F32, {N, M}), 0, {0, 1, M}};
  if (s.residual) spec.residual = ViewSpec{builder.input("r", fb::DType::F32, {B, M, N}), 0, {M * N, N, 1}};
  spec.activation = static_cast<fb::Activation>(s.activation);
  spec.alpha = s.alpha;
  spec.bGroupScale = ViewSpec{scale, 0, {N, 1}};
  builder.gemm(spec);
  return builder.build();
}

class GroupedGemmTest : public ::testing::TestWithParam<QuantizedGemmShape> {};

// Each group's sum is exact on every path; what differs from the reference
// (double) is the f32 sum over the groups and the epilogue.
TEST_P(GroupedGemmTest, MatchesTheReferenceOnEveryIsaThreadCountAndPacking) {
  for (int bits : {4, 8}) {
    StepHarness harness(groupedGemmArtifact(GetParam(), bits));
    const auto &gemm = std::get<detail::Gemm>(harness.program().steps[0].kernel);
    ASSERT_TRUE(gemm.bGroupScale.has_value());
    EXPECT_EQ(gemm.groupBits, bits);
    ASSERT_GE(gemm.packedB, 0) << "group-scaled weights are packed at load";
    EXPECT_EQ(harness.program().packed[gemm.packedB].groupBits, bits);
    std::vector<float> want = harness.run(detail::cpu::gemmF32Reference, detail::cpu::portableKernels(), 1);
    for (bool packed : {true, false}) {
      if (!packed) harness.dropPackedWeights();
      for (const IsaKernels *isa : detail::cpu::supportedKernels())
        for (int threads : {1, 2})
          expectNear(harness.run(detail::cpu::gemmGroupedDynamic, *isa, threads), want, 2e-5,
                     std::string(isa->name) + " bits " + std::to_string(bits) + " threads " + std::to_string(threads) +
                         (packed ? "" : " packing as it goes"));
    }
  }
}

using detail::Activation;
INSTANTIATE_TEST_SUITE_P(
    Shapes, GroupedGemmTest,
    ::testing::Values(QuantizedGemmShape{1, 1, 1, 1, false, false, 0, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 1, 131, 97, false, false, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{1, 1, 70, 771, false, true, 0, true, Activation::Gelu, 1.0f},
                      QuantizedGemmShape{2, 1, 65, 257, true, false, 2, true, Activation::Silu, -1.25f},
                      QuantizedGemmShape{1, 2, 129, 1601, false, true, 1, true, Activation::GeluTanh, 1.0f},
                      QuantizedGemmShape{1, 3, 200, 33, true, true, 2, false, Activation::Relu, 0.5f},
                      QuantizedGemmShape{3, 4, 17, 300, false, false, 1, true, Activation::Gelu, 1.0f},
                      QuantizedGemmShape{1, 5, 129, 300, false, true, 1, true, Activation::Silu, 1.0f},
                      QuantizedGemmShape{1, 197, 384, 384, false, true, 1, false, Activation::None, 1.0f},
                      QuantizedGemmShape{2, 33, 65, 257, true, true, 2, true, Activation::Silu, -1.25f},
                      QuantizedGemmShape{1, 13, 129, 3073, false, false, 0, false, Activation::Relu, 0.5f},
                      QuantizedGemmShape{2, 100, 17, 6, false, false, 1, false, Activation::None, 1.0f}),
    quantizedGemmName);

// --- the loader ---------------------------------------------------------------

std::string loadError(const std::vector<uint8_t> &bytes) {
  auto loaded = Model::loadFromMemory(bytes.data(), bytes.size());
  if (loaded.ok()) return "loaded";
  EXPECT_EQ(loaded.status().code(), StatusCode::InvalidArtifact) << loaded.status().toString();
  return loaded.status().toString();
}

// A small group-scaled gemm (k = 40: two groups, the second partial; int4
// unless changed) with one thing changed.
struct GroupedGemmCase {
  fb::Precision precision = fb::Precision::Int4;
  fb::DType bType = fb::DType::I4;
  bool groupScale = true, columnScale = false;
  fb::DType scaleType = fb::DType::F16;
  fb::Storage scaleStorage = fb::Storage::Weights;
  bool batchedB = false;
  fb::Target target = fb::Target::Cpu;
  bool copyOfB = false;  // a copy step reading the weights b too
};

std::vector<uint8_t> groupedGemm(const GroupedGemmCase &c) {
  ArtifactBuilder builder;
  builder.precision = c.precision;
  builder.target = c.target;
  const int64_t M = 2, N = 3, K = 40, G = 2;
  uint32_t a = builder.input("a", fb::DType::F32, {2, M, K});
  const int64_t bElements = (c.batchedB ? 2 : 1) * K * N;
  const uint64_t bBytes = c.bType == fb::DType::I4 ? (bElements + 1) / 2 : bElements * (c.bType == fb::DType::F32 ? 4 : 1);
  uint32_t b = builder.weights(c.bType, {bElements}, std::vector<uint8_t>(bBytes));
  const uint64_t scaleBytes = static_cast<uint64_t>(G * N) * (c.scaleType == fb::DType::F32 ? 4 : 2);
  uint32_t scale = c.scaleStorage == fb::Storage::Weights ? builder.weights(c.scaleType, {G, N}, std::vector<uint8_t>(scaleBytes))
                                                          : builder.input("s", c.scaleType, {G, N});
  uint32_t c0 = builder.output("c", fb::DType::F32, {2, M, N});
  GemmSpec spec{{2}, M, N, K, ViewSpec{a, 0, {M * K, K, 1}}, ViewSpec{b, 0, {c.batchedB ? K * N : 0, N, 1}},
                ViewSpec{c0, 0, {M * N, N, 1}}};
  if (c.groupScale) spec.bGroupScale = ViewSpec{scale, 0, {N, 1}};
  if (c.columnScale) spec.bScale = ViewSpec{builder.weightsF32({N}, {1.0f, 1.0f, 1.0f}), 0, {1}};
  builder.gemm(spec);
  if (c.copyOfB) {
    uint32_t copy = builder.output("copy", fb::DType::F32, {4});
    builder.copy(CopySpec{{4}, ViewSpec{b, 0, {1}}, ViewSpec{copy, 0, {1}}});
  }
  return builder.build();
}

TEST(GroupedGemmLoader, AcceptsGroupScaledGemmsAndRefusesEveryMalformedOne) {
  using fb::DType;
  auto refused = [](const GroupedGemmCase &c, const std::string &why) {
    const std::string error = loadError(groupedGemm(c));
    EXPECT_NE(error.find(why), std::string::npos) << error;
  };
  EXPECT_EQ(loadError(groupedGemm({})), "loaded");
  // The fuzzers' seeds.
  EXPECT_EQ(loadError(groupScaledLinearArtifact(4)), "loaded");
  EXPECT_EQ(loadError(groupScaledLinearArtifact(8)), "loaded");
  GroupedGemmCase f32Weights;
  f32Weights.bType = DType::F32;
  f32Weights.groupScale = false;
  EXPECT_EQ(loadError(groupedGemm(f32Weights)), "loaded") << "f32 weights stay allowed";
  GroupedGemmCase c;
  c.precision = fb::Precision::Int8;
  refused(c, "i4 tensor must be a weight of an int4 artifact");
  c = {};
  c.groupScale = false;
  refused(c, "need a b_group_scale view");
  c = {};
  c.columnScale = true;
  refused(c, "b_scale is only for int8");
  c = f32Weights;
  c.groupScale = true;
  refused(c, "b_group_scale is only for int8 or int4 weights b");
  // int8 weights with a scale per group (q8_0's format), in an int8 artifact only.
  GroupedGemmCase int8Groups;
  int8Groups.precision = fb::Precision::Int8;
  int8Groups.bType = DType::I8;
  EXPECT_EQ(loadError(groupedGemm(int8Groups)), "loaded");
  c = int8Groups;
  c.columnScale = true;
  refused(c, "either a b_scale or a b_group_scale view");
  c = int8Groups;
  c.groupScale = false;
  refused(c, "need either a b_scale or a b_group_scale view");
  c = int8Groups;
  c.precision = fb::Precision::Int4;
  refused(c, "i8 tensor must be a weight of an int8 artifact");
  c = int8Groups;
  c.scaleType = DType::BF16;
  refused(c, "view b_group_scale is over a bf16 tensor");
  c = {};
  c.scaleType = DType::F32;
  refused(c, "view b_group_scale is over a f32 tensor");
  c = {};
  c.scaleStorage = fb::Storage::Input;
  refused(c, "b_group_scale must view a weight tensor");
  c = {};
  c.batchedB = true;
  refused(c, "shared by the batch");
  c = {};
  c.target = fb::Target::Cuda;
  refused(c, "cpu target only");
  c = {};
  c.copyOfB = true;
  refused(c, "only a gemm's weights b may be i4");
  // An i4 tensor anywhere but the weights (an input).
  ArtifactBuilder builder;
  builder.precision = fb::Precision::Int4;
  builder.input("x", fb::DType::I4, {4});
  builder.output("y", fb::DType::F32, {4});
  EXPECT_NE(loadError(builder.build()).find("i4 tensor must be a weight"), std::string::npos);
}

}  // namespace
}  // namespace ein::testing
