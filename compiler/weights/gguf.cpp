#include "compiler/weights/gguf.hpp"

#include <cstring>
#include <limits>
#include <map>
#include <span>

#include "compiler/limits.hpp"
#include "file_kind.hpp"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/MathExtras.h"

namespace ein::weights {
namespace {

using llvm::support::endian::read16le;
using llvm::support::endian::read32le;
using llvm::support::endian::read64le;

constexpr uint64_t kDefaultAlignment = 32;
constexpr size_t kMaxRank = 4;  // ggml's GGML_MAX_DIMS
// Arrays of arrays are legal GGUF; deeper nesting than any writer uses is a
// corrupt or hostile file, refused before it recurses far.
constexpr int kMaxArrayNesting = 8;
// The fewest bytes a metadata entry takes (key length, value type, a one-byte
// value) and a tensor info (name length, rank, type, offset): counts beyond
// what the rest of the file can hold are refused before anything loops on them.
constexpr uint64_t kMinMetadataBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

// GGUF's metadata value types.
enum class ValueType : uint32_t { U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };
constexpr uint32_t kValueTypeCount = 13;

const char *valueTypeName(ValueType type) {
  static const char *const kNames[] = {"UINT8", "INT8",   "UINT16", "INT16", "UINT32", "INT32",  "FLOAT32",
                                       "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64", "FLOAT64"};
  return kNames[static_cast<uint32_t>(type)];
}

// Bytes of a value of a fixed-size type; 0 for strings and arrays.
uint64_t scalarBytes(ValueType type) {
  switch (type) {
  case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
  case ValueType::U16: case ValueType::I16: return 2;
  case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
  case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
  case ValueType::String: case ValueType::Array: return 0;
  }
  return 0;
}

bool isInteger(ValueType type) {
  switch (type) {
  case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16:
  case ValueType::U32: case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
  default: return false;
  }
}

// What the reader keeps of a metadata value: enough to read the keys it uses.
struct MetadataValue {
  ValueType type;
  std::optional<uint64_t> count;  // an integer's value, when it is not negative
  std::string text;               // a string's bytes
};

// ggml's tensor types (ggml.h), by number; blockElements and blockBytes only
// for the ones GgufFile reads.
struct GgmlTypeInfo {
  uint32_t number;
  llvm::StringLiteral name;
  uint32_t blockElements = 0;
  uint32_t blockBytes = 0;
};

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},     {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},  {3, "Q4_1"},     {6, "Q5_0"},
    {7, "Q5_1"},          {8, "Q8_0", 32, 34},    {9, "Q8_1"},          {10, "Q2_K"},    {11, "Q3_K"},
    {12, "Q4_K", 256, 144}, {13, "Q5_K"},         {14, "Q6_K", 256, 210}, {15, "Q8_K"},  {16, "IQ2_XXS"},
    {17, "IQ2_XS"},       {18, "IQ3_XXS"},        {19, "IQ1_S"},        {20, "IQ4_NL"},  {21, "IQ3_S"},
    {22, "IQ2_S"},        {23, "IQ4_XS"},         {24, "I8"},           {25, "I16"},     {26, "I32"},
    {27, "I64"},          {28, "F64"},            {29, "IQ1_M"},        {30, "BF16", 1, 2}, {34, "TQ1_0"},
    {35, "TQ2_0"},        {39, "MXFP4"},          {40, "NVFP4"},        {41, "Q1_0"},
};

const GgmlTypeInfo *ggmlTypeInfo(uint32_t number) {
  for (const GgmlTypeInfo &info : kGgmlTypes)
    if (info.number == number) return &info;
  return nullptr;
}

constexpr llvm::StringLiteral kSupportedTypes = "F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K";

// ---------------------------------------------------------------------------
// Dequantization: llama.cpp's reference dequantize_row_* (ggml-quants.c), one
// block at a time, with the same operations in the same order (this file is
// compiled with -ffp-contract=off, so no multiply-add is fused) and so the
// same f32 values.

// Q8_0: an f16 scale d, 32 int8 quants; x = q * d.
void dequantizeQ8_0(const uint8_t *block, float *out) {
  const float d = halfToFloat(read16le(block));
  const uint8_t *quants = block + 2;
  for (int j = 0; j < 32; ++j) out[j] = static_cast<int8_t>(quants[j]) * d;
}

// Q4_0: an f16 scale d, 16 bytes of 4-bit quants (low nibbles the first 16
// elements, high nibbles the last 16); x = (q - 8) * d.
void dequantizeQ4_0(const uint8_t *block, float *out) {
  const float d = halfToFloat(read16le(block));
  const uint8_t *quants = block + 2;
  for (int j = 0; j < 16; ++j) {
    const int low = (quants[j] & 0x0F) - 8, high = (quants[j] >> 4) - 8;
    out[j] = low * d;
    out[j + 16] = high * d;
  }
}

// Q4_K's 6-bit scale and min of sub-block j from the 12 packed bytes
// (ggml-quants.c's get_scale_min_k4).
void scaleAndMinK4(int j, const uint8_t *packed, uint8_t &scale, uint8_t &min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K: 256 elements in 8 sub-blocks of 32; f16 d and dmin, 12 bytes of
// 6-bit sub-block scales and mins, 128 bytes of 4-bit quants;
// x = d * scale * q - dmin * min.
void dequantizeQ4_K(const uint8_t *block, float *out) {
  const float d = halfToFloat(read16le(block)), dmin = halfToFloat(read16le(block + 2));
  const uint8_t *packed = block + 4, *quants = block + 16;
  for (int j = 0, subBlock = 0; j < 256; j += 64, subBlock += 2, quants += 32) {
    uint8_t scale, min;
    scaleAndMinK4(subBlock, packed, scale, min);
    const float d1 = d * scale, m1 = dmin * min;
    scaleAndMinK4(subBlock + 1, packed, scale, min);
    const float d2 = d * scale, m2 = dmin * min;
    for (int l = 0; l < 32; ++l) *out++ = d1 * (quants[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *out++ = d2 * (quants[l] >> 4) - m2;
  }
}

// Q6_K: 256 elements in 16 sub-blocks of 16; 128 bytes of the quants' low 4
// bits, 64 of their high 2 bits, 16 int8 sub-block scales, an f16 d;
// x = d * scale * (q - 32).
void dequantizeQ6_K(const uint8_t *block, float *out) {
  const uint8_t *low = block, *high = block + 128;
  const auto *scales = reinterpret_cast<const int8_t *>(block + 192);
  const float d = halfToFloat(read16le(block + 208));
  for (int n = 0; n < 256; n += 128, out += 128, low += 64, high += 32, scales += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int8_t>((low[l] & 0xF) | (((high[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int8_t>((low[l + 32] & 0xF) | (((high[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int8_t>((low[l] >> 4) | (((high[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int8_t>((low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * scales[is] * q1;
      out[l + 32] = d * scales[is + 2] * q2;
      out[l + 64] = d * scales[is + 4] * q3;
      out[l + 96] = d * scales[is + 6] * q4;
    }
  }
}

// ---------------------------------------------------------------------------
// Llama: llama.cpp's names (llama-arch.cpp) and Hugging Face's
// (transformers' LlamaForCausalLM state_dict).

enum class RotaryRows { None, Query, Key };

struct NameMapping {
  llvm::StringLiteral gguf;
  llvm::StringLiteral huggingFace;
  RotaryRows rotary = RotaryRows::None;
};

constexpr NameMapping kLlamaModelNames[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

constexpr NameMapping kLlamaBlockNames[] = {
    {"attn_norm", "input_layernorm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj", RotaryRows::Query},
    {"attn_k", "self_attn.k_proj", RotaryRows::Key},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

struct HuggingFaceName {
  std::string name;
  RotaryRows rotary = RotaryRows::None;
};

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (rows
// permuted over the query heads); a name llama.cpp's Llama does not use
// (rope_freqs.weight) keeps its name.
HuggingFaceName llamaName(llvm::StringRef name) {
  auto [base, suffix] = name.rsplit('.');
  if (suffix != "weight" && suffix != "bias") return {name.str()};
  for (const NameMapping &mapping : kLlamaModelNames)
    if (base == mapping.gguf) return {(mapping.huggingFace + "." + suffix).str(), mapping.rotary};
  llvm::StringRef rest = base;
  if (!rest.consume_front("blk.")) return {name.str()};
  auto [layer, part] = rest.split('.');
  if (layer.empty() || !llvm::all_of(layer, llvm::isDigit)) return {name.str()};
  for (const NameMapping &mapping : kLlamaBlockNames)
    if (part == mapping.gguf)
      return {("model.layers." + layer + "." + mapping.huggingFace + "." + suffix).str(), mapping.rotary};
  return {name.str()};
}

// convert_hf_to_gguf.py's LlamaModel.permute reorders the rows of each head
// of d rows from Hugging Face's [two halves of d/2] to llama.cpp's [d/2
// pairs]: stored row h*d + 2*i + j holds Hugging Face's row h*d + j*d/2 + i.
// This puts them back.
std::vector<float> rowsInHuggingFaceOrder(const std::vector<float> &stored, int64_t rows, int64_t heads) {
  // A tensor of no elements (a zero dimension, which the format allows) has
  // nothing to move, and memcpy must not see its null data.
  if (stored.empty()) return stored;
  std::vector<float> ordered(stored.size());
  const size_t rowSize = stored.size() / static_cast<size_t>(rows);
  const int64_t headRows = rows / heads, half = headRows / 2;
  for (int64_t head = 0; head < heads; ++head)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = head * headRows + 2 * i + j, to = head * headRows + j * half + i;
        std::memcpy(ordered.data() + to * rowSize, stored.data() + from * rowSize, rowSize * sizeof(float));
      }
  return ordered;
}

std::string formatDims(llvm::ArrayRef<int64_t> dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string quoted(llvm::StringRef text) { return ("\"" + text + "\"").str(); }

// Reads the file front to back; every read is bounds-checked and names what
// it reads, so a file that ends early says where.
class Reader {
public:
  Reader(llvm::ArrayRef<uint8_t> file, llvm::StringRef path) : file(file), path(path) {}

  llvm::Error error(const llvm::Twine &message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), (path + ": " + message).str());
  }

  uint64_t position() const { return offset; }
  uint64_t remaining() const { return file.size() - offset; }

  llvm::Expected<uint32_t> u32(const llvm::Twine &what) {
    if (remaining() < 4) return endsInside(what);
    const uint32_t value = read32le(file.data() + offset);
    offset += 4;
    return value;
  }

  llvm::Expected<uint64_t> u64(const llvm::Twine &what) {
    if (remaining() < 8) return endsInside(what);
    const uint64_t value = read64le(file.data() + offset);
    offset += 8;
    return value;
  }

  // A u64 length, then that many bytes.
  llvm::Expected<llvm::StringRef> string(const llvm::Twine &what) {
    llvm::Expected<uint64_t> length = u64("the length of " + what);
    if (!length) return length.takeError();
    if (*length > remaining())
      return error(what + " is " + llvm::Twine(*length) + " bytes long, past the end of the file (" +
                   llvm::Twine(file.size()) + " bytes)");
    llvm::StringRef text(reinterpret_cast<const char *>(file.data() + offset), *length);
    offset += *length;
    return text;
  }

  llvm::Expected<const uint8_t *> bytes(uint64_t count, const llvm::Twine &what) {
    if (count > remaining()) return endsInside(what);
    const uint8_t *begin = file.data() + offset;
    offset += count;
    return begin;
  }

private:
  llvm::Error endsInside(const llvm::Twine &what) const {
    return error("the file ends (at " + llvm::Twine(file.size()) + " bytes) inside " + what);
  }

  llvm::ArrayRef<uint8_t> file;
  llvm::StringRef path;
  uint64_t offset = 0;
};

// The integer value of `type` stored at `bytes`, if it is one and not negative.
std::optional<uint64_t> nonNegativeInteger(ValueType type, const uint8_t *bytes) {
  switch (type) {
  case ValueType::U8: return bytes[0];
  case ValueType::I8: return static_cast<int8_t>(bytes[0]) >= 0 ? std::optional<uint64_t>(bytes[0]) : std::nullopt;
  case ValueType::U16: return read16le(bytes);
  case ValueType::I16: {
    const auto v = static_cast<int16_t>(read16le(bytes));
    return v >= 0 ? std::optional<uint64_t>(v) : std::nullopt;
  }
  case ValueType::U32: return read32le(bytes);
  case ValueType::I32: {
    const auto v = static_cast<int32_t>(read32le(bytes));
    return v >= 0 ? std::optional<uint64_t>(v) : std::nullopt;
  }
  case ValueType::U64: return read64le(bytes);
  case ValueType::I64: {
    const auto v = static_cast<int64_t>(read64le(bytes));
    return v >= 0 ? std::optional<uint64_t>(v) : std::nullopt;
  }
  default: return std::nullopt;
  }
}

// One metadata value of `type` (arrays nested `depth` deep), for key `key`.
llvm::Expected<MetadataValue> readValue(Reader &reader, uint32_t typeNumber, llvm::StringRef key, int depth) {
  const std::string where = "metadata " + quoted(key);
  if (typeNumber >= kValueTypeCount)
    return reader.error(where + " has value type " + llvm::Twine(typeNumber) + ", which GGUF does not define");
  const auto type = static_cast<ValueType>(typeNumber);
  MetadataValue value{type, std::nullopt, {}};
  if (type == ValueType::String) {
    llvm::Expected<llvm::StringRef> text = reader.string("the value of " + where);
    if (!text) return text.takeError();
    value.text = text->str();
    return value;
  }
  if (type != ValueType::Array) {
    llvm::Expected<const uint8_t *> bytes = reader.bytes(scalarBytes(type), "the value of " + where);
    if (!bytes) return bytes.takeError();
    value.count = nonNegativeInteger(type, *bytes);
    return value;
  }
  if (depth >= kMaxArrayNesting)
    return reader.error(where + " nests arrays more than " + llvm::Twine(kMaxArrayNesting) + " deep");
  llvm::Expected<uint32_t> elementType = reader.u32("the element type of " + where);
  if (!elementType) return elementType.takeError();
  if (*elementType >= kValueTypeCount)
    return reader.error(where + " is an array of value type " + llvm::Twine(*elementType) +
                        ", which GGUF does not define");
  llvm::Expected<uint64_t> count = reader.u64("the length of " + where);
  if (!count) return count.takeError();
  const auto element = static_cast<ValueType>(*elementType);
  // A string takes its 8-byte length at least, an array its type and length.
  const uint64_t minBytes = element == ValueType::String ? 8 : element == ValueType::Array ? 12 : scalarBytes(element);
  if (*count > reader.remaining() / minBytes)
    return reader.error(where + " is an array of " + llvm::Twine(*count) + " " + valueTypeName(element) +
                        " values, more than the rest of the file (" + llvm::Twine(reader.remaining()) +
                        " bytes) holds");
  // The elements are checked, not kept: no key the reader uses is an array.
  if (element == ValueType::String) {
    for (uint64_t i = 0; i < *count; ++i)
      if (llvm::Expected<llvm::StringRef> text = reader.string("a value of " + where); !text) return text.takeError();
  } else if (element == ValueType::Array) {
    for (uint64_t i = 0; i < *count; ++i)
      if (llvm::Expected<MetadataValue> item = readValue(reader, *elementType, key, depth + 1); !item)
        return item.takeError();
  } else if (llvm::Expected<const uint8_t *> bytes = reader.bytes(*count * minBytes, "the values of " + where); !bytes) {
    return bytes.takeError();
  }
  return value;
}

}  // namespace

std::string ggmlTypeName(uint32_t type) {
  if (const GgmlTypeInfo *info = ggmlTypeInfo(type)) return info->name.str();
  return std::to_string(type);
}

std::string GgufFile::blockQuantization(const TensorEntry &entry) const {
  const GgmlType type = stored(entry).type;
  const bool plain = type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
  return plain ? "" : ggmlTypeName(static_cast<uint32_t>(type));
}

llvm::Expected<GgufFile> GgufFile::open(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), (path + ": cannot open: " + buffer.getError().message()).str());
  return fromBuffer(std::move(*buffer), path);
}

llvm::Expected<GgufFile> GgufFile::fromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer, llvm::StringRef path) {
  llvm::ArrayRef<uint8_t> file(reinterpret_cast<const uint8_t *>(buffer->getBufferStart()), buffer->getBufferSize());
  Reader reader(file, path);
  // Another kind of file is named for what it is.
  const FileKind kind = sniffFileKind(std::span<const uint8_t>(file.data(), std::min<size_t>(file.size(), 4096)));
  if (kind != FileKind::Gguf)
    return reader.error(llvm::Twine("the file is ") + describeFileKind(kind) +
                        ", not a GGUF weights file (those start with \"GGUF\")");
  if (llvm::Expected<const uint8_t *> magic = reader.bytes(4, "the magic"); !magic) return magic.takeError();

  GgufFile result;
  result.path_ = path.str();
  llvm::Expected<uint32_t> version = reader.u32("the version");
  if (!version) return version.takeError();
  if (*version != 2 && *version != 3) {
    // A big-endian file (gguf-py writes them) has its version byte-swapped.
    if (uint32_t swapped = llvm::byteswap(*version); swapped >= 1 && swapped <= 3)
      return reader.error("the file is a big-endian GGUF file; only little-endian ones are read");
    return reader.error("GGUF version " + llvm::Twine(*version) + " is not supported (versions 2 and 3 are)");
  }
  result.version_ = *version;
  llvm::Expected<uint64_t> tensorCount = reader.u64("the tensor count");
  if (!tensorCount) return tensorCount.takeError();
  llvm::Expected<uint64_t> metadataCount = reader.u64("the metadata count");
  if (!metadataCount) return metadataCount.takeError();
  if (*metadataCount > reader.remaining() / kMinMetadataBytes)
    return reader.error("the header counts " + llvm::Twine(*metadataCount) +
                        " metadata entries, more than the rest of the file (" + llvm::Twine(reader.remaining()) +
                        " bytes) holds");

  // The metadata: every value is read (and so checked); the scalars and
  // strings are kept for the keys below.
  std::map<std::string, MetadataValue, std::less<>> metadata;
  for (uint64_t i = 0; i < *metadataCount; ++i) {
    llvm::Expected<llvm::StringRef> key = reader.string("the key of metadata entry " + llvm::Twine(i));
    if (!key) return key.takeError();
    if (metadata.count(*key)) return reader.error("metadata " + quoted(*key) + " appears twice");
    llvm::Expected<uint32_t> type = reader.u32("the value type of metadata " + quoted(*key));
    if (!type) return type.takeError();
    llvm::Expected<MetadataValue> value = readValue(reader, *type, *key, 0);
    if (!value) return value.takeError();
    metadata.emplace(key->str(), std::move(*value));
  }
  auto typeError = [&](llvm::StringRef key, const MetadataValue &value, llvm::StringRef wanted) {
    return reader.error("metadata " + quoted(key) + " is " + valueTypeName(value.type) + ", not " + wanted);
  };

  uint64_t alignment = kDefaultAlignment;
  if (auto found = metadata.find("general.alignment"); found != metadata.end()) {
    if (!isInteger(found->second.type)) return typeError(found->first, found->second, "an integer");
    if (!found->second.count || !llvm::isPowerOf2_64(*found->second.count))
      return reader.error("metadata \"general.alignment\" is not a power of two");
    alignment = *found->second.count;
  }
  auto architecture = metadata.find("general.architecture");
  if (architecture == metadata.end())
    return reader.error("the metadata has no \"general.architecture\" (the model's, which the tensor names "
                        "follow; supported: llama)");
  if (architecture->second.type != ValueType::String)
    return typeError(architecture->first, architecture->second, "a string");
  result.architecture_ = architecture->second.text;
  if (result.architecture_ != "llama")
    return reader.error("GGUF architecture '" + result.architecture_ + "' is not supported; supported: llama");
  // The heads the query and key rows are permuted over (k's default to q's,
  // as llama.cpp reads them), looked up when such a tensor appears.
  auto headCount = [&](RotaryRows rows, llvm::StringRef tensor) -> llvm::Expected<int64_t> {
    std::string key = result.architecture_ + ".attention.head_count";
    auto found = metadata.find(key);
    if (rows == RotaryRows::Key)
      if (auto kv = metadata.find(key + "_kv"); kv != metadata.end()) found = kv;
    if (found == metadata.end())
      return reader.error("the metadata has no " + quoted(key) + ", the heads of tensor " + quoted(tensor) +
                          " (its rows are permuted over them)");
    if (!isInteger(found->second.type)) return typeError(found->first, found->second, "an integer");
    const std::optional<uint64_t> heads = found->second.count;
    if (!heads || *heads == 0 || *heads > uint64_t{1} << 32)
      return reader.error("metadata " + quoted(found->first) + " is not a positive head count");
    return static_cast<int64_t>(*heads);
  };

  // The tensor infos.
  if (*tensorCount > reader.remaining() / kMinTensorInfoBytes)
    return reader.error("the header counts " + llvm::Twine(*tensorCount) + " tensors, more than the rest of the file (" +
                        llvm::Twine(reader.remaining()) + " bytes) holds");
  llvm::StringSet<> fileNames;
  for (uint64_t i = 0; i < *tensorCount; ++i) {
    llvm::Expected<llvm::StringRef> nameRead = reader.string("the name of tensor " + llvm::Twine(i));
    if (!nameRead) return nameRead.takeError();
    const std::string name = nameRead->str();
    const std::string tensor = "tensor " + quoted(name);
    if (!fileNames.insert(name).second) return reader.error(tensor + " appears twice");
    llvm::Expected<uint32_t> rank = reader.u32("the rank of " + tensor);
    if (!rank) return rank.takeError();
    if (*rank > kMaxRank)
      return reader.error(tensor + " has " + llvm::Twine(*rank) + " dimensions; GGUF allows at most " +
                          llvm::Twine(kMaxRank));
    StoredTensor stored{name, GgmlType::F32, {}, 0};
    for (uint32_t axis = 0; axis < *rank; ++axis) {
      llvm::Expected<uint64_t> size = reader.u64("the dimensions of " + tensor);
      if (!size) return size.takeError();
      if (*size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return reader.error(tensor + " has dimension " + llvm::Twine(*size) + " (sizes must be below 2^63)");
      stored.dims.push_back(static_cast<int64_t>(*size));
    }
    llvm::Expected<uint32_t> typeNumber = reader.u32("the type of " + tensor);
    if (!typeNumber) return typeNumber.takeError();
    llvm::Expected<uint64_t> offset = reader.u64("the offset of " + tensor);
    if (!offset) return offset.takeError();

    const GgmlTypeInfo *type = ggmlTypeInfo(*typeNumber);
    if (!type || type->blockElements == 0)
      return reader.error(tensor + " has type " + ggmlTypeName(*typeNumber) + ", which is not supported (" +
                          kSupportedTypes + " are)");
    stored.type = static_cast<GgmlType>(*typeNumber);
    TensorEntry entry{name, DType::F32, std::vector<int64_t>(stored.dims.rbegin(), stored.dims.rend()), *offset,
                      *offset};
    std::optional<int64_t> elements = limits::checkedElementCount(entry.shape);
    if (!elements)
      return reader.error(tensor + " has shape " + formatDims(entry.shape) +
                          " with more than 2^40 elements (the product of its nonzero sizes)");
    const int64_t rowElements = stored.dims.empty() ? 1 : stored.dims.front();
    if (rowElements % type->blockElements != 0)
      return reader.error(tensor + " of type " + type->name + " has rows of " + llvm::Twine(rowElements) +
                          " elements, not a multiple of its blocks of " + llvm::Twine(type->blockElements));
    if (*offset % alignment != 0)
      return reader.error(tensor + " has offset " + llvm::Twine(*offset) + ", not a multiple of the alignment " +
                          llvm::Twine(alignment));
    // At most 2^40 elements of at most 4 bytes: no overflow. The extent is
    // checked once the data's start is known.
    const uint64_t bytes = static_cast<uint64_t>(*elements) / type->blockElements * type->blockBytes;
    if (*offset > file.size())
      return reader.error(tensor + " has offset " + llvm::Twine(*offset) + ", past the end of the file (" +
                          llvm::Twine(file.size()) + " bytes)");
    entry.end = *offset + bytes;
    entry.dtype = stored.type == GgmlType::F16 ? DType::F16 : stored.type == GgmlType::BF16 ? DType::BF16 : DType::F32;

    HuggingFaceName served = llamaName(name);
    entry.name = served.name;
    if (served.rotary != RotaryRows::None) {
      llvm::Expected<int64_t> heads = headCount(served.rotary, name);
      if (!heads) return heads.takeError();
      const int64_t rows = entry.shape.empty() ? 1 : entry.shape.front();
      if (rows % (2 * *heads) != 0)
        return reader.error(tensor + " has " + llvm::Twine(rows) + " rows, which " + llvm::Twine(*heads) +
                            " heads do not split into pairs of halves (its rows are permuted over them)");
      stored.permutedHeads = *heads;
    }
    if (auto [at, inserted] = result.indexByName_.try_emplace(entry.name, result.entries_.size()); !inserted)
      return reader.error(tensor + " and tensor " + quoted(result.stored_[at->second].name) + " are both " +
                          quoted(entry.name));
    result.entries_.push_back(std::move(entry));
    result.stored_.push_back(std::move(stored));
  }

  // The data starts at the next multiple of the alignment.
  const uint64_t padding = (alignment - reader.position() % alignment) % alignment;
  if (!result.entries_.empty() && padding > reader.remaining())
    return reader.error("the tensor data would start at byte " + llvm::Twine(reader.position() + padding) +
                        ", past the end of the file (" + llvm::Twine(file.size()) + " bytes)");
  result.data_ = file.drop_front(std::min<uint64_t>(reader.position() + padding, file.size()));
  for (size_t i = 0; i < result.entries_.size(); ++i) {
    const TensorEntry &entry = result.entries_[i];
    const StoredTensor &stored = result.stored_[i];
    if (entry.end > result.data_.size())
      return reader.error("tensor " + quoted(stored.name) + " (" + ggmlTypeName(static_cast<uint32_t>(stored.type)) +
                          formatDims(entry.shape) + ", " + llvm::Twine(entry.end - entry.begin) + " bytes at offset " +
                          llvm::Twine(entry.begin) + ") runs past the end of the data (" +
                          llvm::Twine(result.data_.size()) + " bytes from byte " +
                          llvm::Twine(file.size() - result.data_.size()) + ")");
  }

  // Tied embeddings: no output projection of its own, the embedding serves.
  if (!result.indexByName_.count("lm_head.weight"))
    if (auto embedding = result.indexByName_.find("model.embed_tokens.weight"); embedding != result.indexByName_.end())
      result.tiedOutput_ = embedding->second;
  result.buffer_ = std::move(buffer);
  return result;
}

const TensorEntry *GgufFile::find(llvm::StringRef name) const {
  if (auto it = indexByName_.find(name); it != indexByName_.end()) return &entries_[it->second];
  if (tiedOutput_ && name == "lm_head.weight") return &entries_[*tiedOutput_];
  return nullptr;
}

size_t GgufFile::indexOf(const TensorEntry &entry) const {
  assert(&entry >= entries_.data() && &entry < entries_.data() + entries_.size() && "entry from another file");
  return static_cast<size_t>(&entry - entries_.data());
}

const GgufFile::StoredTensor &GgufFile::stored(const TensorEntry &entry) const { return stored_[indexOf(entry)]; }

std::optional<llvm::ArrayRef<uint8_t>> GgufFile::storedBytes(const TensorEntry &entry) const {
  const StoredTensor &tensor = stored(entry);
  const bool asStored = tensor.type == GgmlType::F32 || tensor.type == GgmlType::F16 || tensor.type == GgmlType::BF16;
  if (!asStored || tensor.permutedHeads) return std::nullopt;
  return data_.slice(entry.begin, entry.end - entry.begin);
}

llvm::Expected<std::vector<float>> GgufFile::toF32(const TensorEntry &entry) const {
  const StoredTensor &tensor = stored(entry);
  const uint8_t *bytes = data_.data() + entry.begin;
  const size_t count = static_cast<size_t>(entry.numElements());
  std::vector<float> values(count);
  // Validated at open: the bytes hold exactly `count` elements, whole blocks.
  auto blocks = [&](size_t blockElements, size_t blockBytes, void (*dequantize)(const uint8_t *, float *)) {
    for (size_t block = 0; block < count / blockElements; ++block)
      dequantize(bytes + block * blockBytes, values.data() + block * blockElements);
  };
  switch (tensor.type) {
  case GgmlType::F32:
    for (size_t i = 0; i < count; ++i) {
      const uint32_t bits = read32le(bytes + 4 * i);
      std::memcpy(&values[i], &bits, sizeof bits);
    }
    break;
  case GgmlType::F16:
    for (size_t i = 0; i < count; ++i) values[i] = halfToFloat(read16le(bytes + 2 * i));
    break;
  case GgmlType::BF16:
    for (size_t i = 0; i < count; ++i) values[i] = bfloat16ToFloat(read16le(bytes + 2 * i));
    break;
  case GgmlType::Q8_0: blocks(32, 34, dequantizeQ8_0); break;
  case GgmlType::Q4_0: blocks(32, 18, dequantizeQ4_0); break;
  case GgmlType::Q4_K: blocks(256, 144, dequantizeQ4_K); break;
  case GgmlType::Q6_K: blocks(256, 210, dequantizeQ6_K); break;
  }
  if (tensor.permutedHeads)
    values = rowsInHuggingFaceOrder(values, entry.shape.empty() ? 1 : entry.shape.front(), tensor.permutedHeads);
  return values;
}

void GgufFile::release(const TensorEntry &entry) const {
  if (buffer_) releaseMappedPages(*buffer_, data_.slice(entry.begin, entry.end - entry.begin));
}

}  // namespace ein::weights
