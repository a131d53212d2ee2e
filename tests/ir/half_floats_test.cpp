// ir/half_floats.hpp: the bf16 conversion by bits gives APFloat's
// round-to-nearest-even bits, ties, overflow, subnormals and NaN included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ir/half_floats.hpp"

namespace {

uint16_t bf16ByApFloat(float value) {
  llvm::APFloat converted(value);
  bool lost = false;
  converted.convert(llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &lost);
  return static_cast<uint16_t>(converted.bitcastToAPInt().getZExtValue());
}

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(HalfFloats, Bf16BitsAreApFloatsRoundedToNearestEven) {
  const float special[] = {0.0f, -0.0f, 1.0f, -1.5f, 3.0e38f, -3.4e38f, std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::denorm_min(), 1e-40f, fromBits(0x3f808000u) /* a tie */,
                           fromBits(0x3f818000u) /* a tie, odd */, fromBits(0x7f7f8000u) /* rounds to infinity */};
  for (float value : special) EXPECT_EQ(ein::ir::toBf16Bits(value), bf16ByApFloat(value)) << value;
  std::mt19937 random(7);
  for (int i = 0; i < 200000; ++i) {
    const float value = fromBits(static_cast<uint32_t>(random()));
    if (std::isnan(value)) continue;
    ASSERT_EQ(ein::ir::toBf16Bits(value), bf16ByApFloat(value)) << value;
  }
}

TEST(HalfFloats, NaNStaysAQuietNaNAndBf16WidensExactly) {
  for (uint32_t bits : {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0x7fa00000u}) {
    const uint16_t narrowed = ein::ir::toBf16Bits(fromBits(bits));
    EXPECT_TRUE(std::isnan(ein::ir::fromHalfBits(narrowed, llvm::APFloat::BFloat()))) << std::hex << bits;
  }
  for (uint32_t bits = 0; bits < 0x10000u; bits += 7) {
    const float wide = ein::ir::fromHalfBits(static_cast<uint16_t>(bits), llvm::APFloat::BFloat());
    const float expected =
        llvm::APFloat(llvm::APFloat::BFloat(), llvm::APInt(16, bits)).convertToFloat();
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(wide));
    } else {
      EXPECT_EQ(std::memcmp(&wide, &expected, sizeof wide), 0) << bits;
    }
  }
}

}  // namespace
