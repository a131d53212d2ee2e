#include "driver/Compiler.h"

#include <cstdio>

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlirgen/MLIRGen.h"
#include "passes/Passes.h"

namespace ein::driver {
namespace {

Severity severityOf(mlir::DiagnosticSeverity severity) {
  switch (severity) {
    case mlir::DiagnosticSeverity::Error: return Severity::Error;
    case mlir::DiagnosticSeverity::Warning: return Severity::Warning;
    case mlir::DiagnosticSeverity::Note: return Severity::Note;
    case mlir::DiagnosticSeverity::Remark: return Severity::Remark;
  }
  return Severity::Error;
}

// Writes the IR after every pass to DIR/NN-pass-name.mlir.
class DumpIrInstrumentation : public mlir::PassInstrumentation {
 public:
  DumpIrInstrumentation(std::string dir, const Compilation &compilation)
      : dir(std::move(dir)), compilation(compilation) {}

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
    // A missing dump is reported but does not stop the compilation.
    if (error) {
      compilation.warning("cannot write " + path + ": " + error.message());
      return;
    }
    op->print(file);
  }

 private:
  std::string dir;
  const Compilation &compilation;
  int index = 0;
};

}  // namespace

// Renders each diagnostic as SourceMgrDiagnosticHandler prints it (source line,
// caret, notes) into a string, and hands it to the sink with its location.
// The string must exist before the base class that writes into it.
struct RenderedText {
  std::string text;
  llvm::raw_string_ostream stream{text};
};

class Compilation::DiagnosticCapture : private RenderedText, public mlir::SourceMgrDiagnosticHandler {
 public:
  DiagnosticCapture(llvm::SourceMgr &sourceMgr, mlir::MLIRContext &context, const DiagnosticSink &sink)
      : SourceMgrDiagnosticHandler(sourceMgr, &context, stream), sink(sink) {
    setHandler([this](mlir::Diagnostic &diagnostic) {
      capture(diagnostic);
      return mlir::success();
    });
  }

 private:
  void capture(mlir::Diagnostic &diagnostic) {
    text.clear();
    emitDiagnostic(diagnostic);
    stream.flush();
    Diagnostic captured{severityOf(diagnostic.getSeverity()), "", 0, 0, diagnostic.str(), text};
    if (auto place = diagnostic.getLocation()->findInstanceOf<mlir::FileLineColLoc>()) {
      captured.file = place.getFilename().str();
      captured.line = place.getLine();
      captured.column = place.getColumn();
    }
    sink(captured);
  }

  const DiagnosticSink &sink;
};

std::optional<ModelSource> readModelFile(const std::string &path, const DiagnosticSink &sink) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    sink({Severity::Error, "", 0, 0, "cannot read " + path + ": " + file.getError().message(), ""});
    return std::nullopt;
  }
  return ModelSource{(*file)->getBuffer().str(), path};
}

std::optional<ArtifactTarget> parseTarget(llvm::StringRef name) {
  if (name == "cpu") return ArtifactTarget::Cpu;
  if (name == "cuda") return ArtifactTarget::Cuda;
  return std::nullopt;
}

std::optional<ArtifactPrecision> parsePrecision(llvm::StringRef name) {
  if (name == "fp32") return ArtifactPrecision::Fp32;
  if (name == "bf16") return ArtifactPrecision::Bf16;
  if (name == "fp16") return ArtifactPrecision::Fp16;
  if (name == "int8") return ArtifactPrecision::Int8;
  return std::nullopt;
}

std::optional<std::string> parametersWithoutSource(mlir::ModuleOp module, bool haveSource) {
  std::vector<std::string> names;
  module.walk([&](ir::ParamOp param) { names.push_back(param.getName().str()); });
  if (haveSource || names.empty()) return std::nullopt;
  return "declares " + std::to_string(names.size()) + " parameter" + (names.size() == 1 ? "" : "s") + " (\"" +
         names.front() + "\" first)";
}

Compilation::Compilation(ModelSource source, DiagnosticSink sink)
    : source(std::move(source)), sink(std::move(sink)) {
  mlir::DialectRegistry registry;
  registerEinDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  // The buffer's name is the file name of every location, so that
  // diagnostics find the source line they point into.
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(this->source.text, this->source.filename), llvm::SMLoc());
  capture = std::make_unique<DiagnosticCapture>(sourceMgr, context, this->sink);
}

Compilation::~Compilation() = default;

void Compilation::error(const std::string &message) const { sink({Severity::Error, "", 0, 0, message, ""}); }
void Compilation::warning(const std::string &message) const { sink({Severity::Warning, "", 0, 0, message, ""}); }

mlir::OwningOpRef<mlir::ModuleOp> Compilation::frontEnd(const ein::DimRanges &dims) {
  return mlirgen::generate(context, source.text, source.filename, dims);
}

mlir::LogicalResult Compilation::runPipeline(mlir::ModuleOp module, const PipelineOptions &options) {
  if (options.precision == ArtifactPrecision::Fp16 && options.target != ArtifactTarget::Cuda) {
    error("precision fp16 needs target cuda: the cpu kernels compute in fp32, bf16 or int8");
    return mlir::failure();
  }
  if (options.precision == ArtifactPrecision::Int8 && options.target != ArtifactTarget::Cpu) {
    error("precision int8 needs target cpu: the cuda kernels compute in fp32, bf16 or fp16");
    return mlir::failure();
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
      this->error("cannot create " + options.dumpIrDir + ": " + error.message());
      return mlir::failure();
    }
    context.disableMultithreading();
    auto dumper = std::make_unique<DumpIrInstrumentation>(options.dumpIrDir, *this);
    dumper->dump("frontend", module);
    manager.addInstrumentation(std::move(dumper));
  }
  buildCompilerPipeline(manager, {options.fuseParallelLinears});
  return manager.run(module);
}

mlir::FailureOr<std::vector<uint8_t>> Compilation::writeArtifact(mlir::ModuleOp module, const ParamBytesProvider &params,
                                                                 const PipelineOptions &options) {
  auto function = *module.getOps<mlir::func::FuncOp>().begin();
  ArtifactOptions artifactOptions{llvm::sys::path::filename(source.filename).str()};
  artifactOptions.target = options.target;
  artifactOptions.precision = options.precision;
  return ein::writeArtifact(function, params, artifactOptions);
}

}  // namespace ein::driver
