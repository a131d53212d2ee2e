// Reading sizes and [long] vectors from an untrusted FlatBuffer. The
// FlatBuffers verifier checks the alignment of a vector's length field (4
// bytes) but not of its 8-byte elements, so they are copied out byte-wise
// rather than read through a possibly misaligned pointer.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ein/schema/ein_artifact_generated.h"

namespace ein::detail {

inline std::vector<int64_t> readInt64Vector(const flatbuffers::Vector<int64_t> *values) {
  if (!values) return {};
  std::vector<int64_t> result(values->size());
  if (!result.empty()) std::memcpy(result.data(), values->Data(), result.size() * sizeof(int64_t));
  for (int64_t &value : result) value = flatbuffers::EndianScalar(value);  // a no-op on little-endian hosts
  return result;
}

// The encoded value of the Size whose bytes start at `at`, at any alignment
// (a vector's elements may sit 4 bytes off their 8-byte alignment).
inline int64_t readSizeAt(const void *at) {
  int64_t value;
  std::memcpy(&value, at, sizeof value);
  return flatbuffers::EndianScalar(value);
}

// A Size field's encoded value (schema step_types.fbs); absent: the constant 0.
inline int64_t readSize(const schema::Size *size) { return size ? readSizeAt(size) : 0; }

inline std::vector<int64_t> readSizes(const flatbuffers::Vector<const schema::Size *> *sizes) {
  if (!sizes) return {};
  static_assert(sizeof(schema::Size) == sizeof(int64_t));
  std::vector<int64_t> result(sizes->size());
  if (!result.empty()) std::memcpy(result.data(), sizes->Data(), result.size() * sizeof(int64_t));
  for (int64_t &value : result) value = flatbuffers::EndianScalar(value);
  return result;
}

// A [string] field's strings (the verifier has checked each); absent: none.
inline std::vector<std::string> readStrings(const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>> *strings) {
  std::vector<std::string> result;
  if (!strings) return result;
  result.reserve(strings->size());
  for (const flatbuffers::String *text : *strings) result.push_back(text ? text->str() : std::string());
  return result;
}

}  // namespace ein::detail
