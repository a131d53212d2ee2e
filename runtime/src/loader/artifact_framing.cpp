#include "loader/artifact_framing.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string>

namespace ein::detail {
namespace {

constexpr uint64_t kWeightAlignment = 64;

Status invalid(std::string message) { return Status(StatusCode::InvalidArtifact, std::move(message)); }

// The four identifier bytes, printable characters as they are, others as \xNN.
std::string printable(const std::byte *bytes, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    text += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  }
  return text;
}

}  // namespace

StatusOr<Framing> verifyFraming(const std::byte *data, size_t size) {
  const size_t prefixBytes = sizeof(flatbuffers::uoffset_t);
  // Size prefix, root offset and identifier.
  if (size < prefixBytes + 8)
    return invalid(fmt::format("the file is {} bytes long, too short for an ein artifact", size));
  flatbuffers::uoffset_t flatbufferBytes;
  std::memcpy(&flatbufferBytes, data, prefixBytes);  // little-endian, as FlatBuffers on every supported host
  if (flatbufferBytes > size - prefixBytes)
    return invalid(fmt::format("the size prefix claims a {}-byte FlatBuffer but only {} bytes follow it (truncated?)",
                               flatbufferBytes, size - prefixBytes));
  if (flatbufferBytes + prefixBytes >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return invalid(fmt::format("the FlatBuffer's size {} exceeds FlatBuffers' limit", flatbufferBytes));
  const auto *buffer = reinterpret_cast<const uint8_t *>(data);
  if (!flatbuffers::BufferHasIdentifier(buffer + prefixBytes, schema::ModelIdentifier()))
    return invalid(fmt::format("not an ein artifact: the file identifier is \"{}\", expected \"{}\"",
                               printable(data + prefixBytes + 4, 4), schema::ModelIdentifier()));

  flatbuffers::Verifier verifier(buffer, flatbufferBytes + prefixBytes);
  if (!schema::VerifySizePrefixedModelBuffer(verifier))
    return invalid("the FlatBuffer is malformed (it fails FlatBuffers verification)");
  const schema::Model *model = schema::GetSizePrefixedModel(buffer);

  const auto expectedVersion = static_cast<uint32_t>(schema::FormatVersion::Current);
  if (model->format_version() != expectedVersion)
    return invalid(fmt::format("format version {} is not supported (this runtime reads version {}); "
                               "recompile the model with a matching einc",
                               model->format_version(), expectedVersion));

  uint64_t offset = model->weights_offset(), bytes = model->weights_bytes();
  uint64_t flatbufferEnd = uint64_t{flatbufferBytes} + prefixBytes;
  if (offset % kWeightAlignment != 0)
    return invalid(fmt::format("the weight segment's offset {} is not a multiple of {}", offset, kWeightAlignment));
  if (offset < flatbufferEnd)
    return invalid(fmt::format("the weight segment's offset {} lies inside the FlatBuffer, which ends at {}", offset,
                               flatbufferEnd));
  if (offset > size || bytes > size - offset)
    return invalid(fmt::format("the weight segment ({} bytes at offset {}) runs past the end of the {}-byte file",
                               bytes, offset, size));
  return Framing{model, data + offset, bytes};
}

}  // namespace ein::detail
