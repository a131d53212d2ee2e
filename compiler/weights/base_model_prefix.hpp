// A checkpoint read under the names of a model with or without its base
// model's prefix, as transformers' from_pretrained reads it: a GPT-2 saved
// as GPT2Model ("h.0.attn...") into GPT2LMHeadModel ("transformer.h.0.attn..."),
// or BertForPreTraining's "bert.embeddings..." into BertModel ("embeddings...").
#pragma once

#include <memory>
#include <string>

#include "compiler/weights/safetensors.hpp"

namespace ein::weights {

class BaseModelPrefixed : public WeightsFile {
public:
  // `prefix` with its dot ("transformer.").
  BaseModelPrefixed(std::unique_ptr<WeightsFile> file, std::string prefix)
      : file_(std::move(file)), prefix_(std::move(prefix)) {}

  llvm::StringRef path() const override { return file_->path(); }
  llvm::StringRef pathOf(const TensorEntry &entry) const override { return file_->pathOf(entry); }
  // `name` as it is, else without the prefix it has, else with the prefix.
  const TensorEntry *find(llvm::StringRef name) const override;
  llvm::ArrayRef<TensorEntry> entries() const override { return file_->entries(); }
  std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const override {
    return file_->storedBytes(entry);
  }
  llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const override { return file_->toF32(entry); }
  void release(const TensorEntry &entry) const override { file_->release(entry); }

private:
  std::unique_ptr<WeightsFile> file_;
  std::string prefix_;
};

}  // namespace ein::weights
