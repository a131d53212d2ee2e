#include "api/io_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ein/describe.hpp"
#include "ein/half_float.hpp"
#include "backends/backend.hpp"
#include "util/limits.hpp"

namespace ein::detail {

std::string describe(DType dtype, std::span<const int64_t> shape) { return typeText(dtype, shape); }

std::string describe(ElementType type, std::span<const int64_t> shape) {
  std::string axes;
  for (size_t axis = 0; axis < shape.size(); ++axis) axes += (axis ? ", " : "") + std::to_string(shape[axis]);
  return fmt::format("{}[{}]", elementTypeName(type), axes);
}

std::string namesOf(const std::vector<TensorInfo> &infos) {
  std::string names;
  for (const TensorInfo &info : infos) names += (names.empty() ? "" : ", ") + info.name;
  return names.empty() ? "none" : names;
}

Status checkCanRun(const Model *model, int threads, Device device, int deviceIndex) {
  if (!model) return Status(StatusCode::InvalidArgument, "no model");
  if (threads < 1) return Status(StatusCode::InvalidArgument, fmt::format("threads must be at least 1, got {}", threads));
  if (deviceIndex < -1 || (device == Device::Cpu && deviceIndex > 0))
    return Status(StatusCode::InvalidArgument, fmt::format("no device {}:{}", deviceName(device), deviceIndex));
  if (device != model->target())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} was compiled for {}; it cannot run on {} (recompile with --target {})", model->name(),
                              deviceName(model->target()), deviceName(device), deviceName(device)));
  // The device's backend, loaded now if it is a library.
  return backendFor(device).status();
}

std::string describe(const TensorInfo &info) {
  std::string axes;
  for (size_t axis = 0; axis < info.shape.size(); ++axis) {
    const bool named = axis < info.dims.size() && !info.dims[axis].empty();
    axes += (axis ? ", " : "") + (named ? info.dims[axis] : std::to_string(info.shape[axis]));
  }
  return fmt::format("{}[{}]", dtypeName(info.dtype), axes);
}

namespace {

// Each axis of `shape` against `info`'s: a constant axis equal, a bare dim
// within its range.
Status checkAxes(const TensorInfo &info, const std::vector<DimInfo> &dims, ElementType type,
                 std::span<const int64_t> shape) {
  auto mismatch = [&](std::string_view why = {}) {
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" expects {}, got {}{}{}", info.name, describe(info), describe(type, shape),
                              why.empty() ? "" : ": ", why));
  };
  if (shape.size() != info.shape.size()) return mismatch();
  if (!convertsTo(type, info.dtype)) return mismatch(whyNotConverted(type, info.dtype));
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (info.shape[axis] >= 0) {
      if (shape[axis] != info.shape[axis]) return mismatch();
      continue;
    }
    for (const DimInfo &dim : dims)
      if (dim.name == info.dims[axis] && (shape[axis] < dim.min || shape[axis] > dim.max))
        return Status(StatusCode::InvalidArgument,
                      fmt::format("input \"{}\" axis {} is {}, but dim {} ranges over {}..{}", info.name, axis,
                                  shape[axis], dim.name, dim.min, dim.max));
    if (shape[axis] < 0) return mismatch();
  }
  return Status();
}

}  // namespace

Status checkInput(const TensorInfo &info, const std::vector<DimInfo> &dims, ElementType type,
                  std::span<const int64_t> shape, const void *data, size_t bytes) {
  if (Status status = checkAxes(info, dims, type, shape); !status.ok()) return status;
  std::optional<int64_t> elements = checkedElementCount(shape);
  if (!elements)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" of shape {} has more elements than the runtime's limit of 2^40", info.name,
                              describe(type, shape)));
  const size_t expected = static_cast<size_t>(*elements) * elementSize(type);
  if (bytes != expected)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" expects {} bytes, got {}", info.name, expected, bytes));
  if (bytes && !data) return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\": no data", info.name));
  return Status();
}

namespace {

// "[1, 7]": the row-major position of element `flat` in `shape`.
std::string positionOf(size_t flat, std::span<const int64_t> shape) {
  std::vector<int64_t> position(shape.size());
  for (size_t axis = shape.size(); axis-- > 0;) {
    position[axis] = static_cast<int64_t>(flat % static_cast<size_t>(shape[axis]));
    flat /= static_cast<size_t>(shape[axis]);
  }
  return fmt::format("[{}]", fmt::join(position, ", "));
}

template <typename T>
T load(const void *data, size_t index) {
  T value;
  std::memcpy(&value, static_cast<const std::byte *>(data) + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store(std::byte *out, size_t index, T value) {
  std::memcpy(out + index * sizeof(T), &value, sizeof(T));
}

// Element `index` of integer data as a 128-bit-wide value (every source
// type fits): signed types sign-extended, unsigned ones zero-extended.
__int128 loadInteger(ElementType type, const void *data, size_t index) {
  switch (type) {
    case ElementType::I8: return load<int8_t>(data, index);
    case ElementType::I16: return load<int16_t>(data, index);
    case ElementType::I32: return load<int32_t>(data, index);
    case ElementType::I64: return load<int64_t>(data, index);
    case ElementType::U8: return load<uint8_t>(data, index);
    case ElementType::U16: return load<uint16_t>(data, index);
    case ElementType::U32: return load<uint32_t>(data, index);
    case ElementType::U64: return load<uint64_t>(data, index);
    default: return 0;
  }
}

std::string integerText(__int128 value) {
  if (value >= 0) return std::to_string(static_cast<uint64_t>(value));
  return std::to_string(static_cast<int64_t>(value));
}

template <typename Target>
Status convertIntegers(const TensorInfo &info, ElementType type, std::span<const int64_t> shape, size_t count,
                       const void *data, std::byte *out) {
  for (size_t i = 0; i < count; ++i) {
    const __int128 value = loadInteger(type, data, i);
    if (value < std::numeric_limits<Target>::min() || value > std::numeric_limits<Target>::max())
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" element {} is {}, which does not fit the input's {}", info.name,
                                positionOf(i, shape), integerText(value), dtypeName(info.dtype)));
    store(out, i, static_cast<Target>(value));
  }
  return Status();
}

}  // namespace

Status checkInputValues(const TensorInfo &info, ElementType type, std::span<const int64_t> shape, const void *data) {
  if (info.upperBound <= 0 || !isInteger(type)) return Status();
  size_t count = 1;
  for (int64_t size : shape) count *= static_cast<size_t>(size);
  for (size_t i = 0; i < count; ++i) {
    const __int128 value = loadInteger(type, data, i);
    if (value < 0 || value >= info.upperBound)
      return Status(StatusCode::InvalidArgument,
                    fmt::format("input \"{}\" element {} is {}, outside [0, {}): the ids index a table of {} rows",
                                info.name, positionOf(i, shape), integerText(value), info.upperBound,
                                info.upperBound));
  }
  return Status();
}

Status convertInput(const TensorInfo &info, ElementType type, std::span<const int64_t> shape, const void *data,
                    std::byte *out) {
  size_t count = 1;
  for (int64_t size : shape) count *= static_cast<size_t>(size);
  if (type == elementType(info.dtype)) {
    if (count) std::memcpy(out, data, count * dtypeSize(info.dtype));
    return Status();
  }
  if (info.dtype == DType::I32) return convertIntegers<int32_t>(info, type, shape, count, data, out);
  if (info.dtype == DType::I64) return convertIntegers<int64_t>(info, type, shape, count, data, out);
  if (isFloat(elementType(info.dtype))) {
    for (size_t i = 0; i < count; ++i) {
      double wide = 0.0;
      switch (type) {
        case ElementType::F64: wide = load<double>(data, i); break;
        case ElementType::F32: wide = load<float>(data, i); break;
        case ElementType::F16: wide = halfToFloat(load<uint16_t>(data, i)); break;
        default: wide = bfloatToFloat(load<uint16_t>(data, i)); break;
      }
      const auto narrow = static_cast<float>(wide);
      float stored = narrow;
      if (info.dtype == DType::F32) store(out, i, narrow);
      else {
        const uint16_t bits = info.dtype == DType::F16 ? floatToHalf(narrow) : floatToBfloat(narrow);
        store(out, i, bits);
        stored = info.dtype == DType::F16 ? halfToFloat(bits) : bfloatToFloat(bits);
      }
      if (std::isinf(stored) && std::isfinite(wide))
        return Status(StatusCode::InvalidArgument,
                      fmt::format("input \"{}\" element {} is {}, beyond {}'s range", info.name, positionOf(i, shape),
                                  wide, dtypeName(info.dtype)));
    }
    return Status();
  }
  return Status(StatusCode::Internal, fmt::format("input \"{}\": no conversion from {} to {}", info.name,
                                                  elementTypeName(type), dtypeName(info.dtype)));
}

Status noSuchInput(std::string_view name, const std::vector<TensorInfo> &inputs) {
  return Status(StatusCode::NotFound, fmt::format("the model has no input \"{}\" (inputs: {})", name, namesOf(inputs)));
}

Status noSuchOutput(std::string_view name, const std::vector<TensorInfo> &outputs) {
  return Status(StatusCode::NotFound,
                fmt::format("the model has no output \"{}\" (outputs: {})", name, namesOf(outputs)));
}

}  // namespace ein::detail
