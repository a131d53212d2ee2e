#include "compiler/driver/compiler.hpp"

#include <algorithm>
#include <cstdio>
#include <span>

#include "file_kind.hpp"
#include "llvm/Support/ConvertUTF.h"

#include "compiler/mlirgen/mlirgen.hpp"
#include "compiler/pipeline/pipeline.hpp"
#include "compiler/weights/param_sources.hpp"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"

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

// How --print-ir-after-all and --dump-ir print the IR: the weights (the
// parameters' dense resources) as a short placeholder, not megabytes of hex.
mlir::OpPrintingFlags printingFlags() { return mlir::OpPrintingFlags().elideLargeResourceString(64); }

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
    // With locations (as aliases at the end), so that a dump read back
    // (ein.explorer's IR view) traces each op to the model's lines.
    op->print(file, printingFlags().enableDebugInfo(/*enable=*/true, /*prettyForm=*/false));
  }

 private:
  std::string dir;
  const Compilation &compilation;
  int index = 0;
};

// Tells PipelineOptions::beforePass which pass runs next.
class BeforePassInstrumentation : public mlir::PassInstrumentation {
 public:
  explicit BeforePassInstrumentation(std::function<void(llvm::StringRef)> callback) : callback(std::move(callback)) {}

  void runBeforePass(mlir::Pass *pass, mlir::Operation *) override {
    if (!pass->getArgument().empty()) callback(pass->getArgument());
  }

 private:
  std::function<void(llvm::StringRef)> callback;
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
    } else if (diagnostic.getNotes().empty()) {
      captured.rendered.clear();  // no place, no source line: the message alone, as error() gives it
    }
    sink(captured);
  }

  const DiagnosticSink &sink;
};

std::optional<std::string> notModelText(const std::string &path, llvm::StringRef bytes) {
  std::span<const uint8_t> data(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  FileKind kind = sniffFileKind(data.first(std::min<size_t>(data.size(), 4096)));
  const std::string is = path + " is " + describeFileKind(kind) + ", not a .ein model";
  switch (kind) {
    case FileKind::Artifact: return is + "; run it with ein-run or inspect it with ein-inspect";
    case FileKind::Safetensors:
    case FileKind::Gguf: return is + "; give the model's .ein file, and this file as its weights";
    case FileKind::Npy: return is + "; give the model's .ein file, and this array as an input when it runs";
    case FileKind::Unknown:
      // Zero bytes: a binary file; otherwise text with a bad byte (Latin-1, say), located below.
      if (llvm::StringRef(bytes.data(), std::min<size_t>(bytes.size(), 4096)).contains('\0'))
        return path + " is " + describeFileKind(kind) + ", not a .ein model (UTF-8 text)";
      [[fallthrough]];
    case FileKind::EinText: {
      // The whole file: UTF-8, and no control characters besides tab, line
      // and page breaks, so no diagnostic echoes a binary or terminal control
      // byte in its source line.
      const uint8_t *begin = data.data(), *end = data.data() + data.size();
      const llvm::UTF8 *cursor = begin;
      while (cursor != end) {
        uint8_t c = *cursor;
        if (c < 0x80) {
          if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') break;
          if (c == 0x7f) break;
          ++cursor;
          continue;
        }
        const llvm::UTF8 *next = cursor;
        unsigned length = llvm::getNumBytesForUTF8(c);
        if (length > static_cast<size_t>(end - cursor) || !llvm::isLegalUTF8Sequence(next, next + length)) break;
        cursor += length;
      }
      if (cursor == end) return std::nullopt;
      // Line and column of the first byte that is not text.
      size_t offset = static_cast<size_t>(cursor - begin);
      size_t line = 1 + static_cast<size_t>(std::count(bytes.begin(), bytes.begin() + offset, '\n'));
      size_t lineStart = bytes.rfind('\n', offset);
      size_t column = offset - (lineStart == llvm::StringRef::npos ? 0 : lineStart + 1) + 1;
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", *cursor);
      return path + " is not a text model: byte " + byte + " at line " + std::to_string(line) + ", column " +
             std::to_string(column) + " (offset " + std::to_string(offset) + ") is " +
             (*cursor < 0x80 ? "a control character" : "not valid UTF-8") + "; a .ein model is UTF-8 text";
    }
  }
  return std::nullopt;
}

std::optional<ModelSource> readModelFile(const std::string &path, const DiagnosticSink &sink) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    sink({Severity::Error, "", 0, 0, "cannot read " + path + ": " + file.getError().message(), ""});
    return std::nullopt;
  }
  if (std::optional<std::string> message = notModelText(path, (*file)->getBuffer())) {
    sink({Severity::Error, "", 0, 0, *message, ""});
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
  for (ArtifactPrecision precision :
       {ArtifactPrecision::Fp32, ArtifactPrecision::Bf16, ArtifactPrecision::Fp16, ArtifactPrecision::Int8,
        ArtifactPrecision::Int4})
    if (name == precisionName(precision)) return precision;
  return std::nullopt;
}

const char *precisionName(ArtifactPrecision precision) {
  switch (precision) {
    case ArtifactPrecision::Fp32: return "fp32";
    case ArtifactPrecision::Bf16: return "bf16";
    case ArtifactPrecision::Fp16: return "fp16";
    case ArtifactPrecision::Int8: return "int8";
    case ArtifactPrecision::Int4: return "int4";
  }
  return "fp32";
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

mlir::OwningOpRef<mlir::ModuleOp> Compilation::frontEnd(const ein::DimRanges &dims,
                                                        const mlirgen::ConfigValues &configs) {
  // Text given in memory (the Python package's) is checked as a file is: no
  // diagnostic may echo a binary or terminal control byte in its source line.
  if (std::optional<std::string> message = notModelText(source.filename, source.text)) {
    error(*message);
    return nullptr;
  }
  return mlirgen::generate(context, source.text, source.filename, dims, configs);
}

int64_t groupSizeFor(ArtifactPrecision precision, std::optional<int64_t> given, const SafetensorsParams *weights) {
  if (given) return *given;
  return precision == ArtifactPrecision::Int8 && weights && weights->holdsBlocks("Q8_0") ? 32 : 0;
}

mlir::LogicalResult Compilation::runPipeline(mlir::ModuleOp module, const PipelineOptions &options) {
  if (options.precision == ArtifactPrecision::Fp16 && options.target != ArtifactTarget::Cuda) {
    error("precision fp16 needs target cuda: the cpu kernels compute in fp32, bf16, int8 or int4");
    return mlir::failure();
  }
  if ((options.precision == ArtifactPrecision::Int8 || options.precision == ArtifactPrecision::Int4) &&
      options.target != ArtifactTarget::Cpu) {
    error(std::string("precision ") + precisionName(options.precision) +
          " needs target cpu: the cuda kernels compute in fp32, bf16 or fp16");
    return mlir::failure();
  }
  if (options.groupSize != 0 && options.groupSize != 32) {
    error("group size " + std::to_string(options.groupSize) + " is not one the kernels take: 32 (a scale per group "
          "of 32 along k), or 0 for int8's scale per output column");
    return mlir::failure();
  }
  if (options.groupSize != 0 && options.precision != ArtifactPrecision::Int8 &&
      options.precision != ArtifactPrecision::Int4) {
    error(std::string("a group size is for precisions int8 and int4, not ") + precisionName(options.precision));
    return mlir::failure();
  }
  mlir::PassManager manager(&context);
  if (options.printIrAfterAll) {
    context.disableMultithreading();
    manager.enableIRPrinting(/*shouldPrintBeforePass=*/nullptr,
                             /*shouldPrintAfterPass=*/[](mlir::Pass *, mlir::Operation *) { return true; },
                             /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                             /*printAfterOnlyOnFailure=*/false, llvm::errs(), printingFlags());
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
  if (options.beforePass) manager.addInstrumentation(std::make_unique<BeforePassInstrumentation>(options.beforePass));
  buildCompilerPipeline(manager, {options.fuseParallelLinears, precisionName(options.precision),
                                  options.target == ArtifactTarget::Cuda ? "cuda" : "cpu", options.groupSize});
  return manager.run(module);
}

namespace {

ArtifactOptions artifactOptionsOf(const std::string &filename, const PipelineOptions &options) {
  ArtifactOptions artifactOptions{llvm::sys::path::filename(filename).str()};
  artifactOptions.target = options.target;
  artifactOptions.precision = options.precision;
  return artifactOptions;
}

}  // namespace

mlir::FailureOr<WrittenArtifact> Compilation::writeArtifact(mlir::ModuleOp module, const PipelineOptions &options,
                                                            llvm::raw_pwrite_stream &out) {
  auto function = *module.getOps<mlir::func::FuncOp>().begin();
  return ein::writeArtifact(function, artifactOptionsOf(source.filename, options), out);
}

mlir::FailureOr<std::vector<uint8_t>> Compilation::writeArtifact(mlir::ModuleOp module,
                                                                 const PipelineOptions &options) {
  auto function = *module.getOps<mlir::func::FuncOp>().begin();
  return ein::writeArtifact(function, artifactOptionsOf(source.filename, options));
}

}  // namespace ein::driver
