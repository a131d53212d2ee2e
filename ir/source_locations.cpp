#include "ir/source_locations.hpp"

#include <algorithm>
#include <tuple>

#include "llvm/ADT/SetVector.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace ein::ir {
namespace {

// The source locations in `loc` (a FileLineColLoc, or a NameLoc around one),
// and the passes named in the metadata of the FusedLocs around them.
void collect(Location loc, llvm::SetVector<Location> &leaves, llvm::SetVector<Attribute> &passes) {
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (auto names = dyn_cast_or_null<ArrayAttr>(fused.getMetadata()))
      for (Attribute name : names) passes.insert(name);
    for (Location inner : fused.getLocations()) collect(inner, leaves, passes);
    return;
  }
  if (!isa<UnknownLoc>(loc)) leaves.insert(loc);
}

}  // namespace

Location fusedLocation(Operation *fused, llvm::ArrayRef<Operation *> replaced, llvm::StringRef pass) {
  Block *block = replaced.front()->getBlock();
  // The replaced ops and, growing from them, each producer all of whose
  // users are already in: it computed for them alone. A producer with
  // several users is checked again when the last of them joins.
  llvm::SetVector<Operation *> absorbed(replaced.begin(), replaced.end());
  SmallVector<Operation *> worklist(replaced.begin(), replaced.end());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || producer->getBlock() != block || absorbed.contains(producer)) continue;
      bool onlyForAbsorbed = llvm::all_of(producer->getUsers(), [&](Operation *user) {
        Operation *inBlock = block->findAncestorOpInBlock(*user);
        return inBlock && absorbed.contains(inBlock);
      });
      if (!onlyForAbsorbed) continue;
      absorbed.insert(producer);
      worklist.push_back(producer);
    }
  }
  // The fused op's own location first, the others in program order.
  absorbed.remove(fused);
  std::vector<Operation *> others(absorbed.begin(), absorbed.end());
  std::sort(others.begin(), others.end(), [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  llvm::SetVector<Location> leaves;
  llvm::SetVector<Attribute> passes;
  collect(fused->getLoc(), leaves, passes);
  for (Operation *op : others) collect(op->getLoc(), leaves, passes);
  MLIRContext *context = fused->getContext();
  passes.insert(StringAttr::get(context, pass));
  return FusedLoc::get(context, leaves.getArrayRef(), ArrayAttr::get(context, passes.getArrayRef()));
}

SourceLocations sourceLocationsOf(Location loc) {
  llvm::SetVector<Location> leaves;
  llvm::SetVector<Attribute> passes;
  collect(loc, leaves, passes);
  // The op's own position first, the others in the order of the model's text.
  std::vector<std::tuple<std::string, unsigned, unsigned>> positions;
  SourceLocations out;
  for (Location leaf : leaves) {
    auto file = leaf->findInstanceOf<FileLineColLoc>();
    if (!file) continue;
    std::tuple<std::string, unsigned, unsigned> position{file.getFilename().str(), file.getLine(), file.getColumn()};
    if (std::find(positions.begin(), positions.end(), position) != positions.end()) continue;
    if (positions.empty())
      if (auto name = dyn_cast<NameLoc>(leaf)) out.scope = name.getName().str();
    positions.push_back(std::move(position));
  }
  if (!positions.empty()) std::sort(positions.begin() + 1, positions.end());
  for (const auto &[file, line, column] : positions)
    out.sources.push_back(file + ":" + std::to_string(line) + ":" + std::to_string(column));
  for (Attribute pass : passes)
    if (auto name = dyn_cast<StringAttr>(pass)) out.passes.push_back(name.str());
  return out;
}

}  // namespace ein::ir
