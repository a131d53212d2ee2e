#include "loader/step_decoder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "loader/flatbuffer_vectors.hpp"
#include "loader/size_expressions.hpp"
#include "ops/schema_enums.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

namespace fb = ein::schema;

// Iteration spaces are capped like byte sizes, so loop counts never overflow.
constexpr unsigned __int128 kMaxIterations = uint64_t{1} << 62;
// Register indices are 16-bit.
constexpr size_t kMaxRegisters = 65535;

Status invalid(std::string message) { return Status(StatusCode::InvalidArtifact, std::move(message)); }

std::string dimsText(const Dims &dims) { return fmt::format("[{}]", fmt::join(dims.begin(), dims.end(), ", ")); }


// Checks a step's own view of the program: sizes, views, dtypes.
class StepChecker {
 public:
  StepChecker(const Program &program, const SizeResolver &resolve) : program_(program), resolve_(resolve) {}

  // An iteration space from the artifact: rank within the limit, sizes
  // non-negative, element count bounded.
  StatusOr<Dims> space(const flatbuffers::Vector<const fb::Size *> *sizes, const char *name, size_t extraAxes = 0) const {
    std::vector<int64_t> values = readSizes(sizes);
    if (values.size() + extraAxes > kMaxRank)
      return invalid(fmt::format("{} has rank {}, more than the runtime's limit of {}", name, values.size() + extraAxes,
                                 kMaxRank));
    Dims dims;
    for (int64_t field : values) {
      EIN_ASSIGN_OR_RETURN(int64_t size, resolve_(field, name));
      dims.push_back(size);
    }
    EIN_RETURN_IF_ERROR(checkSizes(dims, name));
    return dims;
  }

  // A scalar size (m, keys, rows, ...): its value, non-negative.
  StatusOr<int64_t> size(const fb::Size *field, const char *name) const {
    EIN_ASSIGN_OR_RETURN(int64_t value, resolve_(readSize(field), name));
    EIN_RETURN_IF_ERROR(nonNegative(value, name));
    return value;
  }

  // The product of the non-zero sizes is bounded, so no product of any of
  // the sizes (a sub-space, an element count) can overflow.
  static Status checkSizes(const Dims &dims, const char *name) {
    unsigned __int128 count = 1;
    for (size_t axis = 0; axis < dims.size(); ++axis) {
      if (dims[axis] < 0) return invalid(fmt::format("{} {} has a negative size", name, dimsText(dims)));
      if (dims[axis] > 0) count *= static_cast<uint64_t>(dims[axis]);
      if (count > kMaxIterations) return invalid(fmt::format("{} {} has too many elements", name, dimsText(dims)));
    }
    return Status();
  }

  static Status nonNegative(int64_t value, const char *name) {
    if (value < 0) return invalid(fmt::format("{} is negative ({})", name, value));
    return Status();
  }

  // Decodes view `name` over `sizes`: the tensor exists, there is one
  // non-negative stride per axis, and the lowest and highest flat elements
  // the view reaches lie in [0, elements of the tensor).
  StatusOr<View> view(const fb::View *in, const Dims &sizes, const char *name) const {
    if (!in) return invalid(fmt::format("view {} is missing", name));
    View out;
    out.tensor = in->tensor();
    if (out.tensor >= program_.tensors.size())
      return invalid(fmt::format("view {} names tensor {}, but there are {} tensors", name, out.tensor,
                                 program_.tensors.size()));
    operands_.push_back(StepOperand{name, out.tensor, false});
    // Two i4 elements share a byte, which only the int4 gemm's packing reads
    // (decodeGemm): no other view may address one.
    if (program_.tensors[out.tensor].dtype == DType::I4 && std::string_view(name) != "b")
      return invalid(fmt::format("view {} reads tensor {}, an i4 tensor: only a gemm's weights b may be i4", name,
                                 out.tensor));
    std::vector<int64_t> strides = readSizes(in->strides());
    if (strides.size() != sizes.size())
      return invalid(fmt::format("view {} has {} strides for a {}-axis iteration space {}", name, strides.size(),
                                 sizes.size(), dimsText(sizes)));
    for (size_t axis = 0; axis < strides.size(); ++axis) {
      EIN_ASSIGN_OR_RETURN(int64_t stride, resolve_(strides[axis], name));
      if (stride < 0)
        return invalid(fmt::format("view {} has negative stride {} on axis {} (not supported)", name, stride, axis));
      out.strides.push_back(stride);
    }
    EIN_ASSIGN_OR_RETURN(out.offset, resolve_(readSize(in->offset()), name));
    if (out.offset < 0) return invalid(fmt::format("view {} has negative offset {}", name, out.offset));
    // Each term is below 2^126 and the sum stops growing past 2^63, so the
    // 128-bit sum cannot overflow.
    __int128 last = out.offset;
    bool empty = false;
    for (int64_t size : sizes) empty = empty || size == 0;
    for (size_t axis = 0; axis < sizes.size() && last <= INT64_MAX; ++axis)
      if (sizes[axis] > 0) last += static_cast<__int128>(sizes[axis] - 1) * out.strides[axis];
    if (empty) {
      // It reaches no element, but kernels still walk its nonempty axes (a
      // gather of width 0 steps through the rows of y), so the offsets they
      // compute are bounded like those of a real tensor's view.
      if (last > kMaxTensorElements)
        return invalid(fmt::format("view {} over the empty space {} reaches offset {}, beyond the runtime's limit "
                                   "of 2^40",
                                   name, dimsText(sizes),
                                   last > INT64_MAX ? std::string("beyond 2^63")
                                                    : std::to_string(static_cast<int64_t>(last))));
      return out;
    }
    int64_t elements = program_.tensors[out.tensor].numElements;
    if (last >= elements) {
      std::string reach = last > INT64_MAX ? std::string("beyond 2^63") : std::to_string(static_cast<int64_t>(last));
      return invalid(fmt::format("view {} reaches element {} of tensor {}, which has {} elements", name, reach,
                                 out.tensor, elements));
    }
    return out;
  }

  // An optional view: absent stays absent, present is checked like view().
  StatusOr<std::optional<View>> optionalView(const fb::View *in, const Dims &sizes, const char *name) const {
    if (!in) return std::optional<View>();
    EIN_ASSIGN_OR_RETURN(View decoded, view(in, sizes, name));
    return std::optional<View>(std::move(decoded));
  }

  const Tensor &tensorOf(const View &view) const { return program_.tensors[view.tensor]; }
  const Program &program() const { return program_; }

  Status dtypeIn(const View &view, const char *name, std::initializer_list<DType> allowed) const {
    DType dtype = tensorOf(view).dtype;
    for (DType candidate : allowed)
      if (candidate == dtype) return Status();
    std::string names;
    for (DType candidate : allowed) names += std::string(names.empty() ? "" : ", ") + dtypeName(candidate);
    return invalid(fmt::format("view {} is over a {} tensor (tensor {}); the kernel accepts {}", name, dtypeName(dtype),
                               view.tensor, names));
  }

  // A step writes only the arena, output buffers and the session's state
  // (weights are mapped read-only; inputs belong to the caller), and
  // iterates over no more elements than the written tensor holds, which
  // bounds its work.
  Status writable(const View &view, const Dims &space, const char *name) const {
    const Tensor &tensor = tensorOf(view);
    if (tensor.storage != Storage::Arena && tensor.storage != Storage::Output && tensor.storage != Storage::State)
      return invalid(fmt::format("view {} writes tensor {}, which is {}", name, view.tensor,
                                 tensor.storage == Storage::Weights ? "a read-only weight" : "an input"));
    if (space.product() > tensor.numElements)
      return invalid(fmt::format("view {} writes {} elements ({}) into tensor {}, which has {}", name, space.product(),
                                 dimsText(space), view.tensor, tensor.numElements));
    for (StepOperand &operand : operands_)
      if (operand.role == name) operand.written = true;
    return Status();
  }

  // The views decoded so far, by role, and whether the step writes them.
  std::vector<StepOperand> takeOperands() const { return std::move(operands_); }

  // A step reads `count` elements through an input view that, in a sound
  // artifact, does not repeat them (a reduction's length, gather's ids), so
  // count may not exceed the view's tensor. With the output bound this
  // bounds every step's work by the sizes of real tensors.
  Status readsAtMostItsTensor(const View &view, int64_t count, const char *name) const {
    int64_t elements = tensorOf(view).numElements;
    if (count > std::max<int64_t>(elements, 1))
      return invalid(fmt::format("it reads {} elements through view {}, whose tensor {} has {}", count, name,
                                 view.tensor, elements));
    return Status();
  }

 private:
  const Program &program_;
  const SizeResolver &resolve_;  // reads every (size) field
  mutable std::vector<StepOperand> operands_;  // what ein-inspect lists; checking a view is otherwise pure
};

// The checks across fields of each step, after the generated decoding of its
// fields (step_decoders.inc), and the step's description for ein-inspect.

// What a gemm computes after the product, as ein-inspect shows it: a bias
// that broadcasts over m is a bias per column ("bias[n]"), one that does not
// is a tensor added before the activation ("tensor[m, n]": a residual or a
// mask fused there), then the activation and the residual.
std::string gemmFormula(const Gemm &gemm, fb::Activation activation) {
  std::string formula = gemm.alpha != 1.0f ? fmt::format("{}·A·B", gemm.alpha) : "A·B";
  if (gemm.bias) {
    const size_t m = gemm.batch.size(), n = m + 1;
    const bool perRow = gemm.bias->strides[m] != 0, perColumn = gemm.bias->strides[n] != 0;
    formula += perRow && perColumn ? " + tensor[m, n]" : perRow ? " + bias[m]" : perColumn ? " + bias[n]" : " + bias";
  }
  if (activation != fb::Activation::None) {
    std::string name = fb::EnumNameActivation(activation);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    formula = name + "(" + formula + ")";
  }
  if (gemm.residual) formula += " + residual[m, n]";
  return formula;
}

// An element-wise program's instructions by name, in order, repeats counted
// ("mul x2, add, silu").
std::string programOps(const std::vector<Instruction> &program) {
  std::string text;
  for (size_t i = 0; i < program.size();) {
    size_t run = 1;
    while (i + run < program.size() && program[i + run].opcode == program[i].opcode) ++run;
    const ops::OpcodeInfo &row = ops::info(program[i].opcode);
    std::string name(row.spelling.empty() ? row.name : row.spelling);  // Const, Select: no dialect spelling
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    text += (text.empty() ? "" : ", ") + name + (run > 1 ? fmt::format(" x{}", run) : "");
    i += run;
  }
  return text;
}

Status decodeGemm(const fb::Gemm &in, const StepChecker &check, Gemm &gemm, StepInfo &info) {
  // A bf16 artifact (einc --precision bf16, either target) stores gemm
  // weights, and only those, as bf16: b may then be a bf16 weight tensor.
  // int8 and int4 weights are for the CPU only.
  const bool weightsB = check.tensorOf(gemm.b).storage == Storage::Weights;
  const bool cpuWeights = check.program().target == Device::Cpu && weightsB;
  if (check.program().precision == Precision::Bf16 && weightsB)
    EIN_RETURN_IF_ERROR(check.dtypeIn(gemm.b, "b", {DType::F32, DType::BF16}));
  else if (check.program().precision == Precision::Int8 && cpuWeights)
    EIN_RETURN_IF_ERROR(check.dtypeIn(gemm.b, "b", {DType::F32, DType::I8}));
  else if (check.program().precision == Precision::Int4 && cpuWeights)
    EIN_RETURN_IF_ERROR(check.dtypeIn(gemm.b, "b", {DType::F32, DType::I4}));
  else
    EIN_RETURN_IF_ERROR(check.dtypeIn(gemm.b, "b", {DType::F32}));
  // An int8 or int4 gemm: b is one matrix for the whole batch, with its
  // scales in a weight tensor: per column (int8, b_scale) or per group of 32
  // along k and column (b_group_scale: int4, or int8 as q8_0 holds it).
  const DType weights = check.tensorOf(gemm.b).dtype;
  if (weights == DType::I8 || weights == DType::I4) {
    const char *kind = weights == DType::I8 ? "int8" : "int4";
    for (size_t axis = 0; axis < gemm.batch.size(); ++axis)
      if (gemm.b.strides[axis] != 0 && gemm.batch[axis] != 1)
        return invalid(fmt::format("{} weights b must be one matrix shared by the batch (batch strides 0)", kind));
    if (weights == DType::I4 && !gemm.bGroupScale) return invalid("int4 weights b need a b_group_scale view");
    if (weights == DType::I8 && bool(gemm.bScale) == bool(gemm.bGroupScale))
      return invalid("int8 weights b need either a b_scale or a b_group_scale view");
    // The int32 sums of 8-bit products stay exact up to this k.
    if (gemm.k > 65536) return invalid(fmt::format("an {} gemm's k is at most 65536, not {}", kind, gemm.k));
    const char *scaleName = gemm.bScale ? "b_scale" : "b_group_scale";
    if (check.tensorOf(gemm.bScale ? *gemm.bScale : *gemm.bGroupScale).storage != Storage::Weights)
      return invalid(fmt::format("{} must view a weight tensor", scaleName));
  }
  if (gemm.bScale && weights != DType::I8) return invalid("b_scale is only for int8 weights b");
  if (gemm.bGroupScale && weights != DType::I8 && weights != DType::I4)
    return invalid("b_group_scale is only for int8 or int4 weights b");
  gemm.groupBits = static_cast<int8_t>(!gemm.bGroupScale ? 0 : weights == DType::I4 ? 4 : 8);
  if (gemm.batch.product() * gemm.m * gemm.n > 0) {
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(gemm.a, gemm.k, "a"));
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(gemm.b, gemm.k, "b"));
  }
  info.attributes["epilogue"] = gemmFormula(gemm, in.activation());
  if (gemm.bScale) info.attributes["weights"] = "int8";
  if (gemm.bGroupScale) info.attributes["weights"] = weights == DType::I4 ? "int4" : "int8, a scale per group of 32";
  if (gemm.alpha != 1.0f) info.attributes["alpha"] = fmt::format("{}", gemm.alpha);
  return Status();
}

// The mask of an attention step: present exactly when its kind is not None,
// f32 for Add and bool for Keep and Drop.
Status checkMask(fb::MaskKind kind, MaskKind decodedKind, const std::optional<View> &mask, float fill,
                 const StepChecker &check, StepInfo &info) {
  info.attributes["mask"] = fb::EnumNameMaskKind(kind);
  if (decodedKind == MaskKind::None) {
    if (mask) return invalid("it has a mask view but mask_kind None");
    return Status();
  }
  if (!mask) return invalid(fmt::format("mask_kind {} needs a mask view", fb::EnumNameMaskKind(kind)));
  EIN_RETURN_IF_ERROR(check.dtypeIn(*mask, "mask", {decodedKind == MaskKind::Add ? DType::F32 : DType::Bool}));
  if (decodedKind != MaskKind::Add) info.attributes["mask_fill"] = fmt::format("{}", fill);
  return Status();
}

Status decodeAttention(const fb::Attention &in, const StepChecker &check, Attention &op, StepInfo &info) {
  // k and v: f32, or both bf16 (a bf16 key/value cache) on the CPU.
  const bool cpu = check.program().target == Device::Cpu;
  EIN_RETURN_IF_ERROR(check.dtypeIn(op.k, "k", cpu ? std::initializer_list<DType>{DType::F32, DType::BF16}
                                                  : std::initializer_list<DType>{DType::F32}));
  EIN_RETURN_IF_ERROR(check.dtypeIn(op.v, "v", {check.tensorOf(op.k).dtype}));
  op.bf16KeyValues = check.tensorOf(op.k).dtype == DType::BF16;
  if (op.bf16KeyValues) info.attributes["key_values"] = "bf16";
  // q . k and p . v in bf16 where the precision allows, except over a
  // session's state (a key/value cache): a decode step's few queries run in
  // f32 (attentionF32Decode), so a prompt's tokens must too, or a sequence's
  // tokens would depend on how its prompt was split into steps (a
  // scheduler's chunks, a cached prefix).
  const Precision precision = check.program().precision;
  const bool overState = check.tensorOf(op.k).storage == Storage::State ||
                         check.tensorOf(op.v).storage == Storage::State;
  op.bf16 = (precision == Precision::Bf16 || precision == Precision::Int8 || precision == Precision::Int4) &&
            check.program().target == Device::Cpu && !overState;
  EIN_RETURN_IF_ERROR(checkMask(in.mask_kind(), op.maskKind, op.mask, op.maskFill, check, info));
  if (!(op.softcap >= 0.0f) || std::isinf(op.softcap))
    return invalid(fmt::format("softcap {} is not 0 (none) or a positive number", op.softcap));
  if (op.softcap > 0.0f) info.attributes["softcap"] = fmt::format("{}", op.softcap);
  if (op.causal) {
    if (op.queries > 0 && (op.causalPositions < 1 || op.queries % op.causalPositions != 0))
      return invalid(fmt::format("causal_positions {} does not divide the {} queries", op.causalPositions, op.queries));
    if (op.causalPositions > op.keys)
      return invalid(fmt::format("causal attention has {} query positions but only {} keys", op.causalPositions,
                                 op.keys));
    info.sizes["causal_positions"] = op.causalPositions;
  } else {
    op.causalPositions = 0;  // what the kernels read as "not causal"
  }
  // Each output row reads keys x (head_dim + value_dim) elements of k and v.
  if (op.batch.concat({op.queries, op.valueDim}).product() > 0) {
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.q, op.headDim, "q"));
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.k, op.keys * op.headDim, "k"));
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.v, op.keys * op.valueDim, "v"));
  }
  info.attributes["scale"] = fmt::format("{}", op.scale);
  if (op.causal) info.attributes["causal"] = "yes";
  return Status();
}

Status decodeTalkingHeadsAttention(const fb::TalkingHeadsAttention &in, const StepChecker &check,
                                   TalkingHeadsAttention &op, StepInfo &info) {
  if (op.preBias && !op.preMix) return invalid("it has pre_bias without pre_mix");
  if (op.postBias && !op.postMix) return invalid("it has post_bias without post_mix");
  EIN_RETURN_IF_ERROR(checkMask(in.mask_kind(), op.maskKind, op.mask, op.maskFill, check, info));
  // Each output row reads keys x (head_dim + value_dim) elements of k and v,
  // and mixing sums over heads.
  if (op.batch.concat({op.heads, op.queries, op.valueDim}).product() > 0) {
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.q, op.headDim, "q"));
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.k, op.keys * op.headDim, "k"));
    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(op.v, op.keys * op.valueDim, "v"));
    if (op.preMix) EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(*op.preMix, op.heads, "pre_mix"));
    if (op.postMix) EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(*op.postMix, op.heads, "post_mix"));
  }
  info.attributes["scale"] = fmt::format("{}", op.scale);
  info.attributes["pre_mix"] = op.preMix ? (op.preBias ? "yes, with bias" : "yes") : "no";
  info.attributes["post_mix"] = op.postMix ? (op.postBias ? "yes, with bias" : "yes") : "no";
  return Status();
}

Status decodeLayerNorm(const fb::LayerNorm &in, const StepChecker &check, LayerNorm &op, StepInfo &info) {
  if (op.sum && !op.residual) return invalid("it writes sum without a residual");
  if (op.sum) EIN_RETURN_IF_ERROR(check.writable(*op.sum, op.shape, "sum"));
  if (op.variant == LayerNormVariant::Rms && op.beta) return invalid("an rms layernorm has no beta");
  info.attributes["variant"] = fb::EnumNameLayerNormVariant(in.variant());
  info.attributes["epsilon"] = fmt::format("{}", op.epsilon);
  info.attributes["residual"] = op.residual ? (op.sum ? "yes, sum written" : "yes") : "no";
  info.attributes["gamma"] = op.gamma ? "yes" : "no";
  info.attributes["beta"] = op.beta ? "yes" : "no";
  return Status();
}

// The inputs and the register program: each instruction reads only
// registers written before it.
Status decodeElementwise(const fb::Elementwise &in, const StepChecker &check, Elementwise &op, StepInfo &info) {
  size_t inputCount = in.inputs() ? in.inputs()->size() : 0;
  size_t length = in.program() ? in.program()->size() : 0;
  if (length == 0) return invalid("the element-wise program is empty");
  if (inputCount + length > kMaxRegisters)
    return invalid(fmt::format("{} inputs and {} instructions exceed the {} registers a program may use", inputCount,
                               length, kMaxRegisters));
  for (size_t i = 0; i < inputCount; ++i) {
    std::string name = fmt::format("input {}", i);
    EIN_ASSIGN_OR_RETURN(View view, check.view(in.inputs()->Get(static_cast<flatbuffers::uoffset_t>(i)), op.shape,
                                               name.c_str()));
    EIN_RETURN_IF_ERROR(check.dtypeIn(view, name.c_str(),
                                      {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool}));
    op.inputs.push_back(std::move(view));
  }
  for (size_t i = 0; i < length; ++i) {
    const fb::Instruction *encoded = in.program()->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::optional<Opcode> opcode = ops::fromSchema<Opcode>(encoded->opcode());
    if (!opcode)
      return invalid(fmt::format("instruction {} has unknown opcode {}", i, static_cast<int>(encoded->opcode())));
    Instruction instruction{*opcode, encoded->a(), encoded->b(), encoded->c(), encoded->imm()};
    // Instruction i may read registers written before it: inputs and earlier results.
    size_t defined = inputCount + i;
    int reads = operandCount(instruction.opcode);
    const uint16_t operands[3] = {instruction.a, instruction.b, instruction.c};
    for (int operand = 0; operand < reads; ++operand)
      if (operands[operand] >= defined)
        return invalid(fmt::format("instruction {} ({}) reads register {} before it is written (registers 0..{} are "
                                   "defined there)",
                                   i, fb::EnumNameOpcode(encoded->opcode()), operands[operand],
                                   static_cast<int64_t>(defined) - 1));
    op.program.push_back(instruction);
  }
  info.sizes["inputs"] = static_cast<int64_t>(inputCount);
  info.sizes["program"] = static_cast<int64_t>(length);
  info.attributes["ops"] = programOps(op.program);
  return Status();
}

// A copy keeps the dtype, except that f32 may be rounded into bf16 (rows
// appended to a bf16 key/value cache).
Status decodeCopy(const fb::Copy &, const StepChecker &check, Copy &op, StepInfo &info) {
  DType from = check.tensorOf(op.x).dtype, to = check.tensorOf(op.y).dtype;
  if (from != to && !(from == DType::F32 && to == DType::BF16))
    return invalid(fmt::format("it copies a {} tensor into a {} tensor; a copy keeps the dtype (or rounds f32 to bf16)",
                               dtypeName(from), dtypeName(to)));
  info.attributes["dtype"] = from == to ? dtypeName(from) : fmt::format("{} to {}", dtypeName(from), dtypeName(to));
  return Status();
}

#define GET_STEP_DECODERS
#include "loader/step_decoders.inc"

}  // namespace

Status decodeStep(const fb::Step &step, size_t index, const SizeResolver &sizes, Program &program) {
  Step decoded;
  StepInfo info;
  EIN_RETURN_IF_ERROR(decodeStep(step, index, sizes, program, decoded, info));
  program.steps.push_back(std::move(decoded));
  program.stepInfos.push_back(std::move(info));
  return Status();
}

Status decodeStep(const fb::Step &step, size_t index, const SizeResolver &sizes, const Program &program, Step &out,
                  StepInfo &info, bool again) {
  if (!again) {
    info = StepInfo{};
    info.op = kernelName(step.kernel_type());
    info.location = step.location() ? step.location()->str() : "";
    out.label = info.location.empty() ? fmt::format("step {} ({})", index, info.op)
                                      : fmt::format("step {} ({} at {})", index, info.op, info.location);
  }
  bool known = step.kernel_type() >= fb::Kernel::MIN && step.kernel_type() <= fb::Kernel::MAX &&
               step.kernel_type() != fb::Kernel::NONE;
  if (known && !step.kernel()) return invalid(out.label + ": the kernel's table is missing");
  StepChecker check(program, sizes);
  StatusOr<Kernel> kernel = decodeKernel(step, check, info);
  if (!kernel.ok()) return Status(kernel.status().code(), out.label + ": " + kernel.status().message());
  out.kernel = std::move(kernel).value();
  if (again) return Status();
  info.operands = check.takeOperands();
  info.sources = readStrings(step.sources());
  if (info.sources.empty() && !info.location.empty()) info.sources.push_back(info.location);
  info.scope = step.scope() ? step.scope()->str() : "";
  info.fusedBy = readStrings(step.fused_by());
  info.firstRun = step.first_run();
  info.rowsOverKept = step.rows_over_kept();
  out.perSequence = step.per_sequence();
  out.firstRun = step.first_run();
  out.rowsOverKept = step.rows_over_kept();
  return Status();
}

}  // namespace ein::detail
