#include "tool_support.hpp"

#include <cstdio>

namespace ein::tools {

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string describeTensor(DType dtype, const std::vector<int64_t> &shape) {
  return dtypeName(dtype) + shapeText(shape);
}

int fail(const char *tool, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", tool, message.c_str());
  return 1;
}

}  // namespace ein::tools
