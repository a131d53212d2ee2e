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

std::string describeTensor(const TensorInfo &info) {
  std::string axes;
  for (size_t axis = 0; axis < info.shape.size(); ++axis) {
    const bool named = axis < info.dims.size() && !info.dims[axis].empty();
    axes += (axis ? ", " : "") + (named ? info.dims[axis] : std::to_string(info.shape[axis]));
  }
  return dtypeName(info.dtype) + ("[" + axes + "]");
}

std::string dimsText(const std::vector<DimInfo> &dims, const std::vector<int64_t> &values) {
  std::string text;
  for (size_t d = 0; d < dims.size() && d < values.size(); ++d)
    text += (d ? ", " : "") + dims[d].name + " = " + std::to_string(values[d]);
  return text;
}

int fail(const char *tool, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", tool, message.c_str());
  return 1;
}

}  // namespace ein::tools
