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
  size_t count = array.data.size() / elementSize(array.type);
  std::vector<double> values(count);
  const uint8_t *data = array.data.data();
  for (size_t i = 0; i < count; ++i) {
    switch (array.type) {
      case ElementType::F16: values[i] = ein::halfToFloat(load<uint16_t>(data + 2 * i)); break;
      case ElementType::F32: values[i] = load<float>(data + 4 * i); break;
      case ElementType::F64: values[i] = load<double>(data + 8 * i); break;
      case ElementType::I32: values[i] = load<int32_t>(data + 4 * i); break;
      case ElementType::I64: values[i] = static_cast<double>(load<int64_t>(data + 8 * i)); break;
      case ElementType::Bool: values[i] = data[i] ? 1.0 : 0.0; break;
    }
  }
  return values;
}

namespace {

// `array`'s elements, each a From, as To: the conversions below.
template <class From, class To>
Array converted(Array array, ElementType to) {
  size_t count = array.data.size() / sizeof(From);
  std::vector<uint8_t> out(count * sizeof(To));
  for (size_t i = 0; i < count; ++i) {
    auto value = static_cast<To>(load<From>(array.data.data() + sizeof(From) * i));
    std::memcpy(out.data() + sizeof(To) * i, &value, sizeof(To));
  }
  array.type = to;
  array.data = std::move(out);
  return array;
}

}  // namespace

Array narrowF64ToF32(Array array) {
  if (array.type != ElementType::F64) return array;
  return converted<double, float>(std::move(array), ElementType::F32);
}

StatusOr<Array> narrowI64ToI32(Array array) {
  if (array.type != ElementType::I64) return array;
  for (size_t i = 0; i < array.data.size() / 8; ++i) {
    auto value = load<int64_t>(array.data.data() + 8 * i);
    if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
      return Status(StatusCode::InvalidArgument,
                    "element " + std::to_string(i) + " (" + std::to_string(value) + ") does not fit in i32");
  }
  return converted<int64_t, int32_t>(std::move(array), ElementType::I32);
}

Array widenI32ToI64(Array array) {
  if (array.type != ElementType::I32) return array;
  return converted<int32_t, int64_t>(std::move(array), ElementType::I64);
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
