// Reading [long] vectors from an untrusted FlatBuffer. The FlatBuffers
// verifier checks the alignment of a vector's length field (4 bytes) but not
// of its 8-byte elements, so they are copied out byte-wise rather than read
// through a possibly misaligned int64_t pointer.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace ein::detail {

inline std::vector<int64_t> readInt64Vector(const flatbuffers::Vector<int64_t> *values) {
  if (!values) return {};
  std::vector<int64_t> result(values->size());
  if (!result.empty()) std::memcpy(result.data(), values->Data(), result.size() * sizeof(int64_t));
  for (int64_t &value : result) value = flatbuffers::EndianScalar(value);  // a no-op on little-endian hosts
  return result;
}

}  // namespace ein::detail
