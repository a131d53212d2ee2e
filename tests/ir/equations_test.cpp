// The einops and einsum grammar (ir/ein/equations.cpp) against what einops and
// NumPy accept and reject, with the plans checked axis by axis: the pipeline
// tests compare the compiler with a reference that reads the same plans, so
// the plans' meaning is pinned down here.
#include "ir/ein/equations.hpp"

#include <gtest/gtest.h>

namespace {

using ein::EinopsKind;
using ein::EinopsPlan;
using ein::Shape;

std::map<std::string, ein::Size> sizeMap(const std::map<std::string, int64_t> &sizes) {
  return std::map<std::string, ein::Size>(sizes.begin(), sizes.end());
}

EinopsPlan plan(EinopsKind kind, const std::string &pattern, const Shape &input,
                const std::map<std::string, int64_t> &sizes = {}) {
  auto result = ein::planEinops(kind, pattern, input, sizeMap(sizes));
  EXPECT_FALSE(ein::failed(result)) << pattern << ": " << std::get<ein::EquationError>(result).message;
  return ein::failed(result) ? EinopsPlan{} : std::get<EinopsPlan>(result);
}

std::string error(EinopsKind kind, const std::string &pattern, const Shape &input,
                  const std::map<std::string, int64_t> &sizes = {}) {
  auto result = ein::planEinops(kind, pattern, input, sizeMap(sizes));
  return ein::failed(result) ? std::get<ein::EquationError>(result).message : "(accepted)";
}

TEST(Einops, EllipsisOnTheLeftOnlyIsReducedByReduce) {
  EinopsPlan p = plan(EinopsKind::Reduce, "b ... c -> b c", {2, 3, 4, 5});
  EXPECT_EQ(p.resultShape, (Shape{2, 5}));
  EXPECT_EQ(p.reducedAxes, (std::vector<int>{1, 2}));  // the two axes under "..."
  EXPECT_NE(error(EinopsKind::Rearrange, "b ... c -> b c", {2, 3, 4, 5}), "(accepted)");
  EXPECT_NE(error(EinopsKind::Repeat, "b ... c -> b c", {2, 3, 4, 5}), "(accepted)");
  EXPECT_NE(error(EinopsKind::Reduce, "b c -> b c ...", {2, 3}), "(accepted)");
}

TEST(Einops, EllipsisInsideAGroupOnTheRightFlattens) {
  EinopsPlan p = plan(EinopsKind::Rearrange, "b ... -> b (...)", {2, 3, 4});
  EXPECT_EQ(p.resultShape, (Shape{2, 12}));
  EXPECT_EQ(p.outputSource, (std::vector<int>{0, 1, 2}));
  EinopsPlan mixed = plan(EinopsKind::Rearrange, "b ... -> (... b)", {2, 3, 4});
  EXPECT_EQ(mixed.resultShape, (Shape{24}));
  EXPECT_EQ(mixed.outputSource, (std::vector<int>{1, 2, 0}));
  // With no axes under it, "(...)" is a unit axis.
  EXPECT_EQ(plan(EinopsKind::Rearrange, "a b ... -> a b (...)", {2, 3}).resultShape, (Shape{2, 3, 1}));
  // As in einops, the left side may not hold "(...)".
  EXPECT_NE(error(EinopsKind::Rearrange, "b (...) -> b ...", {2, 12}).find("not allowed on the left"),
            std::string::npos);
}

TEST(Einops, AnonymousAxesInReduceAndRepeat) {
  // Max-pooling pairs of rows: (h 2) splits the rows, the anonymous 2 is reduced.
  EinopsPlan pool = plan(EinopsKind::Reduce, "(h 2) w -> h w", {6, 4});
  EXPECT_EQ(pool.resultShape, (Shape{3, 4}));
  EXPECT_EQ(pool.inputAxisSizes, (Shape{3, 2, 4}));
  EXPECT_EQ(pool.reducedAxes, (std::vector<int>{1}));
  EinopsPlan repeat = plan(EinopsKind::Repeat, "h w -> h w 3", {6, 4});
  EXPECT_EQ(repeat.resultShape, (Shape{6, 4, 3}));
  EXPECT_EQ(repeat.outputSource, (std::vector<int>{0, 1, -1}));
  EXPECT_EQ(plan(EinopsKind::Repeat, "h w -> h (w 2)", {6, 4}).resultShape, (Shape{6, 8}));
  // Two anonymous axes of the same size are different axes.
  EXPECT_EQ(plan(EinopsKind::Reduce, "(h 2) (w 2) -> h w", {6, 4}).resultShape, (Shape{3, 2}));
  EXPECT_NE(error(EinopsKind::Rearrange, "(h 2) w -> h w", {6, 4}).find("anonymous"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Reduce, "h w -> h w 2", {6, 4}), "(accepted)");
  EXPECT_NE(error(EinopsKind::Reduce, "(h 4) w -> h w", {6, 4}).find("not divisible by 4"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Reduce, "(h 0) w -> h w", {6, 4}).find("positive"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Reduce, "3 w -> w", {6, 4}).find("anonymous axis 3 is 6"), std::string::npos);
}

TEST(Einops, RejectsWhatEinopsRejects) {
  for (const char *pattern : {"h ...pre -> h", "h pre... -> h", "h .. w -> h w", "h . -> h"})
    EXPECT_NE(error(EinopsKind::Reduce, pattern, {6, 4, 2}).find("dots"), std::string::npos) << pattern;
  for (const char *pattern : {"_h w -> w _h", "h_ w -> w h_", "_ w -> w _"})
    EXPECT_NE(error(EinopsKind::Rearrange, pattern, {6, 4}).find("'_'"), std::string::npos) << pattern;
  EXPECT_NE(error(EinopsKind::Rearrange, "2h w -> w 2h", {6, 4}).find("invalid axis name"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Rearrange, "h ... ... -> h", {6, 4}).find("more than one"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Rearrange, "h w -> w -> h", {6, 4}).find("more than one '->'"), std::string::npos);
  EXPECT_NE(error(EinopsKind::Rearrange, "h w -> w h h", {6, 4}).find("twice"), std::string::npos);
  // Inner underscores are fine.
  EXPECT_EQ(plan(EinopsKind::Rearrange, "head_dim w -> w head_dim", {6, 4}).resultShape, (Shape{4, 6}));
}

TEST(Einops, NonAsciiNamesAreReportedAsValidUtf8) {
  std::string message = error(EinopsKind::Rearrange, "h\xC3\xA9 w -> w h\xC3\xA9", {6, 4});
  EXPECT_NE(message.find("'\xC3\xA9'"), std::string::npos) << message;
  // A byte that is not UTF-8 is shown escaped.
  message = error(EinopsKind::Rearrange, "h\xFF w -> w h", {6, 4});
  EXPECT_NE(message.find("'\\xFF'"), std::string::npos) << message;
  auto einsum = ein::EinsumEquation::parse("i\xC3\xA9,jk->ik", {2, 2});
  ASSERT_TRUE(ein::failed(einsum));
  EXPECT_NE(std::get<ein::EquationError>(einsum).message.find("'\xC3\xA9'"), std::string::npos);
}

// NumPy and torch broadcast a size-1 axis against its label's size elsewhere;
// the front end takes index 0 there and drops the label from that term.
TEST(Einsum, SizeOneAxesBroadcastByLeavingTheirLabelOut) {
  auto parsed = ein::EinsumEquation::parse("ik,kj->ij", {2, 2});
  ASSERT_FALSE(ein::failed(parsed));
  const auto &equation = std::get<ein::EinsumEquation>(parsed);
  std::vector<Shape> shapes = {{3, 1}, {4, 5}};
  EXPECT_TRUE(ein::failed(equation.inferShape(shapes)));  // as written, 'k' is 1 and 4
  auto axes = equation.broadcastAxes(shapes);
  EXPECT_EQ(axes, (std::vector<std::vector<size_t>>{{1}, {}}));
  ein::EinsumEquation broadcast = equation.withoutAxes(axes);
  EXPECT_EQ(broadcast.str(), "i, k j -> i j");  // sum_k a[i,0] * b[k,j] = a[i,0] * sum_k b[k,j]
  auto shape = broadcast.inferShape({{3}, {4, 5}});
  ASSERT_FALSE(ein::failed(shape));
  EXPECT_EQ(std::get<Shape>(shape), (Shape{3, 5}));

  // Sizes that agree, or are 1 everywhere, and repeated labels (diagonals) stay.
  auto same = std::get<ein::EinsumEquation>(ein::EinsumEquation::parse("ii,ij->ij", {2, 2}));
  EXPECT_EQ(same.broadcastAxes({{1, 1}, {1, 4}}), (std::vector<std::vector<size_t>>{{}, {}}));
  auto diagonal = std::get<ein::EinsumEquation>(ein::EinsumEquation::parse("ii,i->i", {2, 1}));
  EXPECT_EQ(diagonal.broadcastAxes({{1, 1}, {3}}), (std::vector<std::vector<size_t>>{{}, {}}));

  // Ellipsis axes broadcast the same way (NumPy's "...ij,...jk" of [2, 1, 3, 4] and [5, 4, 6]).
  auto batched = std::get<ein::EinsumEquation>(ein::EinsumEquation::parse("...ij,...jk", {4, 3}));
  std::vector<Shape> batchedShapes = {{2, 1, 3, 4}, {5, 4, 6}};
  EXPECT_TRUE(ein::failed(batched.inferShape(batchedShapes)));
  auto batchedAxes = batched.broadcastAxes(batchedShapes);
  EXPECT_EQ(batchedAxes, (std::vector<std::vector<size_t>>{{1}, {}}));
  auto batchedShape = batched.withoutAxes(batchedAxes).inferShape({{2, 3, 4}, {5, 4, 6}});
  ASSERT_FALSE(ein::failed(batchedShape));
  EXPECT_EQ(std::get<Shape>(batchedShape), (Shape{2, 5, 3, 6}));
}

}  // namespace
