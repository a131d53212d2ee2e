// Element types and devices, as the artifact names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ein {

// Matches ein.schema.DType value for value.
// I8 and I4 hold only an int8 or int4 artifact's gemm weights: never an
// input or an output. I4 (ein.schema.DType.I4, two to a byte) takes the
// value after ElementType's host types, which share DType's numbering.
enum class DType : uint8_t { F32 = 0, F16, BF16, I32, I64, Bool, I8, I4 = 13 };

// Matches ein.schema.Target value for value.
enum class Device : uint8_t { Cpu = 0, Cuda };

size_t dtypeSize(DType dtype);         // bytes per element (I4: 1, the byte two elements share)
uint64_t dtypeBytes(DType dtype, uint64_t elements);  // bytes `elements` take (I4: half, rounded up)
const char *dtypeName(DType dtype);    // "f32", "f16", "bf16", "i32", "i64", "bool", "i8", "i4"

// The element type of data a caller hands in as an input: a DType (the
// shared values are DType's), or a host type that the runtime converts to
// the input's DType where the input conversion policy allows
// (Session::setInput):
//   - integers of any width and signedness into an i32 or i64 input, when
//     every value fits (a token id beyond i32 is an error naming the element);
//   - floats of any width into an f32, f16 or bf16 input, rounded to
//     nearest as NumPy's astype does (f64 into f16 or bf16 by way of f32);
//     a finite value beyond the input type's range is an error;
//   - nothing else: integers are not floats and floats are not ids (a
//     silent conversion there hides passing the wrong array).
enum class ElementType : uint8_t { F32 = 0, F16, BF16, I32, I64, Bool, I8, F64, I16, U8, U16, U32, U64, I4 };

constexpr ElementType elementType(DType dtype) { return static_cast<ElementType>(dtype); }
size_t elementSize(ElementType type);         // bytes per element
const char *elementTypeName(ElementType type);  // dtypeName's spelling, and "f64", "i16", "u8", ...
bool isInteger(ElementType type);               // signed or unsigned, Bool not included
bool isFloat(ElementType type);                 // f64, f32, f16, bf16
// Whether the policy converts `from` into an input of `to` (equal types included).
bool convertsTo(ElementType from, DType to);
// Why it does not, when there is a reason to give ("integers are not
// converted to floats (cast them first)"); "" otherwise.
const char *whyNotConverted(ElementType from, DType to);

// An input given by the caller (a Runner's call, a sequence's first run in a
// SequencePool or Scheduler): the shape must be the model's (for a model
// with dims, any shape they allow: each call may have its own), the element
// type the input's dtype or one the input conversion policy above converts
// to it (int64 ids for an i32 input, f64 for f32), `bytes` the shape's byte
// size in that type. The memory is read during the call only and is not
// written; it must not change until the call returns.
struct InputTensor {
  InputTensor() = default;
  InputTensor(std::string_view name, ElementType dtype, std::span<const int64_t> shape, const void *data, size_t bytes)
      : name(name), dtype(dtype), shape(shape), data(data), bytes(bytes) {}
  // The model's own type, as TensorInfo::dtype gives it.
  InputTensor(std::string_view name, DType dtype, std::span<const int64_t> shape, const void *data, size_t bytes)
      : InputTensor(name, elementType(dtype), shape, data, bytes) {}

  std::string_view name;
  ElementType dtype = ElementType::F32;
  std::span<const int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

// The worker threads a session or runner gets when the caller does not say:
// the CPUs this process may run on (its affinity mask, so a container or
// taskset limit counts), at least 1. ein-run, the C API and Python use it.
int defaultThreadCount();
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
