#include "cuda/cuda_executor.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cuda/gemm_cublaslt.hpp"
#include "cuda/kernels.hpp"
#include "cuda/launch_plan.hpp"
#include "program.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

namespace ec = ein::cuda;

static_assert(int(Opcode::Select) == int(ec::Op::Select) && int(Opcode::Not) == int(ec::Op::Not) &&
              int(Opcode::Add) == int(ec::Op::Add) && int(Opcode::Ne) == int(ec::Op::Ne));
static_assert(int(Activation::Silu) == int(ec::Activation::Silu) && int(MaskKind::Drop) == int(ec::MaskKind::Drop) &&
              int(ReduceKind::Prod) == int(ec::ReduceKind::Prod) &&
              int(LayerNormVariant::UnbiasedStd) == int(ec::LayerNormVariant::UnbiasedStd));
static_assert(int(Precision::Fp16) == int(ec::Precision::Fp16) && int(DType::Bool) == int(ec::ElementType::Bool));

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt's
constexpr size_t kDeviceAlignment = 256;

std::string cudaMessage(cudaError_t error) { return fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error)); }

size_t elementBytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::Bool: return 1;
  }
  return 0;
}

// TensorInfo::byteSize, computed here so this library needs nothing of ein_runtime's.
size_t bytesOf(const TensorInfo &info) {
  size_t count = 1;
  for (int64_t size : info.shape) count *= static_cast<size_t>(size);
  return count * elementBytes(info.dtype);
}

const char *precisionText(Precision precision) {
  return precision == Precision::Bf16 ? "bf16" : precision == Precision::Fp16 ? "fp16" : "fp32";
}

int operands(Opcode opcode) {
  if (opcode == Opcode::Const) return 0;
  if (opcode == Opcode::Select) return 3;
  return opcode >= Opcode::Add ? 2 : 1;
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

Space merge(const Dims &sizes, const std::vector<Dims> &strides) {
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

ec::Shape shapeOf(const std::vector<int64_t> &sizes) {
  ec::Shape shape;
  shape.rank = static_cast<int32_t>(sizes.size());
  for (size_t axis = 0; axis < sizes.size(); ++axis) shape.size[axis] = sizes[axis];
  return shape;
}

// Steps enqueue their kernels and return an empty string, or what failed.
using StepFn = std::function<std::string(cudaStream_t)>;

std::string launched(const char *what, cudaError_t error) {
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

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(const Program &program) : program_(program) {}

  ~CudaExecutor() override {
    if (device_ >= 0) cudaSetDevice(device_);  // the stream, handle and memory belong to it
    steps_.clear();
    gemms_.clear();
    if (stream_) cudaStreamSynchronize(stream_);
    if (lt_.handle) cublasLtDestroy(lt_.handle);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status initialise(int device);
  Status run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) override;

 private:
  Status fail(size_t step, StatusCode code, const std::string &message) const {
    return Status(code, program_.steps[step].label + ": " + message);
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

  Status plan(size_t step, const Gemm &op);
  Status plan(size_t step, const Elementwise &op);
  Status plan(size_t step, const Softmax &op);
  Status plan(size_t step, const Reduce &op);
  Status plan(size_t step, const Gather &op);
  Status plan(size_t step, const Copy &op);
  template <typename Launch, typename Op>
  Status planAttentionOperands(size_t step, const Op &op, size_t inner, Launch &launch);
  Status plan(size_t step, const Attention &op);
  Status plan(size_t step, const TalkingHeadsAttention &op);
  Status plan(size_t step, const LayerNorm &op);

  const Program &program_;
  int device_ = -1;
  cudaDeviceProp properties_{};
  bool verbose_ = std::getenv("EIN_CUDA_VERBOSE") != nullptr;
  bool syncEachStep_ = std::getenv("EIN_CUDA_SYNC") != nullptr;
  cudaStream_t stream_ = nullptr;
  ec::LtResources lt_;
  DeviceMemory arena_, weights_, io_, workspace_, errorSlots_;
  std::vector<DeviceMemory> tables_;  // elementwise programs
  std::vector<void *> bases_;         // device address of every tensor
  std::vector<std::byte *> inputAddresses_, outputAddresses_;
  std::vector<std::unique_ptr<ec::LtGemm>> gemms_;
  std::vector<StepFn> steps_;
  std::vector<GatherCheck> gathers_;
};

StatusOr<DeviceMemory> allocate(size_t bytes, const std::string &what) {
  void *pointer = nullptr;
  const cudaError_t error = cudaMalloc(&pointer, bytes < kDeviceAlignment ? kDeviceAlignment : bytes);
  if (error != cudaSuccess)
    return Status(StatusCode::ResourceExhausted,
                  fmt::format("cannot allocate {} bytes of device memory for {}: {}", bytes, what, cudaMessage(error)));
  return DeviceMemory(pointer);
}

Status CudaExecutor::initialise(int device) {
  // Before any other call: every allocation, stream and handle below belongs
  // to the current device of this thread.
  cudaError_t error = cudaSetDevice(device);
  if (error == cudaSuccess) device_ = device;
  if (error == cudaSuccess) error = cudaGetDeviceProperties(&properties_, device);
  if (error != cudaSuccess)
    return Status(StatusCode::Unimplemented, fmt::format("CUDA device {}: {}", device, cudaMessage(error)));
  if (properties_.major < 8)
    return Status(StatusCode::Unimplemented,
                  fmt::format("CUDA device {} ({}) has compute capability {}.{}; the CUDA kernels need 8.0 or newer",
                              device, properties_.name, properties_.major, properties_.minor));
  if ((error = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess)
    return Status(StatusCode::Internal, "cudaStreamCreate: " + cudaMessage(error));
  if (const cublasStatus_t status = cublasLtCreate(&lt_.handle); status != CUBLAS_STATUS_SUCCESS)
    return Status(StatusCode::Internal, std::string("cublasLtCreate: ") + cublasLtGetStatusString(status));

  // Device memory: the arena, the weights (uploaded once), the inputs and
  // outputs, cuBLASLt's workspace and the gathers' error slots.
  EIN_ASSIGN_OR_RETURN(arena_, allocate(program_.arenaBytes, "the arena"));
  EIN_ASSIGN_OR_RETURN(weights_, allocate(program_.weightsBytes, "the weights"));
  if (program_.weightsBytes &&
      (error = cudaMemcpy(weights_.get(), program_.weights, program_.weightsBytes, cudaMemcpyHostToDevice)) != cudaSuccess)
    return Status(StatusCode::Internal, "uploading the weights: " + cudaMessage(error));
  std::vector<size_t> ioOffsets;
  size_t ioBytes = 0;
  for (const std::vector<TensorInfo> *infos : {&program_.inputs, &program_.outputs})
    for (const TensorInfo &info : *infos) {
      ioOffsets.push_back(ioBytes);
      ioBytes += (bytesOf(info) + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
    }
  EIN_ASSIGN_OR_RETURN(io_, allocate(ioBytes, "the inputs and outputs"));
  auto *io = static_cast<std::byte *>(io_.get());
  for (size_t i = 0; i < program_.inputs.size(); ++i) inputAddresses_.push_back(io + ioOffsets[i]);
  for (size_t i = 0; i < program_.outputs.size(); ++i)
    outputAddresses_.push_back(io + ioOffsets[program_.inputs.size() + i]);
  EIN_ASSIGN_OR_RETURN(workspace_, allocate(kWorkspaceBytes, "the cuBLASLt workspace"));
  lt_.workspace = workspace_.get();
  lt_.workspaceBytes = kWorkspaceBytes;

  for (const Tensor &tensor : program_.tensors) {
    switch (tensor.storage) {
      case Storage::Arena: bases_.push_back(static_cast<std::byte *>(arena_.get()) + tensor.offset); break;
      case Storage::Weights: bases_.push_back(static_cast<std::byte *>(weights_.get()) + tensor.offset); break;
      case Storage::Input: bases_.push_back(inputAddresses_[tensor.index]); break;
      case Storage::Output: bases_.push_back(outputAddresses_[tensor.index]); break;
    }
  }

  size_t gatherCount = 0;
  for (const Step &step : program_.steps) gatherCount += std::holds_alternative<Gather>(step.kernel);
  EIN_ASSIGN_OR_RETURN(errorSlots_, allocate(gatherCount * sizeof(unsigned long long), "the gather checks"));
  for (size_t s = 0; s < program_.steps.size(); ++s)
    EIN_RETURN_IF_ERROR(std::visit([&](const auto &op) { return plan(s, op); }, program_.steps[s].kernel));
  if (verbose_)
    std::fprintf(stderr, "ein cuda: %s (sm_%d%d), precision %s, %zu steps, arena %llu bytes\n", properties_.name,
                 properties_.major, properties_.minor, precisionText(program_.precision), steps_.size(),
                 static_cast<unsigned long long>(program_.arenaBytes));
  return Status();
}

Status CudaExecutor::plan(size_t step, const Gemm &op) {
  const size_t r = op.batch.size();
  std::vector<Dims> strides{op.a.strides.first(r), op.b.strides.first(r), op.c.strides.first(r)};
  if (op.bias) strides.push_back(op.bias->strides.first(r));
  if (op.residual) strides.push_back(op.residual->strides.first(r));
  const Space space = merge(op.batch, strides);
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 2));
  ec::GemmLaunch launch;
  launch.batch = shapeOf(space.sizes);
  launch.m = op.m;
  launch.n = op.n;
  launch.k = op.k;
  auto matrix = [&](const View &v, size_t index) {
    return view(v, space.strides[index], {v.strides[r], v.strides[r + 1]});
  };
  launch.a = matrix(op.a, 0);
  launch.b = matrix(op.b, 1);
  launch.c = matrix(op.c, 2);
  size_t next = 3;
  if (op.bias) launch.bias = matrix(*op.bias, next++);
  if (op.residual) launch.residual = matrix(*op.residual, next++);
  launch.alpha = op.alpha;
  launch.activation = static_cast<ec::Activation>(op.activation);

  std::string why;
  std::unique_ptr<ec::LtGemm> lt =
      ec::LtGemm::plan(lt_, launch, static_cast<ec::Precision>(program_.precision), &why);
  if (verbose_)
    std::fprintf(stderr, "ein cuda: %s: %s\n", program_.steps[step].label.c_str(),
                 lt ? "cuBLASLt" : ("tiled gemm (" + why + ")").c_str());
  if (lt) {
    const ec::LtGemm *gemm = lt.get();
    gemms_.push_back(std::move(lt));
    steps_.push_back([gemm](cudaStream_t stream) { return gemm->run(stream); });
  } else {
    steps_.push_back([launch](cudaStream_t stream) { return launched("gemm", ec::launchGemmTiled(launch, stream)); });
  }
  return Status();
}

Status CudaExecutor::plan(size_t step, const Elementwise &op) {
  std::vector<Dims> strides;
  for (const View &input : op.inputs) strides.push_back(input.strides);
  strides.push_back(op.output.strides);
  const Space space = merge(op.shape, strides);
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 0));

  // Registers onto slots: a slot is freed after its register's last read, so
  // long programs need few slots.
  const size_t inputCount = op.inputs.size(), registers = op.registerCount();
  if (registers == 0) return fail(step, StatusCode::InvalidArtifact, "an element-wise step with no registers");
  std::vector<int64_t> lastUse(registers, -1);  // -1: never read
  for (size_t i = 0; i < op.program.size(); ++i) {
    const Instruction &in = op.program[i];
    const uint16_t reads[3] = {in.a, in.b, in.c};
    for (int o = 0; o < operands(in.opcode); ++o) lastUse[reads[o]] = int64_t(i);
  }
  lastUse[registers - 1] = int64_t(op.program.size());  // the result lives to the end
  std::vector<int> slotOf(registers, -1);
  std::vector<int> freeSlots;
  int slotCount = 0;
  auto take = [&]() {
    if (!freeSlots.empty()) {
      const int slot = freeSlots.back();
      freeSlots.pop_back();
      return slot;
    }
    return slotCount++;
  };
  std::vector<uint8_t> table(ec::elementwiseTableBytes(int(inputCount), int(op.program.size())));
  auto *inputs = reinterpret_cast<ec::ElementwiseInput *>(table.data());
  auto *program = reinterpret_cast<ec::Instruction *>(table.data() + sizeof(ec::ElementwiseInput) * inputCount);
  for (size_t v = 0; v < inputCount; ++v) {
    slotOf[v] = take();
    ec::ElementwiseInput input;
    input.view = view(op.inputs[v], space.strides[v]);
    input.type = static_cast<ec::ElementType>(program_.tensors[op.inputs[v].tensor].dtype);
    input.slot = static_cast<uint8_t>(slotOf[v]);
    std::memcpy(&inputs[v], &input, sizeof input);
  }
  for (size_t v = 0; v < inputCount; ++v)  // inputs never read are free once loaded
    if (lastUse[v] < 0) freeSlots.push_back(slotOf[v]);
  for (size_t i = 0; i < op.program.size(); ++i) {
    const Instruction &in = op.program[i];
    ec::Instruction out;
    out.op = static_cast<ec::Op>(in.opcode);
    const uint16_t reads[3] = {in.a, in.b, in.c};
    uint8_t *targets[3] = {&out.a, &out.b, &out.c};
    for (int o = 0; o < operands(in.opcode); ++o) *targets[o] = static_cast<uint8_t>(slotOf[reads[o]]);
    out.imm = in.imm;
    for (int o = 0; o < operands(in.opcode); ++o) {  // operands read for the last time free their slots
      const uint16_t reg = reads[o];
      bool seen = false;
      for (int p = 0; p < o; ++p) seen |= reads[p] == reg;
      if (!seen && lastUse[reg] == int64_t(i)) freeSlots.push_back(slotOf[reg]);
    }
    slotOf[inputCount + i] = take();
    out.out = static_cast<uint8_t>(slotOf[inputCount + i]);
    std::memcpy(&program[i], &out, sizeof out);
    if (slotCount > ec::kMaxSlots) break;
  }
  if (slotCount > ec::kMaxSlots)
    return fail(step, StatusCode::Unimplemented,
                fmt::format("the element-wise program needs more than {} live registers", ec::kMaxSlots));
  if (table.size() > 40 * 1024)
    return fail(step, StatusCode::Unimplemented, "the element-wise program is too long for the CUDA interpreter");

  EIN_ASSIGN_OR_RETURN(DeviceMemory memory, allocate(table.size(), "an element-wise program"));
  const cudaError_t error = cudaMemcpy(memory.get(), table.data(), table.size(), cudaMemcpyHostToDevice);
  if (error != cudaSuccess) return fail(step, StatusCode::Internal, "uploading the program: " + cudaMessage(error));
  ec::ElementwiseLaunch launch;
  launch.shape = shapeOf(space.sizes);
  launch.inputCount = static_cast<int32_t>(inputCount);
  launch.instructionCount = static_cast<int32_t>(op.program.size());
  launch.resultSlot = static_cast<uint8_t>(slotOf[registers - 1]);
  launch.table = memory.get();
  launch.output = view(op.output, space.strides.back());
  launch.outputType = static_cast<ec::ElementType>(program_.tensors[op.output.tensor].dtype);
  tables_.push_back(std::move(memory));
  steps_.push_back(
      [launch](cudaStream_t stream) { return launched("element-wise", ec::launchElementwise(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Softmax &op) {
  const size_t r = op.shape.size() - 1;
  const Space space = merge(op.shape.first(r), {op.x.strides.first(r), op.y.strides.first(r)});
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 0));
  ec::SoftmaxLaunch launch;
  launch.rows = shapeOf(space.sizes);
  launch.length = op.shape.back();
  launch.x = {view(op.x, space.strides[0]), op.x.strides[r]};
  launch.y = {view(op.y, space.strides[1]), op.y.strides[r]};
  steps_.push_back([launch](cudaStream_t stream) { return launched("softmax", ec::launchSoftmax(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const LayerNorm &op) {
  const size_t r = op.shape.size() - 1;
  std::vector<Dims> strides{op.x.strides.first(r), op.y.strides.first(r)};
  if (op.residual) strides.push_back(op.residual->strides.first(r));
  if (op.sum) strides.push_back(op.sum->strides.first(r));
  const Space space = merge(op.shape.first(r), strides);
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 0));
  ec::LayerNormLaunch launch;
  launch.rows = shapeOf(space.sizes);
  launch.length = op.shape.back();
  launch.x = {view(op.x, space.strides[0]), op.x.strides[r]};
  launch.y = {view(op.y, space.strides[1]), op.y.strides[r]};
  size_t next = 2;
  if (op.residual) launch.residual = {view(*op.residual, space.strides[next++]), op.residual->strides[r]};
  if (op.sum) launch.sum = {view(*op.sum, space.strides[next++]), op.sum->strides[r]};
  launch.gamma = vectorView(op.gamma);
  launch.beta = vectorView(op.beta);
  launch.epsilon = op.epsilon;
  launch.variant = static_cast<ec::LayerNormVariant>(op.variant);
  steps_.push_back([launch](cudaStream_t stream) { return launched("layernorm", ec::launchLayerNorm(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Reduce &op) {
  const size_t keptRank = op.shape.size() - op.reducedRank;
  const Space kept = merge(op.shape.first(keptRank), {op.x.strides.first(keptRank), op.y.strides});
  const Space reduced = merge(op.shape.dropFirst(keptRank), {op.x.strides.dropFirst(keptRank)});
  EIN_RETURN_IF_ERROR(checkRank(step, kept.sizes.size(), 0));
  EIN_RETURN_IF_ERROR(checkRank(step, reduced.sizes.size(), 0));
  ec::ReduceLaunch launch;
  launch.kept = shapeOf(kept.sizes);
  launch.reduced = shapeOf(reduced.sizes);
  launch.x = view(op.x, kept.strides[0]);
  launch.xReduced = view(op.x, reduced.strides[0]);
  launch.xReduced.offset = 0;
  launch.y = view(op.y, kept.strides[1]);
  launch.kind = static_cast<ec::ReduceKind>(op.kind);
  steps_.push_back([launch](cudaStream_t stream) { return launched("reduce", ec::launchReduce(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Gather &op) {
  const size_t r = op.idsShape.size();
  const Space space = merge(op.idsShape, {op.ids.strides, op.y.strides.first(r)});
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 1));
  ec::GatherLaunch launch;
  launch.ids = shapeOf(space.sizes);
  launch.idsView = view(op.ids, space.strides[0]);
  launch.wideIds = program_.tensors[op.ids.tensor].dtype == DType::I64;
  launch.y = view(op.y, space.strides[1], {op.y.strides[r]});
  launch.table = {static_cast<const float *>(base(op.table.tensor)), op.table.offset, op.table.strides[1]};
  launch.tableRowStride = op.table.strides[0];
  launch.rows = op.rows;
  launch.width = op.width;
  launch.firstBadId = static_cast<unsigned long long *>(errorSlots_.get()) + gathers_.size();
  gathers_.push_back({step, launch.ids, launch.idsView, launch.wideIds, op.rows});
  steps_.push_back([launch](cudaStream_t stream) { return launched("gather", ec::launchGather(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Copy &op) {
  const Space space = merge(op.shape, {op.x.strides, op.y.strides});
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 0));
  ec::CopyLaunch launch;
  launch.shape = shapeOf(space.sizes);
  launch.x = view(op.x, space.strides[0]);
  launch.y = view(op.y, space.strides[1]);
  launch.elementSize = static_cast<int32_t>(elementBytes(program_.tensors[op.x.tensor].dtype));
  steps_.push_back([launch](cudaStream_t stream) { return launched("copy", ec::launchCopy(launch, stream)); });
  return Status();
}

// The fields both attention launches share: the batch axes merged where every
// view allows, the sizes, and q, k, v, out and the mask with their `inner`
// trailing axes (I/J and D/E; with the heads axis first for talking heads).
template <typename Launch, typename Op>
Status CudaExecutor::planAttentionOperands(size_t step, const Op &op, size_t inner, Launch &launch) {
  const size_t r = op.batch.size();
  std::vector<Dims> strides{op.q.strides.first(r), op.k.strides.first(r), op.v.strides.first(r),
                            op.out.strides.first(r)};
  if (op.mask) strides.push_back(op.mask->strides.first(r));
  const Space space = merge(op.batch, strides);
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), inner));
  launch.batch = shapeOf(space.sizes);
  launch.queries = op.queries;
  launch.keys = op.keys;
  launch.headDim = op.headDim;
  launch.valueDim = op.valueDim;
  launch.scale = op.scale;
  auto operand = [&](const View &v, size_t index) {
    std::vector<int64_t> strides = space.strides[index];  // the merged batch axes, then the trailing ones
    for (size_t axis = r; axis < r + inner; ++axis) strides.push_back(v.strides[axis]);
    return view(v, strides);
  };
  launch.q = operand(op.q, 0);
  launch.k = operand(op.k, 1);
  launch.v = operand(op.v, 2);
  launch.out = operand(op.out, 3);
  if (op.mask) launch.mask = operand(*op.mask, 4);
  launch.maskKind = static_cast<ec::MaskKind>(op.maskKind);
  launch.maskFill = op.maskFill;
  return Status();
}

Status CudaExecutor::plan(size_t step, const Attention &op) {
  ec::AttentionLaunch launch;
  EIN_RETURN_IF_ERROR(planAttentionOperands(step, op, 2, launch));
  const auto precision = static_cast<ec::Precision>(program_.precision);
  // The widest key tile whose shared memory the device allows (head dim 128
  // with 64 keys needs more than sm_86/sm_89's 99 KB); none: the fp32 kernel.
  const int keyTile = ec::mmaKeyTile(int(op.headDim), properties_.sharedMemPerBlockOptin);
  const bool tensorCores = precision != ec::Precision::Fp32 && ec::attentionMmaSupports(launch) && keyTile > 0;
  if (!tensorCores && !ec::attentionF32FlashSupports(launch))
    return fail(step, StatusCode::Unimplemented,
                fmt::format("attention with head_dim {} and value_dim {}: the CUDA kernels take up to {}", op.headDim,
                            op.valueDim, ec::kFlashF32MaxDim));
  if (verbose_)
    std::fprintf(stderr, "ein cuda: %s: %s\n", program_.steps[step].label.c_str(),
                 tensorCores ? fmt::format("flash attention on tensor cores, {} keys a tile", keyTile).c_str()
                            : "flash attention in fp32");
  if (tensorCores)
    steps_.push_back([launch, precision, keyTile](cudaStream_t stream) {
      return launched("attention (tensor cores)", ec::launchAttentionMma(launch, precision, keyTile, stream));
    });
  else
    steps_.push_back([launch](cudaStream_t stream) {
      return launched("attention", ec::launchAttentionF32Flash(launch, stream));
    });
  return Status();
}

Status CudaExecutor::plan(size_t step, const TalkingHeadsAttention &op) {
  ec::TalkingHeadsLaunch launch;
  EIN_RETURN_IF_ERROR(planAttentionOperands(step, op, 3, launch));
  launch.heads = op.heads;
  launch.preMix = matrixView(op.preMix);
  launch.postMix = matrixView(op.postMix);
  launch.preBias = vectorView(op.preBias);
  launch.postBias = vectorView(op.postBias);
  const size_t shared = ec::talkingHeadsSharedBytes(launch);
  if (shared > properties_.sharedMemPerBlockOptin)
    return fail(step, StatusCode::Unimplemented,
                fmt::format("talking-heads attention needs {} bytes of shared memory; the device has {}", shared,
                            properties_.sharedMemPerBlockOptin));
  steps_.push_back([launch](cudaStream_t stream) {
    return launched("talking-heads attention", ec::launchTalkingHeads(launch, stream));
  });
  return Status();
}

Status CudaExecutor::run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) {
  if (inputs.size() != program_.inputs.size() || outputs.size() != program_.outputs.size())
    return Status(StatusCode::Internal, "executor called with the wrong number of buffers");
  // The calling thread may have another current device (another session, or none set yet).
  cudaError_t error = cudaSetDevice(device_);
  if (error != cudaSuccess)
    return Status(StatusCode::Internal, fmt::format("selecting CUDA device {}: {}", device_, cudaMessage(error)));
  for (size_t i = 0; i < inputs.size() && error == cudaSuccess; ++i)
    if (const size_t bytes = bytesOf(program_.inputs[i]))
      error = cudaMemcpyAsync(inputAddresses_[i], inputs[i], bytes, cudaMemcpyHostToDevice, stream_);
  if (error == cudaSuccess && !gathers_.empty())
    error = cudaMemsetAsync(errorSlots_.get(), 0xff, gathers_.size() * sizeof(unsigned long long), stream_);
  if (error != cudaSuccess) return Status(StatusCode::Internal, "copying the inputs to the device: " + cudaMessage(error));

  for (size_t s = 0; s < steps_.size(); ++s) {
    const std::string message = steps_[s](stream_);
    if (!message.empty()) return fail(s, StatusCode::Internal, message);
    if (syncEachStep_ && (error = cudaStreamSynchronize(stream_)) != cudaSuccess)
      return fail(s, StatusCode::Internal, cudaMessage(error));
  }

  for (size_t i = 0; i < outputs.size() && error == cudaSuccess; ++i)
    if (const size_t bytes = bytesOf(program_.outputs[i]))
      error = cudaMemcpyAsync(outputs[i], outputAddresses_[i], bytes, cudaMemcpyDeviceToHost, stream_);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream_);
  if (error != cudaSuccess)
    return Status(StatusCode::Internal, "running on the CUDA device: " + cudaMessage(error) +
                                            " (EIN_CUDA_SYNC=1 names the failing step)");

  if (!gathers_.empty()) {
    std::vector<unsigned long long> firstBad(gathers_.size());
    error = cudaMemcpy(firstBad.data(), errorSlots_.get(), firstBad.size() * sizeof firstBad[0], cudaMemcpyDeviceToHost);
    if (error != cudaSuccess) return Status(StatusCode::Internal, "reading the gather checks: " + cudaMessage(error));
    for (size_t g = 0; g < gathers_.size(); ++g) {
      if (firstBad[g] == ~0ull) continue;
      const GatherCheck &check = gathers_[g];
      const auto position = static_cast<int64_t>(firstBad[g]);
      const int64_t at = ec::offsetOf(check.ids, check.idsView, position);
      int64_t id = 0;
      const size_t bytes = check.wideIds ? 8 : 4;
      int32_t narrow = 0;
      error = cudaMemcpy(check.wideIds ? static_cast<void *>(&id) : static_cast<void *>(&narrow),
                         static_cast<const std::byte *>(check.idsView.data) + at * bytes, bytes, cudaMemcpyDeviceToHost);
      if (!check.wideIds) id = narrow;
      return fail(check.step, StatusCode::OutOfRange,
                  fmt::format("id {} (ids element {}) is outside [0, {})", id, position, check.rows));
    }
  }
  return Status();
}

}  // namespace

StatusOr<int> cudaDeviceCount() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess)
    return Status(StatusCode::Unimplemented, "no CUDA device: cudaGetDeviceCount returned " + cudaMessage(error));
  if (count == 0) return Status(StatusCode::Unimplemented, "no CUDA device: cudaGetDeviceCount found none");
  return count;
}

StatusOr<std::unique_ptr<Executor>> createCudaExecutor(const Program &program, const SessionOptions &options) {
  StatusOr<int> count = cudaDeviceCount();
  if (!count.ok()) return count.status();
  int device = options.deviceIndex;
  const char *chosen = std::getenv("EIN_CUDA_DEVICE");
  if (device < 0) device = chosen ? std::atoi(chosen) : 0;
  if (device < 0 || device >= count.value())
    return Status(StatusCode::InvalidArgument,
                  fmt::format("CUDA device {} ({}) but there {} {} CUDA device{}", device,
                              options.deviceIndex >= 0 ? "asked for" : chosen ? "EIN_CUDA_DEVICE" : "the default",
                              count.value() == 1 ? "is" : "are", count.value(), count.value() == 1 ? "" : "s"));
  auto executor = std::make_unique<CudaExecutor>(program);
  EIN_RETURN_IF_ERROR(executor->initialise(device));
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace ein::detail
