// einc: compiles a .ein model into an ein artifact (.einb).
//
//   einc MODEL.ein -o MODEL.einb [--weights W.safetensors|W.gguf|FOLDER ... | --random-weights SEED]
//        [--dim NAME=SIZE|NAME=MIN..MAX]... [--config NAME=VALUE]... [--target cpu|cuda] [--precision fp32|bf16|fp16|int8|int4] [--group-size 0|32]
//        [--print-ir-after-all] [--dump-ir DIR] [-q]
//   einc --hf CHECKPOINT_DIR -o MODEL.einb [...]  a Hugging Face folder through ein's model library
//   einc MODEL.ein --emit=mlir [-o MODEL.mlir]   the ein dialect from the front end
//   einc --hf CHECKPOINT_DIR --emit=ein [-o MODEL.ein]   the library's model file with the checkpoint's values
//   einc --version
//
// On success einc prints one line to stderr (what it wrote; -q: nothing); on
// a terminal, a compile that takes more than a second shows its progress on
// one line, erased when it ends.
#include <CLI/CLI.hpp>
#include <unistd.h>
#include <sys/ioctl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "compiler/driver/compiler.hpp"
#include "compiler/huggingface/checkpoint.hpp"
#include "compiler/weights/open_weights.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/schema/ein_artifact_generated.h"
#include "ir/ein/ein_dialect.hpp"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#ifndef EIN_VERSION
#error "EIN_VERSION (the project's version) is defined by compiler/CMakeLists.txt"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  std::string output;
  std::vector<std::string> weights;  // files and checkpoint folders, read as one
  std::optional<uint64_t> randomWeights;
  std::vector<std::string> dims;
  std::vector<std::string> configs;
  std::string checkpoint;  // --hf: a Hugging Face checkpoint folder
  std::string target = "cpu";
  std::string precision = "fp32";
  std::optional<int64_t> groupSize;
  std::string emit = "artifact";
  bool printIrAfterAll = false;
  std::string dumpIrDir;
  bool quiet = false;
};

// "13.2 MB": decimal units, as file managers show sizes.
std::string humanBytes(uint64_t bytes) {
  static const char *const kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(kUnits)) value /= 1000, ++unit;
  char text[32];
  if (unit == 0) std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

// "1.10 B", "3.3 M", "512": a parameter count.
std::string humanCount(uint64_t count) {
  char text[32];
  if (count >= 1000000000) std::snprintf(text, sizeof text, "%.2f B", count / 1e9);
  else if (count >= 1000000) std::snprintf(text, sizeof text, "%.1f M", count / 1e6);
  else if (count >= 10000) std::snprintf(text, sizeof text, "%.1f K", count / 1e3);
  else std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(count));
  return text;
}

// One line of progress on a terminal's stderr: the phase, and for the
// phases that move bytes, how many of how many. Drawn by a thread every
// 100 ms once the compile has taken a second, so a short compile shows
// nothing; erased (not left behind) whenever something else is printed and
// at the end.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled(enabled), start(Clock::now()) {
    if (enabled) ticker = std::thread([this] { tick(); });
  }
  ~Progress() { stop(); }

  void phase(std::string text) {
    std::lock_guard<std::mutex> lock(mutex);
    current = std::move(text);
    done = total = 0;
  }

  void bytes(uint64_t doneBytes, uint64_t totalBytes) {
    std::lock_guard<std::mutex> lock(mutex);
    done = doneBytes;
    total = totalBytes;
  }

  // Runs `print` with the line erased; it is drawn again at the next tick.
  template <typename Print>
  void printing(Print &&print) {
    std::lock_guard<std::mutex> lock(mutex);
    eraseLocked();
    print();
  }

  void stop() {
    if (!ticker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    ticker.join();
    std::lock_guard<std::mutex> lock(mutex);
    eraseLocked();
  }

 private:
  void tick() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(100));
      if (stopping || Clock::now() - start < std::chrono::seconds(1) || current.empty()) continue;
      drawLocked();
    }
  }

  void drawLocked() {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f s",
                  std::chrono::duration<double>(Clock::now() - start).count());
    std::string line = "einc: " + current;
    if (total > 0)
      line += " " + humanBytes(done) + " / " + humanBytes(total) + " (" +
              std::to_string(std::min<uint64_t>(100, done * 100 / total)) + "%)";
    line += " [" + std::string(seconds) + "]";
    // Never wider than the terminal: a wrapped line could not be erased.
    winsize size{};
    size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 80;
    if (line.size() >= width) line.resize(width - 1);
    if (drawn && line == shown) return;
    std::string text = "\r\x1b[K" + line;
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    drawn = true;
    shown = std::move(line);
  }

  void eraseLocked() {
    if (!drawn) return;
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
    drawn = false;
  }

  const bool enabled;
  const Clock::time_point start;
  std::mutex mutex;
  std::condition_variable wake;
  std::thread ticker;
  bool stopping = false;
  bool drawn = false;
  std::string current;
  std::string shown;  // the line on the terminal, while drawn
  uint64_t done = 0, total = 0;
};

// Located messages with their source line and caret; the others as "einc: ...".
void printDiagnostic(Progress &progress, const ein::driver::Diagnostic &diagnostic) {
  progress.printing([&] {
    if (diagnostic.rendered.empty()) llvm::errs() << "einc: " << diagnostic.message << "\n";
    else llvm::errs() << diagnostic.rendered;
    llvm::errs().flush();
  });
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

// A config value's text: true or false, an integer, a number, or else a
// string (quotes optional: hidden_act=silu).
ein::mlirgen::ConfigScalar parseConfigScalar(llvm::StringRef text) {
  int64_t integer = 0;
  double real = 0;
  if (text == "true" || text == "false") return text == "true";
  if (!text.getAsInteger(10, integer)) return integer;
  if (!text.getAsDouble(real)) return real;
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') return text.drop_front().drop_back().str();
  return text.str();
}

// NAME=VALUE sets a config: a value as parseConfigScalar reads it, or a list
// of them in brackets (--config layer_types=[full_attention,sliding_attention]).
std::optional<ein::mlirgen::ConfigValues> parseConfigOverrides(const std::vector<std::string> &configs) {
  ein::mlirgen::ConfigValues overrides;
  for (const std::string &config : configs) {
    size_t equals = config.find('=');
    if (equals == std::string::npos || equals == 0) {
      llvm::errs() << "einc: --config expects NAME=VALUE, got '" << config << "'\n";
      return std::nullopt;
    }
    llvm::StringRef text = llvm::StringRef(config).substr(equals + 1);
    ein::mlirgen::ConfigValue value;
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
      std::vector<ein::mlirgen::ConfigScalar> items;
      llvm::SmallVector<llvm::StringRef> parts;
      if (llvm::StringRef inside = text.drop_front().drop_back().trim(); !inside.empty())
        inside.split(parts, ',');
      for (llvm::StringRef part : parts) items.push_back(parseConfigScalar(part.trim()));
      value = std::move(items);
    } else {
      value = ein::mlirgen::configValueOf(parseConfigScalar(text));
    }
    overrides[config.substr(0, equals)] = std::move(value);
  }
  return overrides;
}

// The --dim or --config argument that names `name`, for the front end's
// "the model declares no dim 'NAME'" (or config), which has no place in the model.
std::string overrideArgument(const Options &options, const std::string &message) {
  llvm::StringRef rest(message);
  const bool dim = rest.consume_front("the model declares no dim '");
  if (!dim && !rest.consume_front("the model declares no config '")) return "";
  std::string name = rest.substr(0, rest.find('\'')).str();
  for (const std::string &given : dim ? options.dims : options.configs)
    if (llvm::StringRef(given).starts_with(name + "=")) return (dim ? "--dim " : "--config ") + given;
  return "";
}

bool writeFile(const std::string &path, const char *data, size_t size, Progress &progress) {
  std::ofstream out(path, std::ios::binary);
  // In pieces, so that a large artifact's writing shows its progress.
  constexpr size_t kPiece = size_t{64} << 20;
  for (size_t offset = 0; out && offset < size; offset += kPiece) {
    out.write(data + offset, static_cast<std::streamsize>(std::min(kPiece, size - offset)));
    progress.bytes(std::min(offset + kPiece, size), size);
  }
  out.close();
  if (out) return true;
  progress.printing([&] { llvm::errs() << "einc: cannot write " << path << "\n"; });
  return false;
}

// What the model declares: its parameters' count and elements.
struct ParameterTotals {
  uint64_t tensors = 0;
  uint64_t elements = 0;
};

ParameterTotals parameterTotals(mlir::ModuleOp module) {
  ParameterTotals totals;
  module.walk([&](ein::ir::ParamOp param) {
    ++totals.tensors;
    totals.elements += static_cast<uint64_t>(param.getType().getNumElements());
  });
  return totals;
}

// The bytes the parameter source will give: every parameter as declared.
uint64_t parameterBytes(mlir::ModuleOp module) {
  uint64_t bytes = 0;
  module.walk([&](ein::ir::ParamOp param) {
    bytes += static_cast<uint64_t>(param.getType().getNumElements()) *
             ((param.getType().getElementType().getIntOrFloatBitWidth() + 7) / 8);
  });
  return bytes;
}

// "einc: wrote enc.einb (13.2 MB) in 1.4 s: 58 steps, 3.3 M parameters in 72
// tensors (13.1 MB of weights), fp32, cpu".
std::string summary(const Options &options, int64_t groupSize, const ein::WrittenArtifact &artifact,
                    const ParameterTotals &parameters, double seconds) {
  const auto *model = ein::schema::GetSizePrefixedModel(artifact.header.data());
  char time[32];
  std::snprintf(time, sizeof time, "%.1f s", seconds);
  std::string line = "einc: wrote " + options.output + " (" + humanBytes(artifact.bytes) + ") in " + time + ": ";
  size_t steps = model->steps() ? model->steps()->size() : 0;
  line += std::to_string(steps) + " step" + (steps == 1 ? "" : "s") + ", ";
  if (parameters.tensors == 0) {
    line += "no parameters";
  } else {
    line += humanCount(parameters.elements) + " parameter" + (parameters.elements == 1 ? "" : "s") + " in " +
            std::to_string(parameters.tensors) + " tensor" + (parameters.tensors == 1 ? "" : "s");
  }
  line += " (" + humanBytes(model->weights_bytes()) + " of weights), " + options.precision +
          (groupSize ? " in groups of " + std::to_string(groupSize) : "") + ", " + options.target;
  if (options.randomWeights) line += ", random weights (seed " + std::to_string(*options.randomWeights) + ")";
  return line;
}

int compile(const Options &options) {
  const Clock::time_point start = Clock::now();
  auto overrides = parseDimOverrides(options.dims);
  if (!overrides) return 1;
  auto configs = parseConfigOverrides(options.configs);
  if (!configs) return 1;
  // --print-ir-after-all writes to stderr too: no progress line among the IR.
  Progress progress(!options.quiet && !options.printIrAfterAll && isatty(STDERR_FILENO));
  // Everything printed while the progress line may be shown goes through it.
  auto report = [&](const std::string &message) {
    progress.printing([&] { llvm::errs() << "einc: " << message << "\n"; });
  };
  auto sink = [&](const ein::driver::Diagnostic &diagnostic) {
    if (diagnostic.file.empty())
      if (std::string given = overrideArgument(options, diagnostic.message); !given.empty()) {
        ein::driver::Diagnostic prefixed = diagnostic;
        prefixed.message = given + ": " + diagnostic.message;
        return printDiagnostic(progress, prefixed);
      }
    printDiagnostic(progress, diagnostic);
  };
  ein::driver::PipelineOptions pipeline{*ein::driver::parseTarget(options.target),
                                        *ein::driver::parsePrecision(options.precision), options.printIrAfterAll,
                                        options.dumpIrDir};
  pipeline.beforePass = [&](llvm::StringRef pass) { progress.phase("running " + pass.str()); };

  // A checkpoint folder: the library's model file for its architecture, with
  // config.json's values under those given with --dim and --config, and
  // its weights unless others are given.
  std::optional<ein::huggingface::Checkpoint> checkpoint;
  std::vector<std::string> weights = options.weights;
  if (!options.checkpoint.empty()) {
    auto read = ein::huggingface::readCheckpoint(options.checkpoint);
    if (!read) {
      report(llvm::toString(read.takeError()));
      return 1;
    }
    checkpoint = std::move(*read);
    for (const auto &[name, range] : checkpoint->dims) overrides->try_emplace(name, range);
    for (const auto &[name, value] : checkpoint->configs) configs->try_emplace(name, value);
    if (weights.empty() && !options.randomWeights) weights.push_back(options.checkpoint);
    if (options.emit == "ein") {
      const std::string text = ein::huggingface::modelTextWithValues(*checkpoint, *overrides, *configs);
      if (options.output.empty()) {
        llvm::outs() << text;
        return 0;
      }
      return writeFile(options.output, text.data(), text.size(), progress) ? 0 : 1;
    }
  }
  const std::string modelName = checkpoint ? checkpoint->source.filename : options.model;
  progress.phase("parsing " + modelName);
  auto source = checkpoint ? std::optional(checkpoint->source) : ein::driver::readModelFile(options.model, sink);
  if (!source) return 1;
  ein::driver::Compilation compilation(std::move(*source), sink);
  mlir::OwningOpRef<mlir::ModuleOp> module = compilation.frontEnd(*overrides, *configs);
  if (!module) return 1;
  if (options.emit == "mlir") {
    if (options.output.empty()) {
      progress.stop();
      module->print(llvm::outs());
      return 0;
    }
    std::string text;
    llvm::raw_string_ostream stream(text);
    module->print(stream);
    stream.flush();
    if (!writeFile(options.output, text.data(), text.size(), progress)) return 1;
    progress.stop();
    if (!options.quiet) llvm::errs() << "einc: wrote " << options.output << " (" << humanBytes(text.size()) << ")\n";
    return 0;
  }
  if (options.output.empty()) {
    report("no output file: pass -o MODEL.einb (or --emit=mlir)");
    return 1;
  }
  // A model without parameters needs no weights; one with them needs a source.
  const bool noSource = weights.empty() && !options.randomWeights;
  if (std::optional<std::string> missing = ein::driver::parametersWithoutSource(*module, !noSource)) {
    report(modelName + " " + *missing + ": give them with --weights FILE.safetensors or --random-weights SEED");
    return 1;
  }
  const ParameterTotals parameters = parameterTotals(*module);

  // The parameters' source (safetensors or GGUF files, each told by its
  // first bytes, or a checkpoint folder), opened and checked against the
  // declarations before the passes run, so that a wrong file or a missing
  // parameter is reported at once.
  std::unique_ptr<ein::SafetensorsParams> weightsFile;
  ein::ParamProvider params;
  if (!weights.empty()) {
    auto opened = ein::weights::openWeights(weights, checkpoint ? checkpoint->baseModelPrefix : "");
    if (!opened) {
      report(llvm::toString(opened.takeError()));
      return 1;
    }
    weightsFile = std::make_unique<ein::SafetensorsParams>(std::move(*opened));
    if (mlir::failed(weightsFile->checkParameters(*module))) return 1;
    params = weightsFile->provider();
  } else {
    // Drawn by how the model uses each parameter (norm weights 1, biases 0, ...).
    params = ein::randomParams(options.randomWeights.value_or(0), ein::paramInitsFromUses(*module));
  }
  // A file's weights stored as declared are bound in place now; values made
  // from a file's (converted, dequantized) or drawn at random are made as the
  // passes and the writer read them, one parameter at a time.
  progress.phase(weightsFile ? "reading weights" : "binding random weights");
  const uint64_t totalBytes = parameterBytes(*module);
  auto bound = [&](uint64_t bytes) { progress.bytes(bytes, std::max(totalBytes, bytes)); };
  if (mlir::failed(ein::bindParameters(*module, params, bound,
                                       weightsFile ? weightsFile->binding() : ein::ParamBinding::OnDemand)))
    return 1;

  progress.phase("running passes");
  pipeline.groupSize = ein::driver::groupSizeFor(pipeline.precision, options.groupSize, weightsFile.get());
  if (mlir::failed(compilation.runPipeline(*module, pipeline))) return 1;

  // Written beside the output and renamed over it once whole, so that a
  // failure leaves no partial artifact.
  progress.phase("writing " + options.output);
  const std::string partial = options.output + ".partial";
  std::error_code error;
  llvm::raw_fd_ostream file(partial, error);
  if (error) {
    progress.printing([&] { llvm::errs() << "einc: cannot write " << options.output << ": " << error.message() << "\n"; });
    return 1;
  }
  auto artifact = compilation.writeArtifact(*module, pipeline, file);
  file.close();
  if (mlir::failed(artifact) || file.has_error() || llvm::sys::fs::rename(partial, options.output)) {
    if (mlir::succeeded(artifact))
      progress.printing([&] { llvm::errs() << "einc: cannot write " << options.output << "\n"; });
    file.clear_error();
    llvm::sys::fs::remove(partial);
    return 1;
  }
  if (weightsFile)
    for (const std::string &name : weightsFile->unusedTensors())
      progress.printing([&] {
        llvm::errs() << weightsFile->pathOf(name) << ": warning: tensor \"" << name
                     << "\" is not a parameter of the model\n";
      });
  progress.stop();
  if (!options.quiet)
    llvm::errs() << summary(options, pipeline.groupSize, *artifact, parameters,
                            std::chrono::duration<double>(Clock::now() - start).count())
                 << "\n";
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"einc: compiles a .ein model into an ein artifact (.einb)", "einc"};
  Options options;
  app.set_version_flag("--version", std::string("einc ") + EIN_VERSION, "print einc's version and exit");
  auto *model = app.add_option("model", options.model, "the model (.ein)");
  auto *checkpoint = app.add_option("--hf", options.checkpoint,
                                    "a Hugging Face checkpoint folder (config.json, safetensors weights) instead of a "
                                    "model: the model file of ein's library for its architecture, sized and configured "
                                    "by config.json, with the folder's weights unless --weights gives others");
  model->excludes(checkpoint);
  app.add_option("-o,--output", options.output, "the artifact to write (.einb); with --emit=mlir, the .mlir file");
  auto *weights = app.add_option("--weights", options.weights,
                                 "parameters: a .safetensors file under PyTorch state_dict names, a Llama's .gguf "
                                 "from llama.cpp (F32, F16, BF16, Q8_0, Q4_0, Q4_K or Q6_K tensors, read under Hugging "
                                 "Face's names), or a checkpoint folder (model.safetensors.index.json and its shards, "
                                 "model.safetensors, or *.safetensors); repeatable: the tensors of every file, each "
                                 "in one only")
                      // One value per --weights, so that `--weights W MODEL.ein` leaves the model positional.
                      ->allow_extra_args(false);
  auto *random = app.add_option("--random-weights", options.randomWeights,
                                "random parameters from SEED (for benchmarks), initialised by their use as PyTorch does");
  weights->excludes(random);
  // One value per option, so that `--dim d=2 MODEL.ein` leaves the model positional.
  app.add_option("--dim", options.dims, "override a dim: NAME=SIZE, or NAME=MIN..MAX for a range (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--config", options.configs,
                 "set a config the model declares: NAME=VALUE with true/false, a number or a string (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--target", options.target, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", options.precision,
                 "fp32 (default); bf16: bf16 gemm weights and bf16 gemm/attention arithmetic with f32 accumulation "
                 "(cpu and cuda); fp16: as bf16 in fp16 (cuda only); int8: gemm weights as int8 with a scale per output "
                 "channel, gemm inputs quantized per row at run time, int32 sums (cpu only); int4: gemm weights as int4 "
                 "with an f16 scale per group of 32 along k (llama.cpp's q4_0), gemm inputs quantized per group of 32 "
                 "(cpu only)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "int8", "int4"}));
  app.add_option("--group-size", options.groupSize,
                 "32: int8 gemm weights with an f16 scale per group of 32 along k (llama.cpp's q8_0: holds a q8_0 "
                 "file's values exactly; about 2/3 the logit error of a scale per channel, 6% more bytes), gemm "
                 "inputs quantized per group of 32; 0: int8's scale per output channel (cpu only; default: 32 for "
                 "weights holding q8_0 tensors, else 0; int4 always takes groups of 32)");
  app.add_option("--emit", options.emit,
                 "artifact (default); mlir: the ein dialect from the front end; ein (with --hf): the model file chosen "
                 "for the checkpoint with its values written in; to stdout or -o")
      ->check(CLI::IsMember({"artifact", "mlir", "ein"}));
  app.add_flag("--print-ir-after-all", options.printIrAfterAll, "print the IR after every pass to stderr");
  app.add_option("--dump-ir", options.dumpIrDir, "write the IR before the first pass and after each to DIR");
  app.add_flag("-q,--quiet", options.quiet, "print nothing on success (no summary line, no progress)");
  CLI11_PARSE(app, argc, argv);
  if (options.model.empty() == options.checkpoint.empty()) {
    llvm::errs() << "einc: give a model (MODEL.ein) or a checkpoint folder (--hf DIR)\n";
    return 1;
  }
  if (options.emit == "ein" && options.checkpoint.empty()) {
    llvm::errs() << "einc: --emit=ein writes the model file chosen for a checkpoint: give --hf DIR\n";
    return 1;
  }
  return compile(options);
}
