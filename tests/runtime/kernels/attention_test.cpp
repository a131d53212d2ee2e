// Attention: the reference kernel against a naive loop (masks of each kind
// with broadcast strides, fully masked rows, causal, grouped heads,
// cross-attention, single queries); the flash kernel, f32 and bf16, against
// the reference on every instruction set this CPU has, with one and two
// threads; the decode kernel (few queries over a long cache, keys split
// across threads) against the reference; both over a bf16 key/value cache
// (bf16 and int8 artifacts) on every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "artifact_builder.hpp"
#include "kernel_test_support.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "kernels/reference/reference_kernels.hpp"
#include "ops/scalar_functions.hpp"
#include "step_harness.hpp"

namespace ein::testing {
namespace {

// --- attention ----------------------------------------------------------------

struct AttentionCase {
  std::string name;
  int64_t batch, heads, queries, keys, headDim, valueDim;
  fb::MaskKind mask;
  bool maskPerBatch;   // else broadcast over batch and heads (zero strides)
  bool permuted;       // operands stored [i, h, b, d] instead of [b, h, i, d]
  int maskedRows;      // query rows whose mask removes every key
  float fill = -INFINITY;
};

void PrintTo(const AttentionCase &c, std::ostream *out) { *out << c.name; }

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesNaiveLoop) {
  const AttentionCase c = GetParam();
  const int64_t B = c.batch, H = c.heads, I = c.queries, J = c.keys, D = c.headDim, E = c.valueDim;
  const std::vector<size_t> perm = c.permuted ? std::vector<size_t>{2, 1, 0, 3} : std::vector<size_t>{};
  Layout qL({B, H, I, D}, perm), kL({B, H, J, D}, perm), vL({B, H, J, E}, perm), oL({B, H, I, E}, perm);
  std::vector<float> q = randomFloats(product(qL.storageShape), 1), k = randomFloats(product(kL.storageShape), 2),
                     v = randomFloats(product(vL.storageShape), 3);
  // Mask: [B, I, J] per batch (broadcast over heads) or [I, J] broadcast over both.
  const int64_t maskBatches = c.maskPerBatch ? B : 1;
  std::vector<float> addMask = randomFloats(maskBatches * I * J, 4, -3.0f, 1.0f);
  std::vector<uint8_t> boolMask(maskBatches * I * J);
  std::mt19937 generator(5);
  for (auto &flag : boolMask) flag = generator() % 4 != 0;
  // Rows 0..maskedRows-1 of every mask batch lose every key.
  for (int64_t mb = 0; mb < maskBatches; ++mb)
    for (int64_t i = 0; i < std::min<int64_t>(c.maskedRows, I); ++i)
      for (int64_t j = 0; j < J; ++j) {
        addMask[(mb * I + i) * J + j] = -INFINITY;
        boolMask[(mb * I + i) * J + j] = c.mask == fb::MaskKind::Keep ? 0 : 1;
      }
  const float scale = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(D, 1)));

  ArtifactBuilder builder;
  uint32_t qId = builder.input("q", fb::DType::F32, qL.storageShape);
  uint32_t kId = builder.input("k", fb::DType::F32, kL.storageShape);
  uint32_t vId = builder.input("v", fb::DType::F32, vL.storageShape);
  uint32_t oId = builder.output("out", fb::DType::F32, oL.storageShape);
  std::optional<ViewSpec> maskView;
  if (c.mask != fb::MaskKind::None) {
    uint32_t maskId = c.mask == fb::MaskKind::Add ? builder.weightsF32({maskBatches, I, J}, addMask)
                                                  : builder.weights(fb::DType::Bool, {maskBatches, I, J}, boolMask);
    maskView = ViewSpec{maskId, 0, {c.maskPerBatch ? I * J : 0, 0, J, 1}};
  }
  builder.attention({{B, H}, I, J, D, E, scale, qL.view(qId), kL.view(kId), vL.view(vId), oL.view(oId), c.mask,
                     maskView, c.fill});
  auto session = loadAndRun(builder.build(), {{"q", bytesOf(q)}, {"k", bytesOf(k)}, {"v", bytesOf(v)}});
  ASSERT_TRUE(session.ok()) << session.status().toString();
  std::vector<float> got = valuesOf<float>(session.value()->output("out").value());

  std::vector<double> want(got.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < I; ++i) {
        std::vector<double> row(J);
        for (int64_t j = 0; j < J; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(q[qL.at({b, h, i, d})]) * k[kL.at({b, h, j, d})];
          size_t m = ((c.maskPerBatch ? b : 0) * I + i) * J + j;
          row[j] = applyMask(c.mask, double(scale) * dot, c.mask == fb::MaskKind::Add ? addMask[m] : boolMask[m],
                             c.fill);
        }
        naiveSoftmax(row);
        for (int64_t e = 0; e < E; ++e) {
          double sum = 0;
          for (int64_t j = 0; j < J; ++j) sum += row[j] * v[vL.at({b, h, j, e})];
          want[oL.at({b, h, i, e})] = sum;
        }
      }
  if (c.maskedRows > 0 && c.fill == -INFINITY && J > 0) {
    ASSERT_TRUE(std::isnan(want[oL.at({0, 0, 0, 0})])) << "a fully masked row gives NaN";
  }
  expectClose(got, want, 1e-5, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(AttentionCase{"tiny_no_mask", 1, 1, 1, 1, 1, 1, fb::MaskKind::None, false, false, 0},
                      AttentionCase{"odd_no_mask_permuted", 2, 3, 7, 7, 5, 3, fb::MaskKind::None, false, true, 0},
                      AttentionCase{"vit_197_add_broadcast", 1, 2, 197, 197, 64, 64, fb::MaskKind::Add, false, false, 0},
                      AttentionCase{"cross_keep_fully_masked", 2, 2, 13, 9, 8, 6, fb::MaskKind::Keep, true, true, 2},
                      AttentionCase{"single_query_keep", 2, 4, 1, 197, 16, 16, fb::MaskKind::Keep, true, false, 0},
                      AttentionCase{"single_key_drop", 1, 3, 7, 1, 7, 7, fb::MaskKind::Drop, true, false, 0},
                      AttentionCase{"drop_fully_masked", 2, 1, 7, 11, 4, 5, fb::MaskKind::Drop, true, false, 3},
                      AttentionCase{"drop_finite_fill", 2, 1, 7, 11, 4, 5, fb::MaskKind::Drop, true, true, 3, -1e9f},
                      AttentionCase{"add_fully_masked", 1, 2, 9, 17, 3, 2, fb::MaskKind::Add, true, true, 1},
                      AttentionCase{"no_keys", 1, 2, 3, 0, 4, 5, fb::MaskKind::None, false, false, 0}),
    [](const auto &info) { return info.param.name; });

// --- attention -------------------------------------------------------------------

struct FlashCase {
  std::string name;
  int64_t batch, heads, queries, keys, headDim, valueDim;
  fb::MaskKind mask;
  bool maskPerHead;  // else broadcast over heads (stride 0) and batch
  bool permuted;     // q, k, v, out stored [i, b, h, d]
  float fill = -INFINITY;
  bool causal = false;    // query i sees keys j <= i + keys - queries
  bool sharedKv = false;  // one key and value head for all heads (multi-query), not permuted
  float softcap = 0.0f;   // scores capped as softcap * tanh(s / softcap) (Gemma 2)
};

void PrintTo(const FlashCase &c, std::ostream *out) { *out << c.name; }

class FlashAttentionTest : public ::testing::TestWithParam<FlashCase> {};

// The case's attention step; bf16: in a bf16 artifact (einc --precision
// bf16); bf16Cache: with k and v bf16 tensors (as a bf16 key/value cache).
std::vector<uint8_t> flashArtifact(const FlashCase &c, bool bf16, bool bf16Cache = false) {
  const int64_t B = c.batch, H = c.heads, I = c.queries, J = c.keys, D = c.headDim, E = c.valueDim;
  ArtifactBuilder builder;
  if (bf16) builder.precision = fb::Precision::Bf16;
  // [b, h, x, d] logically; permuted storage [x, b, h, d].
  auto operand = [&](const std::string &name, int64_t rows, int64_t width, bool output) {
    std::vector<int64_t> shape = c.permuted ? std::vector<int64_t>{rows, B, H, width} : std::vector<int64_t>{B, H, rows, width};
    const fb::DType dtype = bf16Cache && (name == "k" || name == "v") ? fb::DType::BF16 : fb::DType::F32;
    uint32_t id = output ? builder.output(name, dtype, shape) : builder.input(name, dtype, shape);
    std::vector<int64_t> strides = c.permuted ? std::vector<int64_t>{H * width, width, B * H * width, 1}
                                              : std::vector<int64_t>{H * rows * width, rows * width, width, 1};
    return ViewSpec{id, 0, strides};
  };
  // Shared keys and values: [b, 1, j, d] read with a head stride of 0.
  auto shared = [&](const std::string &name, int64_t width) {
    const fb::DType dtype = bf16Cache ? fb::DType::BF16 : fb::DType::F32;
    return ViewSpec{builder.input(name, dtype, {B, 1, J, width}), 0, {J * width, 0, width, 1}};
  };
  ViewSpec q = operand("q", I, D, false);
  ViewSpec k = c.sharedKv ? shared("k", D) : operand("k", J, D, false);
  ViewSpec v = c.sharedKv ? shared("v", E) : operand("v", J, E, false);
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
  AttentionSpec spec{{B, H}, I, J, D, E, 1.0f / std::sqrt(float(std::max<int64_t>(D, 1))), q, k, v, out, c.mask,
                     maskView, c.fill};
  spec.causalPositions = c.causal ? I : 0;
  spec.softcap = c.softcap;
  builder.attention(spec);
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

// k and v bf16 (a bf16 cache, read as it is): the reference reads them as
// bf16 too. Without bf16 arithmetic (an fp32 artifact, or an ISA without the
// bf16 tile) every table matches it as in f32; with it, as above (only q and
// the probabilities are rounded: k and v are already bf16).
TEST_P(FlashAttentionTest, Bf16CacheMatchesReferenceOnEveryIsa) {
  for (bool bf16 : {false, true}) {
    StepHarness harness(flashArtifact(GetParam(), bf16, true));
    const auto &op = std::get<detail::Attention>(harness.program().steps[0].kernel);
    ASSERT_TRUE(op.bf16KeyValues);
    std::vector<float> want = harness.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1);
    harness.roundToBf16(op.q.tensor);
    std::vector<float> wantRounded = harness.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1);
    StepHarness unroundedQ(flashArtifact(GetParam(), bf16, true));
    for (const IsaKernels *isa : detail::cpu::supportedKernels())
      for (int threads : {1, 2}) {
        std::string what = std::string(isa->name) + " threads " + std::to_string(threads);
        if (bf16 && isa->bf16GemmTile)
          expectNear(unroundedQ.run(detail::cpu::attentionF32Flash, *isa, threads), wantRounded, 1e-2, what + " (bf16)");
        else
          expectNear(unroundedQ.run(detail::cpu::attentionF32Flash, *isa, threads), want, 2e-5, what + " (f32)");
      }
  }
}

// The reference over a bf16 cache is the reference over the cache's values
// widened to f32.
TEST_P(FlashAttentionTest, Bf16CacheReferenceIsF32ReferenceOnRoundedKeysAndValues) {
  StepHarness cache(flashArtifact(GetParam(), false, true)), rounded(flashArtifact(GetParam(), false));
  const auto &op = std::get<detail::Attention>(rounded.program().steps[0].kernel);
  for (uint32_t tensor : {op.k.tensor, op.v.tensor}) rounded.roundToBf16(tensor);
  expectNear(cache.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1),
             rounded.run(detail::cpu::attentionF32Reference, detail::cpu::portableKernels(), 1), 1e-6, "reference");
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
                      FlashCase{"no_head_dim", 1, 1, 5, 9, 0, 3, fb::MaskKind::None, false, false},
                      // Head dims 32 to 128 (bf16: pairs padded to amx's 16-pair step where
                      // not a multiple), odd lengths, causal, -inf masks, shared heads, odd
                      // key blocks (513 keys: a last block of one key).
                      FlashCase{"d32_197_causal", 1, 2, 197, 197, 32, 32, fb::MaskKind::None, false, false, -INFINITY,
                                true},
                      FlashCase{"d80_add_mask_odd", 1, 2, 77, 301, 80, 80, fb::MaskKind::Add, true, false},
                      FlashCase{"d128_keep_causal", 1, 2, 130, 130, 128, 128, fb::MaskKind::Keep, true, false,
                                -INFINITY, true},
                      FlashCase{"d64_drop_513_keys", 1, 2, 5, 513, 64, 64, fb::MaskKind::Drop, false, false},
                      FlashCase{"d40_e70_causal_cross", 1, 1, 33, 95, 40, 70, fb::MaskKind::None, false, false,
                                -INFINITY, true},
                      FlashCase{"shared_kv_heads", 2, 4, 33, 65, 64, 64, fb::MaskKind::None, false, false, -INFINITY,
                                false, true},
                      FlashCase{"shared_kv_add_causal", 1, 3, 128, 128, 64, 64, fb::MaskKind::Add, false, false,
                                -INFINITY, true, true},
                      // Scores capped at 0.5 (most of them on tanh's bend) before a mask and causal.
                      FlashCase{"softcap_add_causal", 1, 2, 70, 300, 32, 24, fb::MaskKind::Add, true, false,
                                -INFINITY, true, false, 0.5f},
                      FlashCase{"softcap_keep", 2, 2, 9, 140, 16, 8, fb::MaskKind::Keep, false, true, -INFINITY,
                                false, false, 2.0f}),
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
  float softcap = 0.0f;
};

void PrintTo(const DecodeCase &c, std::ostream *out) { *out << c.name; }

// bf16Cache: the cache is bf16, in a bf16 artifact (einc --precision bf16).
std::vector<uint8_t> decodeArtifact(const DecodeCase &c, bool bf16Cache = false) {
  const int64_t B = c.kvHeads, I = c.groups * c.positions, J = c.keys, D = c.headDim, E = c.valueDim, rows = J + 5;
  ArtifactBuilder builder;
  if (bf16Cache) builder.precision = fb::Precision::Bf16;
  const fb::DType cacheType = bf16Cache ? fb::DType::BF16 : fb::DType::F32;
  const uint32_t q = builder.input("q", fb::DType::F32, {B, I, D});
  const uint32_t k = builder.input("k_cache", cacheType, {B, rows, D});
  const uint32_t v = builder.input("v_cache", cacheType, {B, rows, E});
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
  spec.softcap = c.softcap;
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

// A bf16 cache, read where it lies and widened in registers on every ISA:
// the reference over the same bf16 values (f32 arithmetic throughout).
TEST_P(DecodeAttentionTest, Bf16CacheMatchesReferenceOnEveryIsaAndThreadCount) {
  StepHarness harness(decodeArtifact(GetParam(), true));
  const auto &op = std::get<detail::Attention>(harness.program().steps[0].kernel);
  ASSERT_TRUE(op.bf16KeyValues);
  ASSERT_TRUE(detail::cpu::attentionF32DecodeApplies(op));
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
                      // 5 and 7 rows: every row tile with its remainders; values
                      // 40 wide: a column tile, single vectors and (portable) lanes.
                      DecodeCase{"gqa5_values40", 2, 5, 1, 333, 24, 40, true},
                      DecodeCase{"gqa7_values72", 1, 7, 1, 130, 72, 72, true},
                      DecodeCase{"chunk_of_3_after_cache", 2, 2, 3, 300, 16, 16, true},
                      DecodeCase{"odd_sizes", 1, 1, 1, 777, 7, 5, true},
                      DecodeCase{"add_mask_rows_hidden", 1, 2, 1, 600, 32, 24, false, fb::MaskKind::Add},
                      DecodeCase{"keep_mask_split", 1, 4, 1, 1100, 16, 16, true, fb::MaskKind::Keep},
                      DecodeCase{"drop_mask", 2, 3, 1, 301, 8, 8, false, fb::MaskKind::Drop},
                      DecodeCase{"no_keys", 1, 2, 1, 0, 4, 5, false},
                      DecodeCase{"softcap_gqa2_keep", 2, 2, 1, 700, 32, 32, true, fb::MaskKind::Keep, 0.5f}),
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

// --- paged attention ---------------------------------------------------------------

// Keys and values in a paged cache (program/paged_state.hpp): blocks of
// `blockRows` rows of every key head, in the pool in any order. The decode
// kernel (few queries) and the flash kernel (a prompt's chunk, causal) read
// a block's rows at a time, f32 and a bf16 cache, on every ISA and with
// keys split across threads, and give what they give over the rows laid out
// whole.
TEST(PagedAttentionTest, ReadsBlocksInAnyOrderAsTheRowsLaidOutWhole) {
  for (const DecodeCase &c : {DecodeCase{"decode", 2, 4, 1, 300, 32, 16, true},
                              DecodeCase{"chunk", 2, 3, 20, 90, 16, 24, true}})
    for (bool bf16Cache : {false, true})
      for (int64_t blockRows : {1, 5, 16}) {
        const std::string what = c.name + (bf16Cache ? " bf16 cache" : " f32 cache") + ", blocks of " +
                                 std::to_string(blockRows) + " rows";
        const std::vector<uint8_t> artifact = decodeArtifact(c, bf16Cache);
        auto loaded = Model::loadFromMemory(artifact.data(), artifact.size());
        ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
        const detail::Program &program = loaded.value()->program();
        const auto &whole = std::get<detail::Attention>(program.steps[0].kernel);
        const int64_t B = c.kvHeads, J = c.keys, rows = J + 5, elementBytes = bf16Cache ? 2 : 4;
        // Each tensor's bytes: q random, k and v random (bf16 where the cache is), out NaN.
        std::vector<std::vector<std::byte>> buffers;
        for (size_t id = 0; id < program.tensors.size(); ++id) {
          const detail::Tensor &tensor = program.tensors[id];
          std::vector<float> values = tensor.storage == detail::Storage::Input
                                          ? randomFloats(static_cast<size_t>(tensor.numElements), 200 + static_cast<uint32_t>(id))
                                          : std::vector<float>(static_cast<size_t>(tensor.numElements), NAN);
          if (tensor.dtype == DType::BF16) values = StepHarness::packBf16(values);
          const auto *bytes = reinterpret_cast<const std::byte *>(values.data());
          buffers.emplace_back(bytes, bytes + tensor.byteSize);
        }
        // The pool: block n of k and of v side by side, the blocks in reverse order with one unused between.
        const int64_t blocks = (rows + blockRows - 1) / blockRows;
        const int64_t kBlockBytes = B * blockRows * c.headDim * elementBytes, vBlockBytes = B * blockRows * c.valueDim * elementBytes;
        const int64_t poolBlockBytes = kBlockBytes + vBlockBytes;
        std::vector<uint32_t> table(static_cast<size_t>(blocks));
        for (int64_t n = 0; n < blocks; ++n) table[static_cast<size_t>(n)] = static_cast<uint32_t>(2 * (blocks - 1 - n) + 1);
        std::vector<std::byte> pool(static_cast<size_t>(2 * blocks * poolBlockBytes), std::byte{0xff});
        auto scatter = [&](uint32_t tensor, int64_t width, int64_t partOffset) {
          for (int64_t b = 0; b < B; ++b)
            for (int64_t r = 0; r < rows; ++r)
              std::memcpy(pool.data() + table[static_cast<size_t>(r / blockRows)] * poolBlockBytes + partOffset +
                              ((b * blockRows + r % blockRows) * width) * elementBytes,
                          buffers[tensor].data() + (b * rows + r) * width * elementBytes,
                          static_cast<size_t>(width * elementBytes));
        };
        scatter(whole.k.tensor, c.headDim, 0);
        scatter(whole.v.tensor, c.valueDim, kBlockBytes);
        detail::Attention paged = whole;
        paged.k.strides = {blockRows * c.headDim, c.headDim, 1};
        paged.v.strides = {blockRows * c.valueDim, c.valueDim, 1};
        paged.kPages = {table.data(), blockRows, poolBlockBytes / elementBytes, 0};
        paged.vPages = {table.data(), blockRows, poolBlockBytes / elementBytes, 0};
        auto run = [&](const detail::Attention &op, bool inPool, const IsaKernels &isa, int threads) {
          std::vector<std::vector<std::byte>> own = buffers;
          std::vector<std::byte *> bases;
          for (auto &buffer : own) bases.push_back(buffer.data());
          if (inPool) {
            bases[op.k.tensor] = pool.data();
            bases[op.v.tensor] = pool.data() + kBlockBytes;
          }
          const size_t stride = detail::cpu::scratchFloats(detail::Kernel(op)) + 16;
          std::vector<float> scratch(stride * static_cast<size_t>(threads));
          std::unique_ptr<detail::ThreadPool> threadPool =
              threads > 1 ? std::make_unique<detail::ThreadPool>(threads) : nullptr;
          KernelContext context{program.tensors, bases.data(), scratch.data(), stride, threadPool.get(), &isa,
                                &program.packed};
          detail::cpu::beginKernelEpoch();
          Status status = detail::cpu::runStep(op, context);
          EXPECT_TRUE(status.ok()) << status.toString();
          const std::vector<std::byte> &out = own[program.outputTensors[0]];
          std::vector<float> values(out.size() / sizeof(float));
          std::memcpy(values.data(), out.data(), out.size());
          return values;
        };
        for (const IsaKernels *isa : detail::cpu::supportedKernels())
          for (int threads : {1, 3}) {
            const std::vector<float> want = run(whole, false, *isa, threads), got = run(paged, true, *isa, threads);
            expectNear(got, want, 1e-6, what + ", " + isa->name + " threads " + std::to_string(threads));
          }
      }
}

}  // namespace
}  // namespace ein::testing
