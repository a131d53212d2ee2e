// Sizes over ranged dims (ir/ein/size.cpp): one canonical form, so equal
// sizes built different ways compare equal; exact and floor division;
// evaluation, bounds over ranges, printing and parsing.
#include "ir/ein/size.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace {

using ein::Size;

const Size b = Size::dim("b"), t = Size::dim("t");

TEST(Size, ConstantsBehaveLikeIntegers) {
  EXPECT_EQ((Size(3) * 4 + 2).constant(), 14);
  EXPECT_EQ(Size().constant(), 0);
  EXPECT_TRUE(Size(7).isConstant());
  EXPECT_FALSE(t.isConstant());
  EXPECT_EQ((t - t).constant(), 0);
}

TEST(Size, EqualSizesBuiltDifferentlyCompareEqual) {
  EXPECT_EQ(t + 1, Size(1) + t);
  EXPECT_EQ(b * t * 384, Size(384) * t * b);
  EXPECT_EQ((t + 1) * (t + 1), t * t + t * 2 + 1);
  EXPECT_EQ(b * (t + 1) - b, b * t);
  EXPECT_NE(t + 1, t + 2);
  EXPECT_NE(b * t, b + t);
  EXPECT_EQ((b * t).hash(), (t * b).hash());
}

TEST(Size, FloorDivisionIsExactWhereTheDivisorDividesEveryCoefficient) {
  EXPECT_EQ(Size::floorDiv(t * 16, 16), t);
  EXPECT_EQ(Size::floorDiv(t * 32 + 48, 16), t * 2 + 3);
  // floor((16 t + 5) / 16) = t, as t is an integer.
  EXPECT_EQ(Size::floorDiv(t * 16 + 5, 16), t);
  EXPECT_EQ(Size::mod(t * 16 + 5, 16), Size(5));
  EXPECT_EQ(Size::floorDiv(Size(-7), 2).constant(), -4);
}

// Division by a size over dims: exact where the divisor, one term, divides
// every term ("(b t) c -> b t c" with b=b splits b*t into b and t).
TEST(Size, ExactQuotientsByTermsOverDims) {
  EXPECT_EQ(Size::exactQuotient(b * t * 384, b), t * 384);
  EXPECT_EQ(Size::exactQuotient(b * t + b * 6, b * 2), std::nullopt);  // 1 is not a multiple of 2
  EXPECT_EQ(Size::exactQuotient(b * t * 2 + b * 6, b * 2), t + 3);
  EXPECT_EQ(Size::exactQuotient(b * t, b * t), Size(1));
  EXPECT_EQ(Size::exactQuotient(t * t * 3, t), t * 3);
  EXPECT_EQ(Size::exactQuotient(Size(12), Size(4)), Size(3));
  EXPECT_EQ(Size::exactQuotient(t + 1, t), std::nullopt);
  EXPECT_EQ(Size::exactQuotient(b * 6, t), std::nullopt);
  EXPECT_EQ(Size::exactQuotient(b * t, b + t), std::nullopt);  // a divisor of two terms
  EXPECT_EQ(Size::exactQuotient(b, Size(0)), std::nullopt);
}

TEST(Size, InexactQuotientsStaySymbolicAndEvaluateRoundingDown) {
  Size patches = Size::floorDiv(t, 16);
  EXPECT_FALSE(patches.isConstant());
  EXPECT_EQ(patches.str(), "floordiv(t, 16)");
  EXPECT_EQ(patches.evaluate({{"t", 47}}), 2);
  // floor((t + 16) / 16) = floor(t / 16) + 1.
  EXPECT_EQ(Size::floorDiv(t + 16, 16), patches + 1);
  EXPECT_EQ(Size::mod(t, 16).evaluate({{"t", 47}}), 15);
  EXPECT_EQ(patches * 16 + Size::mod(t, 16), t);
  EXPECT_EQ(patches.dims(), (std::set<std::string>{"t"}));
}

TEST(Size, EvaluatesAndReportsMissingDimsAndOverflow) {
  EXPECT_EQ((b * t * 384 + t).evaluate({{"b", 2}, {"t", 3}}), 2 * 3 * 384 + 3);
  EXPECT_EQ((b * t).evaluate({{"b", 2}}), std::nullopt);
  int64_t big = std::numeric_limits<int64_t>::max() / 2 + 1;
  EXPECT_EQ((t * 2).evaluate({{"t", big}}), std::nullopt);
}

TEST(Size, OverflowingConstantsPoisonTheSize) {
  Size huge = Size(std::numeric_limits<int64_t>::max()) * 2;
  EXPECT_TRUE(huge.overflowed());
  EXPECT_FALSE(huge.constant().has_value());
  EXPECT_TRUE((huge + 1).overflowed());
  EXPECT_EQ(huge.str(), "<overflow>");
}

TEST(Size, BoundsOverTheDimsRanges) {
  ein::DimRanges ranges{{"b", {1, 16}}, {"t", {1, 256}}};
  ein::SizeBounds product = (b * t * 384).bounds(ranges);
  EXPECT_EQ(product.min, 384);
  EXPECT_EQ(product.max, 16 * 256 * 384);
  ein::SizeBounds difference = (Size(300) - t).bounds(ranges);
  EXPECT_EQ(difference.min, 44);
  EXPECT_EQ(difference.max, 299);
  ein::SizeBounds quotient = Size::floorDiv(t, 16).bounds(ranges);
  EXPECT_EQ(quotient.min, 0);
  EXPECT_EQ(quotient.max, 16);
}

TEST(Size, PrintsReadablyAndParsesWhatItPrints) {
  EXPECT_EQ((b * t * 384 + t + 1).str(), "b*t*384 + t + 1");
  EXPECT_EQ((Size(5) - t).str(), "-t + 5");
  EXPECT_EQ(Size(0).str(), "0");
  for (const Size &size : {b * t * 384 + t + 1, Size(5) - t, Size::floorDiv(t * 3 + 1, 16) * b, Size(42), Size(0)}) {
    std::string error;
    std::optional<Size> parsed = Size::parse(size.str(), &error);
    ASSERT_TRUE(parsed) << size.str() << ": " << error;
    EXPECT_EQ(*parsed, size) << size.str();
  }
  EXPECT_EQ(Size::parse("(t + 1) * 2"), t * 2 + 2);
}

TEST(Size, ParseErrorsSayWhere) {
  std::string error;
  EXPECT_FALSE(Size::parse("t +", &error));
  EXPECT_NE(error.find("expected a size at offset 3"), std::string::npos) << error;
  EXPECT_FALSE(Size::parse("floordiv(t, 0)", &error));
  EXPECT_NE(error.find("the divisor must be positive"), std::string::npos) << error;
  EXPECT_FALSE(Size::parse("t t", &error));
  EXPECT_NE(error.find("unexpected 't'"), std::string::npos) << error;
  EXPECT_FALSE(Size::parse("99999999999999999999", &error));
  EXPECT_NE(error.find("integer out of range"), std::string::npos) << error;
}

}  // namespace
