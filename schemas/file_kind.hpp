// What kind of file a path holds, told by its first bytes: a tool handed the
// wrong file (an artifact as a model, weights as an artifact, a binary as
// text) says what the file is instead of parsing it, or echoing its bytes.
// Header-only and dependency-free (C++20: std::span), so einc, ein-run and
// ein-inspect share one definition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ein {

enum class FileKind {
  EinText,      // valid UTF-8 text without NUL or control bytes: a .ein model, or some other text
  Artifact,     // an ein artifact (.einb): a FlatBuffer with the file identifier "EINB"
  Safetensors,  // 8-byte little-endian header length, then a JSON header starting with '{'
  Gguf,         // magic "GGUF"
  Npy,          // magic "\x93NUMPY"
  Unknown,      // any other binary
};

namespace file_kind_detail {

inline bool startsWith(std::span<const uint8_t> bytes, const char *magic, size_t length) {
  if (bytes.size() < length) return false;
  for (size_t i = 0; i < length; ++i)
    if (bytes[i] != static_cast<uint8_t>(magic[i])) return false;
  return true;
}

inline bool hasIdentifierAt(std::span<const uint8_t> bytes, size_t offset) {
  return bytes.size() >= offset + 4 && bytes[offset] == 'E' && bytes[offset + 1] == 'I' &&
         bytes[offset + 2] == 'N' && bytes[offset + 3] == 'B';
}

// Valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF),
// no NUL and no C0 control byte besides tab, line feed, vertical tab, form
// feed, carriage return and escape. A multi-byte sequence cut off by the end
// of `bytes` is accepted: callers may pass only the file's first bytes.
inline bool isText(std::span<const uint8_t> bytes) {
  size_t i = 0, n = bytes.size();
  while (i < n) {
    uint8_t c = bytes[i];
    if (c < 0x80) {
      bool allowedControl = (c >= 0x09 && c <= 0x0d) || c == 0x1b;
      if (c < 0x20 && !allowedControl) return false;
      ++i;
      continue;
    }
    size_t length;
    uint32_t minimum;
    uint32_t codePoint;
    if ((c & 0xe0) == 0xc0) {
      length = 2, minimum = 0x80, codePoint = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      length = 3, minimum = 0x800, codePoint = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      length = 4, minimum = 0x10000, codePoint = c & 0x07;
    } else {
      return false;  // a continuation byte without a lead, or 0xf8..0xff
    }
    size_t available = n - i < length ? n - i : length;
    for (size_t k = 1; k < available; ++k) {
      if ((bytes[i + k] & 0xc0) != 0x80) return false;
      codePoint = (codePoint << 6) | (bytes[i + k] & 0x3f);
    }
    if (available < length) return true;  // cut off by the end of the bytes given
    if (codePoint < minimum || codePoint > 0x10ffff || (codePoint >= 0xd800 && codePoint <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

}  // namespace file_kind_detail

// `firstBytes`: the file's first bytes (4096 are plenty; the whole file is
// fine). An empty file is EinText. The binary kinds are recognised by their
// magic numbers first, so text is only what none of them claims.
inline FileKind sniffFileKind(std::span<const uint8_t> firstBytes) {
  using namespace file_kind_detail;
  if (startsWith(firstBytes, "GGUF", 4)) return FileKind::Gguf;
  if (startsWith(firstBytes, "\x93NUMPY", 6)) return FileKind::Npy;
  // A FlatBuffer's identifier follows its 4-byte root offset, and a
  // size-prefixed one's (as einc writes) follows the 4-byte size too. The
  // root offset is small: its high byte is 0, which text never has.
  if (hasIdentifierAt(firstBytes, 8) && firstBytes[7] == 0) return FileKind::Artifact;
  if (hasIdentifierAt(firstBytes, 4) && firstBytes[3] == 0) return FileKind::Artifact;
  if (firstBytes.size() >= 9 && firstBytes[8] == '{') {
    uint64_t headerBytes = 0;
    for (int i = 7; i >= 0; --i) headerBytes = (headerBytes << 8) | firstBytes[i];
    if (headerBytes >= 2 && headerBytes < (uint64_t{1} << 32)) return FileKind::Safetensors;
  }
  if (isText(firstBytes)) return FileKind::EinText;
  return FileKind::Unknown;
}

// A noun phrase for messages: "<path> is <describeFileKind(kind)>".
inline const char *describeFileKind(FileKind kind) {
  switch (kind) {
  case FileKind::EinText: return "a text file";
  case FileKind::Artifact: return "an ein artifact (compiled model)";
  case FileKind::Safetensors: return "a safetensors weights file";
  case FileKind::Gguf: return "a GGUF weights file";
  case FileKind::Npy: return "a NumPy array (.npy)";
  case FileKind::Unknown: return "a binary file of unknown kind";
  }
  return "a file of unknown kind";
}

}  // namespace ein
