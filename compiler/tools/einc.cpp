// einc: compiles a .ein model into an ein artifact (.einb).
//
//   einc MODEL.ein -o MODEL.einb [--weights W.safetensors | --random-weights SEED]
//        [--dim NAME=SIZE|NAME=MIN..MAX]... [--target cpu|cuda] [--precision fp32|bf16|fp16]
//        [--print-ir-after-all] [--dump-ir DIR]
//   einc MODEL.ein --emit=mlir      prints the ein dialect from the front end
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>

#include "frontend/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlirgen/MLIRGen.h"
#include "passes/Passes.h"
#include "target/ArtifactWriter.h"
#include "target/ParamSources.h"

namespace {

struct Options {
  std::string model;
  std::string output;
  std::string weights;
  std::optional<uint64_t> randomWeights;
  std::vector<std::string> dims;
  std::string target = "cpu";
  std::string precision = "fp32";
  std::string emit = "artifact";
  bool printIrAfterAll = false;
  std::string dumpIrDir;
};

// Writes the IR after every pass to DIR/NN-pass-name.mlir.
class DumpIrInstrumentation : public mlir::PassInstrumentation {
 public:
  explicit DumpIrInstrumentation(std::string dir) : dir(std::move(dir)) {}

  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    // The adaptor that runs the nested pipeline has no argument: its passes
    // were dumped one by one already.
    if (pass->getArgument().empty()) return;
    // Passes nested on func.func see the function; dump the whole module.
    mlir::Operation *top = op;
    while (top->getParentOp()) top = top->getParentOp();
    dump(pass->getArgument().str(), top);
  }

  void dump(const std::string &name, mlir::Operation *op) {
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%02d", index++);
    std::string path = dir + "/" + prefix + "-" + name + ".mlir";
    std::error_code error;
    llvm::raw_fd_ostream file(path, error);
    if (error) {
      llvm::errs() << "einc: cannot write " << path << ": " << error.message() << "\n";
      return;
    }
    op->print(file);
  }

 private:
  std::string dir;
  int index = 0;
};

// NAME=SIZE pins a dim; NAME=MIN..MAX makes it a range.
mlir::FailureOr<ein::DimRanges> parseDimOverrides(const std::vector<std::string> &dims) {
  ein::DimRanges overrides;
  for (const std::string &dim : dims) {
    size_t equals = dim.find('=');
    llvm::StringRef value = llvm::StringRef(dim).substr(equals == std::string::npos ? dim.size() : equals + 1);
    auto [low, high] = value.split("..");
    ein::DimRange range;
    bool ranged = value.contains("..");
    bool malformed = equals == std::string::npos || equals == 0 || low.getAsInteger(10, range.min) ||
                     (ranged ? high.getAsInteger(10, range.max) : false);
    if (!ranged) range.max = range.min;
    if (malformed || range.min < (ranged ? 0 : 1) || range.max < range.min) {
      llvm::errs() << "einc: --dim expects NAME=SIZE with a positive SIZE or NAME=MIN..MAX with 0 <= MIN <= MAX, got '"
                   << dim << "'\n";
      return mlir::failure();
    }
    overrides[dim.substr(0, equals)] = range;
  }
  return overrides;
}

int compile(const Options &options) {
  mlir::DialectRegistry registry;
  ein::registerEinDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);

  auto overrides = parseDimOverrides(options.dims);
  if (mlir::failed(overrides)) return 1;
  if (options.precision == "fp16" && options.target != "cuda") {
    llvm::errs() << "einc: --precision fp16 needs --target cuda: the cpu kernels compute in fp32 or bf16\n";
    return 1;
  }

  auto file = llvm::MemoryBuffer::getFile(options.model, /*IsText=*/true);
  if (!file) {
    llvm::errs() << "einc: cannot read " << options.model << ": " << file.getError().message() << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  llvm::StringRef source = sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      ein::mlirgen::generate(context, source, options.model, *overrides);
  if (!module) return 1;
  if (options.emit == "mlir") {
    module->print(llvm::outs());
    return 0;
  }
  if (options.output.empty()) {
    llvm::errs() << "einc: no output file: pass -o MODEL.einb (or --emit=mlir)\n";
    return 1;
  }

  mlir::PassManager manager(&context);
  if (options.printIrAfterAll) {
    context.disableMultithreading();
    manager.enableIRPrinting(/*shouldPrintBeforePass=*/nullptr,
                             /*shouldPrintAfterPass=*/[](mlir::Pass *, mlir::Operation *) { return true; },
                             /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false);
  }
  if (!options.dumpIrDir.empty()) {
    std::error_code error = llvm::sys::fs::create_directories(options.dumpIrDir);
    if (error) {
      llvm::errs() << "einc: cannot create " << options.dumpIrDir << ": " << error.message() << "\n";
      return 1;
    }
    context.disableMultithreading();
    auto dumper = std::make_unique<DumpIrInstrumentation>(options.dumpIrDir);
    dumper->dump("frontend", *module);
    manager.addInstrumentation(std::move(dumper));
  }
  ein::buildCompilerPipeline(manager);
  if (mlir::failed(manager.run(*module))) return 1;

  std::unique_ptr<ein::SafetensorsParams> safetensors;
  ein::ParamBytesProvider params;
  if (options.randomWeights) {
    params = ein::randomParams(*options.randomWeights);
  } else {
    auto opened = ein::weights::SafetensorsFile::open(options.weights);
    if (!opened) {
      llvm::errs() << "einc: " << llvm::toString(opened.takeError()) << "\n";
      return 1;
    }
    safetensors = std::make_unique<ein::SafetensorsParams>(std::move(*opened));
    params = safetensors->provider();
  }
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  ein::ArtifactOptions artifactOptions{std::filesystem::path(options.model).filename().string()};
  artifactOptions.target = options.target == "cuda" ? ein::ArtifactTarget::Cuda : ein::ArtifactTarget::Cpu;
  artifactOptions.precision = options.precision == "bf16"   ? ein::ArtifactPrecision::Bf16
                              : options.precision == "fp16" ? ein::ArtifactPrecision::Fp16
                                                            : ein::ArtifactPrecision::Fp32;
  auto artifact = ein::writeArtifact(function, params, artifactOptions);
  if (mlir::failed(artifact)) return 1;
  if (safetensors)
    for (const std::string &name : safetensors->unusedTensors())
      llvm::errs() << options.weights << ": warning: tensor \"" << name << "\" is not a parameter of the model\n";

  std::ofstream out(options.output, std::ios::binary);
  out.write(reinterpret_cast<const char *>(artifact->data()), static_cast<std::streamsize>(artifact->size()));
  out.close();
  if (!out) {
    llvm::errs() << "einc: cannot write " << options.output << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"einc: compiles a .ein model into an ein artifact (.einb)", "einc"};
  Options options;
  app.add_option("model", options.model, "the model (.ein)")->required();
  app.add_option("-o,--output", options.output, "the artifact to write (.einb)");
  auto *weights = app.add_option("--weights", options.weights, "parameters, under PyTorch state_dict names (.safetensors)");
  auto *random = app.add_option("--random-weights", options.randomWeights, "random parameters from SEED (for benchmarks)");
  weights->excludes(random);
  app.add_option("--dim", options.dims, "override a dim: NAME=SIZE, or NAME=MIN..MAX for a range (repeatable)");
  app.add_option("--target", options.target, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", options.precision,
                 "fp32 (default); bf16: bf16 gemm weights and bf16 gemm/attention arithmetic with f32 accumulation "
                 "(cpu and cuda); fp16: as bf16 in fp16 (cuda only)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--emit", options.emit, "artifact (default) or mlir: print the ein dialect from the front end")
      ->check(CLI::IsMember({"artifact", "mlir"}));
  app.add_flag("--print-ir-after-all", options.printIrAfterAll, "print the IR after every pass to stderr");
  app.add_option("--dump-ir", options.dumpIrDir, "write the IR before the first pass and after each to DIR");
  CLI11_PARSE(app, argc, argv);
  if (options.emit != "mlir" && options.weights.empty() && !options.randomWeights) {
    llvm::errs() << "einc: give the parameters with --weights FILE.safetensors or --random-weights SEED\n";
    return 1;
  }
  return compile(options);
}
