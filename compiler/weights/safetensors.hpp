// Reading `.safetensors` weight files.
//
// The format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON, then the data block. The
// JSON object maps each tensor name to
//   {"dtype": "F32", "shape": [1152, 384], "data_offsets": [begin, end]}
// with offsets relative to the start of the data block, plus an optional
// "__metadata__" object of string values.
//
// A weights file is untrusted input: `SafetensorsFile::open` validates the
// whole header before returning, so that every entry it hands out describes
// bytes that exist and have exactly the size its dtype and shape say. Every
// error is an `llvm::Error` whose message starts with the file path.
//
// The compiler stores every floating-point weight as f32; `toF32` converts
// every floating-point encoding (F64 rounds to nearest; the others are exact).
//
// `WeightsFile` is what the compiler asks of a weights file of any format:
// SafetensorsFile here, GgufFile (gguf.hpp) for llama.cpp's files, and
// WeightsSet (weights_set.hpp) for the tensors of several files as one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

namespace ein::weights {

// The element encodings the safetensors format defines (all little-endian).
enum class DType : uint8_t {
  Bool, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64,
};

// The spelling in the file: "F32", "BF16", "BOOL", ...
llvm::StringRef dtypeName(DType dtype);
// The spelling of the model language where one exists ("f32", "bf16", "bool",
// "i32"), else the file's spelling in lower case ("u16", "f8_e4m3").
std::string dtypeModelName(DType dtype);
std::optional<DType> parseDType(llvm::StringRef name);
// Bytes per element.
unsigned dtypeSize(DType dtype);
bool isFloatingPoint(DType dtype);

// One tensor of the header, validated against the file.
struct TensorEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  // Byte range [begin, end) relative to the start of the data block.
  uint64_t begin;
  uint64_t end;

  int64_t numElements() const;
  // "f32[1152, 384]", as the model language writes the type.
  std::string typeString() const;
};

// IEEE binary16 and bfloat16 to binary32, exact for every input.
float halfToFloat(uint16_t half);
float bfloat16ToFloat(uint16_t bfloat);

// Drops the whole pages of `bytes`, a range inside `buffer`, from memory when
// `buffer` maps a file (they count as resident once read; their contents
// stay valid, read again if used); does nothing for a buffer in memory.
void releaseMappedPages(const llvm::MemoryBuffer &buffer, llvm::ArrayRef<uint8_t> bytes);

// A weights file's tensors as the compiler reads them, validated when the
// file was opened: each entry under the name a parameter asks for, with the
// dtype and the row-major shape it is served in.
class WeightsFile {
public:
  virtual ~WeightsFile() = default;

  // The path the file was opened from, which prefixes every error message.
  virtual llvm::StringRef path() const = 0;
  // The path of the file that holds `entry`, which prefixes the errors about
  // it: path(), but a shard's own where the weights span several files.
  virtual llvm::StringRef pathOf(const TensorEntry &) const { return path(); }
  // The entry that serves the parameter `name`, or null. Its name may differ
  // from `name` where the file serves one tensor under two names (a GGUF
  // file's tied output projection).
  virtual const TensorEntry *find(llvm::StringRef name) const = 0;
  // Every tensor of the file, once each.
  virtual llvm::ArrayRef<TensorEntry> entries() const = 0;
  // The raw little-endian bytes of `entry` (from this file) in its dtype,
  // read in place, where the file stores them so; nullopt where they are made
  // when read (toF32: dequantized, or rows put back in order). Not aligned:
  // read them with memcpy or llvm::support::endian.
  virtual std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const = 0;
  // The values of a floating-point entry as f32, in row-major order; an
  // integer or boolean entry is an error.
  virtual llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const = 0;
  // Drops the file's pages that only `entry` covers from memory, so a reader
  // that copies tensors out one at a time holds about one copy of them.
  virtual void release(const TensorEntry &entry) const = 0;
  // The block quantization the file stores `entry` in, by ggml's name
  // ("Q8_0": a GGUF file's), or "" for plain values.
  virtual std::string blockQuantization(const TensorEntry &) const { return ""; }
};

// A tensor in the caller's memory (the Python package's arrays): row-major,
// little-endian bytes that outlive the SafetensorsFile made of them.
struct TensorInMemory {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  llvm::ArrayRef<uint8_t> bytes;
};

class SafetensorsFile : public WeightsFile {
public:
  // Maps the file at `path` and validates its header.
  static llvm::Expected<SafetensorsFile> open(llvm::StringRef path);
  // Validates an in-memory file; `path` only names it in error messages.
  static llvm::Expected<SafetensorsFile> fromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                   llvm::StringRef path);
  // Named tensors where the caller holds them, checked as a file's entries
  // are (unique names, the element limit, bytes matching dtype and shape)
  // and read in place, with no file image built around them; `path` names
  // them in error messages. Entries' offsets count as if the tensors were
  // laid end to end.
  static llvm::Expected<SafetensorsFile> fromTensors(std::vector<TensorInMemory> tensors, llvm::StringRef path);

  // The path given to `open`, which prefixes every error message.
  llvm::StringRef path() const override { return path_; }

  // The entry called `name`, or null.
  const TensorEntry *find(llvm::StringRef name) const override;
  // Every tensor entry, in the order of the JSON header.
  llvm::ArrayRef<TensorEntry> entries() const override { return entries_; }
  // The "__metadata__" strings (empty when the file has none).
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

  // The raw little-endian bytes of `entry`, which must come from this file.
  // They are not aligned: read them with memcpy or llvm::support::endian.
  llvm::ArrayRef<uint8_t> bytes(const TensorEntry &entry) const;
  // `bytes`: a safetensors file stores every entry as its dtype says.
  std::optional<llvm::ArrayRef<uint8_t>> storedBytes(const TensorEntry &entry) const override { return bytes(entry); }
  // Drops the file's pages that only `entry` covers from memory (a mapped
  // file: they count as resident once read; their contents stay valid, read
  // again if used), so a reader that copies tensors out one at a time holds
  // about one copy of the weights.
  void release(const TensorEntry &entry) const override;

  // The values of a floating-point entry (isFloatingPoint: F64, F32, F16,
  // BF16, F8_E5M2, F8_E4M3) as f32, in row-major order. Integer and boolean
  // entries are an error: converting them would change what they mean.
  llvm::Expected<std::vector<float>> toF32(const TensorEntry &entry) const override;

private:
  SafetensorsFile() = default;

  std::string path_;
  std::unique_ptr<llvm::MemoryBuffer> buffer_;
  // The data block inside `buffer_` (empty for tensors in memory).
  llvm::ArrayRef<uint8_t> data_;
  std::vector<TensorEntry> entries_;
  std::vector<llvm::ArrayRef<uint8_t>> bytes_;  // each entry's bytes
  llvm::StringMap<size_t> indexByName_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ein::weights
