// The f16/bf16 conversions and the element-wise kernels' stores: rounding to
// nearest even, subnormals, overflow, NaN, and integer stores that never hit
// an undefined float-to-int conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ein/half_float.hpp"
#include "backends/cpu/kernels/element_io.hpp"

namespace ein {
namespace {

TEST(HalfFloat, F16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    if ((half & 0x7c00u) == 0x7c00u) continue;  // inf and NaN below
    EXPECT_EQ(floatToHalf(halfToFloat(half)), half) << std::hex << bits;
  }
}

TEST(HalfFloat, F16Values) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(halfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties go to the even one.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);  // rounds down to the largest
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(floatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest subnormal: even
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7c00, 0x7c00);
  EXPECT_NE(floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x03ff, 0);
}

TEST(HalfFloat, Bf16Values) {
  EXPECT_EQ(bfloatToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBfloat(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(floatToBfloat(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBfloat(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBfloat(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_TRUE(std::isnan(bfloatToFloat(floatToBfloat(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto bf = static_cast<uint16_t>(bits);
    if ((bf & 0x7f80u) == 0x7f80u) continue;
    EXPECT_EQ(floatToBfloat(bfloatToFloat(bf)), bf) << std::hex << bits;
  }
}

TEST(HalfFloat, IntegerStoresRoundAndSaturate) {
  using detail::cpu::floatToInt;
  EXPECT_EQ(floatToInt<int32_t>(2.9999998f), 3);
  EXPECT_EQ(floatToInt<int32_t>(-7.0f), -7);
  EXPECT_EQ(floatToInt<int32_t>(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(floatToInt<int32_t>(std::numeric_limits<float>::infinity()), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(floatToInt<int32_t>(-1e20f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(floatToInt<int64_t>(1e30f), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(floatToInt<int64_t>(16777216.0f), 16777216);
}

TEST(HalfFloat, StridedLoadsAndStores) {
  const float values[3] = {1.5f, -2.25f, 1e6f};
  uint16_t halves[6] = {};
  detail::cpu::storeFromF32(reinterpret_cast<std::byte *>(halves), DType::F16, 1, 2, 3, values);
  EXPECT_EQ(halves[0], 0);
  EXPECT_EQ(halfToFloat(halves[1]), 1.5f);
  EXPECT_EQ(halfToFloat(halves[3]), -2.25f);
  EXPECT_EQ(halves[5], 0x7c00);  // 1e6 overflows f16
  float back[3];
  detail::cpu::loadAsF32(reinterpret_cast<const std::byte *>(halves), DType::F16, 1, 2, 3, back);
  EXPECT_EQ(back[0], 1.5f);
  EXPECT_EQ(back[1], -2.25f);
  EXPECT_TRUE(std::isinf(back[2]));
  int64_t ints[3];
  detail::cpu::storeFromF32(reinterpret_cast<std::byte *>(ints), DType::I64, 0, 1, 3, values);
  EXPECT_EQ(ints[0], 2);  // 1.5 rounds to even
  EXPECT_EQ(ints[1], -2);
  EXPECT_EQ(ints[2], 1000000);
}

}  // namespace
}  // namespace ein
