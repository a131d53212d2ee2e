// Dynamic batching (ein/batching.hpp): requests checked alone, grouped and cut
// into runs by the padding rule, merged and split back with copyBlock.
#include "ein/batching.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "artifact_builder.hpp"

namespace ein {
namespace {

// A BERT-style signature: dims b = 1..8 (batch), t = 1..16 (padded), c = 1..4
// (not padded); ids i32[b, t] (ids below 100), mask i32[b, t], extra
// f32[b, c, 2]; output pooled f32[b, 3].
BatchSignature bertSignature() {
  BatchSignature signature;
  signature.dims = {{"b", 1, 8}, {"t", 1, 16}, {"c", 1, 4}};
  signature.batchDim = 0;
  signature.padded = {false, true, false};
  signature.inputs = {{"ids", DType::I32, {-1}, {1}, 100},
                      {"mask", DType::I32, {-1}, {1}, 0},
                      {"extra", DType::F32, {-1, 2}, {2, -1}, 0}};
  signature.outputs = {{"pooled", DType::F32, {3}, {-1}, 0}};
  return signature;
}

// Inputs for `rows` sentences of `tokens` tokens and `c` extras, their data
// kept in `storage`.
struct Request {
  std::vector<int64_t> tokensShape, extraShape;
  std::vector<int32_t> ids, mask;
  std::vector<float> extra;
  Request(int64_t rows, int64_t tokens, int64_t c, int32_t firstId = 1)
      : tokensShape{rows, tokens}, extraShape{rows, c, 2}, ids(rows * tokens), mask(rows * tokens, 1),
        extra(rows * c * 2, 0.5f) {
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (firstId + static_cast<int32_t>(i)) % 100;
  }
  std::vector<InputTensor> inputs() const {
    return {{"ids", DType::I32, tokensShape, ids.data(), ids.size() * 4},
            {"mask", DType::I32, tokensShape, mask.data(), mask.size() * 4},
            {"extra", DType::F32, extraShape, extra.data(), extra.size() * 4}};
  }
};

std::string checkError(const BatchSignature &signature, std::vector<InputTensor> inputs) {
  auto dims = checkRequest(signature, inputs);
  return dims.ok() ? std::string("ok") : dims.status().message();
}

TEST(Batching, ARequestsDimsAreReadFromItsShapes) {
  Request request(2, 5, 3);
  auto dims = checkRequest(bertSignature(), request.inputs());
  ASSERT_TRUE(dims.ok()) << dims.status().toString();
  EXPECT_EQ(*dims, (std::vector<int64_t>{2, 5, 3}));
}

TEST(Batching, AMalformedRequestSaysWhatWasExpectedAndWhatCame) {
  const BatchSignature signature = bertSignature();
  Request good(2, 5, 3);
  auto inputs = good.inputs();

  auto missing = inputs;
  missing.pop_back();
  EXPECT_EQ(checkError(signature, missing), "input \"extra\" is missing");

  auto unknown = inputs;
  unknown.push_back({"tokens", DType::I32, good.tokensShape, good.ids.data(), good.ids.size() * 4});
  EXPECT_EQ(checkError(signature, unknown), "unknown input \"tokens\"; the model takes [ids, mask, extra]");

  auto twice = inputs;
  twice.push_back(inputs[0]);
  EXPECT_EQ(checkError(signature, twice), "input \"ids\" is given twice");

  auto dtype = inputs;
  dtype[2].dtype = ElementType::I32;
  EXPECT_EQ(checkError(signature, dtype), "input \"extra\" expects f32[b, c, 2], got i32[2, 3, 2]");

  std::vector<int64_t> wrongConstant{2, 3, 4};
  auto constant = inputs;
  constant[2].shape = wrongConstant;
  EXPECT_EQ(checkError(signature, constant), "input \"extra\" expects f32[b, c, 2], got f32[2, 3, 4]");

  Request tooLong(2, 17, 3);
  EXPECT_EQ(checkError(signature, tooLong.inputs()), "input \"ids\" axis 1 is 17, but t ranges over 1..16");

  std::vector<int64_t> otherTokens{2, 6};
  auto unequal = inputs;
  unequal[1].shape = otherTokens;
  unequal[1].bytes = 2 * 6 * 4;
  std::vector<int32_t> longerMask(12, 1);
  unequal[1].data = longerMask.data();
  EXPECT_EQ(checkError(signature, unequal), "input \"mask\" axis 1 is 6, but t = 5 (from input \"ids\" axis 1)");

  auto shortData = inputs;
  shortData[0].bytes -= 4;
  EXPECT_EQ(checkError(signature, shortData), "input \"ids\" holds 36 bytes; its shape [2, 5] takes 40");

  Request badId(2, 5, 3);
  badId.ids[7] = 100;
  auto outside = checkRequest(signature, badId.inputs());
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), StatusCode::OutOfRange);
  EXPECT_EQ(outside.status().message(), "input \"ids\" holds id 100, outside [0, 100)");
}

TEST(Batching, RunsKeepThePaddingWithinTheRatioAndTheRowsWithinTheBatchDim) {
  const BatchSignature signature = bertSignature();
  // dims {b, t, c}, longest first: 0 and 1 merge (2 rows of 16 tokens over
  // 31 real); 4 (6 rows of 8) would pad to 128 over 79 real: a run of its
  // own; 5 (3 rows) would make 9 rows with it: another run, which 2 (one row
  // of 4) joins (4 rows of 8 over 28 real); 3 has another c: its own group.
  std::vector<std::vector<int64_t>> dims = {{1, 16, 1}, {1, 15, 1}, {1, 4, 1}, {1, 16, 2}, {6, 8, 1}, {3, 8, 1}};
  auto runs = planRuns(signature, dims, 1.25);
  std::vector<std::vector<size_t>> sorted = runs;
  for (auto &run : sorted) std::sort(run.begin(), run.end());
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::vector<size_t>>{{0, 1}, {2, 5}, {3}, {4}}));
  // Cheapest first (rows x padded tokens): 3 (16), then 32, 32, and 4 (48).
  EXPECT_EQ(runs.front(), std::vector<size_t>{3});
  EXPECT_EQ(runs.back(), std::vector<size_t>{4});
  // Ratio 1 merges only equal padded sizes.
  EXPECT_EQ(planRuns(signature, std::vector<std::vector<int64_t>>{{1, 16, 1}, {1, 15, 1}}, 1.0).size(), 2u);
  EXPECT_EQ(planRuns(signature, std::vector<std::vector<int64_t>>{{1, 8, 1}, {2, 8, 1}}, 1.0).size(), 1u);
}

TEST(Batching, MergedRequestsGetTheirOwnRowsBack) {
  const BatchSignature signature = bertSignature();
  Request first(2, 5, 3, 1), second(1, 7, 3, 50);
  std::vector<std::vector<int64_t>> members = {{2, 5, 3}, {1, 7, 3}};
  std::vector<int64_t> run = mergedDims(signature, members);
  EXPECT_EQ(run, (std::vector<int64_t>{3, 7, 3}));
  const BatchedTensor &ids = signature.inputs[0];
  std::vector<int64_t> runShape = batchedShape(ids, run, run[0]);
  EXPECT_EQ(runShape, (std::vector<int64_t>{3, 7}));

  std::vector<int32_t> merged(3 * 7, 0);
  auto *to = reinterpret_cast<std::byte *>(merged.data());
  copyBlock(reinterpret_cast<const std::byte *>(first.ids.data()), first.tokensShape, 0, to, runShape, 0,
            first.tokensShape, 4);
  copyBlock(reinterpret_cast<const std::byte *>(second.ids.data()), second.tokensShape, 0, to, runShape, 2,
            second.tokensShape, 4);
  EXPECT_EQ(merged, (std::vector<int32_t>{1, 2, 3, 4, 5, 0, 0,  //
                                          6, 7, 8, 9, 10, 0, 0,  //
                                          50, 51, 52, 53, 54, 55, 56}));

  // Each takes its rows back, cut to its own tokens.
  std::vector<int32_t> back(2 * 5);
  copyBlock(reinterpret_cast<const std::byte *>(merged.data()), runShape, 0,
            reinterpret_cast<std::byte *>(back.data()), first.tokensShape, 0, first.tokensShape, 4);
  EXPECT_EQ(back, first.ids);
  std::vector<int32_t> secondBack(7);
  copyBlock(reinterpret_cast<const std::byte *>(merged.data()), runShape, 2,
            reinterpret_cast<std::byte *>(secondBack.data()), second.tokensShape, 0, second.tokensShape, 4);
  EXPECT_EQ(secondBack, second.ids);

  // A rank-3 block: extra f32[b, c, 2] of rows 1..2 of a 3-row run.
  std::vector<int64_t> cube{3, 3, 2}, block{2, 3, 2};
  std::vector<float> source(18);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i);
  std::vector<float> rows(12);
  copyBlock(reinterpret_cast<const std::byte *>(source.data()), cube, 1, reinterpret_cast<std::byte *>(rows.data()),
            block, 0, block, 4);
  EXPECT_EQ(rows, std::vector<float>(source.begin() + 6, source.end()));
}

TEST(Batching, AModelWithoutABatchDimIsRefused) {
  // Its output probsT f32[4, b, t] does not start with the batch dim.
  std::vector<uint8_t> artifact = testing::dynamicEveryKernelArtifact();
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "m");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto refused = BatchSignature::create(**model, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "a served model needs a batch dim: a ranged dim that sizes the first axis of every input and output "
            "(here the first axes are [b, 4], ranged dims [b, t])");
}

}  // namespace
}  // namespace ein
