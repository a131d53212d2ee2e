// compiler/driver: diagnostics reach the sink located and rendered as einc
// prints them, and a compilation's artifact is one the runtime runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "compiler/driver/compiler.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/runtime.hpp"
#include "file_kind.hpp"
#include "ir/ein/ein_dialect.hpp"
#include "llvm/Support/MemoryBuffer.h"

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
  if (!module || mlir::failed(ein::bindParameters(*module, ein::randomParams(1))) ||
      mlir::failed(compilation.runPipeline(*module, options)))
    return std::nullopt;
  auto artifact = compilation.writeArtifact(*module, options);
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
  EXPECT_EQ(diagnostics[0].message, "precision fp16 needs target cuda: the cpu kernels compute in fp32, bf16, int8 or int4");
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

TEST(Compilation, TextWithAControlByteIsRefusedBeforeItIsEchoed) {
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(compile("dim n = 3\ninput x: f32[n]\noutput y = x \x1b[2J* 2\n", diagnostics));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].message, "model.ein is not a text model: byte 0x1b at line 3, column 14 (offset 39) is a "
                                    "control character; a .ein model is UTF-8 text");
  EXPECT_EQ(diagnostics[0].rendered, "");
}

TEST(Compilation, AnUnknownDimHasNoPlaceInTheModel) {
  std::vector<Diagnostic> diagnostics;
  Compilation compilation({"dim seq = 3, d = 4\ninput x: f32[seq, d]\noutput y = x\n", "model.ein"},
                          [&](const Diagnostic &d) { diagnostics.push_back(d); });
  EXPECT_FALSE(compilation.frontEnd({{"sequ", {5, 5}}}));
  ASSERT_EQ(diagnostics.size(), 1u);
  // Neutral wording (einc prefixes --dim, Python its dims=), located nowhere.
  EXPECT_EQ(diagnostics[0].message, "the model declares no dim 'sequ' (did you mean 'seq'?); its dims: d, seq");
  EXPECT_EQ(diagnostics[0].file, "");
  EXPECT_EQ(diagnostics[0].line, 0u);
  EXPECT_EQ(diagnostics[0].rendered, "");
}

// ---- file kinds ---------------------------------------------------------------

std::span<const uint8_t> bytesOf(const std::string &text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

TEST(FileKind, TellsFilesByTheirFirstBytes) {
  using ein::FileKind;
  EXPECT_EQ(ein::sniffFileKind(bytesOf("dim n = 4\ninput x: f32[n]\n")), FileKind::EinText);
  EXPECT_EQ(ein::sniffFileKind(bytesOf("")), FileKind::EinText);
  EXPECT_EQ(ein::sniffFileKind(bytesOf(std::string("\x10\0\0\0\x0c\0\0\0EINB", 12))), FileKind::Artifact);
  EXPECT_EQ(ein::sniffFileKind(bytesOf(std::string("\x0c\0\0\0EINB", 8))), FileKind::Artifact);
  EXPECT_EQ(ein::sniffFileKind(bytesOf(std::string("\x02\0\0\0\0\0\0\0{}", 10))), FileKind::Safetensors);
  EXPECT_EQ(ein::sniffFileKind(bytesOf("GGUF\x03")), FileKind::Gguf);
  EXPECT_EQ(ein::sniffFileKind(bytesOf("\x93NUMPY\x01")), FileKind::Npy);
  EXPECT_EQ(ein::sniffFileKind(bytesOf("caf\xe9 noir")), FileKind::Unknown);  // Latin-1
  EXPECT_EQ(ein::sniffFileKind(bytesOf("caf\xc3")), FileKind::EinText);       // UTF-8 cut off at the end
  EXPECT_EQ(ein::sniffFileKind(bytesOf("\xc0\x80")), FileKind::Unknown);      // overlong
  EXPECT_EQ(ein::sniffFileKind(bytesOf("\xed\xa0\x80")), FileKind::Unknown);  // a surrogate
  // Text whose bytes 4..7 spell the identifier is still text (no zero byte).
  EXPECT_EQ(ein::sniffFileKind(bytesOf("abcdEINB")), FileKind::EinText);
  EXPECT_STREQ(ein::describeFileKind(FileKind::Artifact), "an ein artifact (compiled model)");
}

TEST(ReadModelFile, AFileThatIsNoModelIsNamedForWhatItIs) {
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "weights.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string("GGUF\x03\0\0\0", 8);
  }
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(ein::driver::readModelFile(path.string(), [&](const Diagnostic &d) { diagnostics.push_back(d); }));
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].message, path.string() + " is a GGUF weights file, not a .ein model; give the model's "
                                                    ".ein file, and this file as its weights");
  EXPECT_EQ(ein::driver::notModelText("m.ein", "x = 1\n\x01"),
            "m.ein is not a text model: byte 0x01 at line 2, column 1 (offset 6) is a control character; a .ein "
            "model is UTF-8 text");
  EXPECT_EQ(ein::driver::notModelText("m.ein", "# \xc3\xa9\t\r\n"), std::nullopt);
}

// ---- parameters -----------------------------------------------------------------

// A safetensors file in memory holding f32 tensors of the given shapes (zeros).
ein::weights::SafetensorsFile safetensors(const std::vector<std::pair<std::string, std::vector<int64_t>>> &tensors) {
  std::string header = "{";
  size_t offset = 0;
  for (const auto &[name, shape] : tensors) {
    size_t count = 1;
    std::string dims;
    for (int64_t size : shape) {
      count *= static_cast<size_t>(size);
      dims += (dims.empty() ? "" : ",") + std::to_string(size);
    }
    header += std::string(header.size() > 1 ? "," : "") + "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims +
              "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + 4 * count) + "]}";
    offset += 4 * count;
  }
  header += "}";
  std::string file(8, '\0');
  uint64_t length = header.size();
  std::memcpy(file.data(), &length, 8);
  file += header + std::string(offset, '\0');
  auto opened = ein::weights::SafetensorsFile::fromBuffer(llvm::MemoryBuffer::getMemBufferCopy(file), "w.safetensors");
  EXPECT_TRUE(static_cast<bool>(opened));
  return std::move(*opened);
}

// The provider alone (as the Python package uses it, without checkParameters):
// a missing parameter's message gives the file's name under a prefix, or a
// near miss.
TEST(SafetensorsParams, AMissingParameterGetsTheFilesNameForIt) {
  mlir::MLIRContext context;
  context.loadDialect<ein::ir::EinDialect>();
  auto type = mlir::RankedTensorType::get({2}, mlir::Float32Type::get(&context));
  auto at = mlir::FileLineColLoc::get(&context, "model.ein", 3, 1);
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  ein::SafetensorsParams prefixed(safetensors({{"model.w_out", {2}}}));
  EXPECT_TRUE(mlir::failed(prefixed.provider()("w_out", type, at)));
  EXPECT_EQ(message, "w.safetensors: missing parameter \"w_out\" (declared at model.ein:3:1); the file's names carry "
                     "the prefix \"model.\" (it has \"model.w_out\"): save the weights without the prefix, or declare "
                     "the parameters with it");
  ein::SafetensorsParams typo(safetensors({{"w_outpt", {2}}}));
  EXPECT_TRUE(mlir::failed(typo.provider()("w_out", type, at)));
  EXPECT_EQ(message, "w.safetensors: missing parameter \"w_out\" (declared at model.ein:3:1) (did you mean \"w_outpt\"?)");
  ein::SafetensorsParams unrelated(safetensors({{"encoder.weight", {2}}}));
  EXPECT_TRUE(mlir::failed(unrelated.provider()("w_out", type, at)));
  EXPECT_EQ(message, "w.safetensors: missing parameter \"w_out\" (declared at model.ein:3:1)");
}

// ---- random weights -------------------------------------------------------------

std::string readExample(const std::string &name) {
  std::ifstream in(std::string(EIN_EXAMPLES_DIR) + "/" + name);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(RandomWeights, AreInitialisedByTheirUseAsPyTorchDoes) {
  Compilation compilation({readExample("bert_encoder.ein"), "bert_encoder.ein"}, [](const Diagnostic &d) {
    ADD_FAILURE() << d.message;
  });
  auto module = compilation.frontEnd({});
  ASSERT_TRUE(module);
  ein::ParamInits inits = ein::paramInitsFromUses(*module);
  auto kind = [&](const std::string &name) {
    auto found = inits.find(name);
    return found == inits.end() ? ein::RandomInit::Normal : found->second.kind;
  };
  EXPECT_EQ(kind("embeddings.LayerNorm.weight"), ein::RandomInit::One);
  EXPECT_EQ(kind("encoder.layer.3.output.LayerNorm.weight"), ein::RandomInit::One);
  EXPECT_EQ(kind("embeddings.LayerNorm.bias"), ein::RandomInit::Zero);
  EXPECT_EQ(kind("encoder.layer.0.attention.self.query.bias"), ein::RandomInit::Zero);
  EXPECT_EQ(kind("embeddings.word_embeddings.weight"), ein::RandomInit::StandardNormal);
  EXPECT_EQ(kind("embeddings.position_embeddings.weight"), ein::RandomInit::Normal);  // sliced and added
  ASSERT_EQ(kind("encoder.layer.0.intermediate.dense.weight"), ein::RandomInit::FanInUniform);
  EXPECT_EQ(inits.at("encoder.layer.0.intermediate.dense.weight").fanIn, 64);  // [f, c]: c inputs
  EXPECT_EQ(inits.at("encoder.layer.0.output.dense.weight").fanIn, 256);       // [c, f]: f inputs

  // The values: norm weights 1, biases 0, linear weights within 1/sqrt(fan_in).
  ein::ParamProvider params = ein::randomParams(5, inits);
  auto values = [&](const std::string &name, std::vector<int64_t> shape) {
    mlir::MLIRContext &context = *module->getContext();
    auto blob = params(name, mlir::RankedTensorType::get(shape, mlir::Float32Type::get(&context)),
                       mlir::UnknownLoc::get(&context));
    EXPECT_TRUE(mlir::succeeded(blob));
    std::vector<float> floats(blob->getData().size() / 4);
    std::memcpy(floats.data(), blob->getData().data(), blob->getData().size());
    return floats;
  };
  EXPECT_EQ(values("embeddings.LayerNorm.weight", {64}), std::vector<float>(64, 1.0f));
  EXPECT_EQ(values("embeddings.LayerNorm.bias", {64}), std::vector<float>(64, 0.0f));
  std::vector<float> dense = values("encoder.layer.0.intermediate.dense.weight", {256, 64});
  float largest = 0;
  for (float value : dense) largest = std::max(largest, std::abs(value));
  EXPECT_LE(largest, 1.0f / 8.0f);
  EXPECT_GT(largest, 0.1f);
  // Deterministic per seed, and different across seeds.
  EXPECT_EQ(dense, values("encoder.layer.0.intermediate.dense.weight", {256, 64}));
  params = ein::randomParams(6, inits);
  EXPECT_NE(dense, values("encoder.layer.0.intermediate.dense.weight", {256, 64}));
}

// Random weights bound on demand (einc's and Python's way: each made when a
// pass or the writer reads it, let go after) give the same artifact as
// binding them all at once, at every precision the CPU stores weights in
// (f32, folded into concatenations, bf16, int8); a parameter's values are
// made again after they are let go, the same.
TEST(RandomWeights, BoundOnDemandTheyGiveTheSameArtifact) {
  for (const char *precision : {"fp32", "bf16", "int8"}) {
    SCOPED_TRACE(precision);
    std::vector<std::vector<uint8_t>> artifacts;
    for (ein::ParamBinding binding : {ein::ParamBinding::Now, ein::ParamBinding::OnDemand}) {
      std::vector<Diagnostic> diagnostics;
      Compilation compilation({readExample("llama_decoder.ein"), "llama_decoder.ein"},
                              [&](const Diagnostic &d) { diagnostics.push_back(d); });
      auto module = compilation.frontEnd({});
      ASSERT_TRUE(module);
      ASSERT_TRUE(mlir::succeeded(
          ein::bindParameters(*module, ein::randomParams(3, ein::paramInitsFromUses(*module)), {}, binding)));
      if (binding == ein::ParamBinding::OnDemand) {
        ein::ir::ParamOp first;
        module->walk([&](ein::ir::ParamOp param) {
          if (!first && !param->use_empty()) first = param;
        });
        ASSERT_TRUE(first);
        std::vector<char> made(first.getBoundBytes().begin(), first.getBoundBytes().end());
        ASSERT_FALSE(made.empty());
        first.releaseValues();
        EXPECT_EQ(std::vector<char>(first.getBoundBytes().begin(), first.getBoundBytes().end()), made);
        first.releaseValues();
      }
      PipelineOptions options;
      options.precision = *ein::driver::parsePrecision(precision);
      ASSERT_TRUE(mlir::succeeded(compilation.runPipeline(*module, options)));
      auto artifact = compilation.writeArtifact(*module, options);
      ASSERT_TRUE(mlir::succeeded(artifact));
      artifacts.push_back(std::move(*artifact));
    }
    EXPECT_TRUE(artifacts[0] == artifacts[1]);
  }
}

// With PyTorch's initialisation a random encoder's output depends on its
// input; with every weight N(0, 0.02) (norm weights too) it barely did.
TEST(RandomWeights, ARandomEncodersOutputDependsOnItsInput) {
  std::vector<Diagnostic> diagnostics;
  Compilation compilation({readExample("bert_encoder.ein"), "bert_encoder.ein"},
                          [&](const Diagnostic &d) { diagnostics.push_back(d); });
  auto module = compilation.frontEnd({});
  ASSERT_TRUE(module);
  ASSERT_TRUE(mlir::succeeded(ein::bindParameters(*module, ein::randomParams(1, ein::paramInitsFromUses(*module)))));
  PipelineOptions options;
  ASSERT_TRUE(mlir::succeeded(compilation.runPipeline(*module, options)));
  auto artifact = compilation.writeArtifact(*module, options);
  ASSERT_TRUE(mlir::succeeded(artifact));
  auto model = ein::Model::loadFromMemory(artifact->data(), artifact->size(), "bert.einb");
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto runner = ein::Runner::create(model.value());
  ASSERT_TRUE(runner.ok());
  auto run = [&](std::vector<int32_t> ids) {
    std::vector<int32_t> mask(ids.size(), 1);
    std::vector<int64_t> shape = {1, static_cast<int64_t>(ids.size())};
    std::vector<float> sentence(64);
    ein::Status status = runner.value()->run(
        {{"ids", ein::ElementType::I32, shape, ids.data(), ids.size() * 4},
         {"mask", ein::ElementType::I32, shape, mask.data(), mask.size() * 4}},
        {{"sentence", sentence.data(), sentence.size() * 4}});
    EXPECT_TRUE(status.ok()) << status.toString();
    return sentence;
  };
  std::vector<float> a = run({1, 2, 3, 4, 5, 6, 7, 8}), b = run({900, 17, 345, 4, 77, 512, 8, 999});
  float difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference = std::max(difference, std::abs(a[i] - b[i]));
  EXPECT_GT(difference, 0.1f);
}

}  // namespace
