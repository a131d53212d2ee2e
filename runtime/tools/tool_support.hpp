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
// "i32[b, t]": the model's view of an input or output, a dynamic axis by its
// expression over the dims.
std::string describeTensor(const TensorInfo &info);
// "b = 3, t = 7"
std::string dimsText(const std::vector<DimInfo> &dims, const std::vector<int64_t> &values);
// Prints "TOOL: message" to stderr and returns the exit status for errors.
int fail(const char *tool, const std::string &message);

}  // namespace ein::tools
