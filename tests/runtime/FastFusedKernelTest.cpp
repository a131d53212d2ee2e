// The fast attention, talking-heads, layernorm, softmax, reduce and
// element-wise kernels against the reference kernels (their oracle), for
// every instruction set this CPU runs and for one and two threads: odd sizes
// (1, 7, 197), several query tiles and key blocks, masks of each kind with
// broadcast strides, rows masked entirely or only in their first key block,
// cross-attention and single queries.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "artifact_builder.hpp"
#include "kernels/cpu/kernels.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

using detail::cpu::IsaKernels;

// Runs `fast` on every ISA and thread count and compares with `reference`.
template <typename Op>
void expectFastMatchesReference(const std::vector<uint8_t> &artifact,
                                Status (*fast)(const Op &, const detail::cpu::KernelContext &),
                                Status (*reference)(const Op &, const detail::cpu::KernelContext &), double tolerance) {
  StepHarness harness(artifact);
  std::vector<float> want = harness.run(reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(fast, *isa, threads);
      expectNear(got, want, tolerance, std::string(isa->name) + " threads " + std::to_string(threads));
    }
}

// --- attention -------------------------------------------------------------------

struct FlashCase {
  std::string name;
  int64_t batch, heads, queries, keys, headDim, valueDim;
  fb::MaskKind mask;
  bool maskPerHead;  // else broadcast over heads (stride 0) and batch
  bool permuted;     // q, k, v, out stored [i, b, h, d]
  float fill = -INFINITY;
};

void PrintTo(const FlashCase &c, std::ostream *out) { *out << c.name; }

class FlashAttentionTest : public ::testing::TestWithParam<FlashCase> {};

// The case's attention step; bf16: in a bf16 artifact (einc --precision bf16).
std::vector<uint8_t> flashArtifact(const FlashCase &c, bool bf16) {
  const int64_t B = c.batch, H = c.heads, I = c.queries, J = c.keys, D = c.headDim, E = c.valueDim;
  ArtifactBuilder builder;
  if (bf16) builder.precision = fb::Precision::Bf16;
  // [b, h, x, d] logically; permuted storage [x, b, h, d].
  auto operand = [&](const std::string &name, int64_t rows, int64_t width, bool output) {
    std::vector<int64_t> shape = c.permuted ? std::vector<int64_t>{rows, B, H, width} : std::vector<int64_t>{B, H, rows, width};
    uint32_t id = output ? builder.output(name, fb::DType::F32, shape) : builder.input(name, fb::DType::F32, shape);
    std::vector<int64_t> strides = c.permuted ? std::vector<int64_t>{H * width, width, B * H * width, 1}
                                              : std::vector<int64_t>{H * rows * width, rows * width, width, 1};
    return ViewSpec{id, 0, strides};
  };
  ViewSpec q = operand("q", I, D, false), k = operand("k", J, D, false), v = operand("v", J, E, false);
  ViewSpec out = operand("out", I, E, true);
  std::optional<ViewSpec> maskView;
  if (c.mask != fb::MaskKind::None) {
    // [h or 1, i, j]: row 0 masked entirely, row 1 masked in its first 150
    // keys (a whole key block, then more), the rest at random.
    const int64_t maskHeads = c.maskPerHead ? H : 1;
    std::vector<float> add = randomFloats(maskHeads * I * J, 41, -3.0f, 1.0f);
    std::vector<uint8_t> flags(maskHeads * I * J);
    std::mt19937 generator(42);
    for (auto &flag : flags) flag = generator() % 4 != 0;
    for (int64_t h = 0; h < maskHeads; ++h)
      for (int64_t i = 0; i < std::min<int64_t>(I, 2); ++i)
        for (int64_t j = 0; j < (i == 0 ? J : std::min<int64_t>(J - 1, 150)); ++j) {
          add[(h * I + i) * J + j] = -INFINITY;
          flags[(h * I + i) * J + j] = c.mask == fb::MaskKind::Keep ? 0 : 1;
        }
    uint32_t id = c.mask == fb::MaskKind::Add ? builder.weightsF32({maskHeads, I, J}, add)
                                              : builder.weights(fb::DType::Bool, {maskHeads, I, J}, flags);
    maskView = ViewSpec{id, 0, {0, c.maskPerHead ? I * J : 0, J, 1}};
  }
  builder.attention({{B, H}, I, J, D, E, 1.0f / std::sqrt(float(std::max<int64_t>(D, 1))), q, k, v, out, c.mask,
                     maskView, c.fill});
  return builder.build();
}

TEST_P(FlashAttentionTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  expectFastMatchesReference(flashArtifact(GetParam(), false), detail::cpu::attentionF32Flash,
                             detail::cpu::attentionF32Reference, 2e-5);
}

// A bf16 artifact: on the avx512bf16 table q . k and p . v run in bf16 (q
// scaled, then rounded; k, v and the probabilities rounded), so the oracle
// is the reference on the bf16-rounded q, k, v, within what rounding the
// scaled queries and the probabilities (relative 2^-9 each) can move a
// softmax-weighted average of values in [-1, 1]. Every other ISA computes
// in f32 exactly as for an f32 artifact.
TEST_P(FlashAttentionTest, Bf16MatchesReferenceOnBf16RoundedOperands) {
  StepHarness harness(flashArtifact(GetParam(), true));
  const auto &op = std::get<detail::Attention>(harness.program().steps[0].kernel);
  EXPECT_TRUE(op.bf16);
  std::vector<float> want = harness.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1);
  std::vector<std::pair<std::string, std::vector<float>>> bf16Runs;
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2}) {
      std::vector<float> got = harness.run(detail::cpu::attentionF32Flash, *isa, threads);
      std::string what = std::string(isa->name) + " threads " + std::to_string(threads);
      if (isa->bf16GemmTile) {
        bf16Runs.emplace_back(what, std::move(got));
      } else {
        expectNear(got, want, 2e-5, what + " (f32)");
      }
    }
  if (bf16Runs.empty()) return;
  for (uint32_t tensor : {op.q.tensor, op.k.tensor, op.v.tensor}) harness.roundToBf16(tensor);
  std::vector<float> wantRounded = harness.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1);
  for (const auto &[what, got] : bf16Runs) expectNear(got, wantRounded, 1e-2, what + " (bf16)");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FlashAttentionTest,
    ::testing::Values(FlashCase{"one", 1, 1, 1, 1, 1, 1, fb::MaskKind::None, false, false},
                      FlashCase{"odd_7_permuted", 2, 3, 7, 7, 5, 3, fb::MaskKind::None, false, true},
                      FlashCase{"vit_197", 1, 2, 197, 197, 64, 64, fb::MaskKind::None, false, false},
                      FlashCase{"add_mask_blocks", 1, 2, 70, 300, 16, 40, fb::MaskKind::Add, true, false},
                      FlashCase{"keep_broadcast_cross", 2, 2, 13, 290, 8, 6, fb::MaskKind::Keep, false, true},
                      FlashCase{"drop_finite_fill", 1, 2, 9, 140, 4, 5, fb::MaskKind::Drop, true, false, -1e9f},
                      FlashCase{"drop_inf_fill", 1, 2, 9, 140, 4, 5, fb::MaskKind::Drop, true, true},
                      FlashCase{"single_query", 2, 4, 1, 197, 64, 64, fb::MaskKind::None, false, false},
                      FlashCase{"single_key", 1, 3, 7, 1, 7, 7, fb::MaskKind::None, false, false},
                      FlashCase{"no_keys", 1, 2, 3, 0, 4, 5, fb::MaskKind::None, false, false},
                      FlashCase{"no_head_dim", 1, 1, 5, 9, 0, 3, fb::MaskKind::None, false, false}),
    [](const auto &info) { return info.param.name; });

// --- decode attention --------------------------------------------------------------

// A decode step's grouped-query attention: `groups` query heads of
// `positions` new tokens per key head (queries = groups x positions, query i
// at position i mod positions), against the first `keys` rows of a cache of
// `keys + 5` rows, as a session's state holds them.
struct DecodeCase {
  std::string name;
  int64_t kvHeads, groups, positions, keys, headDim, valueDim;
  bool causal;
  fb::MaskKind mask = fb::MaskKind::None;
};

void PrintTo(const DecodeCase &c, std::ostream *out) { *out << c.name; }

std::vector<uint8_t> decodeArtifact(const DecodeCase &c) {
  const int64_t B = c.kvHeads, I = c.groups * c.positions, J = c.keys, D = c.headDim, E = c.valueDim, rows = J + 5;
  ArtifactBuilder builder;
  const uint32_t q = builder.input("q", fb::DType::F32, {B, I, D});
  const uint32_t k = builder.input("k_cache", fb::DType::F32, {B, rows, D});
  const uint32_t v = builder.input("v_cache", fb::DType::F32, {B, rows, E});
  const uint32_t out = builder.output("out", fb::DType::F32, {B, I, E});
  std::optional<ViewSpec> maskView;
  if (c.mask != fb::MaskKind::None) {
    // [i, j], shared by the heads: row 0 masked entirely, row 1 in its first
    // 150 keys (past a key block), the rest at random.
    std::vector<float> add = randomFloats(I * J, 43, -3.0f, 1.0f);
    std::vector<uint8_t> flags(I * J);
    std::mt19937 generator(44);
    for (auto &flag : flags) flag = generator() % 4 != 0;
    for (int64_t i = 0; i < std::min<int64_t>(I, 2); ++i)
      for (int64_t j = 0; j < (i == 0 ? J : std::min<int64_t>(J - 1, 150)); ++j) {
        add[i * J + j] = -INFINITY;
        flags[i * J + j] = c.mask == fb::MaskKind::Keep ? 0 : 1;
      }
    uint32_t id = c.mask == fb::MaskKind::Add ? builder.weightsF32({I, J}, add)
                                              : builder.weights(fb::DType::Bool, {I, J}, flags);
    maskView = ViewSpec{id, 0, {0, J, 1}};
  }
  AttentionSpec spec{{B},
                     I,
                     J,
                     D,
                     E,
                     1.0f / std::sqrt(float(std::max<int64_t>(D, 1))),
                     ViewSpec{q, 0, {I * D, D, 1}},
                     ViewSpec{k, 0, {rows * D, D, 1}},
                     ViewSpec{v, 0, {rows * E, E, 1}},
                     ViewSpec{out, 0, {I * E, E, 1}},
                     c.mask,
                     maskView};
  spec.causalPositions = c.causal ? c.positions : 0;
  builder.attention(spec);
  return builder.build();
}

class DecodeAttentionTest : public ::testing::TestWithParam<DecodeCase> {};

// On every ISA and 1-4 threads (4 threads split one key head's keys into
// ranges whose partial results are combined; 1 thread never does).
TEST_P(DecodeAttentionTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  StepHarness harness(decodeArtifact(GetParam()));
  ASSERT_TRUE(detail::cpu::attentionF32DecodeApplies(std::get<detail::Attention>(harness.program().steps[0].kernel)));
  std::vector<float> want = harness.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1);
  for (const IsaKernels *isa : detail::cpu::supportedKernels())
    for (int threads : {1, 2, 3, 4}) {
      std::vector<float> got = harness.run(detail::cpu::attentionF32Decode, *isa, threads);
      expectNear(got, want, 2e-5, std::string(isa->name) + " threads " + std::to_string(threads));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DecodeAttentionTest,
    ::testing::Values(DecodeCase{"one_key", 1, 1, 1, 1, 1, 1, true},
                      DecodeCase{"gqa3_context128", 4, 3, 1, 128, 64, 64, true},
                      DecodeCase{"gqa3_context2048", 4, 3, 1, 2048, 64, 64, true},
                      DecodeCase{"mqa8_context2049", 1, 8, 1, 2049, 64, 64, true},
                      DecodeCase{"mha_context1000", 2, 1, 1, 1000, 32, 48, false},
                      DecodeCase{"chunk_of_3_after_cache", 2, 2, 3, 300, 16, 16, true},
                      DecodeCase{"odd_sizes", 1, 1, 1, 777, 7, 5, true},
                      DecodeCase{"add_mask_rows_hidden", 1, 2, 1, 600, 32, 24, false, fb::MaskKind::Add},
                      DecodeCase{"keep_mask_split", 1, 4, 1, 1100, 16, 16, true, fb::MaskKind::Keep},
                      DecodeCase{"drop_mask", 2, 3, 1, 301, 8, 8, false, fb::MaskKind::Drop},
                      DecodeCase{"no_keys", 1, 2, 1, 0, 4, 5, false}),
    [](const auto &info) { return info.param.name; });

// More than kDecodeQueries queries go to the flash kernel; rows at any
// stride (heads interleaved with positions) stay here.
TEST(DecodeAttentionTest, AppliesToFewQueriesOverRowsAtAnyStride) {
  DecodeCase few{"few", 1, 8, 1, 64, 16, 16, true}, many{"many", 1, 3, 3, 64, 16, 16, true};
  StepHarness fewHarness(decodeArtifact(few)), manyHarness(decodeArtifact(many));
  EXPECT_TRUE(detail::cpu::attentionF32DecodeApplies(
      std::get<detail::Attention>(fewHarness.program().steps[0].kernel)));
  EXPECT_FALSE(detail::cpu::attentionF32DecodeApplies(
      std::get<detail::Attention>(manyHarness.program().steps[0].kernel)));
  FlashCase permuted{"odd_7_permuted", 2, 3, 1, 7, 5, 3, fb::MaskKind::None, false, true};
  StepHarness strided(flashArtifact(permuted, false));
  EXPECT_TRUE(detail::cpu::attentionF32DecodeApplies(std::get<detail::Attention>(strided.program().steps[0].kernel)));
}

// --- talking heads ----------------------------------------------------------------

struct TalkingCase {
  std::string name;
  int64_t queries, keys;
  bool pre, post;
  fb::MaskKind mask;
};

void PrintTo(const TalkingCase &c, std::ostream *out) { *out << c.name; }

class TalkingHeadsFastTest : public ::testing::TestWithParam<TalkingCase> {};

TEST_P(TalkingHeadsFastTest, MatchesReferenceOnEveryIsaAndThreadCount) {
  const TalkingCase c = GetParam();
  const int64_t B = 2, H = 3, I = c.queries, J = c.keys, D = 8, E = 5;
  ArtifactBuilder builder;
  uint32_t q = builder.input("q", fb::DType::F32, {B, H, I, D});
  // k stored [b, j, h, d]: head and key axes swapped.
  uint32_t k = builder.input("k", fb::DType::F32, {B, J, H, D});
  uint32_t v = builder.input("v", fb::DType::F32, {B, H, J, E});
  uint32_t out = builder.output("out", fb::DType::F32, {B, H, I, E});
  TalkingHeadsSpec spec{{B}, H, I, J, D, E, 0.3f, dense(q, {B, H, I, D}), ViewSpec{k, 0, {J * H * D, D, H * D, 1}},
                        dense(v, {B, H, J, E}), dense(out, {B, H, I, E})};
  if (c.pre) {
    spec.preMix = ViewSpec{builder.weightsF32({H, H}, randomFloats(H * H, 51)), 0, {1, H}};
    spec.preBias = dense(builder.weightsF32({H}, randomFloats(H, 52)), {H});
  }
  if (c.post) spec.postMix = dense(builder.weightsF32({H, H}, randomFloats(H * H, 53)), {H, H});
  spec.maskKind = c.mask;
  if (c.mask == fb::MaskKind::Add) {
    std::vector<float> add = randomFloats(I * J, 54, -3.0f, 1.0f);
    for (int64_t j = 0; j < J; ++j) add[j] = -INFINITY;  // query 0 loses every key
    spec.mask = ViewSpec{builder.weightsF32({I, J}, add), 0, {0, 0, J, 1}};
  }
  if (c.mask == fb::MaskKind::Keep) {
    std::vector<uint8_t> flags(H * I * J);
    std::mt19937 generator(55);
    for (auto &flag : flags) flag = generator() % 3 != 0;
    spec.mask = ViewSpec{builder.weights(fb::DType::Bool, {H, I, J}, flags), 0, {0, I * J, J, 1}};
  }
  builder.talkingHeads(spec);
  expectFastMatchesReference(builder.build(), detail::cpu::talkingHeadsAttentionF32Fast,
                             detail::cpu::talkingHeadsAttentionF32Reference, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Mixes, TalkingHeadsFastTest,
                         ::testing::Values(TalkingCase{"plain_7", 7, 9, false, false, fb::MaskKind::None},
                                           TalkingCase{"pre_post_keep_tiles", 37, 70, true, true, fb::MaskKind::Keep},
                                           TalkingCase{"post_add_masked_row", 20, 197, false, true, fb::MaskKind::Add},
                                           TalkingCase{"single_query_pre", 1, 33, true, false, fb::MaskKind::None},
                                           TalkingCase{"no_keys", 3, 0, true, true, fb::MaskKind::None}),
                         [](const auto &info) { return info.param.name; });

// --- layernorm, softmax, reduce, element-wise ----------------------------------------

struct RowCase {
  std::string name;
  int64_t rows, width;
  bool transposed;  // x stored [width, rows]
};

void PrintTo(const RowCase &c, std::ostream *out) { *out << c.name; }

class RowKernelTest : public ::testing::TestWithParam<RowCase> {
 protected:
  ViewSpec x(ArtifactBuilder &builder) const {
    const RowCase &c = GetParam();
    if (c.transposed) return ViewSpec{builder.input("x", fb::DType::F32, {c.width, c.rows}), 0, {1, c.rows}};
    return dense(builder.input("x", fb::DType::F32, {c.rows, c.width}), {c.rows, c.width});
  }
};

TEST_P(RowKernelTest, LayerNormVariantsWithResidualAndSum) {
  const RowCase &c = GetParam();
  for (auto variant : {fb::LayerNormVariant::Variance, fb::LayerNormVariant::UnbiasedStd, fb::LayerNormVariant::Rms}) {
    ArtifactBuilder builder;
    ViewSpec xView = x(builder);
    uint32_t r = builder.input("r", fb::DType::F32, {c.rows, c.width});
    uint32_t y = builder.output("y", fb::DType::F32, {c.width, c.rows});  // written transposed
    LayerNormSpec spec{{c.rows, c.width}, xView};
    spec.y = ViewSpec{y, 0, {1, c.rows}};
    spec.residual = dense(r, {c.rows, c.width});
    spec.sum = dense(builder.arena(fb::DType::F32, {c.rows, c.width}), {c.rows, c.width});
    spec.gamma = ViewSpec{builder.weightsF32({2 * c.width}, randomFloats(2 * c.width, 61)), 1, {2}};  // strided
    if (variant != fb::LayerNormVariant::Rms)  // RMSNorm has no beta
      spec.beta = dense(builder.weightsF32({c.width}, randomFloats(c.width, 62)), {c.width});
    spec.variant = variant;
    builder.layerNorm(spec);
    expectFastMatchesReference(builder.build(), detail::cpu::layerNormF32Fast, detail::cpu::layerNormF32Reference,
                               2e-5);
  }
}

TEST_P(RowKernelTest, Softmax) {
  const RowCase &c = GetParam();
  ArtifactBuilder builder;
  ViewSpec xView = x(builder);
  uint32_t y = builder.output("y", fb::DType::F32, {c.rows, c.width});
  builder.softmax({{c.rows, c.width}, xView, dense(y, {c.rows, c.width})});
  expectFastMatchesReference(builder.build(), detail::cpu::softmaxF32Fast, detail::cpu::softmaxF32Reference, 2e-6);
}

TEST_P(RowKernelTest, ReduceEveryKind) {
  const RowCase &c = GetParam();
  for (auto kind : {fb::ReduceKind::Sum, fb::ReduceKind::Mean, fb::ReduceKind::Max, fb::ReduceKind::Min}) {
    ArtifactBuilder builder;
    ViewSpec xView = x(builder);
    uint32_t y = builder.output("y", fb::DType::F32, {c.rows});
    builder.reduce({{c.rows, c.width}, 1, kind, xView, dense(y, {c.rows})});
    expectFastMatchesReference(builder.build(), detail::cpu::reduceF32Fast, detail::cpu::reduceF32Reference, 2e-5);
  }
}

TEST_P(RowKernelTest, ElementwiseGeluOfScaledSum) {
  const RowCase &c = GetParam();
  ArtifactBuilder builder;
  ViewSpec xView = x(builder);
  uint32_t b = builder.input("b", fb::DType::F32, {c.width});
  uint32_t y = builder.output("y", fb::DType::F32, {c.rows, c.width});
  // y = gelu(x * 0.5 + b) - tanh(x), b broadcast over rows.
  std::vector<fb::Instruction> program = {
      instruction(fb::Opcode::Const, 0, 0, 0, 0.5f), instruction(fb::Opcode::Mul, 0, 2, 0),
      instruction(fb::Opcode::Add, 3, 1, 0), instruction(fb::Opcode::Gelu, 4, 0, 0),
      instruction(fb::Opcode::Tanh, 0, 0, 0), instruction(fb::Opcode::Sub, 5, 6, 0)};
  builder.elementwise({{c.rows, c.width}, {xView, ViewSpec{b, 0, {0, 1}}}, dense(y, {c.rows, c.width}), program});
  expectFastMatchesReference(builder.build(), detail::cpu::elementwiseF32Fast, detail::cpu::elementwiseF32Reference,
                             2e-6);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RowKernelTest,
                         ::testing::Values(RowCase{"one", 1, 1, false}, RowCase{"seven_by_seven", 7, 7, true},
                                           RowCase{"vit_197x384", 197, 384, false},
                                           RowCase{"transposed_197x600", 197, 600, true},
                                           RowCase{"long_rows_3x5000", 3, 5000, false}),
                         [](const auto &info) { return info.param.name; });

}  // namespace
}  // namespace ein::testing
