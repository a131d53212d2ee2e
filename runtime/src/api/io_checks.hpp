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
std::string describe(ElementType type, std::span<const int64_t> shape);
// "x, flags", or "none"
std::string namesOf(const std::vector<TensorInfo> &infos);

// Whether `model` can run with `threads` threads on `device` (number
// `deviceIndex`, -1 for the default) in this build.
Status checkCanRun(const Model *model, int threads, Device device, int deviceIndex);

// "i32[b, t]": the shape with each dynamic axis's expression.
std::string describe(const TensorInfo &info);

// Whether `type` converts to `info`'s dtype (types.hpp's policy), the shape
// fits `info`, the byte size is the shape's in `type`, and data is given when
// there are bytes. A static shape must be equal; an axis that is a bare dim
// of `dims` may have any size in its range, and any other dynamic axis any
// size (a run checks the inputs against each other and the dims'
// expressions when it binds the dims).
Status checkInput(const TensorInfo &info, const std::vector<DimInfo> &dims, ElementType type,
                  std::span<const int64_t> shape, const void *data, size_t bytes);

// Ids of an input that indexes a table (TensorInfo::upperBound) must lie in
// [0, upperBound): checked where they enter, so a wrong id is reported as the
// input's element rather than as a kernel step's failure.
Status checkInputValues(const TensorInfo &info, ElementType type, std::span<const int64_t> shape, const void *data);

// Writes the checked input `data` (`shape` elements of `type`) to `out` as
// `info.dtype`: a copy when the types are equal, else the conversion policy's
// (types.hpp). A value the input's type cannot hold is an error naming the
// input and the element; `out` then holds a partial result.
Status convertInput(const TensorInfo &info, ElementType type, std::span<const int64_t> shape, const void *data,
                    std::byte *out);

// NotFound naming the model's inputs or outputs.
Status noSuchInput(std::string_view name, const std::vector<TensorInfo> &inputs);
Status noSuchOutput(std::string_view name, const std::vector<TensorInfo> &outputs);

}  // namespace ein::detail
