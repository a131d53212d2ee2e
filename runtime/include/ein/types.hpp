// Element types and devices, as the artifact names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ein {

// Matches ein.schema.DType value for value.
// I8 holds only an int8 artifact's gemm weights: never an input or an output.
enum class DType : uint8_t { F32 = 0, F16, BF16, I32, I64, Bool, I8 };

// Matches ein.schema.Target value for value.
enum class Device : uint8_t { Cpu = 0, Cuda };

size_t dtypeSize(DType dtype);         // bytes per element
const char *dtypeName(DType dtype);    // "f32", "f16", "bf16", "i32", "i64", "bool", "i8"
const char *deviceName(Device device); // "cpu", "cuda"
std::optional<Device> parseDevice(std::string_view name);

// A device and which one of its kind: "cpu", "cuda" (index -1: the default
// device) or "cuda:N" (the N-th CUDA device, from 0).
struct DeviceSpec {
  Device device = Device::Cpu;
  int index = -1;
};
std::optional<DeviceSpec> parseDeviceSpec(std::string_view text);

}  // namespace ein
