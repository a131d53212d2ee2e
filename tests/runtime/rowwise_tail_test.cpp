// The steps a run of many sequences runs over the rows read only
// (program/rowwise_tail.hpp): those after the last step run per sequence, of
// a first run or on a state, and what they need from before them: the
// per-token arena tensors they read or write in part. A program whose
// tail would read anything else, or leave an output to earlier steps, has none.
#include <gtest/gtest.h>

#include "program/rowwise_tail.hpp"

namespace ein::detail {
namespace {

struct Operand {
  uint32_t tensor;
  bool written;
};

class RowwiseTailTest : public ::testing::Test {
 protected:
  // Tensor ids: 0 the ids input, 1 weights, 2 the cache (a state), 3 the
  // logits output; then per-token arena tensors from 4 on.
  RowwiseTailTest() {
    add(Storage::Input, true);
    add(Storage::Weights, false);
    add(Storage::State, false);
    add(Storage::Output, true);
    program.inputTensors = {0};
    program.outputTensors = {3};
  }
  uint32_t add(Storage storage, bool perToken) {
    Tensor tensor;
    tensor.storage = storage;
    tensor.perToken = perToken;
    program.tensors.push_back(tensor);
    return static_cast<uint32_t>(program.tensors.size() - 1);
  }
  void step(std::vector<Operand> operands, bool perSequence = false, bool firstRun = false) {
    program.steps.push_back(Step{Kernel{}, "step", perSequence, firstRun});
    StepInfo info;
    for (const Operand &operand : operands) info.operands.push_back({"x", operand.tensor, operand.written});
    program.stepInfos.push_back(info);
  }
  Program program;
};

TEST_F(RowwiseTailTest, ADecodersLastLayerAfterItsAttentionAndItsHeadAreTheTail) {
  const uint32_t h = add(Storage::Arena, true), attended = add(Storage::Arena, true), r = add(Storage::Arena, true);
  step({{0, false}, {1, false}, {h, true}});                          // embedding
  step({{h, false}, {2, true}});                                      // append to the cache
  step({{h, false}, {2, false}, {attended, true}}, /*perSequence=*/true);  // attention
  step({{attended, false}, {1, false}, {h, false}, {r, true}});      // projection + residual
  step({{r, false}, {1, false}, {3, true}});                          // head
  program.steps[1].perSequence = true;
  std::optional<RowwiseTail> tail = rowwiseTailOf(program);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->firstStep, 3u);
  EXPECT_EQ(tail->carried, (std::vector<uint32_t>{attended, h}));
}

TEST_F(RowwiseTailTest, ATensorWrittenInPartBeforeTheTailIsCarried) {
  const uint32_t h = add(Storage::Arena, true), joined = add(Storage::Arena, true);
  step({{0, false}, {1, false}, {h, true}});
  step({{h, false}, {2, false}, {joined, true}}, /*perSequence=*/true);  // its first half
  step({{h, false}, {joined, true}});                                    // its second half
  step({{joined, false}, {1, false}, {3, true}});
  std::optional<RowwiseTail> tail = rowwiseTailOf(program);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->firstStep, 2u);
  EXPECT_EQ(tail->carried, (std::vector<uint32_t>{h, joined}));
}

TEST_F(RowwiseTailTest, StepsOnAStateOrOfAFirstRunEndBeforeTheTail) {
  const uint32_t h = add(Storage::Arena, true), g = add(Storage::Arena, true);
  step({{0, false}, {1, false}, {h, true}}, /*perSequence=*/true);
  step({{h, false}, {2, true}});  // a state written once for all tokens
  step({{h, false}, {1, false}, {g, true}}, false, /*firstRun=*/true);
  step({{h, false}, {1, false}, {3, true}});
  std::optional<RowwiseTail> tail = rowwiseTailOf(program);
  ASSERT_TRUE(tail.has_value());
  EXPECT_EQ(tail->firstStep, 3u);
  EXPECT_EQ(tail->carried, (std::vector<uint32_t>{h}));
}

TEST_F(RowwiseTailTest, NoTailWhereItWouldReadOtherThanPerTokenRowsOrMissAnOutput) {
  const uint32_t h = add(Storage::Arena, true), pooled = add(Storage::Arena, false);
  auto decoder = [&](std::vector<Operand> head) {
    program.steps.clear();
    program.stepInfos.clear();
    step({{0, false}, {1, false}, {h, true}});
    step({{h, false}, {2, false}, {pooled, true}}, /*perSequence=*/true);
    step(std::move(head));
    return rowwiseTailOf(program);
  };
  EXPECT_TRUE(decoder({{h, false}, {1, false}, {3, true}}).has_value());
  // A tensor that is not a row a token (its rows would not be gathered).
  EXPECT_FALSE(decoder({{pooled, false}, {1, false}, {3, true}}).has_value());
  // An input (the caller's, not the run's to rearrange).
  EXPECT_FALSE(decoder({{0, false}, {1, false}, {3, true}}).has_value());
  // The output written before the tail only.
  EXPECT_FALSE(decoder({{h, false}, {1, false}, {h, true}}).has_value());
  // The output not a row a token.
  program.tensors[3].perToken = false;
  EXPECT_FALSE(decoder({{h, false}, {1, false}, {3, true}}).has_value());
  program.tensors[3].perToken = true;
  // Nothing after the last step run per sequence.
  program.steps.clear();
  program.stepInfos.clear();
  step({{0, false}, {1, false}, {h, true}});
  step({{h, false}, {1, false}, {3, true}}, /*perSequence=*/true);
  EXPECT_FALSE(rowwiseTailOf(program).has_value());
  // An operand outside the tensors (an artifact is untrusted).
  program.steps.clear();
  program.stepInfos.clear();
  step({{0, false}, {1, false}, {h, true}}, /*perSequence=*/true);
  step({{99, false}, {1, false}, {3, true}});
  EXPECT_FALSE(rowwiseTailOf(program).has_value());
}

}  // namespace
}  // namespace ein::detail
