// Runtime tests on artifacts built here with the FlatBuffers API: a small
// program runs correctly, and damaged artifacts are rejected, never run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ein/runtime.hpp"
#include "ein/schema/ein_artifact_generated.h"

namespace fb = ein::schema;

namespace {

// y = relu(x @ w + b) for x: f32[2, 3], w: f32[3, 4] (weights), b: f32[4]; then
// z = softmax(y) over the last axis. Weights follow the header, 64-aligned.
std::vector<uint8_t> buildArtifact(uint32_t version = static_cast<uint32_t>(fb::FormatVersion::Current)) {
  std::vector<float> w(12), b(4);
  for (int i = 0; i < 12; ++i) w[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (int i = 0; i < 4; ++i) b[i] = 0.25f * static_cast<float>(i);
  std::vector<uint8_t> weights(128, 0);
  std::memcpy(weights.data(), w.data(), 48);
  std::memcpy(weights.data() + 64, b.data(), 16);

  auto build = [&](uint64_t weightsOffset) {
    flatbuffers::FlatBufferBuilder builder;
    builder.ForceDefaults(true);
    std::vector<int64_t> xs{2, 3}, ws{3, 4}, bs{4}, ys{2, 4};
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors{
        fb::CreateTensorDirect(builder, fb::DType::F32, &xs, fb::Storage::Input, 0, 0),
        fb::CreateTensorDirect(builder, fb::DType::F32, &ws, fb::Storage::Weights, 0, 0),
        fb::CreateTensorDirect(builder, fb::DType::F32, &bs, fb::Storage::Weights, 0, 64),
        fb::CreateTensorDirect(builder, fb::DType::F32, &ys, fb::Storage::Arena, 0, 0),
        fb::CreateTensorDirect(builder, fb::DType::F32, &ys, fb::Storage::Output, 0, 0)};
    std::vector<int64_t> batch, aStrides{3, 1}, bStrides{4, 1}, cStrides{4, 1}, biasStrides{0, 1}, shape{2, 4};
    auto gemm = fb::CreateGemmDirect(builder, &batch, 2, 4, 3, fb::CreateViewDirect(builder, 0, 0, &aStrides),
                                     fb::CreateViewDirect(builder, 1, 0, &bStrides),
                                     fb::CreateViewDirect(builder, 3, 0, &cStrides),
                                     fb::CreateViewDirect(builder, 2, 0, &biasStrides), 1.0f, fb::Activation::Relu);
    auto softmax = fb::CreateSoftmaxDirect(builder, &shape, fb::CreateViewDirect(builder, 3, 0, &cStrides),
                                           fb::CreateViewDirect(builder, 4, 0, &cStrides));
    std::vector<flatbuffers::Offset<fb::Step>> steps{
        fb::CreateStepDirect(builder, fb::Kernel::Gemm, gemm.Union(), "test:1:1"),
        fb::CreateStepDirect(builder, fb::Kernel::Softmax, softmax.Union(), "test:2:1")};
    std::vector<flatbuffers::Offset<fb::Binding>> inputs{fb::CreateBindingDirect(builder, "x", 0, 0)};
    std::vector<flatbuffers::Offset<fb::Binding>> outputs{fb::CreateBindingDirect(builder, "z", 4, 0)};
    std::vector<flatbuffers::Offset<fb::Parameter>> params{fb::CreateParameterDirect(builder, "w", 1),
                                                           fb::CreateParameterDirect(builder, "b", 2)};
    auto model = fb::CreateModelDirect(builder, version, fb::Target::Cpu, "test", "test.ein", &inputs, &outputs,
                                       &params, &tensors, &steps, 64, weightsOffset, weights.size());
    fb::FinishSizePrefixedModelBuffer(builder, model);
    return std::vector<uint8_t>(builder.GetBufferPointer(), builder.GetBufferPointer() + builder.GetSize());
  };
  size_t headerSize = build(0).size();
  uint64_t offset = (headerSize + 63) / 64 * 64;
  std::vector<uint8_t> file = build(offset);
  file.resize(offset, 0);
  file.insert(file.end(), weights.begin(), weights.end());
  return file;
}

std::vector<float> expected(const float x[6]) {
  std::vector<float> z(8);
  for (int i = 0; i < 2; ++i) {
    double y[4], max = -1e30, sum = 0;
    for (int j = 0; j < 4; ++j) {
      double acc = 0.25 * j;
      for (int p = 0; p < 3; ++p) acc += x[i * 3 + p] * (0.1 * (p * 4 + j) - 0.5);
      y[j] = acc > 0 ? acc : 0;
      max = std::max(max, y[j]);
    }
    for (int j = 0; j < 4; ++j) sum += std::exp(y[j] - max);
    for (int j = 0; j < 4; ++j) z[i * 4 + j] = static_cast<float>(std::exp(y[j] - max) / sum);
  }
  return z;
}

TEST(Artifact, RunsAndMatchesHandComputation) {
  auto model = ein::Model::fromMemory(buildArtifact());
  ASSERT_TRUE(model.ok()) << model.status().message();
  EXPECT_EQ(model.value()->steps().size(), 2u);
  EXPECT_EQ(model.value()->steps()[0].op, "gemm");
  auto session = ein::Session::create(model.value());
  ASSERT_TRUE(session.ok());
  const float x[6] = {1, -2, 0.5f, 3, 0.25f, -1};
  ASSERT_TRUE(session.value()->setInput("x", ein::DType::F32, {2, 3}, x, sizeof x).ok());
  ASSERT_TRUE(session.value()->run().ok());
  const auto *z = static_cast<const float *>(session.value()->outputData(0));
  std::vector<float> want = expected(x);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(z[i], want[i], 1e-6) << i;
}

TEST(Artifact, RejectsWrongInputs) {
  auto model = ein::Model::fromMemory(buildArtifact());
  ASSERT_TRUE(model.ok());
  auto session = ein::Session::create(model.value());
  float x[6] = {};
  ein::Status wrongShape = session.value()->setInput("x", ein::DType::F32, {3, 2}, x, sizeof x);
  EXPECT_NE(wrongShape.message().find("must be f32[2, 3], got f32[3, 2]"), std::string::npos) << wrongShape.message();
  EXPECT_EQ(session.value()->setInput("y", ein::DType::F32, {2, 3}, x, sizeof x).code(), ein::StatusCode::NotFound);
  ein::Status unset = session.value()->run();
  EXPECT_NE(unset.message().find("input \"x\""), std::string::npos) << unset.message();
}

TEST(Artifact, RejectsWrongVersionAndIdentifier) {
  auto old = ein::Model::fromMemory(buildArtifact(99));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("format version 99"), std::string::npos) << old.status().message();
  std::vector<uint8_t> bytes = buildArtifact();
  bytes[4 + 4] = 'X';  // the file identifier follows the size prefix and the root offset
  auto renamed = ein::Model::fromMemory(bytes);
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.status().message().find("EINB"), std::string::npos) << renamed.status().message();
}

TEST(Artifact, TruncationsAreRejected) {
  std::vector<uint8_t> bytes = buildArtifact();
  for (size_t length = 0; length < bytes.size(); ++length) {
    auto model = ein::Model::fromMemory(std::vector<uint8_t>(bytes.begin(), bytes.begin() + length));
    EXPECT_FALSE(model.ok()) << "a prefix of " << length << " bytes was accepted";
  }
}

// Random byte flips: each damaged artifact is rejected, or it verifies and
// then runs without touching memory outside its buffers (checked by the
// sanitizer builds and, here, by not crashing).
TEST(Artifact, CorruptionNeverCrashes) {
  std::vector<uint8_t> original = buildArtifact();
  std::mt19937 generator(1234);
  std::uniform_int_distribution<size_t> position(0, original.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  const float x[6] = {1, 2, 3, 4, 5, 6};
  int accepted = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<uint8_t> bytes = original;
    for (int flips = 1 + trial % 3; flips > 0; --flips) bytes[position(generator)] = static_cast<uint8_t>(byte(generator));
    auto model = ein::Model::fromMemory(bytes);
    if (!model.ok()) continue;
    ++accepted;
    auto session = ein::Session::create(model.value());
    if (!session.ok()) continue;
    for (const auto &input : model.value()->inputs()) {
      std::vector<uint8_t> zeros(input.byteSize());
      (void)session.value()->setInput(input.name, input.dtype, input.shape, zeros.data(), zeros.size());
    }
    (void)session.value()->run();
  }
  EXPECT_GT(accepted, 0);  // some flips land in weights and stay valid
}

}  // namespace
