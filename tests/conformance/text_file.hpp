// What the conformance tests read whole: case files, einc's logs.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

// The text of the file at `path` ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path &path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}
