#include "loader/artifact_framing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "file_kind.hpp"

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

// For a file that is recognisably something else, what it is and what to do
// with it; empty for an artifact (perhaps a damaged one) or an unknown file.
std::string otherKindOfFile(const std::byte *data, size_t size) {
  const FileKind kind = sniffFileKind({reinterpret_cast<const uint8_t *>(data), std::min<size_t>(size, 4096)});
  const std::string is = fmt::format("not an ein artifact: the file is {}", describeFileKind(kind));
  switch (kind) {
    case FileKind::EinText: return is + " (a .ein model? compile it first: einc MODEL.ein -o MODEL.einb)";
    case FileKind::Safetensors: return is + " (weights: give them to einc with --weights)";
    case FileKind::Gguf: return is + ", which ein does not run";
    case FileKind::Npy: return is + " (an input: give it to ein-run with --input NAME=FILE.npy)";
    case FileKind::Artifact: case FileKind::Unknown: return "";
  }
  return "";
}

}  // namespace

StatusOr<Framing> verifyFraming(const std::byte *data, size_t size) {
  if (std::string other = otherKindOfFile(data, size); !other.empty()) return invalid(other);
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
