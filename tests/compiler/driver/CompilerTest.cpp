// compiler/driver: diagnostics reach the sink located and rendered as einc
// prints them, and a compilation's artifact is one the runtime runs.
#include <gtest/gtest.h>

#include <filesystem>

#include "driver/Compiler.h"
#include "ein/runtime.hpp"
#include "target/ParamSources.h"

namespace {

using ein::driver::Compilation;
using ein::driver::Diagnostic;
using ein::driver::PipelineOptions;
using ein::driver::Severity;

constexpr const char *kDoubling = "dim n = 3\ninput x: f32[n]\noutput y = x * 2\n";

// Compiles `text` with random weights; every diagnostic lands in `diagnostics`.
std::optional<std::vector<uint8_t>> compile(const std::string &text, std::vector<Diagnostic> &diagnostics,
                                            const PipelineOptions &options = {}) {
  Compilation compilation({text, "model.ein"}, [&](const Diagnostic &d) { diagnostics.push_back(d); });
  auto module = compilation.frontEnd({});
  if (!module || mlir::failed(compilation.runPipeline(*module, options))) return std::nullopt;
  auto artifact = compilation.writeArtifact(*module, ein::randomParams(1), options);
  if (mlir::failed(artifact)) return std::nullopt;
  return std::move(*artifact);
}

TEST(Compilation, ErrorsAreLocatedAndRenderedWithTheSourceLine) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(compile("dim n = 4\ninput x: f32[n, n]\noutput y = einsum(\"ab,bc->ac\", x x)\n", diagnostics));
  ASSERT_EQ(diagnostics.size(), 1u);
  const Diagnostic &error = diagnostics[0];
  EXPECT_EQ(error.severity, Severity::Error);
  EXPECT_EQ(error.file, "model.ein");
  EXPECT_EQ(error.line, 3u);
  EXPECT_EQ(error.column, 34u);
  EXPECT_EQ(error.rendered, "model.ein:3:34: error: " + error.message +
                                "\noutput y = einsum(\"ab,bc->ac\", x x)\n" + std::string(33, ' ') + "^\n");
}

TEST(Compilation, WritesAnArtifactTheRuntimeRuns) {
  std::vector<Diagnostic> diagnostics;
  auto artifact = compile(kDoubling, diagnostics);
  ASSERT_TRUE(artifact);
  EXPECT_TRUE(diagnostics.empty());
  auto model = ein::Model::loadFromMemory(artifact->data(), artifact->size(), "doubling.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  EXPECT_EQ(model.value()->source(), "model.ein");
  auto runner = ein::Runner::create(model.value());
  ASSERT_TRUE(runner.ok());
  std::vector<float> x = {1, 2, 3}, y(3);
  std::vector<int64_t> shape = {3};
  ASSERT_TRUE(runner.value()->run({{"x", ein::DType::F32, shape, x.data(), 12}}, {{"y", y.data(), 12}}).ok());
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6}));
}

TEST(Compilation, Fp16OnTheCpuIsAnErrorWithoutAPlace) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(compile(kDoubling, diagnostics, {ein::ArtifactTarget::Cpu, ein::ArtifactPrecision::Fp16}));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].file, "");
  EXPECT_EQ(diagnostics[0].rendered, "");
  EXPECT_EQ(diagnostics[0].message, "precision fp16 needs target cuda: the cpu kernels compute in fp32, bf16 or int8");
}

TEST(Compilation, Int8OnCudaIsAnErrorWithoutAPlace) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(compile(kDoubling, diagnostics, {ein::ArtifactTarget::Cuda, ein::ArtifactPrecision::Int8}));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].message, "precision int8 needs target cpu: the cuda kernels compute in fp32, bf16 or fp16");
}

TEST(Compilation, DumpsTheIrOfEveryPass) {
  std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "driver_dump_ir";
  std::filesystem::remove_all(dir);
  std::vector<Diagnostic> diagnostics;
  PipelineOptions options;
  options.dumpIrDir = dir.string();
  ASSERT_TRUE(compile(kDoubling, diagnostics, options));
  EXPECT_TRUE(std::filesystem::exists(dir / "00-frontend.mlir"));
  EXPECT_GT(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 10);
}

TEST(ReadModelFile, AnUnreadableFileIsReported) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(ein::driver::readModelFile("/nonexistent/model.ein",
                                          [&](const Diagnostic &d) { diagnostics.push_back(d); }));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].message.rfind("cannot read /nonexistent/model.ein: ", 0), 0u) << diagnostics[0].message;
}

TEST(ParseOptions, TargetsAndPrecisionsAsEincSpellsThem) {
  EXPECT_EQ(ein::driver::parseTarget("cuda"), ein::ArtifactTarget::Cuda);
  EXPECT_EQ(ein::driver::parsePrecision("bf16"), ein::ArtifactPrecision::Bf16);
  EXPECT_FALSE(ein::driver::parseTarget("tpu"));
  EXPECT_FALSE(ein::driver::parsePrecision("fp8"));
}

}  // namespace
