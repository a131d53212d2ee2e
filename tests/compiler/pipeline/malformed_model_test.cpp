// No model text makes the compiler crash: truncations and random edits of
// every example model either compile or fail with a located error.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>

#include "compiler/artifact/artifact.hpp"
#include "compiler/mlirgen/mlirgen.hpp"
#include "compiler/pipeline/pipeline.hpp"
#include "compiler/weights/param_sources.hpp"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

namespace fs = std::filesystem;

namespace {

// The examples small enough to compile at every try: ViT-S/16 (88 MB of
// weights), Whisper and T5 (the checkpoint library's, 150 and 240 MB at
// their defaults) are left out.
std::vector<fs::path> exampleModels() {
  const std::set<std::string> large = {"vit_small_patch16_224.ein", "whisper.ein", "t5.ein"};
  std::vector<fs::path> models;
  for (const auto &entry : fs::directory_iterator(EIN_EXAMPLES_DIR))
    if (entry.path().extension() == ".ein" && !large.count(entry.path().filename().string()))
      models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  return models;
}

std::string slurp(const fs::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

class Compiler {
 public:
  Compiler() {
    ein::registerEinDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  // Compiles `source` to an artifact with small random weights. On failure
  // the diagnostics must hold an error at a location in the model, and none
  // may be an op verifier's ("'kern.gemm' op ..."): that is an internal
  // error, which the front end should have reported in the model's terms.
  ::testing::AssertionResult compilesOrReports(const std::string &source) {
    std::string errors;
    bool located = false, internal = false;
    mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &diagnostic) {
      std::string message = diagnostic.str();
      errors += message + "\n";
      if (auto file = diagnostic.getLocation()->findInstanceOf<mlir::FileLineColLoc>())
        located |= file.getFilename() == "model.ein" && file.getLine() > 0;
      for (const char *dialect : {"'ein.", "'kern.", "'func.", "'builtin."})
        internal |= message.rfind(dialect, 0) == 0;
      return mlir::success();
    });
    auto module = ein::mlirgen::generate(*context, source, "model.ein", {});
    if (module && mlir::succeeded(ein::bindParameters(*module, ein::randomParams(1)))) {
      mlir::PassManager manager(context.get());
      ein::buildCompilerPipeline(manager);
      if (mlir::succeeded(manager.run(*module))) {
        auto function = *module->getOps<mlir::func::FuncOp>().begin();
        if (mlir::succeeded(ein::writeArtifact(function, {"model.ein"}))) {
          ++compiled;
          return ::testing::AssertionSuccess();
        }
      }
    }
    if (!located) return ::testing::AssertionFailure() << "failed without a located error:\n" << errors << source;
    if (internal) return ::testing::AssertionFailure() << "an internal error reached the user:\n" << errors << source;
    ++reported;
    return ::testing::AssertionSuccess();
  }

  int compiled = 0, reported = 0;

 private:
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> context;
};

TEST(MalformedModel, EveryTruncationCompilesOrReports) {
  Compiler compiler;
  for (const fs::path &model : exampleModels()) {
    std::string source = slurp(model);
    for (size_t length = 0; length < source.size(); ++length)
      ASSERT_TRUE(compiler.compilesOrReports(source.substr(0, length))) << model << " cut at " << length;
  }
  std::printf("%d truncations compiled, %d reported an error\n", compiler.compiled, compiler.reported);
  EXPECT_GT(compiler.reported, 100);
}

// Under AddressSanitizer (scripts/test.sh's build-fuzz, several times slower)
// a quarter of the trials: fuzz_einc and fuzz_frontend edit model text there too.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's spelling; it defines no __SANITIZE_ADDRESS__
#define EIN_UNDER_ASAN 1
#endif
#endif
#if defined(EIN_UNDER_ASAN) || defined(__SANITIZE_ADDRESS__)
constexpr int kRandomEditTrials = 200;
#else
constexpr int kRandomEditTrials = 800;
#endif

TEST(MalformedModel, RandomEditsCompileOrReport) {
  const std::vector<std::string> fragments = {
      "(", ")", "[", "]", ",", ":", "=", "+", "*", "/", "@", "-", "->", "...", "\n", " ", "\"", "{", "}", "#",
      "0", "1", "7", "1e-6", "inf", "b", "h", "x", "einsum", "rearrange", "softmax(", "def", "for", "in", "0..",
      "param", "input", "output", "dim", "return", "f32", "i32", "bool", "(h d)", "1 1", "axis=", "q, k",
  };
  Compiler compiler;
  std::mt19937 generator(2026);
  for (const fs::path &model : exampleModels()) {
    std::string original = slurp(model);
    for (int trial = 0; trial < kRandomEditTrials; ++trial) {
      std::string source = original;
      int edits = std::uniform_int_distribution<int>(1, 4)(generator);
      for (int e = 0; e < edits && !source.empty(); ++e) {
        size_t at = std::uniform_int_distribution<size_t>(0, source.size() - 1)(generator);
        size_t span = std::uniform_int_distribution<size_t>(0, 6)(generator);
        const std::string &fragment = fragments[generator() % fragments.size()];
        switch (generator() % 3) {
          case 0: source.insert(at, fragment); break;
          case 1: source.erase(at, span); break;
          default: source.replace(at, std::min(span, source.size() - at), fragment); break;
        }
      }
      ASSERT_TRUE(compiler.compilesOrReports(source)) << model << " trial " << trial;
    }
  }
  std::printf("%d edits compiled, %d reported an error\n", compiler.compiled, compiler.reported);
  EXPECT_GT(compiler.compiled, 10);
  EXPECT_GT(compiler.reported, 100);
}

}  // namespace
