#include "ein/types.hpp"

namespace ein {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

const char *deviceName(Device device) {
  switch (device) {
    case Device::Cpu: return "cpu";
    case Device::Cuda: return "cuda";
  }
  return "unknown";
}

std::optional<Device> parseDevice(std::string_view name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  return std::nullopt;
}

}  // namespace ein
