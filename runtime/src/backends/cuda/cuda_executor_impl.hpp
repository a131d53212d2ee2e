// The CUDA executor's internals: the helpers and the CudaExecutor class,
// whose members are defined in cuda_executor.cpp (device setup, runs and the
// executor's creation) and cuda_planning.cpp (one `plan` per step kind: the
// launches each step enqueues).
#pragma once

#include "backends/cuda/cuda_executor.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/gemm_cublaslt.hpp"
#include "backends/cuda/kernels.hpp"
#include "backends/cuda/launch_plan.hpp"
#include "backends/step_profile.hpp"
#include "program/program.hpp"
#include "util/status_macros.hpp"


namespace ein::detail::cuda_host {

namespace ec = ein::cuda;

static_assert(int(Precision::Fp16) == int(ec::Precision::Fp16) && int(DType::Bool) == int(ec::ElementType::Bool));

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt's
constexpr size_t kDeviceAlignment = 256;
constexpr size_t kMaxKeptGemmPlans = 4096;  // cuBLASLt plans kept across prepares

inline std::string cudaMessage(cudaError_t error) { return fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error)); }

inline size_t elementBytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::I8:
    case DType::I4:  // never on this target (the loader)
    case DType::Bool: return 1;
  }
  return 0;
}

// TensorInfo::byteSize, computed here so this library needs nothing of ein_runtime's.
inline size_t bytesOf(const TensorInfo &info) {
  size_t count = 1;
  for (int64_t size : info.shape) count *= static_cast<size_t>(size);
  return count * elementBytes(info.dtype);
}

inline const char *precisionText(Precision precision) {
  return precision == Precision::Bf16 ? "bf16" : precision == Precision::Fp16 ? "fp16" : "fp32";
}

struct CudaFree {
  void operator()(void *pointer) const { cudaFree(pointer); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;

// An iteration space merged for a set of views: axes of size 1 dropped, and
// neighbours that every view walks as one axis merged.
struct Space {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // per view
};

inline Space merge(const Dims &sizes, const std::vector<Dims> &strides) {
  Space space;
  space.strides.resize(strides.size());
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    if (sizes[axis] == 1) continue;
    bool joins = !space.sizes.empty() && sizes[axis] != 0 && space.sizes.back() != 0;
    for (size_t v = 0; joins && v < strides.size(); ++v)
      joins = space.strides[v].back() == strides[v][axis] * sizes[axis];
    if (joins) {
      space.sizes.back() *= sizes[axis];
      for (size_t v = 0; v < strides.size(); ++v) space.strides[v].back() = strides[v][axis];
    } else {
      space.sizes.push_back(sizes[axis]);
      for (size_t v = 0; v < strides.size(); ++v) space.strides[v].push_back(strides[v][axis]);
    }
  }
  return space;
}

inline ec::Shape shapeOf(const std::vector<int64_t> &sizes) {
  ec::Shape shape;
  shape.rank = static_cast<int32_t>(sizes.size());
  for (size_t axis = 0; axis < sizes.size(); ++axis) shape.size[axis] = sizes[axis];
  return shape;
}

// Steps enqueue their kernels and return an empty string, or what failed.
using StepFn = std::function<std::string(cudaStream_t)>;

inline std::string launched(const char *what, cudaError_t error) {
  return error == cudaSuccess ? std::string() : fmt::format("{} kernel: {}", what, cudaMessage(error));
}

// A gather step's id check, read back after each run.
struct GatherCheck {
  size_t step = 0;
  ec::Shape ids;
  ec::DeviceView idsView;
  bool wideIds = false;
  int64_t rows = 0;
};

// EIN_PROFILE: each step's device time between two events, waited for after
// the step (which serialises the host with the device: a development aid).
class CudaStepProfile {
 public:
  CudaStepProfile() {
    cudaEventCreate(&start_);
    cudaEventCreate(&stop_);
  }
  ~CudaStepProfile() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void begin(cudaStream_t stream) { cudaEventRecord(start_, stream); }
  void end(cudaStream_t stream, size_t step, const StepInfo &info) {
    float milliseconds = 0;
    if (cudaEventRecord(stop_, stream) == cudaSuccess && cudaEventSynchronize(stop_) == cudaSuccess &&
        cudaEventElapsedTime(&milliseconds, start_, stop_) == cudaSuccess)
      profile_.add(step, info, milliseconds * 1e-3);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  StepProfile profile_;
};

class CudaExecutor final : public ExecutorImplementation {
 public:
  explicit CudaExecutor(const Program &model) : model_(model) {}

  ~CudaExecutor() override {
    if (device_ >= 0) cudaSetDevice(device_);  // the stream, handle and memory belong to it
    steps_.clear();
    ltPlans_.clear();
    if (stream_) cudaStreamSynchronize(stream_);
    if (lt_.handle) cublasLtDestroy(lt_.handle);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status initialise(int device);
  Status prepare(const Program &program) override;
  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) override;
  Status copyStateFrom(ExecutorImplementation &source) override;

 private:
  Status fail(size_t step, StatusCode code, const std::string &message) const {
    return Status(code, program_->steps[step].label + ": " + message);
  }
  void *base(uint32_t tensor) const { return bases_[tensor]; }
  ec::DeviceView view(const View &view, const std::vector<int64_t> &leading,
                      std::initializer_list<int64_t> trailing = {}) const {
    ec::DeviceView out;
    out.data = base(view.tensor);
    out.offset = view.offset;
    int axis = 0;
    for (int64_t stride : leading) out.stride[axis++] = stride;
    for (int64_t stride : trailing) out.stride[axis++] = stride;
    return out;
  }
  // An optional [n] or [n, m] f32 operand (gamma, beta, head mixes and biases), or none.
  ec::VectorView vectorView(const std::optional<View> &v) const {
    ec::VectorView out;
    if (v) out = {static_cast<const float *>(base(v->tensor)), v->offset, v->strides[0]};
    return out;
  }
  ec::MatrixView matrixView(const std::optional<View> &v) const {
    ec::MatrixView out;
    if (v) out = {static_cast<const float *>(base(v->tensor)), v->offset, v->strides[0], v->strides[1]};
    return out;
  }
  Status checkRank(size_t step, size_t rank, size_t trailing) const {
    if (rank + trailing <= size_t(ec::kMaxRank)) return Status();
    return fail(step, StatusCode::Unimplemented,
                fmt::format("{} axes after merging; the CUDA kernels take at most {}", rank + trailing, ec::kMaxRank));
  }

  // One plan per step of the schema (EIN_FOR_EACH_STEP, generated from the
  // kern ops' definitions), in cuda_planning.cpp.
#define EIN_DECLARE_PLAN(Step) Status plan(size_t step, const Step &op);
  EIN_FOR_EACH_STEP(EIN_DECLARE_PLAN)
#undef EIN_DECLARE_PLAN
  template <typename Launch, typename Op>
  Status planAttentionOperands(size_t step, const Op &op, size_t inner, Launch &launch);
  Status planReducedRows(size_t step, const Dims &shape, size_t reducedRank, const View &x, const View &y,
                         ec::ReducedRows &rows);

  Status growInputsAndOutputs(const Program &program);
  Status growGemmScratch(const Program &program);
  Status uploadElementwiseTables();
  // cuBLASLt's plan for `launch`, made once and kept across prepares (a
  // decode step's instantiations differ in positions, not in their gemms);
  // null when cuBLASLt cannot take it.
  const ec::LtGemm *ltPlanFor(size_t step, const ec::GemmLaunch &launch);

  const Program &model_;               // the model's program: arena size, weights
  const Program *program_ = nullptr;   // the prepared one (the model's, or an instantiation)
  int device_ = -1;
  cudaDeviceProp properties_{};
  bool verbose_ = std::getenv("EIN_CUDA_VERBOSE") != nullptr;
  bool syncEachStep_ = std::getenv("EIN_CUDA_SYNC") != nullptr;
  std::unique_ptr<CudaStepProfile> profile_;  // EIN_PROFILE; made on the device by initialise()
  cudaStream_t stream_ = nullptr;
  ec::LtResources lt_;
  DeviceMemory arena_, state_, weights_, io_, workspace_, errorSlots_, attentionScratch_, gemmScratch_;
  // What io_, errorSlots_ and the scratch buffers hold.
  size_t ioBytes_ = 0, errorSlotCount_ = 0, attentionScratchBytes_ = 0, gemmScratchBytes_ = 0;
  // The element-wise steps' programs: built into one host buffer while
  // planning, then uploaded at once into tables_ (grown, never shrunk), each
  // launch's table pointing at its part.
  std::vector<uint8_t> tableBytes_;
  std::vector<ec::ElementwiseLaunch> elementwise_;
  std::vector<size_t> elementwiseTableOffsets_;
  DeviceMemory tables_;
  size_t tablesCapacity_ = 0;
  std::vector<void *> bases_;         // device address of every tensor
  std::vector<std::byte *> inputAddresses_, outputAddresses_;
  struct KeptGemmPlan {
    std::unique_ptr<ec::LtGemm> plan;  // null: cuBLASLt cannot take the launch,
    std::string why;                   // for this reason
  };
  std::unordered_map<std::string, KeptGemmPlan> ltPlans_;  // by the launch's bytes (ltPlanFor)
  std::vector<StepFn> steps_;
  std::vector<GatherCheck> gathers_;
};


inline StatusOr<DeviceMemory> allocate(size_t bytes, const std::string &what) {
  void *pointer = nullptr;
  const cudaError_t error = cudaMalloc(&pointer, bytes < kDeviceAlignment ? kDeviceAlignment : bytes);
  if (error != cudaSuccess)
    return Status(StatusCode::ResourceExhausted,
                  fmt::format("cannot allocate {} bytes of device memory for {}: {}", bytes, what, cudaMessage(error)));
  return DeviceMemory(pointer);
}

}  // namespace ein::detail::cuda_host
