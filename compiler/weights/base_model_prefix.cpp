#include "compiler/weights/base_model_prefix.hpp"

namespace ein::weights {

const TensorEntry *BaseModelPrefixed::find(llvm::StringRef name) const {
  if (const TensorEntry *entry = file_->find(name)) return entry;
  if (name.starts_with(prefix_)) return file_->find(name.drop_front(prefix_.size()));
  return file_->find(prefix_ + name.str());
}

}  // namespace ein::weights
