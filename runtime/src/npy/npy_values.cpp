// Element conversions and comparisons of .npy arrays.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "ein/half_float.hpp"
#include "ein/npy.hpp"

namespace ein::npy {
namespace {

template <typename T>
T load(const uint8_t *bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

std::string positionText(const std::vector<int64_t> &position) {
  std::string text = "[";
  for (size_t i = 0; i < position.size(); ++i) text += (i ? ", " : "") + std::to_string(position[i]);
  return text + "]";
}

}  // namespace

std::vector<double> toDouble(const Array &array) {
  size_t count = array.data.size() / ein::elementSize(array.type);
  std::vector<double> values(count);
  const uint8_t *data = array.data.data();
  for (size_t i = 0; i < count; ++i) {
    switch (array.type) {
      case ElementType::F16: values[i] = ein::halfToFloat(load<uint16_t>(data + 2 * i)); break;
      case ElementType::BF16: values[i] = ein::bfloatToFloat(load<uint16_t>(data + 2 * i)); break;
      case ElementType::F32: values[i] = load<float>(data + 4 * i); break;
      case ElementType::F64: values[i] = load<double>(data + 8 * i); break;
      case ElementType::I8: values[i] = load<int8_t>(data + i); break;
      case ElementType::I16: values[i] = load<int16_t>(data + 2 * i); break;
      case ElementType::I32: values[i] = load<int32_t>(data + 4 * i); break;
      case ElementType::I64: values[i] = static_cast<double>(load<int64_t>(data + 8 * i)); break;
      case ElementType::U8: values[i] = data[i]; break;
      case ElementType::U16: values[i] = load<uint16_t>(data + 2 * i); break;
      case ElementType::U32: values[i] = load<uint32_t>(data + 4 * i); break;
      case ElementType::U64: values[i] = static_cast<double>(load<uint64_t>(data + 8 * i)); break;
      case ElementType::Bool: values[i] = data[i] ? 1.0 : 0.0; break;
      case ElementType::I4: values[i] = 0.0; break;  // weights only: never an array (npy_types.cpp)
    }
  }
  return values;
}

Comparison compare(const Array &got, const Array &expected, double atol, double rtol) {
  Comparison result;
  result.atol = atol;
  result.rtol = rtol;
  result.gotShape = got.shape;
  result.expectedShape = expected.shape;
  if (got.shape != expected.shape) {
    result.shapesMatch = false;
    result.allClose = false;
    return result;
  }
  std::vector<double> g = toDouble(got), e = toDouble(expected);
  result.count = e.size();
  double worstExcess = -INFINITY;
  for (size_t i = 0; i < e.size(); ++i) {
    double excess;
    if (std::isnan(e[i]) || std::isnan(g[i])) excess = std::isnan(e[i]) && std::isnan(g[i]) ? -INFINITY : INFINITY;
    else if (std::isinf(e[i]) || std::isinf(g[i])) excess = g[i] == e[i] ? -INFINITY : INFINITY;
    else excess = std::fabs(g[i] - e[i]) - (atol + rtol * std::fabs(e[i]));
    if (excess > 0) ++result.mismatches;
    if (excess > worstExcess || i == 0) {
      worstExcess = excess;
      result.worstIndex = i;
    }
  }
  result.allClose = result.mismatches == 0;
  if (!e.empty()) {
    result.worstGot = g[result.worstIndex];
    result.worstExpected = e[result.worstIndex];
    // Row-major multi-index of the worst element.
    result.worstPosition.assign(got.shape.size(), 0);
    size_t rest = result.worstIndex;
    for (size_t axis = got.shape.size(); axis-- > 0;) {
      result.worstPosition[axis] = static_cast<int64_t>(rest % static_cast<size_t>(got.shape[axis]));
      rest /= static_cast<size_t>(got.shape[axis]);
    }
  }
  return result;
}

std::string Comparison::describe() const {
  std::ostringstream out;
  out.precision(9);
  if (!shapesMatch) {
    out << "shape " << positionText(gotShape) << " differs from the expected " << positionText(expectedShape);
    return out.str();
  }
  if (count == 0) return "no elements";
  out << (allClose ? "closest to its tolerance: " : "worst: ") << "element " << positionText(worstPosition)
      << " (flat " << worstIndex << "): got " << worstGot << ", expected " << worstExpected << " (|diff| "
      << std::fabs(worstGot - worstExpected) << ", tolerance " << atol + rtol * std::fabs(worstExpected) << ")";
  out << "; " << mismatches << " of " << count << " elements differ";
  return out.str();
}

}  // namespace ein::npy
