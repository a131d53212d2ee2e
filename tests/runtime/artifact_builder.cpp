#include "artifact_builder.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <random>

#include "ein/half_float.hpp"

namespace ein::testing {

std::vector<int64_t> denseStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t axis = shape.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * shape[axis];
  return strides;
}

ViewSpec dense(uint32_t tensor, const std::vector<int64_t> &shape) { return {tensor, 0, denseStrides(shape)}; }

fb::Instruction instruction(fb::Opcode opcode, uint16_t a, uint16_t b, uint16_t c, float imm) {
  return fb::Instruction(opcode, a, b, c, imm);
}

namespace {

// The schema's I4 is the runtime's DType::I4 (not the same number); every
// other value is the same.
ein::DType runtimeDType(fb::DType dtype) {
  return dtype == fb::DType::I4 ? ein::DType::I4 : static_cast<ein::DType>(dtype);
}

uint64_t byteSize(fb::DType dtype, const std::vector<int64_t> &shape) {
  uint64_t elements = 1;
  for (int64_t size : shape) elements *= static_cast<uint64_t>(size);
  return ein::dtypeBytes(runtimeDType(dtype), elements);
}

uint64_t alignTo64(uint64_t value) { return (value + 63) / 64 * 64; }

// Size arguments of Create...Direct calls (a temporary Size lives until the
// call returns).
const fb::Size *size(const fb::Size &value) { return &value; }
std::vector<fb::Size> sizeVector(const std::vector<int64_t> &values) { return {values.begin(), values.end()}; }

flatbuffers::Offset<fb::View> viewOf(flatbuffers::FlatBufferBuilder &builder, const ViewSpec &view) {
  std::vector<fb::Size> strides = sizeVector(view.strides);
  return fb::CreateViewDirect(builder, view.tensor, size(fb::Size(view.offset)), &strides);
}

flatbuffers::Offset<fb::View> viewOf(flatbuffers::FlatBufferBuilder &builder, const std::optional<ViewSpec> &view) {
  return view ? viewOf(builder, *view) : flatbuffers::Offset<fb::View>();
}

}  // namespace

uint32_t ArtifactBuilder::tensor(const TensorSpec &spec) {
  tensors.push_back(spec);
  return static_cast<uint32_t>(tensors.size() - 1);
}

uint32_t ArtifactBuilder::input(const std::string &name, fb::DType dtype, std::vector<int64_t> shape,
                                int64_t upperBound) {
  auto index = static_cast<uint32_t>(inputs.size());
  uint32_t id = tensor({dtype, std::move(shape), fb::Storage::Input, index, 0});
  inputs.push_back({name, id, upperBound});
  return id;
}

uint32_t ArtifactBuilder::output(const std::string &name, fb::DType dtype, std::vector<int64_t> shape) {
  auto index = static_cast<uint32_t>(outputs.size());
  uint32_t id = tensor({dtype, std::move(shape), fb::Storage::Output, index, 0});
  outputs.push_back({name, id, 0});
  return id;
}

uint32_t ArtifactBuilder::state(const std::string &name, fb::DType dtype, std::vector<int64_t> shape) {
  const uint64_t offset = stateBytes;
  stateBytes = alignTo64(offset + byteSize(dtype, shape));
  uint32_t id = tensor({dtype, std::move(shape), fb::Storage::State, static_cast<uint32_t>(states.size()), offset});
  states.push_back({name, id, 0});
  return id;
}

uint32_t ArtifactBuilder::arena(fb::DType dtype, std::vector<int64_t> shape) {
  uint64_t offset = arenaUsed_;
  arenaUsed_ = alignTo64(offset + byteSize(dtype, shape));
  return tensor({dtype, std::move(shape), fb::Storage::Arena, 0, offset});
}

uint32_t ArtifactBuilder::arena(fb::DType dtype, std::vector<int64_t> shape, const std::vector<int64_t> &plannedShape) {
  uint64_t offset = arenaUsed_;
  arenaUsed_ = alignTo64(offset + byteSize(dtype, plannedShape));
  return tensor({dtype, std::move(shape), fb::Storage::Arena, 0, offset});
}

Size ArtifactBuilder::dim(const std::string &name, int64_t min, int64_t max) {
  dims.push_back({name, min, max});
  return dimSize(static_cast<uint32_t>(dims.size() - 1));
}

int64_t ArtifactBuilder::sizeField(const Size &size) {
  auto same = [&](const std::vector<fb::SizeOp> &ops) {
    return ops.size() == size.ops.size() &&
           std::equal(ops.begin(), ops.end(), size.ops.begin(), [](const fb::SizeOp &x, const fb::SizeOp &y) {
             return x.opcode() == y.opcode() && x.operand() == y.operand();
           });
  };
  auto found = std::find_if(sizes.begin(), sizes.end(), same);
  if (found == sizes.end()) found = sizes.insert(sizes.end(), size.ops);
  return -1 - static_cast<int64_t>(found - sizes.begin());
}

uint32_t ArtifactBuilder::weights(fb::DType dtype, std::vector<int64_t> shape, const std::vector<uint8_t> &bytes,
                                  const std::string &paramName) {
  EXPECT_EQ(bytes.size(), byteSize(dtype, shape)) << "weights of the wrong size";
  uint64_t offset = weights_.size();
  weights_.insert(weights_.end(), bytes.begin(), bytes.end());
  weights_.resize(alignTo64(weights_.size()), 0);
  uint32_t id = tensor({dtype, std::move(shape), fb::Storage::Weights, 0, offset});
  if (!paramName.empty()) params.push_back({paramName, id});
  return id;
}

uint32_t ArtifactBuilder::weightsF32(std::vector<int64_t> shape, const std::vector<float> &values,
                                     const std::string &paramName) {
  return weights(fb::DType::F32, std::move(shape), bytesOf(values), paramName);
}

uint32_t ArtifactBuilder::weightsBf16(std::vector<int64_t> shape, const std::vector<float> &values,
                                      const std::string &paramName) {
  std::vector<uint8_t> bytes;
  for (float value : values) {
    const uint16_t bits = floatToBfloat(value);
    bytes.push_back(static_cast<uint8_t>(bits));
    bytes.push_back(static_cast<uint8_t>(bits >> 8));
  }
  return weights(fb::DType::BF16, std::move(shape), bytes, paramName);
}

void ArtifactBuilder::step(StepFn build) { steps_.push_back(std::move(build)); }

flatbuffers::Offset<fb::Step> ArtifactBuilder::stepOf(flatbuffers::FlatBufferBuilder &b, fb::Kernel kind,
                                                      flatbuffers::Offset<void> kernel, const std::string &location,
                                                      size_t index) const {
  return fb::CreateStepDirect(b, kind, kernel, location.c_str(), perSequenceSteps.count(index) > 0, nullptr,
                              nullptr, nullptr, firstRunSteps.count(index) > 0, rowsOverKeptSteps.count(index) > 0);
}

void ArtifactBuilder::gemm(const GemmSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> batch = sizeVector(spec.batch);
    auto kernel = fb::CreateGemmDirect(b, &batch, size(fb::Size(spec.m)), size(fb::Size(spec.n)),
                                       size(fb::Size(spec.k)), viewOf(b, spec.a), viewOf(b, spec.b),
                                       viewOf(b, spec.c), viewOf(b, spec.bias), spec.alpha, spec.activation,
                                       viewOf(b, spec.residual), viewOf(b, spec.bScale),
                                       viewOf(b, spec.bGroupScale));
    return stepOf(b, fb::Kernel::Gemm, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::elementwise(const ElementwiseSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<flatbuffers::Offset<fb::View>> inputs;
    for (const ViewSpec &view : spec.inputs) inputs.push_back(viewOf(b, view));
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateElementwiseDirect(b, &shape, &inputs, viewOf(b, spec.output), &spec.program);
    return stepOf(b, fb::Kernel::Elementwise, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::softmax(const SoftmaxSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateSoftmaxDirect(b, &shape, viewOf(b, spec.x), viewOf(b, spec.y));
    return stepOf(b, fb::Kernel::Softmax, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::reduce(const ReduceSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateReduceDirect(b, &shape, spec.reducedRank, spec.kind, viewOf(b, spec.x),
                                         viewOf(b, spec.y));
    return stepOf(b, fb::Kernel::Reduce, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::variance(const VarianceSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateVarianceDirect(b, &shape, spec.reducedRank, spec.correction, spec.root, viewOf(b, spec.x),
                                           viewOf(b, spec.y));
    return stepOf(b, fb::Kernel::Variance, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::gather(const GatherSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> idsShape = sizeVector(spec.idsShape);
    auto kernel = fb::CreateGatherDirect(b, &idsShape, size(fb::Size(spec.rows)), size(fb::Size(spec.width)),
                                         viewOf(b, spec.ids),
                                         viewOf(b, spec.table), viewOf(b, spec.y));
    return stepOf(b, fb::Kernel::Gather, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::copy(const CopySpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateCopyDirect(b, &shape, viewOf(b, spec.x), viewOf(b, spec.y));
    return stepOf(b, fb::Kernel::Copy, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::attention(const AttentionSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> batch = sizeVector(spec.batch);
    auto kernel = fb::CreateAttentionDirect(b, &batch, size(fb::Size(spec.queries)), size(fb::Size(spec.keys)),
                                            size(fb::Size(spec.headDim)), size(fb::Size(spec.valueDim)), spec.scale, viewOf(b, spec.q), viewOf(b, spec.k), viewOf(b, spec.v),
                                            viewOf(b, spec.out), spec.maskKind, viewOf(b, spec.mask), spec.maskFill,
                                            spec.causalPositions > 0, size(fb::Size(spec.causalPositions)),
                                            spec.softcap);
    return stepOf(b, fb::Kernel::Attention, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::talkingHeads(const TalkingHeadsSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> batch = sizeVector(spec.batch);
    auto kernel = fb::CreateTalkingHeadsAttentionDirect(
        b, &batch, size(fb::Size(spec.heads)), size(fb::Size(spec.queries)), size(fb::Size(spec.keys)),
        size(fb::Size(spec.headDim)), size(fb::Size(spec.valueDim)), spec.scale,
        viewOf(b, spec.q), viewOf(b, spec.k), viewOf(b, spec.v), viewOf(b, spec.out), viewOf(b, spec.preMix),
        viewOf(b, spec.preBias), viewOf(b, spec.postMix), viewOf(b, spec.postBias), spec.maskKind,
        viewOf(b, spec.mask), spec.maskFill);
    return stepOf(b, fb::Kernel::TalkingHeadsAttention, kernel.Union(), location, index);
  });
}

void ArtifactBuilder::layerNorm(const LayerNormSpec &spec, const std::string &location) {
  step([this, spec, location, index = steps_.size()](flatbuffers::FlatBufferBuilder &b) {
    std::vector<fb::Size> shape = sizeVector(spec.shape);
    auto kernel = fb::CreateLayerNormDirect(b, &shape, viewOf(b, spec.x), viewOf(b, spec.residual),
                                            viewOf(b, spec.sum), viewOf(b, spec.gamma), viewOf(b, spec.beta),
                                            viewOf(b, spec.y), spec.epsilon, spec.variant);
    return stepOf(b, fb::Kernel::LayerNorm, kernel.Union(), location, index);
  });
}

std::vector<uint8_t> ArtifactBuilder::header(uint64_t offset) const {
  flatbuffers::FlatBufferBuilder b;
  b.ForceDefaults(true);  // the same size whatever the values, for the two-pass layout
  std::vector<flatbuffers::Offset<fb::Tensor>> tensorTable;
  for (const TensorSpec &t : tensors) {
    std::vector<fb::Size> shape = sizeVector(t.shape);
    tensorTable.push_back(fb::CreateTensorDirect(b, t.dtype, &shape, t.storage, t.index, t.offset));
  }
  auto bindings = [&](const std::vector<BindingSpec> &specs) {
    std::vector<flatbuffers::Offset<fb::Binding>> table;
    for (const BindingSpec &binding : specs)
      table.push_back(
          fb::CreateBindingDirect(b, binding.name.c_str(), binding.tensor, binding.upperBound, binding.firstRun));
    return table;
  };
  auto inputTable = bindings(inputs), outputTable = bindings(outputs), stateTable = bindings(states);
  std::vector<flatbuffers::Offset<fb::Parameter>> paramTable;
  for (const ParamSpec &param : params)
    paramTable.push_back(fb::CreateParameterDirect(b, param.name.c_str(), param.tensor, param.dtype,
                                                  param.shape ? &*param.shape : nullptr, param.folded));
  std::vector<flatbuffers::Offset<fb::Step>> stepTable;
  for (const StepFn &build : steps_) stepTable.push_back(build(b));
  std::vector<flatbuffers::Offset<fb::Dim>> dimTable;
  for (const DimSpec &dim : dims) dimTable.push_back(fb::CreateDimDirect(b, dim.name.c_str(), dim.min, dim.max));
  std::vector<flatbuffers::Offset<fb::SizeExpression>> sizeTable;
  for (const std::vector<fb::SizeOp> &ops : sizes) sizeTable.push_back(fb::CreateSizeExpressionDirect(b, &ops));
  std::vector<flatbuffers::Offset<fb::Check>> checkTable;
  for (const CheckSpec &check : checks)
    checkTable.push_back(fb::CreateCheckDirect(b, check.kind, size(fb::Size(check.lhs)), size(fb::Size(check.rhs)),
                                               check.location.c_str(),
                                               check.message.c_str()));
  const fb::Size advance(positionAdvance);
  auto model = fb::CreateModelDirect(b, formatVersion, target, "ein tests", "test.ein", &inputTable, &outputTable,
                                     &paramTable, &tensorTable, &stepTable, arenaBytes.value_or(arenaUsed_),
                                     weightsOffset.value_or(offset), weightsBytes.value_or(weights_.size()), precision,
                                     dims.empty() ? nullptr : &dimTable, sizes.empty() ? nullptr : &sizeTable,
                                     checks.empty() ? nullptr : &checkTable, states.empty() ? nullptr : &stateTable,
                                     stateBytes, positionDim, positionDim >= 0 ? &advance : nullptr);
  fb::FinishSizePrefixedModelBuffer(b, model);
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

std::vector<uint8_t> ArtifactBuilder::build() const {
  // The weight segment's offset is a field of the FlatBuffer: build once to
  // learn the size, then again with the final offset.
  uint64_t offset = alignTo64(header(0).size());
  std::vector<uint8_t> file = header(offset);
  EXPECT_EQ(alignTo64(file.size()), offset) << "the header changed size between passes";
  file.resize(offset, 0);
  file.insert(file.end(), weights_.begin(), weights_.end());
  return file;
}

StatusOr<std::unique_ptr<Session>> loadAndRun(const std::vector<uint8_t> &artifact,
                                              const std::map<std::string, std::vector<uint8_t>> &inputs) {
  auto model = Model::loadFromMemory(artifact.data(), artifact.size(), "test.einb");
  if (!model.ok()) return model.status();
  auto session = Session::create(model.value());
  if (!session.ok()) return session.status();
  for (const TensorInfo &info : model.value()->inputs()) {
    auto given = inputs.find(info.name);
    if (given == inputs.end()) continue;
    Status status = session.value()->setInput(info.name, info.dtype, info.shape, given->second.data(),
                                              given->second.size());
    if (!status.ok()) return status;
  }
  Status status = session.value()->run();
  if (!status.ok()) return status;
  return std::move(session).value();
}

std::vector<uint8_t> everyKernelArtifact() {
  ArtifactBuilder a;
  const int64_t rows = 5, width = 4;
  uint32_t ids = a.input("ids", fb::DType::I32, {2, 3}, rows);
  uint32_t mask = a.input("mask", fb::DType::Bool, {2, 3, width});
  uint32_t probs = a.output("probs", fb::DType::F32, {2, 3, width});
  uint32_t total = a.output("total", fb::DType::F32, {2});
  uint32_t probsT = a.output("probsT", fb::DType::F32, {width, 2, 3});
  std::vector<float> table(rows * width), w(width * width), bias(width);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.1f * static_cast<float>(i) - 0.7f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i);
  uint32_t tableId = a.weightsF32({rows, width}, table, "embed.weight");
  uint32_t wId = a.weightsF32({width, width}, w, "proj.weight");
  uint32_t biasId = a.weightsF32({width}, bias, "proj.bias");
  uint32_t embedded = a.arena(fb::DType::F32, {2, 3, width});
  uint32_t projected = a.arena(fb::DType::F32, {2, 3, width});
  uint32_t masked = a.arena(fb::DType::F32, {2, 3, width});
  a.gather({{2, 3}, rows, width, dense(ids, {2, 3}), dense(tableId, {rows, width}), dense(embedded, {2, 3, width})},
           "every.ein:1:1");
  // projected[b, s, :] = gelu(embedded[b, s, :] @ w^T + bias), as one batched gemm over b.
  a.gemm({{2}, 3, width, width, {embedded, 0, {3 * width, width, 1}}, {wId, 0, {0, 1, width}},
          {projected, 0, {3 * width, width, 1}}, ViewSpec{biasId, 0, {0, 0, 1}}, 1.0f, fb::Activation::Gelu},
         "every.ein:2:1");
  // masked = mask ? projected : -inf
  a.elementwise({{2, 3, width},
                 {dense(projected, {2, 3, width}), dense(mask, {2, 3, width})},
                 dense(masked, {2, 3, width}),
                 {instruction(fb::Opcode::Const, 0, 0, 0, -INFINITY), instruction(fb::Opcode::Select, 1, 0, 2)}},
                "every.ein:3:1");
  a.softmax({{2, 3, width}, dense(masked, {2, 3, width}), dense(probs, {2, 3, width})}, "every.ein:4:1");
  a.reduce({{2, 3, width}, 2, fb::ReduceKind::Sum, dense(probs, {2, 3, width}), dense(total, {2})}, "every.ein:5:1");
  a.copy({{width, 2, 3}, {probs, 0, {1, 3 * width, width}}, dense(probsT, {width, 2, 3})}, "every.ein:6:1");
  return a.build();
}

Size constantSize(int64_t value) { return {{fb::SizeOp(fb::SizeOpcode::Constant, value)}}; }
Size dimSize(uint32_t dim) { return {{fb::SizeOp(fb::SizeOpcode::Dim, dim)}}; }

namespace {

Size binary(fb::SizeOpcode opcode, Size a, const Size &b) {
  a.ops.insert(a.ops.end(), b.ops.begin(), b.ops.end());
  a.ops.push_back(fb::SizeOp(opcode, 0));
  return a;
}

}  // namespace

Size operator+(Size a, const Size &b) { return binary(fb::SizeOpcode::Add, std::move(a), b); }
Size operator-(Size a, const Size &b) { return binary(fb::SizeOpcode::Sub, std::move(a), b); }
Size operator*(Size a, const Size &b) { return binary(fb::SizeOpcode::Mul, std::move(a), b); }
Size floorDiv(Size a, const Size &b) { return binary(fb::SizeOpcode::FloorDiv, std::move(a), b); }
Size operator+(Size a, int64_t b) { return std::move(a) + constantSize(b); }
Size operator-(Size a, int64_t b) { return std::move(a) - constantSize(b); }
Size operator*(Size a, int64_t b) { return std::move(a) * constantSize(b); }
Size operator*(int64_t a, const Size &b) { return constantSize(a) * b; }
Size operator-(int64_t a, const Size &b) { return constantSize(a) - b; }
Size floorDiv(Size a, int64_t b) { return floorDiv(std::move(a), constantSize(b)); }

int64_t Size::at(const std::vector<int64_t> &dims) const {
  std::vector<int64_t> stack;
  for (const fb::SizeOp &op : ops) {
    switch (op.opcode()) {
      case fb::SizeOpcode::Constant: stack.push_back(op.operand()); continue;
      case fb::SizeOpcode::Dim: stack.push_back(dims.at(static_cast<size_t>(op.operand()))); continue;
      default: break;
    }
    const int64_t b = stack.back();
    stack.pop_back();
    int64_t &a = stack.back();
    switch (op.opcode()) {
      case fb::SizeOpcode::Add: a += b; break;
      case fb::SizeOpcode::Sub: a -= b; break;
      case fb::SizeOpcode::Mul: a *= b; break;
      case fb::SizeOpcode::FloorDiv: a = a / b - (a % b < 0); break;
      case fb::SizeOpcode::Mod: a = (a % b + b) % b; break;
      case fb::SizeOpcode::Max: a = std::max(a, b); break;
      case fb::SizeOpcode::Min: a = std::min(a, b); break;
      default: break;
    }
  }
  return stack.back();
}

ShapeBuilder::ShapeBuilder(ArtifactBuilder &builder, const std::vector<ArtifactBuilder::DimSpec> &ranges)
    : builder_(builder), dynamic_(true) {
  for (const ArtifactBuilder::DimSpec &range : ranges) {
    dims_.push_back(builder.dim(range.name, range.min, range.max));
    planned_.push_back(range.max);
  }
}

ShapeBuilder::ShapeBuilder(ArtifactBuilder &builder, const std::vector<ArtifactBuilder::DimSpec> &ranges,
                           const std::vector<int64_t> &values)
    : builder_(builder), planned_(values), dynamic_(false) {
  for (size_t d = 0; d < ranges.size(); ++d) dims_.push_back(dimSize(static_cast<uint32_t>(d)));
}

int64_t ShapeBuilder::field(const Size &size) {
  bool constant = std::none_of(size.ops.begin(), size.ops.end(),
                               [](const fb::SizeOp &op) { return op.opcode() == fb::SizeOpcode::Dim; });
  return dynamic_ && !constant ? builder_.sizeField(size) : size.at(planned_);
}

std::vector<int64_t> ShapeBuilder::fields(const std::vector<Size> &sizes) {
  std::vector<int64_t> result;
  for (const Size &size : sizes) result.push_back(field(size));
  return result;
}

uint32_t ShapeBuilder::input(const std::string &name, fb::DType dtype, const std::vector<Size> &shape,
                             int64_t upperBound) {
  return builder_.input(name, dtype, fields(shape), upperBound);
}

uint32_t ShapeBuilder::output(const std::string &name, fb::DType dtype, const std::vector<Size> &shape) {
  return builder_.output(name, dtype, fields(shape));
}

uint32_t ShapeBuilder::arena(fb::DType dtype, const std::vector<Size> &shape) {
  std::vector<int64_t> planned;
  for (const Size &size : shape) planned.push_back(size.at(planned_));
  return builder_.arena(dtype, fields(shape), planned);
}

ViewSpec ShapeBuilder::dense(uint32_t tensor, const std::vector<Size> &shape) {
  std::vector<Size> strides(shape.size(), constantSize(1));
  for (size_t axis = shape.size(); axis-- > 1;) strides[axis - 1] = strides[axis] * shape[axis];
  return {tensor, 0, fields(strides)};
}

std::vector<uint8_t> dynamicEveryKernelArtifact(const std::vector<int64_t> &values) {
  ArtifactBuilder a;
  const std::vector<ArtifactBuilder::DimSpec> ranges = {{"b", 1, 3}, {"t", 1, 6}};
  ShapeBuilder s = values.empty() ? ShapeBuilder(a, ranges) : ShapeBuilder(a, ranges, values);
  const Size b = s.dim(0), t = s.dim(1), w = constantSize(4), one = constantSize(1);
  const int64_t rows = 5, width = 4;
  uint32_t ids = s.input("ids", fb::DType::I32, {b, t}, rows);
  uint32_t keep = s.input("keep", fb::DType::Bool, {b, t});
  uint32_t probs = s.output("probs", fb::DType::F32, {b, t, w});
  uint32_t pooled = s.output("pooled", fb::DType::F32, {b, w});
  uint32_t probsT = s.output("probsT", fb::DType::F32, {w, b, t});
  std::vector<float> table = randomFloats(rows * width, 11), weight = randomFloats(width * width, 12, -0.5f, 0.5f),
                     bias = randomFloats(width, 13, -0.1f, 0.1f), gamma = randomFloats(width, 14, 0.5f, 1.5f);
  uint32_t tableId = a.weightsF32({rows, width}, table, "embed.weight");
  uint32_t weightId = a.weightsF32({width, width}, weight, "proj.weight");
  uint32_t biasId = a.weightsF32({width}, bias, "proj.bias");
  uint32_t gammaId = a.weightsF32({width}, gamma, "norm.weight");
  uint32_t embedded = s.arena(fb::DType::F32, {b, t, w});
  uint32_t projected = s.arena(fb::DType::F32, {b, t, w});
  uint32_t normed = s.arena(fb::DType::F32, {b, t, w});
  uint32_t attended = s.arena(fb::DType::F32, {b, t, w});
  uint32_t summed = s.arena(fb::DType::F32, {b, t, w});
  a.gather({s.fields({b, t}), rows, width, s.dense(ids, {b, t}), dense(tableId, {rows, width}),
            s.dense(embedded, {b, t, w})},
           "dyn.ein:1:1");
  // One gemm over the b * t rows, its weight packed once at load.
  a.gemm({{}, s.field(b * t), width, width, s.dense(embedded, {b * t, w}), dense(weightId, {width, width}),
          s.dense(projected, {b * t, w}), ViewSpec{biasId, 0, {0, 1}}, 1.0f, fb::Activation::Gelu},
         "dyn.ein:2:1");
  a.layerNorm({s.fields({b, t, w}), s.dense(projected, {b, t, w}), std::nullopt, std::nullopt,
               ViewSpec{gammaId, 0, {1}}, std::nullopt, s.dense(normed, {b, t, w})},
              "dyn.ein:3:1");
  // keep[b, j] masks key j of every query: strides [t, 0, 1].
  AttentionSpec attention{s.fields({b}), s.field(t), s.field(t), width, width, 0.5f};
  attention.q = attention.k = attention.v = s.dense(normed, {b, t, w});
  attention.out = s.dense(attended, {b, t, w});
  attention.maskKind = fb::MaskKind::Keep;
  attention.mask = ViewSpec{keep, 0, s.fields({t, constantSize(0), one})};
  attention.maskFill = -1e9f;
  a.attention(attention, "dyn.ein:4:1");
  a.elementwise({s.fields({b, t, w}),
                 {s.dense(attended, {b, t, w}), s.dense(normed, {b, t, w})},
                 s.dense(summed, {b, t, w}),
                 {instruction(fb::Opcode::Add, 0, 1)}},
                "dyn.ein:5:1");
  a.softmax({s.fields({b, t, w}), s.dense(summed, {b, t, w}), s.dense(probs, {b, t, w})}, "dyn.ein:6:1");
  // The mean over t of probs viewed as [b, w, t].
  a.reduce({s.fields({b, w, t}), 1, fb::ReduceKind::Mean, ViewSpec{probs, 0, s.fields({t * 4, one, w})},
            s.dense(pooled, {b, w})},
           "dyn.ein:7:1");
  a.copy({s.fields({w, b, t}), ViewSpec{probs, 0, s.fields({one, t * 4, w})}, s.dense(probsT, {w, b, t})},
         "dyn.ein:8:1");
  return a.build();
}

std::vector<uint8_t> dynamicDoublingArtifact(int64_t min, int64_t max,
                                             const std::function<void(ArtifactBuilder &)> &edit) {
  ArtifactBuilder a;
  ShapeBuilder s(a, {{"t", min, max}});
  const Size t = s.dim(0), three = constantSize(3);
  uint32_t x = s.input("x", fb::DType::F32, {t, three});
  uint32_t z = s.input("z", fb::DType::F32, {t, three});
  uint32_t pad = s.input("pad", fb::DType::F32, {t + 1});
  uint32_t y = s.output("y", fb::DType::F32, {t, three});
  uint32_t head = s.output("head", fb::DType::F32, {t});
  a.elementwise({s.fields({t, three}),
                 {s.dense(x, {t, three}), s.dense(z, {t, three})},
                 s.dense(y, {t, three}),
                 {instruction(fb::Opcode::Const, 0, 0, 0, 2.0f), instruction(fb::Opcode::Mul, 0, 2),
                  instruction(fb::Opcode::Add, 3, 1)}});
  a.copy({s.fields({t}), ViewSpec{pad, 0, {1}}, s.dense(head, {t})});
  a.checks.push_back({fb::CheckKind::LessEqual, s.field(t + 1), 6, "test.ein:3:5", "pad[:t + 1] needs t + 1 <= 6"});
  if (edit) edit(a);
  return a.build();
}

std::vector<uint8_t> int8LinearArtifact() {
  ArtifactBuilder builder;
  builder.precision = fb::Precision::Int8;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 8});
  std::vector<uint8_t> q(24);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(static_cast<int8_t>(int(i * 37 % 255) - 127));
  uint32_t w = builder.weights(fb::DType::I8, {3, 8}, q, "w");
  uint32_t scale = builder.weightsF32({3}, {0.01f, 0.02f, 0.005f});
  uint32_t bias = builder.weightsF32({3}, {0.5f, -1.0f, 0.25f}, "b");
  uint32_t y = builder.output("y", fb::DType::F32, {2, 3});
  GemmSpec spec{{}, 2, 3, 8, ViewSpec{x, 0, {8, 1}}, ViewSpec{w, 0, {1, 8}}, ViewSpec{y, 0, {3, 1}}};
  spec.bias = ViewSpec{bias, 0, {0, 1}};
  spec.bScale = ViewSpec{scale, 0, {1}};
  builder.gemm(spec);
  return builder.build();
}

std::vector<uint8_t> groupScaledLinearArtifact(int bits) {
  ArtifactBuilder builder;
  builder.precision = bits == 4 ? fb::Precision::Int4 : fb::Precision::Int8;
  const int64_t k = 40, groups = 2;  // the second group partial
  uint32_t x = builder.input("x", fb::DType::F32, {2, k});
  std::vector<uint8_t> q(static_cast<size_t>(bits == 4 ? 3 * k / 2 : 3 * k));
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(i * 37 % 256);
  uint32_t w = builder.weights(bits == 4 ? fb::DType::I4 : fb::DType::I8, {3, k}, q, "w");
  std::vector<uint8_t> scales;
  for (int64_t i = 0; i < groups * 3; ++i) {
    const uint16_t half = floatToHalf(0.01f * static_cast<float>(i + 1));
    scales.push_back(static_cast<uint8_t>(half & 255));
    scales.push_back(static_cast<uint8_t>(half >> 8));
  }
  uint32_t scale = builder.weights(fb::DType::F16, {groups, 3}, scales);
  uint32_t y = builder.output("y", fb::DType::F32, {2, 3});
  GemmSpec spec{{}, 2, 3, k, ViewSpec{x, 0, {k, 1}}, ViewSpec{w, 0, {1, k}}, ViewSpec{y, 0, {3, 1}}};
  spec.bGroupScale = ViewSpec{scale, 0, {3, 1}};
  builder.gemm(spec);
  return builder.build();
}

std::vector<uint8_t> doublingArtifact(fb::Target target) {
  ArtifactBuilder builder;
  builder.target = target;
  uint32_t x = builder.input("x", fb::DType::F32, {2, 3});
  uint32_t flags = builder.input("flags", fb::DType::Bool, {4});
  uint32_t y = builder.output("y", fb::DType::F32, {2, 3});
  uint32_t flagsOut = builder.output("flags_out", fb::DType::Bool, {4});
  builder.elementwise({{2, 3}, {dense(x, {2, 3})}, dense(y, {2, 3}),
                       {instruction(fb::Opcode::Const, 0, 0, 0, 2.0f), instruction(fb::Opcode::Mul, 0, 1)}});
  builder.copy({{4}, dense(flags, {4}), dense(flagsOut, {4})});
  return builder.build();
}

std::vector<uint8_t> fusedKernelArtifact() {
  ArtifactBuilder a;
  const int64_t batch = 2, seq = 5, dim = 8, heads = 2, headDim = 4;
  uint32_t x = a.input("x", fb::DType::F32, {batch, seq, dim});
  uint32_t keep = a.input("keep", fb::DType::Bool, {batch, seq, seq});
  uint32_t y = a.output("y", fb::DType::F32, {batch, seq, dim});
  uint32_t th = a.output("th", fb::DType::F32, {batch, heads, seq, headDim});
  uint32_t h = a.output("h", fb::DType::F32, {batch, seq, dim});
  std::vector<float> bias(seq * seq), mix = {0.9f, 0.1f, -0.2f, 1.1f}, mixBias = {0.05f, -0.05f}, gamma(dim),
                                      beta(dim), w(dim * dim);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (int64_t i = 0; i < dim; ++i) gamma[i] = 1.0f + 0.1f * static_cast<float>(i), beta[i] = 0.01f * static_cast<float>(i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.03f * static_cast<float>(i % 11) - 0.15f;
  uint32_t biasId = a.weightsF32({seq, seq}, bias, "rel_bias");
  uint32_t mixId = a.weightsF32({heads, heads}, mix, "mix");
  uint32_t mixBiasId = a.weightsF32({heads}, mixBias, "mix_bias");
  uint32_t gammaId = a.weightsF32({dim}, gamma, "norm.weight");
  uint32_t betaId = a.weightsF32({dim}, beta, "norm.bias");
  uint32_t wId = a.weightsF32({dim, dim}, w, "proj.weight");
  uint32_t attended = a.arena(fb::DType::F32, {batch, seq, dim});
  uint32_t summed = a.arena(fb::DType::F32, {batch, seq, dim});
  // Self-attention of x with itself (one head of width 8), a [seq, seq] bias broadcast over batch.
  a.attention({{batch}, seq, seq, dim, dim, 0.35f, dense(x, {batch, seq, dim}), dense(x, {batch, seq, dim}),
               dense(x, {batch, seq, dim}), dense(attended, {batch, seq, dim}), fb::MaskKind::Add,
               ViewSpec{biasId, 0, {0, seq, 1}}},
              "fused.ein:1:1");
  // Talking heads over x split as [batch, seq, heads, headDim].
  ViewSpec split{x, 0, {seq * dim, headDim, dim, 1}};
  a.talkingHeads({{batch}, heads, seq, seq, headDim, headDim, 0.5f, split, split, split,
                  dense(th, {batch, heads, seq, headDim}), ViewSpec{mixId, 0, {2, 1}}, ViewSpec{mixBiasId, 0, {1}},
                  ViewSpec{mixId, 0, {1, 2}}, std::nullopt, fb::MaskKind::Keep, ViewSpec{keep, 0, {seq * seq, 0, seq, 1}}},
                 "fused.ein:2:1");
  // y = layernorm(x + attended), summed = x + attended; h = summed @ w + summed
  a.layerNorm({{batch, seq, dim}, dense(x, {batch, seq, dim}), dense(attended, {batch, seq, dim}),
               dense(summed, {batch, seq, dim}), ViewSpec{gammaId, 0, {1}}, ViewSpec{betaId, 0, {1}},
               dense(y, {batch, seq, dim}), 1e-5f, fb::LayerNormVariant::Variance},
              "fused.ein:3:1");
  a.gemm({{}, batch * seq, dim, dim, dense(summed, {batch * seq, dim}), dense(wId, {dim, dim}),
          dense(h, {batch * seq, dim}), std::nullopt, 1.0f, fb::Activation::Gelu, dense(summed, {batch * seq, dim})},
         "fused.ein:4:1");
  return a.build();
}

std::vector<float> randomFloats(size_t count, uint32_t seed, float low, float high) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float &value : values) value = distribution(generator);
  return values;
}

void expectClose(const std::vector<float> &got, const std::vector<double> &want, double tolerance,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 10; ++i) {
    bool ok;
    if (std::isnan(want[i])) ok = std::isnan(got[i]);
    else if (std::isinf(want[i])) ok = got[i] == want[i];
    else ok = std::fabs(got[i] - want[i]) <= tolerance * std::max(1.0, std::fabs(want[i]));
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
}

std::string temporaryDirectory(const std::string &name) {
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("ein_runtime_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path.string();
}

void writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(file.good()) << "cannot write " << path;
}

}  // namespace ein::testing
