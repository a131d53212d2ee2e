#include "io_checks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ein/describe.hpp"
#include "backends/backend.hpp"
#include "util/limits.hpp"

namespace ein::detail {

std::string describe(DType dtype, std::span<const int64_t> shape) { return typeText(dtype, shape); }

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
Status checkAxes(const TensorInfo &info, const std::vector<DimInfo> &dims, DType dtype,
                 std::span<const int64_t> shape) {
  auto mismatch = [&] {
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" expects {}, got {}", info.name, describe(info), describe(dtype, shape)));
  };
  if (dtype != info.dtype || shape.size() != info.shape.size()) return mismatch();
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

Status checkInput(const TensorInfo &info, const std::vector<DimInfo> &dims, DType dtype,
                  std::span<const int64_t> shape, const void *data, size_t bytes) {
  if (Status status = checkAxes(info, dims, dtype, shape); !status.ok()) return status;
  std::optional<int64_t> elements = checkedElementCount(shape);
  if (!elements)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" of shape {} has more elements than the runtime's limit of 2^40", info.name,
                              describe(dtype, shape)));
  const size_t expected = static_cast<size_t>(*elements) * dtypeSize(dtype);
  if (bytes != expected)
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" expects {} bytes, got {}", info.name, expected, bytes));
  if (bytes && !data) return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\": no data", info.name));
  return Status();
}

Status noSuchInput(std::string_view name, const std::vector<TensorInfo> &inputs) {
  return Status(StatusCode::NotFound, fmt::format("the model has no input \"{}\" (inputs: {})", name, namesOf(inputs)));
}

Status noSuchOutput(std::string_view name, const std::vector<TensorInfo> &outputs) {
  return Status(StatusCode::NotFound,
                fmt::format("the model has no output \"{}\" (outputs: {})", name, namesOf(outputs)));
}

}  // namespace ein::detail
