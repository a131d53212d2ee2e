// The AMX table (tdpbf16ps, tdpbusd): offered exactly where the CPU and OS
// allow it, and its bf16 tile against exact sums. The int8 tile and both
// whole gemms on the amx table (forced, 1 and 2 threads: the pool's workers
// load their own tile configuration) are checked with every other table by
// S8TileTest, Int8GemmTest and Bf16GemmFastTest; the checks here that need
// AMX skip, with the reason, on CPUs without it.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "artifact_builder.hpp"
#include "ein/half_float.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::testing {
namespace {

using detail::cpu::IsaKernels;

const IsaKernels *amxTable() {
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    if (std::strcmp(isa->name, "amx") == 0) return isa;
  return nullptr;
}

TEST(AmxTable, OfferedFirstExactlyWhereUsable) {
  const IsaKernels *amx = amxTable();
  EXPECT_EQ(amx != nullptr, detail::cpu::amxUsable());
  if (!amx) GTEST_SKIP() << "this CPU or OS offers no AMX (CPUID leaf 7, XCR0 tile state, arch_prctl)";
  EXPECT_EQ(detail::cpu::supportedKernels().front(), amx) << "amx is the best table where it is usable";
  EXPECT_EQ(amx->s8GemmNr, detail::cpu::avx512VnniKernels().s8GemmNr) << "int8 panels shared with avx512vnni";
  EXPECT_EQ(amx->s8ActivationOffset, 128);
  EXPECT_EQ(amx->gemmNr, detail::cpu::avx512Bf16Kernels().gemmNr) << "bf16 pair panels shared with avx512bf16";
  ASSERT_NE(amx->bf16GemmTallTile, nullptr);
  ASSERT_NE(amx->bf16GemmTallHalfTile, nullptr);
  ASSERT_NE(amx->bf16GemmTallTileFromRow, nullptr);
  EXPECT_EQ(amx->bf16GemmTallMr, 32);
}

// `count` bf16 pairs, both halves uniform in [-1, 1) rounded to bf16.
std::vector<uint32_t> randomPairs(size_t count, std::mt19937 &random) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint32_t> pairs(count);
  for (uint32_t &x : pairs) {
    const uint16_t low = floatToBfloat(value(random));
    x = low | uint32_t(floatToBfloat(value(random))) << 16;
  }
  return pairs;
}

// The exact dot product of two bf16 pairs (as tdpbf16ps multiplies them).
double pairProduct(uint32_t x, uint32_t y) {
  auto low = [](uint32_t v) { return double(bfloatToFloat(static_cast<uint16_t>(v))); };
  auto high = [](uint32_t v) { return double(bfloatToFloat(static_cast<uint16_t>(v >> 16))); };
  return low(x) * low(y) + high(x) * high(y);
}

// c (+)= a . b over the 32 x 64 tile for depths around the tile's 16 pairs
// (the k tail on AVX512_BF16), accumulating or not, with strided a and c:
// within f32 summation error of the exact (double) sums of the bf16 products.
// The half tile: the same over the first 32 columns, the others untouched.
TEST(AmxTable, Bf16TallTileMatchesExactSums) {
  const IsaKernels *amx = amxTable();
  if (!amx) GTEST_SKIP() << "this CPU or OS offers no AMX";
  const int mr = amx->bf16GemmTallMr, nr = amx->gemmNr;
  std::mt19937 random(21);
  for (int64_t pairs : {1, 15, 16, 17, 31, 32, 48, 100, 384}) {
    const int64_t lda = pairs + 3, ldc = nr + 5;
    const std::vector<uint32_t> a = randomPairs(static_cast<size_t>(mr * lda), random),
                                b = randomPairs(static_cast<size_t>(pairs * nr), random);
    for (auto [accumulate, half] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      std::vector<float> c(static_cast<size_t>(mr * ldc), 0.5f);
      std::vector<double> want(c.begin(), c.end());
      for (int r = 0; r < mr; ++r)
        for (int j = 0; j < (half ? nr / 2 : nr); ++j) {
          double sum = accumulate ? want[r * ldc + j] : 0.0;
          for (int64_t q = 0; q < pairs; ++q) sum += pairProduct(a[r * lda + q], b[q * nr + j]);
          want[r * ldc + j] = sum;
        }
      if (half)
        amx->bf16GemmTallHalfTile(pairs, a.data(), lda, b.data(), c.data(), ldc, accumulate);
      else
        amx->bf16GemmTallTile(pairs, a.data(), lda, b.data(), c.data(), ldc, accumulate, nullptr, 0);
      int failures = 0;
      for (size_t i = 0; i < c.size() && failures < 8; ++i)
        if (std::fabs(c[i] - want[i]) > 2e-6 * double(2 * pairs)) {
          ++failures;
          ADD_FAILURE() << "pairs " << pairs << (accumulate ? " accumulating" : "") << (half ? " half" : "")
                        << " element " << i << ": got "
                        << c[i] << ", want " << want[i];
        }
    }
  }
}

// The tile whose sums start from a row (a bias), a in steps: every row of c
// is that row plus the exact sums; without a row, the plain sums. c's rows
// are ldc apart (wider than the tile), and the columns past the tile stay
// untouched. Side work given to it runs every part once, in order, whether
// it has more parts than the tile has steps or fewer.
TEST(AmxTable, Bf16TallTileFromRowStartsEveryRowThere) {
  const IsaKernels *amx = amxTable();
  if (!amx) GTEST_SKIP() << "this CPU or OS offers no AMX";
  const int mr = amx->bf16GemmTallMr, nr = amx->gemmNr;
  std::mt19937 random(5);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (int64_t pairs : {16, 40, 192}) {
    const int64_t ldc = nr + 7;
    const std::vector<uint32_t> a = randomPairs(static_cast<size_t>(mr * pairs), random),
                                b = randomPairs(static_cast<size_t>(pairs * nr), random);
    std::vector<float> row(static_cast<size_t>(nr));
    for (float &x : row) x = value(random);
    for (bool withRow : {true, false}) {
      std::vector<float> c(static_cast<size_t>(mr * ldc), -7.0f);
      // a's rows in steps of 16 pairs (each step's 32 rows together), then the rest.
      std::vector<uint32_t> steps;
      const int64_t whole = pairs / 16 * 16;
      for (int64_t q0 = 0; q0 < whole; q0 += 16)
        for (int r = 0; r < mr; ++r) steps.insert(steps.end(), a.begin() + r * pairs + q0, a.begin() + r * pairs + q0 + 16);
      for (int r = 0; r < mr; ++r) steps.insert(steps.end(), a.begin() + r * pairs + whole, a.begin() + (r + 1) * pairs);
      std::vector<int64_t> sideRan;
      const detail::cpu::TileSideWork side{
          [](void *ran, int64_t i) { static_cast<std::vector<int64_t> *>(ran)->push_back(i); }, &sideRan,
          withRow ? 32 : 3};
      amx->bf16GemmTallTileFromRow(pairs, steps.data(), b.data(), withRow ? row.data() : nullptr, c.data(), ldc,
                                   pairs == 40 ? nullptr : &side);
      std::vector<int64_t> wantRan;
      for (int64_t i = 0; pairs != 40 && i < side.parts; ++i) wantRan.push_back(i);
      EXPECT_EQ(sideRan, wantRan) << "pairs " << pairs;
      for (int r = 0; r < mr; ++r)
        for (int j = 0; j < ldc; ++j) {
          double want = -7.0;
          if (j < nr) {
            want = withRow ? row[j] : 0.0;
            for (int64_t q = 0; q < pairs; ++q) want += pairProduct(a[r * pairs + q], b[q * nr + j]);
          }
          ASSERT_NEAR(c[r * ldc + j], want, 2e-6 * double(2 * pairs + 4))
              << "pairs " << pairs << (withRow ? " from the row" : "") << " at " << r << ", " << j;
        }
    }
  }
}

// A thread that never ran a tile before (no configuration loaded) runs one.
TEST(AmxTable, EveryThreadLoadsItsOwnTileConfiguration) {
  const IsaKernels *amx = amxTable();
  if (!amx) GTEST_SKIP() << "this CPU or OS offers no AMX";
  const int mr = amx->s8GemmMr, nr = amx->s8GemmNr;
  std::vector<uint8_t> a(static_cast<size_t>(mr * 64), 129);  // s8 value 1
  std::vector<int8_t> b(static_cast<size_t>(16 * nr * 4), 2);
  std::vector<int32_t> c(static_cast<size_t>(mr * nr), -1);
  std::thread([&] { amx->s8GemmTile(16, a.data(), 64, b.data(), c.data(), nr, false, nullptr, 0); }).join();
  // 64 products of 129 * 2 (the driver subtracts 128 * the column sum later).
  for (int32_t x : c) ASSERT_EQ(x, 64 * 129 * 2);
}

// What another library on the thread leaves behind: oneDNN (PyTorch,
// OpenVINO) and llama.cpp load their own tile shapes, or release the tiles.
void loadForeignTileConfiguration() {
  struct alignas(64) TileConfig {
    uint8_t palette = 1, startRow = 0, reserved[14] = {};
    uint16_t bytesPerRow[16] = {};
    uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) {
    config.bytesPerRow[t] = 32;
    config.rows[t] = 8;
  }
  asm volatile("ldtilecfg %0" : : "m"(config));  // the whole struct (GCC's intrinsic claims 8 bytes)
}
__attribute__((target("amx-tile"))) void releaseTiles() { _tile_release(); }

// The first tile call of a kernel epoch (an executor run) makes sure the
// thread holds this table's configuration: after another library changed it
// (a garbage product) or released the tiles (SIGILL) between runs, the int8
// and bf16 tiles still compute exact sums.
TEST(AmxTable, TilesReplaceAForeignTileConfiguration) {
  const IsaKernels *amx = amxTable();
  if (!amx) GTEST_SKIP() << "this CPU or OS offers no AMX";
  const int mr = amx->s8GemmMr, nr = amx->s8GemmNr;
  std::vector<uint8_t> a(static_cast<size_t>(mr * 64), 129);  // s8 value 1
  std::vector<int8_t> b(static_cast<size_t>(16 * nr * 4), 2);
  const int bf16Mr = amx->bf16GemmTallMr, bf16Nr = amx->gemmNr;
  const uint32_t one = floatToBfloat(1.0f), pairOfOnes = one | one << 16;
  std::vector<uint32_t> aPairs(static_cast<size_t>(bf16Mr * 16), pairOfOnes), bPairs(static_cast<size_t>(16 * bf16Nr), pairOfOnes);
  for (void (*disturb)() : {&loadForeignTileConfiguration, &releaseTiles}) {
    std::vector<int32_t> c(static_cast<size_t>(mr * nr), -1);
    disturb();
    detail::cpu::beginKernelEpoch();
    amx->s8GemmTile(16, a.data(), 64, b.data(), c.data(), nr, false, nullptr, 0);
    for (int32_t x : c) ASSERT_EQ(x, 64 * 129 * 2);
    std::vector<float> cf(static_cast<size_t>(bf16Mr * bf16Nr), -1.0f);
    disturb();
    detail::cpu::beginKernelEpoch();
    amx->bf16GemmTallTile(16, aPairs.data(), 16, bPairs.data(), cf.data(), bf16Nr, false, nullptr, 0);
    for (float x : cf) ASSERT_EQ(x, 32.0f);
  }
}

// The same through a session, as a process running ein and OpenVINO or
// PyTorch on one thread does: a bf16 gemm on the amx table gives the same
// bytes after another library changed or released the thread's tiles.
TEST(AmxTable, SessionRunsAfterAnotherLibraryUsedTheTiles) {
  if (!amxTable()) GTEST_SKIP() << "this CPU or OS offers no AMX";
  if (&detail::cpu::bestKernels() != amxTable()) GTEST_SKIP() << "EIN_CPU_ISA picks another table";
  constexpr int64_t m = 64, k = 64, n = 128;
  ArtifactBuilder builder;
  builder.precision = fb::Precision::Bf16;
  const uint32_t x = builder.input("x", fb::DType::F32, {m, k}), y = builder.output("y", fb::DType::F32, {m, n});
  const uint32_t w = builder.weightsBf16({k, n}, randomFloats(k * n, 3));
  builder.gemm({{}, m, n, k, dense(x, {m, k}), dense(w, {k, n}), dense(y, {m, n})});
  const std::vector<uint8_t> bytes = builder.build();
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "bf16_gemm.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto session = Session::create(model.value());
  ASSERT_TRUE(session.ok()) << session.status().toString();
  const std::vector<float> input = randomFloats(m * k, 4);
  ASSERT_TRUE((*session)->setInput("x", DType::F32, {m, k}, input.data(), input.size() * 4).ok());
  auto outputOfRun = [&] {
    const Status status = (*session)->run();
    EXPECT_TRUE(status.ok()) << status.toString();
    const TensorRef out = (*session)->output(0).value();
    const auto *data = static_cast<const float *>(out.data);
    return std::vector<float>(data, data + m * n);
  };
  const std::vector<float> first = outputOfRun();
  for (void (*disturb)() : {&loadForeignTileConfiguration, &releaseTiles}) {
    disturb();
    EXPECT_EQ(outputOfRun(), first);
  }
}

}  // namespace
}  // namespace ein::testing
