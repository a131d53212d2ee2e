// Element-wise steps: each thread runs the step's register program for its
// elements (grid-stride), each opcode by its scalar definition in f32
// (ops/scalar_functions.hpp), as the CPU interpreter does. The executor has
// renumbered the registers onto at most kMaxSlots live slots; the inputs and
// the program are staged in shared memory once per block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/limits>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/kernels.hpp"

namespace ein::cuda {
namespace {

constexpr int kThreads = 256;

__device__ float loadAsFloat(const ElementwiseInput &input, int64_t at) {
  switch (input.type) {
    case ElementType::F32: return static_cast<const float *>(input.view.data)[at];
    case ElementType::I32: return static_cast<float>(static_cast<const int32_t *>(input.view.data)[at]);
    case ElementType::I64: return static_cast<float>(static_cast<const int64_t *>(input.view.data)[at]);
    case ElementType::Bool: return static_cast<const uint8_t *>(input.view.data)[at] != 0 ? 1.0f : 0.0f;
    case ElementType::F16: return __half2float(static_cast<const __half *>(input.view.data)[at]);
    case ElementType::BF16: return __bfloat162float(static_cast<const __nv_bfloat16 *>(input.view.data)[at]);
  }
  return 0.0f;
}

// An integer result computed in f32, as the CPU stores it: rounded to the
// nearest, NaN gives 0, values beyond the type saturate.
template <typename Int>
__device__ Int floatToInt(float value) {
  if (isnan(value)) return 0;
  const double rounded = rint(static_cast<double>(value));
  if (rounded <= static_cast<double>(::cuda::std::numeric_limits<Int>::min())) return ::cuda::std::numeric_limits<Int>::min();
  if (rounded >= static_cast<double>(::cuda::std::numeric_limits<Int>::max())) return ::cuda::std::numeric_limits<Int>::max();
  return static_cast<Int>(rounded);
}

__device__ void storeFromFloat(const DeviceView &output, ElementType type, int64_t at, float value) {
  switch (type) {
    case ElementType::F32: static_cast<float *>(output.data)[at] = value; return;
    case ElementType::F16: static_cast<__half *>(output.data)[at] = __float2half_rn(value); return;
    case ElementType::BF16: static_cast<__nv_bfloat16 *>(output.data)[at] = __float2bfloat16_rn(value); return;
    case ElementType::I32: static_cast<int32_t *>(output.data)[at] = floatToInt<int32_t>(value); return;
    case ElementType::I64: static_cast<int64_t *>(output.data)[at] = floatToInt<int64_t>(value); return;
    case ElementType::Bool: static_cast<uint8_t *>(output.data)[at] = value != 0.0f; return;
  }
}

__device__ float evaluate(const Instruction &in, const float *slots) {
  return ops::evaluate(in.op, slots[in.a], slots[in.b], slots[in.c], in.imm);
}

__global__ void elementwiseKernel(ElementwiseLaunch launch, int64_t count) {
  extern __shared__ __align__(16) unsigned char shared[];
  auto *inputs = reinterpret_cast<ElementwiseInput *>(shared);
  auto *program = reinterpret_cast<Instruction *>(shared + sizeof(ElementwiseInput) * launch.inputCount);
  {
    const auto *words = static_cast<const uint32_t *>(launch.table);
    auto *to = reinterpret_cast<uint32_t *>(shared);
    const int total = static_cast<int>(
        (sizeof(ElementwiseInput) * launch.inputCount + sizeof(Instruction) * launch.instructionCount) / 4);
    for (int w = threadIdx.x; w < total; w += blockDim.x) to[w] = words[w];
  }
  __syncthreads();

  float slots[kMaxSlots];
  const Shape &shape = launch.shape;
  for (int64_t flat = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; flat < count;
       flat += int64_t(gridDim.x) * blockDim.x) {
    int64_t index[kMaxRank];
    int64_t rest = flat;
    for (int axis = shape.rank - 1; axis >= 0; --axis) {
      index[axis] = rest % shape.size[axis];
      rest /= shape.size[axis];
    }
    for (int v = 0; v < launch.inputCount; ++v) {
      const ElementwiseInput &input = inputs[v];
      int64_t at = input.view.offset;
      for (int axis = 0; axis < shape.rank; ++axis) at += index[axis] * input.view.stride[axis];
      slots[input.slot] = loadAsFloat(input, at);
    }
    for (int i = 0; i < launch.instructionCount; ++i) slots[program[i].out] = evaluate(program[i], slots);
    int64_t at = launch.output.offset;
    for (int axis = 0; axis < shape.rank; ++axis) at += index[axis] * launch.output.stride[axis];
    storeFromFloat(launch.output, launch.outputType, at, slots[launch.resultSlot]);
  }
}

}  // namespace

size_t elementwiseTableBytes(int inputCount, int instructionCount) {
  static_assert(sizeof(ElementwiseInput) % 8 == 0 && sizeof(Instruction) % 4 == 0, "table words");
  return sizeof(ElementwiseInput) * inputCount + sizeof(Instruction) * instructionCount;
}

cudaError_t launchElementwise(const ElementwiseLaunch &launch, cudaStream_t stream) {
  const int64_t count = launch.shape.count();
  if (count == 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 65536);
  const size_t shared = elementwiseTableBytes(launch.inputCount, launch.instructionCount);
  elementwiseKernel<<<static_cast<unsigned>(blocks), kThreads, shared, stream>>>(launch, count);
  return cudaGetLastError();
}

}  // namespace ein::cuda
