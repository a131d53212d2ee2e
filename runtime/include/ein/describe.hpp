// Models and tensor types as text, as ein-inspect prints them; the Python
// package's Model.describe() returns the same text.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ein/model.hpp"
#include "ein/types.hpp"

namespace ein {

// "[2, 3]"
std::string shapeText(std::span<const int64_t> shape);
// "f32[2, 3]", as the model language writes a tensor type.
std::string typeText(DType dtype, std::span<const int64_t> shape);
// "i32[b, t]": an input's or output's type, an axis that depends on the dims
// by its expression over them.
std::string typeText(const TensorInfo &info);
// "b = 1..16, t = 1..256"
std::string dimRangesText(const std::vector<DimInfo> &dims);
// "b = 3, t = 7": the dims at one run's values.
std::string dimValuesText(const std::vector<DimInfo> &dims, std::span<const int64_t> values);
// The CPU kernels this process runs, the best table CPUID allows (or the one
// EIN_CPU_ISA names): "amx", "avx512bf16", "avx512vnni", "avx512",
// "avx2vnni", "avx2" or "portable".
const char *cpuKernelsName();
// The bytes of every parameter together, at their declared types.
uint64_t paramsByteSize(const Model &model);
// The summary ein-inspect prints: header, inputs, outputs, parameters,
// memory and one line per step, each line ending in '\n'.
std::string describeModel(const Model &model);
// The same as one JSON object (ein-inspect --json, Model.inspect() in
// Python), with every tensor's placement and each step's operands, source
// locations, namespace and fusing passes besides.
std::string describeModelJson(const Model &model);

}  // namespace ein
