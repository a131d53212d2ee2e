#include "ein/npy.hpp"

#include <cstring>
#include <fstream>
#include <iterator>

namespace ein::npy {
namespace {

Status malformed(const std::string &name, const std::string &why) {
  return Status(StatusCode::InvalidArgument, name + ": not a valid .npy file: " + why);
}

// The value of `key` in the header dict: "'descr': '<f4'" -> "'<f4'".
bool findValue(const std::string &header, const std::string &key, std::string &value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  at = header.find(':', at);
  if (at == std::string::npos) return false;
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  if (at >= header.size()) return false;
  size_t end;
  if (header[at] == '(') end = header.find(')', at);
  else if (header[at] == '\'') end = header.find('\'', at + 1);
  else end = header.find_first_of(",}", at) - 1;
  if (end == std::string::npos || end < at) return false;
  value = header.substr(at, end - at + 1);
  return true;
}

}  // namespace

int64_t Array::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

StatusOr<Array> parse(const uint8_t *bytes, size_t size, const std::string &name) {
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0) return malformed(name, "missing the \\x93NUMPY magic");
  uint8_t major = bytes[6];
  size_t headerLength, start;
  if (major == 1) {
    headerLength = bytes[8] | (bytes[9] << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return malformed(name, "truncated header");
    headerLength = bytes[8] | (bytes[9] << 8) | (bytes[10] << 16) | (static_cast<size_t>(bytes[11]) << 24);
    start = 12;
  } else {
    return malformed(name, "unknown format version " + std::to_string(major));
  }
  if (headerLength > size - start) return malformed(name, "truncated header");
  std::string header(reinterpret_cast<const char *>(bytes + start), headerLength);
  std::string descr, order, shapeText;
  if (!findValue(header, "descr", descr) || !findValue(header, "fortran_order", order) ||
      !findValue(header, "shape", shapeText))
    return malformed(name, "header lacks descr, fortran_order or shape");
  if (order != "False") return malformed(name, "Fortran-order arrays are not supported (save with C order)");
  Array array;
  size_t itemSize;
  bool fromF64 = false;
  if (descr == "'<f4'") { array.dtype = DType::F32; itemSize = 4; }
  else if (descr == "'<f8'") { array.dtype = DType::F32; itemSize = 8; fromF64 = true; }
  else if (descr == "'<i4'") { array.dtype = DType::I32; itemSize = 4; }
  else if (descr == "'<i8'") { array.dtype = DType::I64; itemSize = 8; }
  else if (descr == "'|b1'") { array.dtype = DType::Bool; itemSize = 1; }
  else if (descr == "'<f2'") { array.dtype = DType::F16; itemSize = 2; }
  else return malformed(name, "dtype " + descr + " is not supported (f4, f8, i4, i8, b1, f2, little-endian)");
  // "(2, 3)", "(5,)", "()"
  if (shapeText.size() < 2 || shapeText.front() != '(' || shapeText.back() != ')') return malformed(name, "bad shape");
  std::string inner = shapeText.substr(1, shapeText.size() - 2);
  uint64_t count = 1;
  size_t at = 0;
  while (at < inner.size()) {
    while (at < inner.size() && (inner[at] == ' ' || inner[at] == ',')) ++at;
    if (at >= inner.size()) break;
    size_t end = at;
    while (end < inner.size() && std::isdigit(static_cast<unsigned char>(inner[end]))) ++end;
    if (end == at || end - at > 15) return malformed(name, "bad shape " + shapeText);
    int64_t dim = std::stoll(inner.substr(at, end - at));
    array.shape.push_back(dim);
    if (dim != 0 && count > (uint64_t{1} << 50) / static_cast<uint64_t>(dim)) return malformed(name, "shape too large");
    count *= static_cast<uint64_t>(dim);
    at = end;
  }
  size_t dataStart = start + headerLength;
  if (count * itemSize != size - dataStart)
    return malformed(name, "shape " + shapeText + " needs " + std::to_string(count * itemSize) + " bytes of data, found " +
                               std::to_string(size - dataStart));
  const uint8_t *data = bytes + dataStart;
  if (fromF64) {
    array.data.resize(count * 4);
    for (uint64_t i = 0; i < count; ++i) {
      double value;
      std::memcpy(&value, data + i * 8, 8);
      float narrow = static_cast<float>(value);
      std::memcpy(array.data.data() + i * 4, &narrow, 4);
    }
  } else {
    array.data.assign(data, data + count * itemSize);
  }
  return array;
}

StatusOr<Array> read(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Status(StatusCode::IoError, path + ": cannot open");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse(bytes.data(), bytes.size(), path);
}

Status write(const std::string &path, const Array &array) {
  const char *descr = nullptr;
  switch (array.dtype) {
    case DType::F32: descr = "<f4"; break;
    case DType::I32: descr = "<i4"; break;
    case DType::I64: descr = "<i8"; break;
    case DType::Bool: descr = "|b1"; break;
    case DType::F16: descr = "<f2"; break;
    case DType::BF16: return Status(StatusCode::Unimplemented, "NumPy has no bf16 dtype");
  }
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += std::to_string(array.shape[i]) + (array.shape.size() == 1 ? "," : i + 1 < array.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary, ending the header with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream file(path, std::ios::binary);
  if (!file) return Status(StatusCode::IoError, path + ": cannot create");
  uint16_t length = static_cast<uint16_t>(header.size());
  file.write("\x93NUMPY\x01\x00", 8);
  char lengthBytes[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  file.write(lengthBytes, 2);
  file.write(header.data(), static_cast<std::streamsize>(header.size()));
  file.write(reinterpret_cast<const char *>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
  if (!file) return Status(StatusCode::IoError, path + ": write failed");
  return Status::success();
}

std::vector<double> toDouble(const Array &array) {
  std::vector<double> values(static_cast<size_t>(array.numElements()));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (array.dtype) {
      case DType::F32: { float v; std::memcpy(&v, &array.data[i * 4], 4); values[i] = v; break; }
      case DType::I32: { int32_t v; std::memcpy(&v, &array.data[i * 4], 4); values[i] = v; break; }
      case DType::I64: { int64_t v; std::memcpy(&v, &array.data[i * 8], 8); values[i] = static_cast<double>(v); break; }
      case DType::Bool: values[i] = array.data[i] ? 1.0 : 0.0; break;
      default: values[i] = 0.0; break;
    }
  }
  return values;
}

}  // namespace ein::npy
