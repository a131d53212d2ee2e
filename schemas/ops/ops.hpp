// The enums of the op table (ops/op_table.def) and what each opcode is: its
// operand count, name, spelling and MLIR op. Plain C++17 with no dependency,
// so the compiler, the runtime and the CUDA kernels (nvcc) share it; the
// runtime's program.hpp and the CUDA device types name these enums.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

// Marks the scalar functions callable from CUDA kernels; empty for plain C++.
#ifndef EIN_HOST_DEVICE
#if defined(__CUDACC__)
#define EIN_HOST_DEVICE __host__ __device__
#else
#define EIN_HOST_DEVICE
#endif
#endif

namespace ein::ops {

enum class Opcode : uint8_t {
#define EIN_OPCODE(Name, ...) Name,
#include "ops/op_table.def"
};

enum class Activation : uint8_t {
#define EIN_ACTIVATION(Name, ...) Name,
#include "ops/op_table.def"
};

enum class ReduceKind : uint8_t {
#define EIN_REDUCE_KIND(Name, ...) Name,
#include "ops/op_table.def"
};

enum class MaskKind : uint8_t {
#define EIN_MASK_KIND(Name, ...) Name,
#include "ops/op_table.def"
};

enum class LayerNormVariant : uint8_t {
#define EIN_LAYERNORM_VARIANT(Name, ...) Name,
#include "ops/op_table.def"
};

// How many rows each list of the table has, counted in one pass.
struct RowCounts {
  int opcodes = 0, activations = 0, reduceKinds = 0, maskKinds = 0, layerNormVariants = 0;
};
constexpr RowCounts countRows() {
  RowCounts counts;
#define EIN_OPCODE(...) ++counts.opcodes;
#define EIN_ACTIVATION(...) ++counts.activations;
#define EIN_REDUCE_KIND(...) ++counts.reduceKinds;
#define EIN_MASK_KIND(...) ++counts.maskKinds;
#define EIN_LAYERNORM_VARIANT(...) ++counts.layerNormVariants;
#include "ops/op_table.def"
  return counts;
}
inline constexpr RowCounts kRowCounts = countRows();

// How many values each enum has: its values are 0..count-1.
template <class Enum>
inline constexpr int kValueCount = 0;
template <>
inline constexpr int kValueCount<Opcode> = kRowCounts.opcodes;
template <>
inline constexpr int kValueCount<Activation> = kRowCounts.activations;
template <>
inline constexpr int kValueCount<ReduceKind> = kRowCounts.reduceKinds;
template <>
inline constexpr int kValueCount<MaskKind> = kRowCounts.maskKinds;
template <>
inline constexpr int kValueCount<LayerNormVariant> = kRowCounts.layerNormVariants;

// An opcode's row of the table (see op_table.def for the columns).
struct OpcodeInfo {
  std::string_view name;
  int arity;
  std::string_view spelling;
  std::string_view mlirOp;
};

inline constexpr OpcodeInfo kOpcodes[] = {
#define EIN_OPCODE(Name, arity, spelling, function, mlirOp) {#Name, arity, spelling, mlirOp},
#include "ops/op_table.def"
};

constexpr const OpcodeInfo &info(Opcode opcode) { return kOpcodes[static_cast<uint8_t>(opcode)]; }

// How many registers an opcode reads: a; a, b; or a, b, c.
constexpr int operandCount(Opcode opcode) { return info(opcode).arity; }

// The opcode whose `column` of the table is `value`, if one is.
constexpr std::optional<Opcode> findOpcode(std::string_view OpcodeInfo::*column, std::string_view value) {
  if (value.empty()) return std::nullopt;
  for (int i = 0; i < kValueCount<Opcode>; ++i)
    if (kOpcodes[i].*column == value) return static_cast<Opcode>(i);
  return std::nullopt;
}

}  // namespace ein::ops
