#include <fstream>

#include "ein/npy.hpp"
#include "npy_descr.hpp"

namespace ein::npy {
namespace {

// Version 1.0: a 2-byte header length; the header is padded with spaces so
// the data starts on a 64-byte boundary, as NumPy does.
std::string headerOf(const Array &array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(array.shape[i]);
  shape += array.shape.size() == 1 ? ",)" : ")";
  std::string header =
      std::string("{'descr': '") + descrOf(array.type) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  return header;
}

Status checkArray(const Array &array) {
  if (!*descrOf(array.type))
    return Status(StatusCode::InvalidArgument, std::string("npy: ") + elementTypeName(array.type) + " has no .npy type");
  unsigned __int128 bytes = ein::elementSize(array.type);
  for (int64_t size : array.shape) {
    if (size < 0) return Status(StatusCode::InvalidArgument, "npy: negative size in the shape");
    bytes *= static_cast<uint64_t>(size);
    if (bytes > (uint64_t{1} << 62)) return Status(StatusCode::InvalidArgument, "npy: the shape is too large");
  }
  if (bytes != array.data.size())
    return Status(StatusCode::InvalidArgument, "npy: the shape needs " + std::to_string(static_cast<uint64_t>(bytes)) +
                                                   " bytes of data, the array holds " +
                                                   std::to_string(array.data.size()));
  return Status();
}

}  // namespace

std::vector<uint8_t> serialize(const Array &array) {
  std::string header = headerOf(array);
  std::vector<uint8_t> bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  bytes.push_back(static_cast<uint8_t>(header.size() & 0xff));
  bytes.push_back(static_cast<uint8_t>(header.size() >> 8));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), array.data.begin(), array.data.end());
  return bytes;
}

Status write(const std::string &path, const Array &array) {
  Status valid = checkArray(array);
  if (!valid.ok()) return Status(valid.code(), path + ": " + valid.message());
  if (headerOf(array).size() > 0xffff) return Status(StatusCode::InvalidArgument, path + ": the header is too long");
  std::vector<uint8_t> bytes = serialize(array);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return Status(StatusCode::IoError, path + ": cannot create");
  file.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return Status(StatusCode::IoError, path + ": write failed");
  return Status();
}

}  // namespace ein::npy
