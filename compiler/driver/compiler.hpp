// The compiler as a library: what einc does between reading a model and
// writing its artifact, for einc and for the Python package (python/), which
// must report the same located errors and write the same bytes.
//
//   ein::driver::Compilation compilation(std::move(source), sink);
//   auto module = compilation.frontEnd(dims);               // ein dialect, or null
//   if (!module || failed(bindParameters(*module, params))) ...  // weights enter the IR
//   if (failed(compilation.runPipeline(*module, options))) ...
//   auto artifact = compilation.writeArtifact(*module, options);
//
// Every error goes to the DiagnosticSink, located (file:line:col) where the
// model has a place for it; nothing is printed except --print-ir-after-all's IR.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/artifact/artifact.hpp"
#include "compiler/mlirgen/mlirgen.hpp"
#include "ir/ein/size.hpp"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace ein {
class SafetensorsParams;
}  // namespace ein

namespace ein::driver {

enum class Severity { Error, Warning, Note, Remark };

// One message of a compilation.
struct Diagnostic {
  Severity severity = Severity::Error;
  // Where in the model: empty file (and zeros) when the message has no place,
  // e.g. an unreadable file or an option.
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
  std::string message;
  // As einc prints it: "file:line:col: error: message", the source line and
  // a caret, and any notes; empty for messages without a place.
  std::string rendered;
};

using DiagnosticSink = std::function<void(const Diagnostic &)>;

// A model's text and the name that locations and the artifact give it.
struct ModelSource {
  std::string text;
  std::string filename;
};

// Reads the model at `path`; an unreadable file, or one that is not a text
// model (notModelText), is reported to `sink`.
std::optional<ModelSource> readModelFile(const std::string &path, const DiagnosticSink &sink);

// Why `bytes`, the contents of `path`, are no .ein model: an ein artifact,
// weights (safetensors, GGUF), a .npy array or another binary, told by their
// first bytes (schemas/file_kind.hpp), or text that is not UTF-8 or holds
// control characters (located); nullopt for a text model.
std::optional<std::string> notModelText(const std::string &path, llvm::StringRef bytes);

// "cpu"/"cuda" and "fp32"/"bf16"/"fp16"/"int8"/"int4", as einc --target and --precision spell them.
std::optional<ArtifactTarget> parseTarget(llvm::StringRef name);
std::optional<ArtifactPrecision> parsePrecision(llvm::StringRef name);
const char *precisionName(ArtifactPrecision precision);  // parsePrecision's inverse

// A model without parameters needs no weights. For one with parameters but no
// source of them: "declares N parameters ("first.name" first)", to which
// einc and ein.compile add how to give them; nullopt otherwise.
std::optional<std::string> parametersWithoutSource(mlir::ModuleOp module, bool haveSource);

// The group size of a compile (PipelineOptions::groupSize): the one given
// (einc --group-size, ein.compile's group_size), else 32 at int8 when the
// weights hold llama.cpp Q8_0 blocks, whose values that keeps, else 0.
int64_t groupSizeFor(ArtifactPrecision precision, std::optional<int64_t> given, const SafetensorsParams *weights);

struct PipelineOptions {
  ArtifactTarget target = ArtifactTarget::Cpu;
  ArtifactPrecision precision = ArtifactPrecision::Fp32;
  // Print the IR after every pass to stderr (einc --print-ir-after-all).
  bool printIrAfterAll = false;
  // Write the IR before the first pass and after each to DIR/NN-pass.mlir.
  std::string dumpIrDir;
  // Horizontal GEMM fusion (ein-fuse-parallel-linears); off only in tests
  // that compare a model with and without it.
  bool fuseParallelLinears = true;
  // Called with each pass's name (its argument, as --dump-ir names the
  // files) before the pass runs: einc's progress line.
  std::function<void(llvm::StringRef pass)> beforePass;
  // Quantized weights' scales (einc --group-size): 0, int8's one per output
  // column; 32, one per group of 32 along k (int4's only layout, and int8's
  // as llama.cpp's q8_0).
  int64_t groupSize = 0;
};

// One model on its way to an artifact: an MLIR context, the source text for
// diagnostics and the module. Not thread-safe; one compilation per thread.
class Compilation {
 public:
  Compilation(ModelSource source, DiagnosticSink sink);
  ~Compilation();
  Compilation(const Compilation &) = delete;
  Compilation &operator=(const Compilation &) = delete;

  // Parses the model and builds the ein dialect; `dims` replaces dim values
  // (einc --dim), `configs` configs' values (einc --config). Null after a
  // reported error.
  mlir::OwningOpRef<mlir::ModuleOp> frontEnd(const ein::DimRanges &dims, const mlirgen::ConfigValues &configs = {});
  // The compiler's passes, ein -> kern -> planned memory.
  mlir::LogicalResult runPipeline(mlir::ModuleOp module, const PipelineOptions &options);
  // The artifact of the planned module, its parameters bound: written to
  // `out` (a file), or in memory.
  mlir::FailureOr<WrittenArtifact> writeArtifact(mlir::ModuleOp module, const PipelineOptions &options,
                                                 llvm::raw_pwrite_stream &out);
  mlir::FailureOr<std::vector<uint8_t>> writeArtifact(mlir::ModuleOp module, const PipelineOptions &options);

  // Report a message without a place in the model.
  void error(const std::string &message) const;
  void warning(const std::string &message) const;

 private:
  class DiagnosticCapture;

  ModelSource source;
  DiagnosticSink sink;
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::unique_ptr<DiagnosticCapture> capture;
};

}  // namespace ein::driver
