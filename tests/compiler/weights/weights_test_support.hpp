// What the weights readers' tests share: files written into a temporary
// folder, safetensors files built byte by byte, and error messages as text.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

namespace ein::weights::test {

inline std::string errorMessage(llvm::Error error) { return llvm::toString(std::move(error)); }

// The 8-byte little-endian length, the header text, then the data block.
inline std::string safetensorsBytes(const std::string &header, const std::string &data = "") {
  std::string bytes(8, '\0');
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return bytes + header + data;
}

template <typename T>
std::string littleEndianBytes(std::initializer_list<T> values) {
  std::string bytes;
  for (T value : values) {
    char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));  // the test hosts are little-endian
    bytes.append(raw, sizeof(T));
  }
  return bytes;
}

// A fixture with a fresh folder, removed after the test.
class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SmallString<128> path;
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("ein-weights-test", path));
    dir = path.str().str();
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  // Writes `bytes` to `name` under the folder (its own folders made first).
  std::filesystem::path write(const std::string &name, const std::string &bytes) {
    std::filesystem::path path = dir / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path dir;
};

}  // namespace ein::weights::test
