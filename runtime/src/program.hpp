// The verified, decoded form of an artifact: plain structs the kernels run
// from, so execution never touches the FlatBuffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::detail {

enum class Storage : uint8_t { Arena, Weights, Input, Output };

struct TensorSlot {
  DType dtype;
  std::vector<int64_t> shape;
  int64_t numElements;
  Storage storage;
  uint32_t index;   // input/output number
  uint64_t offset;  // bytes into the arena or the weight segment
};

// Element (i0, i1, ...) is element offset + sum(ik * strides[k]) of `tensor`.
struct View {
  uint32_t tensor;
  int64_t offset;
  std::vector<int64_t> strides;
};

enum class Activation : uint8_t { None, Relu, Gelu, GeluTanh, Silu };

struct Gemm {
  std::vector<int64_t> batch;
  int64_t m, n, k;
  View a, b, c;
  bool hasBias;
  View bias;
  float alpha;
  Activation activation;
};

enum class Opcode : uint8_t {
  Const, Neg, Exp, Log, Sqrt, Rsqrt, Abs, Relu, Gelu, GeluTanh, Silu, Sigmoid, Tanh, Not,
  Add, Sub, Mul, Div, Pow, Max, Min, Lt, Le, Gt, Ge, Eq, Ne, Select,
};

struct Instruction {
  Opcode opcode;
  uint16_t a, b, c;
  float imm;
};

struct Elementwise {
  std::vector<int64_t> shape;
  std::vector<View> inputs;
  View output;
  std::vector<Instruction> program;
};

struct Softmax {
  std::vector<int64_t> shape;
  View x, y;
};

enum class ReduceKind : uint8_t { Sum, Mean, Max, Min, Prod };

struct Reduce {
  std::vector<int64_t> shape;
  uint32_t reducedRank;
  ReduceKind kind;
  View x, y;
};

struct Gather {
  std::vector<int64_t> idsShape;
  int64_t rows, width;
  View ids, table, y;
};

struct Copy {
  std::vector<int64_t> shape;
  View x, y;
};

using Kernel = std::variant<Gemm, Elementwise, Softmax, Reduce, Gather, Copy>;

struct Step {
  Kernel kernel;
  std::string location;
};

struct Program {
  // Keeps the artifact's bytes alive: an mmap or an owned buffer.
  std::shared_ptr<const void> storage;
  const std::byte *weights = nullptr;

  uint32_t formatVersion = 0;
  std::string target, producer, source;
  std::vector<TensorInfo> inputs, outputs, params;
  std::vector<uint32_t> inputTensors, outputTensors;
  std::vector<TensorSlot> tensors;
  std::vector<Step> steps;
  std::vector<StepInfo> stepInfos;
  uint64_t arenaBytes = 0;
  uint64_t weightsBytes = 0;
};

}  // namespace ein::detail
