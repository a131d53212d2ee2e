#include "ein/types.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace ein {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::Bool: return 1;
    case DType::I8: return 1;
    case DType::I4: return 1;
  }
  return 0;
}

uint64_t dtypeBytes(DType dtype, uint64_t elements) {
  return dtype == DType::I4 ? elements / 2 + elements % 2 : elements * dtypeSize(dtype);
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::I4: return "i4";
  }
  return "unknown";
}

size_t elementSize(ElementType type) {
  switch (type) {
    case ElementType::F64: case ElementType::U64: return 8;
    case ElementType::I16: case ElementType::U16: return 2;
    case ElementType::U8: return 1;
    case ElementType::U32: return 4;
    default: return dtypeSize(static_cast<DType>(type));
  }
}

const char *elementTypeName(ElementType type) {
  switch (type) {
    case ElementType::F64: return "f64";
    case ElementType::I16: return "i16";
    case ElementType::U8: return "u8";
    case ElementType::U16: return "u16";
    case ElementType::U32: return "u32";
    case ElementType::U64: return "u64";
    default: return dtypeName(static_cast<DType>(type));
  }
}

bool isInteger(ElementType type) {
  switch (type) {
    case ElementType::I8: case ElementType::I16: case ElementType::I32: case ElementType::I64:
    case ElementType::U8: case ElementType::U16: case ElementType::U32: case ElementType::U64: return true;
    default: return false;
  }
}

bool isFloat(ElementType type) {
  return type == ElementType::F64 || type == ElementType::F32 || type == ElementType::F16 || type == ElementType::BF16;
}

bool convertsTo(ElementType from, DType to) {
  if (from == elementType(to)) return true;
  if (to == DType::I32 || to == DType::I64) return isInteger(from);
  if (isFloat(elementType(to))) return isFloat(from);
  return false;
}

const char *whyNotConverted(ElementType from, DType to) {
  if (convertsTo(from, to)) return "";
  if (isInteger(from) && isFloat(elementType(to))) return "integers are not converted to floats (cast them first)";
  if (isFloat(from) && (to == DType::I32 || to == DType::I64)) return "floats are not converted to integers (cast them first)";
  return "";
}

int defaultThreadCount() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  return std::max(1u, std::thread::hardware_concurrency());
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

std::optional<DeviceSpec> parseDeviceSpec(std::string_view text) {
  const size_t colon = text.find(':');
  std::optional<Device> device = parseDevice(text.substr(0, colon));
  if (!device) return std::nullopt;
  if (colon == std::string_view::npos) return DeviceSpec{*device, -1};
  const std::string_view digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 4) return std::nullopt;
  int index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + (c - '0');
  }
  return DeviceSpec{*device, index};
}

}  // namespace ein
