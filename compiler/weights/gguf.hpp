// Reading GGUF weight files (llama.cpp's format, versions 2 and 3).
//
// The layout (ggml's docs/gguf.md), little-endian throughout: "GGUF", a u32
// version, u64 tensor and metadata counts; the metadata, each a string key
// (u64 length, bytes), a u32 value type and the value (a string; an array: a
// u32 element type, a u64 count and the elements, which may be arrays); each
// tensor's info: its name, a u32 rank, u64 dims innermost first, a u32 ggml
// type and a u64 offset; then, from the next multiple of general.alignment
// (default 32), the data, each tensor at its offset there.
//
// A weights file is untrusted input: `GgufFile::open` validates all of it
// before returning (counts against the file's size, every string and value,
// ranks, element counts, types, alignment, extents, unique names), so every
// tensor it hands out describes bytes that exist. Every error is an
// `llvm::Error` whose message starts with the file path.
//
// Its tensors are served as the compiler's parameters: under Hugging Face's
// state_dict names for llama.cpp's Llama (general.architecture "llama", the
// only architecture read), with the rows of the query and key projections
// put back in the order convert_hf_to_gguf.py permuted them from; a tensor
// of another name keeps its name. F32, F16 and BF16 tensors are served as
// stored; Q8_0, Q4_0, Q4_K and Q6_K ones as f32, dequantized when read
// exactly as llama.cpp's reference dequantize_row_* functions do.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/weights/safetensors.hpp"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

namespace ein::weights {

// The ggml tensor types GgufFile reads, by ggml's numbers.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q8_0 = 8,
  Q4_K = 12,
  Q6_K = 14,
  BF16 = 30,
};

// ggml's name of a type number ("Q5_K"), or the number for one it does not
// define.
std::string ggmlTypeName(uint32_t type);

class GgufFile : public WeightsFile {
public:
  // How the file stores an entry's values.
  struct StoredTensor {
    std::string name;           // the file's name for it ("blk.0.attn_q.weight")
    GgmlType type;
    std::vector<int64_t> dims;  // innermost first: the reverse of the entry's shape
    // The rows (the entry's first axis) are in llama.cpp's rotary order over
    // this many heads; 0 when they are in order.
    int64_t permutedHeads = 0;
  };

  // Maps the file at `path` and validates it.
  static llvm::Expected<GgufFile> open(llvm::StringRef path);
  // Validates an in-memory file; `path` only names it in error messages.
  static llvm::Expected<GgufFile> fromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::StringRef path);

  llvm::StringRef path() const override { return path_; }
  // Also "lm_head.weight" in a Llama file with tied embeddings (no
  // output.weight): the embedding's entry.
  const TensorEntry *find(llvm::StringRef name) const override;
  // Every tensor, in the file's order, under the names it is served as. An
  // entry's dtype is the one it is served in (F32 for a quantized tensor),
  // and [begin, end) the bytes it is stored in, from the start of the data.
  llvm::ArrayRef<TensorEntry> entries() const override { return entries_; }
  // The stored bytes of an F32, F16 or BF16 tensor whose rows are in order.
  std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const override;
  llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const override;
  void release(const TensorEntry &entry) const override;
  std::string blockQuantization(const TensorEntry &entry) const override;

  uint32_t version() const { return version_; }
  llvm::StringRef architecture() const { return architecture_; }
  // How the file stores `entry`, which must come from this file.
  const StoredTensor &stored(const TensorEntry &entry) const;

private:
  GgufFile() = default;

  size_t indexOf(const TensorEntry &entry) const;

  std::string path_;
  std::unique_ptr<llvm::MemoryBuffer> buffer_;
  llvm::ArrayRef<uint8_t> data_;  // the tensor data inside `buffer_`
  uint32_t version_ = 0;
  std::string architecture_;
  std::vector<TensorEntry> entries_;
  std::vector<StoredTensor> stored_;  // each entry's
  llvm::StringMap<size_t> indexByName_;
  std::optional<size_t> tiedOutput_;  // the entry serving "lm_head.weight" under another name
};

}  // namespace ein::weights
