#include "io_checks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ein/describe.hpp"
#include "executor/executor.hpp"

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
  if (!deviceAvailable(device)) return deviceUnavailable(device);
  if (deviceIndex < -1 || (device == Device::Cpu && deviceIndex > 0))
    return Status(StatusCode::InvalidArgument, fmt::format("no device {}:{}", deviceName(device), deviceIndex));
  if (device != model->target())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("{} was compiled for {}; it cannot run on {} (recompile with --target {})", model->name(),
                              deviceName(model->target()), deviceName(device), deviceName(device)));
  return Status();
}

Status checkInput(const TensorInfo &info, DType dtype, std::span<const int64_t> shape, const void *data,
                  size_t bytes) {
  bool shapeMatches = shape.size() == info.shape.size() && std::equal(shape.begin(), shape.end(), info.shape.begin());
  if (dtype != info.dtype || !shapeMatches)
    return Status(StatusCode::InvalidArgument, fmt::format("input \"{}\" expects {}, got {}", info.name,
                                                           describe(info.dtype, info.shape), describe(dtype, shape)));
  if (bytes != info.byteSize())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("input \"{}\" expects {} bytes, got {}", info.name, info.byteSize(), bytes));
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
