#include "compiler/weights/weights_set.hpp"

#include <cassert>

namespace ein::weights {

llvm::Expected<std::unique_ptr<WeightsSet>> WeightsSet::create(std::vector<std::unique_ptr<WeightsFile>> files,
                                                               std::string path) {
  std::unique_ptr<WeightsSet> set(new WeightsSet());
  set->path_ = std::move(path);
  size_t total = 0;
  for (const auto &file : files) total += file->entries().size();
  // Reserved whole: find hands out pointers into entries_.
  set->entries_.reserve(total);
  set->origins_.reserve(total);
  for (const auto &file : files) {
    for (const TensorEntry &entry : file->entries()) {
      auto [it, inserted] = set->indexByName_.try_emplace(entry.name, set->entries_.size());
      if (!inserted) {
        const Origin &first = set->origins_[it->second];
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       (file->pathOf(entry) + ": tensor \"" + entry.name + "\" is also in " +
                                        first.file->pathOf(*first.entry) + " (a tensor may be in one file only)")
                                           .str());
      }
      set->indexByOrigin_[&entry] = set->entries_.size();
      set->entries_.push_back(entry);
      set->origins_.push_back({file.get(), &entry});
    }
  }
  set->files_ = std::move(files);
  return set;
}

const WeightsSet::Origin &WeightsSet::originOf(const TensorEntry &entry) const {
  assert(&entry >= entries_.data() && &entry < entries_.data() + entries_.size() && "entry from another file");
  return origins_[&entry - entries_.data()];
}

llvm::StringRef WeightsSet::pathOf(const TensorEntry &entry) const {
  const Origin &origin = originOf(entry);
  return origin.file->pathOf(*origin.entry);
}

const TensorEntry *WeightsSet::find(llvm::StringRef name) const {
  if (auto it = indexByName_.find(name); it != indexByName_.end()) return &entries_[it->second];
  // Not a tensor's own name: the first file that serves it under another.
  for (const auto &file : files_)
    if (const TensorEntry *served = file->find(name)) {
      auto it = indexByOrigin_.find(served);
      if (it != indexByOrigin_.end()) return &entries_[it->second];
    }
  return nullptr;
}

std::optional<llvm::ArrayRef<uint8_t>> WeightsSet::storedBytes(const TensorEntry &entry) const {
  const Origin &origin = originOf(entry);
  return origin.file->storedBytes(*origin.entry);
}

std::string WeightsSet::blockQuantization(const TensorEntry &entry) const {
  const Origin &origin = originOf(entry);
  return origin.file->blockQuantization(*origin.entry);
}

llvm::Expected<std::vector<float>> WeightsSet::toF32(const TensorEntry &entry) const {
  const Origin &origin = originOf(entry);
  return origin.file->toF32(*origin.entry);
}

void WeightsSet::release(const TensorEntry &entry) const {
  const Origin &origin = originOf(entry);
  origin.file->release(*origin.entry);
}

}  // namespace ein::weights
