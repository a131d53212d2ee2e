// A checkpoint read under the names a model asks for, as transformers'
// from_pretrained reads it: with or without the base model's prefix (a GPT-2
// saved as GPT2Model, "h.0.attn...", into GPT2LMHeadModel's
// "transformer.h.0.attn..."; BertForPreTraining's "bert.embeddings..." into
// BertModel's "embeddings..."), and under the legacy LayerNorm names of
// checkpoints ported from TensorFlow (bert-base-uncased's
// "LayerNorm.gamma" and "LayerNorm.beta" for "LayerNorm.weight" and
// "LayerNorm.bias").
#pragma once

#include <memory>
#include <string>

#include "compiler/weights/safetensors.hpp"

namespace ein::weights {

class CheckpointNames : public WeightsFile {
public:
  // `prefix` with its dot ("transformer."), or empty.
  CheckpointNames(std::unique_ptr<WeightsFile> file, std::string prefix)
      : file_(std::move(file)), prefix_(std::move(prefix)) {}

  llvm::StringRef path() const override { return file_->path(); }
  llvm::StringRef pathOf(const TensorEntry &entry) const override { return file_->pathOf(entry); }
  // `name` as it is, else its legacy spelling; each as it is, else without
  // the prefix it has, else with the prefix.
  const TensorEntry *find(llvm::StringRef name) const override;
  llvm::ArrayRef<TensorEntry> entries() const override { return file_->entries(); }
  std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const override {
    return file_->storedBytes(entry);
  }
  llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const override { return file_->toF32(entry); }
  void release(const TensorEntry &entry) const override { file_->release(entry); }
  std::string blockQuantization(const TensorEntry &entry) const override { return file_->blockQuantization(entry); }

private:
  const TensorEntry *findPrefixed(llvm::StringRef name) const;

  std::unique_ptr<WeightsFile> file_;
  std::string prefix_;
};

}  // namespace ein::weights
