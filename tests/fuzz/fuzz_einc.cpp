// libFuzzer target: the whole of einc on small models, in process: front
// end, MLIR generation, every pass, the artifact writer (random weights), and
// then the runtime, which must accept what einc wrote and run it.
//
// Besides crashes, it traps on what the user must never see: an error that
// is not located in the model file, an op verifier's message (an internal
// error: the front end must have reported the problem in the user's terms),
// or an artifact from einc that the runtime refuses.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "compiler/artifact/artifact.hpp"
#include "compiler/mlirgen/mlirgen.hpp"
#include "compiler/pipeline/pipeline.hpp"
#include "compiler/weights/param_sources.hpp"
#include "ein/runtime.hpp"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

namespace {

// Models beyond these are compiled but not written or run, so that each
// input takes milliseconds (a fuzzer soon writes `dim n = 99999`).
constexpr int64_t kMaxWrittenParamElements = int64_t{1} << 16;
constexpr uint64_t kMaxRunBytes = uint64_t{16} << 20;

bool locatedInModel(mlir::Location location) {
  if (mlir::isa<mlir::FileLineColLoc>(location)) return true;
  if (auto fused = mlir::dyn_cast<mlir::FusedLoc>(location))
    return llvm::any_of(fused.getLocations(), locatedInModel);
  if (auto named = mlir::dyn_cast<mlir::NameLoc>(location)) return locatedInModel(named.getChildLoc());
  if (auto callSite = mlir::dyn_cast<mlir::CallSiteLoc>(location)) return locatedInModel(callSite.getCallee());
  return false;
}

// An op verifier's message starts with the op's quoted name: "'ein.einsum' op ...".
bool isVerifierMessage(const std::string &message) {
  // "'kern.gemm' op ...": a quoted op name, then " op". (A model's own text
  // may be quoted too: "'kern.x' in einops pattern ..." is the front end's.)
  for (const char *prefix : {"'ein.", "'kern.", "'func.", "'builtin."}) {
    if (message.rfind(prefix, 0) != 0) continue;
    size_t close = message.find('\'', 1);
    if (close != std::string::npos && message.compare(close + 1, 4, " op ") == 0) return true;
  }
  return false;
}

// One context for many inputs (creating one costs more than compiling a small
// model), renewed now and then: types and attributes it uniques are never
// freed, and would grow past the fuzzer's memory limit.
mlir::MLIRContext &context() {
  static std::unique_ptr<mlir::MLIRContext> context;
  static int uses = 0;
  if (!context || ++uses % 5000 == 0) {
    mlir::DialectRegistry registry;
    ein::registerEinDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
    context->loadAllAvailableDialects();
    context->printOpOnDiagnostic(false);
  }
  return *context;
}

int64_t paramElements(mlir::func::FuncOp function) {
  int64_t total = 0;
  function.walk([&](mlir::Operation *op) {
    if (op->getName().getStringRef().ends_with(".param"))
      for (mlir::Type type : op->getResultTypes())
        if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type))
          total = std::min<int64_t>(total + tensor.getNumElements(), int64_t{1} << 40);
  });
  return total;
}

void runWithZeroInputs(const std::vector<uint8_t> &artifact) {
  auto model = ein::Model::loadFromMemory(artifact.data(), artifact.size(), "fuzz.einb");
  if (!model.ok()) {
    fprintf(stderr, "the runtime refuses einc's artifact: %s\n", model.status().message().c_str());
    __builtin_trap();
  }
  // A model with ranged dims runs at their minima (the cheapest shapes).
  std::vector<int64_t> minima;
  for (const ein::DimInfo &dim : model.value()->dims()) minima.push_back(dim.min);
  auto shapes = model.value()->inputShapes(minima);
  if (!shapes.ok()) {
    fprintf(stderr, "the runtime gives no input shapes at the dims' minima: %s\n", shapes.status().message().c_str());
    __builtin_trap();
  }
  auto bytesOf = [](ein::DType dtype, const std::vector<int64_t> &shape) {
    uint64_t bytes = ein::dtypeSize(dtype);
    for (int64_t size : shape) bytes *= static_cast<uint64_t>(size);
    return bytes;
  };
  uint64_t bytes = model.value()->arenaBytes();
  const std::vector<ein::TensorInfo> &inputs = model.value()->inputs();
  for (size_t i = 0; i < inputs.size(); ++i) bytes += bytesOf(inputs[i].dtype, (*shapes)[i]);
  auto outputShapes = model.value()->outputShapes(*shapes);
  if (!outputShapes.ok()) return;  // a run-time check refuses the minima
  const std::vector<ein::TensorInfo> &outputs = model.value()->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) bytes += bytesOf(outputs[i].dtype, (*outputShapes)[i]);
  if (bytes > kMaxRunBytes) return;
  ein::SessionOptions options;
  options.threads = 1;
  auto session = ein::Session::create(model.value(), options);
  if (!session.ok()) return;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<uint8_t> zeros(bytesOf(inputs[i].dtype, (*shapes)[i]));
    if (!session.value()->setInput(inputs[i].name, inputs[i].dtype, (*shapes)[i], zeros.data(), zeros.size()).ok())
      __builtin_trap();
  }
  (void)session.value()->run();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;  // small models: the point is the passes, not the lexer's speed
  std::string source(reinterpret_cast<const char *>(data), size);
  mlir::MLIRContext &ctx = context();
  mlir::ScopedDiagnosticHandler handler(&ctx, [](mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Error) return mlir::success();
    std::string message = diagnostic.str();
    if (!locatedInModel(diagnostic.getLocation()) || isVerifierMessage(message)) {
      fprintf(stderr, "unlocated or internal error reached the user: %s\n", message.c_str());
      __builtin_trap();
    }
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = ein::mlirgen::generate(ctx, source, "fuzz.ein", {});
  if (!module) return 0;
  auto function = *module->getOps<mlir::func::FuncOp>().begin();
  if (paramElements(function) > kMaxWrittenParamElements) return 0;
  if (mlir::failed(ein::bindParameters(*module, ein::randomParams(1)))) return 0;
  mlir::PassManager manager(&ctx);
  ein::buildCompilerPipeline(manager);
  if (mlir::failed(manager.run(*module))) return 0;
  auto artifact = ein::writeArtifact(function, ein::ArtifactOptions{"fuzz.ein"});
  if (mlir::failed(artifact)) return 0;
  runWithZeroInputs(*artifact);
  return 0;
}
