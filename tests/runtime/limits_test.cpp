// The runtime's limits (runtime/src/util/limits.hpp, README.md "Limits"):
// each is enforced with InvalidArtifact where the artifact enters, and the
// largest value within it still loads.
#include <gtest/gtest.h>

#include "artifact_builder.hpp"

namespace ein::testing {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 40;

// x f32[2, 3] -> copy -> y f32[2, 3], plus whatever a test adds.
struct CopyModel {
  ArtifactBuilder builder;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 3});
  uint32_t y = builder.output("y", fb::DType::F32, {2, 3});
  std::vector<uint8_t> build() {
    builder.copy({{2, 3}, dense(x, {2, 3}), dense(y, {2, 3})});
    return builder.build();
  }
};

Status loadStatus(const std::vector<uint8_t> &bytes) {
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "limits.einb");
  return model.ok() ? Status() : model.status();
}

void expectRejected(const std::vector<uint8_t> &bytes, const std::string &fragment) {
  Status status = loadStatus(bytes);
  ASSERT_FALSE(status.ok()) << "accepted; expected \"" << fragment << "\"";
  EXPECT_EQ(status.code(), StatusCode::InvalidArtifact) << status.toString();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(Limits, TensorElementsCountNonzeroSizes) {
  {
    CopyModel model;  // an empty tensor whose other sizes multiply past 2^64
    model.builder.tensor({fb::DType::F32, {0, int64_t{1} << 40, int64_t{1} << 40}, fb::Storage::Input, 0, 0});
    expectRejected(model.build(), "tensor 2: its shape [0, 1099511627776, 1099511627776] has more than 2^40 elements");
  }
  {
    CopyModel model;  // the limit itself, empty: loads
    model.builder.tensor({fb::DType::F32, {kMaxElements, 0}, fb::Storage::Arena, 0, 0});
    EXPECT_TRUE(loadStatus(model.build()).ok()) << loadStatus(model.build()).toString();
  }
  {
    CopyModel model;
    model.builder.tensor({fb::DType::F32, {kMaxElements + 1, 0}, fb::Storage::Arena, 0, 0});
    expectRejected(model.build(), "tensor 2: its shape [1099511627777, 0] has more than 2^40 elements");
  }
}

TEST(Limits, SessionStateOnlyWhatItsTensorsNeed) {
  // A session allocates the state the artifact claims (a fuzzed artifact
  // claimed 4 GiB for none).
  CopyModel model;
  model.builder.stateBytes = uint64_t{1} << 32;
  expectRejected(model.build(), "the state of 4294967296 bytes is larger than its tensors need (0 bytes");
}

TEST(Limits, Rank) {
  CopyModel model;
  model.builder.tensor({fb::DType::F32, std::vector<int64_t>(17, 1), fb::Storage::Arena, 0, 0});
  expectRejected(model.build(), "tensor 2: rank 17 exceeds the runtime's limit of 16");
}

TEST(Limits, ArenaWithinTheLimitAndWhatItsTensorsNeed) {
  {
    CopyModel model;  // 24 bytes of arena tensors, rounded up to 4 KiB
    model.builder.arena(fb::DType::F32, {2, 3});
    model.builder.arenaBytes = 4096;
    EXPECT_TRUE(loadStatus(model.build()).ok()) << loadStatus(model.build()).toString();
    model.builder.arenaBytes = 4097;
    expectRejected(model.build(), "the arena of 4097 bytes is larger than its tensors need (24 bytes, rounded up to 4096)");
  }
  {
    CopyModel model;  // no arena tensor: no arena
    model.builder.arenaBytes = 1;
    expectRejected(model.build(), "the arena of 1 bytes is larger than its tensors need (0 bytes, rounded up to 4096)");
  }
  {
    CopyModel model;  // a terabyte for 24 bytes of tensors
    model.builder.arena(fb::DType::F32, {2, 3});
    model.builder.arenaBytes = uint64_t{1} << 40;
    expectRejected(model.build(), "the arena of 1099511627776 bytes is larger than its tensors need (24 bytes");
  }
  {
    CopyModel model;
    model.builder.arenaBytes = (uint64_t{1} << 43) + 1;
    expectRejected(model.build(), "the arena of 8796093022209 bytes exceeds the runtime's limit of 2^43 bytes");
  }
}

// q, k, v [b, keys, 1] as inputs (nothing allocated for them at load) and an
// output [b, 1, 1]: attention over `keys` keys for batch b.
std::vector<uint8_t> attentionArtifact(int64_t batch, int64_t keys) {
  ArtifactBuilder builder;
  uint32_t q = builder.input("q", fb::DType::F32, {batch, 1, 1});
  uint32_t k = builder.input("k", fb::DType::F32, {batch, keys, 1});
  uint32_t v = builder.input("v", fb::DType::F32, {batch, keys, 1});
  uint32_t out = builder.output("out", fb::DType::F32, {batch, 1, 1});
  builder.attention({{batch}, 1, keys, 1, 1, 1.0f, dense(q, {batch, 1, 1}), dense(k, {batch, keys, 1}),
                     dense(v, {batch, keys, 1}), dense(out, {batch, 1, 1})},
                    "attn.ein:4:9");
  return builder.build();
}

// Regression (issue 17): an empty attention (batch 0) with 2^40 keys is a
// valid artifact, but its scratch was sized by the keys: 8 TiB per thread,
// which aborted the process (ASan) or failed the session. A step that
// computes nothing needs no scratch.
TEST(Limits, EmptyAttentionNeedsNoScratch) {
  std::vector<uint8_t> bytes = attentionArtifact(0, kMaxElements);
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "empty-attention.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  for (int threads : {1, 2}) {
    auto session = Session::create(model.value(), {threads, Device::Cpu});
    ASSERT_TRUE(session.ok()) << session.status().toString();
    for (const TensorInfo &input : model.value()->inputs()) {
      ASSERT_EQ(input.byteSize(), 0u);
      ASSERT_TRUE(session.value()->setInput(input.name, DType::F32, input.shape, nullptr, 0).ok());
    }
    Status ran = session.value()->run();
    EXPECT_TRUE(ran.ok()) << ran.toString();
  }
}

// A step that does compute is refused when its scratch exceeds the per-thread
// limit (4 GiB): 2^30 keys need 8 GiB of doubles for the scores.
TEST(Limits, ScratchBeyondTheLimitIsRefused) {
  std::vector<uint8_t> bytes = attentionArtifact(1, int64_t{1} << 30);
  auto model = Model::loadFromMemory(bytes.data(), bytes.size(), "big-attention.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto session = Session::create(model.value());
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::InvalidArtifact);
  EXPECT_NE(session.status().message().find("(attention at attn.ein:4:9) needs"), std::string::npos)
      << session.status().message();
  EXPECT_NE(session.status().message().find("bytes of scratch memory per thread, beyond the runtime's limit of "
                                            "4294967296"),
            std::string::npos)
      << session.status().message();
}

// Regression (fuzz_artifact_fields): a view over an empty space reaches no
// element and went unchecked, but kernels still walk its nonempty axes: a
// gather of width 0 stepped through the rows of y from offset 2^63 - 1 and
// overflowed. Such a view is bounded like a real tensor's.
TEST(Limits, ViewsOverEmptySpacesAreBounded) {
  auto gatherArtifact = [](int64_t yOffset) {
    ArtifactBuilder builder;
    uint32_t ids = builder.input("ids", fb::DType::I32, {2, 3}, 4);
    uint32_t table = builder.weightsF32({4, 0}, {});
    uint32_t y = builder.output("y", fb::DType::F32, {2, 3, 0});
    builder.gather({{2, 3}, 4, 0, dense(ids, {2, 3}), dense(table, {4, 0}), ViewSpec{y, yOffset, {3, 1, 1}}});
    return builder.build();
  };
  EXPECT_TRUE(loadStatus(gatherArtifact(0)).ok()) << loadStatus(gatherArtifact(0)).toString();
  expectRejected(gatherArtifact(INT64_MAX), "view y over the empty space [2, 3, 0] reaches offset beyond 2^63, beyond the "
                                            "runtime's limit of 2^40");
  expectRejected(gatherArtifact((int64_t{1} << 40) - 4),
                 "view y over the empty space [2, 3, 0] reaches offset 1099511627777, beyond the runtime's limit");
}

}  // namespace
}  // namespace ein::testing
