// Checks and messages shared by Session and Runner, so both reject a wrong
// input with the same words.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "ein/model.hpp"
#include "ein/status.hpp"

namespace ein::detail {

// "f32[2, 3]"
std::string describe(DType dtype, std::span<const int64_t> shape);
// "x, flags", or "none"
std::string namesOf(const std::vector<TensorInfo> &infos);

// Whether `model` can run with `threads` threads on `device` (number
// `deviceIndex`, -1 for the default) in this build.
Status checkCanRun(const Model *model, int threads, Device device, int deviceIndex);

// Whether dtype, shape and byte size equal `info`'s exactly, and data is
// given when there are bytes.
Status checkInput(const TensorInfo &info, DType dtype, std::span<const int64_t> shape, const void *data, size_t bytes);

// NotFound naming the model's inputs or outputs.
Status noSuchInput(std::string_view name, const std::vector<TensorInfo> &inputs);
Status noSuchOutput(std::string_view name, const std::vector<TensorInfo> &outputs);

}  // namespace ein::detail
