// einc: compiles a .ein model into an ein artifact (.einb).
//
//   einc MODEL.ein -o MODEL.einb [--weights W.safetensors | --random-weights SEED]
//        [--dim NAME=SIZE|NAME=MIN..MAX]... [--target cpu|cuda] [--precision fp32|bf16|fp16|int8]
//        [--print-ir-after-all] [--dump-ir DIR]
//   einc MODEL.ein --emit=mlir      prints the ein dialect from the front end
#include <CLI/CLI.hpp>
#include <fstream>

#include "driver/Compiler.h"
#include "llvm/Support/raw_ostream.h"
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

// Located messages with their source line and caret; the others as "einc: ...".
void printDiagnostic(const ein::driver::Diagnostic &diagnostic) {
  if (diagnostic.rendered.empty()) llvm::errs() << "einc: " << diagnostic.message << "\n";
  else llvm::errs() << diagnostic.rendered;
}

// NAME=SIZE pins a dim; NAME=MIN..MAX makes it a range.
std::optional<ein::DimRanges> parseDimOverrides(const std::vector<std::string> &dims) {
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
      return std::nullopt;
    }
    overrides[dim.substr(0, equals)] = range;
  }
  return overrides;
}

// The parameters' source: seeded random values or a safetensors file, which
// `safetensors` keeps open (and whose unused tensors it remembers).
std::optional<ein::ParamBytesProvider> openParams(const Options &options,
                                                  std::unique_ptr<ein::SafetensorsParams> &safetensors) {
  if (options.randomWeights) return ein::randomParams(*options.randomWeights);
  auto opened = ein::weights::SafetensorsFile::open(options.weights);
  if (!opened) {
    llvm::errs() << "einc: " << llvm::toString(opened.takeError()) << "\n";
    return std::nullopt;
  }
  safetensors = std::make_unique<ein::SafetensorsParams>(std::move(*opened));
  return safetensors->provider();
}

bool writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (out) return true;
  llvm::errs() << "einc: cannot write " << path << "\n";
  return false;
}

int compile(const Options &options) {
  auto overrides = parseDimOverrides(options.dims);
  if (!overrides) return 1;
  ein::driver::PipelineOptions pipeline{*ein::driver::parseTarget(options.target),
                                        *ein::driver::parsePrecision(options.precision), options.printIrAfterAll,
                                        options.dumpIrDir};
  auto source = ein::driver::readModelFile(options.model, printDiagnostic);
  if (!source) return 1;
  ein::driver::Compilation compilation(std::move(*source), printDiagnostic);

  mlir::OwningOpRef<mlir::ModuleOp> module = compilation.frontEnd(*overrides);
  if (!module) return 1;
  if (options.emit == "mlir") {
    module->print(llvm::outs());
    return 0;
  }
  if (options.output.empty()) {
    llvm::errs() << "einc: no output file: pass -o MODEL.einb (or --emit=mlir)\n";
    return 1;
  }
  // A model without parameters needs no weights; one with them needs a source.
  const bool noSource = options.weights.empty() && !options.randomWeights;
  if (std::optional<std::string> missing = ein::driver::parametersWithoutSource(*module, !noSource)) {
    llvm::errs() << "einc: " << options.model << " " << *missing
                 << ": give them with --weights FILE.safetensors or --random-weights SEED\n";
    return 1;
  }
  if (mlir::failed(compilation.runPipeline(*module, pipeline))) return 1;

  std::unique_ptr<ein::SafetensorsParams> safetensors;
  auto params =
      noSource ? std::optional<ein::ParamBytesProvider>(ein::randomParams(0)) : openParams(options, safetensors);
  if (!params) return 1;
  auto artifact = compilation.writeArtifact(*module, *params, pipeline);
  if (mlir::failed(artifact)) return 1;
  if (safetensors)
    for (const std::string &name : safetensors->unusedTensors())
      llvm::errs() << options.weights << ": warning: tensor \"" << name << "\" is not a parameter of the model\n";
  return writeFile(options.output, *artifact) ? 0 : 1;
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
                 "(cpu and cuda); fp16: as bf16 in fp16 (cuda only); int8: gemm weights as int8 with a scale per output "
                 "channel, gemm inputs quantized per row at run time, int32 sums (cpu only)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8"}));
  app.add_option("--emit", options.emit, "artifact (default) or mlir: print the ein dialect from the front end")
      ->check(CLI::IsMember({"artifact", "mlir"}));
  app.add_flag("--print-ir-after-all", options.printIrAfterAll, "print the IR after every pass to stderr");
  app.add_option("--dump-ir", options.dumpIrDir, "write the IR before the first pass and after each to DIR");
  CLI11_PARSE(app, argc, argv);
  return compile(options);
}
