// ein.compile's native half: the compiler library (compiler/driver) on a
// model's text, with weights from safetensors or GGUF files or checkpoint
// folders, from arrays handed over in memory, or seeded random values.
#include "compile.hpp"

#include <set>

#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>
#include <utility>

#include "arrays.hpp"
#include "compiler/driver/compiler.hpp"
#include "compiler/driver/ir_graph.hpp"
#include "compiler/frontend/parser.hpp"
#include "compiler/huggingface/checkpoint.hpp"
#include "compiler/weights/open_weights.hpp"
#include "compiler/weights/param_sources.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace ein::python {
namespace {

// A weight of a name -> array mapping, imported (NumPy, DLPack or the buffer
// protocol) and checked to have a safetensors dtype.
std::pair<AnyArray, std::string> importWeight(const std::string &name, nb::handle value) {
  AnyArray array;
  if (!nb::try_cast(value, array))
    throw PythonError("TypeError", "weight \"" + name + "\" is a " + nb::cast<std::string>(nb::type_name(value.type())) +
                                       ", not a CPU array (NumPy, DLPack or the buffer protocol)");
  std::optional<std::string> dtype = safetensorsDType(array.dtype());
  if (!dtype)
    throw PythonError("TypeError", "weight \"" + name + "\" has dtype " + dtypeText(array.dtype()) +
                                       ", which safetensors cannot hold");
  return {array, *dtype};
}

// Named arrays as the compiler's weights, read where they lie: the compiler's
// safetensors reader checks them as it checks a file's entries, with no file
// image built around them. `arrays` holds (name, array) pairs; `held` keeps
// every array referenced, and `copies` the C-order copy of each one that is
// not C-contiguous, until compiling ends (both are released with the GIL held).
std::vector<weights::TensorInMemory> tensorsFromArrays(nb::list arrays, std::vector<AnyArray> &held,
                                                       std::vector<std::vector<std::byte>> &copies) {
  std::vector<weights::TensorInMemory> tensors;
  for (nb::handle item : arrays) {
    std::string name = nb::cast<std::string>(item[0]);
    auto [array, dtype] = importWeight(name, item[1]);
    const auto *data = static_cast<const uint8_t *>(array.data());
    if (!isCContiguous(array)) {
      copies.emplace_back(array.nbytes());
      copyInCOrder(array, copies.back().data());
      data = reinterpret_cast<const uint8_t *>(copies.back().data());
    }
    tensors.push_back({std::move(name), *weights::parseDType(dtype), shapeOf(array), {data, array.nbytes()}});
    held.push_back(std::move(array));
  }
  return tensors;
}

// What the model text declares, for messages in the caller's words before
// (and after) compiling: its dims in order with their kind ("fixed",
// "ranged", "position"), and per input the fixed dim named by each axis.
struct Declarations {
  std::vector<std::pair<std::string, std::string>> dims;
  InputAxisDims inputAxisDims;
};

void collectDeclarations(const std::vector<frontend::StmtPtr> &statements, Declarations &declared,
                         std::set<std::string> &dims, std::vector<const frontend::InputDecl *> &inputs) {
  namespace ast = frontend;
  for (const ast::StmtPtr &statement : statements) {
    switch (statement->kind) {
      case ast::Stmt::Kind::Dim: {
        const auto &decl = static_cast<const ast::DimDecl &>(*statement);
        for (const auto &entry : decl.entries) {
          declared.dims.emplace_back(entry.name, decl.position ? "position" : entry.max ? "ranged" : "fixed");
          dims.insert(entry.name);
        }
        break;
      }
      case ast::Stmt::Kind::Input: inputs.push_back(static_cast<const ast::InputDecl *>(statement.get())); break;
      case ast::Stmt::Kind::Def:
        collectDeclarations(static_cast<const ast::Def &>(*statement).body, declared, dims, inputs);
        break;
      case ast::Stmt::Kind::For:
        collectDeclarations(static_cast<const ast::For &>(*statement).body, declared, dims, inputs);
        break;
      case ast::Stmt::Kind::If:
        for (const auto &branch : static_cast<const ast::If &>(*statement).branches)
          collectDeclarations(branch.body, declared, dims, inputs);
        break;
      default: break;
    }
  }
}

// Null when the text does not parse (the compiler reports why).
std::optional<Declarations> declarationsOf(std::string_view text) {
  namespace ast = frontend;
  ast::ParseResult parsed = ast::parse(text);
  if (!parsed.diagnostics.empty() || !parsed.module) return std::nullopt;
  Declarations declared;
  std::set<std::string> dims;
  std::vector<const ast::InputDecl *> inputs;
  collectDeclarations(parsed.module->statements, declared, dims, inputs);
  for (const ast::InputDecl *input : inputs) {
    bool plain = true;  // `input past.{i}.key` has no one name
    for (const ast::NameSegment &segment : input->name.segments)
      plain = plain && segment.kind != ast::NameSegment::Kind::Interpolation;
    if (!plain) continue;
    std::vector<std::string> axes;
    bool any = false;
    for (const ast::ExprPtr &size : input->type.dims) {
      std::string dim;
      if (size->kind == ast::Expr::Kind::Name) {
        const ast::Name &name = static_cast<const ast::NameExpr &>(*size).name;
        if (name.segments.size() == 1 && name.segments[0].kind == ast::NameSegment::Kind::Identifier) {
          // Named whether fixed or ranged: the message uses it only on an axis
          // the artifact fixes (a ranged dim that dims= pinned included).
          if (dims.count(name.segments[0].text)) dim = name.segments[0].text;
        }
      }
      any = any || !dim.empty();
      axes.push_back(std::move(dim));
    }
    if (any) declared.inputAxisDims[input->name.str()] = std::move(axes);
  }
  return declared;
}

// _ein.declared_dims(text): [(name, kind)] or None when the text does not parse.
std::optional<std::vector<std::pair<std::string, std::string>>> declaredDims(const std::string &text) {
  std::optional<Declarations> declared = declarationsOf(text);
  if (!declared) return std::nullopt;
  return std::move(declared->dims);
}

nb::tuple diagnosticTuple(const driver::Diagnostic &diagnostic) {
  static const char *const kSeverities[] = {"error", "warning", "note", "remark"};
  return nb::make_tuple(kSeverities[static_cast<int>(diagnostic.severity)], diagnostic.file, diagnostic.line,
                        diagnostic.column, diagnostic.message, diagnostic.rendered);
}

// What a compilation produced, handed back to Python once the GIL is held.
struct Outcome {
  std::optional<std::vector<uint8_t>> artifact;
  std::vector<driver::Diagnostic> diagnostics;
  std::vector<std::string> unusedWeights;
};

struct Request {
  driver::ModelSource source;
  std::optional<std::vector<std::string>> weightsPaths;  // files and checkpoint folders
  std::optional<std::vector<weights::TensorInMemory>> weightsInMemory;
  std::optional<uint64_t> randomSeed;
  DimRanges dims;
  mlirgen::ConfigValues configs;
  std::string baseModelPrefix;  // a checkpoint's (huggingface::Checkpoint)
  std::string target;
  std::string precision;
  std::optional<int64_t> groupSize;
  std::string dumpIr;
};

// The parameters' source, as einc opens it (safetensors or GGUF files, each
// told by its first bytes, or checkpoint folders); null after a reported
// error.
std::unique_ptr<SafetensorsParams> openWeights(Request &request, const driver::Compilation &compilation) {
  if (request.weightsInMemory) {
    auto tensors = weights::SafetensorsFile::fromTensors(std::move(*request.weightsInMemory), "weights");
    if (!tensors) {
      compilation.error(llvm::toString(tensors.takeError()));
      return nullptr;
    }
    return std::make_unique<SafetensorsParams>(std::move(*tensors));
  }
  auto opened = weights::openWeights(*request.weightsPaths, request.baseModelPrefix);
  if (!opened) {
    compilation.error(llvm::toString(opened.takeError()));
    return nullptr;
  }
  return std::make_unique<SafetensorsParams>(std::move(*opened));
}

// einc's steps (compiler/tools/einc.cpp) with the diagnostics collected.
Outcome compileRequest(Request request) {
  Outcome outcome;
  driver::DiagnosticSink sink = [&](const driver::Diagnostic &diagnostic) { outcome.diagnostics.push_back(diagnostic); };
  driver::Compilation compilation(std::move(request.source), sink);
  std::optional<ArtifactTarget> target = driver::parseTarget(request.target);
  std::optional<ArtifactPrecision> precision = driver::parsePrecision(request.precision);
  if (!target || !precision) {
    compilation.error(!target ? "target must be \"cpu\" or \"cuda\", got \"" + request.target + "\""
                              : "precision must be \"fp32\", \"bf16\", \"fp16\", \"int8\" or \"int4\", got \"" + request.precision + "\"");
    return outcome;
  }
  driver::PipelineOptions options;
  options.target = *target;
  options.precision = *precision;
  options.dumpIrDir = request.dumpIr;
  mlir::OwningOpRef<mlir::ModuleOp> module = compilation.frontEnd(request.dims, request.configs);
  if (!module) return outcome;
  std::unique_ptr<SafetensorsParams> weightsFile;
  ParamProvider params;
  const bool noSource = !request.randomSeed && !request.weightsInMemory && !request.weightsPaths;
  if (std::optional<std::string> missing = driver::parametersWithoutSource(*module, !noSource)) {
    compilation.error("the model " + *missing + ": give them as weights=... or random_weights=SEED");
    return outcome;
  }
  // As einc: the source opened and its names checked before the passes; random
  // values drawn by how the model uses each parameter, so a seed gives einc's.
  if (request.randomSeed || noSource) {
    params = randomParams(request.randomSeed.value_or(0), paramInitsFromUses(*module));
  } else {
    weightsFile = openWeights(request, compilation);
    if (!weightsFile || mlir::failed(weightsFile->checkParameters(*module))) return outcome;
    params = weightsFile->provider();
  }
  if (mlir::failed(bindParameters(*module, params, {}, weightsFile ? weightsFile->binding() : ParamBinding::OnDemand)))
    return outcome;
  options.groupSize = driver::groupSizeFor(options.precision, request.groupSize, weightsFile.get());
  if (mlir::failed(compilation.runPipeline(*module, options))) return outcome;
  auto artifact = compilation.writeArtifact(*module, options);
  if (mlir::failed(artifact)) return outcome;
  outcome.artifact = std::move(*artifact);
  if (weightsFile) outcome.unusedWeights = weightsFile->unusedTensors();
  return outcome;
}

nb::tuple compileModel(std::string text, std::string filename, std::optional<std::vector<std::string>> weightsPaths,
                       std::optional<nb::list> weightArrays, std::optional<uint64_t> randomSeed,
                       std::map<std::string, std::pair<int64_t, int64_t>> dims, mlirgen::ConfigValues configs,
                       std::string baseModelPrefix, std::string target, std::string precision, std::optional<int64_t> groupSize,
                       std::string dumpIr, int threads, std::optional<std::string> device) {
  std::string modelName = filename;  // the loaded model's name, as the artifact's source
  std::optional<Declarations> declared = declarationsOf(text);
  DimRanges ranges;  // min == max pins a dim
  for (const auto &[name, range] : dims) ranges[name] = {range.first, range.second};
  Request request{{std::move(text), std::move(filename)},
                  std::move(weightsPaths),
                  std::nullopt,
                  randomSeed,
                  std::move(ranges),
                  std::move(configs),
                  std::move(baseModelPrefix),
                  std::move(target),
                  std::move(precision),
                  groupSize,
                  std::move(dumpIr)};
  std::vector<AnyArray> heldArrays;  // outlive the compilation, released with the GIL held
  std::vector<std::vector<std::byte>> arrayCopies;
  if (weightArrays) request.weightsInMemory = tensorsFromArrays(*weightArrays, heldArrays, arrayCopies);
  Outcome outcome;
  {
    nb::gil_scoped_release released;
    outcome = compileRequest(std::move(request));
  }
  nb::list diagnostics;
  for (const driver::Diagnostic &diagnostic : outcome.diagnostics) diagnostics.append(diagnosticTuple(diagnostic));
  nb::object model = nb::none();
  if (outcome.artifact)
    model = nb::cast(PyModel::fromArtifact(*outcome.artifact, modelName, threads, device,
                                           declared ? std::move(declared->inputAxisDims) : InputAxisDims()));
  return nb::make_tuple(model, diagnostics, outcome.unusedWeights);
}

// _ein.read_checkpoint(folder) -> (error, None) or ("", (text, filename,
// architecture, dims, configs, base model prefix)): the library's model file
// for the folder's architecture and config.json's values of its dims and configs.
nb::tuple readCheckpoint(const std::string &folder) {
  auto checkpoint = huggingface::readCheckpoint(folder);
  if (!checkpoint) return nb::make_tuple(llvm::toString(checkpoint.takeError()), nb::none());
  std::map<std::string, std::pair<int64_t, int64_t>> dims;
  for (const auto &[name, range] : checkpoint->dims) dims[name] = {range.min, range.max};
  return nb::make_tuple(std::string(),
                       nb::make_tuple(checkpoint->source.text, checkpoint->source.filename, checkpoint->architecture,
                                      dims, checkpoint->configs, checkpoint->baseModelPrefix));
}

// _ein.checkpoint_text(folder, dims, configs) -> (error, text): einc --hf
// FOLDER --emit=ein.
nb::tuple checkpointText(const std::string &folder, std::map<std::string, std::pair<int64_t, int64_t>> dims,
                         mlirgen::ConfigValues configs) {
  auto checkpoint = huggingface::readCheckpoint(folder);
  if (!checkpoint) return nb::make_tuple(llvm::toString(checkpoint.takeError()), nb::none());
  DimRanges ranges;
  for (const auto &[name, range] : dims) ranges[name] = {range.first, range.second};
  return nb::make_tuple(std::string(), huggingface::modelTextWithValues(*checkpoint, ranges, configs));
}

}  // namespace

void bindCompile(nb::module_ &module) {
  module.def("read_checkpoint", &readCheckpoint, nb::arg("folder"),
             "A Hugging Face checkpoint folder's model: (error, None) or (\"\", (text, filename, architecture, "
             "dims, configs)).");
  module.def("checkpoint_text", &checkpointText, nb::arg("folder"), nb::arg("dims"), nb::arg("configs"),
             "The library's model file for a checkpoint folder with its values written in: (error, text).");
  module.def("compile_model", &compileModel, nb::arg("text"), nb::arg("filename"), nb::arg("weights_paths").none(),
             nb::arg("weight_arrays").none(), nb::arg("random_seed").none(), nb::arg("dims"), nb::arg("configs"),
             nb::arg("base_model_prefix"), nb::arg("target"),
             nb::arg("precision"), nb::arg("group_size").none(), nb::arg("dump_ir"), nb::arg("threads"), nb::arg("device").none(),
             "Compiles a model's text; returns (model or None, diagnostics, unused weight names).");
  module.def(
      "ir_graph",
      [](const std::string &text, const std::string &name) {
        auto graph = irGraphJson(text, name);
        if (auto *error = std::get_if<IrGraphError>(&graph)) throw PythonError("ValueError", error->message);
        return std::get<std::string>(std::move(graph));
      },
      nb::arg("text"), nb::arg("name"), "Model Explorer's graph JSON of a .mlir module (an einc --dump-ir file).");
  module.def("declared_dims", &declaredDims, nb::arg("text"),
             "The dims a model's text declares, [(name, \"fixed\" | \"ranged\" | \"position\")], or None when "
             "it does not parse.");
}

}  // namespace ein::python
