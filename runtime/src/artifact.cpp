// Loading and verifying an artifact. Everything in the file is untrusted: the
// FlatBuffers verifier checks the buffer's structure, then every index,
// offset, size, stride and dtype is checked here before anything runs.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>

#include "ein/runtime.hpp"
#include "ein/schema/ein_artifact_generated.h"
#include "program.hpp"

namespace fb = ein::schema;

namespace ein {
namespace detail {
namespace {

constexpr uint64_t kWeightAlignment = 64;
// Sizes beyond 2^62 bytes are rejected, so products of checked sizes never overflow.
constexpr int64_t kMaxElements = int64_t{1} << 58;

Status invalid(const std::string &message) { return {StatusCode::InvalidArtifact, message}; }

class Decoder {
 public:
  Decoder(const fb::Model &model, uint64_t weightsAvailable) : model(model), weightsAvailable(weightsAvailable) {}

  Status decode(Program &program) {
    program.formatVersion = model.format_version();
    program.target = model.target() == fb::Target::Cpu ? "cpu" : "cuda";
    if (model.target() != fb::Target::Cpu && model.target() != fb::Target::Cuda)
      return invalid("unknown target " + std::to_string(static_cast<int>(model.target())));
    program.producer = model.producer() ? model.producer()->str() : "";
    program.source = model.source() ? model.source()->str() : "";
    program.arenaBytes = model.arena_bytes();
    program.weightsBytes = model.weights_bytes();
    if (program.arenaBytes > (uint64_t{1} << 62)) return invalid("arena of " + std::to_string(program.arenaBytes) + " bytes is too large");

    if (!model.tensors()) return invalid("the artifact has no tensor table");
    for (uint32_t i = 0; i < model.tensors()->size(); ++i) {
      Status status = decodeTensor(i, *model.tensors()->Get(i), program);
      if (!status.ok()) return status;
    }
    Status status = decodeBindings(model.inputs(), Storage::Input, "input", program.inputs, program.inputTensors, program);
    if (!status.ok()) return status;
    status = decodeBindings(model.outputs(), Storage::Output, "output", program.outputs, program.outputTensors, program);
    if (!status.ok()) return status;
    for (const TensorSlot &tensor : program.tensors) {
      size_t count = tensor.storage == Storage::Input ? program.inputs.size() : program.outputs.size();
      if ((tensor.storage == Storage::Input || tensor.storage == Storage::Output) && tensor.index >= count)
        return invalid("a tensor names " + std::string(tensor.storage == Storage::Input ? "input" : "output") + " " +
                       std::to_string(tensor.index) + " but there are " + std::to_string(count));
    }
    if (model.params()) {
      for (const fb::Parameter *param : *model.params()) {
        if (!param->name() || param->tensor() >= program.tensors.size() ||
            program.tensors[param->tensor()].storage != Storage::Weights)
          return invalid("a parameter entry names no weight tensor");
        const TensorSlot &slot = program.tensors[param->tensor()];
        program.params.push_back(TensorInfo{param->name()->str(), slot.dtype, slot.shape, 0});
      }
    }
    if (!model.steps()) return invalid("the artifact has no steps");
    for (uint32_t i = 0; i < model.steps()->size(); ++i) {
      const fb::Step *step = model.steps()->Get(i);
      std::string location = step->location() ? step->location()->str() : "";
      status = decodeStep(*step, program);
      if (!status.ok()) {
        std::string name = i < program.stepInfos.size() ? program.stepInfos[i].op : "";
        return invalid("step " + std::to_string(i) + (location.empty() ? "" : " (at " + location + ")") + ": " +
                       status.message());
      }
      program.steps.back().location = location;
      program.stepInfos.back().location = location;
    }
    return Status::success();
  }

 private:
  static bool dtypeFrom(fb::DType in, DType &out) {
    switch (in) {
      case fb::DType::F32: out = DType::F32; return true;
      case fb::DType::F16: out = DType::F16; return true;
      case fb::DType::BF16: out = DType::BF16; return true;
      case fb::DType::I32: out = DType::I32; return true;
      case fb::DType::I64: out = DType::I64; return true;
      case fb::DType::Bool: out = DType::Bool; return true;
    }
    return false;
  }

  Status decodeTensor(uint32_t id, const fb::Tensor &tensor, Program &program) {
    TensorSlot slot{};
    std::string name = "tensor " + std::to_string(id);
    if (!dtypeFrom(tensor.dtype(), slot.dtype)) return invalid(name + " has an unknown dtype");
    slot.numElements = 1;
    if (tensor.shape()) {
      for (int64_t size : *tensor.shape()) {
        if (size < 0) return invalid(name + " has a negative size");
        if (size > 0 && slot.numElements > kMaxElements / size) return invalid(name + " has too many elements");
        slot.numElements *= size;
        slot.shape.push_back(size);
      }
    }
    slot.index = tensor.index();
    slot.offset = tensor.offset();
    uint64_t bytes = static_cast<uint64_t>(slot.numElements) * dtypeSize(slot.dtype);
    switch (tensor.storage()) {
      case fb::Storage::Arena:
        slot.storage = Storage::Arena;
        if (slot.offset > program.arenaBytes || bytes > program.arenaBytes - slot.offset)
          return invalid(name + " (" + std::to_string(bytes) + " bytes at " + std::to_string(slot.offset) +
                         ") does not fit the arena of " + std::to_string(program.arenaBytes) + " bytes");
        break;
      case fb::Storage::Weights:
        slot.storage = Storage::Weights;
        if (slot.offset > weightsAvailable || bytes > weightsAvailable - slot.offset)
          return invalid(name + " (" + std::to_string(bytes) + " bytes at " + std::to_string(slot.offset) +
                         ") lies outside the weight segment of " + std::to_string(weightsAvailable) + " bytes");
        break;
      case fb::Storage::Input: slot.storage = Storage::Input; break;
      case fb::Storage::Output: slot.storage = Storage::Output; break;
      default: return invalid(name + " has an unknown storage kind");
    }
    program.tensors.push_back(std::move(slot));
    return Status::success();
  }

  Status decodeBindings(const flatbuffers::Vector<flatbuffers::Offset<fb::Binding>> *bindings, Storage storage,
                        const char *what, std::vector<TensorInfo> &infos, std::vector<uint32_t> &ids,
                        Program &program) {
    if (!bindings) return invalid(std::string("the artifact has no ") + what + " list");
    for (uint32_t i = 0; i < bindings->size(); ++i) {
      const fb::Binding *binding = bindings->Get(i);
      if (!binding->name()) return invalid(std::string(what) + " " + std::to_string(i) + " has no name");
      uint32_t id = binding->tensor();
      if (id >= program.tensors.size() || program.tensors[id].storage != storage || program.tensors[id].index != i)
        return invalid(std::string(what) + " \"" + binding->name()->str() + "\" is not bound to " + what +
                       " tensor " + std::to_string(i));
      const TensorSlot &slot = program.tensors[id];
      infos.push_back(TensorInfo{binding->name()->str(), slot.dtype, slot.shape, binding->upper_bound()});
      ids.push_back(id);
    }
    return Status::success();
  }

  // Decodes a view over `sizes` and checks that every element it reaches lies
  // inside its tensor.
  Status view(const fb::View *in, const std::vector<int64_t> &sizes, const char *name, const Program &program,
              View &out) {
    if (!in) return invalid(std::string("view ") + name + " is missing");
    out.tensor = in->tensor();
    if (out.tensor >= program.tensors.size())
      return invalid(std::string("view ") + name + " names tensor " + std::to_string(out.tensor) + " of " +
                     std::to_string(program.tensors.size()));
    out.offset = in->offset();
    out.strides.clear();
    if (in->strides()) out.strides.assign(in->strides()->begin(), in->strides()->end());
    if (out.strides.size() != sizes.size())
      return invalid(std::string("view ") + name + " has " + std::to_string(out.strides.size()) + " strides for " +
                     std::to_string(sizes.size()) + " axes");
    const TensorSlot &tensor = program.tensors[out.tensor];
    if (out.offset < 0) return invalid(std::string("view ") + name + " has a negative offset");
    __int128 reach = out.offset;
    bool empty = false;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (out.strides[i] < 0) return invalid(std::string("view ") + name + " has a negative stride");
      if (sizes[i] == 0) empty = true;
      reach += static_cast<__int128>(sizes[i] > 0 ? sizes[i] - 1 : 0) * out.strides[i];
    }
    if (!empty && reach >= tensor.numElements)
      return invalid(std::string("view ") + name + " reaches element " + std::to_string(static_cast<int64_t>(
                         std::min<__int128>(reach, std::numeric_limits<int64_t>::max()))) +
                     " of tensor " + std::to_string(out.tensor) + ", which has " +
                     std::to_string(tensor.numElements) + " elements");
    return Status::success();
  }

  // Bounds a step's work by its tensors: an output view may not write more
  // elements than its tensor holds, and a reduced extent may not exceed its
  // input, so a damaged artifact cannot make a step loop for ages.
  static Status checkWork(const Program &program, const View &out, const std::vector<int64_t> &outSizes,
                          const View *in = nullptr, int64_t reduced = 1) {
    int64_t count = 1;
    for (int64_t size : outSizes) count *= size;
    if (count > program.tensors[out.tensor].numElements)
      return invalid("the step writes " + std::to_string(count) + " elements into a tensor of " +
                     std::to_string(program.tensors[out.tensor].numElements));
    if (in && reduced > std::max<int64_t>(program.tensors[in->tensor].numElements, 1))
      return invalid("the step reduces " + std::to_string(reduced) + " elements of a tensor of " +
                     std::to_string(program.tensors[in->tensor].numElements));
    return Status::success();
  }

  static Status checkSizes(const std::vector<int64_t> &sizes) {
    int64_t total = 1;
    for (int64_t size : sizes) {
      if (size < 0) return invalid("negative size in the iteration space");
      if (size > 0 && total > kMaxElements / size) return invalid("iteration space is too large");
      total *= size;
    }
    return Status::success();
  }

  static std::vector<int64_t> vec(const flatbuffers::Vector<int64_t> *values) {
    return values ? std::vector<int64_t>(values->begin(), values->end()) : std::vector<int64_t>{};
  }

  static std::vector<int64_t> concat(std::vector<int64_t> head, std::initializer_list<int64_t> tail) {
    head.insert(head.end(), tail);
    return head;
  }

  Status expectDType(const Program &program, const View &v, std::initializer_list<DType> allowed, const char *name) {
    DType dtype = program.tensors[v.tensor].dtype;
    for (DType a : allowed)
      if (a == dtype) return Status::success();
    return invalid(std::string("view ") + name + " reads a " + dtypeName(dtype) + " tensor, which the kernel does not accept");
  }

  Status decodeStep(const fb::Step &step, Program &program) {
    StepInfo info;
    Status status;
#define EIN_TRY(expr)          \
  if (!(status = (expr)).ok()) \
    return status
    switch (step.kernel_type()) {
      case fb::Kernel::Gemm: {
        const fb::Gemm &in = *step.kernel_as_Gemm();
        Gemm g{};
        g.batch = vec(in.batch());
        g.m = in.m();
        g.n = in.n();
        g.k = in.k();
        EIN_TRY(checkSizes(concat(g.batch, {g.m, g.n, g.k})));
        EIN_TRY(view(in.a(), concat(g.batch, {g.m, g.k}), "a", program, g.a));
        EIN_TRY(view(in.b(), concat(g.batch, {g.k, g.n}), "b", program, g.b));
        EIN_TRY(view(in.c(), concat(g.batch, {g.m, g.n}), "c", program, g.c));
        g.hasBias = in.bias() != nullptr;
        if (g.hasBias) EIN_TRY(view(in.bias(), concat(g.batch, {g.m, g.n}), "bias", program, g.bias));
        for (const View *v : {&g.a, &g.b, &g.c}) EIN_TRY(expectDType(program, *v, {DType::F32}, "of the gemm"));
        if (g.hasBias) EIN_TRY(expectDType(program, g.bias, {DType::F32}, "bias"));
        EIN_TRY(checkWork(program, g.c, concat(g.batch, {g.m, g.n}), &g.a, g.k));
        EIN_TRY(checkWork(program, g.c, concat(g.batch, {g.m, g.n}), &g.b, g.k));
        g.alpha = in.alpha();
        if (static_cast<int>(in.activation()) > static_cast<int>(fb::Activation::Silu)) return invalid("unknown activation");
        g.activation = static_cast<Activation>(in.activation());
        info = {"gemm", "", {{"batch", g.batch}, {"m", {g.m}}, {"n", {g.n}}, {"k", {g.k}}}};
        program.steps.push_back({std::move(g), ""});
        break;
      }
      case fb::Kernel::Elementwise: {
        const fb::Elementwise &in = *step.kernel_as_Elementwise();
        Elementwise e;
        e.shape = vec(in.shape());
        EIN_TRY(checkSizes(e.shape));
        size_t inputs = in.inputs() ? in.inputs()->size() : 0;
        for (size_t i = 0; i < inputs; ++i) {
          View v;
          EIN_TRY(view(in.inputs()->Get(static_cast<uint32_t>(i)), e.shape, "input", program, v));
          EIN_TRY(expectDType(program, v, {DType::F32, DType::I32, DType::I64, DType::Bool}, "input"));
          e.inputs.push_back(std::move(v));
        }
        EIN_TRY(view(in.output(), e.shape, "output", program, e.output));
        EIN_TRY(expectDType(program, e.output, {DType::F32, DType::Bool}, "output"));
        EIN_TRY(checkWork(program, e.output, e.shape));
        if (!in.program() || in.program()->size() == 0) return invalid("element-wise program is empty");
        if (inputs + in.program()->size() > 65535) return invalid("element-wise program is too long");
        for (uint32_t i = 0; i < in.program()->size(); ++i) {
          const fb::Instruction *instruction = in.program()->Get(i);
          auto opcode = static_cast<uint8_t>(instruction->opcode());
          if (opcode > static_cast<uint8_t>(Opcode::Select)) return invalid("unknown element-wise opcode");
          Instruction decoded{static_cast<Opcode>(opcode), instruction->a(), instruction->b(), instruction->c(),
                              instruction->imm()};
          size_t defined = inputs + i;  // registers readable by instruction i
          int reads = decoded.opcode == Opcode::Const ? 0
                      : decoded.opcode == Opcode::Select ? 3
                      : decoded.opcode >= Opcode::Add ? 2 : 1;
          if ((reads > 0 && decoded.a >= defined) || (reads > 1 && decoded.b >= defined) ||
              (reads > 2 && decoded.c >= defined))
            return invalid("element-wise instruction " + std::to_string(i) + " reads an undefined register");
          e.program.push_back(decoded);
        }
        info = {"elementwise", "", {{"shape", e.shape}, {"program", {static_cast<int64_t>(e.program.size())}}}};
        program.steps.push_back({std::move(e), ""});
        break;
      }
      case fb::Kernel::Softmax: {
        const fb::Softmax &in = *step.kernel_as_Softmax();
        Softmax s;
        s.shape = vec(in.shape());
        if (s.shape.empty()) return invalid("softmax needs at least one axis");
        EIN_TRY(checkSizes(s.shape));
        EIN_TRY(view(in.x(), s.shape, "x", program, s.x));
        EIN_TRY(view(in.y(), s.shape, "y", program, s.y));
        EIN_TRY(expectDType(program, s.x, {DType::F32}, "x"));
        EIN_TRY(expectDType(program, s.y, {DType::F32}, "y"));
        EIN_TRY(checkWork(program, s.y, s.shape));
        info = {"softmax", "", {{"shape", s.shape}}};
        program.steps.push_back({std::move(s), ""});
        break;
      }
      case fb::Kernel::Reduce: {
        const fb::Reduce &in = *step.kernel_as_Reduce();
        Reduce r;
        r.shape = vec(in.shape());
        r.reducedRank = in.reduced_rank();
        if (r.reducedRank == 0 || r.reducedRank > r.shape.size()) return invalid("reduced_rank is out of range");
        if (static_cast<int>(in.kind()) > static_cast<int>(fb::ReduceKind::Prod)) return invalid("unknown reduction");
        r.kind = static_cast<ReduceKind>(in.kind());
        EIN_TRY(checkSizes(r.shape));
        EIN_TRY(view(in.x(), r.shape, "x", program, r.x));
        std::vector<int64_t> kept(r.shape.begin(), r.shape.end() - r.reducedRank);
        EIN_TRY(view(in.y(), kept, "y", program, r.y));
        EIN_TRY(expectDType(program, r.x, {DType::F32}, "x"));
        EIN_TRY(expectDType(program, r.y, {DType::F32}, "y"));
        int64_t reducedCount = 1;
        for (size_t i = kept.size(); i < r.shape.size(); ++i) reducedCount *= r.shape[i];
        EIN_TRY(checkWork(program, r.y, kept, &r.x, reducedCount));
        info = {"reduce", "", {{"shape", r.shape}, {"reduced_rank", {r.reducedRank}}}};
        program.steps.push_back({std::move(r), ""});
        break;
      }
      case fb::Kernel::Gather: {
        const fb::Gather &in = *step.kernel_as_Gather();
        Gather g;
        g.idsShape = vec(in.ids_shape());
        g.rows = in.rows();
        g.width = in.width();
        if (g.rows < 0 || g.width < 0) return invalid("negative table size");
        EIN_TRY(checkSizes(concat(g.idsShape, {g.rows, g.width})));
        EIN_TRY(view(in.ids(), g.idsShape, "ids", program, g.ids));
        EIN_TRY(view(in.table(), {g.rows, g.width}, "table", program, g.table));
        EIN_TRY(view(in.y(), concat(g.idsShape, {g.width}), "y", program, g.y));
        EIN_TRY(expectDType(program, g.ids, {DType::I32, DType::I64}, "ids"));
        EIN_TRY(expectDType(program, g.table, {DType::F32}, "table"));
        EIN_TRY(expectDType(program, g.y, {DType::F32}, "y"));
        EIN_TRY(checkWork(program, g.y, concat(g.idsShape, {g.width})));
        info = {"gather", "", {{"ids", g.idsShape}, {"rows", {g.rows}}, {"width", {g.width}}}};
        program.steps.push_back({std::move(g), ""});
        break;
      }
      case fb::Kernel::Copy: {
        const fb::Copy &in = *step.kernel_as_Copy();
        Copy c;
        c.shape = vec(in.shape());
        EIN_TRY(checkSizes(c.shape));
        EIN_TRY(view(in.x(), c.shape, "x", program, c.x));
        EIN_TRY(view(in.y(), c.shape, "y", program, c.y));
        if (program.tensors[c.x.tensor].dtype != program.tensors[c.y.tensor].dtype)
          return invalid("copy between different dtypes");
        EIN_TRY(checkWork(program, c.y, c.shape));
        info = {"copy", "", {{"shape", c.shape}}};
        program.steps.push_back({std::move(c), ""});
        break;
      }
      default:
        return invalid("unsupported kernel type " + std::to_string(static_cast<int>(step.kernel_type())) +
                       " (the artifact is newer than this runtime?)");
    }
#undef EIN_TRY
    program.stepInfos.push_back(std::move(info));
    return Status::success();
  }

  const fb::Model &model;
  uint64_t weightsAvailable;
};

}  // namespace

StatusOr<std::unique_ptr<Program>> decodeArtifact(std::shared_ptr<const void> storage, const uint8_t *data,
                                                  size_t size) {
  if (size < 8) return Status(StatusCode::InvalidArtifact, "file of " + std::to_string(size) + " bytes is too short to be an ein artifact");
  uint32_t bufferSize;
  std::memcpy(&bufferSize, data, sizeof bufferSize);
  if (static_cast<uint64_t>(bufferSize) + 4 > size)
    return Status(StatusCode::InvalidArtifact, "truncated artifact: header of " + std::to_string(bufferSize) +
                                                   " bytes but the file has " + std::to_string(size));
  if (!flatbuffers::BufferHasIdentifier(data + 4, fb::ModelIdentifier()))
    return Status(StatusCode::InvalidArtifact, "not an ein artifact (file identifier is not EINB)");
  flatbuffers::Verifier verifier(data, static_cast<size_t>(bufferSize) + 4);
  if (!fb::VerifySizePrefixedModelBuffer(verifier))
    return Status(StatusCode::InvalidArtifact, "the artifact's header is malformed (FlatBuffers verification failed)");
  const fb::Model &model = *fb::GetSizePrefixedModel(data);
  if (model.format_version() != static_cast<uint32_t>(fb::FormatVersion::Current))
    return Status(StatusCode::InvalidArtifact, "artifact format version " + std::to_string(model.format_version()) +
                                                   " is not supported (this runtime reads version " +
                                                   std::to_string(static_cast<uint32_t>(fb::FormatVersion::Current)) + ")");
  uint64_t offset = model.weights_offset(), bytes = model.weights_bytes();
  if (offset % kWeightAlignment != 0) return Status(StatusCode::InvalidArtifact, "weight segment offset is not 64-byte aligned");
  if (offset < static_cast<uint64_t>(bufferSize) + 4 || offset > size || bytes > size - offset)
    return Status(StatusCode::InvalidArtifact, "weight segment [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                                   ") lies outside the file of " + std::to_string(size) + " bytes");
  auto program = std::make_unique<Program>();
  program->storage = std::move(storage);
  program->weights = reinterpret_cast<const std::byte *>(data + offset);
  Decoder decoder(model, bytes);
  Status status = decoder.decode(*program);
  if (!status.ok()) return status;
  return program;
}

}  // namespace detail

StatusOr<std::shared_ptr<const Model>> Model::wrap(StatusOr<std::unique_ptr<detail::Program>> program,
                                                   const std::string &name) {
  if (!program.ok()) return Status(program.status().code(), name + ": " + program.status().message());
  return std::shared_ptr<const Model>(new Model(std::move(program.value())));
}

StatusOr<std::shared_ptr<const Model>> Model::load(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(StatusCode::IoError, path + ": cannot open: " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status(StatusCode::IoError, path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return Status(StatusCode::InvalidArtifact, path + ": the file is empty");
  }
  void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) return Status(StatusCode::IoError, path + ": cannot map: " + std::strerror(errno));
  std::shared_ptr<const void> storage(mapped, [size](const void *p) { ::munmap(const_cast<void *>(p), size); });
  return wrap(detail::decodeArtifact(storage, static_cast<const uint8_t *>(mapped), size), path);
}

StatusOr<std::shared_ptr<const Model>> Model::fromMemory(std::vector<uint8_t> bytes, std::string name) {
  // Copy into 64-byte-aligned storage so weights keep their alignment.
  size_t size = bytes.size();
  std::shared_ptr<uint8_t> aligned(static_cast<uint8_t *>(::operator new[](size + 1, std::align_val_t{64})),
                                   [](uint8_t *p) { ::operator delete[](p, std::align_val_t{64}); });
  if (size) std::memcpy(aligned.get(), bytes.data(), size);
  const uint8_t *data = aligned.get();
  return wrap(detail::decodeArtifact(std::shared_ptr<const void>(aligned, aligned.get()), data, size), name);
}

}  // namespace ein
