// Helpers shared by ein-run and ein-inspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::tools {

// "f32[2, 3]"
std::string describeTensor(DType dtype, const std::vector<int64_t> &shape);
// "[2, 3]"
std::string shapeText(const std::vector<int64_t> &shape);
// Prints "TOOL: message" to stderr and returns the exit status for errors.
int fail(const char *tool, const std::string &message);

}  // namespace ein::tools
