// The tensors of several weights files as one WeightsFile: a checkpoint's
// shards, or the files given with several --weights.
//
// Each tensor is served by the file that holds it, which reads, converts and
// releases it as it would alone, so the set costs no memory beyond the
// entries' names and shapes; errors about a tensor name its own file
// (pathOf). A tensor name in two of the files is an error naming both: which
// one a parameter would get would otherwise depend on the order given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/weights/safetensors.hpp"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace ein::weights {

class WeightsSet : public WeightsFile {
public:
  // The tensors of `files` (each validated when opened); `path` names the
  // set in messages about all of it (a folder, or the paths given).
  static llvm::Expected<std::unique_ptr<WeightsSet>> create(std::vector<std::unique_ptr<WeightsFile>> files,
                                                            std::string path);

  llvm::StringRef path() const override { return path_; }
  llvm::StringRef pathOf(const TensorEntry &entry) const override;
  // A tensor of one of the files, else a name one of them serves under
  // another (a GGUF file's tied output projection).
  const TensorEntry *find(llvm::StringRef name) const override;
  // Every file's entries, file after file.
  llvm::ArrayRef<TensorEntry> entries() const override { return entries_; }
  std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const override;
  llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const override;
  void release(const TensorEntry &entry) const override;
  std::string blockQuantization(const TensorEntry &entry) const override;

private:
  // Where an entry of the set comes from: its file and that file's entry,
  // which the file's own methods must be given.
  struct Origin {
    const WeightsFile *file;
    const TensorEntry *entry;
  };

  WeightsSet() = default;
  const Origin &originOf(const TensorEntry &entry) const;

  std::string path_;
  std::vector<std::unique_ptr<WeightsFile>> files_;
  std::vector<TensorEntry> entries_;  // copies of the files' entries
  std::vector<Origin> origins_;       // each entry's
  llvm::StringMap<size_t> indexByName_;
  llvm::DenseMap<const TensorEntry *, size_t> indexByOrigin_;
};

}  // namespace ein::weights
