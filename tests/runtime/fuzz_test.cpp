// Damaged artifacts: every truncation is rejected, and thousands of random
// mutations either fail to load (or to run) with a Status or load and run
// without touching memory they do not own. Run under ASan/UBSan for the
// strongest check; here a crash or a hang fails the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "artifact_builder.hpp"

namespace ein::testing {
namespace {

// Runs a model that loaded, with every input zero. Models whose memory
// exceeds `kMemoryLimit` (a mutated shape can ask for gigabytes) are not
// run, to keep the test fast; their verification has already been exercised.
constexpr uint64_t kMemoryLimit = 64 << 20;

bool runWithZeroInputs(const std::shared_ptr<const Model> &model) {
  uint64_t bytes = model->arenaBytes();
  for (const TensorInfo &info : model->inputs()) bytes += info.byteSize();
  for (const TensorInfo &info : model->outputs()) bytes += info.byteSize();
  if (bytes > kMemoryLimit) return false;
  auto session = Session::create(model);
  if (!session.ok()) return false;
  for (const TensorInfo &input : model->inputs()) {
    std::vector<uint8_t> zeros(input.byteSize());
    EXPECT_TRUE(session.value()->setInput(input.name, input.dtype, input.shape, zeros.data(), zeros.size()).ok());
  }
  return session.value()->run().ok();
}

// What the fuzz targets found, kept in tests/fuzz/findings: each loads (or
// is refused) and runs (or fails) without a crash; under ASan/UBSan, without
// touching memory it should not. fuzz_artifact-misaligned-size-vector: a
// vector of Size 4 bytes off its 8-byte alignment, read through a Size
// pointer (UBSan: misaligned load).
TEST(Fuzz, FindingsStayFixed) {
  int checked = 0;
  for (const auto &entry : std::filesystem::directory_iterator(EIN_FUZZ_FINDINGS_DIR)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto model = Model::loadFromMemory(bytes.data(), bytes.size(), entry.path().filename().string());
    if (model.ok()) runWithZeroInputs(model.value());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(Fuzz, EveryTruncationIsRejected) {
  for (const std::vector<uint8_t> &artifact : {everyKernelArtifact(), fusedKernelArtifact()}) {
  for (size_t length = 0; length < artifact.size(); ++length) {
    auto model = Model::loadFromMemory(artifact.data(), length);
    EXPECT_FALSE(model.ok()) << "a " << length << "-byte prefix of a " << artifact.size() << "-byte artifact loaded";
  }
  EXPECT_TRUE(Model::loadFromMemory(artifact.data(), artifact.size()).ok());
  }
}

class FuzzTest : public ::testing::TestWithParam<int> {};

// Mutations of the model with every basic kernel (0) and of the one with the
// fused kernels: attention, talking heads, layernorm, gemm residual (1).
TEST_P(FuzzTest, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> artifact = GetParam() == 0 ? everyKernelArtifact() : fusedKernelArtifact();
  std::mt19937_64 generator(20240601 + GetParam());
  std::uniform_int_distribution<size_t> position(0, artifact.size() - 1);
  // Values that tend to break sizes and offsets when they land in an integer.
  const uint64_t extremes[] = {0, 1, 0x7f, 0xff, 0x7fffffff, 0x80000000, 0xffffffff, uint64_t{1} << 62,
                               0x7fffffffffffffff, 0x8000000000000000, 0xffffffffffffffff};
  int loaded = 0, ran = 0;
  const int kMutations = 20000;
  for (int trial = 0; trial < kMutations; ++trial) {
    std::vector<uint8_t> bytes = artifact;
    if (trial % 4 == 3) {
      // Overwrite an aligned 4- or 8-byte word with an extreme value.
      size_t width = trial % 8 == 3 ? 8 : 4;
      size_t at = position(generator) / width * width;
      uint64_t value = extremes[generator() % std::size(extremes)];
      for (size_t i = 0; i < width && at + i < bytes.size(); ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
    } else {
      for (int flips = 1 + trial % 3; flips > 0; --flips) bytes[position(generator)] = static_cast<uint8_t>(generator());
    }
    auto model = Model::loadFromMemory(bytes.data(), bytes.size());
    if (!model.ok()) {
      EXPECT_FALSE(model.status().message().empty());
      continue;
    }
    ++loaded;
    ran += runWithZeroInputs(model.value());
  }
  // Both outcomes occur: the test explores the verifier and the kernels.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(ran, 0);
  EXPECT_LT(loaded, kMutations);
}

INSTANTIATE_TEST_SUITE_P(Artifacts, FuzzTest, ::testing::Values(0, 1),
                         [](const auto &info) { return info.param == 0 ? "EveryKernel" : "FusedKernels"; });

}  // namespace
}  // namespace ein::testing
