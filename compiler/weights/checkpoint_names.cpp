#include "compiler/weights/checkpoint_names.hpp"

namespace ein::weights {

const TensorEntry *CheckpointNames::findPrefixed(llvm::StringRef name) const {
  if (const TensorEntry *entry = file_->find(name)) return entry;
  if (prefix_.empty()) return nullptr;
  if (name.starts_with(prefix_)) return file_->find(name.drop_front(prefix_.size()));
  return file_->find(prefix_ + name.str());
}

const TensorEntry *CheckpointNames::find(llvm::StringRef name) const {
  if (const TensorEntry *entry = findPrefixed(name)) return entry;
  // transformers' "legacy" renaming, which it applies to every checkpoint.
  for (auto [current, legacy] : {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}})
    if (llvm::StringRef stem = name; stem.consume_back(current)) return findPrefixed((stem + legacy).str());
  return nullptr;
}

}  // namespace ein::weights
