// The CUDA executor's planning: each program step becomes the launches it
// enqueues at run time, with its views merged and checked once, here.
#include "backends/cuda/cuda_executor_impl.hpp"

namespace ein::detail::cuda_host {

namespace {

// A gemm launch's every field, as bytes: the key of its kept cuBLASLt plan.
std::string gemmPlanKey(const ec::GemmLaunch &launch, ec::Precision precision) {
  std::string key;
  auto put = [&key](const auto &value) { key.append(reinterpret_cast<const char *>(&value), sizeof value); };
  const int axes = launch.batch.rank + 2;
  put(launch.batch.rank);
  for (int axis = 0; axis < launch.batch.rank; ++axis) put(launch.batch.size[axis]);
  put(launch.m);
  put(launch.n);
  put(launch.k);
  for (const ec::DeviceView *view : {&launch.a, &launch.b, &launch.c, &launch.bias, &launch.residual}) {
    put(view->data);
    put(view->offset);
    for (int axis = 0; axis < axes; ++axis) put(view->stride[axis]);
  }
  put(launch.aType);
  put(launch.bType);
  put(launch.alpha);
  put(launch.activation);
  put(precision);
  return key;
}

}  // namespace

const ec::LtGemm *CudaExecutor::ltPlanFor(size_t step, const ec::GemmLaunch &launch) {
  const auto precision = static_cast<ec::Precision>(program_->precision);
  std::string key = gemmPlanKey(launch, precision);
  auto found = ltPlans_.find(key);
  if (found == ltPlans_.end()) {
    KeptGemmPlan kept;
    kept.plan = ec::LtGemm::plan(lt_, launch, precision, &kept.why);
    found = ltPlans_.emplace(std::move(key), std::move(kept)).first;
  }
  if (verbose_ && !found->second.plan)
    std::fprintf(stderr, "ein cuda: %s: tiled gemm (%s)\n", program_->steps[step].label.c_str(),
                 found->second.why.c_str());
  return found->second.plan.get();
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
  launch.activation = op.activation;
  if (program_->tensors[op.b.tensor].dtype == DType::BF16) launch.bType = ec::ElementType::BF16;
  const char *label = program_->steps[step].label.c_str();

  if (std::optional<ec::GemvLaunch> gemv = ec::gemvLaunchFor(launch)) {
    if (verbose_) std::fprintf(stderr, "ein cuda: %s: gemv over bf16 weights\n", label);
    steps_.push_back([gemv = *gemv](cudaStream_t stream) {
      return launched("gemv (bf16 weights)", ec::launchGemvBf16(gemv, stream));
    });
    return Status();
  }
  if (launch.bType == ec::ElementType::BF16) {
    // cuBLASLt multiplies bf16 by bf16: a rounded into a dense bf16 copy
    // ([batch..., m, k] in the gemm scratch) first.
    const int rank = launch.batch.rank;
    ec::CopyLaunch round;
    round.shape = launch.batch;
    round.shape.rank = rank + 2;
    round.shape.size[rank] = launch.m;
    round.shape.size[rank + 1] = launch.k;
    round.x = launch.a;
    round.y.data = gemmScratch_.get();
    int64_t stride = 1;
    for (int axis = rank + 1; axis >= 0; --axis) {
      round.y.stride[axis] = stride;
      stride *= round.shape.size[axis];
    }
    round.roundToBf16 = true;
    ec::GemmLaunch rounded = launch;
    rounded.a = round.y;
    rounded.aType = ec::ElementType::BF16;
    if (const ec::LtGemm *gemm = ltPlanFor(step, rounded)) {
      if (verbose_) std::fprintf(stderr, "ein cuda: %s: cuBLASLt over bf16 weights\n", label);
      steps_.push_back([round, gemm](cudaStream_t stream) {
        const std::string error = launched("gemm operand to bf16", ec::launchCopy(round, stream));
        return error.empty() ? gemm->run(stream) : error;
      });
      return Status();
    }
  } else if (const ec::LtGemm *gemm = ltPlanFor(step, launch)) {
    if (verbose_) std::fprintf(stderr, "ein cuda: %s: cuBLASLt\n", label);
    steps_.push_back([gemm](cudaStream_t stream) { return gemm->run(stream); });
    return Status();
  }
  steps_.push_back([launch](cudaStream_t stream) { return launched("gemm", ec::launchGemmTiled(launch, stream)); });
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
    for (int o = 0; o < operandCount(in.opcode); ++o) lastUse[reads[o]] = int64_t(i);
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
    input.type = static_cast<ec::ElementType>(program_->tensors[op.inputs[v].tensor].dtype);
    input.slot = static_cast<uint8_t>(slotOf[v]);
    std::memcpy(&inputs[v], &input, sizeof input);
  }
  for (size_t v = 0; v < inputCount; ++v)  // inputs never read are free once loaded
    if (lastUse[v] < 0) freeSlots.push_back(slotOf[v]);
  for (size_t i = 0; i < op.program.size(); ++i) {
    const Instruction &in = op.program[i];
    ec::Instruction out;
    out.op = in.opcode;
    const uint16_t reads[3] = {in.a, in.b, in.c};
    uint8_t *targets[3] = {&out.a, &out.b, &out.c};
    for (int o = 0; o < operandCount(in.opcode); ++o) *targets[o] = static_cast<uint8_t>(slotOf[reads[o]]);
    out.imm = in.imm;
    for (int o = 0; o < operandCount(in.opcode); ++o) {  // operands read for the last time free their slots
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

  ec::ElementwiseLaunch launch;
  launch.shape = shapeOf(space.sizes);
  launch.inputCount = static_cast<int32_t>(inputCount);
  launch.instructionCount = static_cast<int32_t>(op.program.size());
  launch.resultSlot = static_cast<uint8_t>(slotOf[registers - 1]);
  launch.table = nullptr;  // uploadElementwiseTables points it at its part of tables_
  launch.output = view(op.output, space.strides.back());
  launch.outputType = static_cast<ec::ElementType>(program_->tensors[op.output.tensor].dtype);
  const size_t offset = (tableBytes_.size() + 15) / 16 * 16;  // the table's 8-byte fields, aligned
  tableBytes_.resize(offset);
  tableBytes_.insert(tableBytes_.end(), table.begin(), table.end());
  const size_t index = elementwise_.size();
  elementwise_.push_back(launch);
  elementwiseTableOffsets_.push_back(offset);
  steps_.push_back([this, index](cudaStream_t stream) {
    return launched("element-wise", ec::launchElementwise(elementwise_[index], stream));
  });
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
  launch.variant = op.variant;
  steps_.push_back([launch](cudaStream_t stream) { return launched("layernorm", ec::launchLayerNorm(launch, stream)); });
  return Status();
}

// A reduction's rows: the kept axes (all but the trailing reducedRank of
// `shape`) and the reduced ones, each merged where their strides allow.
Status CudaExecutor::planReducedRows(size_t step, const Dims &shape, size_t reducedRank, const View &x, const View &y,
                                     ec::ReducedRows &rows) {
  const size_t keptRank = shape.size() - reducedRank;
  const Space kept = merge(shape.first(keptRank), {x.strides.first(keptRank), y.strides});
  const Space reduced = merge(shape.dropFirst(keptRank), {x.strides.dropFirst(keptRank)});
  EIN_RETURN_IF_ERROR(checkRank(step, kept.sizes.size(), 0));
  EIN_RETURN_IF_ERROR(checkRank(step, reduced.sizes.size(), 0));
  rows.kept = shapeOf(kept.sizes);
  rows.reduced = shapeOf(reduced.sizes);
  rows.x = view(x, kept.strides[0]);
  rows.xReduced = view(x, reduced.strides[0]);
  rows.xReduced.offset = 0;
  rows.y = view(y, kept.strides[1]);
  return Status();
}

Status CudaExecutor::plan(size_t step, const Reduce &op) {
  ec::ReduceLaunch launch;
  EIN_RETURN_IF_ERROR(planReducedRows(step, op.shape, op.reducedRank, op.x, op.y, launch.rows));
  launch.kind = op.kind;
  steps_.push_back([launch](cudaStream_t stream) { return launched("reduce", ec::launchReduce(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Variance &op) {
  ec::VarianceLaunch launch;
  EIN_RETURN_IF_ERROR(planReducedRows(step, op.shape, op.reducedRank, op.x, op.y, launch.rows));
  launch.correction = op.correction;
  launch.root = op.root;
  steps_.push_back([launch](cudaStream_t stream) { return launched("variance", ec::launchVariance(launch, stream)); });
  return Status();
}

Status CudaExecutor::plan(size_t step, const Gather &op) {
  const size_t r = op.idsShape.size();
  const Space space = merge(op.idsShape, {op.ids.strides, op.y.strides.first(r)});
  EIN_RETURN_IF_ERROR(checkRank(step, space.sizes.size(), 1));
  ec::GatherLaunch launch;
  launch.ids = shapeOf(space.sizes);
  launch.idsView = view(op.ids, space.strides[0]);
  launch.wideIds = program_->tensors[op.ids.tensor].dtype == DType::I64;
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
  const DType from = program_->tensors[op.x.tensor].dtype, to = program_->tensors[op.y.tensor].dtype;
  launch.elementSize = static_cast<int32_t>(elementBytes(from));
  launch.roundToBf16 = from == DType::F32 && to == DType::BF16;  // the loader allows no other change of dtype
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
  launch.maskKind = op.maskKind;
  launch.maskFill = op.maskFill;
  return Status();
}

Status CudaExecutor::plan(size_t step, const Attention &op) {
  if (op.bf16KeyValues)  // the loader allows them on the CPU target only
    return fail(step, StatusCode::Unimplemented,
                "attention over bf16 keys and values (a bf16 key/value cache) runs on the CPU only");
  ec::AttentionLaunch launch;
  EIN_RETURN_IF_ERROR(planAttentionOperands(step, op, 2, launch));
  launch.causalPositions = op.causalPositions;
  launch.softcap = op.softcap;
  const auto precision = static_cast<ec::Precision>(program_->precision);
  const bool lowPrecision = precision != ec::Precision::Fp32;
  const bool flash2 = lowPrecision && ec::attentionFlash2Supports(launch);
  if (!flash2 && !ec::attentionF32FlashSupports(launch))
    return fail(step, StatusCode::Unimplemented,
                fmt::format("attention with head_dim {} and value_dim {}: the CUDA kernels take up to {}", op.headDim,
                            op.valueDim, ec::kFlashF32MaxDim));
  if (verbose_)
    std::fprintf(stderr, "ein cuda: %s: %s\n", program_->steps[step].label.c_str(),
                 flash2 ? "flash attention on tensor cores (flash2)" : "flash attention in fp32");
  if (flash2) {
    // One scratch buffer for every flash2 step (they run one after another on
    // the stream), grown to the largest; the steps read it when they run.
    if (const size_t bytes = ec::attentionFlash2ScratchBytes(launch); bytes > attentionScratchBytes_) {
      attentionScratch_.reset();
      attentionScratchBytes_ = 0;
      EIN_ASSIGN_OR_RETURN(attentionScratch_, allocate(bytes, "attention's 16-bit keys and values"));
      attentionScratchBytes_ = bytes;
    }
    steps_.push_back([this, launch, precision](cudaStream_t stream) {
      return launched("attention (tensor cores)",
                      ec::launchAttentionFlash2(launch, precision, attentionScratch_.get(), stream));
    });
  } else {
    steps_.push_back([launch](cudaStream_t stream) {
      return launched("attention", ec::launchAttentionF32Flash(launch, stream));
    });
  }
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

}  // namespace ein::detail::cuda_host
