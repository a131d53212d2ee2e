#include "compiler/driver/ir_graph.hpp"

#include <nlohmann/json.hpp>

#include "compiler/pipeline/pipeline.hpp"
#include "ir/source_locations.hpp"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

namespace ein {
namespace {

using nlohmann::json;

// Attribute text for the viewer's side panel: a large constant as its type
// alone, anything else as MLIR prints it, cut at a readable length.
std::string attributeText(mlir::Attribute attr) {
  constexpr size_t kLimit = 240;
  if (auto elements = mlir::dyn_cast<mlir::ElementsAttr>(attr); elements && elements.getNumElements() > 16) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << "dense<...> : " << elements.getType();
    return os.str();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  os.flush();
  if (text.size() > kLimit) text = text.substr(0, kLimit) + "...";
  return text;
}

std::string typeText(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return os.str();
}

json keyValue(const std::string &key, const std::string &value) { return {{"key", key}, {"value", value}}; }

std::string namespacePath(std::string scope) {
  for (char &c : scope)
    if (c == '.') c = '/';
  return scope;
}

// Nodes for the ops of `function`'s body: its arguments, each op, and its results.
void addFunction(mlir::func::FuncOp function, json &nodes) {
  const std::string prefix = function.getSymName().str() + "/";
  llvm::DenseMap<mlir::Value, std::pair<std::string, unsigned>> producers;  // value -> (node, output)
  mlir::Block &body = function.getBody().front();
  for (auto [index, argument] : llvm::enumerate(body.getArguments())) {
    std::string id = prefix + "arg" + std::to_string(index);
    std::string label = "arg" + std::to_string(index);
    if (auto name = function.getArgAttrOfType<mlir::StringAttr>(index, "ein.name")) label = name.str();
    nodes.push_back({{"id", id}, {"label", label}, {"namespace", "inputs"}, {"attrs", json::array()},
                     {"incomingEdges", json::array()},
                     {"outputsMetadata", {{{"id", "0"}, {"attrs", {keyValue("tensor_shape", typeText(argument.getType()))}}}}}});
    producers[argument] = {id, 0};
  }
  unsigned count = 0;
  for (mlir::Operation &op : body) {
    std::string id = prefix + "op" + std::to_string(count++);
    json attrs = json::array();
    for (mlir::NamedAttribute attribute : op.getAttrs())
      attrs.push_back(keyValue(attribute.getName().str(), attributeText(attribute.getValue())));
    ir::SourceLocations where = ir::sourceLocationsOf(op.getLoc());
    for (auto [index, source] : llvm::enumerate(where.sources))
      attrs.push_back(keyValue("source " + std::to_string(index), source));
    if (!where.passes.empty()) attrs.push_back(keyValue("fused_by", llvm::join(where.passes, ", ")));
    if (op.getNumRegions() > 0) {
      std::string ops;
      op.walk([&](mlir::Operation *inner) {
        if (inner != &op) ops += (ops.empty() ? "" : ", ") + inner->getName().getStringRef().str();
      });
      attrs.push_back(keyValue("body", ops));
    }
    json edges = json::array(), inputs = json::array(), outputs = json::array();
    for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
      auto producer = producers.find(operand);
      if (producer == producers.end()) continue;  // defined in an enclosing region: not drawn
      edges.push_back({{"sourceNodeId", producer->second.first},
                       {"sourceNodeOutputId", std::to_string(producer->second.second)},
                       {"targetNodeInputId", std::to_string(index)}});
      inputs.push_back({{"id", std::to_string(index)}, {"attrs", {keyValue("tensor_shape", typeText(operand.getType()))}}});
    }
    for (auto [index, result] : llvm::enumerate(op.getResults())) {
      outputs.push_back({{"id", std::to_string(index)}, {"attrs", {keyValue("tensor_shape", typeText(result.getType()))}}});
      producers[result] = {id, static_cast<unsigned>(index)};
    }
    nodes.push_back({{"id", id}, {"label", op.getName().getStringRef().str()}, {"namespace", namespacePath(where.scope)},
                     {"attrs", attrs}, {"incomingEdges", edges}, {"inputsMetadata", inputs}, {"outputsMetadata", outputs}});
  }
}

}  // namespace

std::variant<std::string, IrGraphError> irGraphJson(const std::string &text, const std::string &name) {
  mlir::DialectRegistry registry;
  registerEinDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(text, name), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream stream(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, stream);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module) return IrGraphError{diagnostics.empty() ? name + ": not a module" : stream.str()};
  json nodes = json::array();
  module->walk([&](mlir::func::FuncOp function) {
    if (!function.isExternal()) addFunction(function, nodes);
  });
  json graph{{"id", name}, {"nodes", nodes}};
  return graph.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ein
