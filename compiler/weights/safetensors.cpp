#include "compiler/weights/safetensors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <span>

#include "compiler/limits.hpp"
#include "file_kind.hpp"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"
#include "nlohmann/json.hpp"

namespace ein::weights {
namespace {

using nlohmann::ordered_json;

// The reference implementation refuses headers above 100 MB; a larger length
// is a corrupt or hostile file, and refusing it early avoids parsing garbage.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr llvm::StringLiteral kMetadataKey = "__metadata__";

struct DTypeInfo {
  DType dtype;
  llvm::StringLiteral fileName;
  llvm::StringLiteral modelName;
  unsigned size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::Bool, "BOOL", "bool", 1},      {DType::U8, "U8", "u8", 1},
    {DType::I8, "I8", "i8", 1},            {DType::F8_E5M2, "F8_E5M2", "f8_e5m2", 1},
    {DType::F8_E4M3, "F8_E4M3", "f8_e4m3", 1}, {DType::I16, "I16", "i16", 2},
    {DType::U16, "U16", "u16", 2},         {DType::F16, "F16", "f16", 2},
    {DType::BF16, "BF16", "bf16", 2},      {DType::I32, "I32", "i32", 4},
    {DType::U32, "U32", "u32", 4},         {DType::F32, "F32", "f32", 4},
    {DType::I64, "I64", "i64", 8},         {DType::U64, "U64", "u64", 8},
    {DType::F64, "F64", "f64", 8},
};

const DTypeInfo &infoOf(DType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype) return info;
  llvm_unreachable("every DType has an entry in kDTypes");
}

std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// float8 e5m2 is binary16 with the low mantissa byte dropped.
float float8E5M2ToFloat(uint8_t value) { return halfToFloat(static_cast<uint16_t>(value) << 8); }

// float8 e4m3fn (torch.float8_e4m3fn): exponent bias 7, no infinities, and
// S.1111.111 the only NaN.
float float8E4M3ToFloat(uint8_t value) {
  bool negative = value & 0x80;
  int exponent = (value >> 3) & 0xf, mantissa = value & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7)
    magnitude = std::numeric_limits<float>::quiet_NaN();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^(1-7)
  else
    magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  return negative ? -magnitude : magnitude;
}

// Builds the file's errors, each prefixed with its path.
class HeaderValidator {
public:
  explicit HeaderValidator(llvm::StringRef path) : path(path) {}

  llvm::Error error(const llvm::Twine &message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), (path + ": " + message).str());
  }

  // A non-negative JSON integer that fits in 64 bits.
  static std::optional<uint64_t> asUnsigned(const ordered_json &value) {
    if (value.is_number_unsigned()) return value.get<uint64_t>();
    if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
    return std::nullopt;
  }

  llvm::Expected<TensorEntry> parseEntry(const std::string &name, const ordered_json &json,
                                         uint64_t dataSize) const {
    std::string quoted = "tensor \"" + name + "\"";
    if (!json.is_object()) return error(quoted + " is described by " + json.type_name() + ", not an object");

    auto dtypeField = json.find("dtype");
    if (dtypeField == json.end() || !dtypeField->is_string()) return error(quoted + " has no \"dtype\" string");
    std::string dtypeText = dtypeField->get<std::string>();
    std::optional<DType> dtype = parseDType(dtypeText);
    if (!dtype) return error(quoted + " has unknown dtype \"" + dtypeText + "\"");

    auto shapeField = json.find("shape");
    if (shapeField == json.end() || !shapeField->is_array())
      return error(quoted + " has no \"shape\" array");
    TensorEntry entry{name, *dtype, {}, 0, 0};
    for (const ordered_json &size : *shapeField) {
      if (!size.is_number_integer())
        return error(quoted + " has a non-integer size " + size.dump() + " in its shape " + shapeField->dump());
      if (size.is_number_unsigned() ? size.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                                    : size.get<int64_t>() < 0)
        return error(quoted + " has size " + size.dump() + " in its shape " + shapeField->dump() +
                     " (sizes must be in [0, 2^63))");
      entry.shape.push_back(size.get<int64_t>());
    }

    auto offsetsField = json.find("data_offsets");
    if (offsetsField == json.end() || !offsetsField->is_array() || offsetsField->size() != 2 ||
        !asUnsigned((*offsetsField)[0]) || !asUnsigned((*offsetsField)[1]))
      return error(quoted + " needs \"data_offsets\" [begin, end] of two non-negative integers");
    entry.begin = *asUnsigned((*offsetsField)[0]);
    entry.end = *asUnsigned((*offsetsField)[1]);
    std::string offsets = llvm::formatv("data_offsets [{0}, {1}]", entry.begin, entry.end).str();

    llvm::Expected<uint64_t> byteSize = checkedByteSize(entry);
    if (!byteSize) return byteSize.takeError();

    if (entry.begin > entry.end) return error(quoted + " has " + offsets + " whose begin is past its end");
    if (entry.end > dataSize)
      return error(quoted + " has " + offsets + " past the end of the " + llvm::Twine(dataSize) +
                   "-byte data block");
    if (entry.end - entry.begin != *byteSize)
      return error(quoted + " has " + offsets + " but " + entry.typeString() + " needs " + llvm::Twine(*byteSize) +
                   " bytes");
    return entry;
  }

  // The bytes `entry`'s dtype and shape need, its element count within the
  // compiler's limit, zeros aside: neither [2^62, 8] nor the empty
  // [0, 2^40, 2^40] may pass as a small tensor (whose element count would
  // overflow wherever it is computed).
  llvm::Expected<uint64_t> checkedByteSize(const TensorEntry &entry) const {
    std::optional<int64_t> elements = limits::checkedElementCount(entry.shape);
    if (!elements)
      return error("tensor \"" + entry.name + "\" has shape " + formatShape(entry.shape) +
                   " with more than 2^40 elements (the product of its nonzero sizes)");
    return dtypeSize(entry.dtype) * static_cast<uint64_t>(*elements);
  }

  llvm::Error parseMetadata(const ordered_json &json, std::map<std::string, std::string> &metadata) const {
    if (!json.is_object()) return error("\"__metadata__\" is " + std::string(json.type_name()) + ", not an object");
    for (const auto &[key, value] : json.items()) {
      if (!value.is_string()) return error("\"__metadata__\" entry \"" + key + "\" is not a string");
      metadata[key] = value.get<std::string>();
    }
    return llvm::Error::success();
  }

private:
  llvm::StringRef path;
};

}  // namespace

// Exact for every input (normal, subnormal, inf, NaN).
float halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // A subnormal half is a normal float: shift the leading one into place.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(127 - 15 + 1 - shift) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bfloat16 is the upper half of a binary32.
float bfloat16ToFloat(uint16_t bfloat) {
  uint32_t bits = static_cast<uint32_t>(bfloat) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

llvm::StringRef dtypeName(DType dtype) { return infoOf(dtype).fileName; }

std::string dtypeModelName(DType dtype) { return infoOf(dtype).modelName.str(); }

std::optional<DType> parseDType(llvm::StringRef name) {
  for (const DTypeInfo &info : kDTypes)
    if (info.fileName == name) return info.dtype;
  return std::nullopt;
}

unsigned dtypeSize(DType dtype) { return infoOf(dtype).size; }

bool isFloatingPoint(DType dtype) {
  switch (dtype) {
  case DType::F8_E5M2:
  case DType::F8_E4M3:
  case DType::F16:
  case DType::BF16:
  case DType::F32:
  case DType::F64:
    return true;
  default:
    return false;
  }
}

int64_t TensorEntry::numElements() const {
  // Entries are validated against the limit (parseEntry).
  return limits::checkedElementCount(shape).value();
}

std::string TensorEntry::typeString() const { return dtypeModelName(dtype) + formatShape(shape); }

llvm::Expected<SafetensorsFile> SafetensorsFile::open(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), (path + ": cannot open: " + buffer.getError().message()).str());
  return fromBuffer(std::move(*buffer), path);
}

llvm::Expected<SafetensorsFile> SafetensorsFile::fromBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                                            llvm::StringRef path) {
  HeaderValidator validator(path);
  llvm::ArrayRef<uint8_t> file(reinterpret_cast<const uint8_t *>(buffer->getBufferStart()), buffer->getBufferSize());
  // Another kind of file (a model, an artifact, GGUF weights: openWeightsFile
  // reads those) is named for what it is, before its bytes are read as a
  // header length.
  FileKind kind = sniffFileKind(std::span<const uint8_t>(file.data(), std::min<size_t>(file.size(), 4096)));
  if (kind != FileKind::Safetensors && kind != FileKind::Unknown && !file.empty())
    return validator.error(llvm::Twine("the file is ") + describeFileKind(kind) + ", not a safetensors weights file");
  if (file.size() < 8)
    return validator.error("the file is " + llvm::Twine(file.size()) +
                           " bytes, too short for the 8-byte header length");
  uint64_t headerSize = llvm::support::endian::read64le(file.data());
  if (headerSize > file.size() - 8)
    return validator.error("header length " + llvm::Twine(headerSize) + " runs past the end of the file (" +
                           llvm::Twine(file.size()) + " bytes)");
  if (headerSize > kMaxHeaderBytes)
    return validator.error("header length " + llvm::Twine(headerSize) + " exceeds the limit of " +
                           llvm::Twine(kMaxHeaderBytes) + " bytes");

  const char *headerBegin = reinterpret_cast<const char *>(file.data() + 8);
  // JSON silently keeps the last of two equal keys; for a weights file that
  // would hide a tensor, so the parser callback records duplicates.
  std::set<std::string> names;
  std::optional<std::string> duplicate;
  ordered_json::parser_callback_t checkDuplicates = [&](int depth, ordered_json::parse_event_t event,
                                                        ordered_json &parsed) {
    if (depth == 1 && event == ordered_json::parse_event_t::key && !duplicate &&
        !names.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  ordered_json header;
  // nlohmann::json reports syntax errors only as exceptions; they carry the
  // position, so catch them here and turn them into the error we return.
  try {
    header = ordered_json::parse(headerBegin, headerBegin + headerSize, checkDuplicates);
  } catch (const ordered_json::exception &failure) {
    return validator.error(llvm::Twine("header is not valid JSON: ") + failure.what());
  }
  if (!header.is_object()) return validator.error("header is JSON " + std::string(header.type_name()) + ", not an object");
  if (duplicate) return validator.error("header names \"" + *duplicate + "\" twice");

  SafetensorsFile result;
  result.path_ = path.str();
  result.data_ = file.drop_front(8 + headerSize);
  for (const auto &[name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (llvm::Error error = validator.parseMetadata(value, result.metadata_)) return error;
      continue;
    }
    llvm::Expected<TensorEntry> entry = validator.parseEntry(name, value, result.data_.size());
    if (!entry) return entry.takeError();
    result.indexByName_[name] = result.entries_.size();
    result.bytes_.push_back(result.data_.slice(entry->begin, entry->end - entry->begin));
    result.entries_.push_back(std::move(*entry));
  }
  result.buffer_ = std::move(buffer);
  return result;
}

llvm::Expected<SafetensorsFile> SafetensorsFile::fromTensors(std::vector<TensorInMemory> tensors,
                                                             llvm::StringRef path) {
  HeaderValidator validator(path);
  SafetensorsFile result;
  result.path_ = path.str();
  uint64_t offset = 0;
  for (TensorInMemory &tensor : tensors) {
    std::string quoted = "tensor \"" + tensor.name + "\"";
    if (tensor.name == kMetadataKey) return validator.error(quoted + " has the name of the format's metadata entry");
    if (!result.indexByName_.try_emplace(tensor.name, result.entries_.size()).second)
      return validator.error("two tensors are named \"" + tensor.name + "\"");
    for (int64_t size : tensor.shape)
      if (size < 0)
        return validator.error(quoted + " has size " + llvm::Twine(size) + " in its shape " + formatShape(tensor.shape));
    TensorEntry entry{std::move(tensor.name), tensor.dtype, std::move(tensor.shape), offset, offset};
    llvm::Expected<uint64_t> byteSize = validator.checkedByteSize(entry);
    if (!byteSize) return byteSize.takeError();
    if (tensor.bytes.size() != *byteSize)
      return validator.error(quoted + " holds " + llvm::Twine(tensor.bytes.size()) + " bytes but " +
                             entry.typeString() + " needs " + llvm::Twine(*byteSize));
    entry.end = offset += *byteSize;
    result.bytes_.push_back(tensor.bytes);
    result.entries_.push_back(std::move(entry));
  }
  return result;
}

const TensorEntry *SafetensorsFile::find(llvm::StringRef name) const {
  auto it = indexByName_.find(name);
  return it == indexByName_.end() ? nullptr : &entries_[it->second];
}

llvm::ArrayRef<uint8_t> SafetensorsFile::bytes(const TensorEntry &entry) const {
  assert(&entry >= entries_.data() && &entry < entries_.data() + entries_.size() && "entry from another file");
  return bytes_[&entry - entries_.data()];
}

void releaseMappedPages(const llvm::MemoryBuffer &buffer, llvm::ArrayRef<uint8_t> bytes) {
  if (buffer.getBufferKind() != llvm::MemoryBuffer::MemoryBuffer_MMap) return;
  assert(bytes.data() >= reinterpret_cast<const uint8_t *>(buffer.getBufferStart()) &&
         bytes.data() + bytes.size() <= reinterpret_cast<const uint8_t *>(buffer.getBufferEnd()) &&
         "bytes from another buffer");
  // The whole pages inside the bytes: a read-only private file mapping, so
  // the kernel drops them and would read them again on a later access.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  const auto end = begin + bytes.size();
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

void SafetensorsFile::release(const TensorEntry &entry) const {
  if (!buffer_) return;
  assert(entry.end <= data_.size() && "entry from another file");
  releaseMappedPages(*buffer_, data_.slice(entry.begin, entry.end - entry.begin));
}

llvm::Expected<std::vector<float>> SafetensorsFile::toF32(const TensorEntry &entry) const {
  using namespace llvm::support;
  llvm::ArrayRef<uint8_t> raw = bytes(entry);
  size_t count = static_cast<size_t>(entry.numElements());
  std::vector<float> values(count);
  switch (entry.dtype) {
  case DType::F32:
    for (size_t i = 0; i < count; ++i) {
      uint32_t bits = endian::read32le(raw.data() + 4 * i);
      std::memcpy(&values[i], &bits, sizeof bits);
    }
    return values;
  case DType::F16:
    for (size_t i = 0; i < count; ++i) values[i] = halfToFloat(endian::read16le(raw.data() + 2 * i));
    return values;
  case DType::BF16:
    for (size_t i = 0; i < count; ++i) values[i] = bfloat16ToFloat(endian::read16le(raw.data() + 2 * i));
    return values;
  case DType::F8_E5M2:
    for (size_t i = 0; i < count; ++i) values[i] = float8E5M2ToFloat(raw[i]);
    return values;
  case DType::F8_E4M3:
    for (size_t i = 0; i < count; ++i) values[i] = float8E4M3ToFloat(raw[i]);
    return values;
  case DType::F64:
    for (size_t i = 0; i < count; ++i) {
      uint64_t bits = endian::read64le(raw.data() + 8 * i);
      double value;
      std::memcpy(&value, &bits, sizeof bits);
      values[i] = static_cast<float>(value);
    }
    return values;
  default:
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   (path_ + ": tensor \"" + entry.name + "\" is " + entry.typeString() +
                                    ", not a floating-point tensor"));
  }
}

}  // namespace ein::weights
