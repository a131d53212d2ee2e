// Horizontal GEMM fusion (ein-fuse-parallel-linears) against the same model
// compiled without it: the example BERT encoder (q/k/v with biases, a padding
// mask), Llama decoder (q/k/v appended to a key/value cache, SwiGLU's gate
// and up) and multi-head self-attention with einsum projections by stacked
// per-head weights, at every CPU precision. Each output column is computed
// from the same row and the same weight column either way, so fp32 results
// are bit-identical; bf16 and int8 store the fused weight as they store any GEMM
// weight (int8: the per-column scales concatenated) and stay within a
// tolerance of the unfused model (in practice identical too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "compiler/driver/compiler.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/runtime.hpp"

namespace {

struct Compiled {
  std::shared_ptr<const ein::Model> model;
  int gemmSteps = 0;
  size_t artifactBytes = 0;
};

Compiled compileExample(const std::string &file, const ein::DimRanges &dims, ein::ArtifactPrecision precision,
                        bool fused) {
  std::string messages;
  auto sink = [&](const ein::driver::Diagnostic &d) { messages += d.rendered + d.message + "\n"; };
  auto source = ein::driver::readModelFile(std::string(EIN_EXAMPLES_DIR) + "/" + file, sink);
  if (!source) {
    ADD_FAILURE() << messages;
    return {};
  }
  ein::driver::Compilation compilation(std::move(*source), sink);
  auto module = compilation.frontEnd(dims);
  ein::driver::PipelineOptions options;
  options.precision = precision;
  options.fuseParallelLinears = fused;
  if (!module || mlir::failed(ein::bindParameters(*module, ein::randomParams(3))) ||
      mlir::failed(compilation.runPipeline(*module, options))) {
    ADD_FAILURE() << messages;
    return {};
  }
  auto artifact = compilation.writeArtifact(*module, options);
  if (mlir::failed(artifact)) {
    ADD_FAILURE() << messages;
    return {};
  }
  auto model = ein::Model::loadFromMemory(artifact->data(), artifact->size(), file);
  if (!model.ok()) {
    ADD_FAILURE() << model.status().toString();
    return {};
  }
  Compiled compiled{*model, 0, artifact->size()};
  for (const ein::StepInfo &step : (*model)->steps()) compiled.gemmSteps += step.op == "gemm";
  return compiled;
}

struct Input {
  std::string name;
  ein::DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
Input tensorInput(const std::string &name, ein::DType dtype, std::vector<int64_t> shape, const std::vector<T> &values) {
  Input input{name, dtype, std::move(shape), std::vector<uint8_t>(values.size() * sizeof(T))};
  std::memcpy(input.bytes.data(), values.data(), input.bytes.size());
  return input;
}

// Runs the calls one after another in one session (a decoder's cache carries
// over) and returns `output` of each.
std::vector<std::vector<float>> run(const Compiled &compiled, const std::vector<std::vector<Input>> &calls,
                                    const std::string &output) {
  std::vector<std::vector<float>> results;
  auto session = ein::Session::create(compiled.model);
  if (!session.ok()) {
    ADD_FAILURE() << session.status().toString();
    return results;
  }
  for (const std::vector<Input> &inputs : calls) {
    for (const Input &input : inputs) {
      ein::Status status =
          (*session)->setInput(input.name, input.dtype, input.shape, input.bytes.data(), input.bytes.size());
      EXPECT_TRUE(status.ok()) << status.toString();
    }
    ein::Status status = (*session)->run();
    EXPECT_TRUE(status.ok()) << status.toString();
    auto result = (*session)->output(output);
    if (!status.ok() || !result.ok()) return results;
    const auto *data = static_cast<const float *>(result->data);
    results.emplace_back(data, data + result->bytes / sizeof(float));
  }
  return results;
}

struct Example {
  std::string file;
  ein::DimRanges dims;
  std::vector<std::vector<Input>> calls;
  std::string output;
  int fusedGemms;  // gemms the fusion removes
};

Example bertEncoder() {
  // Two sentences of 7 tokens, the second padded after 4.
  std::mt19937 generator(11);
  std::vector<int32_t> ids(14), mask(14);
  for (int32_t &id : ids) id = static_cast<int32_t>(generator() % 1000);
  for (int i = 0; i < 14; ++i) mask[static_cast<size_t>(i)] = i < 7 || i % 7 < 4;
  return {"bert_encoder.ein",
          {},
          {{tensorInput("ids", ein::DType::I32, {2, 7}, ids), tensorInput("mask", ein::DType::I32, {2, 7}, mask)}},
          "sentence",
          4 * 2};  // per layer: q, k, v -> one
}

Example llamaDecoder() {
  // A prompt of 5 tokens, then two decode steps.
  return {"llama_decoder.ein",
          {{"hidden", {96, 96}}, {"inter", {160, 160}}},
          {{tensorInput<int64_t>("ids", ein::DType::I64, {1, 5}, {3, 17, 42, 99, 5})},
           {tensorInput<int64_t>("ids", ein::DType::I64, {1, 1}, {77})},
           {tensorInput<int64_t>("ids", ein::DType::I64, {1, 1}, {8})}},
          "logits",
          2 * 3};  // per layer: q, k, v -> one; gate, up -> one
}

Example multiHeadSelfAttention() {
  // q, k and v as einsums by stacked per-head weights [h, d, e].
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(5 * 16);
  for (float &value : x) value = uniform(generator);
  return {"mhsa.ein", {}, {{tensorInput("x", ein::DType::F32, {5, 16}, x)}}, "y", 2};  // q, k, v -> one
}

void expectFusionKeepsResults(const Example &example, ein::ArtifactPrecision precision, double tolerance) {
  Compiled unfused = compileExample(example.file, example.dims, precision, false);
  Compiled fused = compileExample(example.file, example.dims, precision, true);
  ASSERT_TRUE(unfused.model && fused.model);
  EXPECT_EQ(fused.gemmSteps, unfused.gemmSteps - example.fusedGemms);
  // The fused weights are stored once, not beside their parts.
  EXPECT_LE(fused.artifactBytes, unfused.artifactBytes);
  auto want = run(unfused, example.calls, example.output);
  auto got = run(fused, example.calls, example.output);
  ASSERT_EQ(got.size(), example.calls.size());
  ASSERT_EQ(want.size(), got.size());
  for (size_t call = 0; call < got.size(); ++call) {
    ASSERT_EQ(got[call].size(), want[call].size());
    if (tolerance == 0.0) {
      EXPECT_EQ(std::memcmp(got[call].data(), want[call].data(), got[call].size() * sizeof(float)), 0)
          << "call " << call << " differs";
      continue;
    }
    double scale = 0.0;
    for (float value : want[call]) scale = std::max(scale, std::abs(static_cast<double>(value)));
    for (size_t i = 0; i < got[call].size(); ++i)
      ASSERT_NEAR(got[call][i], want[call][i], tolerance * std::max(scale, 1.0)) << "call " << call << " element " << i;
  }
}

TEST(ParallelLinears, BertEncoderFp32IsBitIdentical) {
  expectFusionKeepsResults(bertEncoder(), ein::ArtifactPrecision::Fp32, 0.0);
}
TEST(ParallelLinears, BertEncoderBf16) { expectFusionKeepsResults(bertEncoder(), ein::ArtifactPrecision::Bf16, 1e-3); }
TEST(ParallelLinears, BertEncoderInt8) { expectFusionKeepsResults(bertEncoder(), ein::ArtifactPrecision::Int8, 1e-3); }
TEST(ParallelLinears, LlamaDecoderFp32IsBitIdentical) {
  expectFusionKeepsResults(llamaDecoder(), ein::ArtifactPrecision::Fp32, 0.0);
}
TEST(ParallelLinears, LlamaDecoderBf16) { expectFusionKeepsResults(llamaDecoder(), ein::ArtifactPrecision::Bf16, 1e-3); }
TEST(ParallelLinears, LlamaDecoderInt8) { expectFusionKeepsResults(llamaDecoder(), ein::ArtifactPrecision::Int8, 1e-3); }

TEST(ParallelLinears, EinsumHeadsFp32IsBitIdentical) {
  expectFusionKeepsResults(multiHeadSelfAttention(), ein::ArtifactPrecision::Fp32, 0.0);
}
TEST(ParallelLinears, EinsumHeadsBf16) {
  expectFusionKeepsResults(multiHeadSelfAttention(), ein::ArtifactPrecision::Bf16, 1e-3);
}
TEST(ParallelLinears, EinsumHeadsInt8) {
  expectFusionKeepsResults(multiHeadSelfAttention(), ein::ArtifactPrecision::Int8, 1e-3);
}

}  // namespace
